// The sessions table: one row per session, kept and updated in place from
// /api/events. What needs a person comes first (awaiting approval, failed,
// stalled), then what runs, then the rest, each group most recent first;
// a subagent follows its parent, which rises with it when it needs help.
//
// Events only record what changed; once per animation frame the changed
// rows have their changed cells rewritten, and only rows whose place
// changed move. A thousand sessions' first snapshot is one sort.
"use strict";

// The states a session can be in, in the order the counts show them.
const STATES = ["awaiting_approval", "failed", "damaged", "stalled", "running", "answered", "queued",
  "waiting", "interrupted", "stopped", "cancelled", "idle", "done"];
// Lower comes first; everything not named here is "the rest".
const ATTENTION = { awaiting_approval: 0, failed: 1, damaged: 1, stalled: 2, running: 3 };
const REST = 4;
// Past this many rows to move in one frame, one sort of all is cheaper.
const RESORT_ALL = 200;
// Relative times ("3 min ago") and stalls are looked at this often.
const TICK = 20 * 1000;

const COLUMNS = ["sel", "task", "state", "plan", "tokens", "cost", "model", "when", "holder", "ws"];
const CELL_CLASS = {
  sel: "sel", task: "task", state: "state", plan: "plan", tokens: "num wide tokens", cost: "num wide cost",
  model: "wide model", when: "when", holder: "wider holder", ws: "wider ws",
};

const table = {
  entries: new Map(), // id -> entry: { id, s, tr, cells, keys, group, t, eff, path, parent }
  order: [], // entries as shown, top to bottom
  pending: new Map(), // id -> a row, or null when removed: applied next frame
  kids: new Map(), // parent id -> Set of child ids (whether or not the parent is known)
  counts: new Map(), // group -> sessions
  frame: 0,
  sorted: false, // the first snapshot has been sorted
  filter: null, // a group, or null: all
  query: "",
  selected: new Set(),
  approvals: [],
  // Ids seen since the stream (re)opened, until its `ready` event, which
  // follows the whole snapshot: what is not in it is gone.
  seen: null,
};

const groupOf = (s, t, now) => (s.status === "running" && now - t > STALLED_AFTER ? "stalled" : s.status);
const rankOf = (group) => (group in ATTENTION ? ATTENTION[group] : REST);

// --- events in -------------------------------------------------------------
function openList() {
  openStream("list", "/events", {
    session: (s) => {
      if (table.seen) table.seen.add(s.id);
      table.pending.set(s.id, s);
      schedule();
    },
    removed: (r) => {
      table.pending.set(r.id, null);
      schedule();
    },
    approvals: (a) => {
      table.approvals = a.approvals;
      renderBanner();
    },
    ready: (r) => {
      // Who serves, and its clock: relative times and "stalled" are
      // reckoned on the server's time, not this browser's.
      $("server").textContent = shown(r.server);
      setServerClock(r.now);
      if (table.seen) {
        // A reconnection sends every row again but no `removed` for those
        // deleted meanwhile: drop what the new snapshot did not have.
        const known = new Set([...table.entries.keys(), ...table.pending.keys()]);
        for (const id of known) if (!table.seen.has(id)) table.pending.set(id, null);
        schedule();
        table.seen = null;
      }
    },
  }, () => { table.seen = new Set(); });
}

function schedule() {
  if (!table.frame) table.frame = requestAnimationFrame(flush);
}

// --- applying changes ------------------------------------------------------
function flush() {
  table.frame = 0;
  const now = serverNow();
  const roots = new Set();
  for (const [id, s] of table.pending) {
    const e = table.entries.get(id);
    if (s === null) {
      if (e) forget(e, roots);
    } else {
      roots.add(rootOf(e ? update(e, s, now) : add(s, now)));
    }
  }
  table.pending.clear();
  place(rekey(roots));
  renderCounts();
  renderBulk();
}

function add(s, now) {
  const e = { id: s.id, s, keys: {}, group: null, t: 0, eff: REST, path: null, parent: null };
  makeRow(e);
  table.entries.set(e.id, e);
  return update(e, s, now);
}

