//! list_dir, glob and grep: .gitignore respected, caps with a note.

use crate::workspace_support::Ws;
use pod_tools::Limits;
use serde_json::json;

fn project(ws: &Ws) {
    ws.put(".gitignore", "target/\n*.log\n");
    ws.put("src/main.rs", "fn main() {\n    println!(\"hi\");\n}\n");
    ws.put("src/lib/mod.rs", "pub fn helper() {}\n// TODO: more\n");
    ws.put("README.md", "# Demo\nTODO: docs\n");
    ws.put("target/debug/out.rs", "fn main() {} // TODO built\n");
    ws.put("run.log", "TODO in a log\n");
    ws.put(".git/HEAD", "ref: refs/heads/main\n");
}

#[tokio::test]
async fn list_dir_shows_entries_without_ignored_ones_or_git() {
    let ws = Ws::new();
    project(&ws);
    let out = ws.ok("list_dir", json!({})).await;
    assert_eq!(out, "`.`:\n.gitignore\nREADME.md\nsrc/");
    let out = ws.ok("list_dir", json!({"path": "src"})).await;
    assert_eq!(out, "`src`:\nlib/\nmain.rs");
}

#[tokio::test]
async fn list_dir_refuses_files_and_missing_paths_and_caps_entries() {
    let ws = Ws::with_limits(Limits {
        list_max_entries: 2,
        ..Limits::default()
    });
    for name in ["a", "b", "c", "d"] {
        ws.put(name, "");
    }
    let out = ws.ok("list_dir", json!({})).await;
    assert_eq!(
        out,
        "`.`:\na\nb\n[2 more entries not shown; at most 2 are listed. Use glob with a pattern to narrow the list.]"
    );
    let err = ws.err("list_dir", json!({"path": "a"})).await;
    assert!(
        err.contains("is a file") && err.contains("read_file"),
        "{err}"
    );
    let err = ws.err("list_dir", json!({"path": "zzz"})).await;
    assert!(err.contains("does not exist"), "{err}");
}

#[tokio::test]
async fn glob_matches_relative_paths_and_skips_ignored_files() {
    let ws = Ws::new();
    project(&ws);
    assert_eq!(
        ws.ok("glob", json!({"pattern": "**/*.rs"})).await,
        "src/lib/mod.rs\nsrc/main.rs"
    );
    // `*` does not cross directories.
    assert_eq!(
        ws.ok("glob", json!({"pattern": "*.rs", "path": "src"}))
            .await,
        "src/main.rs"
    );
    assert_eq!(
        ws.ok("glob", json!({"pattern": "*.log"})).await,
        "No files match `*.log` (ignored files are skipped)."
    );
}

#[tokio::test]
async fn glob_refuses_bad_patterns_and_file_bases_and_caps_matches() {
    let ws = Ws::with_limits(Limits {
        list_max_entries: 1,
        ..Limits::default()
    });
    ws.put("a.txt", "");
    ws.put("b.txt", "");
    let err = ws.err("glob", json!({"pattern": "[a"})).await;
    assert!(err.contains("pattern is invalid"), "{err}");
    let err = ws
        .err("glob", json!({"pattern": "*", "path": "a.txt"}))
        .await;
    assert!(err.contains("not a directory"), "{err}");
    let out = ws.ok("glob", json!({"pattern": "*.txt"})).await;
    assert!(out.starts_with("a.txt\n[1 more matches not shown"), "{out}");
}

#[tokio::test]
async fn grep_finds_lines_with_numbers_and_skips_ignored_and_binary_files() {
    let ws = Ws::new();
    project(&ws);
    std::fs::write(ws.root().join("blob.bin"), b"TODO\0binary").unwrap();
    let out = ws.ok("grep", json!({"pattern": "TODO"})).await;
    assert_eq!(
        out,
        "README.md:2: TODO: docs\nsrc/lib/mod.rs:2: // TODO: more"
    );
    let out = ws
        .ok(
            "grep",
            json!({"pattern": "todo", "case_insensitive": true, "glob": "**/*.rs"}),
        )
        .await;
    assert_eq!(out, "src/lib/mod.rs:2: // TODO: more");
    let out = ws
        .ok(
            "grep",
            json!({"pattern": r"fn \w+\(", "path": "src/main.rs"}),
        )
        .await;
    assert_eq!(out, "src/main.rs:1: fn main() {");
    let out = ws.ok("grep", json!({"pattern": "absent"})).await;
    assert!(out.starts_with("No matches for `absent`"), "{out}");
}

#[tokio::test]
async fn grep_refuses_bad_patterns_and_caps_matches() {
    let ws = Ws::with_limits(Limits {
        grep_max_matches: 2,
        ..Limits::default()
    });
    ws.put("a.txt", "x\nx\nx\nx\n");
    let err = ws.err("grep", json!({"pattern": "(unclosed"})).await;
    assert!(err.contains("not a valid regular expression"), "{err}");
    let err = ws.err("grep", json!({"pattern": "x", "glob": "[z"})).await;
    assert!(err.contains("glob `[z` is invalid"), "{err}");
    let out = ws.ok("grep", json!({"pattern": "x"})).await;
    assert_eq!(
        out,
        "a.txt:1: x\na.txt:2: x\n[2 more matches not shown; at most 2 are listed. Narrow the pattern, path or glob.]"
    );
}
