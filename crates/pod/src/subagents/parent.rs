//! What a child session is derived from: its parent's settings, id,
//! lineage and events. Shared by the `task` tool, which holds it, and the
//! child, which is made from it.

use super::Lineage;
use crate::config::PodConfig;
use crate::events::EventBus;
use std::sync::Arc;
use uuid::Uuid;

/// A parent session, as its children see it.
pub(crate) struct Parent {
    /// The parent's settings, which a child's are derived from.
    pub config: Arc<PodConfig>,
    /// The parent's session.
    pub session_id: Uuid,
    /// Where the parent is in its tree.
    pub lineage: Lineage,
    /// The parent's events (a child's progress is told there).
    pub events: EventBus,
}
