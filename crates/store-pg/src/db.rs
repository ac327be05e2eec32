//! What a store's parts share: the database's connections, the group
//! commit, the releases and the leases, and a lease as a log holds it. A
//! leaf between the store and the logs it opens.

use crate::commit::GroupCommit;
use crate::leases::Leases;
use crate::pool::Pool;
use crate::releases::Releases;
use std::sync::Arc;
use uuid::Uuid;

/// A lease this store holds on a session.
#[derive(Clone, Debug)]
pub(crate) struct Lease {
    pub id: Uuid,
    pub epoch: i64,
    pub ttl_ms: i64,
}

/// What a store's open sessions share: connections, the group commit and
/// their leases (renewed together).
pub(crate) struct Db {
    pub pool: Arc<Pool>,
    pub commits: GroupCommit,
    pub releases: Releases,
    pub leases: Arc<Leases>,
    pub location: String,
}
