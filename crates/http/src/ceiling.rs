//! The most an API client may get: what `pod serve --http` was started with
//! (its config file and flags). A request may narrow it, never widen it;
//! each check names the setting that would widen and how the operator could
//! allow it.
//!
//! The comparison is made on resolved settings (the policy, the sandbox and
//! the budget a session would really run with), not on the request's
//! fields, so every way to widen is caught the same way: `yes`, an `allow`,
//! a profile with a larger budget, a resumed session recorded with more.

use pod::{ApprovalPolicy, SandboxMode, SandboxPolicy, ToolPolicy};
use pod_launch::Resolved;
use pod_worker::Budget;
use std::path::{Path, PathBuf};

/// What the server allows, resolved once at start.
#[derive(Debug, Clone)]
pub struct Ceiling {
    /// The widest approval policy a session may have.
    pub approval: ApprovalPolicy,
    /// The widest sandbox.
    pub sandbox: SandboxPolicy,
    /// The largest run budget.
    pub budget: Budget,
    /// The largest session budget.
    pub session_budget: pod::SessionBudget,
    /// The largest money limit of a run.
    pub max_run_cost: Option<pod_llm::Cost>,
    /// Canonical directories workspaces must lie in.
    pub workspace_roots: Vec<PathBuf>,
    /// Canonical paths a workspace may not overlap (pod's own data).
    pub private: Vec<PathBuf>,
    /// URLs an API client's MCP servers may be at (`[http]
    /// mcp_server_urls`): each entry, and what lies under it.
    pub mcp_urls: Vec<String>,
}

/// A request (or a recorded session) that asks for more than the server
/// allows: the setting, and a sentence saying why and what would allow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Widening {
    /// The setting, as the API names it (`sandbox`, `network`,
    /// `approval.bash`, `budget.max_run_requests`, `workspace`).
    pub setting: String,
    /// Why, for people.
    pub message: String,
}

impl Widening {
    fn new(setting: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            setting: setting.into(),
            message: message.into(),
        }
    }
}

impl Ceiling {
    /// The ceiling of a server started with `resolved` settings, `roots`
    /// for workspaces and `private` paths.
    pub fn new(resolved: &Resolved, roots: Vec<PathBuf>, private: &[PathBuf]) -> Self {
        Self {
            approval: resolved.approval.clone(),
            sandbox: resolved.sandbox,
            budget: resolved.budget.clone(),
            session_budget: resolved.session_budget,
            max_run_cost: resolved.max_run_cost,
            workspace_roots: roots,
            private: private
                .iter()
                .filter_map(|p| p.canonicalize().ok())
                .collect(),
            mcp_urls: Vec::new(),
        }
    }

    /// Whether an API client's MCP server may be at `url`: one of the
    /// operator's `[http] mcp_server_urls`, or under one (the entry ends
    /// with `/`, or the URL goes on after it with `/` or `?`), so that
    /// `https://mcp.example` never admits `https://mcp.example.evil`.
    pub fn check_mcp_url(&self, url: &str) -> Result<(), Widening> {
        let under = |entry: &String| {
            url.strip_prefix(entry.as_str()).is_some_and(|rest| {
                rest.is_empty() || entry.ends_with('/') || rest.starts_with(['/', '?'])
            })
        };
        if self.mcp_urls.iter().any(under) {
            return Ok(());
        }
        Err(Widening::new(
            "mcp_servers",
            format!(
                "MCP server {url} is not one this server lets API clients reach; its operator \
                 lists those in [http] mcp_server_urls"
            ),
        ))
    }

    /// Checks what a session would run with; the first widening found.
    pub fn check(&self, settings: &Resolved) -> Result<(), Widening> {
        check_sandbox(self.sandbox, settings.sandbox)?;
        check_approval(&self.approval, &settings.approval)?;
        check_budget(self, settings)?;
        Ok(())
    }

    /// Checks a canonical workspace: inside a root, clear of pod's data.
    pub fn check_workspace(&self, workspace: &Path) -> Result<(), Widening> {
        if let Some(private) = self
            .private
            .iter()
            .find(|p| workspace.starts_with(p) || p.starts_with(workspace))
        {
            return Err(Widening::new(
                "workspace",
                format!(
                    "workspace {} overlaps pod's own data ({}), which no session may work in",
                    workspace.display(),
                    private.display()
                ),
            ));
        }
        if self
            .workspace_roots
            .iter()
            .any(|r| workspace.starts_with(r))
        {
            return Ok(());
        }
        let roots: Vec<String> = self
            .workspace_roots
            .iter()
            .map(|r| r.display().to_string())
            .collect();
        Err(Widening::new(
            "workspace",
            format!(
                "workspace {} is outside this server's workspace roots ({}); start `pod serve` \
                 with --workspace-root DIR (or [http] workspace_roots) to allow it",
                workspace.display(),
                if roots.is_empty() {
                    "none".into()
                } else {
                    roots.join(", ")
                }
            ),
        ))
    }
}

