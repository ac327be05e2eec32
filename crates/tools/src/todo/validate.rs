//! The one validation of a `todo_write` call, shared by the tool and by
//! session replay.

use super::{TodoItem, TodoStatus};
use serde_json::Value;
use std::collections::HashMap;

/// At most this many items in a list.
pub const MAX_TODOS: usize = 100;
/// At most this many characters of content per item.
pub const MAX_CONTENT_CHARS: usize = 1_000;

/// Why a `todo_write` call was rejected. Each message names the offending
/// item and the rule it breaks.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TodoError {
    /// The arguments are not JSON.
    #[error("the arguments are not valid JSON: {0}")]
    NotJson(String),
    /// The arguments are not `{"todos": [...]}`.
    #[error("expected an object {{\"todos\": [...]}}: {0}")]
    Shape(String),
    /// A field of an item is missing or has the wrong type.
    #[error("todos[{index}]: {message}")]
    Field {
        /// Position in the list.
        index: usize,
        /// What is wrong.
        message: String,
    },
    /// Too many items.
    #[error("the list has {count} items; at most {MAX_TODOS} are allowed")]
    TooMany {
        /// How many were sent.
        count: usize,
    },
    /// An empty id.
    #[error("todos[{index}]: id must not be empty")]
    EmptyId {
        /// Position in the list.
        index: usize,
    },
    /// An id used twice.
    #[error("todos[{second}]: id \"{id}\" is already used by todos[{first}]; ids must be unique")]
    DuplicateId {
        /// The id.
        id: String,
        /// Its first position.
        first: usize,
        /// Its second position.
        second: usize,
    },
    /// Content empty after trimming.
    #[error("todos[{index}] (id \"{id}\"): content must not be empty")]
    EmptyContent {
        /// Position in the list.
        index: usize,
        /// The id.
        id: String,
    },
    /// Content too long.
    #[error("todos[{index}] (id \"{id}\"): content has {chars} characters; at most {MAX_CONTENT_CHARS} are allowed")]
    ContentTooLong {
        /// Position in the list.
        index: usize,
        /// The id.
        id: String,
        /// Its length in characters.
        chars: usize,
    },
    /// More than one item in progress.
    #[error("todos[{second}] (id \"{second_id}\") is in_progress but todos[{first}] (id \"{first_id}\") already is; at most one item may be in_progress")]
    SeveralInProgress {
        /// Position of the first.
        first: usize,
        /// Its id.
        first_id: String,
        /// Position of the second.
        second: usize,
        /// Its id.
        second_id: String,
    },
}

/// Parses and validates the raw arguments of a `todo_write` call.
pub fn parse_todo_write(arguments: &str) -> Result<Vec<TodoItem>, TodoError> {
    let value: Value =
        serde_json::from_str(arguments).map_err(|e| TodoError::NotJson(e.to_string()))?;
    validate_todos(&value)
}

/// Validates `{"todos": [...]}` and returns the list it describes.
pub fn validate_todos(value: &Value) -> Result<Vec<TodoItem>, TodoError> {
    let object = value
        .as_object()
        .ok_or_else(|| TodoError::Shape(format!("got {}", type_name(value))))?;
    let todos = object
        .get("todos")
        .ok_or_else(|| TodoError::Shape("the field \"todos\" is missing".into()))?
        .as_array()
        .ok_or_else(|| TodoError::Shape("\"todos\" must be an array".into()))?;
    if todos.len() > MAX_TODOS {
        return Err(TodoError::TooMany { count: todos.len() });
    }
    let mut items = Vec::with_capacity(todos.len());
    let mut positions: HashMap<&str, usize> = HashMap::new();
    let mut in_progress: Option<usize> = None;
    for (index, raw) in todos.iter().enumerate() {
        let item = parse_item(index, raw)?;
        if item.id.trim().is_empty() {
            return Err(TodoError::EmptyId { index });
        }
        if let Some(&first) = positions.get(item.id.as_str()) {
            return Err(TodoError::DuplicateId {
                id: item.id,
                first,
                second: index,
            });
        }
        if item.content.trim().is_empty() {
            return Err(TodoError::EmptyContent { index, id: item.id });
        }
        let chars = item.content.chars().count();
        if chars > MAX_CONTENT_CHARS {
            return Err(TodoError::ContentTooLong {
                index,
                id: item.id,
                chars,
            });
        }
        if item.status == TodoStatus::InProgress {
            if let Some(first) = in_progress {
                let first_id: &TodoItem = &items[first];
                return Err(TodoError::SeveralInProgress {
                    first,
                    first_id: first_id.id.clone(),
                    second: index,
                    second_id: item.id,
                });
            }
            in_progress = Some(index);
        }
        positions.insert(raw_id(raw), index);
        items.push(item);
    }
    Ok(items)
}

fn raw_id(raw: &Value) -> &str {
    raw.get("id").and_then(Value::as_str).unwrap_or_default()
}

fn parse_item(index: usize, raw: &Value) -> Result<TodoItem, TodoError> {
    let field_error = |message: String| TodoError::Field { index, message };
    let object = raw
        .as_object()
        .ok_or_else(|| field_error(format!("expected an object, got {}", type_name(raw))))?;
    let string = |name: &str| -> Result<String, TodoError> {
        match object.get(name) {
            Some(Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(field_error(format!(
                "\"{name}\" must be a string, got {}",
                type_name(other)
            ))),
            None => Err(field_error(format!("\"{name}\" is missing"))),
        }
    };
    let id = string("id")?;
    let content = string("content")?;
    let status = match string("status")?.as_str() {
        "pending" => TodoStatus::Pending,
        "in_progress" => TodoStatus::InProgress,
        "completed" => TodoStatus::Completed,
        other => {
            return Err(field_error(format!(
                "status \"{other}\" is not one of pending, in_progress, completed"
            )))
        }
    };
    Ok(TodoItem {
        id,
        content,
        status,
    })
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
