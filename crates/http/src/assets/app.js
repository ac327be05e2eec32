// The pod dashboard's routes: `#/` (the sessions; `#/?state=failed`
// filters them), `#/s/ID` (a session) and `#token=…` (takes the token).
// The sessions' stream stays open on every page, so the header's
// approvals and connection stay live; a session's page opens its own.
"use strict";

$("login-form").addEventListener("submit", (e) => {
  e.preventDefault();
  const value = $("token-input").value.trim();
  if (!value) return;
  $("token-input").value = "";
  setToken(value);
  start();
});

// (Re)starts with the token: the sessions' stream, the server's name and
// a first request that says at once whether the token is good.
function start() {
  closeAllStreams();
  if (!token) return showLogin();
  $("login-error").hidden = true;
  api("/approvals").then(() => {
    watchDatabase();
    openList();
    route();
  }).catch((err) => {
    // A refused token shows the form by itself; a database away shows its
    // banner and starts again in a while; anything else is said.
    if (!token) return;
    if (!$("db-banner").hidden) return setTimeout(start, DATABASE_EVERY);
    showLogin("Cannot reach the server: " + err.message);
  });
}

function route() {
  if (!token || !streams.has("list")) return;
  const session = location.hash.match(/^#\/s\/([0-9a-f-]+)/);
  if (session) {
    if (!current || current.id !== session[1] || !streams.has("session") || $("session-view").hidden) {
      closeStream("session");
      openSession(session[1]).catch((err) => { $("s-message").textContent = shown(err.message); });
    }
    return;
  }
  closeStream("session");
  current = null;
  const state = location.hash.match(/[?&]state=([^&]+)/);
  setFilter(state ? decodeURIComponent(state[1]) : null, table.query);
  show("list-view");
  loadSchedules();
}

window.addEventListener("hashchange", () => {
  if (tokenFromHash()) start();
  else route();
});
tokenFromHash();
start();
