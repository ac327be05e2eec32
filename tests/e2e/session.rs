//! A whole session: a scripted model plans with `todo_write`, works through
//! the plan with another tool, updates the plan and finishes.

use pod::log::LogRecord;
use pod_llm::{validate_history, Item, ItemKind, ScriptStep, ScriptedProvider};
use pod_testkit::tools::Echo;
use pod_tools::{TodoItem, TodoStatus, TodoStore, TodoWriteTool, TODO_WRITE};
use pod_worker::{
    NoopInterceptor, NullObserver, ToolRegistry, TurnEndReason, Worker, WorkerConfig,
};
use serde_json::{json, Value};
use std::fmt::Write;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

fn plan(statuses: [&str; 3]) -> Value {
    json!({"todos": [
        {"id": "inventory", "content": "List every test file", "status": statuses[0]},
        {"id": "config", "content": "Add the config file", "status": statuses[1]},
        {"id": "rewrite", "content": "Rewrite the mocks", "status": statuses[2]}
    ]})
}

fn worker(provider: &ScriptedProvider, store: &TodoStore) -> Worker {
    let mut tools = ToolRegistry::new();
    tools
        .register(TodoWriteTool::new(store.clone()))
        .register(Echo::default());
    Worker::new(Arc::new(provider.clone()), tools, WorkerConfig::default())
}

/// The history as the model reads it, one line per item.
fn transcript(items: &[Item]) -> String {
    let mut out = String::new();
    for item in items {
        let line = match &item.kind {
            ItemKind::User { text } => format!("user: {text}"),
            ItemKind::Assistant {
                text, tool_calls, ..
            } => {
                let mut line = "assistant:".to_string();
                if !text.is_empty() {
                    let _ = write!(line, " {text}");
                }
                for call in tool_calls {
                    let _ = write!(
                        line,
                        "\n  call {} {} {}",
                        call.id, call.name, call.arguments
                    );
                }
                line
            }
            ItemKind::ToolResult {
                call_id,
                content,
                is_error,
                ..
            } => {
                format!("result {call_id} (error: {is_error}):\n{content}")
            }
            ItemKind::System { kind, text } => format!("system {kind:?}: {text}"),
        };
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The plan a resumed Pod would rebuild from this history.
fn replay(history: &[Item]) -> Vec<TodoItem> {
    let records: Vec<LogRecord> = history.iter().cloned().map(LogRecord::Item).collect();
    pod::replay::replay(&records).todos
}

fn todo(id: &str, content: &str, status: TodoStatus) -> TodoItem {
    TodoItem {
        id: id.into(),
        content: content.into(),
        status,
    }
}

#[tokio::test]
async fn the_model_plans_works_updates_the_plan_and_finishes() {
    let provider = ScriptedProvider::from_steps(vec![
        ScriptStep::tool_call(TODO_WRITE, plan(["in_progress", "pending", "pending"])),
        ScriptStep::tool_call("echo", json!({"text": "tests/a.rs\ntests/b.rs"})),
        ScriptStep::tool_call(TODO_WRITE, plan(["completed", "in_progress", "pending"]))
            .and_call("echo", json!({"text": "config written"})),
        ScriptStep::tool_call(TODO_WRITE, plan(["completed", "completed", "completed"])),
        ScriptStep::text("All three steps are done."),
    ]);
    let store = TodoStore::new();
    let mut worker = worker(&provider, &store);
    let outcome = worker
        .run_turn(
            Some(Item::user("Migrate the tests")),
            &mut NoopInterceptor,
            &mut NullObserver,
            &CancellationToken::new(),
        )
        .await
        .unwrap();

    assert_eq!(outcome.reason, TurnEndReason::EndTurn);
    assert_eq!(outcome.requests, 5);
    validate_history(worker.history()).unwrap();
    let done = vec![
        todo("inventory", "List every test file", TodoStatus::Completed),
        todo("config", "Add the config file", TodoStatus::Completed),
        todo("rewrite", "Rewrite the mocks", TodoStatus::Completed),
    ];
    assert_eq!(store.snapshot(), done);
    assert_eq!(replay(worker.history()), done);

    let requests = provider.requests();
    assert_eq!(requests.len(), 5);
    let tool_names: Vec<&str> = requests[0].tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tool_names, [TODO_WRITE, "echo"]);
    // The second request ends with the readback of the first plan.
    assert_eq!(
        requests[1].history.last().unwrap().kind,
        ItemKind::ToolResult {
            call_id: "call_0_0".into(),
            content: "Todo list (0 of 3 completed):\n\
                      [>] inventory: List every test file\n\
                      [ ] config: Add the config file\n\
                      [ ] rewrite: Rewrite the mocks"
                .into(),
            is_error: false,
            meta: None,
        }
    );
    // The last request saw the whole session.
    assert_eq!(
        requests[4].history[..],
        worker.history()[..worker.history().len() - 1]
    );
    insta::assert_snapshot!(transcript(worker.history()));
}

#[tokio::test]
async fn a_rejected_plan_leaves_the_store_and_the_model_reads_why() {
    let provider = ScriptedProvider::from_steps(vec![
        ScriptStep::tool_call(TODO_WRITE, plan(["in_progress", "pending", "pending"])),
        ScriptStep::tool_call(TODO_WRITE, plan(["in_progress", "in_progress", "pending"])),
        ScriptStep::tool_call(TODO_WRITE, plan(["completed", "in_progress", "pending"])),
        ScriptStep::text("Working on the config."),
    ]);
    let store = TodoStore::new();
    let mut worker = worker(&provider, &store);
    worker
        .run_turn(
            Some(Item::user("Go")),
            &mut NoopInterceptor,
            &mut NullObserver,
            &CancellationToken::new(),
        )
        .await
        .unwrap();
    validate_history(worker.history()).unwrap();
    let requests = provider.requests();
    let ItemKind::ToolResult {
        content, is_error, ..
    } = &requests[2].history.last().unwrap().kind
    else {
        panic!("the third request ends with a tool result");
    };
    assert!(is_error);
    assert!(
        content.contains(
            "todos[1] (id \"config\") is in_progress but todos[0] (id \"inventory\") already is"
        ),
        "{content}"
    );
    assert_eq!(store.snapshot()[1].status, TodoStatus::InProgress);
    assert_eq!(store.snapshot()[0].status, TodoStatus::Completed);
    // Replay skips the rejected call, as the tool did.
    assert_eq!(replay(worker.history()), store.snapshot());
}
