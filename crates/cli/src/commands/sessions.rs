//! `pod sessions`: every session with its status and todo progress.

use crate::cli::SessionsArgs;
use crate::error::Outcome;
use crate::render;
use crate::style::Style;
use anyhow::{Context, Result};
use pod_launch::sessions::{self as session, Summary};
use std::collections::{HashMap, HashSet};
use uuid::Uuid;

/// Every state `--status` takes.
const STATES: &[session::Status] = &[
    session::Status::Running,
    session::Status::AwaitingApproval,
    session::Status::Answered,
    session::Status::Queued,
    session::Status::Waiting,
    session::Status::Idle,
    session::Status::Done,
    session::Status::Stopped,
    session::Status::Failed,
    session::Status::Cancelled,
    session::Status::Interrupted,
    session::Status::Unverified,
    session::Status::Forked,
    session::Status::Rewound,
    session::Status::Damaged,
];

/// Lists sessions, most recently updated first.
pub async fn run(args: SessionsArgs, place: super::Place) -> Result<Outcome> {
    let wanted = wanted_states(&args.status)?;
    let store = place.store.as_ref();
    let mut summaries = Vec::new();
    for id in store.list().await? {
        // A damaged log is listed as damaged, never hidden.
        summaries.push(session::summary(store, id).await);
    }
    let stored = summaries.len();
    summaries.retain(|s| wanted.is_empty() || wanted.contains(&s.status));
    summaries.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then(a.id.cmp(&b.id)));
    let mut summaries = tree(summaries);
    if let Some(limit) = args.limit {
        // The N most recent top-level sessions, each with its subagents.
        let mut roots = 0;
        summaries.retain(|s| {
            if s.parent.is_none() {
                roots += 1;
            }
            roots <= limit
        });
    }
    if args.json {
        let json = crate::render::safe::json(&summaries, true).context("cannot encode sessions")?;
        crate::output::print(&format!("{json}\n"))?;
    } else if summaries.is_empty() {
        crate::output::print(&nothing_listed(&wanted, stored, &store.location()))?;
    } else {
        crate::output::print(&table(&summaries, Style::for_stdout()))?;
    }
    Ok(Outcome::Done)
}

/// What an empty listing says: that the store is empty, or that the
/// filter left none of the `stored` sessions.
fn nothing_listed(wanted: &[session::Status], stored: usize, location: &str) -> String {
    let sessions = |n: usize| match n {
        1 => "1 session".to_string(),
        n => format!("{n} sessions"),
    };
    if stored == 0 {
        return format!("no sessions in {location} (try `pod demo`)\n");
    }
    let which = match wanted {
        // Only --limit 0 lists nothing of a store with sessions.
        [] => "sessions listed".to_string(),
        [state] => format!("{} sessions", state.as_str()),
        [first @ .., last] => format!(
            "{} or {} sessions",
            first
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", "),
            last.as_str()
        ),
    };
    format!(
        "no {which} ({} in {location}; `pod sessions` lists all)\n",
        sessions(stored)
    )
}

/// The states `--status` names.
fn wanted_states(names: &[String]) -> Result<Vec<session::Status>> {
    names
        .iter()
        .map(|name| {
            let name = name.trim().to_ascii_lowercase().replace('-', "_");
            STATES
                .iter()
                .copied()
                .find(|s| s.as_str() == name)
                .ok_or_else(|| {
                    anyhow::Error::new(crate::error::Failure::new(
                        format!("`{name}` is not a session state"),
                        format!(
                            "use one of {}",
                            STATES
                                .iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                    ))
                })
        })
        .collect()
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

/// What started a session, in a word and a name: `schedule nightly`.
fn origin_tag(origin: &pod::log::Origin) -> String {
    match origin {
        pod::log::Origin::Schedule { name, .. } => format!("schedule {name}"),
        pod::log::Origin::Trigger { name, .. } => format!("trigger {name}"),
    }
}

/// The human table: one session per line, subagents indented under their
/// parent.
fn table(summaries: &[Summary], style: Style) -> String {
    let mut out = style.bold(&format!(
        "{:<8}  {:<17}  {:<5}  {:<16}  {:>7}  {:>7}  {:<40}  {:<16}  {}\n",
        "ID", "STATUS", "TODOS", "UPDATED", "TOKENS", "COST", "TASK", "MODEL", "WORKSPACE"
    ));
    for s in summaries {
        let id = s.id.to_string();
        // A done session whose checks passed says so.
        let shown = match (&s.status, &s.verification) {
            (session::Status::Done, Some(pod_launch::verified::Verification::Verified { .. })) => {
                "done, verified"
            }
            (status, _) => status.as_str(),
        };
        let status = format!("{shown:<17}");
        let status = match s.status {
            session::Status::Running => style.yellow(&status),
            session::Status::AwaitingApproval | session::Status::Answered => style.cyan(&status),
            session::Status::Done => style.green(&status),
            session::Status::Interrupted
            | session::Status::Failed
            | session::Status::Damaged
            | session::Status::Unverified => style.red(&status),
            session::Status::Stopped | session::Status::Cancelled => style.yellow(&status),
            session::Status::Idle
            | session::Status::Queued
            | session::Status::Waiting
            | session::Status::Forked
            | session::Status::Rewound => status,
        };
        let todos = if s.todos.total == 0 {
            "-".to_string()
        } else {
            format!("{}/{}", s.todos.completed, s.todos.total)
        };
        // Tokens in and out; what they cost, when the profile has prices.
        let total = s.usage.prompt_tokens + s.usage.completion_tokens;
        let tokens = match total {
            0 => "-".to_string(),
            n => render::tokens(n),
        };
        let cost = match (s.cost, total) {
            (Some(cost), 1..) => format!("{:.2}", cost.amount()),
            _ => "-".to_string(),
        };
        // A subagent: its id indented by depth, and its task is the
        // parent's description of it. A damaged log: where it is damaged.
        let (id, task) = match &s.parent {
            Some(link) => (
                format!(
                    "{}└{}",
                    " ".repeat(link.depth.saturating_sub(1) as usize),
                    &id[..6]
                ),
                link.description.clone(),
            ),
            None => (
                id[..8].to_string(),
                match (&s.damage, s.status) {
                    // The line first: the column cuts the reason short.
                    (Some(damage), _) => {
                        format!("damaged at line {}: {}", damage.line, damage.reason)
                    }
                    (None, session::Status::Damaged) => s.reason.clone().unwrap_or_default(),
                    // Started by a schedule or a trigger: which, first.
                    _ => match &s.origin {
                        Some(origin) => format!(
                            "[{}] {}",
                            origin_tag(origin),
                            s.title.clone().unwrap_or_default()
                        ),
                        None => s.title.clone().unwrap_or_default(),
                    },
                },
            ),
        };
        let task = render::safe::line(&task);
        out.push_str(&format!(
            "{:<8}  {status}  {:<5}  {:<16}  {:>7}  {:>7}  {:<40}  {:<16}  {}\n",
            id,
            todos,
            s.updated_at
                .with_timezone(&chrono::Local)
                .format("%Y-%m-%d %H:%M"),
            tokens,
            cost,
            render::shorten(&task, 40),
            crate::render::shorten(&s.model, 16),
            render::safe::line(&s.workspace.display().to_string())
        ));
    }
    out
}
