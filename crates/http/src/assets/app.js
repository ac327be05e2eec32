// The pod dashboard: the sessions table and a session's page, live over
// the API's Server-Sent Events. No framework, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
// Text from models, tools and files: control characters and bidirectional
// overrides are shown as escapes (\u{1b}), so none reorders or hides what
// is shown. Newlines and tabs stay.
const ACTS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const shown = (text) => String(text).replace(ACTS, (c) => "\\u{" + c.charCodeAt(0).toString(16) + "}");
const el = (tag, cls, text) => {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = shown(text);
  return node;
};

// The token comes in the URL's fragment (never sent to the server) once,
// then lives in this tab's session storage.
function initToken() {
  const match = location.hash.match(/token=([^&]+)/);
  if (match) {
    sessionStorage.setItem("pod-token", decodeURIComponent(match[1]));
    history.replaceState(null, "", location.pathname + "#/");
  }
  return sessionStorage.getItem("pod-token");
}
let token = initToken();

async function api(path, options = {}) {
  const response = await fetch("/api" + path, {
    ...options,
    headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
  });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) showLogin();
  if (!response.ok) throw new Error(body.error || response.statusText);
  return body;
}

function events(path) {
  const sep = path.includes("?") ? "&" : "?";
  return new EventSource("/api" + path + sep + "access_token=" + encodeURIComponent(token));
}

function show(view) {
  for (const id of ["login", "list-view", "session-view"]) $(id).hidden = id !== view;
}

function showLogin() {
  closeStreams();
  show("login");
}

$("login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  token = $("token-input").value.trim();
  sessionStorage.setItem("pod-token", token);
  route();
});

// --- streams ---------------------------------------------------------------
let streams = [];
function closeStreams() {
  for (const s of streams) s.close();
  streams = [];
}

// --- the sessions table ----------------------------------------------------
const rows = new Map(); // id -> session row data
let approvalsAll = [];

function progress(todos) {
  const bar = el("span", "bar");
  const fill = el("i");
  fill.style.width = todos.total ? (100 * todos.completed / todos.total) + "%" : "0";
  bar.append(fill);
  const wrap = el("span");
  wrap.append(bar, " " + (todos.total ? todos.completed + "/" + todos.total : "–"));
  return wrap;
}

function when(text) {
  return new Date(text).toLocaleString();
}

function renderRow(s) {
  const tr = el("tr", s.parent ? "child" : "");
  tr.dataset.id = s.id;
  const link = el("a", "", (s.parent ? "└ " : "") + s.id.slice(0, 8));
  link.href = "#/s/" + s.id;
  const first = el("td");
  first.append(link);
  if (s.parent && s.parent.description) first.append(el("span", "dim", " " + s.parent.description));
  const status = el("td", "status " + s.status, s.status);
  status.dataset.status = s.status;
  const plan = el("td");
  plan.append(progress(s.todos));
  tr.append(first, status, plan, el("td", "", s.model), el("td", "", when(s.updated_at)),
    el("td", "", s.holder || ""), el("td", "ws", s.workspace));
  return tr;
}

// Parents first (most recent first), each followed by its subagents.
function ordered() {
  const all = [...rows.values()];
  const byParent = new Map();
  for (const s of all) {
    const p = s.parent && rows.has(s.parent.session_id) ? s.parent.session_id : null;
    if (!byParent.has(p)) byParent.set(p, []);
    byParent.get(p).push(s);
  }
  for (const list of byParent.values()) list.sort((a, b) => b.updated_at.localeCompare(a.updated_at));
  const out = [];
  const walk = (id) => { for (const s of byParent.get(id) || []) { out.push(s); walk(s.id); } };
  walk(null);
  return out;
}

let redraw = null;
function scheduleTable() {
  if (redraw) return;
  redraw = requestAnimationFrame(() => {
    redraw = null;
    const body = $("sessions").tBodies[0];
    const fragment = document.createDocumentFragment();
    for (const s of ordered()) fragment.append(renderRow(s));
    body.replaceChildren(fragment);
    $("count").textContent = "(" + rows.size + ")";
  });
}

