//! The token ledger through the real binary: per run and per session in
//! `--json`, totals that survive a resume (they come from the log), and
//! the cost `pod show` and `pod sessions` print from a profile's prices.

use crate::support::*;
use serde_json::{json, Value};

fn finished(stdout: &[u8]) -> Value {
    let lines = ndjson(stdout);
    let last = lines.last().expect("output").clone();
    assert_eq!(last["event"], "session_finished");
    last
}

#[test]
fn runs_and_sessions_report_their_tokens_and_the_session_total_survives_resume() {
    let env = TestEnv::new();
    let script = env.script(
        "s.json",
        &script(vec![
            call("echo_missing_tool", json!({})),
            say("First run done."),
            say("Second run done."),
        ]),
    );
    env.config_file(&format!(
        "[profiles.priced]\nkind = \"scripted\"\nscript = \"{}\"\nprices = {{ input = 2.0, output = 10.0 }}\n",
        script.display()
    ));
    let out = env
        .pod()
        .args(["run", "--json", "--profile", "priced", "Start"])
        .output()
        .unwrap();
    assert_success(&out);
    let first = finished(&out.stdout);
    let id = first["session_id"].as_str().unwrap().to_string();
    let run_prompt = first["usage"]["prompt_tokens"].as_u64().unwrap();
    assert!(run_prompt > 0, "{first}");
    // One run so far: the session's total is this run's.
    assert_eq!(first["session_usage"], first["usage"]);
    // The turn_ended events add up to the run.
    let turns: u64 = ndjson(&out.stdout)
        .iter()
        .filter(|line| line["event"] == "turn_ended")
        .map(|line| line["usage"]["prompt_tokens"].as_u64().unwrap())
        .sum();
    assert_eq!(turns, run_prompt);

    let out = env
        .pod()
        .args(["resume", "--json", &id, "Go on"])
        .output()
        .unwrap();
    assert_success(&out);
    let second = finished(&out.stdout);
    let total = second["session_usage"]["prompt_tokens"].as_u64().unwrap();
    assert_eq!(
        total,
        run_prompt + second["usage"]["prompt_tokens"].as_u64().unwrap()
    );

    // `pod show` and `pod sessions` read the same ledger and price it.
    let show = env.show_json(&id);
    assert_eq!(show["session"]["usage"], second["session_usage"]);
    let usage = &show["session"]["usage"];
    let expected = (usage["prompt_tokens"].as_f64().unwrap() * 2.0
        + usage["completion_tokens"].as_f64().unwrap() * 10.0)
        / 1e6;
    let cost = show["session"]["cost"].as_f64().unwrap();
    assert!((cost - expected).abs() < 1e-12, "{cost} vs {expected}");
    let human = env.pod().args(["show", &id]).output().unwrap();
    let human = String::from_utf8_lossy(&human.stdout);
    assert!(human.contains(&format!("; cost {expected:.4}")), "{human}");
    let list = env.pod().args(["sessions"]).output().unwrap();
    let list = String::from_utf8_lossy(&list.stdout);
    assert!(list.contains("TOKENS"), "{list}");
    assert!(list.contains(&format!(" {expected:.2}")), "{list}");
}

/// The raw text of the first `"cost"` number in `json`.
fn cost_text(json: &str) -> String {
    let at = json
        .find("\"cost\":")
        .unwrap_or_else(|| panic!("no cost: {json}"));
    json[at + "\"cost\":".len()..]
        .trim_start()
        .chars()
        .take_while(|c| !matches!(c, ',' | '\n' | '}'))
        .collect::<String>()
        .trim()
        .to_string()
}

#[test]
fn a_sessions_cost_is_written_to_the_millionth_without_float_noise() {
    let env = TestEnv::new();
    let script = env.script("s.json", &script(vec![say("Hi.")]));
    // A price with more digits than money has.
    env.config_file(&format!(
        "[profiles.priced]\nkind = \"scripted\"\nscript = \"{}\"\nprices = {{ input = 123.4567, output = 0.0 }}\n",
        script.display()
    ));
    let out = env
        .pod()
        .args(["run", "--profile", "priced", "Say hi"])
        .output()
        .unwrap();
    assert_success(&out);
    let listed = env.pod().args(["sessions", "--json"]).output().unwrap();
    assert_success(&listed);
    let listed = String::from_utf8_lossy(&listed.stdout).to_string();
    let sessions: Vec<Value> = serde_json::from_str(&listed).unwrap();
    let prompt = sessions[0]["usage"]["prompt_tokens"].as_f64().unwrap();
    assert!(prompt > 0.0, "{listed}");
    let exact = 123.4567 * prompt / 1e6;
    let id = sessions[0]["id"].as_str().unwrap().to_string();
    let shown = env.pod().args(["show", &id, "--json"]).output().unwrap();
    assert_success(&shown);
    for json in [listed, String::from_utf8_lossy(&shown.stdout).to_string()] {
        // A plain JSON number, at most six decimals: rounded to a millionth.
        let text = cost_text(&json);
        let (whole, decimals) = text.split_once('.').unwrap_or((&text, ""));
        assert!(
            whole.chars().all(|c| c.is_ascii_digit()) && decimals.len() <= 6,
            "cost {text}"
        );
        assert!(decimals.chars().all(|c| c.is_ascii_digit()), "cost {text}");
        let cost: f64 = text.parse().unwrap();
        assert!((cost - exact).abs() <= 5e-7, "{cost} vs {exact}");
    }
}