function update(e, s, now) {
  e.s = s;
  e.t = millis(s.updated_at);
  const parent = s.parent ? s.parent.session_id : null;
  if (parent !== e.parent) {
    if (e.parent) table.kids.get(e.parent)?.delete(e.id);
    if (parent) {
      if (!table.kids.has(parent)) table.kids.set(parent, new Set());
      table.kids.get(parent).add(e.id);
    }
    e.parent = parent;
  }
  setGroup(e, groupOf(s, e.t, now));
  e.hay = [s.title, s.id, s.model, s.workspace, s.holder, s.status, originText(s.origin)].filter(Boolean).join(" ").toLowerCase();
  paint(e, now);
  e.tr.hidden = !visible(e);
  return e;
}

function forget(e, roots) {
  table.entries.delete(e.id);
  table.selected.delete(e.id);
  countGroup(e.group, -1);
  if (e.parent) {
    table.kids.get(e.parent)?.delete(e.id);
    const parent = table.entries.get(e.parent);
    if (parent) roots.add(rootOf(parent));
  }
  // Its subagents stand on their own now.
  for (const kid of table.kids.get(e.id) || []) {
    const k = table.entries.get(kid);
    if (k) roots.add(k);
  }
  e.tr.remove();
  const at = table.order.indexOf(e);
  if (at >= 0) table.order.splice(at, 1);
}

function setGroup(e, group) {
  if (e.group === group) return false;
  if (e.group !== null) countGroup(e.group, -1);
  countGroup(group, 1);
  e.group = group;
  return true;
}

function countGroup(group, by) {
  table.counts.set(group, (table.counts.get(group) || 0) + by);
}

const parentOf = (e) => (e.parent ? table.entries.get(e.parent) : undefined);

function rootOf(e) {
  // Bounded: a parent link that loops (a damaged store) ends somewhere.
  for (let i = 0; i < 64; i++) {
    const parent = parentOf(e);
    if (!parent) return e;
    e = parent;
  }
  return e;
}

function kidsOf(e) {
  const out = [];
  for (const id of table.kids.get(e.id) || []) {
    const k = table.entries.get(id);
    if (k) out.push(k);
  }
  return out;
}

// The sort keys of the trees under `roots`: a tree is as urgent as its
// most urgent session. Returns the entries whose key changed.
function rekey(roots) {
  const moved = [];
  const urgency = (e, depth) => {
    e.eff = rankOf(e.group);
    if (depth < 64) for (const k of kidsOf(e)) e.eff = Math.min(e.eff, urgency(k, depth + 1));
    return e.eff;
  };
  const key = (e, above, depth) => {
    const path = above.concat([e.eff, -e.t, e.id]);
    if (!e.path || compare(e.path, path) !== 0) moved.push(e);
    e.path = path;
    if (depth < 64) for (const k of kidsOf(e)) key(k, path, depth + 1);
  };
  for (const root of roots) {
    if (table.entries.get(root.id) !== root) continue; // removed meanwhile
    urgency(root, 0);
    key(root, [], 0);
  }
  return moved;
}

// Paths are [urgency, -time, id] per level, parent first.
function compare(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    if (a[i] === b[i]) continue;
    return typeof a[i] === "number" ? a[i] - b[i] : (a[i] < b[i] ? -1 : 1);
  }
  return a.length - b.length;
}
const before = (a, b) => compare(a.path, b.path);

// Puts `moved` rows where they belong; the others keep their places.
function place(moved) {
  if (moved.length === 0) return;
  const body = $("sessions").tBodies[0];
  if (!table.sorted || moved.length > RESORT_ALL) {
    table.order = [...table.entries.values()].sort(before);
    body.append(...table.order.map((e) => e.tr));
    table.sorted = true;
    return;
  }
  const moving = new Set(moved);
  table.order = table.order.filter((e) => !moving.has(e));
  for (const e of moved) {
    let lo = 0;
    let hi = table.order.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (before(table.order[mid], e) < 0) lo = mid + 1;
      else hi = mid;
    }
    table.order.splice(lo, 0, e);
    const next = table.order[lo + 1];
    body.insertBefore(e.tr, next ? next.tr : null);
  }
}

