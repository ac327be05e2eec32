//! The sandbox the kernel puts around the commands a model runs: which
//! paths they may read and write, and whether they may use the network.
//!
//! On Linux, a command's process gets, between fork and exec, a Landlock
//! domain (file-system rules; TCP bind/connect; abstract unix sockets and
//! signals scoped to the domain) and, with the network off, a seccomp
//! filter (no sockets but unix ones, no `io_uring`), after `no_new_privs`.
//! The domain holds for every descendant, whatever it does (`setsid`,
//! double forks, `exec`), and cannot be lifted. Everything the child does
//! between fork and exec is a plain system call on values built before the
//! fork (a multithreaded parent's child must not allocate); the ruleset is
//! built in the parent for each command.
//!
//! Where the kernel has no Landlock (or not Linux), [`support`] says so;
//! `strict` then refuses to run commands, and the other modes run them
//! unconfined: the front end must say so (it is never silent).

#[cfg(target_os = "linux")]
mod landlock;
mod rules;
#[cfg(target_os = "linux")]
mod seccomp;

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// What a sandboxed command may touch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SandboxMode {
    /// No sandbox: commands run with the user's full rights.
    Off,
    /// Read anywhere, write nowhere (but `/dev/null` and the like).
    ReadOnly,
    /// Read anywhere; write only in the workspace and the session's temp
    /// directory (`TMPDIR`).
    #[default]
    WorkspaceWrite,
    /// Read only the workspace, the temp directory and the system paths
    /// commands need (`/usr`, `/bin`, `/lib*`, `/etc`, `/proc`, the Rust
    /// toolchain); write as in `workspace-write`.
    Strict,
}

impl SandboxMode {
    /// Every mode, in the order the help lists them.
    pub const ALL: [SandboxMode; 4] = [
        SandboxMode::WorkspaceWrite,
        SandboxMode::ReadOnly,
        SandboxMode::Strict,
        SandboxMode::Off,
    ];

    /// The name flags and config files use.
    pub fn as_str(self) -> &'static str {
        match self {
            SandboxMode::Off => "off",
            SandboxMode::ReadOnly => "read-only",
            SandboxMode::WorkspaceWrite => "workspace-write",
            SandboxMode::Strict => "strict",
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode name that is not one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown sandbox mode `{0}` (the modes are workspace-write, read-only, strict, off)")]
pub struct UnknownMode(pub String);

impl std::str::FromStr for SandboxMode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SandboxMode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == s)
            .ok_or_else(|| UnknownMode(s.to_string()))
    }
}

/// The rules a session's commands run under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SandboxPolicy {
    /// What they may read and write.
    pub mode: SandboxMode,
    /// Whether they may use the network (off by default under a sandbox;
    /// meaningless with the sandbox off).
    pub network: bool,
}

impl Default for SandboxPolicy {
    /// `workspace-write`, network off.
    fn default() -> Self {
        Self {
            mode: SandboxMode::WorkspaceWrite,
            network: false,
        }
    }
}

impl SandboxPolicy {
    /// No sandbox at all.
    pub const OFF: SandboxPolicy = SandboxPolicy {
        mode: SandboxMode::Off,
        network: true,
    };

    /// Whether the kernel confines commands under this policy here.
    pub fn is_enforced(&self) -> bool {
        self.mode != SandboxMode::Off && matches!(support(), Support::Enforced { .. })
    }

    /// One line for people: `workspace-write, network off`, or why it is
    /// not enforced.
    pub fn describe(&self) -> String {
        if self.mode == SandboxMode::Off {
            return "off".into();
        }
        let network = if self.network { "on" } else { "off" };
        match support() {
            Support::Enforced { .. } => format!("{}, network {network}", self.mode),
            Support::Unavailable(why) => format!(
                "{}, network {network} — NOT ENFORCED: {why}{}",
                self.mode,
                if self.mode == SandboxMode::Strict {
                    "; commands are refused"
                } else {
                    "; commands run unconfined"
                }
            ),
        }
    }
}

