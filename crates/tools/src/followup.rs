//! The `schedule_followup` tool: the agent asks to be woken later ("check
//! CI again in 30 minutes") with a note to itself.
//!
//! The call itself waits: the Pod parks the turn on it (the call stays
//! open, like a question to a person) and a fleet worker continues the
//! session when the time comes; the call then runs and its result is the
//! note. This module only parses and bounds the arguments and gives the
//! result; parking and waking are the Pod's and the fleet's.

use pod_worker::{Tool, ToolContext, ToolOutput};
use serde::Deserialize;
use std::time::Duration;

/// The tool's name.
pub const SCHEDULE_FOLLOWUP: &str = "schedule_followup";

/// The longest delay: a session parked for longer is more likely forgotten
/// than resumed usefully, and its workspace and model may be gone.
pub const MAX_DELAY: Duration = Duration::from_secs(7 * 24 * 3600);

/// The shortest delay: a fleet worker looks for due work about once a
/// second, so anything shorter is no follow-up.
pub const MIN_DELAY: Duration = Duration::from_secs(1);

/// The longest note: a reminder to oneself, not a document.
const MAX_NOTE: usize = 4000;

/// The arguments of a `schedule_followup` call.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FollowupArgs {
    /// When, from now: `30m`, `2h`, `1h30m`, `90s`, `1d`.
    #[serde(rename = "in")]
    pub delay: String,
    /// What to do then.
    pub note: String,
}

/// A valid follow-up: its delay and note.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Followup {
    /// When, from the call.
    pub delay: Duration,
    /// What to do then.
    pub note: String,
}

/// The follow-up a call's raw `arguments` ask for, or what is wrong with
/// them, worded for the model.
pub fn parse(arguments: &str) -> Result<Followup, String> {
    let args: FollowupArgs = serde_json::from_str(arguments).map_err(|err| {
        format!(
            "schedule_followup did not run: its arguments are wrong ({err}). Give \
             {{\"in\": \"30m\", \"note\": \"what to do then\"}}."
        )
    })?;
    let delay = delay(&args.delay).ok_or_else(|| {
        format!(
            "schedule_followup did not run: `{}` is not a delay. Use a number and a unit: \
             `90s`, `30m`, `2h`, `1d`, or several (`1h30m`).",
            args.delay
        )
    })?;
    if !(MIN_DELAY..=MAX_DELAY).contains(&delay) {
        return Err(format!(
            "schedule_followup did not run: `{}` is out of range; a follow-up comes between 1s \
             and 7d from now. For later work, leave a todo and finish.",
            args.delay
        ));
    }
    let note = args.note.trim().to_string();
    if note.is_empty() || note.chars().count() > MAX_NOTE {
        return Err(format!(
            "schedule_followup did not run: the note must say what to do then, in 1 to \
             {MAX_NOTE} characters."
        ));
    }
    Ok(Followup { delay, note })
}

/// `1h30m` → 5400 s; `None` if it is not a delay.
fn delay(text: &str) -> Option<Duration> {
    let text = text.trim();
    let mut total: u64 = 0;
    let mut digits = String::new();
    let mut any = false;
    for c in text.chars() {
        if c.is_ascii_digit() {
            digits.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            _ => return None,
        };
        let n: u64 = digits.parse().ok()?;
        total = total.checked_add(n.checked_mul(unit)?)?;
        digits.clear();
        any = true;
    }
    (any && digits.is_empty()).then(|| Duration::from_secs(total))
}

/// Gives the note back when the follow-up's time has come.
#[derive(Debug, Default, Clone, Copy)]
pub struct FollowupTool;

#[async_trait::async_trait]
impl Tool for FollowupTool {
    type Args = FollowupArgs;

    fn name(&self) -> &str {
        SCHEDULE_FOLLOWUP
    }

    fn description(&self) -> String {
        "Pause this session and continue it later: `in` is when (`30m`, `2h`, `1d`; at most \
         7d), `note` is what to do then. Use it to wait for something outside (CI, a review, \
         a deploy) instead of polling. The session stops now; at that time it continues and \
         this call returns your note. Call it alone, as the last thing of your answer."
            .into()
    }

    fn parameters(&self) -> std::sync::Arc<serde_json::Value> {
        pod_worker::schema!({
            "type": "object",
            "properties": {
                "in": {"type": "string", "description": "When, from now: 90s, 30m, 2h, 1h30m, 1d (at most 7d)."},
                "note": {"type": "string", "description": "What to do then (a note to yourself)."}
            },
            "required": ["in", "note"],
            "additionalProperties": false
        })
    }

    // A call a restart found open is the follow-up still waiting: the next
    // run runs it (the Pod parks it again until its time).
    fn resumable(&self) -> bool {
        true
    }

    async fn call(&self, args: FollowupArgs, _ctx: ToolContext) -> ToolOutput {
        ToolOutput::ok(format!(
            "The follow-up you scheduled {} ago is due now. Your note: {}",
            args.delay.trim(),
            args.note.trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_parse_and_are_bounded() {
        assert_eq!(delay("30m"), Some(Duration::from_secs(1800)));
        assert_eq!(delay("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(delay(" 2s "), Some(Duration::from_secs(2)));
        assert_eq!(delay("30"), None);
        assert_eq!(delay("m"), None);
        assert_eq!(delay("soon"), None);
        assert_eq!(delay("99999999999999999999d"), None);
        let ok = parse(r#"{"in": "30m", "note": "check CI"}"#);
        assert_eq!(
            ok,
            Ok(Followup {
                delay: Duration::from_secs(1800),
                note: "check CI".into()
            })
        );
        let too_late = parse(r#"{"in": "8d", "note": "x"}"#).unwrap_err();
        assert!(too_late.contains("between 1s and 7d"), "{too_late}");
        let bad = parse(r#"{"in": "soon", "note": "x"}"#).unwrap_err();
        assert!(bad.contains("`soon` is not a delay"), "{bad}");
        let shape = parse(r#"{"when": "1h"}"#).unwrap_err();
        assert!(shape.contains("arguments are wrong"), "{shape}");
        let empty = parse(r#"{"in": "1h", "note": " "}"#).unwrap_err();
        assert!(empty.contains("the note must say"), "{empty}");
    }
}