// Stalls and relative times follow the clock.
function tick() {
  const now = serverNow();
  const roots = new Set();
  for (const e of table.entries.values()) {
    if (setGroup(e, groupOf(e.s, e.t, now))) {
      e.tr.hidden = !visible(e);
      roots.add(rootOf(e));
    }
    paint(e, now);
  }
  place(rekey(roots));
  renderCounts();
}
setInterval(tick, TICK);

// --- a row -----------------------------------------------------------------
function makeRow(e) {
  const tr = document.createElement("tr");
  tr.dataset.id = e.id;
  tr.setAttribute("role", "row");
  e.cells = {};
  for (const name of COLUMNS) {
    const td = document.createElement("td");
    td.className = CELL_CLASS[name];
    td.setAttribute("role", "cell");
    tr.append(td);
    e.cells[name] = td;
  }
  const pick = document.createElement("input");
  pick.type = "checkbox";
  pick.className = "pick";
  pick.setAttribute("aria-label", "Select");
  pick.addEventListener("change", () => select(e.id, pick.checked));
  e.cells.sel.append(pick);
  e.tr = tr;
}

// Rewrites a cell when what it shows changed.
function cell(e, name, key, fill) {
  if (e.keys[name] === key) return;
  e.keys[name] = key;
  const td = e.cells[name];
  if (typeof fill === "string") td.textContent = shown(fill);
  else {
    td.replaceChildren();
    fill(td);
  }
}

// What started a session when no person did: "schedule NAME", "trigger NAME".
function originText(origin) {
  if (!origin || !origin.kind) return "";
  return origin.name ? origin.kind + " " + origin.name : origin.kind;
}

function paint(e, now) {
  const s = e.s;
  e.tr.dataset.status = s.status;
  e.tr.dataset.group = e.group;
  e.tr.dataset.updated = String(e.t);
  e.tr.classList.toggle("child", Boolean(s.parent));
  const title = s.title || s.id;
  const sub = s.parent ? s.parent.description || "subagent" : "";
  const origin = originText(s.origin);
  cell(e, "task", [title, sub, origin].join("\u0000"), (td) => {
    const link = el("a", "title", title);
    link.href = "#/s/" + s.id;
    link.title = shown(title);
    td.append(link, el("span", "sid", s.id.slice(0, 8)));
    if (sub) td.append(el("span", "sub", "subagent: " + sub));
    if (origin) td.append(el("span", "sub origin", "started by " + origin));
  });
  const detail = e.group === "stalled" ? "no record for " + ago(e.t, now).replace(" ago", "") : statusDetail(s);
  const asking = e.asking && s.question && e.asking.id === s.question.id ? e.asking : null;
  const question = s.status === "awaiting_approval" && s.question ? s.question.id : "";
  cell(e, "state", [s.status, e.group, detail, question, asking && asking.text].join("\u0000"), (td) => {
    td.append(el("span", "badge status " + s.status, words(s.status)));
    if (e.group === "stalled") td.append(" ", el("span", "badge stalled", "stalled"));
    if (detail) {
      const d = el("div", "detail", detail);
      d.title = shown(detail);
      td.append(d);
    }
    if (question) td.append(askButtons(e, s.question, asking));
  });
  const todos = s.todos || { completed: 0, total: 0 };
  cell(e, "plan", todos.completed + "/" + todos.total, (td) => td.append(progress(todos)));
  const used = usageTokens(s.usage);
  cell(e, "tokens", String(used), (td) => {
    td.textContent = tokens(used);
    if (s.usage) td.title = "prompt " + (s.usage.prompt_tokens || 0) + " · completion " + (s.usage.completion_tokens || 0);
  });
  cell(e, "cost", money(s.cost), money(s.cost));
  cell(e, "model", s.model || "", (td) => {
    td.textContent = shown(s.model || "");
    td.title = shown(s.model || "");
  });
  cell(e, "when", ago(e.t, now) + "\u0000" + s.updated_at, (td) => {
    td.textContent = ago(e.t, now);
    td.title = when(s.updated_at);
  });
  cell(e, "holder", s.holder || "", (td) => {
    td.textContent = shown(s.holder || "");
    td.title = shown(s.holder || "");
  });
  cell(e, "ws", s.workspace || "", (td) => {
    td.textContent = shown(shortPath(s.workspace || ""));
    td.title = shown(s.workspace || "");
  });
}

