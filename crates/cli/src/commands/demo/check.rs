//! The demo checks its own result, so a broken story fails (and the `demo`
//! test with it) instead of printing a happy ending.

use anyhow::{ensure, Context, Result};
use serde_json::Value;
use std::path::Path;
use std::process::Command;
use uuid::Uuid;

/// The file the agent writes, edits, tests and documents.
pub const EDITED_FILE: &str = "report.sh";

/// What `report.sh` holds at the end: written, given the `--json` branch
/// before the kill, its comment edited after the compaction.
pub const EXPECTED_REPORT: &str = r#"#!/bin/sh
# report: prints the totals (--json: as JSON; see README.md).
total=${TOTAL:-3}
if [ "$1" = "--json" ]; then
  echo "{\"total\": $total}"
else
  echo "total: $total"
fi
"#;

/// The agent's edits are on disk, exactly.
pub fn edited_file(workspace: &Path) -> Result<()> {
    let path = workspace.join(EDITED_FILE);
    let content = std::fs::read_to_string(&path)
        .with_context(|| format!("the agent did not leave {}", path.display()))?;
    ensure!(
        content == EXPECTED_REPORT,
        "{EDITED_FILE} is not what the agent's edits should give:\n{content}"
    );
    Ok(())
}

/// `pod show ID --json`, as a user would run it, lists every todo completed.
/// Returns how many there are.
pub fn shown_todos_completed(home: &Path, id: Uuid) -> Result<usize> {
    let exe = std::env::current_exe().context("cannot find the pod binary")?;
    let out = Command::new(exe)
        .env("POD_HOME", home)
        .env_remove("POD_STORE")
        .args(["show", &id.to_string(), "--json"])
        .output()
        .context("cannot run pod show")?;
    ensure!(
        out.status.success(),
        "pod show {id} --json failed: {}",
        String::from_utf8_lossy(&out.stderr).trim()
    );
    let shown: Value =
        serde_json::from_slice(&out.stdout).context("pod show --json printed invalid JSON")?;
    let todos = shown["todos"]
        .as_array()
        .context("pod show --json has no todos")?;
    let open: Vec<&str> = todos
        .iter()
        .filter(|t| t["status"] != "completed")
        .filter_map(|t| t["content"].as_str())
        .collect();
    ensure!(
        !todos.is_empty() && open.is_empty(),
        "pod show {id} --json has unfinished todos: {open:?}"
    );
    Ok(todos.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_script_produces_the_expected_file() {
        // Replays the script's writes and edits of report.sh in memory, so a
        // change to demo.json that breaks the ending fails here first.
        let script: Value = serde_json::from_str(super::super::DEMO_SCRIPT).unwrap();
        let mut content = String::new();
        for step in script["steps"].as_array().unwrap() {
            for call in step["tool_calls"].as_array().into_iter().flatten() {
                let args = &call["arguments"];
                if args["path"] != EDITED_FILE {
                    continue;
                }
                match call["name"].as_str().unwrap() {
                    "write_file" => content = args["content"].as_str().unwrap().into(),
                    "edit_file" => {
                        let old = args["old_string"].as_str().unwrap();
                        assert_eq!(content.matches(old).count(), 1, "{old:?}");
                        content = content.replace(old, args["new_string"].as_str().unwrap());
                    }
                    _ => {}
                }
            }
        }
        assert_eq!(content, EXPECTED_REPORT);
    }
}
