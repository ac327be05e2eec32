//! Pure mappings from Pod vocabulary to ACP's: plans, stop reasons, tool
//! calls. No IO, so each rule is tested on its own.

use agent_client_protocol::v1::schema::{
    Content, ContentBlock, Plan, PlanEntry, PlanEntryPriority, PlanEntryStatus, StopReason,
    TextContent, ToolCall, ToolCallContent, ToolCallLocation, ToolCallStatus, ToolCallUpdate,
    ToolCallUpdateFields, ToolKind,
};
use pod_tools::{TodoItem, TodoStatus, TODO_WRITE};
use pod_worker::TurnEndReason;
use serde_json::Value;

/// The whole todo list as an ACP plan: one entry per todo, in list order.
/// ACP requires a priority and pod has none, so every entry is `medium`;
/// todo ids stay internal.
pub fn plan(todos: &[TodoItem]) -> Plan {
    Plan::new(
        todos
            .iter()
            .map(|todo| {
                PlanEntry::new(
                    todo.content.clone(),
                    PlanEntryPriority::Medium,
                    plan_status(todo.status),
                )
            })
            .collect(),
    )
}

fn plan_status(status: TodoStatus) -> PlanEntryStatus {
    match status {
        TodoStatus::Pending => PlanEntryStatus::Pending,
        TodoStatus::InProgress => PlanEntryStatus::InProgress,
        TodoStatus::Completed => PlanEntryStatus::Completed,
    }
}

/// How a turn's end is reported to the client. ACP has five stop reasons;
/// the Pod's own interruptions (an interceptor aborting or pausing the turn)
/// are the agent deciding to stop, so they end the turn normally.
pub fn stop_reason(reason: &TurnEndReason) -> StopReason {
    match reason {
        TurnEndReason::EndTurn
        | TurnEndReason::Aborted(_)
        | TurnEndReason::Paused(_)
        | TurnEndReason::Parked(_)
        | TurnEndReason::Yielded(_)
        | TurnEndReason::Stalled
        | TurnEndReason::GoalUnmet(_) => StopReason::EndTurn,
        TurnEndReason::MaxTokens => StopReason::MaxTokens,
        TurnEndReason::Refusal | TurnEndReason::Rejected(_) => StopReason::Refusal,
        // Every budget limit: the client may prompt again to go on, with a
        // fresh budget.
        TurnEndReason::Limit(_) => StopReason::MaxTurnRequests,
        TurnEndReason::Cancelled => StopReason::Cancelled,
    }
}

/// The ACP kind of a tool, by name: editors pick icons and grouping from it.
pub fn tool_kind(name: &str) -> ToolKind {
    const KINDS: &[(&[&str], ToolKind)] = &[
        (&[TODO_WRITE], ToolKind::Think),
        (&["read", "view", "cat"], ToolKind::Read),
        (
            &["write", "edit", "patch", "replace", "create"],
            ToolKind::Edit,
        ),
        (&["delete", "remove"], ToolKind::Delete),
        (&["move", "rename"], ToolKind::Move),
        (
            &["grep", "search", "glob", "find", "list", "ls"],
            ToolKind::Search,
        ),
        (
            &["bash", "shell", "exec", "run", "command"],
            ToolKind::Execute,
        ),
        (&["fetch", "http", "web", "url"], ToolKind::Fetch),
    ];
    // An MCP tool (SERVER__TOOL) is known by its tool's name.
    let name = mcp_parts(name).map_or(name, |(_, tool)| tool);
    let name = name.to_ascii_lowercase();
    KINDS
        .iter()
        .find(|(words, _)| words.iter().any(|word| name.contains(word)))
        .map(|(_, kind)| *kind)
        .unwrap_or(ToolKind::Other)
}

/// A one-line title: the tool name and its most telling argument.
pub fn tool_title(name: &str, input: &Value) -> String {
    if name == pod::TASK {
        let description = ["description", "prompt"]
            .iter()
            .filter_map(|key| input.get(*key).and_then(Value::as_str))
            .find(|text| !text.trim().is_empty())
            .unwrap_or_default();
        return format!("Subagent: {}", one_line(description, 80));
    }
    if name == TODO_WRITE {
        let count = pod_tools::items_in_call(&input.to_string()).unwrap_or(0);
        let noun = if count == 1 { "item" } else { "items" };
        return format!("Update plan ({count} {noun})");
    }
    const SALIENT: &[&str] = &["path", "file", "command", "pattern", "query", "url"];
    let detail = SALIENT
        .iter()
        .find_map(|key| input.get(*key).and_then(Value::as_str));
    let name = match mcp_parts(name) {
        Some((server, tool)) => format!("{server} › {tool}"),
        None => name.to_string(),
    };
    match detail {
        Some(detail) => format!("{name} {}", one_line(detail, 80)),
        None => name,
    }
}

/// The server and tool of an MCP tool's name (`SERVER__TOOL`).
fn mcp_parts(name: &str) -> Option<(&str, &str)> {
    name.split_once(pod_mcp::names::SEPARATOR)
        .filter(|(server, tool)| !server.is_empty() && !tool.is_empty())
}

fn one_line(text: &str, max_chars: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    let mut short: String = line.chars().take(max_chars).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}

/// Raw arguments as JSON; arguments that do not parse are kept as a string.
pub fn raw_input(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_string()))
}

/// The `tool_call` announcing a call.
pub fn tool_call(call_id: &str, name: &str, arguments: &str, status: ToolCallStatus) -> ToolCall {
    let input = raw_input(arguments);
    let locations: Vec<ToolCallLocation> = input
        .get("path")
        .and_then(Value::as_str)
        .map(|path| vec![ToolCallLocation::new(path)])
        .unwrap_or_default();
    ToolCall::new(call_id.to_string(), tool_title(name, &input))
        .kind(tool_kind(name))
        .status(status)
        .locations(locations)
        .raw_input(input)
}

/// A status change of an announced call.
pub fn tool_status(call_id: &str, status: ToolCallStatus) -> ToolCallUpdate {
    ToolCallUpdate::new(
        call_id.to_string(),
        ToolCallUpdateFields::new().status(status),
    )
}

/// The `tool_call_update` carrying a call's result.
pub fn tool_result(call_id: &str, content: &str, is_error: bool) -> ToolCallUpdate {
    let status = if is_error {
        ToolCallStatus::Failed
    } else {
        ToolCallStatus::Completed
    };
    ToolCallUpdate::new(
        call_id.to_string(),
        ToolCallUpdateFields::new()
            .status(status)
            .content(vec![ToolCallContent::Content(Content::new(text(content)))])
            .raw_output(Value::String(content.to_string())),
    )
}

/// A running subagent's progress as its `task` call's content: its plan,
/// then what it did last.
pub fn subagent_progress(call_id: &str, todos: &[TodoItem], recent: &[String]) -> ToolCallUpdate {
    let mut text = String::new();
    if !todos.is_empty() {
        text.push_str(&pod_tools::render_todos(todos));
    }
    if !recent.is_empty() {
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&recent.join("\n"));
    }
    ToolCallUpdate::new(
        call_id.to_string(),
        ToolCallUpdateFields::new()
            .status(ToolCallStatus::InProgress)
            .content(vec![ToolCallContent::Content(Content::new(self::text(
                &text,
            )))]),
    )
}

/// A text content block.
pub fn text(text: &str) -> ContentBlock {
    ContentBlock::Text(TextContent::new(text.to_string()))
}

#[cfg(test)]
#[path = "translate_tests.rs"]
mod tests;
