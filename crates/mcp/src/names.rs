//! Tool names every provider accepts: `SERVER__TOOL`, in
//! `[a-zA-Z0-9_-]{1,64}` (OpenAI's rule, the strictest).
//!
//! Characters outside the set become `_`. A name longer than 64, or one
//! that clashes with a name already taken, is cut and given a suffix of 8
//! hex digits hashed from the server's and the tool's real names, so the
//! same tool gets the same name in every session (a resumed session's
//! history keeps matching).

use std::collections::HashSet;

/// Longest tool name.
pub const MAX_NAME: usize = 64;
/// Between the server's name and the tool's.
pub const SEPARATOR: &str = "__";

/// The approval pattern that covers every tool of `server`: `SERVER__*`.
pub fn server_pattern(server: &str) -> String {
    format!("{server}{SEPARATOR}*")
}

/// The namespaced name of `tool` of `server`, unique among `taken` (which
/// it joins).
pub fn tool_name(server: &str, tool: &str, taken: &mut HashSet<String>) -> String {
    let plain: String = format!("{server}{SEPARATOR}{tool}")
        .chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                true => c,
                false => '_',
            },
        )
        .collect();
    let exact = plain == format!("{server}{SEPARATOR}{tool}");
    let name = if exact && plain.len() <= MAX_NAME && !taken.contains(&plain) {
        plain
    } else {
        // Cut, replaced or clashing: a suffix hashed from the real names,
        // so two tools differing only in a replaced character never share
        // a name.
        let suffix = format!("_{:08x}", fnv1a(&format!("{server}\u{0}{tool}")));
        let keep = plain.len().min(MAX_NAME - suffix.len());
        format!("{}{suffix}", &plain[..keep])
    };
    let mut unique = name.clone();
    let mut n = 2;
    while taken.contains(&unique) {
        let tail = format!("_{n}");
        let keep = name.len().min(MAX_NAME - tail.len());
        unique = format!("{}{tail}", &name[..keep]);
        n += 1;
    }
    taken.insert(unique.clone());
    unique
}

/// 32-bit FNV-1a: stable across builds and platforms (unlike `DefaultHasher`).
fn fnv1a(text: &str) -> u32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in text.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(name: &str) -> bool {
        !name.is_empty()
            && name.len() <= MAX_NAME
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn names_are_valid_unique_and_stable() {
        let mut taken = HashSet::new();
        assert_eq!(tool_name("fs", "read_file", &mut taken), "fs__read_file");
        let dotted = tool_name("fs", "read.file", &mut taken);
        assert!(
            valid(&dotted) && dotted.starts_with("fs__read_file_"),
            "{dotted}"
        );
        let long_tool = "x".repeat(100);
        let long = tool_name("server", &long_tool, &mut taken);
        assert!(valid(&long) && long.len() == MAX_NAME, "{long}");
        // The same inputs give the same name in another session.
        let mut again = HashSet::new();
        again.insert("fs__read_file".to_string());
        assert_eq!(tool_name("fs", "read.file", &mut again), dotted);
        // A clash with a taken name is resolved.
        let mut clash = HashSet::new();
        clash.insert("a__b".to_string());
        let other = tool_name("a", "b", &mut clash);
        assert!(valid(&other) && other != "a__b", "{other}");
        assert_eq!(clash.len(), 2);
    }
}
