//! `pod show`: a session's history and current todos, read from its log.

use crate::cli::ShowArgs;
use crate::error::Outcome;
use crate::render;
use crate::style::Style;
use anyhow::{Context, Result};
use pod_launch::sessions::{self as session, Loaded, Summary};
use pod_llm::Item;
use pod_tools::TodoItem;
use serde::Serialize;

/// `pod show --json`: one document.
#[derive(Serialize)]
struct ShowJson<'a> {
    session: &'a Summary,
    todos: &'a [TodoItem],
    /// The sessions its `task` calls started.
    children: &'a [Summary],
    /// The full history, as `PodHandle::get_history` returns it.
    history: Vec<Item>,
    /// Every question asked to a person, in log order.
    questions: Vec<&'a pod::log::QuestionRecord>,
    /// Every answer recorded (an answer given while parked is recorded
    /// again, not pending, when the session acts on it).
    answers: Vec<&'a pod::log::AnswerRecord>,
    /// What its system prompt was made of: the agent, the instruction
    /// files (their text is the log's), the skills.
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt: Option<serde_json::Value>,
}

/// The prompt's parts as `show --json` lists them: names and sizes, not
/// the texts.
fn prompt_json(loaded: &Loaded) -> Option<serde_json::Value> {
    let prompt = loaded.launch.as_ref()?.prompt.as_ref()?;
    if prompt.is_empty() {
        return None;
    }
    Some(serde_json::json!({
        "system_prompt": prompt.system_prompt.as_ref().map(|t| &t.source),
        "agent": prompt.agent.as_ref().map(|a| &a.name),
        "instructions": prompt.instructions.iter().map(|t| serde_json::json!({
            "source": t.source,
            "bytes": t.text.len(),
        })).collect::<Vec<_>>(),
        "left_out": prompt.left_out,
        "agents": prompt.agents.iter().map(|a| &a.name).collect::<Vec<_>>(),
        "skills": prompt.skills.iter().map(|s| &s.name).collect::<Vec<_>>(),
    }))
}

/// The prompt's parts as the human view lists them.
fn prompt_lines(loaded: &Loaded) -> String {
    let Some(prompt) = loaded.launch.as_ref().and_then(|l| l.prompt.as_ref()) else {
        return String::new();
    };
    let mut out = String::new();
    let path = |p: &std::path::Path| render::safe::line(&p.display().to_string()).into_owned();
    if let Some(agent) = &prompt.agent {
        out.push_str(&format!(
            "  agent      {} ({})\n",
            render::safe::line(&agent.name),
            path(&agent.source)
        ));
    }
    if let Some(own) = &prompt.system_prompt {
        out.push_str(&format!("  prompt     {}\n", path(&own.source)));
    }
    for (at, file) in prompt.instructions.iter().enumerate() {
        let label = if at == 0 { "instructed" } else { "" };
        out.push_str(&format!(
            "  {label:<10} {} ({} bytes)\n",
            path(&file.source),
            file.text.len()
        ));
    }
    for file in &prompt.left_out {
        out.push_str(&format!("  left out   {} (over the cap)\n", path(file)));
    }
    if !prompt.skills.is_empty() {
        let names: Vec<String> = prompt
            .skills
            .iter()
            .map(|s| render::safe::line(&s.name).into_owned())
            .collect();
        out.push_str(&format!("  skills     {}\n", names.join(", ")));
    }
    out
}

/// Prints one session.
pub async fn run(args: ShowArgs, place: super::Place) -> Result<Outcome> {
    let store = place.store.as_ref();
    let id = session::resolve(store, &args.id).await?;
    let loaded = session::load(store, id).await?;
    if args.follow {
        return follow(store, id, loaded, args.json).await;
    }
    let children = children(store, &loaded).await;
    if args.json {
        let doc = ShowJson {
            session: &loaded.summary,
            todos: &loaded.todos,
            children: &children,
            history: loaded.full_history(),
            questions: loaded
                .records
                .iter()
                .filter_map(|r| match r {
                    pod::log::LogRecord::Question(q) => Some(q),
                    _ => None,
                })
                .collect(),
            answers: loaded
                .records
                .iter()
                .filter_map(|r| match r {
                    pod::log::LogRecord::Answer(a) => Some(a),
                    _ => None,
                })
                .collect(),
            prompt: prompt_json(&loaded),
        };
        let json = crate::render::safe::json(&doc, true).context("cannot encode the session")?;
        crate::output::print(&format!("{json}\n"))?;
    } else {
        let files = files_per_call(&place, &loaded).await;
        crate::output::print(&human(&loaded, &children, &files, Style::for_stdout()))?;
    }
    Ok(Outcome::Done)
}

