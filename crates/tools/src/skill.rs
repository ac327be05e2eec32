//! The `skill` tool: loads an Agent Skill's instructions on demand.
//!
//! A skill is a directory with a `SKILL.md` (front matter `name` and
//! `description`, then the instructions) and any files it refers to. The
//! session's prompt lists names and descriptions only; a call loads the
//! body of `SKILL.md` and lists the skill's files, or reads one of them.
//! The result is a tool result like any other, so the log keeps what the
//! model saw and a resume or a compaction keeps it too.
//!
//! Disclosure grants nothing: the model runs a skill's scripts with `bash`,
//! under the session's sandbox and approval policy, like any command.

use pod_worker::{Tool, ToolContext, ToolOutput};
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The tool's name.
pub const SKILL: &str = "skill";

/// Files listed of one skill at most: a skill is a handful of files; a
/// directory of thousands would flood the context.
const MAX_LISTED: usize = 200;

/// Bytes of one file the tool returns at most (SKILL.md or a file of the
/// skill): the standard asks for short bodies; a runaway file is cut.
const MAX_FILE_BYTES: u64 = 256 * 1024;

/// One skill the session knows: what the prompt lists and where it is.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, Deserialize)]
pub struct Skill {
    /// Its name (front matter `name`).
    pub name: String,
    /// When to use it (front matter `description`).
    pub description: String,
    /// The directory holding its `SKILL.md`.
    pub dir: PathBuf,
}

/// Loads skills' instructions and files.
pub struct SkillTool {
    skills: Arc<[Skill]>,
}

impl SkillTool {
    /// A tool over `skills`.
    pub fn new(skills: impl Into<Arc<[Skill]>>) -> Self {
        Self {
            skills: skills.into(),
        }
    }
}

/// The arguments of a `skill` call.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SkillArgs {
    /// The skill's name.
    name: String,
    /// A file of the skill to read, relative to its directory; none for
    /// its `SKILL.md`.
    #[serde(default)]
    file: Option<String>,
}

#[async_trait::async_trait]
impl Tool for SkillTool {
    type Args = SkillArgs;

    fn name(&self) -> &str {
        SKILL
    }

    fn description(&self) -> String {
        "Load a skill listed in the system prompt: returns its instructions (SKILL.md) and \
         the files it has. Call it when a task matches a skill's description, before doing \
         the task. With `file`, returns that file of the skill instead. Run a skill's scripts \
         with bash like any command."
            .into()
    }

    fn parameters(&self) -> Arc<serde_json::Value> {
        pod_worker::schema!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "The skill's name, as listed"},
                "file": {
                    "type": "string",
                    "description": "A file of the skill, relative to its directory (omit for its instructions)"
                }
            },
            "required": ["name"],
            "additionalProperties": false
        })
    }

    fn concurrency_safe(&self) -> bool {
        true
    }

    async fn call(&self, args: SkillArgs, _ctx: ToolContext) -> ToolOutput {
        let Some(skill) = self.skills.iter().find(|s| s.name == args.name) else {
            let known: Vec<&str> = self.skills.iter().map(|s| s.name.as_str()).collect();
            return ToolOutput::error(format!(
                "No skill is called `{}`. The skills are: {}.",
                args.name,
                known.join(", ")
            ));
        };
        let dir = skill.dir.clone();
        let file = args.file.clone();
        let name = skill.name.clone();
        // Reading files blocks; a skill's files are small.
        let loaded = tokio::task::spawn_blocking(move || match file {
            None => load(&name, &dir),
            Some(file) => read_in(&dir, &file),
        })
        .await;
        match loaded {
            Ok(Ok(text)) => ToolOutput::ok(text),
            Ok(Err(message)) => ToolOutput::error(message),
            Err(err) => ToolOutput::error(format!("The skill could not be read: {err}")),
        }
    }
}

/// The body of `dir/SKILL.md` (front matter removed) and the skill's files.
fn load(name: &str, dir: &Path) -> Result<String, String> {
    let text = read_capped(&dir.join("SKILL.md"))?;
    let body = strip_front_matter(&text).trim();
    let mut files = Vec::new();
    list(dir, dir, &mut files);
    files.sort();
    let mut out = format!("Skill `{name}` (directory {}):\n\n{body}\n", dir.display());
    let others: Vec<&String> = files.iter().filter(|f| *f != "SKILL.md").collect();
    if !others.is_empty() {
        out.push_str("\nFiles of this skill (read one with `skill` and `file`, or by its path):\n");
        for file in others.iter().take(MAX_LISTED) {
            out.push_str(&format!("- {file}\n"));
        }
        if others.len() > MAX_LISTED {
            out.push_str(&format!("- … and {} more\n", others.len() - MAX_LISTED));
        }
    }
    Ok(out)
}

