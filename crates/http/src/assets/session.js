// A session's page: its plan, its questions, the steering boxes and its
// transcript, live over /api/sessions/{id}/events.
//
// The transcript reads as a conversation: a tool call is one line (the
// tool, what it works on, how it went) that opens on its arguments
// (pretty-printed JSON) and result; what the runtime told the model
// (`<system-reminder>` text) is a muted "reminder" entry, never raw tags.
"use strict";

// Records the page holds at first; "Load earlier" reads as many more.
const PAGE = 400;
// A one-line summary is cut here.
const LINE = 100;
let current = null; // { id, first, s, calls: Map(call id -> node), answered: Set(question id) }

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
    card.append(el("strong", "", who + a.request.summary));
    card.append(el("pre", "json", pretty(a.request.arguments)));
    // A parked session waits in the store, not in a process: say since
    // when, and when the question is refused by itself.
    const waiting = ["waiting since " + when(a.asked_at)];
    if (a.expires_at) waiting.push("refused by itself " + when(a.expires_at));
    card.append(el("div", "dim", waiting.join(" · ")));
    const answer = (decision) => async () => {
      try {
        // The session and call travel with the answer: it lands on this
        // question only, never on another asked since.
        const body = { decision, session_id: a.session_id, call_id: a.request.call_id };
        await api("/approvals/" + a.id, { method: "POST", body: JSON.stringify(body) });
        card.remove();
      } catch (err) { $("s-message").textContent = shown(err.message); }
    };
    const buttons = el("div", "buttons");
    const button = (cls, text, decision) => {
      const b = el("button", cls, text);
      b.onclick = answer(decision);
      buttons.append(b);
    };
    button("allow", "Allow", "allow_once");
    button("", "Always allow " + a.request.tool, "allow_always");
    button("deny danger", "Deny", "reject_once");
    button("danger", "Always deny " + a.request.tool, "reject_always");
    card.append(buttons);
    return card;
  }));
}

// --- the transcript ----------------------------------------------------------
const REMINDER = /<system-reminder>([\s\S]*?)(?:<\/system-reminder>|$)/g;

// Text split into what was said and the reminders in it.
function parts(text) {
  const out = [];
  let last = 0;
  for (const m of String(text).matchAll(REMINDER)) {
    const said = text.slice(last, m.index).trim();
    if (said) out.push({ reminder: false, text: said });
    out.push({ reminder: true, text: m[1].trim() });
    last = m.index + m[0].length;
  }
  if (last === 0) return [{ reminder: false, text }];
  const rest = text.slice(last).trim();
  if (rest) out.push({ reminder: false, text: rest });
  return out;
}