/// Whether this kernel can enforce a sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Support {
    /// Landlock is there, with this ABI version.
    Enforced {
        /// The Landlock ABI version (1 = Linux 5.13; 4 adds TCP rules; 6
        /// adds scoping of abstract unix sockets and signals).
        abi: u32,
    },
    /// It is not, and why.
    Unavailable(String),
}

/// What the kernel supports, probed once per process.
pub fn support() -> &'static Support {
    static SUPPORT: OnceLock<Support> = OnceLock::new();
    SUPPORT.get_or_init(probe)
}

#[cfg(target_os = "linux")]
fn probe() -> Support {
    match landlock::abi() {
        Ok(abi) => Support::Enforced { abi },
        Err(err) => Support::Unavailable(format!(
            "this kernel has no Landlock ({err}); it needs Linux 5.13 or later with Landlock \
             enabled (lsm=landlock)"
        )),
    }
}

#[cfg(not(target_os = "linux"))]
fn probe() -> Support {
    Support::Unavailable("the sandbox is implemented for Linux only".into())
}

/// Why a command could not be started under its sandbox.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// `strict` where the kernel cannot enforce it.
    #[error("the strict sandbox cannot be enforced here ({0}), so commands are refused")]
    Unenforceable(String),
    /// Building the rules failed.
    #[error("could not set up the sandbox for {path}: {source}")]
    Rules {
        /// The path a rule was for.
        path: PathBuf,
        /// What the kernel said.
        #[source]
        source: std::io::Error,
    },
    /// The kernel refused the ruleset itself.
    #[error("could not create the sandbox: {0}")]
    Create(#[source] std::io::Error),
}

/// A session's sandbox: the policy and the paths it names.
#[derive(Clone, Debug)]
pub struct Sandbox {
    policy: SandboxPolicy,
    workspace: PathBuf,
    tmpdir: Option<PathBuf>,
    private: Vec<PathBuf>,
    writable: Vec<PathBuf>,
}

impl Sandbox {
    /// No sandbox.
    pub fn off() -> Self {
        Self {
            policy: SandboxPolicy::OFF,
            workspace: PathBuf::new(),
            tmpdir: None,
            private: Vec::new(),
            writable: Vec::new(),
        }
    }

    /// `policy` around `workspace`, with `tmpdir` as the commands' writable
    /// `TMPDIR`, created when the first command is prepared (a session that
    /// runs no command makes no directory: on a fleet worker starting
    /// thousands of sessions, creating them up front was a third of its
    /// CPU).
    pub fn new(policy: SandboxPolicy, workspace: &Path, tmpdir: Option<PathBuf>) -> Self {
        Self {
            policy,
            workspace: workspace.to_path_buf(),
            tmpdir,
            private: Vec::new(),
            writable: Vec::new(),
        }
    }

    /// Commands that may write beneath `writable` only (none: nowhere),
    /// read everything else and use no network: the confinement pod puts
    /// around a program of its own that works in a directory the agent
    /// controls (its git in a repository, say), so that a symbolic link
    /// planted there cannot lead the program's writes elsewhere.
    pub fn writing_only(writable: &[PathBuf]) -> Self {
        let mode = match writable.is_empty() {
            true => SandboxMode::ReadOnly,
            false => SandboxMode::WorkspaceWrite,
        };
        let policy = SandboxPolicy {
            mode,
            network: false,
        };
        let (first, rest) = writable
            .split_first()
            .map_or((PathBuf::new(), &[][..]), |(f, r)| (f.clone(), r));
        Self {
            policy,
            workspace: first,
            tmpdir: None,
            private: Vec::new(),
            writable: rest.to_vec(),
        }
    }

    /// The same sandbox, keeping `paths` out of commands' reach under every
    /// enforced mode: neither read nor written, whatever the mode grants
    /// around them (pod's own data: its home with every session's log and
    /// the API token, its config directory). The workspace and the temp dir
    /// stay reachable even inside one of them. The workspace tools refuse
    /// them too ([`crate::Workspace::with_sandbox`]).
    pub fn with_private(mut self, paths: impl IntoIterator<Item = PathBuf>) -> Self {
        self.private.extend(paths);
        self
    }

