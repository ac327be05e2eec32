//! Which paths a ruleset grants, and how private paths are kept out of a
//! tree that is granted.
//!
//! Landlock rules only ever grant, and a rule on a directory grants
//! everything beneath it. So a directory that holds a path commands must
//! not reach (pod's own data, another process's `/proc/<pid>`) is granted
//! entry by entry instead: each sibling on the way down gets its own rule,
//! and the private path gets none. The directories on the way down are then
//! not listable (`ls /` fails) though everything in them is reachable by
//! name; that is the price of the rule.

use super::Access;
use std::path::{Path, PathBuf};

/// Where the kernel lists processes: every `/proc/<pid>` but the command's
/// own is off limits (`environ` holds other processes' secrets, and
/// Landlock's ptrace scoping does not cover reading it).
const PROC: &str = "/proc";

/// Adds `access` on `path` to `rules`, except on anything beneath a
/// `private` path or a process directory in `/proc`. `private` paths must
/// be canonical. A directory that cannot be listed on the way down gets no
/// rule at all: what cannot be split safely is not granted.
pub(super) fn grant(
    path: &Path,
    access: Access,
    private: &[PathBuf],
    rules: &mut Vec<(PathBuf, Access)>,
) {
    if private.iter().any(|p| p == path) {
        return;
    }
    let holds_private =
        private.iter().any(|p| p.starts_with(path)) || Path::new(PROC).starts_with(path);
    if !holds_private {
        rules.push((path.to_path_buf(), access));
        return;
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return;
    };
    let in_proc = path == Path::new(PROC);
    for entry in entries.flatten() {
        let Ok(kind) = entry.file_type() else {
            continue;
        };
        // A symlink is reached through its target, whose own rules decide;
        // a rule opened through it would grant the target (`/proc/self`
        // names the pod process itself).
        if kind.is_symlink() {
            continue;
        }
        if in_proc && is_pid(&entry.file_name()) {
            continue;
        }
        grant(&entry.path(), access, private, rules);
    }
}

fn is_pid(name: &std::ffi::OsStr) -> bool {
    let name = name.as_encoded_bytes();
    !name.is_empty() && name.iter().all(u8::is_ascii_digit)
}

/// The canonical form of each of `paths` that exists (a missing one has
/// nothing to keep private; it is looked at again for the next command).
pub(super) fn canonical(paths: &[PathBuf]) -> Vec<PathBuf> {
    paths.iter().filter_map(|p| p.canonicalize().ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn granted(path: &Path, private: &[PathBuf]) -> Vec<PathBuf> {
        let mut rules = Vec::new();
        grant(path, Access::Read, private, &mut rules);
        rules.into_iter().map(|(p, _)| p).collect()
    }

    #[test]
    fn a_private_directory_is_split_out_of_its_parents() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        for sub in ["a/secret/x", "a/b", "c"] {
            std::fs::create_dir_all(root.join(sub)).unwrap();
        }
        std::fs::write(root.join("a/file"), "f").unwrap();
        let secret = root.join("a/secret");
        let mut rules = granted(&root, std::slice::from_ref(&secret));
        rules.sort();
        assert_eq!(
            rules,
            vec![root.join("a/b"), root.join("a/file"), root.join("c")]
        );
        // Nothing private beneath: one rule.
        assert_eq!(
            granted(&root.join("c"), std::slice::from_ref(&secret)),
            vec![root.join("c")]
        );
        // The private path itself: none.
        assert!(granted(&secret, std::slice::from_ref(&secret)).is_empty());
    }

    #[test]
    fn symlinks_get_no_rule_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("secret")).unwrap();
        std::os::unix::fs::symlink(root.join("secret"), root.join("link")).unwrap();
        let rules = granted(&root, &[root.join("secret")]);
        assert!(rules.is_empty(), "{rules:?}");
    }

    #[test]
    fn proc_keeps_its_system_files_and_loses_every_process() {
        let rules = granted(Path::new("/"), &[]);
        assert!(rules.contains(&PathBuf::from("/usr")), "{rules:?}");
        assert!(rules.contains(&PathBuf::from("/proc/cpuinfo")), "{rules:?}");
        assert!(!rules.contains(&PathBuf::from("/proc")), "{rules:?}");
        assert!(!rules.contains(&PathBuf::from("/")), "{rules:?}");
        let own = PathBuf::from(format!("/proc/{}", std::process::id()));
        assert!(!rules.iter().any(|p| p.starts_with(&own)), "{rules:?}");
        assert!(!rules.contains(&PathBuf::from("/proc/self")), "{rules:?}");
    }
}
