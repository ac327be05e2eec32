//! What "done" means for a run: `--verify`, `--max-verify`, `--grader`,
//! `--rubric` (docs/guide.md, "Done means verified").

use clap::Args;

/// The checks that decide whether a run is done.
#[derive(Debug, Clone, Default, Args)]
pub struct GoalArgs {
    /// A command that must pass before the run is done (repeatable, over
    /// [goal] verify): run with `bash -c` in the workspace, under the
    /// session's sandbox, when the model ends its turn with its plan
    /// complete. A failure goes back to the model, which goes on.
    #[arg(long = "verify", value_name = "CMD")]
    pub verify: Vec<String>,
    /// Failed verification rounds in a row before the run stops
    /// unverified (exit 5); 3 by default.
    #[arg(long, value_name = "N")]
    pub max_verify: Option<u32>,
    /// A profile whose model grades the work against --rubric once every
    /// check passed, in a fresh context (its cost is the session's).
    #[arg(long, value_name = "PROFILE")]
    pub grader: Option<String>,
    /// What the grader judges against: a file's path, or the text.
    #[arg(long, value_name = "FILE|TEXT")]
    pub rubric: Option<String>,
}

impl GoalArgs {
    /// What they ask of the launcher (a rubric naming a file is read).
    pub fn flags(&self) -> pod_launch::goal::GoalFlags {
        let rubric = self.rubric.as_ref().map(|given| {
            let path = std::path::Path::new(given);
            match path.is_file() {
                true => std::fs::read_to_string(path).unwrap_or_else(|_| given.clone()),
                false => given.clone(),
            }
        });
        pod_launch::goal::GoalFlags {
            verify: self.verify.clone(),
            checks: Vec::new(),
            max_rounds: self.max_verify,
            grader: self.grader.clone(),
            rubric,
        }
    }
}
