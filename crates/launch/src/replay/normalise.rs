//! A log's records as replay compares them: what the runtime decided, with
//! what legitimately differs between a recording and its replay taken out.
//!
//! The rules (docs/replay.md repeats them for operators):
//! - Left out: the header (the session's id, time, workspace and launch
//!   are the replay's own) and trace records (span ids).
//! - Every record: ids and times that are minted fresh (`id` and `at` of
//!   items, a question's `id`, `asked_at` and `expires_at`, an answer's
//!   `question` and `at`).
//! - An answer: who gave it and through what (`by`, `via`, `from`,
//!   `pending`): the replay answers every question itself, with the
//!   recorded decision.
//! - A hook record: the commands that ran (`hooks`): what is compared is
//!   what they decided, so another hook that decides the same is the same.
//! - A checkpoint: the tree id and the files skipped for their size: the
//!   workspace's state is judged by what the tools read and returned, so
//!   a what-if workspace that differs in a file nobody read is the same.
//! - A file tool's stamp: the file's modification time (`mtime_ns`); its
//!   content hash and size stay.
//! - An ended record's partial answer: whether there was one, not its id.
//! - Left out: an answer given while the session was parked (the same
//!   answer is recorded again when the call runs);
//!   the end of a run a person stopped (interrupted, cancelled:
//!   a replay is never stopped, and its cut answer reports no usage, as the
//!   recording's did not), and the checkpoint a rewind gives its fork.
//! - The end of a run whose model request failed (a 401, an unreachable
//!   server): that it failed there, not the server's words (the replay's
//!   model fails the request at the same point).
//! - A verification round: which answer it verified, and its checks'
//!   durations and output (a test runner prints its timings): what is
//!   compared is each check's command and how it ended, and the grader's
//!   verdict and reasons (a replay plays them back: it asks no model).
//! - Every string: the replay's workspace path reads as the recorded one,
//!   and the replay's session ids (the root's and its subagents') as the
//!   recorded ones.
//! - Added: after each `todo_write` result, the plan it left (`plan`).

use pod::log::{EndedHow, LogRecord};
use pod::replay::TodoReplay;
use pod_llm::ItemKind;
use serde_json::Value;
use std::collections::HashMap;

/// One compared record.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    /// Its item number as `pod show` prints it: the item itself, or the
    /// last item before a record that is not one (0 before the first).
    pub item: usize,
    /// Its 1-based position among the log's records after the header.
    pub record: usize,
    /// What it says, normalised.
    pub value: Value,
}

/// Rewrites the replay's names (its workspace path, its session ids) into
/// the recording's, so they compare equal.
#[derive(Debug, Clone, Default)]
pub(crate) struct Renames {
    pairs: Vec<(String, String)>,
}

impl Renames {
    /// Reads `from` (the replay's) as `to` (the recording's). Longer names
    /// are replaced first, so a path is never cut by its own prefix.
    pub fn add(&mut self, from: impl Into<String>, to: impl Into<String>) {
        let (from, to) = (from.into(), to.into());
        if from.is_empty() || from == to {
            return;
        }
        self.pairs.push((from, to));
        self.pairs
            .sort_by_key(|(from, _)| std::cmp::Reverse(from.len()));
    }

