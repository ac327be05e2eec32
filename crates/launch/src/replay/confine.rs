//! What a replay may reach: at most its scratch workspace, written, with
//! no network, no hook but those its command line names, and the user's
//! own `POD_HOME` out of reach. A replayed corpus may come from elsewhere
//! (a colleague's sessions, a CI artefact), and its log says which sandbox
//! to use and which hooks and servers to run: a recorded wider policy is
//! reported, never applied.

use pod_mcp::{Confine, ServerConfig};
use pod_tools::sandbox::{support, Support};
use pod_tools::{Sandbox, SandboxMode, SandboxPolicy};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The sandbox a replay of a session recorded with `recorded` runs under,
/// and what was narrowed, for the report.
pub(crate) fn narrow(recorded: SandboxPolicy) -> (SandboxPolicy, Vec<String>) {
    let mut notes = Vec::new();
    let mut policy = recorded;
    if policy.mode == SandboxMode::Off {
        policy.mode = SandboxMode::WorkspaceWrite;
        notes.push(
            "recorded with the sandbox off: replayed under workspace-write (the scratch \
             workspace only)"
                .to_string(),
        );
    }
    if policy.network {
        policy.network = false;
        notes.push("recorded with the network on: replayed with it off".to_string());
    }
    if let Support::Unavailable(why) = support() {
        // `strict` refuses commands where the kernel cannot confine them.
        policy.mode = SandboxMode::Strict;
        notes.push(format!(
            "this kernel cannot confine commands ({why}): recorded commands were refused"
        ));
    }
    (policy, notes)
}

/// `servers`, each process confined to `policy` around `workspace` (its
/// only writable directory), with `private` out of its reach.
pub(crate) fn servers(
    servers: Vec<ServerConfig>,
    policy: SandboxPolicy,
    workspace: &Path,
    private: &[PathBuf],
) -> Vec<ServerConfig> {
    let sandbox = Arc::new(Sandbox::new(policy, workspace, None).with_private(private.to_vec()));
    let confine = Confine(Arc::new(move |command: &mut tokio::process::Command| {
        sandbox.confine(command).map_err(std::io::Error::other)
    }));
    servers
        .into_iter()
        .map(|server| server.confined(confine.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_wider_policy_is_narrowed_and_said() {
        let enforced = matches!(support(), Support::Enforced { .. });
        let (policy, notes) = narrow(SandboxPolicy::OFF);
        assert!(!policy.network);
        match enforced {
            true => assert_eq!(policy.mode, SandboxMode::WorkspaceWrite),
            false => assert_eq!(policy.mode, SandboxMode::Strict),
        }
        assert!(notes[0].contains("sandbox off"), "{notes:?}");
        assert!(notes[1].contains("network on"), "{notes:?}");
        let narrower = SandboxPolicy {
            mode: SandboxMode::ReadOnly,
            network: false,
        };
        let (kept, notes) = narrow(narrower);
        if enforced {
            assert_eq!(kept, narrower);
            assert!(notes.is_empty(), "{notes:?}");
        }
    }
}
