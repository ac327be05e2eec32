//! `--until-done` continues while todos are unfinished, up to `--max-turns`.

use crate::support::*;

fn continuations(lines: &[serde_json::Value]) -> usize {
    events(lines, "reminder_injected")
        .iter()
        .filter(|e| {
            e["text"]
                .as_str()
                .unwrap_or_default()
                .contains("You ended your turn")
        })
        .count()
}

#[test]
fn until_done_stops_at_the_end_of_the_list() {
    let env = TestEnv::new();
    let script = env.script(
        "s.json",
        &script(vec![
            write_todos(&plan(0)),
            say("Pausing after planning."),
            write_todos(&plan(3)),
            say("All done."),
            say("never played"),
        ]),
    );
    let out = env
        .pod()
        .args(["run", "--json", "--until-done", "--script"])
        .arg(&script)
        .arg("Do a, b and c")
        .output()
        .unwrap();
    assert_success(&out);
    let lines = ndjson(&out.stdout);
    assert_eq!(continuations(&lines), 1);
    let finished = lines.last().unwrap();
    assert_eq!(finished["todos"]["completed"], 3);
    assert_eq!(finished["requests"], 4, "the fifth step must not be played");
    let shown = env.show_json(&session_id(&lines));
    let history = shown["history"].as_array().unwrap();
    assert_eq!(history.last().unwrap()["text"], "All done.");
}

#[test]
fn until_done_stops_at_max_turns() {
    let env = TestEnv::new();
    let script = env.script(
        "s.json",
        &script(vec![
            write_todos(&plan(0)),
            say("one"),
            write_todos(&plan(1)),
            say("two"),
            write_todos(&plan(2)),
            say("three"),
            write_todos(&plan(3)),
            say("never reached"),
        ]),
    );
    let run = |extra: &[&str], code: i32| {
        let out = env
            .pod()
            .args(["run", "--json", "--script"])
            .arg(&script)
            .args(extra)
            .arg("Do a, b and c")
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(code),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        (
            ndjson(&out.stdout),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };

    // Out of continuations with work left: exit 3, and the limit is named.
    let (lines, stderr) = run(&["--until-done", "--max-turns", "2"], 3);
    assert_eq!(continuations(&lines), 2);
    let finished = lines.last().unwrap();
    assert_eq!(finished["todos"]["completed"], 2);
    assert_eq!(finished["reason"]["kind"], "limit");
    assert_eq!(finished["stopped"]["limit"]["continuations"], 2);
    let id = session_id(&lines);
    assert_eq!(
        stderr,
        format!(
            "pod: stopped by the limit of 2 continuations with 2 of 3 todos completed; \
             continue with: pod resume {id}\n"
        )
    );
    let shown = env.show_json(&id);
    assert_eq!(
        shown["history"].as_array().unwrap().last().unwrap()["text"],
        "three"
    );
    assert_eq!(shown["session"]["status"], "stopped");

    // Without --until-done a turn that ends is the end.
    let (lines, _) = run(&[], 0);
    assert_eq!(continuations(&lines), 0);
    assert_eq!(lines.last().unwrap()["todos"]["completed"], 0);
}
