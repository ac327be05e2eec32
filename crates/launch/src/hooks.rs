//! Which hooks a session runs: the `"hooks"` of Claude Code settings files
//! named by `--hooks`, the config file's and the profile's `hooks_file`,
//! and, when the operator opts in (`--workspace-hooks`, `workspace_hooks =
//! true`), the workspace's own settings files.
//!
//! They are read once, when a session starts, and recorded in its log
//! header ([`RecordedHooks`]): a resume, here or on a fleet worker, runs
//! the commands the session started with. A file in the workspace is the
//! agent's to write; reading it again on resume would let the agent choose
//! commands that run outside its sandbox.

use crate::error::LaunchError;
use crate::flags::Flags;
use crate::record::{Launch, RecordedHooks};
use pod_providers::{ConfigFile, RawProviderConfig};
use std::path::{Path, PathBuf};

/// The workspace's settings files read with `--workspace-hooks`, in order.
const WORKSPACE_FILES: [&str; 3] = [
    ".claude/settings.json",
    ".claude/settings.local.json",
    ".pod/settings.json",
];

/// The hooks of a session in `workspace`: read now for a new session, or
/// when the flags name hooks; else the ones `recorded` at its start.
pub(crate) fn collect(
    flags: &Flags,
    file: &ConfigFile,
    profile: &RawProviderConfig,
    recorded: Option<&Launch>,
    workspace: &Path,
) -> Result<Vec<RecordedHooks>, LaunchError> {
    let asked = !flags.hooks.is_empty() || flags.workspace_hooks;
    if let Some(launch) = recorded.filter(|_| !asked) {
        return Ok(launch.hooks.clone());
    }
    let mut files: Vec<PathBuf> = Vec::new();
    let config_dir = file.path.parent().unwrap_or(Path::new(""));
    for named in [file.hooks_file.as_ref(), profile.hooks_file.as_ref()]
        .into_iter()
        .flatten()
    {
        files.push(config_dir.join(named));
    }
    for path in &flags.hooks {
        files.push(std::path::absolute(path).map_err(|err| {
            LaunchError::settings(
                format!("cannot resolve the hooks file {}: {err}", path.display()),
                "give its path relative to the current directory, or absolute",
            )
        })?);
    }
    let mut read = Vec::new();
    for path in files {
        read.extend(read_file(&path)?);
    }
    let from_workspace = flags.workspace_hooks
        || profile
            .workspace_hooks
            .or(file.workspace_hooks)
            .unwrap_or(false);
    if from_workspace {
        for name in WORKSPACE_FILES {
            let path = workspace.join(name);
            if path.is_file() {
                read.extend(read_file(&path)?);
            }
        }
    }
    Ok(read)
}

/// The hooks in the settings files at `paths` and nothing else (a replay's
/// `--hooks`).
pub(crate) fn from_files(paths: &[PathBuf]) -> Result<Vec<RecordedHooks>, LaunchError> {
    let mut read = Vec::new();
    for path in paths {
        let path = std::path::absolute(path).map_err(|err| {
            LaunchError::settings(
                format!("cannot resolve the hooks file {}: {err}", path.display()),
                "give its path relative to the current directory, or absolute",
            )
        })?;
        read.extend(read_file(&path)?);
    }
    Ok(read)
}

/// The `"hooks"` object of the settings file at `path`, checked.
fn read_file(path: &Path) -> Result<Option<RecordedHooks>, LaunchError> {
    let hint = "fix the file (docs/hooks.md lists the format), or leave it out";
    let text = std::fs::read_to_string(path).map_err(|err| {
        LaunchError::settings(
            format!("cannot read the hooks file {}: {err}", path.display()),
            hint,
        )
    })?;
    let settings: serde_json::Value = serde_json::from_str(&text).map_err(|err| {
        LaunchError::settings(
            format!("the hooks file {} is not JSON: {err}", path.display()),
            hint,
        )
    })?;
    // Checked now, so a bad file stops the start instead of the session.
    pod_hooks::Hooks::from_settings(&settings, path)
        .map_err(|err| LaunchError::settings(err.to_string(), hint))?;
    Ok(settings.get("hooks").map(|hooks| RecordedHooks {
        source: path.to_path_buf(),
        hooks: hooks.clone(),
    }))
}

/// The hooks to run from what was collected; `None` when there are none.
pub(crate) fn load(recorded: &[RecordedHooks]) -> Result<Option<pod_hooks::Hooks>, LaunchError> {
    let mut hooks = pod_hooks::Hooks::new();
    for file in recorded {
        let settings = serde_json::json!({ "hooks": file.hooks });
        let read = pod_hooks::Hooks::from_settings(&settings, &file.source).map_err(|err| {
            LaunchError::settings(
                err.to_string(),
                "the session recorded hooks pod cannot read; resume it with --hooks FILE",
            )
        })?;
        hooks.extend(read);
    }
    Ok((!hooks.is_empty()).then_some(hooks))
}
