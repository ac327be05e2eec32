// The dashboard's shared parts: safe text, the API with its token, the
// event streams and the connection indicator, and how things are written
// (times, tokens, costs, statuses). No framework, no build step.
"use strict";

const $ = (id) => document.getElementById(id);
// Text from models, tools and files: control characters and bidirectional
// overrides are shown as escapes (\u{1b}), so none reorders or hides what
// is shown. Newlines and tabs stay. Everything a model or tool wrote goes
// through `el` or `shown` into textContent (or an attribute), never HTML.
const ACTS = /[\u0000-\u0008\u000b-\u001f\u007f-\u009f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
const shown = (text) => String(text).replace(ACTS, (c) => "\\u{" + c.charCodeAt(0).toString(16) + "}");
const el = (tag, cls, text) => {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined) node.textContent = shown(text);
  return node;
};

// --- the token -------------------------------------------------------------
// It comes in the URL's fragment (never sent to the server), then lives in
// this tab's session storage.
let token = sessionStorage.getItem("pod-token");

// Takes a `#token=…` from the URL, if there is one; true when it did.
function tokenFromHash() {
  const match = location.hash.match(/token=([^&]+)/);
  if (!match) return false;
  setToken(decodeURIComponent(match[1]));
  history.replaceState(null, "", location.pathname + "#/");
  return true;
}

function setToken(value) {
  token = value || null;
  if (token) sessionStorage.setItem("pod-token", token);
  else sessionStorage.removeItem("pod-token");
}

// The server refused the token: back to the form, saying so.
function refused(message) {
  closeAllStreams();
  setToken(null);
  showLogin("The server refused this token" + (message ? " (" + message + ")" : "") +
    ". Paste the whole token pod serve --http printed, or the one in POD_HOME/http-token.");
}

// --- the API ---------------------------------------------------------------
async function api(path, options = {}) {
  const response = await fetch("/api" + path, {
    ...options,
    headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
  });
  const body = await response.json().catch(() => ({}));
  if (response.status === 401) {
    refused(body.error);
    throw new Error("the server refused the token");
  }
  if (response.status === 503 && response.headers.get("Retry-After")) {
    // The session database is away: the server says since when.
    showDatabase(body.error);
    watchDatabase();
  }
  if (!response.ok) throw new Error(body.error || response.status + " " + response.statusText);
  return body;
}

// --- the session database -------------------------------------------------
// While a fleet's database is unreachable, sessions pause and most of the
// API answers 503: a banner says so, and goes once the server says the
// database is back.
let databaseWatch = null;
// How often to ask the server whether its database is back.
const DATABASE_EVERY = 5000;

function showDatabase(message) {
  const banner = $("db-banner");
  banner.hidden = !message;
  banner.textContent = message ? shown(message) : "";
}

function watchDatabase() {
  if (databaseWatch) return;
  databaseWatch = setInterval(() => {
    api("/server").then((s) => {
      if (s.store_unreachable_since) {
        const since = new Date(s.store_unreachable_since).toISOString().replace("T", " ").slice(0, 19);
        showDatabase("The session database is unreachable since " + since +
          " UTC; sessions are paused and continue when it is back.");
      } else {
        showDatabase(null);
      }
    }, () => {});
  }, DATABASE_EVERY);
}

// --- event streams and the connection indicator ---------------------------
// Each open stream is connected, or reconnecting (the browser retries by
// itself, and sends Last-Event-ID); when the server does not answer at
// all it is gone, until a stream opens again.
const streams = new Map(); // name -> { source, open }
let serverUp = true;
let probing = null;
// How long between two looks at a server that has gone: often enough to
// notice it is back soon after the browser's own retries do.
const PROBE_EVERY = 3000;

// Opens `path`'s stream as `name` (replacing one of that name);
// `handlers` maps event names to functions of the parsed data; `onOpen`
// runs on every (re)connection.
function openStream(name, path, handlers, onOpen) {
  closeStream(name);
  const sep = path.includes("?") ? "&" : "?";
  const source = new EventSource("/api" + path + sep + "access_token=" + encodeURIComponent(token));
  const entry = { source, open: false, opened: false, retry: null };
  streams.set(name, entry);
  for (const [event, handle] of Object.entries(handlers)) {
    source.addEventListener(event, (e) => handle(JSON.parse(e.data)));
  }
  source.onopen = () => {
    entry.open = entry.opened = true;
    serverUp = true;
    if (onOpen) onOpen();
    renderConnection();
  };
  source.onerror = () => {
    entry.open = false;
    renderConnection();
    probe();
    // Closed for good (a 401, or not an event stream): the browser will
    // not retry; find out why, and open it again if the token still holds.
    if (source.readyState === EventSource.CLOSED && streams.get(name) === entry) {
      // (A refused token closes every stream and shows the form.)
      const again = () => { if (streams.get(name) === entry) openStream(name, path, handlers, onOpen); };
      entry.retry = setTimeout(() => api("/approvals").then(again, again), PROBE_EVERY);
    }
  };
  renderConnection();
  return source;
}

function closeStream(name) {
  const entry = streams.get(name);
  if (!entry) return;
  clearTimeout(entry.retry);
  entry.source.close();
  streams.delete(name);
  renderConnection();
}

function closeAllStreams() {
  for (const name of [...streams.keys()]) closeStream(name);
}

// Whether the server answers at all (the page's own stylesheet: no token,
// no data); looks again while it does not and a stream is down.
function probe() {
  if (probing) return;
  probing = fetch("/assets/app.css", { method: "HEAD", cache: "no-store" })
    .then(() => true, () => false)
    .then((up) => {
      probing = null;
      serverUp = up;
      renderConnection();
      const down = [...streams.values()].some((s) => !s.open);
      if (down) setTimeout(probe, PROBE_EVERY);
    });
}

