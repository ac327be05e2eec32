use super::*;
use pod_llm::{Item, ItemKind, ToolCall};

fn decode_with(
    decoder: &mut ResponseDecoder,
    events: &[&str],
) -> Result<Vec<StreamEvent>, ProviderError> {
    let mut out = Vec::new();
    for data in events {
        out.extend(decoder.on_event(SseEvent {
            event: None,
            data: (*data).to_string(),
        })?);
        if decoder.is_done() {
            break;
        }
    }
    out.extend(decoder.on_end()?);
    Ok(out)
}

fn decode(events: &[&str]) -> Result<Vec<StreamEvent>, ProviderError> {
    decode_with(&mut ResponseDecoder::new("n", None), events)
}

fn args(index: usize, fragment: &str) -> StreamEvent {
    StreamEvent::ToolCallArgs {
        index,
        fragment: fragment.into(),
    }
}

const COMPLETED: &str = r#"{"type":"response.completed","response":{"id":"resp_7","status":"completed","usage":{"input_tokens":120,"output_tokens":30,"input_tokens_details":{"cached_tokens":100},"output_tokens_details":{"reasoning_tokens":12}}}}"#;

#[test]
fn text_reasoning_and_calls_with_interleaved_arguments() {
    let events = decode(&[
        r#"{"type":"response.created","response":{"id":"resp_7","status":"in_progress"}}"#,
        r#"{"type":"response.reasoning_summary_text.delta","output_index":0,"delta":"Think."}"#,
        r#"{"type":"response.output_text.delta","output_index":1,"delta":"Looking "}"#,
        r#"{"type":"response.output_text.delta","output_index":1,"delta":"up."}"#,
        r#"{"type":"response.output_item.added","output_index":2,"item":{"type":"function_call","id":"fc_1","call_id":"call_a","name":"lookup","arguments":""}}"#,
        r#"{"type":"response.output_item.added","output_index":3,"item":{"type":"function_call","id":"fc_2","call_id":"call_b","name":"lookup","arguments":""}}"#,
        r#"{"type":"response.function_call_arguments.delta","output_index":2,"delta":"{\"key\":"}"#,
        r#"{"type":"response.function_call_arguments.delta","output_index":3,"delta":"{}"}"#,
        r#"{"type":"response.function_call_arguments.delta","output_index":2,"delta":"\"a\"}"}"#,
        r#"{"type":"response.function_call_arguments.done","output_index":2,"arguments":"{\"key\":\"a\"}"}"#,
        r#"{"type":"response.output_item.done","output_index":2,"item":{"type":"function_call","call_id":"call_a","name":"lookup","arguments":"{\"key\":\"a\"}"}}"#,
        COMPLETED,
    ])
    .unwrap();
    assert_eq!(
        events,
        vec![
            StreamEvent::ReasoningDelta {
                text: "Think.".into()
            },
            StreamEvent::TextDelta {
                text: "Looking ".into()
            },
            StreamEvent::TextDelta { text: "up.".into() },
            StreamEvent::ToolCallStart {
                index: 0,
                id: "call_a".into(),
                name: "lookup".into()
            },
            StreamEvent::ToolCallStart {
                index: 1,
                id: "call_b".into(),
                name: "lookup".into()
            },
            args(0, "{\"key\":"),
            args(1, "{}"),
            args(0, "\"a\"}"),
            StreamEvent::ToolCallEnd { index: 0 },
            StreamEvent::ToolCallEnd { index: 1 },
            StreamEvent::Usage {
                usage: Usage {
                    prompt_tokens: 120,
                    completion_tokens: 30,
                    cache_read_tokens: 100,
                    cache_write_tokens: 0,
                    reasoning_tokens: 12,
                }
            },
            StreamEvent::Finish {
                reason: FinishReason::ToolCalls
            },
        ]
    );
}

#[test]
fn a_call_announced_only_when_done_keeps_its_arguments() {
    let events = decode(&[
        r#"{"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","call_id":"c","name":"x","arguments":"{\"a\":1}"}}"#,
        r#"{"type":"response.output_item.done","output_index":1,"item":{"type":"function_call","name":"y","arguments":""}}"#,
        r#"{"type":"response.completed","response":{"id":"r"}}"#,
    ])
    .unwrap();
    assert_eq!(
        events,
        vec![
            StreamEvent::ToolCallStart {
                index: 0,
                id: "c".into(),
                name: "x".into()
            },
            args(0, "{\"a\":1}"),
            StreamEvent::ToolCallEnd { index: 0 },
            StreamEvent::ToolCallStart {
                index: 1,
                id: "call_n_1".into(),
                name: "y".into()
            },
            args(1, "{}"),
            StreamEvent::ToolCallEnd { index: 1 },
            StreamEvent::Finish {
                reason: FinishReason::ToolCalls
            },
        ]
    );
}

