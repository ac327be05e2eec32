//! Properties over generated input: `todo_write` accepts exactly the valid
//! lists, the log codec round-trips every item, and replaying any prefix of a
//! session (whole, or record by record as a watcher does) gives the todos the
//! live session had at that point.

use pod::log::{decode_line, encode_line, LogRecord};
use pod::replay::{replay, TodoReplay};
use pod_llm::{Item, ItemKind, Reasoning, SystemKind, ToolCall, Usage};
use pod_tools::{TodoItem, TodoStatus, TodoStore, TodoWriteTool};
use pod_worker::{DynTool, ToolContext};
use proptest::prelude::*;
use serde_json::{json, Value};
use std::collections::HashSet;
use tokio_util::sync::CancellationToken;

/// Strings that hit the rules: empty, blank, short, unicode, exactly 1000 and
/// over 1000 characters.
fn content() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        Just("   ".to_string()),
        "[a-z ]{1,20}",
        "\\PC{1,12}",
        Just("é".repeat(1000)),
        Just("x".repeat(1001)),
    ]
}

/// A todo as JSON: mostly well-formed, sometimes with a bad status, a
/// missing or mistyped field, or extra fields.
fn raw_todo() -> impl Strategy<Value = Value> {
    let id = prop_oneof![Just(String::new()), "[a-d]", "[a-z]{2,6}"];
    let status = prop_oneof![
        4 => Just("pending"),
        3 => Just("in_progress"),
        4 => Just("completed"),
        1 => Just("done"),
    ];
    (id, content(), status, 0..12u8).prop_map(|(id, content, status, quirk)| match quirk {
        0 => json!({"id": id, "content": content}),
        1 => json!({"id": 7, "content": content, "status": status}),
        2 => json!({"id": id, "content": content, "status": status, "priority": "high"}),
        _ => json!({"id": id, "content": content, "status": status}),
    })
}

fn todo_args() -> impl Strategy<Value = Value> {
    prop_oneof![
        10 => prop::collection::vec(raw_todo(), 0..8).prop_map(|todos| json!({"todos": todos})),
        1 => prop::collection::vec(raw_todo(), 99..102).prop_map(|todos| json!({"todos": todos})),
        1 => Just(json!({"todos": "not a list"})),
        1 => Just(json!([1, 2])),
        1 => Just(json!({"items": []})),
    ]
}

/// An independent statement of the rules, used as the oracle.
fn oracle(args: &Value) -> Option<Vec<TodoItem>> {
    let todos = args.get("todos")?.as_array()?;
    if todos.len() > 100 {
        return None;
    }
    let mut seen = HashSet::new();
    let mut in_progress = 0;
    let mut out = Vec::new();
    for todo in todos {
        let id = todo.get("id")?.as_str()?;
        let content = todo.get("content")?.as_str()?;
        let status = match todo.get("status")?.as_str()? {
            "pending" => TodoStatus::Pending,
            "in_progress" => TodoStatus::InProgress,
            "completed" => TodoStatus::Completed,
            _ => return None,
        };
        let ok = !id.trim().is_empty()
            && seen.insert(id.to_string())
            && !content.trim().is_empty()
            && content.chars().count() <= 1000;
        if !ok {
            return None;
        }
        in_progress += usize::from(status == TodoStatus::InProgress);
        out.push(TodoItem {
            id: id.into(),
            content: content.into(),
            status,
        });
    }
    (in_progress <= 1).then_some(out)
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn todo_write_accepts_exactly_the_valid_lists(before in todo_args(), args in todo_args()) {
        let store = TodoStore::new();
        let tool = TodoWriteTool::new(store.clone());
        let ctx = || ToolContext { call_id: "c".into(), cancel: CancellationToken::new() };
        let rt = runtime();
        // Each result is committed, as the worker does once the log has it.
        let commit = |arguments: &str, output: &pod_worker::ToolOutput| {
            if let Some(state) = pod_worker::Tool::state(&tool) {
                state.apply(&pod_worker::CommittedCall {
                    call_id: "c",
                    name: pod_tools::TODO_WRITE,
                    arguments,
                    content: &output.content,
                    is_error: output.is_error,
                    meta: output.meta.as_ref(),
                });
            }
        };
        let first = rt.block_on(tool.call_json(&before.to_string(), ctx()));
        commit(&before.to_string(), &first);
        let old = store.snapshot();
        let output = rt.block_on(tool.call_json(&args.to_string(), ctx()));
        commit(&args.to_string(), &output);
        match oracle(&args) {
            Some(expected) => {
                prop_assert!(!output.is_error, "{}", output.content);
                prop_assert_eq!(store.snapshot(), expected.clone());
                prop_assert!(output.content.starts_with(&pod_tools::render_todos(&expected)));
            }
            None => {
                prop_assert!(output.is_error, "accepted an invalid list: {}", args);
                prop_assert_eq!(store.snapshot(), old);
            }
        }
    }
}

