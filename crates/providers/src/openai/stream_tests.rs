use super::*;

fn decode(chunks: &[&str]) -> Result<Vec<StreamEvent>, ProviderError> {
    let mut decoder = ChunkDecoder::new("n");
    let mut events = Vec::new();
    for data in chunks {
        events.extend(decoder.on_event(SseEvent {
            event: None,
            data: (*data).to_string(),
        })?);
        if decoder.is_done() {
            break;
        }
    }
    events.extend(decoder.on_end()?);
    Ok(events)
}

fn start(index: usize, id: &str, name: &str) -> StreamEvent {
    StreamEvent::ToolCallStart {
        index,
        id: id.into(),
        name: name.into(),
    }
}

fn args(index: usize, fragment: &str) -> StreamEvent {
    StreamEvent::ToolCallArgs {
        index,
        fragment: fragment.into(),
    }
}

#[test]
fn ollama_index_reuse_with_new_ids_makes_new_calls() {
    let events = decode(&[
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_a","index":0,"type":"function","function":{"name":"x","arguments":"{\"a\":1}"}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"","tool_calls":[{"id":"call_b","index":0,"type":"function","function":{"name":"y","arguments":"{}"}}]},"finish_reason":null}]}"#,
        r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":"tool_calls"}]}"#,
        "[DONE]",
    ])
    .unwrap();
    assert_eq!(
        events,
        vec![
            start(0, "call_a", "x"),
            args(0, "{\"a\":1}"),
            start(1, "call_b", "y"),
            args(1, "{}"),
            StreamEvent::ToolCallEnd { index: 0 },
            StreamEvent::ToolCallEnd { index: 1 },
            StreamEvent::Finish {
                reason: FinishReason::ToolCalls
            },
        ]
    );
}

#[test]
fn calls_without_index_or_id_get_stable_synthesized_ids() {
    let events = decode(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"x","arguments":"{\"a\":"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"1}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"function":{"name":"y","arguments":{"b":2}}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
    ])
    .unwrap();
    assert_eq!(events[0], start(0, "call_n_0", "x"));
    assert_eq!(events[1], args(0, "{\"a\":"));
    assert_eq!(events[2], args(0, "1}"));
    assert_eq!(events[3], start(1, "call_n_1", "y"));
    assert_eq!(events[4], args(1, "{\"b\":2}"));
}

#[test]
fn name_without_arguments_and_finish_in_the_last_fragment_chunk() {
    // vLLM: name first with no `arguments` key; the finish reason rides on
    // the chunk of the last fragment. A second, parameterless call never
    // sends arguments at all.
    let events = decode(&[
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"read"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"c2","type":"function","function":{"name":"now"}}]}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}"#,
    ])
    .unwrap();
    assert_eq!(
        events,
        vec![
            start(0, "c1", "read"),
            start(1, "c2", "now"),
            args(0, "{}"),
            StreamEvent::ToolCallEnd { index: 0 },
            args(1, "{}"),
            StreamEvent::ToolCallEnd { index: 1 },
            StreamEvent::Finish {
                reason: FinishReason::ToolCalls
            },
        ]
    );
}

#[test]
fn llama_cpp_final_chunk_carries_finish_usage_and_timings() {
    let events = decode(&[
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],"object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Hi"}}],"object":"chat.completion.chunk"}"#,
        r#"{"choices":[{"finish_reason":"stop","index":0,"delta":{}}],"object":"chat.completion.chunk","usage":{"completion_tokens":1,"prompt_tokens":9,"total_tokens":10},"timings":{"prompt_n":9}}"#,
        "[DONE]",
    ])
    .unwrap();
    assert_eq!(
        events,
        vec![
            StreamEvent::TextDelta { text: "Hi".into() },
            StreamEvent::Usage {
                usage: Usage {
                    prompt_tokens: 9,
                    completion_tokens: 1,
                    ..Default::default()
                }
            },
            StreamEvent::Finish {
                reason: FinishReason::Stop
            },
        ]
    );
}

#[test]
fn unknown_finish_reason_is_kept() {
    let events =
        decode(&[r#"{"choices":[{"delta":{"content":"x"},"finish_reason":"brand_new"}]}"#])
            .unwrap();
    assert_eq!(
        events.last(),
        Some(&StreamEvent::Finish {
            reason: FinishReason::Other("brand_new".into())
        })
    );
}

#[test]
fn ending_before_finish_is_a_dropped_connection() {
    let err = decode(&[r#"{"choices":[{"delta":{"content":"x"}}]}"#]).unwrap_err();
    assert!(matches!(err, ProviderError::Transport(_)));
    assert!(err.is_retryable());
}

#[test]
fn error_object_inside_the_stream_fails_it() {
    let err = decode(&[
        r#"{"error":{"message":"upstream overloaded","type":"overloaded_error","code":529}}"#,
    ])
    .unwrap_err();
    assert_eq!(
        err,
        ProviderError::Api {
            kind: "overloaded_error".into(),
            message: "upstream overloaded".into(),
            retryable: true
        }
    );
}

#[test]
fn garbage_data_is_malformed() {
    let err = decode(&["{not json"]).unwrap_err();
    assert!(matches!(err, ProviderError::Malformed(_)));
}

#[test]
fn arguments_as_an_object_null_or_escaped_text_decode_as_before() {
    let events = decode(&[
        // An object written with spaces is sent on as compact JSON.
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"a","function":{"name":"x","arguments":{ "b" : [1, "ü\n"] }}}]}}]}"#,
        // `null` arguments are no fragment; the text ones are unescaped.
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"b","function":{"name":"y","arguments":null}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"q\":\"\\u00fc \\\"x\\\"\"}"}}]}}]}"#,
        r#"{"choices":[{"delta":{},"finish_reason":"tool_calls"}]}"#,
    ])
    .unwrap();
    assert_eq!(events[0], start(0, "a", "x"));
    assert_eq!(events[1], args(0, "{\"b\":[1,\"ü\\n\"]}"));
    assert_eq!(events[2], start(1, "b", "y"));
    assert_eq!(events[3], args(1, "{\"q\":\"\\u00fc \\\"x\\\"\"}"));
    // A chunk that is not JSON (here: broken arguments) fails the stream.
    let err = decode(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"x","arguments":{"a":}}}]}}]}"#,
    ])
    .unwrap_err();
    assert!(matches!(err, ProviderError::Malformed(_)), "{err:?}");
}
