//! `pod sessions`: every session with its status and todo progress.

use crate::cli::SessionsArgs;
use crate::error::Outcome;
use crate::render;
use crate::session::{self, Summary};
use crate::style::Style;
use anyhow::{Context, Result};

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
    if args.json {
        let json = serde_json::to_string_pretty(&summaries).context("cannot encode sessions")?;
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

/// The human table: one session per line.
fn table(summaries: &[Summary], style: Style) -> String {
    let mut out = style.bold(&format!(
        "{:<8}  {:<11}  {:<5}  {:<16}  {:<16}  {:<14}  {}\n",
        "ID", "STATUS", "TODOS", "UPDATED", "MODEL", "TOKENS", "WORKSPACE"
    ));
    for s in summaries {
        let id = s.id.to_string();
        let status = format!("{:<11}", s.status.as_str());
        let status = match s.status {
            session::Status::Running => style.yellow(&status),
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
        out.push_str(&format!(
            "{:<8}  {status}  {:<5}  {:<16}  {:<16}  {:<14}  {}\n",
            &id[..8],
            todos,
            s.updated_at
                .with_timezone(&chrono::Local)
                .format("%Y-%m-%d %H:%M"),
            crate::render::shorten(&s.model, 16),
            spent,
            s.workspace.display()
        ));
    }
    out
}
