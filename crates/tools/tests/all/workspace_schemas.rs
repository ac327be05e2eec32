//! Every session builds its own workspace tools; their schemas are built
//! once per process and shared.

use pod_tools::workspace::{FileTracker, Workspace};
use pod_worker::ToolRegistry;
use std::sync::Arc;

#[test]
fn the_workspace_tools_of_two_sessions_hold_the_same_schemas() {
    let dir = tempfile::tempdir().unwrap();
    let registry = || {
        let workspace = Workspace::new(dir.path(), FileTracker::new()).unwrap();
        let mut registry = ToolRegistry::new();
        workspace.register(&mut registry);
        registry
    };
    // Not shared arrays (neither registry called `share_specs`): each was
    // built on its own, and still holds the process's one schema per tool.
    let (one, two) = (registry(), registry());
    assert!(!Arc::ptr_eq(&one.specs(), &two.specs()));
    let read_file = |r: &ToolRegistry| {
        r.specs()
            .iter()
            .find(|s| s.name == "read_file")
            .map(|s| Arc::clone(&s.parameters))
            .unwrap()
    };
    assert!(Arc::ptr_eq(&read_file(&one), &read_file(&two)));
    assert_eq!(read_file(&one)["required"][0], "path");
}
