// The fleet's schedules under the sessions: when each fires next, its last
// session and how that stands, its counts, and a pause/resume button. A
// server without a PostgreSQL store has none (409): the section stays
// hidden. Read when the list opens and every few seconds after.
"use strict";

// Schedules change by the clock (a fire every minute at most shown), so a
// poll of one small list is enough; no stream carries them.
const SCHEDULES_POLL = 5 * 1000;

async function loadSchedules() {
  if (!token) return;
  let listed;
  try {
    listed = await api("/schedules");
  } catch (_) {
    $("schedules-view").hidden = true;
    return;
  }
  renderSchedules(listed.schedules || []);
}

function renderSchedules(schedules) {
  $("schedules-view").hidden = schedules.length === 0;
  const body = $("schedules").querySelector("tbody");
  const rows = schedules.map((s) => {
    const tr = el("tr");
    tr.dataset.name = s.name;
    tr.dataset.paused = String(Boolean(s.paused));
    tr.append(el("td", "name", s.name), el("td", "when", s.when));
    tr.append(el("td", "next", s.paused ? "paused" : when(s.next_fire)));
    const last = el("td", "last");
    if (s.last_session) {
      const link = el("a", "", s.last_session.slice(0, 8));
      link.href = "#/s/" + s.last_session;
      last.append(link);
      if (s.last_running) last.append(" ", el("span", "badge status running", "going"));
    } else {
      last.textContent = "never fired";
    }
    if (s.session) last.append(" ", el("span", "dim", "(heartbeat)"));
    tr.append(last);
    tr.append(el("td", "counts", s.fires + " started · " + s.skipped + " skipped · " + s.missed + " missed"));
    const act = el("td", "act");
    const button = el("button", "pause", s.paused ? "Resume" : "Pause");
    button.addEventListener("click", () => pauseSchedule(s.name, !s.paused, button));
    act.append(button);
    tr.append(act);
    return tr;
  });
  body.replaceChildren(...rows);
}

async function pauseSchedule(name, paused, button) {
  button.disabled = true;
  try {
    await api("/schedules/" + encodeURIComponent(name), {
      method: "PATCH",
      body: JSON.stringify({ paused }),
    });
  } catch (err) {
    $("schedules-message").textContent = shown(name + ": " + err.message);
  }
  await loadSchedules();
}

setInterval(() => {
  if (!$("list-view").hidden) loadSchedules();
}, SCHEDULES_POLL);