// JSON pretty-printed; anything else as it is.
function pretty(text) {
  const trimmed = String(text).trim();
  if (!/^[[{]/.test(trimmed)) return String(text);
  try {
    return JSON.stringify(JSON.parse(trimmed), null, 2);
  } catch {
    return String(text);
  }
}

function oneLine(text, max = LINE) {
  const line = String(text).replace(/\s+/g, " ").trim();
  return line.length > max ? line.slice(0, max - 1) + "…" : line;
}

// What a call works on, in a few words: its path, command, pattern…
const SUBJECTS = ["path", "file_path", "command", "pattern", "query", "url", "description", "task", "text"];
function subject(call) {
  let args;
  try {
    args = JSON.parse(call.arguments);
  } catch {
    return oneLine(call.arguments);
  }
  if (!args || typeof args !== "object") return oneLine(JSON.stringify(args));
  if (Array.isArray(args.todos)) {
    const done = args.todos.filter((t) => t && t.status === "completed").length;
    return done + "/" + args.todos.length + " done";
  }
  for (const key of SUBJECTS) if (typeof args[key] === "string") return oneLine(args[key]);
  const first = Object.values(args).find((v) => typeof v === "string");
  return oneLine(first !== undefined ? first : JSON.stringify(args));
}

// A collapsible entry: `line` shown, `body` on a click.
function folded(cls, line, body) {
  const node = el("details", "item " + cls);
  const summary = el("summary");
  summary.append(...line);
  node.append(summary, ...body);
  return node;
}

function reminderNode(text, label = "reminder") {
  return folded("reminder", [el("span", "tag", label), el("span", "line", oneLine(text))], [el("div", "full", text)]);
}

// Said text, with any reminder in it shown apart.
function textNodes(cls, text) {
  return parts(text).map((p) => (p.reminder ? reminderNode(p.text) : el("div", "item " + cls, p.text)));
}

function callNode(call) {
  const outcome = el("span", "outcome", "");
  const node = folded("call", [el("span", "tool", call.name), el("span", "line", subject(call)), outcome],
    [el("div", "label", "arguments"), el("pre", "json", pretty(call.arguments))]);
  node.dataset.call = call.id;
  current.calls.set(call.id, node);
  return node;
}

// A question or answer about a call goes in the call's entry, before its
// result (which arrives after it); without the entry, on a line of its own.
function intoCall(callId, node) {
  const call = callId && current.calls.get(callId);
  if (!call) return [node];
  call.append(node);
  return [];
}

// Fills a call's entry with its result.
function resultInto(node, item) {
  node.classList.add(item.is_error ? "error" : "ok");
  node.querySelector(".outcome").textContent = shown((item.is_error ? "✗ " : "✓ ") + oneLine(item.content, 60));
  node.append(el("div", "label", item.is_error ? "error" : "result"), el("pre", "result", pretty(item.content)));
}

function systemNodes(item) {
  switch (item.kind) {
    case "reminder": return parts(item.text).map((p) => reminderNode(p.text));
    case "carry_over": return parts(item.text).map((p) => reminderNode(p.text, "carried over"));
    case "verification": return parts(item.text).map((p) => reminderNode(p.text, "checks failed"));
    case "loop": return parts(item.text).map((p) => reminderNode(p.text, "loop"));
    case "notification": return [el("div", "item note", item.text)];
    case "summary": return [folded("summary", [el("span", "tag", "summary"), el("span", "line", oneLine(item.text))],
      [el("div", "full", item.text)])];
    default: return textNodes("system", item.text);
  }
}

// A verification round: the operator's checks (and the grader) run when
// the model ended its turn, folded to one line.
function verifyNode(v) {
  const head = (v.passed ? "✓ verified" : "✗ not verified") + " (round " + v.round + ")";
  const rows = (v.checks || []).map((c) => {
    const how = c.error ? "could not run: " + c.error
      : c.timed_out ? "timed out"
      : c.exit_code === 0 ? "exit 0"
      : c.exit_code != null ? "exit " + c.exit_code
      : "killed by signal " + c.signal;
    const row = el("div", "check " + (c.exit_code === 0 ? "ok" : "bad"), "$ " + c.command + " → " + how);
    if (c.exit_code !== 0 && c.output_tail) row.append(el("pre", "result", c.output_tail));
    return row;
  });
  if (v.grader) {
    const g = v.grader;
    const said = g.error ? "no verdict: " + g.error : g.passed ? "pass" : "fail";
    const why = (g.reasons || []).join("; ");
    rows.push(el("div", "check " + (g.passed ? "ok" : "bad"), "grader " + g.model + ": " + said + (why ? " (" + why + ")" : "")));
  }
  const node = folded("verify " + (v.passed ? "ok" : "bad"), [el("span", "line", head)], rows);
  return node;
}

function itemNodes(record) {
  if (record.compaction) {
    const c = record.compaction;
    return [el("div", "item compaction", "⇣ compacted: ~" + c.tokens_before + " → ~" + c.tokens_after + " tokens")];
  }
  if (record.stopped) return [el("div", "item system", "stopped by " + (limitText(record.stopped.limit) || "its budget"))];
  if (record.limits) return [el("div", "item system", "limits: " + limitsText(record.limits.limits) + (record.limits.via ? " (" + record.limits.via + ")" : ""))];
  if (record.question) {
    const q = record.question;
    return intoCall(q.request && q.request.call_id, el("div", "item asked", "asked: " + (q.request ? q.request.summary : "")));
  }
  if (record.answer) {
    const a = record.answer;
    // An answer given while the session was parked is recorded again
    // when the call runs: shown once.
    if (current.answered.has(a.question)) return [];
    current.answered.add(a.question);
    const by = [a.by, a.via && "via " + a.via].filter(Boolean).join(" ");
    return intoCall(a.call_id, el("div", "item asked", "answered: " + words(a.decision) + (by ? " (" + by + ")" : "")));
  }
  // The workspace's snapshots around a call: `pod diff` shows them.
  if (record.checkpoint || record.trace) return [];
  if (record.verify) return [verifyNode(record.verify)];
  if (record.hook) {
    const h = record.hook;
    if (h.decision === "none") return [];
    return [el("div", "item system", "hook: " + words(h.decision) + (h.reason ? " (" + h.reason + ")" : ""))];
  }
  const item = record.item;
  if (!item) {
    // A record kind this page does not know: its name, and why if it says.
    const [kind, value] = Object.entries(record)[0] || ["record", null];
    const why = value && (value.reason || value.message || value.error);
    return [el("div", "item system", words(kind) + (typeof why === "string" ? ": " + why : ""))];
  }
  switch (item.type) {
    case "user": return textNodes("user", item.text);
    case "system": return systemNodes(item);
    case "assistant": {
      const nodes = [];
      if (item.reasoning && item.reasoning.text) {
        nodes.push(folded("reasoning", [el("span", "tag", "reasoning"), el("span", "line", oneLine(item.reasoning.text))],
          [el("div", "full", item.reasoning.text)]));
      }
      if (item.text) nodes.push(...textNodes("assistant", item.text));
      for (const call of item.tool_calls || []) nodes.push(callNode(call));
      return nodes;
    }
    case "tool_result": {
      const call = current.calls.get(item.call_id);
      if (call) {
        resultInto(call, item);
        return [];
      }
      // Its call is before the records loaded.
      const node = folded("call", [el("span", "tool", "result"), el("span", "line", ""), el("span", "outcome", "")], []);
      resultInto(node, item);
      return [node];
    }
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
  const fragment = document.createDocumentFragment();
  for (const r of body.records) for (const node of itemNodes(r.record)) { node.dataset.seq = r.seq; fragment.append(node); }
  $("transcript").prepend(fragment);
  current.first = start;
  $("earlier").hidden = start === 0;
}
$("earlier").onclick = () => loadEarlier().catch((err) => { $("s-message").textContent = shown(err.message); });

// --- the page ----------------------------------------------------------------
function renderMeta() {
  const s = current.s;
  const used = usageTokens(s.usage);
  const meta = [words(s.status), s.model, used ? tokens(used) + " tokens" : "",
    typeof s.cost === "number" ? "cost " + money(s.cost) : "", s.workspace,
    s.holder ? "held by " + s.holder : "", s.id];
  $("s-meta").textContent = shown(meta.filter(Boolean).join(" · "));
  $("s-meta").dataset.status = s.status;
  const quiet = s.status === "running" && serverNow() - millis(s.updated_at) > STALLED_AFTER;
  const detail = quiet ? "stalled: no record for " + ago(millis(s.updated_at), serverNow()).replace(" ago", "") : statusDetail(s);
  $("s-detail").hidden = !detail || s.status === "awaiting_approval";
  $("s-detail").textContent = shown(detail);
  $("s-detail").className = "detail status " + s.status;
  // Only a turn that runs here can be cancelled.
  $("cancel").hidden = !(s.status === "running" || s.status === "awaiting_approval");
  // A session its money limit stopped goes on once the limit is raised.
  $("limit-form").hidden = !(s.status === "stopped" && s.stopped_by && "session_cost" in s.stopped_by);
}

async function openSession(id) {
  show("session-view");
  $("transcript").replaceChildren();
  $("s-message").textContent = "";
  const body = await api("/sessions/" + id);
  // Left for another page meanwhile: nothing to draw or follow.
  if (!location.hash.startsWith("#/s/" + id)) return;
  const s = body.session;
  current = { id: s.id, first: Math.max(0, body.records - PAGE), s, calls: new Map(), answered: new Set() };
  $("s-title").textContent = shown(s.title || "Session " + s.id);
  renderMeta();
  renderTodos(body.todos);
  renderApprovals(body.approvals);
  $("s-children-title").hidden = body.children.length === 0;
  $("s-children").replaceChildren(...body.children.map((c) => {
    const li = el("li");
    const a = el("a", "", c.title || c.id.slice(0, 8));
    a.href = "#/s/" + c.id;
    li.append(a, el("span", "dim", " " + (c.parent ? c.parent.description : "") + " — " + words(c.status)));
    return li;
  }));
  $("earlier").hidden = current.first === 0;
  const mine = current;
  loadChanges(mine);
  openStream("session", "/sessions/" + s.id + "/events?after=" + current.first, {
    record: (r) => { clearStreamed(); append(r.seq, r.record); },
    delta: (d) => streamed(d),
    todos: (t) => renderTodos(t.todos),
    approvals: (a) => renderApprovals(a.approvals),
    status: (st) => {
      s.holder = st.holder;
      if (st.holder) s.status = "running";
      renderMeta();
      // Stopped or queued: the server knows how it ended (done, idle, ...).
      if (!st.live) clearStreamed();
      if (!st.holder) {
        api("/sessions/" + s.id).then((b) => {
          if (current !== mine) return;
          Object.assign(s, b.session);
          renderMeta();
        }).catch(() => {});
        loadChanges(mine);
      }
    },
  });
}

// What the session changed in its workspace (from its checkpoints).
function loadChanges(mine) {
  api("/sessions/" + mine.id + "/diff").then((d) => {
    if (current !== mine) return;
    const names = { A: "added", D: "deleted", M: "modified", T: "type changed" };
    const items = d.files.map((f) => {
      const li = el("li");
      li.append(el("span", "change " + f.status, f.status), el("span", "", " " + f.path));
      li.title = names[f.status] || f.status;
      return li;
    });
    for (const path of d.not_captured || []) items.push(el("li", "dim", path + " (too large to capture)"));
    $("s-changes-title").hidden = items.length === 0;
    $("s-changes").replaceChildren(...items);
    $("s-patch").hidden = !d.patch;
    $("s-patch-text").textContent = d.patch || "";
  }).catch(() => {
    // Checkpoints on another machine: the page shows none.
    $("s-changes-title").hidden = true;
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
// Raises the session's money limit (PATCH, within the server's ceiling).
$("limit-form").addEventListener("submit", async (e) => {
  e.preventDefault();
  const amount = Number($("limit-cost").value);
  if (!(amount > 0)) return;
  try {
    const raised = await api("/sessions/" + current.id, { method: "PATCH", body: JSON.stringify({ max_cost: amount }) });
    $("s-message").textContent = "limit raised to " + money(amount) + (raised.queued ? "; queued for the fleet" : raised.continued ? "; it goes on" : "");
  } catch (err) {
    $("s-message").textContent = shown(err.message);
  }
});
