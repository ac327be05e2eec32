//! `pod show`: a session's history and current todos, read from its log.

use crate::cli::ShowArgs;
use crate::error::Outcome;
use crate::render;
use crate::session::{self, Loaded, Summary};
use crate::style::Style;
use anyhow::{Context, Result};
use pod_llm::Item;
use pod_tools::TodoItem;
use serde::Serialize;

/// `pod show --json`: one document.
#[derive(Serialize)]
struct ShowJson<'a> {
    session: &'a Summary,
    todos: &'a [TodoItem],
    /// The full history, as `PodHandle::get_history` returns it.
    history: Vec<Item>,
}

/// Prints one session.
pub async fn run(args: ShowArgs, place: super::Place) -> Result<Outcome> {
    let store = place.store.as_ref();
    let id = session::resolve(store, &args.id).await?;
    let loaded = session::load(store, id).await?;
    if args.json {
        let doc = ShowJson {
            session: &loaded.summary,
            todos: &loaded.todos,
            history: loaded.full_history(),
        };
        let json = serde_json::to_string_pretty(&doc).context("cannot encode the session")?;
        crate::output::print(&format!("{json}\n"))?;
    } else {
        crate::output::print(&human(&loaded, Style::for_stdout()))?;
    }
    Ok(Outcome::Done)
}

/// The human form: a head, the numbered history, the todos.
fn human(loaded: &Loaded, style: Style) -> String {
    let s = &loaded.summary;
    let mut out = format!(
        "{} {}  {}\n",
        style.bold("session"),
        s.id,
        style.bold(s.status.as_str())
    );
    out.push_str(&format!("  model      {}\n", s.model));
    out.push_str(&format!("  workspace  {}\n", s.workspace.display()));
    // Sessions from before the sandbox existed record none.
    if let Some(sandbox) =
        crate::launch::Launch::from_header(&loaded.header).and_then(|launch| launch.sandbox)
    {
        out.push_str(&format!("  sandbox    {}\n", sandbox.describe()));
    }
    out.push_str(&format!(
        "  created    {}\n  updated    {}\n",
        s.created_at
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%d %H:%M:%S"),
        s.updated_at
            .with_timezone(&chrono::Local)
            .format("%Y-%m-%d %H:%M:%S")
    ));
    if let Some(fork) = &s.forked_from {
        out.push_str(&format!(
            "  forked     from {} at item {}\n",
            fork.id, fork.at
        ));
    }
    out.push_str(&format!(
        "  tokens     {}\n",
        render::usage(&s.usage, s.cost)
    ));
    if let Some(holder) = &s.holder {
        out.push_str(&format!("  held by    {holder}\n"));
    }
    out.push_str(&format!("  log        {}\n\n", s.log_path));
    out.push_str(&render::history::history(&loaded.records, style));
    out.push('\n');
    if loaded.todos.is_empty() {
        out.push_str("  No todo list.\n");
    } else {
        out.push_str(&render::checklist(&loaded.todos, style));
        out.push('\n');
    }
    out
}