function renderBanner() {
  const banner = $("approvals-banner");
  banner.hidden = approvalsAll.length === 0;
  if (approvalsAll.length) {
    banner.textContent = approvalsAll.length + " approval(s) waiting";
    banner.href = "#/s/" + approvalsAll[0].session_id;
  }
}

function openList() {
  show("list-view");
  const source = events("/events");
  streams.push(source);
  source.addEventListener("session", (e) => {
    const s = JSON.parse(e.data);
    rows.set(s.id, s);
    scheduleTable();
  });
  source.addEventListener("removed", (e) => {
    rows.delete(JSON.parse(e.data).id);
    scheduleTable();
  });
  source.addEventListener("approvals", (e) => {
    approvalsAll = JSON.parse(e.data).approvals;
    renderBanner();
  });
  source.onerror = () => { if (source.readyState === EventSource.CLOSED) api("/sessions").catch(() => {}); };
  api("/sessions").then((body) => { $("server").textContent = body.server; }).catch(() => {});
}

// --- a session's page ------------------------------------------------------
const PAGE = 400;
let current = null; // { id, first }

function renderTodos(todos) {
  const list = $("s-todos");
  list.replaceChildren(...todos.map((t) => {
    const li = el("li", t.status, t.content);
    li.dataset.id = t.id;
    li.dataset.status = t.status;
    return li;
  }));
  const done = todos.filter((t) => t.status === "completed").length;
  $("s-progress").textContent = todos.length ? "(" + done + " of " + todos.length + " completed)" : "(none)";
}

function renderApprovals(approvals) {
  const box = $("s-approvals");
  box.replaceChildren(...approvals.map((a) => {
    const card = el("div", "approval");
    card.dataset.approval = a.id;
    const who = a.request.subagent ? "[subagent " + a.request.subagent.description + "] " : "";
    card.append(el("strong", "", who + a.request.summary), el("br"));
    card.append(el("code", "", a.request.arguments), el("br"));
    // A parked session waits in the store, not in a process: say since
    // when, and when the question is refused by itself.
    const waiting = ["waiting since " + when(a.asked_at)];
    if (a.expires_at) waiting.push("refused by itself " + when(a.expires_at));
    card.append(el("span", "dim", waiting.join(" · ")), el("br"));
    const answer = (decision) => async () => {
      try {
        // The session and call travel with the answer: it lands on this
        // question only, never on another asked since.
        const body = { decision, session_id: a.session_id, call_id: a.request.call_id };
        await api("/approvals/" + a.id, { method: "POST", body: JSON.stringify(body) });
        card.remove();
      } catch (err) { $("s-message").textContent = shown(err.message); }
    };
    const allow = el("button", "allow", "Allow");
    allow.onclick = answer("allow_once");
    const always = el("button", "", "Always allow " + a.request.tool);
    always.onclick = answer("allow_always");
    const deny = el("button", "deny danger", "Deny");
    deny.onclick = answer("reject_once");
    const never = el("button", "danger", "Always deny " + a.request.tool);
    never.onclick = answer("reject_always");
    card.append(allow, " ", always, " ", deny, " ", never);
    return card;
  }));
}

function itemNodes(record) {
  if (record.compaction) {
    const c = record.compaction;
    return [el("div", "item compaction", "⇣ compacted: ~" + c.tokens_before + " → ~" + c.tokens_after + " tokens")];
  }
  if (record.stopped) return [el("div", "item system", "stopped by its budget")];
  const item = record.item;
  if (!item) return [];
  switch (item.type) {
    case "user": return [el("div", "item user", item.text)];
    case "system": return [el("div", "item system", item.text)];
    case "assistant": {
      const nodes = [];
      if (item.text) nodes.push(el("div", "item assistant", item.text));
      for (const call of item.tool_calls || []) {
        const node = el("div", "item call", "→ " + call.name + " " + call.arguments);
        node.dataset.call = call.id;
        nodes.push(node);
      }
      return nodes;
    }
    case "tool_result": return [el("div", "item result" + (item.is_error ? " error" : ""), item.content)];
    default: return [el("div", "item system", item.type)];
  }
}

function append(seq, record) {
  const box = $("transcript");
  for (const node of itemNodes(record)) {
    node.dataset.seq = seq;
    box.append(node);
  }
}