    /// The paths kept private, as given.
    pub fn private(&self) -> &[PathBuf] {
        &self.private
    }

    /// The policy.
    pub fn policy(&self) -> SandboxPolicy {
        self.policy
    }

    /// The commands' `TMPDIR`, if the session has one.
    pub fn tmpdir(&self) -> Option<&Path> {
        self.tmpdir.as_deref()
    }

    /// Makes `command` start under this sandbox (applied between fork and
    /// exec); unconfined where the sandbox is off or, outside `strict`,
    /// cannot be enforced.
    pub fn confine(&self, command: &mut tokio::process::Command) -> Result<(), SandboxError> {
        let prepared = self.prepare()?;
        if !prepared.is_empty() {
            // SAFETY: runs in the child between fork and exec; `apply`
            // makes system calls only, on values built before the fork. Its
            // error fails the spawn: the program never runs less confined.
            unsafe {
                command.pre_exec(move || prepared.apply());
            }
        }
        Ok(())
    }

    /// The restrictions for one command, built in the parent. `Ok` with
    /// nothing to apply when the sandbox is off or cannot be enforced (and
    /// the mode allows running unconfined).
    pub fn prepare(&self) -> Result<Prepared, SandboxError> {
        if let Some(tmpdir) = &self.tmpdir {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            // Private: it is inside pod's home, beside the session's log.
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder
                .create(tmpdir)
                .map_err(|source| SandboxError::Rules {
                    path: tmpdir.clone(),
                    source,
                })?;
        }
        if self.policy.mode == SandboxMode::Off {
            return Ok(Prepared::default());
        }
        match support() {
            Support::Unavailable(why) if self.policy.mode == SandboxMode::Strict => {
                Err(SandboxError::Unenforceable(why.clone()))
            }
            Support::Unavailable(_) => Ok(Prepared::default()),
            Support::Enforced { abi } => self.prepare_enforced(*abi),
        }
    }

    #[cfg(target_os = "linux")]
    fn prepare_enforced(&self, abi: u32) -> Result<Prepared, SandboxError> {
        let ruleset = landlock::ruleset(abi, &self.policy, &self.rules())?;
        let filter = (!self.policy.network).then(seccomp::no_network);
        Ok(Prepared {
            ruleset: Some(ruleset),
            filter,
        })
    }

    #[cfg(not(target_os = "linux"))]
    fn prepare_enforced(&self, _abi: u32) -> Result<Prepared, SandboxError> {
        Ok(Prepared::default())
    }

    /// The paths of the policy and what each may do. Private paths and
    /// other processes' `/proc/<pid>` are split out of every grant
    /// ([`rules::grant`]); the workspace and temp dir are granted as
    /// themselves, so they work even inside a private path.
    fn rules(&self) -> Vec<(PathBuf, Access)> {
        let mut rules = Vec::new();
        let private = rules::canonical(&self.private);
        match self.policy.mode {
            SandboxMode::Off => return rules,
            SandboxMode::ReadOnly | SandboxMode::WorkspaceWrite => {
                rules::grant(Path::new("/"), Access::Read, &private, &mut rules)
            }
            SandboxMode::Strict => {
                for path in system_paths() {
                    rules::grant(&path, Access::Read, &private, &mut rules);
                }
            }
        }
        // In read-only, `landlock` turns these into reads. A private path
        // inside the workspace (a workspace at `~` holds pod's home) stays
        // out of it; the workspace itself is granted even when private.
        let workspace = Some(&self.workspace).filter(|w| !w.as_os_str().is_empty());
        for path in [workspace, self.tmpdir.as_ref()]
            .into_iter()
            .flatten()
            .chain(&self.writable)
        {
            let path = path.canonicalize().unwrap_or_else(|_| path.clone());
            let inside: Vec<PathBuf> = private.iter().filter(|p| **p != path).cloned().collect();
            rules::grant(&path, Access::Write, &inside, &mut rules);
        }
        // Output commonly goes to these; none of them stores anything.
        for device in DEVICES {
            rules.push((device.into(), Access::Device));
        }
        rules
    }
}

