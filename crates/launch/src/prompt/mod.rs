//! What a session's system prompt is made of: the built-in prompt (or the
//! operator's replacement), the agent it runs as, the project's
//! instructions (`AGENTS.md` files, see [`instructions`]) and the list of
//! Agent Skills ([`skills`]); and the agent definitions its `task` tool
//! offers ([`agents`]).
//!
//! All of it is read once, when the session starts, and recorded whole in
//! its launch record ([`RecordedPrompt`]): a resume, a fleet takeover and a
//! replay build the same prompt from the record, whatever the files say
//! by then. The prompt is the request's system prompt, so it stays in the
//! cache-stable prefix and no compaction touches it.
//!
//! ```toml
//! [agent]
//! system_prompt = "prompt.md"          # replaces the built-in prompt
//! instructions = ["team.md"]           # added after the project's files
//! instruction_fallbacks = ["CLAUDE.md"] # read where a directory has no AGENTS.md
//! max_instruction_bytes = 32768
//! skills_budget = 4096
//! workspace_agents = false             # the workspace's agents and skills too
//! ```
//!
//! Trust: a workspace's files only add text to the prompt (and, opted in,
//! agents and skills). They cannot change the approval policy, the
//! sandbox, budgets or hooks: nothing here reaches those settings.

pub mod agents;
mod frontmatter;
pub mod instructions;
pub mod skills;

use crate::error::LaunchError;
use crate::flags::Flags;
use pod_providers::ConfigFile;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The `[agent]` table of the config file: every key optional.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct Table {
    /// A file whose text replaces the built-in system prompt.
    pub system_prompt: Option<PathBuf>,
    /// Files of instructions added after the project's.
    pub instructions: Option<OneOrMany>,
    /// Names read where a directory has neither `AGENTS.override.md` nor
    /// `AGENTS.md` (`["CLAUDE.md"]` by default).
    pub instruction_fallbacks: Option<Vec<String>>,
    /// The instruction files' bytes at most.
    pub max_instruction_bytes: Option<usize>,
    /// The bytes of the prompt's list of skills at most.
    pub skills_budget: Option<usize>,
    /// Also the workspace's agent definitions and skills.
    pub workspace_agents: Option<bool>,
}

/// A path or a list of paths.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub(crate) enum OneOrMany {
    One(PathBuf),
    Many(Vec<PathBuf>),
}

impl OneOrMany {
    fn paths(&self) -> Vec<PathBuf> {
        match self {
            OneOrMany::One(path) => vec![path.clone()],
            OneOrMany::Many(paths) => paths.clone(),
        }
    }
}

/// A text read from a file, as the prompt has it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedText {
    /// The file it was read from.
    pub source: PathBuf,
    /// Its text.
    pub text: String,
}

/// An agent definition as read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedAgent {
    /// Its name.
    pub name: String,
    /// When to use it.
    pub description: String,
    /// Its instructions (the file's body).
    pub prompt: String,
    /// The tools it may use, by pod's names; all when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<Vec<String>>,
    /// The model it asks for (a profile's name, for `pod run --agent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Tools its client runs (a Managed Agents API agent's custom tools):
    /// the session parks at their calls until the client answers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_tools: Vec<pod::ClientToolSpec>,
    /// The file it was read from.
    pub source: PathBuf,
}

/// What a session's prompt was made of when it started.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedPrompt {
    /// The operator's prompt in place of the built-in one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<RecordedText>,
    /// The instruction files, root first, then the operator's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub instructions: Vec<RecordedText>,
    /// Instruction files found but left out (over the byte cap).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_out: Vec<PathBuf>,
    /// The agent the session runs as (`--agent`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<RecordedAgent>,
    /// The agents its `task` tool offers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<RecordedAgent>,
    /// The skills its prompt lists and its `skill` tool loads.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub skills: Vec<pod_tools::Skill>,
}

impl RecordedPrompt {
    /// Whether there is nothing but the built-in prompt (what a session
    /// without a record had too: nothing to record).
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// What a launch records: nothing when there is nothing.
    pub fn recorded(&self) -> Option<Self> {
        (!self.is_empty()).then(|| self.clone())
    }

    /// The system prompt these make.
    pub fn compose(&self) -> String {
        let mut out = match &self.system_prompt {
            Some(own) => own.text.trim_end().to_string(),
            None => pod::DEFAULT_SYSTEM_PROMPT.to_string(),
        };
        if let Some(agent) = self.agent.as_ref().filter(|a| !a.prompt.trim().is_empty()) {
            out.push_str(&format!(
                "\n\n# You are the `{}` agent\n\n{}",
                agent.name,
                agent.prompt.trim()
            ));
        }
        if !self.instructions.is_empty() {
            out.push_str(
                "\n\n# Project instructions\n\nFrom the most general to the most specific; \
                 where they disagree, the later wins.",
            );
            for file in &self.instructions {
                out.push_str(&format!(
                    "\n\n## {}\n\n{}",
                    file.source.display(),
                    file.text.trim_end()
                ));
            }
        }
        // An agent without the `skill` tool is not told of skills it
        // cannot load.
        let loads_skills = self
            .agent
            .as_ref()
            .and_then(|agent| agent.tools.as_ref())
            .is_none_or(|tools| tools.iter().any(|t| t == pod_tools::SKILL));
        if !self.skills.is_empty() && loads_skills {
            out.push_str(
                "\n\n# Skills\n\nWhen a task matches one of these skills, call the `skill` tool \
                 with its name first; it returns the skill's instructions.\n",
            );
            for skill in &self.skills {
                out.push_str(&skills::line(skill));
            }
        }
        out
    }

