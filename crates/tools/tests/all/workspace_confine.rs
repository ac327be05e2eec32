//! Confinement: traversal, absolute paths and symlink escapes are refused
//! by every tool that takes a path.

use crate::workspace_support::{symlink, Ws};
use serde_json::json;

#[tokio::test]
async fn dot_dot_traversal_is_refused_for_reads_and_writes() {
    let ws = Ws::new();
    std::fs::write(ws.outside().join("secret.txt"), "secret").unwrap();
    let err = ws
        .err("read_file", json!({"path": "../outside/secret.txt"}))
        .await;
    assert!(err.contains("outside the workspace"), "{err}");
    let err = ws
        .err(
            "write_file",
            json!({"path": "../outside/new.txt", "content": "x"}),
        )
        .await;
    assert!(err.contains("outside the workspace"), "{err}");
    assert!(!ws.outside().join("new.txt").exists());
    let err = ws
        .err(
            "write_file",
            json!({"path": "missing/../../outside/new.txt", "content": "x"}),
        )
        .await;
    assert!(err.contains("climbs"), "{err}");
    assert!(!ws.outside().join("new.txt").exists());
    for tool in ["list_dir", "glob", "grep"] {
        let args = match tool {
            "list_dir" => json!({"path": ".."}),
            "glob" => json!({"pattern": "*", "path": "../outside"}),
            _ => json!({"pattern": "secret", "path": "../outside"}),
        };
        let err = ws.err(tool, args).await;
        assert!(err.contains("outside the workspace"), "{tool}: {err}");
    }
}

#[tokio::test]
async fn dot_dot_that_stays_inside_is_fine() {
    let ws = Ws::new();
    ws.put("a/b.txt", "b");
    ws.put("c.txt", "c");
    assert_eq!(
        ws.ok("read_file", json!({"path": "a/../c.txt"})).await,
        "     1\tc"
    );
}

#[tokio::test]
async fn absolute_paths_outside_are_refused_and_inside_are_allowed() {
    let ws = Ws::new();
    std::fs::write(ws.outside().join("secret.txt"), "secret").unwrap();
    let outside = ws.outside().join("secret.txt");
    let err = ws
        .err("read_file", json!({"path": outside.to_str().unwrap()}))
        .await;
    assert!(err.contains("outside the workspace"), "{err}");
    let err = ws
        .err(
            "write_file",
            json!({"path": "/etc/pod-test-should-not-exist", "content": "x"}),
        )
        .await;
    assert!(err.contains("outside the workspace"), "{err}");
    ws.put("in.txt", "inside");
    let inside = ws.root().join("in.txt");
    assert_eq!(
        ws.ok("read_file", json!({"path": inside.to_str().unwrap()}))
            .await,
        "     1\tinside"
    );
}

#[tokio::test]
async fn symlinks_that_escape_are_refused() {
    let ws = Ws::new();
    std::fs::write(ws.outside().join("secret.txt"), "secret").unwrap();
    symlink(
        &ws.outside().join("secret.txt"),
        &ws.root().join("file_link"),
    );
    symlink(&ws.outside(), &ws.root().join("dir_link"));
    let err = ws.err("read_file", json!({"path": "file_link"})).await;
    assert!(err.contains("symlink that leads outside"), "{err}");
    let err = ws
        .err("read_file", json!({"path": "dir_link/secret.txt"}))
        .await;
    assert!(err.contains("symlink that leads outside"), "{err}");
    // Writing through an escaping directory link, to a new or existing file.
    let err = ws
        .err(
            "write_file",
            json!({"path": "dir_link/new.txt", "content": "x"}),
        )
        .await;
    assert!(err.contains("symlink that leads outside"), "{err}");
    assert!(!ws.outside().join("new.txt").exists());
    let err = ws
        .err("write_file", json!({"path": "file_link", "content": "x"}))
        .await;
    assert!(err.contains("symlink that leads outside"), "{err}");
    let err = ws
        .err(
            "edit_file",
            json!({"path": "file_link", "old_string": "secret", "new_string": "x"}),
        )
        .await;
    assert!(err.contains("symlink that leads outside"), "{err}");
    assert_eq!(
        std::fs::read_to_string(ws.outside().join("secret.txt")).unwrap(),
        "secret"
    );
    let err = ws.err("list_dir", json!({"path": "dir_link"})).await;
    assert!(err.contains("symlink that leads outside"), "{err}");
}

#[tokio::test]
async fn a_dangling_symlink_cannot_be_written_through() {
    let ws = Ws::new();
    symlink(
        &ws.outside().join("not-yet.txt"),
        &ws.root().join("dangling"),
    );
    let err = ws
        .err("write_file", json!({"path": "dangling", "content": "x"}))
        .await;
    assert!(err.contains("symlink"), "{err}");
    assert!(!ws.outside().join("not-yet.txt").exists());
}

#[tokio::test]
async fn walks_do_not_follow_symlinks_out_of_the_workspace() {
    let ws = Ws::new();
    std::fs::write(ws.outside().join("secret.txt"), "needle").unwrap();
    symlink(&ws.outside(), &ws.root().join("dir_link"));
    ws.put("mine.txt", "needle");
    let out = ws.ok("grep", json!({"pattern": "needle"})).await;
    assert_eq!(out, "mine.txt:1: needle");
    let out = ws.ok("glob", json!({"pattern": "**/*.txt"})).await;
    assert_eq!(out, "mine.txt");
}

#[tokio::test]
async fn an_empty_path_is_refused() {
    let ws = Ws::new();
    let err = ws.err("read_file", json!({"path": ""})).await;
    assert!(err.contains("path is empty"), "{err}");
}