// A path's last part ("…/backend"): the whole is in the title.
function shortPath(path) {
  const parts = path.split("/").filter(Boolean);
  return parts.length > 1 ? "…/" + parts[parts.length - 1] : path;
}

function progress(todos) {
  const wrap = el("span", "progress");
  const bar = el("span", "bar");
  const fill = el("i");
  fill.style.width = todos.total ? (100 * todos.completed / todos.total) + "%" : "0";
  bar.append(fill);
  wrap.append(bar, el("span", "frac", todos.total ? todos.completed + "/" + todos.total : "–"));
  return wrap;
}

// --- inline approval -------------------------------------------------------
function askButtons(e, question, asking) {
  const box = el("div", "inline-ask");
  const allow = el("button", "allow", "Allow");
  const deny = el("button", "deny danger", "Deny");
  allow.addEventListener("click", () => answerInline(e, question, "allow_once"));
  deny.addEventListener("click", () => answerInline(e, question, "reject_once"));
  box.append(allow, deny);
  if (asking) {
    allow.disabled = deny.disabled = !asking.error;
    box.append(el("span", asking.error ? "error" : "dim", asking.text));
  }
  return box;
}

// The question as the server lists it: a subagent's is answered where it
// was asked, under its parent's session.
function listedApproval(s, question) {
  return table.approvals.find((a) => a.id === question.id) ||
    table.approvals.find((a) => a.request.call_id === question.request.call_id &&
      (a.session_id === s.id || (a.request.subagent && a.request.subagent.session_id === s.id)));
}

async function answerInline(e, question, decision) {
  const listed = listedApproval(e.s, question);
  const saying = (text, error) => {
    e.asking = { id: question.id, text, error };
    paint(e, serverNow());
  };
  saying(decision === "allow_once" ? "allowing…" : "denying…", false);
  try {
    // The session and call travel with the answer: it lands on this
    // question only, never on another asked since.
    const body = {
      decision,
      session_id: listed ? listed.session_id : e.s.id,
      call_id: question.request.call_id,
    };
    await api("/approvals/" + (listed ? listed.id : question.id), { method: "POST", body: JSON.stringify(body) });
    saying(decision === "allow_once" ? "allowed" : "denied", false);
  } catch (err) {
    saying(err.message, true);
  }
}

// --- counts and filters ----------------------------------------------------
function visible(e) {
  return (table.filter === null || e.group === table.filter) && (!table.query || e.hay.includes(table.query));
}

function setFilter(group, query) {
  if (group === table.filter && query === table.query) return;
  table.filter = group;
  table.query = query;
  for (const e of table.entries.values()) e.tr.hidden = !visible(e);
  renderCounts();
}

function filterHash(group) {
  return group ? "#/?state=" + encodeURIComponent(group) : "#/";
}