    /// Lays these over a Pod's `config`: its system prompt, the agent's
    /// tools, the agent types and the skills.
    pub fn apply(&self, config: &mut pod::PodConfig) {
        config.system_prompt = self.compose();
        config.tool_allow = self.agent.as_ref().and_then(|agent| agent.tools.clone());
        config.client_tools = self
            .agent
            .as_ref()
            .map(|agent| agent.client_tools.clone())
            .unwrap_or_default();
        config.subagents.types = self
            .agents
            .iter()
            .map(|agent| pod::SubagentType {
                name: agent.name.clone(),
                description: agent.description.clone(),
                prompt: agent.prompt.clone(),
                tools: agent.tools.clone(),
                provider: None,
            })
            .collect();
        config.skills = self.skills.clone();
    }
}

/// The prompt of a session in `workspace`: the `recorded` one on resume
/// (the built-in prompt's empty record for a session that recorded none),
/// else read now as `flags` and `file` say; with lines for the user about
/// what was left out or ignored.
pub(crate) fn collect(
    flags: &Flags,
    file: &ConfigFile,
    recorded: Option<RecordedPrompt>,
    workspace: &Path,
) -> Result<(RecordedPrompt, Vec<String>), LaunchError> {
    if let Some(prompt) = recorded {
        let same = flags
            .agent
            .as_ref()
            .is_none_or(|name| prompt.agent.as_ref().is_some_and(|a| &a.name == name));
        if !same {
            return Err(LaunchError::settings(
                "a resumed session keeps the agent it started as",
                "resume it without --agent, or start a new session with --agent",
            ));
        }
        let mut warnings = Vec::new();
        if flags.system_prompt.is_some() || !flags.instructions.is_empty() || flags.workspace_agents
        {
            warnings.push(
                "--system-prompt, --instructions and --workspace-agents are for new sessions: \
                 a resumed session keeps the prompt it started with"
                    .to_string(),
            );
        }
        return Ok((prompt, warnings));
    }
    let table = table(file)?;
    let config_dir = config_dir(file);
    let mut warnings = Vec::new();
    let system_prompt = flags
        .system_prompt
        .clone()
        .or_else(|| {
            table
                .system_prompt
                .as_ref()
                .map(|p| relative_to(config_dir, p))
        })
        .map(|path| read_text(&path, "the system prompt file"))
        .transpose()?;
    let mut extra: Vec<PathBuf> = table
        .instructions
        .as_ref()
        .map(OneOrMany::paths)
        .unwrap_or_default()
        .iter()
        .map(|p| relative_to(config_dir, p))
        .collect();
    extra.extend(flags.instructions.iter().cloned());
    let found = instructions::discover(config_dir, workspace, &table, &extra)?;
    if !found.left_out.is_empty() {
        let cap = table
            .max_instruction_bytes
            .unwrap_or(instructions::DEFAULT_MAX_BYTES);
        let names: Vec<String> = found
            .left_out
            .iter()
            .map(|p| p.display().to_string())
            .collect();
        warnings.push(format!(
            "instructions left out, over the {cap}-byte cap ([agent] max_instruction_bytes): {}",
            names.join(", ")
        ));
    }
    let from_workspace = flags.workspace_agents || table.workspace_agents.unwrap_or(false);
    let dirs = |own: &str, in_workspace: &[&str]| {
        let mut dirs: Vec<PathBuf> = config_dir.map(|d| d.join(own)).into_iter().collect();
        if from_workspace {
            dirs.extend(in_workspace.iter().map(|d| workspace.join(d)));
        }
        dirs
    };
    let agents = agents::discover(&dirs("agents", &agents::WORKSPACE_DIRS), &mut warnings)?;
    let budget = table.skills_budget.unwrap_or(skills::DEFAULT_BUDGET);
    let skills = skills::discover(
        &dirs("skills", &skills::WORKSPACE_DIRS),
        budget,
        &mut warnings,
    )?;
    let agent = match &flags.agent {
        None => None,
        Some(name) => Some(
            agents
                .iter()
                .find(|a| &a.name == name)
                .cloned()
                .ok_or_else(|| {
                    let known: Vec<&str> = agents.iter().map(|a| a.name.as_str()).collect();
                    let known = match known.is_empty() {
                        true => "none".to_string(),
                        false => known.join(", "),
                    };
                    LaunchError::settings(
                        format!("no agent is called `{name}` (the agents: {known})"),
                        "define it in agents/ of pod's config directory (or the workspace's \
                         .claude/agents/ with --workspace-agents)",
                    )
                })?,
        ),
    };
    for warning in &warnings {
        tracing::warn!("{warning}");
    }
    Ok((
        RecordedPrompt {
            system_prompt,
            instructions: found.taken,
            left_out: found.left_out,
            agent,
            agents,
            skills,
        },
        warnings,
    ))
}