    fn apply(&self, value: &mut Value) {
        match value {
            Value::String(text) => {
                for (from, to) in &self.pairs {
                    if text.contains(from.as_str()) {
                        *text = text.replace(from.as_str(), to);
                    }
                }
            }
            Value::Array(values) => values.iter_mut().for_each(|v| self.apply(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.apply(v)),
            _ => {}
        }
    }
}

/// The compared records of a log: every record but those left out, with
/// `skip_calls` (calls a crash cut, see `driver`) not compared either.
pub(crate) fn entries(
    records: &[LogRecord],
    renames: &Renames,
    skip_calls: &[String],
) -> Vec<Entry> {
    let mut todos = TodoReplay::default();
    let mut tools: HashMap<String, String> = HashMap::new();
    let mut items = 0;
    let mut out = Vec::new();
    for (index, record) in records.iter().enumerate() {
        todos.observe(record);
        if let LogRecord::Item(item) = record {
            items += 1;
            if let ItemKind::Assistant { tool_calls, .. } = &item.kind {
                for call in tool_calls {
                    tools.insert(call.id.clone(), call.name.clone());
                }
            }
        }
        if skipped_call(record).is_some_and(|id| skip_calls.iter().any(|s| s == id)) {
            continue;
        }
        if matches!(record, LogRecord::Ended(ended)
            if ended.reason.as_deref().is_some_and(|r| r.contains(super::runs::CRASH)))
        {
            // The end of a run where the replay played the recording's crash.
            continue;
        }
        if matches!(record, LogRecord::Ended(ended)
            if matches!(ended.how, EndedHow::Interrupted | EndedHow::Cancelled))
        {
            // A person stopped the run (Ctrl-C, a cancel): a replay is
            // never stopped, and plays the cut answer as it was kept.
            continue;
        }
        if matches!(record, LogRecord::Answer(answer) if answer.pending) {
            // An answer given while the session was parked: it is recorded
            // again when the call runs, which is the one compared (a replay
            // answers at once, as a person at a terminal does).
            continue;
        }
        if matches!(record, LogRecord::Checkpoint(c) if c.tool == pod::checkpoints::REWIND) {
            // The files a rewind gave its fork: not a step of the session.
            continue;
        }
        let Some(mut value) = value_of(record) else {
            continue;
        };
        if let LogRecord::Ended(ended) = record {
            if super::runs::is_model_failure(&records[..index], ended) {
                // The model request failed: a 401, an unreachable server,
                // or the replay's model playing that failure. Which words
                // the error had is the server's, not the runtime's.
                value["ended"]["reason"] = Value::String("the model request failed".into());
            }
        }
        if let LogRecord::Item(item) = record {
            if let ItemKind::ToolResult { call_id, .. } = &item.kind {
                if tools.get(call_id).map(String::as_str) == Some(pod_tools::TODO_WRITE) {
                    let plan = serde_json::to_value(todos.todos()).unwrap_or(Value::Null);
                    if let Some(map) = value.get_mut("item").and_then(Value::as_object_mut) {
                        map.insert("plan".into(), plan);
                    }
                }
            }
        }
        renames.apply(&mut value);
        out.push(Entry {
            item: items,
            record: index + 1,
            value,
        });
    }
    out
}

/// The call a record is about, for the records a crash-cut call leaves
/// behind it (its hooks' decision, its checkpoints, its question).
fn skipped_call(record: &LogRecord) -> Option<&str> {
    match record {
        LogRecord::Hook(hook) => Some(&hook.call_id),
        LogRecord::Checkpoint(checkpoint) => Some(&checkpoint.call_id),
        LogRecord::Question(question) => Some(&question.request.call_id),
        LogRecord::Answer(answer) => Some(&answer.call_id),
        _ => None,
    }
}

/// A record's JSON without what legitimately differs; `None` for the
/// records left out.
pub(crate) fn value_of(record: &LogRecord) -> Option<Value> {
    if matches!(
        record,
        LogRecord::Header(_) | LogRecord::Trace(_) | LogRecord::Limits(_)
    ) {
        return None;
    }
    let mut value = serde_json::to_value(record).ok()?;
    let (kind, body) = value.as_object_mut()?.iter_mut().next()?;
    match kind.as_str() {
        "item" => item(body),
        "compaction" => {
            // What the summary cost is the provider's, not the runtime's.
            remove(body, &["usage"]);
            item(&mut body["summary"]);
            for list in ["tail", "carry_over"] {
                if let Some(items) = body[list].as_array_mut() {
                    items.iter_mut().for_each(item);
                }
            }
        }
        "question" => remove(body, &["id", "asked_at", "expires_at"]),
        "answer" => remove(body, &["question", "at", "by", "via", "from", "pending"]),
        "hook" => remove(body, &["at", "hooks"]),
        "checkpoint" => remove(body, &["tree", "skipped", "unindexed", "at"]),
        "verify" => verify(body),
        "ended" => {
            let partial = body.get("partial_answer").is_some();
            remove(body, &["at", "partial_answer"]);
            if partial {
                body["partial_answer"] = Value::Bool(true);
            }
        }
        _ => remove(body, &["at"]),
    }
    Some(value)
}

/// A verification round: what its checks and grader decided, not when,
/// how long, what they printed or what the grader cost.
fn verify(body: &mut Value) {
    remove(body, &["at", "answer"]);
    if let Some(checks) = body.get_mut("checks").and_then(Value::as_array_mut) {
        for check in checks {
            remove(check, &["duration_ms", "output_tail"]);
        }
    }
    if let Some(grader) = body.get_mut("grader") {
        let failed = grader.get("error").is_some();
        remove(grader, &["model", "usage", "cost", "error"]);
        if failed {
            grader["error"] = Value::Bool(true);
        }
    }
}

fn item(value: &mut Value) {
    remove(value, &["id", "at"]);
    // What failed checks told the model: their commands and how they
    // ended, not what they printed (a test runner prints its timings).
    if value["kind"] == "verification" {
        if let Some(text) = value["text"].as_str() {
            let kept: Vec<&str> = text.lines().filter(|l| l.starts_with("$ ")).collect();
            value["text"] = Value::String(kept.join("\n"));
        }
    }
    if let Some(file) = value.pointer_mut("/meta/file") {
        remove(file, &["mtime_ns"]);
    }
}

fn remove(value: &mut Value, keys: &[&str]) {
    if let Some(map) = value.as_object_mut() {
        for key in keys {
            map.shift_remove(*key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pod_llm::{Item, ToolCall};
    use serde_json::json;

    fn call(id: &str, name: &str, arguments: &str) -> LogRecord {
        LogRecord::Item(Item::new(ItemKind::Assistant {
            text: String::new(),
            reasoning: None,
            tool_calls: vec![ToolCall {
                id: id.into(),
                name: name.into(),
                arguments: arguments.into(),
            }],
            usage: None,
        }))
    }

    #[test]
    fn ids_times_and_mtimes_are_left_out_and_the_content_hash_stays() {
        let mut result = Item::tool_result("c1", "text in /tmp/replay-x/ws/a", false);
        if let ItemKind::ToolResult { meta, .. } = &mut result.kind {
            *meta = Some(pod_llm::Meta::from(&json!({"file": {
                "path": "a", "hash": "xxh3-128:1", "size": 4, "mtime_ns": 17}})));
        }
        let mut renames = Renames::default();
        renames.add("/tmp/replay-x/ws", "/home/me/project");
        let entries = entries(&[LogRecord::Item(result)], &renames, &[]);
        assert_eq!(
            entries[0].value,
            json!({"item": {"type": "tool_result", "call_id": "c1",
                "content": "text in /home/me/project/a", "is_error": false,
                "meta": {"file": {"path": "a", "hash": "xxh3-128:1", "size": 4}}}})
        );
    }

    #[test]
    fn a_todo_write_result_carries_the_plan_it_left() {
        let arguments = json!({"todos": [{"id": "1", "content": "read", "status": "in_progress"}]});
        let records = vec![
            LogRecord::Item(Item::user("go")),
            call("t1", pod_tools::TODO_WRITE, &arguments.to_string()),
            LogRecord::Item(Item::tool_result("t1", "ok", false)),
        ];
        let entries = entries(&records, &Renames::default(), &[]);
        assert_eq!(entries.len(), 3);
        assert_eq!((entries[2].item, entries[2].record), (3, 3));
        let plan = &entries[2].value["item"]["plan"];
        assert_eq!(plan[0]["content"], "read");
        assert_eq!(plan[0]["status"], "in_progress");
    }

    #[test]
    fn renames_replace_the_longest_name_first() {
        let mut renames = Renames::default();
        renames.add("/s", "/short");
        renames.add("/s/ws", "/work");
        let mut value = json!(["/s/ws/a and /s/b"]);
        renames.apply(&mut value);
        assert_eq!(value, json!(["/work/a and /short/b"]));
    }
}
