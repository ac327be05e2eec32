//! read_file: numbered lines, ranges, caps with a note, refusals.

use crate::workspace_support::Ws;
use pod_tools::{FileMeta, Limits};
use serde_json::json;

#[tokio::test]
async fn reads_a_file_with_numbered_lines_and_records_it() {
    let ws = Ws::new();
    ws.put("src/lib.rs", "fn a() {}\nfn b() {}\n");
    let out = ws.call("read_file", json!({"path": "src/lib.rs"})).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(out.content, "     1\tfn a() {}\n     2\tfn b() {}");
    let meta = FileMeta::from_value(out.meta.as_ref().expect("meta")).expect("file meta");
    assert_eq!(meta.path, "src/lib.rs");
    assert_eq!(meta.stamp.size, 20);
    assert!(meta.stamp.mtime_ns.is_some());
    assert_eq!(ws.tracker().stamp("src/lib.rs"), Some(meta.stamp));
}

#[tokio::test]
async fn reads_a_line_range_and_says_which_part_it_shows() {
    let ws = Ws::new();
    let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    ws.put("a.txt", &text);
    let out = ws
        .ok(
            "read_file",
            json!({"path": "a.txt", "start_line": 3, "end_line": 4}),
        )
        .await;
    assert_eq!(
        out,
        "     3\tline 3\n     4\tline 4\n[Showing lines 3-4 of 10.]"
    );
    // An end past the file is clamped.
    let out = ws
        .ok(
            "read_file",
            json!({"path": "a.txt", "start_line": 9, "end_line": 99}),
        )
        .await;
    assert!(out.starts_with("     9\tline 9\n    10\tline 10"), "{out}");
}

#[tokio::test]
async fn bad_ranges_are_refused_with_the_file_length() {
    let ws = Ws::new();
    ws.put("a.txt", "one\ntwo\n");
    let err = ws
        .err("read_file", json!({"path": "a.txt", "start_line": 5}))
        .await;
    assert!(
        err.contains("past the end") && err.contains("2 lines"),
        "{err}"
    );
    let err = ws
        .err("read_file", json!({"path": "a.txt", "start_line": 0}))
        .await;
    assert!(err.contains("1-based"), "{err}");
    let err = ws
        .err(
            "read_file",
            json!({"path": "a.txt", "start_line": 2, "end_line": 1}),
        )
        .await;
    assert!(err.contains("before start_line"), "{err}");
}

#[tokio::test]
async fn the_line_cap_cuts_with_a_note_on_where_to_continue() {
    let ws = Ws::with_limits(Limits {
        read_max_lines: 3,
        ..Limits::default()
    });
    let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    ws.put("a.txt", &text);
    let out = ws.ok("read_file", json!({"path": "a.txt"})).await;
    assert!(
        out.contains("     3\tline 3\n[Output cut at 3 lines"),
        "{out}"
    );
    assert!(!out.contains("line 4"), "{out}");
    assert!(
        out.contains("lines 1-3 of 10") && out.contains("start_line=4"),
        "{out}"
    );
}

#[tokio::test]
async fn the_byte_cap_and_long_lines_are_cut_with_a_note() {
    let ws = Ws::with_limits(Limits {
        read_max_bytes: 40,
        line_max_chars: 10,
        ..Limits::default()
    });
    let text = format!("{}\nshort\nshort\nshort\nshort\n", "x".repeat(50));
    ws.put("a.txt", &text);
    let out = ws.ok("read_file", json!({"path": "a.txt"})).await;
    assert!(
        out.contains("xxxxxxxxxx… [line cut at 10 characters]"),
        "{out}"
    );
    assert!(out.contains("[Output cut at 40 bytes"), "{out}");
}

#[tokio::test]
async fn binary_and_non_utf8_files_are_refused() {
    let ws = Ws::new();
    std::fs::write(ws.root().join("a.bin"), [0x7f, b'E', b'L', b'F', 0, 1, 2]).unwrap();
    let err = ws.err("read_file", json!({"path": "a.bin"})).await;
    assert!(err.contains("binary file") && err.contains("bash"), "{err}");
    std::fs::write(ws.root().join("latin.txt"), [b'c', b'a', b'f', 0xe9]).unwrap();
    let err = ws.err("read_file", json!({"path": "latin.txt"})).await;
    assert!(err.contains("not valid UTF-8"), "{err}");
    assert!(ws.tracker().stamp("a.bin").is_none());
}

#[tokio::test]
async fn missing_files_directories_and_huge_files_are_refused() {
    let ws = Ws::with_limits(Limits {
        file_max_bytes: 10,
        ..Limits::default()
    });
    let err = ws.err("read_file", json!({"path": "nope.txt"})).await;
    assert!(
        err.contains("does not exist") && err.contains("list_dir"),
        "{err}"
    );
    ws.put("dir/a.txt", "a");
    let err = ws.err("read_file", json!({"path": "dir"})).await;
    assert!(
        err.contains("is a directory") && err.contains("list_dir"),
        "{err}"
    );
    ws.put("big.txt", "0123456789abc");
    let err = ws.err("read_file", json!({"path": "big.txt"})).await;
    assert!(err.contains("13 bytes") && err.contains("grep"), "{err}");
}

#[tokio::test]
async fn an_empty_file_reads_as_empty() {
    let ws = Ws::new();
    ws.put("empty.txt", "");
    assert_eq!(
        ws.ok("read_file", json!({"path": "empty.txt"})).await,
        "`empty.txt` is empty (0 lines)."
    );
    assert!(ws.tracker().stamp("empty.txt").is_some());
}

#[tokio::test]
async fn unknown_arguments_are_refused_with_the_schema() {
    let ws = Ws::new();
    let err = ws.err("read_file", json!({"file": "a.txt"})).await;
    assert!(err.contains("Invalid arguments for `read_file`"), "{err}");
}