// The model's text as it streams, shown until its record arrives.
function streamed(delta) {
  const box = $("transcript");
  let node = box.lastElementChild;
  if (!node || !node.classList.contains("streaming") || node.dataset.kind !== delta.kind) {
    node = el("div", "item streaming " + (delta.kind === "reasoning" ? "reasoning" : "assistant"), "");
    node.dataset.kind = delta.kind;
    box.append(node);
  }
  node.textContent += shown(delta.text);
}

function clearStreamed() {
  for (const node of $("transcript").querySelectorAll(".streaming")) node.remove();
}

async function loadEarlier() {
  const start = Math.max(0, current.first - PAGE);
  const body = await api("/sessions/" + current.id + "/history?after=" + start + "&limit=" + (current.first - start));
  const box = $("transcript");
  const fragment = document.createDocumentFragment();
  for (const r of body.records) for (const node of itemNodes(r.record)) { node.dataset.seq = r.seq; fragment.append(node); }
  box.prepend(fragment);
  current.first = start;
  $("earlier").hidden = start === 0;
}
$("earlier").onclick = () => loadEarlier().catch((err) => { $("s-message").textContent = shown(err.message); });

async function openSession(id) {
  show("session-view");
  $("transcript").replaceChildren();
  $("s-message").textContent = "";
  const body = await api("/sessions/" + id);
  const s = body.session;
  current = { id: s.id, first: Math.max(0, body.records - PAGE) };
  $("s-title").textContent = "Session " + s.id;
  const meta = () => [s.status, s.model, s.workspace, s.holder ? "held by " + s.holder : ""].filter(Boolean).join(" · ");
  $("s-meta").textContent = shown(meta());
  renderTodos(body.todos);
  renderApprovals(body.approvals);
  $("s-children-title").hidden = body.children.length === 0;
  $("s-children").replaceChildren(...body.children.map((c) => {
    const li = el("li");
    const a = el("a", "", c.id.slice(0, 8));
    a.href = "#/s/" + c.id;
    li.append(a, shown(" " + (c.parent ? c.parent.description : "") + " — " + c.status));
    return li;
  }));
  $("earlier").hidden = current.first === 0;
  const source = events("/sessions/" + s.id + "/events?after=" + current.first);
  streams.push(source);
  source.addEventListener("record", (e) => { const r = JSON.parse(e.data); clearStreamed(); append(r.seq, r.record); });
  source.addEventListener("delta", (e) => streamed(JSON.parse(e.data)));
  source.addEventListener("todos", (e) => renderTodos(JSON.parse(e.data).todos));
  source.addEventListener("approvals", (e) => renderApprovals(JSON.parse(e.data).approvals));
  source.addEventListener("status", (e) => {
    const st = JSON.parse(e.data);
    s.holder = st.holder;
    if (st.holder) s.status = "running";
    $("s-meta").textContent = shown(meta());
    // Stopped or queued: the server knows how it ended (done, idle, ...).
    if (!st.live) clearStreamed();
    if (!st.holder) api("/sessions/" + s.id).then((b) => { Object.assign(s, b.session); $("s-meta").textContent = shown(meta()); }).catch(() => {});
  });
}

// Sends a steering request; true when the server took it.
async function post(path, body, done) {
  try {
    await api("/sessions/" + current.id + path, { method: "POST", body: JSON.stringify(body) });
    $("s-message").textContent = done;
    return true;
  } catch (err) {
    $("s-message").textContent = shown(err.message);
    return false;
  }
}
// The box keeps its text when the server refused it, to send again.
function steer(form, box, path, done) {
  $(form).addEventListener("submit", async (e) => {
    e.preventDefault();
    const text = $(box).value.trim();
    if (text && await post(path, { text }, done)) $(box).value = "";
  });
}
steer("notify-form", "notify-text", "/notify", "notification sent");
steer("prompt-form", "prompt-text", "/prompt", "prompt sent");
$("cancel").onclick = () => post("/cancel", {}, "cancel sent");

// --- routing ---------------------------------------------------------------
function route() {
  closeStreams();
  if (!token) return showLogin();
  const match = location.hash.match(/^#\/s\/([0-9a-f-]+)/);
  if (match) openSession(match[1]).catch((err) => { $("s-message").textContent = shown(err.message); });
  else openList();
}
window.addEventListener("hashchange", route);
route();
