//! The one directory walk of `list_dir`, `glob` and `grep`: honours
//! `.gitignore` (even outside a git repository, since a workspace need not
//! be one), `.ignore` and git's global excludes; shows hidden files but
//! never `.git` nor a private directory of the root; does not follow
//! symlinks, so a walk cannot leave the workspace; sorted by name so results
//! are stable.

use super::Root;
use ignore::{Walk, WalkBuilder};
use std::path::Path;

pub(crate) fn walk(root: &Root, dir: &Path, max_depth: Option<usize>) -> Walk {
    let mut builder = WalkBuilder::new(dir);
    let root = root.clone();
    builder
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .max_depth(max_depth)
        .filter_entry(move |entry| {
            entry.file_name() != ".git" && root.private_holding(entry.path()).is_none()
        })
        .sort_by_file_name(|a, b| a.cmp(b));
    builder.build()
}
