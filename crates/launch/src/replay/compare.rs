//! The comparison: the recording's records and the replay's, one by one,
//! until the first that differ.

use super::normalise::Entry;
use serde::Serialize;
use serde_json::Value;

/// Where a replay first went otherwise than its recording.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Divergence {
    /// The item number (`pod show`'s) of the recorded record that differs,
    /// or of the last item before it when it is not an item; where the
    /// recording has no record there, the replay's.
    pub item: usize,
    /// Its 1-based position among the log's records after the header.
    pub record: usize,
    /// What it is about, in a few words (`tool result of call_2
    /// (read_file)`, `reminder`, `the end of the log`).
    pub what: String,
    /// The recorded record, normalised; `None` where the recording ended.
    pub expected: Option<Value>,
    /// The replay's record, normalised; `None` where the replay ended.
    pub actual: Option<Value>,
    /// The lines that differ, `-` recorded and `+` replayed.
    pub diff: String,
}

/// How two logs compare.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Comparison {
    /// Records compared and equal.
    pub same: usize,
    /// The first difference.
    pub divergence: Option<Divergence>,
    /// Records the replay wrote past the end of a recording that was cut
    /// (a crash, a torn line): not compared.
    pub beyond: usize,
}

/// Compares `expected` (the recording's) with `actual` (the replay's).
/// When the recording was `cut` short, what the replay did after its last
/// record is not a difference; otherwise a replay that goes on, or stops
/// early, differs where it does.
pub(crate) fn compare(expected: &[Entry], actual: &[Entry], cut: bool) -> Comparison {
    let same = expected
        .iter()
        .zip(actual)
        .take_while(|(e, a)| e.value == a.value)
        .count();
    let divergence = match (expected.get(same), actual.get(same)) {
        (Some(e), Some(a)) => Some(divergence(e.item, e.record, Some(e), Some(a))),
        (Some(e), None) => Some(divergence(e.item, e.record, Some(e), None)),
        (None, Some(a)) if !cut => Some(divergence(a.item, a.record, None, Some(a))),
        _ => None,
    };
    Comparison {
        same,
        beyond: match (&divergence, cut) {
            (None, true) => actual.len().saturating_sub(expected.len()),
            _ => 0,
        },
        divergence,
    }
}

fn divergence(
    item: usize,
    record: usize,
    expected: Option<&Entry>,
    actual: Option<&Entry>,
) -> Divergence {
    let what = match (expected, actual) {
        (Some(e), _) => describe(&e.value),
        (None, Some(a)) => format!("{}, after the end of the recording", describe(&a.value)),
        (None, None) => "nothing".into(),
    };
    let text = |entry: Option<&Entry>| {
        entry
            .and_then(|e| serde_json::to_string_pretty(&e.value).ok())
            .unwrap_or_default()
    };
    Divergence {
        item,
        record,
        what,
        diff: line_diff(&text(expected), &text(actual)),
        expected: expected.map(|e| e.value.clone()),
        actual: actual.map(|e| e.value.clone()),
    }
}

/// A record in a few words.
pub(crate) fn describe(value: &Value) -> String {
    let Some((kind, body)) = value.as_object().and_then(|map| map.iter().next()) else {
        return "a record".into();
    };
    let call = |body: &Value| body["call_id"].as_str().unwrap_or("?").to_string();
    match kind.as_str() {
        "item" => match body["type"].as_str().unwrap_or("") {
            "user" => "user prompt".into(),
            "assistant" => "model answer".into(),
            "tool_result" => format!("tool result of {}", call(body)),
            "system" => match body["kind"].as_str().unwrap_or("other") {
                "reminder" => "reminder".into(),
                "notification" => "notification".into(),
                "summary" => "compaction summary".into(),
                "carry_over" => "carried-over state".into(),
                _ => "system message".into(),
            },
            other => format!("{other} item"),
        },
        "compaction" => "compaction".into(),
        "stopped" => "budget stop".into(),
        "question" => format!("approval question about {}", body["request"]["call_id"]),
        "answer" => format!("approval answer for {}", call(body)),
        "ended" => "end of a run".into(),
        "hook" => format!("hook decision on {} ({})", call(body), body["tool"]),
        "checkpoint" => format!("checkpoint of {}", call(body)),
        other => other.to_string(),
    }
    .replace('"', "")
}

