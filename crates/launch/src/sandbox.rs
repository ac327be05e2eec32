//! The sandbox a session's commands run in: `--sandbox`/`--network`, then
//! the session's record (on resume), then the config file's `[sandbox]`
//! table, then the default (workspace-write, network off).

use crate::error::LaunchError;
use crate::flags::SandboxFlags;
use pod::{SandboxMode, SandboxPolicy};
use pod_providers::ConfigFile;
use serde::Deserialize;

/// `[sandbox]` in the config file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct SandboxTable {
    mode: Option<String>,
    network: Option<bool>,
}

/// The policy for a run.
pub fn resolve(
    file: &ConfigFile,
    recorded: Option<SandboxPolicy>,
    flags: &SandboxFlags,
) -> Result<SandboxPolicy, LaunchError> {
    let base = match recorded {
        Some(policy) => policy,
        None => from_file(file)?,
    };
    Ok(SandboxPolicy {
        mode: flags.mode.unwrap_or(base.mode),
        network: flags.network.unwrap_or(base.network),
    })
}

fn from_file(file: &ConfigFile) -> Result<SandboxPolicy, LaunchError> {
    let Some(table) = &file.sandbox else {
        return Ok(SandboxPolicy::default());
    };
    let where_ = || format!("the [sandbox] table of {}", file.path.display());
    let table: SandboxTable = match table.clone().try_into() {
        Ok(table) => table,
        Err(err) => {
            return Err(LaunchError::settings(
                format!("invalid {}: {err}", where_()),
                "it takes mode = \"workspace-write\" | \"read-only\" | \"strict\" | \"off\" \
                 and network = true | false",
            ))
        }
    };
    let mode = match table.mode {
        Some(name) => match name.parse::<SandboxMode>() {
            Ok(mode) => mode,
            Err(err) => {
                return Err(LaunchError::settings(
                    format!("invalid {}: {err}", where_()),
                    "use one of workspace-write, read-only, strict, off",
                ))
            }
        },
        None => SandboxMode::default(),
    };
    Ok(SandboxPolicy {
        mode,
        network: table.network.unwrap_or(false),
    })
}

/// The line a front end prints at session start when the sandbox is asked
/// for but the kernel cannot enforce it; `None` when all is as asked.
pub fn warning(policy: &SandboxPolicy) -> Option<String> {
    (policy.mode != SandboxMode::Off && !policy.is_enforced())
        .then(|| format!("warning: sandbox {}", policy.describe()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> ConfigFile {
        ConfigFile::parse(text, std::path::Path::new("config.toml")).unwrap()
    }

    #[test]
    fn flags_win_over_the_record_which_wins_over_the_file() {
        let file = file("[sandbox]\nmode = \"strict\"\nnetwork = true\n");
        let none = SandboxFlags::default();
        assert_eq!(
            resolve(&file, None, &none).unwrap(),
            SandboxPolicy {
                mode: SandboxMode::Strict,
                network: true
            }
        );
        let recorded = SandboxPolicy {
            mode: SandboxMode::ReadOnly,
            network: false,
        };
        assert_eq!(resolve(&file, Some(recorded), &none).unwrap(), recorded);
        let flags = SandboxFlags {
            mode: Some(SandboxMode::Off),
            network: None,
        };
        assert_eq!(
            resolve(&file, Some(recorded), &flags).unwrap(),
            SandboxPolicy {
                mode: SandboxMode::Off,
                network: false
            }
        );
    }

    #[test]
    fn the_default_is_workspace_write_without_network() {
        assert_eq!(
            resolve(&file(""), None, &SandboxFlags::default()).unwrap(),
            SandboxPolicy::default()
        );
    }

    #[test]
    fn a_bad_table_says_what_it_takes() {
        let err = resolve(
            &file("[sandbox]\nmode = \"tight\"\n"),
            None,
            &SandboxFlags::default(),
        )
        .unwrap_err();
        assert!(
            format!("{err:#}").contains("unknown sandbox mode `tight`"),
            "{err:#}"
        );
    }
}