/// How often `--follow` reads the store for new records.
const FOLLOW_POLL: std::time::Duration = std::time::Duration::from_millis(250);

/// Prints the session, then its new records as they commit, until nobody
/// holds the session and it is not queued.
///
/// The watcher polls the store by sequence (the records after those it
/// has seen) instead of listening for notifications: it works the same on
/// both stores and across machines, a watcher that falls behind or
/// reconnects catches up from where it was, and writers pay nothing for it.
async fn follow(
    store: &dyn pod::SessionStore,
    id: uuid::Uuid,
    loaded: Loaded,
    json: bool,
) -> Result<Outcome> {
    let style = Style::for_stdout();
    let mut seen = loaded.records.len();
    if json {
        for (index, record) in loaded.records.iter().enumerate() {
            print_json_record(index + 1, record)?;
        }
    } else {
        // Followed live: what calls change shows in `pod diff`.
        let files = std::collections::HashMap::new();
        crate::output::print(&head_and_history(&loaded, &files, style))?;
    }
    let mut numbered = render::history::Numbered::after(loaded.summary.items);
    loop {
        // Who holds it first, then the records: once nobody holds it,
        // everything it committed is in what we read next.
        let stat = store.stat(id).await?;
        let new = store.read_after(id, seen).await?;
        for (index, record) in new.iter().enumerate() {
            match json {
                true => print_json_record(seen + index + 1, record)?,
                false => {
                    crate::output::print(&numbered.render(std::slice::from_ref(record), style))?
                }
            }
        }
        seen += new.len();
        if stat.holder.is_none() && !stat.queued {
            break;
        }
        tokio::time::sleep(FOLLOW_POLL).await;
    }
    if !json {
        let last = session::load(store, id).await?;
        crate::output::print(&format!(
            "\n{} {}\n{}\n",
            style.bold("ended"),
            last.summary.status.as_str(),
            render::checklist(&last.todos, style)
        ))?;
    }
    Ok(Outcome::Done)
}

fn print_json_record(seq: usize, record: &pod::log::LogRecord) -> Result<()> {
    let line = serde_json::json!({ "seq": seq, "record": record });
    let line = crate::render::safe::json(&line, false).context("cannot encode a record")?;
    crate::output::print(&format!("{line}\n"))
}

/// The sessions the `task` calls of this one started (their ids derive
/// from the calls'), in call order; a call whose child has no log yet is
/// left out.
async fn children(store: &dyn pod::SessionStore, loaded: &Loaded) -> Vec<Summary> {
    let mut children = Vec::new();
    for item in loaded.full_history() {
        for call in item.tool_calls().iter().filter(|c| c.name == pod::TASK) {
            let child = pod::child_session_id(loaded.summary.id, &call.id);
            if let Ok(child) = session::load(store, child).await {
                children.push(child.summary);
            }
        }
    }
    children
}

