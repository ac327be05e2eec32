//! When a session log is fsynced: a leaf, shared by the config, the stores
//! and the questions.

use serde::{Deserialize, Serialize};

/// When the session log is fsynced. Every append is written to the file
/// before it is acknowledged under every setting, so killing the process
/// loses nothing acknowledged; the setting decides what a power loss or
/// kernel crash can lose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// fsync after every item: a power loss loses at most the item being written.
    Always,
    /// fsync after every tool result and at every turn end: a power loss
    /// loses at most the items since the last tool result or turn end.
    #[default]
    Turn,
    /// Never fsync: the OS decides when data reaches the disk.
    Never,
}
