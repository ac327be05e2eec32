//! Agent Skills: directories with a `SKILL.md` whose front matter gives
//! `name` and `description`. Read from `skills/` in pod's config
//! directory and, when the operator opts in, the workspace's
//! `.claude/skills/` and `.agents/skills/`. The prompt lists names and
//! descriptions within a byte budget; the `skill` tool loads the rest.

use super::frontmatter;
use crate::error::LaunchError;
use pod_tools::Skill;
use std::path::{Path, PathBuf};

/// The workspace's skill directories read when opted in, in order.
pub const WORKSPACE_DIRS: [&str; 2] = [".claude/skills", ".agents/skills"];

/// Default of `[agent] skills_budget`: bytes of the prompt's list of
/// skills, about 1,000 tokens, dozens of one-line descriptions.
pub const DEFAULT_BUDGET: usize = 4 * 1024;

/// The skills under `dirs` (the first of a name winning), as many as the
/// list's `budget` holds; warnings name the rest.
pub(crate) fn discover(
    dirs: &[PathBuf],
    budget: usize,
    warnings: &mut Vec<String>,
) -> Result<Vec<Skill>, LaunchError> {
    let mut skills: Vec<Skill> = Vec::new();
    let mut used = 0;
    for dir in dirs {
        for skill_dir in skill_dirs(dir) {
            // A broken skill is left out, not every session: one of many
            // installed skills must not stop the start.
            let skill = match read(&skill_dir, warnings) {
                Ok(skill) => skill,
                Err(err) => {
                    warnings.push(format!("a skill is left out: {err}"));
                    continue;
                }
            };
            if skills.iter().any(|s| s.name == skill.name) {
                warnings.push(format!(
                    "skill `{}` in {} is ignored: another defines it first",
                    skill.name,
                    skill_dir.display()
                ));
                continue;
            }
            let cost = line(&skill).len();
            if used + cost > budget {
                warnings.push(format!(
                    "skill `{}` ({}) is left out: the skills' list is over its budget of {budget} \
                     bytes ([agent] skills_budget)",
                    skill.name,
                    skill_dir.display()
                ));
                continue;
            }
            used += cost;
            skills.push(skill);
        }
    }
    Ok(skills)
}

/// The line the prompt lists `skill` with.
pub(crate) fn line(skill: &Skill) -> String {
    format!("- {}: {}\n", skill.name, skill.description)
}

/// The subdirectories of `dir` holding a `SKILL.md`, sorted.
fn skill_dirs(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut dirs: Vec<PathBuf> = entries
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| path.join("SKILL.md").is_file())
        .collect();
    dirs.sort();
    dirs
}

/// The skill in `dir`.
fn read(dir: &Path, warnings: &mut Vec<String>) -> Result<Skill, LaunchError> {
    let path = dir.join("SKILL.md");
    let hint = "fix the file (its front matter needs name and description), or remove it";
    let text = std::fs::read_to_string(&path).map_err(|err| {
        LaunchError::settings(format!("cannot read {}: {err}", path.display()), hint)
    })?;
    let doc = frontmatter::parse(&text).map_err(|err| {
        LaunchError::settings(
            format!("{}:{}: {}", path.display(), err.line, err.message),
            hint,
        )
    })?;
    for field in &doc.fields {
        let known = [
            "name",
            "description",
            "license",
            "allowed-tools",
            "metadata",
        ];
        if !known.contains(&field.key.as_str()) {
            warnings.push(format!(
                "{}:{}: `{}` is ignored",
                path.display(),
                field.line,
                field.key
            ));
        }
    }
    let required = |key: &str| {
        doc.get(key)
            .map(|f| f.value.text())
            .filter(|text| !text.trim().is_empty())
            .ok_or_else(|| {
                LaunchError::settings(
                    format!("{}:1: the skill has no `{key}`", path.display()),
                    hint,
                )
            })
    };
    Ok(Skill {
        name: required("name")?,
        // One line in the list, however it was written.
        description: required("description")?
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" "),
        dir: dir.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn skill(root: &Path, name: &str, description: &str) {
        std::fs::create_dir_all(root.join(name)).unwrap();
        std::fs::write(
            root.join(name).join("SKILL.md"),
            format!("---\nname: {name}\ndescription: {description}\n---\nBody of {name}\n"),
        )
        .unwrap();
    }

    #[test]
    fn skills_are_listed_within_the_budget_and_the_rest_named() {
        let dir = tempfile::tempdir().unwrap();
        skill(dir.path(), "a", "first");
        skill(
            dir.path(),
            "b",
            "second, which is much longer than the budget allows",
        );
        let mut warnings = Vec::new();
        let found = discover(&[dir.path().to_path_buf()], 20, &mut warnings).unwrap();
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].name, "a");
        assert!(warnings[0].contains("skill `b`"), "{warnings:?}");
        // A broken one is left out with a warning naming its line.
        std::fs::create_dir_all(dir.path().join("c")).unwrap();
        std::fs::write(dir.path().join("c/SKILL.md"), "---\nname: c\n---\n").unwrap();
        let mut warnings = Vec::new();
        let found = discover(&[dir.path().to_path_buf()], 1000, &mut warnings).unwrap();
        assert_eq!(found.len(), 2);
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("c/SKILL.md:1: the skill has no `description`")),
            "{warnings:?}"
        );
    }
}