/// The human form: a head, the numbered history, the subagents, the todos.
/// What each call changed in the workspace, by call id, from its two
/// checkpoints: `M a.txt, A b.txt`. Empty when the checkpoints cannot be
/// read (a store on another machine): the history shows without them.
async fn files_per_call(
    place: &super::Place,
    loaded: &Loaded,
) -> std::collections::HashMap<String, String> {
    use pod::log::{CheckpointPhase, LogRecord};
    let shadow = pod::checkpoints::shadow(
        &place.home,
        loaded.summary.id,
        loaded.header.workspace.clone(),
    );
    let mut before: std::collections::HashMap<&str, &str> = Default::default();
    let mut files = std::collections::HashMap::new();
    for record in &loaded.records {
        let LogRecord::Checkpoint(c) = record else {
            continue;
        };
        match c.phase {
            CheckpointPhase::Before => {
                before.insert(c.call_id.as_str(), c.tree.as_str());
            }
            CheckpointPhase::After => {
                let Some(from) = before.get(c.call_id.as_str()).filter(|t| **t != c.tree) else {
                    continue;
                };
                let Ok(changes) = shadow.changes(from, &c.tree).await else {
                    return files;
                };
                let mut listed: Vec<String> = changes
                    .iter()
                    .take(10)
                    .map(|change| format!("{} {}", change.status, change.path))
                    .collect();
                if changes.len() > 10 {
                    listed.push(format!("and {} more", changes.len() - 10));
                }
                files.insert(c.call_id.clone(), listed.join(", "));
            }
        }
    }
    files
}

fn human(
    loaded: &Loaded,
    children: &[Summary],
    files: &std::collections::HashMap<String, String>,
    style: Style,
) -> String {
    let mut out = head_and_history(loaded, files, style);
    out.push('\n');
    if !children.is_empty() {
        out.push_str(&format!("  {}\n", style.bold("subagents:")));
        for child in children {
            let task = child
                .parent
                .as_ref()
                .map(|link| link.description.as_str())
                .unwrap_or_default();
            out.push_str(&format!(
                "  {}  {:<17}  {:<5}  {}\n",
                child.id,
                child.status.as_str(),
                match child.todos.total {
                    0 => "-".to_string(),
                    total => format!("{}/{total}", child.todos.completed),
                },
                render::shorten(task, 60)
            ));
        }
        out.push('\n');
    }
    if loaded.todos.is_empty() {
        out.push_str("  No todo list.\n");
    } else {
        out.push_str(&render::checklist(&loaded.todos, style));
        out.push('\n');
    }
    out
}

/// The head and the numbered history.
fn head_and_history(
    loaded: &Loaded,
    files: &std::collections::HashMap<String, String>,
    style: Style,
) -> String {
    let s = &loaded.summary;
    let mut out = format!(
        "{} {}  {}\n",
        style.bold("session"),
        s.id,
        style.bold(s.status.as_str())
    );
    out.push_str(&format!("  model      {}\n", render::safe::line(&s.model)));
    out.push_str(&format!(
        "  workspace  {}\n",
        render::safe::line(&s.workspace.display().to_string())
    ));
    // Sessions from before the sandbox existed record none.
    if let Some(sandbox) = loaded.launch.as_ref().and_then(|launch| launch.sandbox) {
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
    if let Some(parent) = &s.parent {
        out.push_str(&format!(
            "  subagent   of {} (call {}): {}\n",
            parent.session_id, parent.call_id, parent.description
        ));
    }
    if let Some(origin) = &s.origin {
        out.push_str(&format!("  started by {origin}\n"));
    }
    if let Some(fork) = &s.forked_from {
        out.push_str(&format!(
            "  forked     from {} at item {}\n",
            fork.id, fork.at
        ));
    }
    out.push_str(&format!(
        "  tokens     {}\n",
        render::usage(&s.usage, s.cost.map(pod_llm::Cost::amount))
    ));
    if let Some(holder) = &s.holder {
        out.push_str(&format!("  held by    {holder}\n"));
    }
    if let Some(question) = &s.question {
        out.push_str(&format!(
            "  waiting    since {} for an answer: {}\n             answer with: pod approve {} allow|deny|always|never\n",
            question
                .asked_at
                .with_timezone(&chrono::Local)
                .format("%Y-%m-%d %H:%M:%S"),
            render::safe::line(&question.request.summary),
            s.id
        ));
    }
    if let Some(tree) = loaded.launch.as_ref().and_then(|l| l.worktree.clone()) {
        out.push_str(&format!(
            "  worktree   branch {} of {}\n",
            render::safe::line(&tree.branch),
            render::safe::line(&tree.repo.display().to_string())
        ));
    }
    out.push_str(&prompt_lines(loaded));
    out.push_str(&format!("  log        {}\n\n", s.log_path));
    out.push_str(&render::history::history_with_files(
        &loaded.records,
        files,
        style,
    ));
    out
}
