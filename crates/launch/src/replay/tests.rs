//! A replay with a change to pod itself (`WhatIf::tune`): the reminder
//! cadence, which is no setting a user has, so no flag of `pod replay`.
//! The session is recorded through the launcher on the scripted model, in
//! a temporary home, with an empty config file.

use super::*;
use crate::flags::{Flags, ModelFlags};
use crate::launcher::{Options, Place, Plan};
use crate::settings::Resolved;
use pod::{FileStore, PodHome, Store};
use pod_llm::ItemKind;
use serde_json::json;
use std::path::Path;

/// A plan, seven answers that leave it alone, the plan done, an answer.
fn steps() -> serde_json::Value {
    let todos = |status: &str| {
        json!({"tool_calls": [{"name": "todo_write", "arguments": {"todos": [
            {"id": "a", "content": "Look around", "status": status}
        ]}}]})
    };
    // Three ways to name the workspace: seven looks, but no loop (the
    // loop guard would remind at five identical calls in a row).
    let look = |i: usize| {
        let path = [".", "./", "./."][i % 3];
        json!({"tool_calls": [{"name": "list_dir", "arguments": {"path": path}}]})
    };
    let mut steps = vec![todos("in_progress")];
    steps.extend((0..7).map(look));
    steps.push(todos("completed"));
    steps.push(json!({"text": "Looked around."}));
    json!({"model": "scripted-test", "steps": steps})
}

/// Records `steps()` in `dir` (an empty config file, a home, a workspace
/// with one file): the home and the session's id.
async fn record(dir: &Path) -> (PodHome, uuid::Uuid) {
    let config = dir.join("config.toml");
    std::fs::write(&config, "").unwrap();
    let script = dir.join("script.json");
    std::fs::write(&script, steps().to_string()).unwrap();
    let workspace = dir.join("workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(workspace.join("a.txt"), "alpha\n").unwrap();
    let flags = Flags {
        model: ModelFlags {
            script: Some(script.clone()),
            ..ModelFlags::default()
        },
        ..Flags::default()
    };
    let file = pod_providers::ConfigFile::load(&config).unwrap();
    let settings = Resolved::resolve_in(file, &flags, None).unwrap();
    let home = PodHome::new(dir.join("home"));
    let place = Place {
        home: home.clone(),
        store: Arc::new(FileStore::new(home.clone())) as Store,
    };
    let script = pod_llm::Script::load(&script).unwrap();
    // A fresh session whose model is the script: a recording.
    let plan = Plan::replaying(
        place,
        settings,
        workspace,
        Vec::new(),
        true,
        Default::default(),
        crate::launcher::Replaying {
            script,
            servers: Vec::new(),
            verdicts: Vec::new(),
        },
    );
    let handle = plan
        .prepare(Options::default())
        .await
        .unwrap()
        .start()
        .await
        .unwrap()
        .handle;
    handle.prompt("Look around".to_string()).await.unwrap();
    let id = handle.session_id();
    handle.shutdown().await.unwrap();
    (home, id)
}

/// A tune setting the reminder cadence to `every`.
fn cadence(every: u32) -> WhatIf {
    WhatIf {
        tune: Some(Arc::new(move |config: &mut PodConfig| {
            config.remind_every = every
        })),
        ..WhatIf::default()
    }
}

#[tokio::test]
async fn a_reminder_cadence_changed_diverges_where_the_first_reminder_moves() {
    let dir = tempfile::tempdir().unwrap();
    let (home, id) = record(dir.path()).await;
    let store = FileStore::new(home.clone());
    let recording = Recording::read(&store, id).await.unwrap();
    let what_if = |mut what_if: WhatIf| {
        what_if.config = Some(dir.path().join("config.toml"));
        what_if.workspace = Some(dir.path().join("workspace"));
        what_if
    };

    // Today's cadence (every 5 answers without the plan): one reminder,
    // after five answers that left the plan alone (answers[1..=5]), and
    // the replay is identical.
    let items: Vec<&ItemKind> = recording
        .root
        .records
        .iter()
        .filter_map(|record| match record {
            pod::log::LogRecord::Item(item) => Some(&item.kind),
            _ => None,
        })
        .collect();
    let answers: Vec<usize> = (0..items.len())
        .filter(|&i| matches!(items[i], ItemKind::Assistant { .. }))
        .collect();
    let reminders: Vec<usize> = (0..items.len())
        .filter(|&i| matches!(items[i], ItemKind::System { .. }))
        .collect();
    assert_eq!(reminders, [answers[6] - 1], "{items:#?}");
    let report = replay(&recording, &home, &what_if(cadence(5)))
        .await
        .unwrap();
    assert!(report.identical(), "{report:#?}");

    // Every 3: the replay reminds after three (answers[1..=3]), where the
    // recording has the fourth.
    let report = replay(&recording, &home, &what_if(cadence(3)))
        .await
        .unwrap();
    let located = report.divergence.expect("a divergence");
    let divergence = located.divergence;
    // `pod show` numbers items from 1; every record here is an item.
    assert_eq!(divergence.item, answers[4] + 1, "{divergence:#?}");
    assert_eq!(divergence.record, answers[4] + 1);
    let actual = divergence.actual.unwrap();
    assert_eq!(actual["item"]["type"], "system", "{actual}");
    assert_eq!(actual["item"]["kind"], "reminder", "{actual}");
    let expected = divergence.expected.unwrap();
    assert_eq!(expected["item"]["type"], "assistant", "{expected}");
    assert_eq!(report.same, answers[4]);
}