/// `file` of the skill in `dir`, refused when it leaves the directory.
fn read_in(dir: &Path, file: &str) -> Result<String, String> {
    let relative = Path::new(file);
    let inside = relative
        .components()
        .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !inside || file.is_empty() {
        return Err(format!(
            "`{file}` is not a file of the skill: give a path relative to its directory, \
             without `..`."
        ));
    }
    let path = dir.join(relative);
    // No link the skill's author planted may lead out of its directory.
    let real = path
        .canonicalize()
        .map_err(|err| format!("Cannot read `{file}` of the skill: {err}."))?;
    let root = dir
        .canonicalize()
        .map_err(|err| format!("Cannot read the skill's directory: {err}."))?;
    if !real.starts_with(&root) {
        return Err(format!("`{file}` leads out of the skill's directory."));
    }
    read_capped(&real)
}

/// The file at `path` as text, at most [`MAX_FILE_BYTES`].
fn read_capped(path: &Path) -> Result<String, String> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .map_err(|err| format!("Cannot read {}: {err}.", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_FILE_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|err| format!("Cannot read {}: {err}.", path.display()))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// The files under `dir`, relative to `root`, following no link.
fn list(root: &Path, dir: &Path, out: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        if out.len() > MAX_LISTED {
            return;
        }
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            list(root, &path, out);
        } else if kind.is_file() {
            if let Ok(relative) = path.strip_prefix(root) {
                out.push(relative.to_string_lossy().into_owned());
            }
        }
    }
}

/// `text` without a leading `---` front matter block.
pub fn strip_front_matter(text: &str) -> &str {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return text;
    };
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        at += line.len();
        if line.trim_end() == "---" {
            return &rest[at..];
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn front_matter_is_stripped_and_text_without_it_kept() {
        assert_eq!(strip_front_matter("---\nname: a\n---\nBody\n"), "Body\n");
        assert_eq!(strip_front_matter("Body"), "Body");
        assert_eq!(strip_front_matter("---\nno end"), "---\nno end");
    }

    #[tokio::test]
    async fn a_call_loads_the_body_and_lists_files_and_reads_only_inside() {
        let dir = tempfile::tempdir().unwrap();
        let skill = dir.path().join("pdf");
        std::fs::create_dir_all(skill.join("scripts")).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            "---\nname: pdf\ndescription: PDFs\n---\nUse scripts/fill.py.\n",
        )
        .unwrap();
        std::fs::write(skill.join("scripts/fill.py"), "print(1)\n").unwrap();
        std::fs::write(dir.path().join("secret"), "s").unwrap();
        let tool = SkillTool::new(vec![Skill {
            name: "pdf".into(),
            description: "PDFs".into(),
            dir: skill.clone(),
        }]);
        let ctx = || ToolContext {
            call_id: "c".into(),
            cancel: Default::default(),
        };
        let out = tool
            .call(
                SkillArgs {
                    name: "pdf".into(),
                    file: None,
                },
                ctx(),
            )
            .await;
        assert!(!out.is_error, "{}", out.content);
        assert!(out.content.contains("Use scripts/fill.py."));
        assert!(!out.content.contains("description: PDFs"));
        assert!(out.content.contains("- scripts/fill.py"));
        let out = tool
            .call(
                SkillArgs {
                    name: "pdf".into(),
                    file: Some("scripts/fill.py".into()),
                },
                ctx(),
            )
            .await;
        assert_eq!(out.content, "print(1)\n");
        let out = tool
            .call(
                SkillArgs {
                    name: "pdf".into(),
                    file: Some("../secret".into()),
                },
                ctx(),
            )
            .await;
        assert!(out.is_error);
        let out = tool
            .call(
                SkillArgs {
                    name: "nope".into(),
                    file: None,
                },
                ctx(),
            )
            .await;
        assert!(out.is_error && out.content.contains("pdf"));
    }
}