/// What a mode lets commands read: 0 the workspace and system paths, 1
/// anywhere (but pod's data).
fn reads(mode: SandboxMode) -> u8 {
    match mode {
        SandboxMode::Strict => 0,
        SandboxMode::ReadOnly | SandboxMode::WorkspaceWrite => 1,
        SandboxMode::Off => 2,
    }
}

/// What a mode lets commands write: 0 nothing, 1 the workspace, 2 anywhere.
fn writes(mode: SandboxMode) -> u8 {
    match mode {
        SandboxMode::ReadOnly => 0,
        SandboxMode::Strict | SandboxMode::WorkspaceWrite => 1,
        SandboxMode::Off => 2,
    }
}

fn check_sandbox(ceiling: SandboxPolicy, asked: SandboxPolicy) -> Result<(), Widening> {
    if ceiling.mode == SandboxMode::Off {
        return Ok(());
    }
    if reads(asked.mode) > reads(ceiling.mode) || writes(asked.mode) > writes(ceiling.mode) {
        return Err(Widening::new(
            "sandbox",
            format!(
                "sandbox {} is wider than this server's {}; start `pod serve` with --sandbox {} \
                 (or set [sandbox] mode) to allow it",
                asked.mode, ceiling.mode, asked.mode
            ),
        ));
    }
    if asked.network && !ceiling.network && asked.mode != SandboxMode::Off {
        return Err(Widening::new(
            "network",
            "network on is wider than this server's network off; start `pod serve` with \
             --network on (or set [sandbox] network = true) to allow it",
        ));
    }
    Ok(())
}

/// Allow > ask > deny.
fn rank(policy: ToolPolicy) -> u8 {
    match policy {
        ToolPolicy::Deny => 0,
        ToolPolicy::Ask => 1,
        ToolPolicy::Allow => 2,
    }
}

fn check_approval(ceiling: &ApprovalPolicy, asked: &ApprovalPolicy) -> Result<(), Widening> {
    // Every name either policy mentions (patterns included, as names that
    // match themselves), then the default for every other tool.
    let named = ceiling.tools.keys().chain(asked.tools.keys());
    for tool in named {
        let (most, wants) = (ceiling.get(tool), asked.get(tool));
        if rank(wants) > rank(most) {
            return Err(Widening::new(
                format!("approval.{tool}"),
                format!(
                    "{tool}: {} is wider than this server's {}; start `pod serve` with --allow \
                     {tool} or --yes (or set [approval.tools]) to allow it",
                    wants.as_str(),
                    most.as_str()
                ),
            ));
        }
    }
    if rank(asked.default) > rank(ceiling.default) {
        return Err(Widening::new(
            "approval.default",
            format!(
                "other tools: {} is wider than this server's {}",
                asked.default.as_str(),
                ceiling.default.as_str()
            ),
        ));
    }
    Ok(())
}

/// `asked` is no more than `most` (and set, when `most` is).
fn at_most<T: PartialOrd + std::fmt::Display + Copy>(
    name: &str,
    most: Option<T>,
    asked: Option<T>,
) -> Result<(), Widening> {
    match (most, asked) {
        (Some(most), Some(asked)) if asked > most => Err(Widening::new(
            name,
            format!("{name} {asked} is more than this server's {most}"),
        )),
        (Some(most), None) => Err(Widening::new(
            name,
            format!("no limit on {name} is more than this server's {most}"),
        )),
        _ => Ok(()),
    }
}

fn check_budget(ceiling: &Ceiling, settings: &Resolved) -> Result<(), Widening> {
    let (most, asked) = (&ceiling.budget, &settings.budget);
    at_most(
        "budget.max_requests",
        Some(most.requests_per_turn),
        Some(asked.requests_per_turn),
    )?;
    at_most("budget.max_turns", most.continuations, asked.continuations)?;
    at_most("budget.max_run_requests", most.requests, asked.requests)?;
    at_most("budget.max_run_tokens", most.tokens, asked.tokens)?;
    at_most(
        "budget.max_run_cost",
        ceiling.max_run_cost,
        settings.max_run_cost,
    )?;
    check_session_budget(ceiling, &settings.session_budget)
}