function renderConnection() {
  const node = $("conn");
  const all = [...streams.values()];
  let state;
  if (all.length === 0) state = "idle";
  else if (all.every((s) => s.open)) state = "connected";
  else if (!serverUp) state = "gone";
  else if (all.every((s) => s.open || !s.opened)) state = "connecting";
  else state = "reconnecting";
  if (node.dataset.state === state) return;
  node.dataset.state = state;
  node.textContent = {
    idle: "",
    connecting: "connecting…",
    connected: "live",
    reconnecting: "reconnecting…",
    gone: "server gone: retrying",
  }[state];
  node.title = {
    idle: "",
    connecting: "Opening the server's events",
    connected: "Following the server's events",
    reconnecting: "The event stream broke; the browser is reconnecting",
    gone: "The server does not answer: what is shown may be out of date",
  }[state];
}

// --- how things are written ------------------------------------------------
// A running session with no record for this long is shown as stalled.
const STALLED_AFTER = 10 * 60 * 1000;

// Times from the server (RFC 3339, up to nanoseconds) in milliseconds.
// The server's clock less this browser's, from the events stream's `ready`.
let serverSkew = 0;

function setServerClock(now) {
  const t = millis(now);
  if (t) serverSkew = t - Date.now();
}

// Now, on the server's clock.
function serverNow() {
  return Date.now() + serverSkew;
}

function millis(text) {
  if (!text) return 0;
  const t = Date.parse(String(text).replace(/(\.\d{3})\d+/, "$1"));
  return Number.isNaN(t) ? 0 : t;
}

// "just now", "3 min ago", "5 h ago", "2 d ago".
function ago(ms, now) {
  if (!ms) return "";
  const seconds = Math.max(0, (now - ms) / 1000);
  if (seconds < 45) return "just now";
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) return minutes + " min ago";
  const hours = Math.round(minutes / 60);
  if (hours < 48) return hours + " h ago";
  return Math.round(hours / 24) + " d ago";
}

function when(text) {
  return text ? new Date(millis(text)).toLocaleString() : "";
}

function tokens(n) {
  if (!n) return "0";
  if (n < 1000) return String(n);
  if (n < 1e6) return (n / 1e3).toFixed(n < 1e4 ? 1 : 0) + "k";
  return (n / 1e6).toFixed(1) + "M";
}

// As the CLI writes a cost: two decimals, four below a hundredth.
function money(amount) {
  if (typeof amount !== "number") return "";
  if (amount === 0) return "0.00";
  return amount < 0.01 ? amount.toFixed(4) : amount.toFixed(2);
}

function usageTokens(usage) {
  return usage ? (usage.prompt_tokens || 0) + (usage.completion_tokens || 0) : 0;
}

// The limit a `stopped` session met, in words.
function limitText(limit) {
  if (limit === null || limit === undefined) return "";
  if (typeof limit !== "object") return String(limit);
  const [kind, value] = Object.entries(limit)[0] || [];
  switch (kind) {
    case "turn_requests": return value + " requests in one turn";
    case "continuations": return value + " continuations";
    case "run_requests": return value + " requests in the run";
    case "run_tokens": return tokens(value) + " tokens in the run";
    case "session_requests": return value + " requests in the session";
    case "session_tokens": return tokens(value) + " tokens in the session";
    case "run_cost": return "a cost of " + money(value) + " in the run";
    case "session_cost": return "its money limit: " + money(value && value.spent) + " of " + money(value && value.max);
    case "session_wall": return "its wall-time limit of " + (value && value.max_secs) + "s";
    case "loop": return "a loop: " + (value && value.what) + " ×" + (value && value.times);
    case "shared": {
      // A profile's shared limit; money in millionths.
      const v = value || {};
      const amounts = v.measure === "money"
        ? "money " + money(v.spent / 1e6) + " of " + money(v.max / 1e6)
        : v.spent + " of " + v.max + " " + v.measure;
      return "the limit of profile " + v.profile + ": " + amounts + " per " + v.window;
    }
    case "repeated_failure": return (value && value.tool) + " failed " + (value && value.times) + " times in a row";
    case undefined: return "";
    default: return kind.replace(/_/g, " ") + " " + JSON.stringify(value);
  }
}

// A session's limits, as a `limits` record holds them.
function limitsText(limits) {
  const l = limits || {};
  const parts = [
    typeof l.cost === "number" ? "money " + money(l.cost) : "",
    l.wall_secs ? "wall time " + l.wall_secs + "s" : "",
    l.requests ? l.requests + " requests" : "",
    l.tokens ? tokens(l.tokens) + " tokens" : "",
  ].filter(Boolean);
  return parts.length ? parts.join(", ") : "none";
}

// What to say after a session's status, when there is something: why it
// failed, stopped or was cut, what it waits on.
function statusDetail(s) {
  switch (s.status) {
    case "stopped": return s.stopped_by ? "stopped by " + limitText(s.stopped_by) : (s.reason || "");
    case "awaiting_approval": return s.question && s.question.request ? s.question.request.summary : "";
    case "done": return s.verification && s.verification.state === "verified" ? "verified" : "";
    default: return typeof s.reason === "string" ? s.reason : "";
  }
}

// A status's words (`awaiting_approval` reads "awaiting approval").
const words = (status) => String(status).replace(/_/g, " ");

function show(view) {
  for (const id of ["login", "list-view", "session-view"]) $(id).hidden = id !== view;
}

function showLogin(message) {
  show("login");
  $("login-error").hidden = !message;
  $("login-error").textContent = message ? shown(message) : "";
  $("token-input").focus();
}
