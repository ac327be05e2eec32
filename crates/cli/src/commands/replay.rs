//! `pod replay`: a session (or every session of a directory) replayed on
//! its recorded answers, and where it first went otherwise.

use crate::cli::ReplayArgs;
use crate::error::{Failure, Outcome};
use crate::render::safe;
use anyhow::{bail, Result};
use pod::{FileStore, PodHome};
use pod_launch::replay::{self, Recording, Report, WhatIf};
use pod_launch::sessions as session;
use serde_json::json;
use uuid::Uuid;

/// Replays and reports; exits 4 (`EXIT_DIVERGED`) when a replay diverged.
pub async fn run(args: ReplayArgs, place: super::Place) -> Result<Outcome> {
    let what_if = WhatIf {
        workspace: args.workspace.clone(),
        config: args.config.clone(),
        hooks: args.hooks.clone(),
        mcp_config: args.mcp_config.clone(),
        tune: None,
    };
    let Some(dir) = &args.dir else {
        let store = place.store.as_ref();
        let id = session::resolve(store, args.id.as_deref().unwrap_or_default()).await?;
        let recording = Recording::read(store, id).await?;
        let report = replay::replay(&recording, &place.home, &what_if).await?;
        let text = match args.json {
            true => format!("{}\n", safe::json(&report_json(&report), false)?),
            false => full(&report),
        };
        crate::output::print(&text)?;
        return Ok(outcome(report.identical()));
    };
    if !dir.join("sessions").is_dir() {
        bail!(Failure::new(
            format!("{} holds no sessions directory", dir.display()),
            "give a POD_HOME, or a directory `pod store export --to DIR` wrote"
        ));
    }
    let home = PodHome::new(dir);
    let store = FileStore::new(home.clone());
    let (mut identical, mut diverged, mut failed) = (0, 0, 0);
    let corpus = Recording::read_all(&store).await?;
    // Each line as soon as its session is replayed: a corpus takes a while.
    for recording in &corpus.sessions {
        let result = replay::replay(recording, &home, &what_if).await;
        crate::output::print(&format!("{}\n", line(recording.id(), &result, args.json)?))?;
        match &result {
            Ok(report) if report.identical() => identical += 1,
            Ok(_) => diverged += 1,
            Err(_) => failed += 1,
        }
    }
    for (id, err) in corpus.unreadable {
        crate::output::print(&format!("{}\n", line(id, &Err(err), args.json)?))?;
        failed += 1;
    }
    if !args.json {
        crate::output::print(&format!(
            "{}: {identical} identical, {diverged} diverged, {failed} not replayed\n",
            crate::render::plural(identical + diverged + failed, "session")
        ))?;
    }
    if failed > 0 {
        bail!(Failure::new(
            format!("{failed} not replayed"),
            "the lines above say why"
        ));
    }
    Ok(outcome(diverged == 0))
}

/// A session's line of a corpus.
fn line(id: Uuid, result: &Result<Report, pod_launch::LaunchError>, json: bool) -> Result<String> {
    Ok(match (result, json) {
        (Ok(report), true) => safe::json(&report_json(report), false)?,
        (Ok(report), false) => short(report),
        (Err(err), true) => safe::json(&error_json(id, err), false)?,
        (Err(err), false) => format!("{id}  error     {}", safe::line(&pod_llm::error_chain(err))),
    })
}

fn outcome(identical: bool) -> Outcome {
    match identical {
        true => Outcome::Done,
        false => Outcome::Diverged,
    }
}

/// A report as JSON, with its verdict.
fn report_json(report: &Report) -> serde_json::Value {
    let mut value = serde_json::to_value(report).unwrap_or_default();
    value["status"] = json!(match report.identical() {
        true => "identical",
        false => "diverged",
    });
    value
}

fn error_json(id: Uuid, err: &pod_launch::LaunchError) -> serde_json::Value {
    json!({
        "session": id,
        "status": "error",
        "error": pod_llm::error_chain(err),
        "hint": err.hint(),
    })
}

/// The counts, in words.
fn counts(report: &Report) -> String {
    let mut text = format!(
        "{}, {}",
        crate::render::plural(report.records, "record"),
        crate::render::plural(report.answers, "answer")
    );
    if report.subagents > 0 {
        text.push_str(&format!(
            ", {}",
            crate::render::plural(report.subagents, "subagent")
        ));
    }
    if report.cut {
        text.push_str(&format!(
            "; the log was cut short, {} replayed past its end",
            crate::render::plural(report.beyond, "record")
        ));
    }
    text
}

/// Where it diverged, on one line.
fn at(report: &Report) -> String {
    let Some(located) = &report.divergence else {
        return String::new();
    };
    let d = &located.divergence;
    let mut text = format!(
        "item {} (record {}): {}",
        d.item,
        d.record,
        safe::line(&d.what)
    );
    if let Some(call) = &located.subagent_of {
        text.push_str(&format!(
            ", in the subagent of {} (session {})",
            safe::line(call),
            located.session
        ));
    }
    text
}

/// One line per session (`--dir`), with a line under it for each part
/// of the recorded policy the replay did not apply.
fn short(report: &Report) -> String {
    let title = report
        .title
        .as_deref()
        .map(|t| format!("  {}", safe::line(t)))
        .unwrap_or_default();
    let mut text = match report.identical() {
        true => format!("{}  identical {}{title}", report.session, counts(report)),
        false => format!("{}  diverged  at {}{title}", report.session, at(report)),
    };
    for note in &report.narrowed {
        text.push_str(&format!("\n  narrowed: {}", safe::line(note)));
    }
    text
}

/// The lines saying what of the recorded policy was not applied.
fn narrowed(report: &Report) -> String {
    report
        .narrowed
        .iter()
        .map(|note| format!("narrowed: {}\n", safe::line(note)))
        .collect()
}

/// The whole report of one session.
fn full(report: &Report) -> String {
    let Some(located) = &report.divergence else {
        return format!(
            "session {} replayed identically: {}\n{}",
            report.session,
            counts(report),
            narrowed(report)
        );
    };
    let mut text = format!("session {} diverged at {}\n", report.session, at(report));
    text.push_str(&narrowed(report));
    text.push_str(&safe::text(&located.divergence.diff));
    text.push_str(&format!(
        "{} of {} the same before it ({})\n",
        report.same,
        crate::render::plural(report.records, "record"),
        counts(report)
    ));
    text
}