/// Gives each agent type of `config` whose `model` names a profile of
/// `file` that profile's model (built like the main one); an agent whose
/// profile cannot be built runs on the subagents' model, with a warning.
pub(crate) fn agent_models(
    prompt: &RecordedPrompt,
    file: &ConfigFile,
    config: &mut pod::PodConfig,
    warnings: &mut Vec<String>,
) {
    for agent in &prompt.agents {
        let Some(model) = &agent.model else { continue };
        let Some(slot) = config
            .subagents
            .types
            .iter_mut()
            .find(|t| t.name == agent.name)
        else {
            continue;
        };
        let Ok(raw) = file.profile(Some(model)) else {
            warnings.push(format!(
                "agent `{}` asks for model `{model}`, which names no profile of the config \
                 file; as a subagent it runs on the subagents' model",
                agent.name
            ));
            continue;
        };
        let choice = crate::model::Choice {
            raw,
            profile: Some(model.clone()),
        };
        match crate::model::Model::from_choice(&choice) {
            Ok(built) => slot.provider = Some(built.provider),
            Err(err) => warnings.push(format!(
                "agent `{}`: profile `{model}` cannot be used ({}); as a subagent it runs on \
                 the subagents' model",
                agent.name,
                pod_llm::error_chain(&err)
            )),
        }
    }
}

/// The `[agent]` table of `file`.
fn table(file: &ConfigFile) -> Result<Table, LaunchError> {
    match &file.agent {
        Some(value) => value
            .clone()
            .try_into()
            .map_err(|source| LaunchError::Table {
                what: "[agent] table".into(),
                path: file.path.display().to_string(),
                source: Box::new(source),
            }),
        None => Ok(Table::default()),
    }
}

/// pod's config directory: the config file's, unless there is none
/// (`POD_CONFIG=/dev/null`).
fn config_dir(file: &ConfigFile) -> Option<&Path> {
    if file.path.as_os_str().is_empty() || file.path == Path::new("/dev/null") {
        return None;
    }
    file.path.parent().filter(|dir| !dir.as_os_str().is_empty())
}

/// `path` relative to the config directory, unless absolute.
fn relative_to(dir: Option<&Path>, path: &Path) -> PathBuf {
    match dir {
        Some(dir) if path.is_relative() => dir.join(path),
        _ => path.to_path_buf(),
    }
}

/// The text of `path`, recorded with where it came from.
fn read_text(path: &Path, what: &str) -> Result<RecordedText, LaunchError> {
    let source = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let text = std::fs::read_to_string(&source).map_err(|err| {
        LaunchError::settings(
            format!("cannot read {what} {}: {err}", source.display()),
            "give a readable file",
        )
    })?;
    Ok(RecordedText { source, text })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_is_the_base_then_agent_then_instructions_then_skills() {
        let prompt = RecordedPrompt {
            system_prompt: None,
            instructions: vec![RecordedText {
                source: "/r/AGENTS.md".into(),
                text: "Run make check.\n".into(),
            }],
            left_out: Vec::new(),
            agent: Some(RecordedAgent {
                name: "reviewer".into(),
                description: "d".into(),
                prompt: "You review.".into(),
                tools: Some(vec!["read_file".into()]),
                model: None,
                client_tools: Vec::new(),
                source: "/a.md".into(),
            }),
            agents: Vec::new(),
            skills: vec![pod_tools::Skill {
                name: "pdf".into(),
                description: "Fill PDF forms".into(),
                dir: "/s/pdf".into(),
            }],
        };
        let text = prompt.compose();
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle} in {text}"))
        };
        assert!(text.starts_with(pod::DEFAULT_SYSTEM_PROMPT));
        assert!(at("You review.") < at("## /r/AGENTS.md"));
        assert!(
            !text.contains("- pdf: Fill PDF forms"),
            "the agent has no skill tool"
        );
        let mut with_skill = prompt.clone();
        if let Some(agent) = with_skill.agent.as_mut() {
            agent.tools = Some(vec!["read_file".into(), "skill".into()]);
        }
        let text = with_skill.compose();
        let at = |needle: &str| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle} in {text}"))
        };
        assert!(at("Run make check.") < at("- pdf: Fill PDF forms"));
        let mut config = pod::PodConfig::new(
            pod::PodHome::new("/tmp/none"),
            "/w",
            std::sync::Arc::new(pod_llm::ScriptedProvider::new(pod_llm::Script::default())),
        );
        prompt.apply(&mut config);
        assert_eq!(config.tool_allow, Some(vec!["read_file".to_string()]));
        assert_eq!(config.skills.len(), 1);
    }
}