#[test]
fn incomplete_failed_error_and_cut_streams() {
    let length = decode(&[
        r#"{"type":"response.output_text.delta","delta":"Half"}"#,
        r#"{"type":"response.incomplete","response":{"incomplete_details":{"reason":"max_output_tokens"}}}"#,
    ])
    .unwrap();
    assert_eq!(
        length.last(),
        Some(&StreamEvent::Finish {
            reason: FinishReason::Length
        })
    );
    let failed = decode(&[
        r#"{"type":"response.failed","response":{"error":{"code":"server_error","message":"boom"}}}"#,
    ])
    .unwrap_err();
    assert!(failed.is_retryable(), "{failed:?}");
    assert!(failed.to_string().contains("boom"));
    let error =
        decode(&[r#"{"type":"error","code":"invalid_prompt","message":"no good"}"#]).unwrap_err();
    assert!(!error.is_retryable(), "{error:?}");
    assert!(error.to_string().contains("no good"));
    let cut = decode(&[r#"{"type":"response.output_text.delta","delta":"Hal"}"#]).unwrap_err();
    assert!(matches!(cut, ProviderError::Transport(_)), "{cut:?}");
    let garbage = decode(&["{not json"]).unwrap_err();
    assert!(
        matches!(garbage, ProviderError::Malformed(_)),
        "{garbage:?}"
    );
}

#[test]
fn a_completed_response_becomes_the_conversations_chain() {
    let conversations = Arc::new(Conversations::default());
    let key: Arc<str> = "session".into();
    let id = Some(pod_llm::HistoryId::fresh());
    let mut history = vec![Item::user("hi")];
    let mut decoder = ResponseDecoder::new(
        "n",
        Some(Recorder {
            conversations: conversations.clone(),
            key: key.clone(),
            sent: Sent::of(id, &history).unwrap(),
            followed: None,
        }),
    );
    decode_with(
        &mut decoder,
        &[
            r#"{"type":"response.output_text.delta","delta":"Sure."}"#,
            r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"call_a","name":"lookup"}}"#,
            COMPLETED,
        ],
    )
    .unwrap();
    let reply = Item::new(ItemKind::Assistant {
        text: "Sure.".into(),
        reasoning: None,
        tool_calls: vec![ToolCall {
            id: "call_a".into(),
            name: "lookup".into(),
            arguments: "{}".into(),
        }],
        usage: None,
    });
    history.extend([reply, Item::tool_result("call_a", "1", false)]);
    let continuation = conversations.continuation("session", id, &history).unwrap();
    assert_eq!(continuation.response_id, "resp_7");
    assert_eq!(continuation.first_new, 2);
}

#[test]
fn an_error_in_a_continued_stream_drops_the_chain() {
    let conversations = Arc::new(Conversations::default());
    let key: Arc<str> = "session".into();
    let id = Some(pod_llm::HistoryId::fresh());
    let mut history = vec![Item::user("hi")];
    let sent = Sent::of(id, &history).unwrap();
    conversations.record(&key, "resp_1".into(), sent, &Answer::default());
    history.extend([
        Item::new(ItemKind::Assistant {
            text: String::new(),
            reasoning: None,
            tool_calls: vec![],
            usage: None,
        }),
        Item::user("more"),
    ]);
    assert!(conversations
        .continuation("session", id, &history)
        .is_some());
    let recorder = |followed: Option<&str>| Recorder {
        conversations: conversations.clone(),
        key: key.clone(),
        sent,
        followed: followed.map(str::to_owned),
    };
    // A whole request's error leaves the chain alone.
    let mut whole = ResponseDecoder::new("n", Some(recorder(None)));
    let error = r#"{"type":"error","error":{"type":"invalid_request_error","code":"previous_response_not_found","message":"Previous response not found."}}"#;
    let err = decode_with(&mut whole, &[error]).unwrap_err();
    assert!(
        err.to_string().contains("Previous response not found."),
        "{err}"
    );
    assert!(!err.is_retryable());
    assert!(conversations
        .continuation("session", id, &history)
        .is_some());
    // A continued one's drops it; before any event it may be sent again
    // (whole, now).
    let mut continued = ResponseDecoder::new("n", Some(recorder(Some("resp_1"))));
    let err = decode_with(&mut continued, &[error]).unwrap_err();
    assert!(err.is_retryable(), "{err:?}");
    assert_eq!(conversations.continuation("session", id, &history), None);
    // After an event, the error stands as it is.
    conversations.record(&key, "resp_1".into(), sent, &Answer::default());
    let mut late = ResponseDecoder::new("n", Some(recorder(Some("resp_1"))));
    let text = r#"{"type":"response.output_text.delta","delta":"Hal"}"#;
    let err = decode_with(&mut late, &[text, error]).unwrap_err();
    assert!(!err.is_retryable(), "{err:?}");
    assert_eq!(conversations.continuation("session", id, &history), None);
}

#[test]
fn summary_parts_and_reasoning_items_are_paragraphs() {
    let events = decode(&[
        r#"{"type":"response.output_item.added","output_index":0,"item":{"type":"reasoning"}}"#,
        r#"{"type":"response.reasoning_summary_part.added","summary_index":0}"#,
        r#"{"type":"response.reasoning_summary_text.delta","summary_index":0,"delta":"First."}"#,
        r#"{"type":"response.reasoning_summary_part.added","summary_index":1}"#,
        r#"{"type":"response.reasoning_summary_text.delta","summary_index":1,"delta":"Second."}"#,
        r#"{"type":"response.output_item.added","output_index":1,"item":{"type":"reasoning"}}"#,
        r#"{"type":"response.reasoning_summary_part.added","summary_index":0}"#,
        r#"{"type":"response.reasoning_summary_text.delta","summary_index":0,"delta":"Third."}"#,
        r#"{"type":"response.completed","response":{"id":"r"}}"#,
    ])
    .unwrap();
    let reasoning: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ReasoningDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, "First.\n\nSecond.\n\nThird.");
}