let chipsKey = "";
function renderCounts() {
  const total = table.entries.size;
  let shownRows = 0;
  if (table.filter === null && !table.query) shownRows = total;
  else for (const e of table.entries.values()) if (!e.tr.hidden) shownRows++;
  $("count").textContent = shownRows === total ? "(" + total + ")" : "(" + shownRows + " of " + total + ")";
  const empty = $("empty");
  empty.hidden = shownRows > 0 || !table.sorted;
  empty.textContent = total === 0 ? "No sessions yet." : "No session matches.";
  const groups = [...STATES, ...[...table.counts.keys()].filter((g) => !STATES.includes(g)).sort()];
  const chips = groups.filter((g) => table.counts.get(g) > 0 || g === table.filter);
  const key = [table.filter, total, ...chips.map((g) => g + ":" + table.counts.get(g))].join(",");
  if (key === chipsKey) return;
  chipsKey = key;
  const chip = (group, label, n) => {
    const a = el("a", "chip" + (group ? " status " + group : ""));
    a.href = group === table.filter ? filterHash(null) : filterHash(group);
    a.dataset.state = group || "all";
    a.setAttribute("aria-pressed", String(group === table.filter));
    a.append(el("span", "label", label), el("span", "n", n));
    return a;
  };
  $("states").replaceChildren(chip(null, "all", total),
    ...chips.map((g) => chip(g, words(g), table.counts.get(g) || 0)));
}

$("search").addEventListener("input", () => setFilter(table.filter, $("search").value.trim().toLowerCase()));

function renderBanner() {
  const banner = $("approvals-banner");
  const n = table.approvals.length;
  banner.hidden = n === 0;
  if (n) banner.textContent = n === 1 ? "1 approval waiting" : n + " approvals waiting";
}

// --- selection and bulk cancel ---------------------------------------------
function select(id, on) {
  if (on) table.selected.add(id);
  else table.selected.delete(id);
  renderBulk();
}

// A session a cancel can reach: running (or asking) in a process.
const cancellable = (s) => s.status === "running" || (s.status === "awaiting_approval" && s.holder);

function renderBulk() {
  const n = table.selected.size;
  $("bulk").hidden = n === 0;
  if (n) {
    let running = 0;
    for (const id of table.selected) if (cancellable(table.entries.get(id).s)) running++;
    $("bulk-count").textContent = n + " selected, " + running + " running";
  }
}

// The boxes as the selection says, after it changed other than by a click.
function syncPicks() {
  for (const e of table.entries.values()) {
    const pick = e.cells.sel.firstChild;
    if (pick.checked !== table.selected.has(e.id)) pick.checked = table.selected.has(e.id);
  }
  renderBulk();
}

$("select-all").addEventListener("change", () => {
  const on = $("select-all").checked;
  for (const e of table.entries.values()) if (!e.tr.hidden) {
    if (on) table.selected.add(e.id);
    else table.selected.delete(e.id);
  }
  syncPicks();
});

$("bulk-clear").addEventListener("click", () => {
  table.selected.clear();
  $("select-all").checked = false;
  syncPicks();
});

// Cancels every selected session that runs; says which could not be.
$("bulk-cancel").addEventListener("click", async () => {
  const chosen = [...table.selected].map((id) => table.entries.get(id)).filter(Boolean);
  const failed = [];
  const sent = [];
  await Promise.all(chosen.map(async (e) => {
    if (!cancellable(e.s)) {
      failed.push([e, "not running (" + words(e.s.status) + ")"]);
      return;
    }
    try {
      await api("/sessions/" + e.id + "/cancel", { method: "POST", body: "{}" });
      sent.push(e);
    } catch (err) {
      failed.push([e, err.message]);
    }
  }));
  for (const e of sent) table.selected.delete(e.id);
  syncPicks();
  const report = $("bulk-report");
  report.hidden = false;
  const dismiss = el("button", "dismiss", "Dismiss");
  dismiss.addEventListener("click", () => { report.hidden = true; });
  report.replaceChildren(el("p", "", "Cancel sent to " + sent.length + " of " + chosen.length + " selected." +
    (failed.length ? " Not cancelled:" : "")));
  if (failed.length) {
    const list = el("ul");
    for (const [e, why] of failed) {
      const li = el("li");
      li.dataset.id = e.id;
      const a = el("a", "", e.s.title || e.id.slice(0, 8));
      a.href = "#/s/" + e.id;
      li.append(a, el("span", "dim", " " + e.id.slice(0, 8) + ": "), el("span", "", why));
      list.append(li);
    }
    report.append(list);
  }
  report.append(dismiss);
});