/// The lines that differ between `expected` and `actual` (a longest
/// common subsequence of lines kept out), `-` removed and `+` added, up to
/// a screenful.
pub(crate) fn line_diff(expected: &str, actual: &str) -> String {
    /// Lines shown: a short diff, not the whole record.
    const SHOWN: usize = 24;
    /// Beyond this many lines a side, the table would be large: the lines
    /// between the common prefix and suffix are shown whole instead.
    const TABLE: usize = 2000;
    let old: Vec<&str> = expected.lines().collect();
    let new: Vec<&str> = actual.lines().collect();
    let prefix = old.iter().zip(&new).take_while(|(a, b)| a == b).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(a, b)| a == b)
        .count();
    let (a, b) = (
        &old[prefix..old.len() - suffix],
        &new[prefix..new.len() - suffix],
    );
    let mut lines: Vec<(char, &str)> = Vec::new();
    if a.len() > TABLE || b.len() > TABLE {
        lines.extend(a.iter().map(|l| ('-', *l)));
        lines.extend(b.iter().map(|l| ('+', *l)));
    } else {
        // common[i][j]: the longest common subsequence of a[i..] and b[j..].
        let mut common = vec![vec![0usize; b.len() + 1]; a.len() + 1];
        for i in (0..a.len()).rev() {
            for j in (0..b.len()).rev() {
                common[i][j] = match a[i] == b[j] {
                    true => common[i + 1][j + 1] + 1,
                    false => common[i + 1][j].max(common[i][j + 1]),
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < a.len() || j < b.len() {
            if i < a.len() && j < b.len() && a[i] == b[j] {
                (i, j) = (i + 1, j + 1);
            } else if j == b.len() || (i < a.len() && common[i + 1][j] >= common[i][j + 1]) {
                lines.push(('-', a[i]));
                i += 1;
            } else {
                lines.push(('+', b[j]));
                j += 1;
            }
        }
    }
    let mut out = String::new();
    for (sign, line) in lines.iter().take(SHOWN) {
        out.push_str(&format!("{sign} {line}\n"));
    }
    if lines.len() > SHOWN {
        out.push_str(&format!("  … {} more lines differ\n", lines.len() - SHOWN));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn entry(item: usize, record: usize, value: Value) -> Entry {
        Entry {
            item,
            record,
            value,
        }
    }

    fn result(call: &str, content: &str) -> Value {
        json!({"item": {"type": "tool_result", "call_id": call, "content": content}})
    }

    #[test]
    fn the_first_record_that_differs_is_reported_with_a_diff() {
        let expected = [
            entry(1, 1, json!({"item": {"type": "user", "text": "go"}})),
            entry(2, 2, result("c1", "one\ntwo")),
        ];
        let actual = [expected[0].clone(), entry(2, 2, result("c1", "one\nthree"))];
        let comparison = compare(&expected, &actual, false);
        assert_eq!(comparison.same, 1);
        let divergence = comparison.divergence.unwrap();
        assert_eq!((divergence.item, divergence.record), (2, 2));
        assert_eq!(divergence.what, "tool result of c1");
        assert_eq!(
            divergence.diff,
            "-     \"content\": \"one\\ntwo\"\n+     \"content\": \"one\\nthree\"\n"
        );
    }

    #[test]
    fn lines_both_sides_share_are_left_out_of_the_diff() {
        let diff = line_diff("a\nb\nc\nd\ne", "a\nB\nc\nd\nE");
        assert_eq!(diff, "- b\n+ B\n- e\n+ E\n");
    }

    #[test]
    fn a_replay_past_a_cut_recording_is_not_a_difference_but_past_a_whole_one_is() {
        let expected = [entry(1, 1, json!({"item": {"type": "user", "text": "go"}}))];
        let actual = [
            expected[0].clone(),
            entry(1, 2, json!({"ended": {"how": "failed"}})),
        ];
        let cut = compare(&expected, &actual, true);
        assert_eq!((cut.divergence, cut.beyond), (None, 1));
        let whole = compare(&expected, &actual, false).divergence.unwrap();
        assert_eq!(whole.record, 2);
        assert_eq!(whole.expected, None);
        assert_eq!(whole.what, "end of a run, after the end of the recording");
    }

    #[test]
    fn a_replay_that_stops_early_differs_where_it_stopped() {
        let expected = [
            entry(1, 1, json!({"item": {"type": "user", "text": "go"}})),
            entry(1, 2, json!({"stopped": {"limit": "x"}})),
        ];
        let comparison = compare(&expected, &expected[..1], true);
        let divergence = comparison.divergence.unwrap();
        assert_eq!((divergence.record, divergence.actual), (2, None));
        assert_eq!(divergence.what, "budget stop");
    }
}
