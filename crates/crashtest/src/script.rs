//! The long scripted session the harness runs: a plan of N items worked
//! through with workspace tools (read-only, so a step played twice has no
//! effect on disk) and `todo_write` updates, with a few rejected
//! `todo_write` calls and unknown tools mixed in, and a tail that completes
//! the plan again in case a kill swallowed the completing update.

use crate::rng::Rng;
use serde_json::{json, Value};
use std::io;
use std::path::Path;

/// The script's model name (recorded in the session header).
pub const MODEL: &str = "crashtest";

/// A generated session: the script JSON and how many steps it has.
#[derive(Debug, Clone)]
pub struct SessionScript {
    /// The script, in the format `--provider scripted --script` reads.
    pub script: Value,
    /// Number of steps.
    pub steps: usize,
}

/// Writes the files the workspace tools read: `notes/item-NN.md` per item
/// and a README.
pub fn write_workspace(dir: &Path, items: usize) -> io::Result<()> {
    let notes = dir.join("notes");
    std::fs::create_dir_all(&notes)?;
    std::fs::write(dir.join("README.md"), "# crashtest workspace\n")?;
    for i in 1..=items {
        let body = format!(
            "# Item {i:02}\n\nitem-{i:02} needs a check.\nstatus: open\nowner: crashtest\n"
        );
        std::fs::write(notes.join(format!("item-{i:02}.md")), body)?;
    }
    Ok(())
}

/// The plan with items `1..=done` completed and the next one in progress.
pub fn plan(items: usize, done: usize) -> Value {
    let todos: Vec<Value> = (1..=items)
        .map(|i| {
            let status = if i <= done {
                "completed"
            } else if i == done + 1 {
                "in_progress"
            } else {
                "pending"
            };
            json!({"id": format!("t{i:02}"), "content": format!("Check item {i:02}"), "status": status})
        })
        .collect();
    json!({ "todos": todos })
}

pub(crate) fn todo_call(arguments: Value) -> Value {
    json!({"name": "todo_write", "arguments": arguments})
}

/// A workspace tool call about item `i`, chosen by `rng`.
pub(crate) fn workspace_call(rng: &mut Rng, i: usize) -> Value {
    match rng.below(4) {
        0 => json!({"name": "read_file", "arguments": {"path": format!("notes/item-{i:02}.md")}}),
        1 => {
            json!({"name": "grep", "arguments": {"pattern": format!("item-{i:02}"), "path": "notes"}})
        }
        2 => json!({"name": "glob", "arguments": {"pattern": format!("notes/item-{i:02}*")}}),
        _ => json!({"name": "list_dir", "arguments": {"path": "notes"}}),
    }
}

/// A `todo_write` the tool rejects (its result is an error): replay and the
/// oracle must both ignore it.
fn rejected_todo_call(rng: &mut Rng, items: usize, done: usize) -> Value {
    match rng.below(3) {
        // Two items in progress.
        0 => {
            let mut list = plan(items, done);
            if let Some(todos) = list["todos"].as_array_mut() {
                for todo in todos.iter_mut() {
                    todo["status"] = json!("in_progress");
                }
            }
            todo_call(list)
        }
        // Not JSON at all.
        1 => json!({"name": "todo_write", "raw_arguments": "{\"todos\": [ {\"id\": \"t01\""}),
        // Duplicate ids.
        _ => todo_call(json!({"todos": [
            {"id": "dup", "content": "one", "status": "pending"},
            {"id": "dup", "content": "two", "status": "pending"}
        ]})),
    }
}

/// Generates the session for a plan of `items` items.
pub fn generate(rng: &mut Rng, items: usize) -> SessionScript {
    let mut steps: Vec<Value> = Vec::new();
    let mut step = |text: String, calls: Vec<Value>, rng: &mut Rng| {
        let mut step = json!({ "text": text, "tool_calls": calls });
        // Now and then a short wait before the answer, so time-based kills
        // also land while a request is in flight.
        if rng.one_in(6) {
            step["delay_ms"] = json!(rng.range(1, 8));
        }
        steps.push(step);
    };
    step(
        format!("I'll plan the {items} checks."),
        vec![todo_call(plan(items, 0))],
        rng,
    );
    for i in 1..=items {
        let calls = (0..rng.range(1, 3))
            .map(|_| workspace_call(rng, i))
            .collect();
        step(format!("Looking at item {i:02}."), calls, rng);
        if rng.one_in(5) {
            let bad = rejected_todo_call(rng, items, i);
            step(format!("Updating the plan for {i:02}."), vec![bad], rng);
        }
        if rng.one_in(7) {
            let unknown = json!({"name": "no_such_tool", "arguments": {"item": i}});
            step(String::new(), vec![unknown], rng);
        }
        // Mark item i done together with a last look (a batch of several
        // calls: todo_write alone, then the read-only ones together).
        let mut calls = vec![todo_call(plan(items, i))];
        if rng.one_in(2) {
            calls.push(workspace_call(rng, i));
            calls.push(workspace_call(rng, i));
        }
        step(format!("Item {i:02} is checked."), calls, rng);
    }
    // The tail: a kill can swallow the completing update (its result becomes
    // "interrupted"); each repetition completes the plan again.
    for _ in 0..3 {
        step(String::new(), vec![todo_call(plan(items, items))], rng);
        step(format!("All {items} items are checked."), Vec::new(), rng);
    }
    let count = steps.len();
    SessionScript {
        script: json!({ "model": MODEL, "steps": steps }),
        steps: count,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_tools::{parse_todo_write, TodoStatus};

    #[test]
    fn the_plan_is_a_valid_todo_list_and_rejected_calls_are_rejected() {
        let list = parse_todo_write(&plan(20, 5).to_string()).unwrap();
        assert_eq!(list.len(), 20);
        assert_eq!(list[4].status, TodoStatus::Completed);
        assert_eq!(list[5].status, TodoStatus::InProgress);
        let mut rng = Rng::new(1);
        for _ in 0..30 {
            let call = rejected_todo_call(&mut rng, 20, 3);
            let raw = match call.get("raw_arguments") {
                Some(raw) => raw.as_str().unwrap().to_string(),
                None => call["arguments"].to_string(),
            };
            assert!(parse_todo_write(&raw).is_err(), "{raw}");
        }
    }

    #[test]
    fn generation_is_deterministic_per_seed() {
        let a = generate(&mut Rng::new(3), 20);
        let b = generate(&mut Rng::new(3), 20);
        assert_eq!(a.script, b.script);
        assert!(a.steps > 40);
    }
}
