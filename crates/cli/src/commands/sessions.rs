//! `pod sessions`: every session with its status and todo progress.

use crate::cli::SessionsArgs;
use crate::error::Outcome;
use crate::render;
use crate::style::Style;
use anyhow::{Context, Result};
use pod_launch::sessions::{self as session, Summary};
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// Lists sessions, most recently updated first.
pub async fn run(args: SessionsArgs, place: super::Place) -> Result<Outcome> {
    let store = place.store.as_ref();
    let mut summaries = Vec::new();
    for id in store.list().await? {
        match session::load(store, id).await {
            Ok(loaded) => summaries.push(loaded.summary),
            // One damaged log must not hide the others.
            Err(err) => {
                let _ =
                    crate::output::eprint(&format!("warning: skipping session {id}: {err:#}\n"));
            }
        }
    }
    summaries.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.id.cmp(&b.id)));
    let summaries = tree(summaries);
    if args.json {
        let json = crate::render::safe::json(&summaries, true).context("cannot encode sessions")?;
        crate::output::print(&format!("{json}\n"))?;
    } else if summaries.is_empty() {
        crate::output::print(&format!(
            "no sessions in {} (try `pod demo`)\n",
            store.location()
        ))?;
    } else {
        crate::output::print(&table(&summaries, Style::for_stdout()))?;
    }
    Ok(Outcome::Done)
}

/// Sessions in tree order: each top-level session (most recently updated
/// first), then its subagents' sessions, depth first. A subagent whose
/// parent is not listed stands at the top level.
fn tree(summaries: Vec<Summary>) -> Vec<Summary> {
    let listed: HashSet<Uuid> = summaries.iter().map(|s| s.id).collect();
    let (roots, children): (Vec<Summary>, Vec<Summary>) = summaries.into_iter().partition(|s| {
        s.parent
            .as_ref()
            .is_none_or(|p| !listed.contains(&p.session_id))
    });
    let mut by_parent: HashMap<Uuid, Vec<Summary>> = HashMap::new();
    for child in children {
        if let Some(link) = &child.parent {
            by_parent.entry(link.session_id).or_default().push(child);
        }
    }
    let mut out = Vec::new();
    let mut stack: Vec<Summary> = roots.into_iter().rev().collect();
    while let Some(summary) = stack.pop() {
        if let Some(children) = by_parent.remove(&summary.id) {
            stack.extend(children.into_iter().rev());
        }
        out.push(summary);
    }
    out
}

/// The human table: one session per line, subagents indented under their
/// parent.
fn table(summaries: &[Summary], style: Style) -> String {
    let mut out = style.bold(&format!(
        "{:<8}  {:<17}  {:<5}  {:<16}  {:<16}  {:<14}  {}\n",
        "ID", "STATUS", "TODOS", "UPDATED", "MODEL", "TOKENS", "WORKSPACE"
    ));
    for s in summaries {
        let id = s.id.to_string();
        let status = format!("{:<17}", s.status.as_str());
        let status = match s.status {
            session::Status::Running => style.yellow(&status),
            session::Status::AwaitingApproval | session::Status::Answered => style.cyan(&status),
            session::Status::Done => style.green(&status),
            session::Status::Interrupted => style.red(&status),
            session::Status::Stopped => style.yellow(&status),
            session::Status::Idle | session::Status::Queued => status,
        };
        let todos = if s.todos.total == 0 {
            "-".to_string()
        } else {
            format!("{}/{}", s.todos.completed, s.todos.total)
        };
        // Tokens in and out, with the cached share of the input or the
        // cost when the profile has prices.
        let total = s.usage.prompt_tokens + s.usage.completion_tokens;
        let spent = match (s.cost, s.usage.prompt_tokens) {
            (_, 0) => "-".to_string(),
            (Some(cost), _) => format!("{} {cost:.2}", render::tokens(total)),
            (None, prompt) => format!(
                "{} {:.0}%c",
                render::tokens(total),
                s.usage.cache_read_tokens as f64 * 100.0 / prompt as f64
            ),
        };
        // A subagent: its id indented by depth, and its task after the
        // workspace.
        let (id, task) = match &s.parent {
            Some(link) => (
                format!(
                    "{}└{}",
                    " ".repeat(link.depth.saturating_sub(1) as usize),
                    &id[..6]
                ),
                format!("  task: {}", render::shorten(&link.description, 40)),
            ),
            None => (id[..8].to_string(), String::new()),
        };
        out.push_str(&format!(
            "{:<8}  {status}  {:<5}  {:<16}  {:<16}  {:<14}  {}{task}\n",
            id,
            todos,
            s.updated_at
                .with_timezone(&chrono::Local)
                .format("%Y-%m-%d %H:%M"),
            crate::render::shorten(&s.model, 16),
            spent,
            render::safe::line(&s.workspace.display().to_string())
        ));
    }
    out
}