/// Character devices every command may read and write.
const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// What `strict` lets commands read besides the workspace and temp dir.
fn system_paths() -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = [
        "/usr",
        "/bin",
        "/sbin",
        "/lib",
        "/lib32",
        "/lib64",
        "/libx32",
        "/etc",
        "/proc",
        "/sys",
        "/dev",
        "/opt",
        "/nix/store",
    ]
    .into_iter()
    .map(PathBuf::from)
    .collect();
    // The Rust toolchain, where rustup put it.
    let home = std::env::var_os("HOME").map(PathBuf::from);
    for (var, default) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
        match std::env::var_os(var) {
            Some(dir) => paths.push(dir.into()),
            None => paths.extend(home.as_ref().map(|h| h.join(default))),
        }
    }
    paths
}

/// What a rule allows beneath its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Access {
    /// Read files, list directories, run programs.
    Read,
    /// Everything.
    Write,
    /// Read and write an existing device file.
    Device,
}

/// Restrictions built in the parent, applied in the child between fork and
/// exec.
#[derive(Debug, Default)]
pub struct Prepared {
    #[cfg(target_os = "linux")]
    ruleset: Option<std::os::fd::OwnedFd>,
    #[cfg(target_os = "linux")]
    filter: Option<Vec<libc::sock_filter>>,
}

impl Prepared {
    /// Whether anything will be applied.
    pub fn is_empty(&self) -> bool {
        #[cfg(target_os = "linux")]
        {
            self.ruleset.is_none() && self.filter.is_none()
        }
        #[cfg(not(target_os = "linux"))]
        {
            true
        }
    }

    /// Confines the calling process: `no_new_privs`, the Landlock domain,
    /// then the seccomp filter.
    ///
    /// # Safety
    /// Meant for the child between fork and exec: it makes system calls
    /// only, allocates nothing and takes no lock, so it is safe there; it
    /// must not be called in a process that should stay unconfined.
    pub unsafe fn apply(&self) -> std::io::Result<()> {
        #[cfg(target_os = "linux")]
        {
            if self.is_empty() {
                return Ok(());
            }
            // SAFETY: plain prctl on this process; required before an
            // unprivileged Landlock or seccomp restriction.
            if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
            if let Some(ruleset) = &self.ruleset {
                landlock::restrict_self(ruleset)?;
            }
            if let Some(filter) = &self.filter {
                seccomp::install(filter)?;
            }
        }
        Ok(())
    }
}

/// The line a command's result gets when it failed in a way the sandbox
/// may have caused, or `None`.
pub fn refusal_note(policy: &SandboxPolicy, output: &str) -> Option<String> {
    if !policy.is_enforced() {
        return None;
    }
    let denied = ["Permission denied", "Operation not permitted"]
        .iter()
        .any(|sign| output.contains(sign));
    if !denied {
        return None;
    }
    let widen = match (policy.mode, policy.network) {
        (SandboxMode::Strict, false) => "--sandbox workspace-write (reads anywhere), --network on",
        (SandboxMode::Strict, true) => "--sandbox workspace-write (reads anywhere)",
        (SandboxMode::ReadOnly, false) => {
            "--sandbox workspace-write (writes in the workspace), --network on"
        }
        (SandboxMode::ReadOnly, true) => "--sandbox workspace-write (writes in the workspace)",
        (_, false) => "--network on, or --sandbox off",
        (_, true) => "--sandbox off",
    };
    let rule = match policy.mode {
        SandboxMode::ReadOnly => "commands may not write files",
        SandboxMode::Strict => {
            "commands may read only the workspace, $TMPDIR and system paths, and write only in \
             the workspace and $TMPDIR"
        }
        _ => "commands may write only in the workspace and $TMPDIR",
    };
    Some(format!(
        "[sandbox] This may have been refused by the sandbox ({}): {rule}{}; other \
         processes (/proc/PID, so ps and pkill) and pod's own files are never readable. Work \
         within that; only the user can widen it ({widen}).",
        policy.describe(),
        if policy.network {
            ""
        } else {
            ", and have no network"
        }
    ))
}