fn item() -> impl Strategy<Value = Item> {
    let text = "\\PC{0,40}|[\"\\\\\n\r\t{}]{0,8}";
    let call = (text, text, text).prop_map(|(id, name, arguments)| ToolCall {
        id,
        name,
        arguments,
    });
    let kind = prop_oneof![
        text.prop_map(|text| ItemKind::User { text }),
        (
            text,
            prop::option::of((text, prop::option::of(text))),
            prop::collection::vec(call, 0..3),
            prop::option::of((0..u64::MAX, 0..u64::MAX)),
        )
            .prop_map(|(text, reasoning, tool_calls, usage)| ItemKind::Assistant {
                text,
                reasoning: reasoning.map(|(text, signature)| Reasoning { text, signature }),
                tool_calls,
                usage: usage.map(|(p, c)| Usage {
                    prompt_tokens: p,
                    completion_tokens: c,
                    ..Default::default()
                }),
            }),
        (text, text, any::<bool>(), prop::option::of(text)).prop_map(
            |(call_id, content, is_error, meta)| ItemKind::ToolResult {
                call_id,
                content,
                is_error,
                meta: meta.map(|m| pod_llm::Meta::from(&json!({"note": m}))),
            }
        ),
        (0..5u8, text).prop_map(|(k, text)| ItemKind::System {
            kind: [
                SystemKind::Reminder,
                SystemKind::Notification,
                SystemKind::Summary,
                SystemKind::CarryOver,
                SystemKind::Other,
            ][usize::from(k)],
            text,
        }),
    ];
    kind.prop_map(Item::new)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn the_log_codec_round_trips_every_item(item in item()) {
        let record = LogRecord::Item(item);
        let line = encode_line(&record).expect("encode");
        prop_assert_eq!(line.iter().filter(|&&b| b == b'\n').count(), 1);
        prop_assert_eq!(line.last(), Some(&b'\n'));
        prop_assert_eq!(decode_line(&line[..line.len() - 1]).expect("decode"), record);
    }
}

/// One model response: a `todo_write` with generated arguments (or raw text),
/// optionally beside another call.
fn response() -> impl Strategy<Value = (Option<Value>, bool, bool)> {
    (prop::option::of(todo_args()), any::<bool>(), any::<bool>())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]

    #[test]
    fn replay_of_any_prefix_gives_the_live_todos(responses in prop::collection::vec(response(), 1..8)) {
        use pod_llm::{ScriptStep, ScriptedProvider};
        use pod_worker::{PersistError, ToolRegistry, TurnObserver, Worker, WorkerConfig};
        use std::sync::Arc;

        /// Records, as each item is committed, what the live store holds.
        struct Snapshots { store: TodoStore, after: Vec<Vec<TodoItem>> }
        #[async_trait::async_trait]
        impl TurnObserver for Snapshots {
            async fn on_history_append(&mut self, _item: &Item) -> Result<(), PersistError> {
                // A result takes effect once saved, right after this call:
                // the store holds the effect of the items before this one.
                self.after.push(self.store.snapshot());
                Ok(())
            }
        }

        let mut steps: Vec<ScriptStep> = responses
            .iter()
            .map(|(args, malformed, with_echo)| {
                let step = match (args, malformed) {
                    (_, true) => ScriptStep::default().and_raw_call("todo_write", "{\"todos\": [{"),
                    (Some(args), false) => ScriptStep::tool_call("todo_write", args.clone()),
                    (None, false) => ScriptStep::text("thinking"),
                };
                if *with_echo { step.and_call("no_such_tool", json!({})) } else { step }
            })
            .collect();
        steps.push(ScriptStep::text("done"));
        let store = TodoStore::new();
        let mut tools = ToolRegistry::new();
        tools.register(TodoWriteTool::new(store.clone()));
        let provider = Arc::new(ScriptedProvider::from_steps(steps));
        let config = WorkerConfig {
            budget: pod_worker::Budget { requests_per_turn: 20, ..Default::default() },
            ..WorkerConfig::default()
        };
        let mut worker = Worker::new(provider, tools, config);
        let mut observer = Snapshots { store: store.clone(), after: Vec::new() };
        let rt = runtime();
        rt.block_on(worker.run_turn(
            Some(Item::user("go")),
            &mut pod_worker::NoopInterceptor,
            &mut observer,
            &CancellationToken::new(),
        )).expect("turn");
        let history = worker.history().to_vec();
        // `live[i]` is the live list once items 0..i were committed.
        let mut live: Vec<Vec<TodoItem>> = observer.after;
        prop_assert_eq!(live.first(), Some(&Vec::new()));
        live.push(store.snapshot());
        let mut watched = TodoReplay::default();
        for cut in 0..=history.len() {
            let records: Vec<LogRecord> = history[..cut].iter().cloned().map(LogRecord::Item).collect();
            prop_assert_eq!(&replay(&records).todos, &live[cut], "prefix of {} items", cut);
            if let Some(last) = records.last() {
                watched.observe(last);
            }
            prop_assert_eq!(&watched.todos(), &live[cut], "{} items one by one", cut);
        }
    }
}