/// Checks a session's limits (as asked, or as a raise would make them)
/// against the server's: none may be more, or missing where it has one.
pub fn check_session_budget(ceiling: &Ceiling, asked: &pod::SessionBudget) -> Result<(), Widening> {
    let most = &ceiling.session_budget;
    at_most("budget.max_cost", most.cost, asked.cost)?;
    at_most("budget.max_wall_secs", most.wall_secs, asked.wall_secs)?;
    at_most("session_budget.requests", most.requests, asked.requests)?;
    at_most("session_budget.tokens", most.tokens, asked.tokens)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(mode: SandboxMode, network: bool) -> SandboxPolicy {
        SandboxPolicy { mode, network }
    }

    #[test]
    fn a_sandbox_may_narrow_and_never_widen() {
        use SandboxMode::*;
        let ww = sandbox(WorkspaceWrite, false);
        for narrower in [WorkspaceWrite, ReadOnly, Strict] {
            assert!(
                check_sandbox(ww, sandbox(narrower, false)).is_ok(),
                "{narrower}"
            );
        }
        let err = check_sandbox(ww, sandbox(Off, false)).unwrap_err();
        assert_eq!(err.setting, "sandbox");
        assert!(err.message.contains("--sandbox off"), "{}", err.message);
        assert_eq!(
            check_sandbox(ww, sandbox(WorkspaceWrite, true))
                .unwrap_err()
                .setting,
            "network"
        );
        // Read-only reads more than strict; strict writes more than read-only.
        assert!(check_sandbox(sandbox(Strict, false), sandbox(ReadOnly, false)).is_err());
        assert!(check_sandbox(sandbox(ReadOnly, false), sandbox(Strict, false)).is_err());
        // A server without a sandbox allows anything.
        assert!(check_sandbox(sandbox(Off, true), sandbox(Off, true)).is_ok());
    }

    #[test]
    fn a_policy_may_ask_or_deny_more_and_never_allow_more() {
        let ceiling = ApprovalPolicy::default();
        let mut narrower = ceiling.clone();
        narrower.set("read_file", ToolPolicy::Deny);
        assert!(check_approval(&ceiling, &narrower).is_ok());
        let mut yes = ceiling.clone();
        yes.allow_all_asks();
        let err = check_approval(&ceiling, &yes).unwrap_err();
        assert!(err.setting.starts_with("approval."), "{err:?}");
        // A pattern the request adds is compared as a name too.
        let mut server = ceiling.clone();
        server.set("github__delete_repo", ToolPolicy::Deny);
        let mut wide = ceiling.clone();
        wide.set("github__*", ToolPolicy::Allow);
        let err = check_approval(&server, &wide).unwrap_err();
        assert_eq!(err.setting, "approval.github__delete_repo");
        // The default for unnamed tools counts.
        let strict_default = ApprovalPolicy::all(ToolPolicy::Ask);
        assert!(check_approval(&strict_default, &ApprovalPolicy::all(ToolPolicy::Allow)).is_err());
    }

    #[test]
    fn workspaces_stay_in_the_roots_and_clear_of_pods_data() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        for sub in ["roots/a/deep", "home", "elsewhere"] {
            std::fs::create_dir_all(base.join(sub)).unwrap();
        }
        let ceiling = Ceiling {
            approval: ApprovalPolicy::default(),
            sandbox: SandboxPolicy::default(),
            budget: Budget::default(),
            session_budget: Default::default(),
            max_run_cost: None,
            workspace_roots: vec![base.join("roots")],
            private: vec![base.join("roots/a/deep"), base.join("home")],
            mcp_urls: vec![
                "https://mcp.example".into(),
                "http://127.0.0.1:7/mcp/".into(),
            ],
        };
        assert!(ceiling.check_mcp_url("https://mcp.example").is_ok());
        assert!(ceiling
            .check_mcp_url("https://mcp.example/docs?x=1")
            .is_ok());
        assert!(ceiling.check_mcp_url("http://127.0.0.1:7/mcp/a").is_ok());
        assert!(ceiling.check_mcp_url("https://mcp.example.evil/").is_err());
        assert!(ceiling.check_mcp_url("https://mcp.exampl").is_err());
        assert!(ceiling.check_mcp_url("http://127.0.0.1:7/mcpx").is_err());
        assert_eq!(
            ceiling
                .check_mcp_url("http://10.0.0.1/")
                .unwrap_err()
                .setting,
            "mcp_servers"
        );
        assert!(ceiling.check_workspace(&base.join("roots")).is_err());
        assert!(ceiling.check_workspace(&base.join("roots/a")).is_err());
        assert!(ceiling
            .check_workspace(&base.join("roots/a/deep/x"))
            .is_err());
        let err = ceiling
            .check_workspace(&base.join("elsewhere"))
            .unwrap_err();
        assert!(err.message.contains("--workspace-root"), "{}", err.message);
        std::fs::create_dir_all(base.join("roots/b")).unwrap();
        assert!(ceiling.check_workspace(&base.join("roots/b")).is_ok());
        assert!(ceiling.check_workspace(Path::new("/")).is_err());
    }
}
