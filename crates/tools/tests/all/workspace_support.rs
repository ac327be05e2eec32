//! Test helpers for the workspace tools: a temp workspace with the tools
//! registered, called with raw JSON through the registry as the worker does.

use pod_tools::{FileTracker, Limits, Sandbox, SandboxPolicy, Workspace};
use pod_worker::{CommittedCall, ToolContext, ToolOutput, ToolRegistry};
use serde_json::Value;
use std::path::{Path, PathBuf};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;

/// A temporary workspace (inside a temp dir that also has room for
/// "outside" files) with every workspace tool registered.
pub struct Ws {
    /// Holds the workspace (`ws/`) and a sibling `outside/` directory.
    pub dir: TempDir,
    pub workspace: Workspace,
    pub tools: ToolRegistry,
}

impl Ws {
    pub fn new() -> Self {
        Self::with_limits(Limits::default())
    }

    pub fn with_limits(limits: Limits) -> Self {
        Self::build(limits, None, &[])
    }

    /// A workspace whose commands run under `policy`, with `tmp/` (next to
    /// `ws/` and `outside/`) as their `TMPDIR`.
    pub fn sandboxed(policy: SandboxPolicy) -> Self {
        Self::build(Limits::default(), Some(policy), &[])
    }

    /// The same, with `private` (paths relative to the directory holding
    /// `ws/`, created) kept out of the tools' and commands' reach.
    pub fn sandboxed_with_private(policy: SandboxPolicy, private: &[&str]) -> Self {
        Self::build(Limits::default(), Some(policy), private)
    }

    fn build(limits: Limits, sandbox: Option<SandboxPolicy>, private: &[&str]) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::create_dir(dir.path().join("ws")).expect("ws dir");
        std::fs::create_dir(dir.path().join("outside")).expect("outside dir");
        std::fs::create_dir(dir.path().join("tmp")).expect("tmp dir");
        let mut workspace =
            Workspace::with_limits(dir.path().join("ws"), FileTracker::new(), limits).expect("ws");
        if let Some(policy) = sandbox {
            let private: Vec<PathBuf> = private.iter().map(|p| dir.path().join(p)).collect();
            for path in &private {
                std::fs::create_dir_all(path).expect("private dir");
            }
            let sandbox = Sandbox::new(
                policy,
                workspace.root().path(),
                Some(dir.path().join("tmp")),
            )
            .with_private(private);
            workspace = workspace.with_sandbox(sandbox);
        }
        let mut tools = ToolRegistry::new();
        workspace.register(&mut tools);
        Self {
            dir,
            workspace,
            tools,
        }
    }

    /// The workspace root.
    pub fn root(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    /// The directory next to the workspace.
    pub fn outside(&self) -> PathBuf {
        self.dir.path().join("outside")
    }

    pub fn tracker(&self) -> &FileTracker {
        self.workspace.tracker()
    }

    /// Writes a file under the root, creating parents (as the user would).
    pub fn put(&self, rel: &str, content: &str) -> PathBuf {
        let path = self.root().join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("parent dirs");
        }
        std::fs::write(&path, content).expect("write file");
        path
    }

    /// Reads a file under the root.
    pub fn get(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join(rel)).expect("read file")
    }

    pub async fn call(&self, tool: &str, args: Value) -> ToolOutput {
        self.call_with(tool, args, CancellationToken::new()).await
    }

    pub async fn call_with(
        &self,
        tool: &str,
        args: Value,
        cancel: CancellationToken,
    ) -> ToolOutput {
        let output = self.call_uncommitted(tool, args.clone(), cancel).await;
        // Committed, as the worker does once the log has the result.
        if let Some(state) = self.tools.get(tool).and_then(|t| t.state()) {
            state.apply(&CommittedCall {
                call_id: "call_test",
                name: tool,
                arguments: &args.to_string(),
                content: &output.content,
                is_error: output.is_error,
                meta: output.meta.as_ref(),
            });
        }
        output
    }

    /// Runs a call whose result is never committed (the log refused it, or
    /// the process died first): the tool's state must not change.
    pub async fn call_uncommitted(
        &self,
        tool: &str,
        args: Value,
        cancel: CancellationToken,
    ) -> ToolOutput {
        let tool = self.tools.get(tool).expect("tool is registered");
        let ctx = ToolContext {
            call_id: "call_test".into(),
            cancel,
        };
        tool.call_json(&args.to_string(), ctx).await
    }

    /// Calls a tool that must succeed; returns its text.
    pub async fn ok(&self, tool: &str, args: Value) -> String {
        let out = self.call(tool, args).await;
        assert!(
            !out.is_error,
            "expected success from {tool}, got: {}",
            out.content
        );
        out.content
    }

    /// Calls a tool that must fail; returns its message.
    pub async fn err(&self, tool: &str, args: Value) -> String {
        let out = self.call(tool, args).await;
        assert!(
            out.is_error,
            "expected an error from {tool}, got: {}",
            out.content
        );
        assert!(out.meta.is_none(), "a failed call records no replay data");
        out.content
    }
}

/// Creates a symlink at `link` pointing to `target`.
pub fn symlink(target: &Path, link: &Path) {
    std::os::unix::fs::symlink(target, link).expect("symlink");
}
