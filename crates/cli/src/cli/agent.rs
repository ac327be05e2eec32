//! What a session's system prompt is made of: `--agent`, `--instructions`,
//! `--system-prompt`, `--workspace-agents` (docs/instructions.md).

use clap::Args;
use std::path::{Path, PathBuf};

/// The agent a session runs as and the instructions it gets.
#[derive(Debug, Clone, Default, Args)]
pub struct AgentArgs {
    /// Start as this agent: a Markdown file with front matter in agents/
    /// of pod's config directory (or, with --workspace-agents, the
    /// workspace's .claude/agents/ or .pod/agents/): its instructions, its
    /// tools and its model.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// A file of instructions added after the project's AGENTS.md files
    /// (repeatable).
    #[arg(long, value_name = "FILE")]
    pub instructions: Vec<PathBuf>,
    /// A file whose text replaces the built-in system prompt (project
    /// instructions are still added after it).
    #[arg(long, value_name = "FILE")]
    pub system_prompt: Option<PathBuf>,
    /// Also the workspace's agent definitions (.claude/agents/,
    /// .pod/agents/) and skills (.claude/skills/, .agents/skills/): only
    /// for a workspace you trust to tell the model what to do.
    #[arg(long)]
    pub workspace_agents: bool,
}

impl AgentArgs {
    /// The files, absolute (a session may be resumed from elsewhere).
    pub fn instructions(&self) -> Vec<PathBuf> {
        self.instructions.iter().map(|p| absolute(p)).collect()
    }

    /// The system prompt's file, absolute.
    pub fn system_prompt(&self) -> Option<PathBuf> {
        self.system_prompt.as_deref().map(absolute)
    }
}

fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
