//! The one directory walk of `list_dir`, `glob` and `grep`: honours
//! `.gitignore` (even outside a git repository, since a workspace need not
//! be one), `.ignore` and git's global excludes; shows hidden files but
//! never `.git`; does not follow symlinks, so a walk cannot leave the
//! workspace; sorted by name so results are stable.

use ignore::{Walk, WalkBuilder};
use std::path::Path;

pub(crate) fn walk(dir: &Path, max_depth: Option<usize>) -> Walk {
    let mut builder = WalkBuilder::new(dir);
    builder
        .hidden(false)
        .require_git(false)
        .follow_links(false)
        .max_depth(max_depth)
        .filter_entry(|entry| entry.file_name() != ".git")
        .sort_by_file_name(|a, b| a.cmp(b));
    builder.build()
}
