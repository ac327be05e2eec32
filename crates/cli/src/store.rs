//! `--store` / `POD_STORE`: which store holds the session logs.

use crate::error::Failure;
use anyhow::Result;
use pod::{FileStore, PodHome, Store};
use pod_store_pg::{is_postgres_url, PgStore, PgStoreConfig};
use std::sync::Arc;
use std::time::Duration;

/// How `pod serve` tunes a PostgreSQL store (defaults elsewhere).
#[derive(Clone, Copy, Debug, Default)]
pub struct Tuning {
    /// `--lease-ttl`.
    pub lease_ttl: Option<Duration>,
    /// `--db-connections`.
    pub connections: Option<usize>,
}

/// The home and store `arg` names (and the store again when it is
/// PostgreSQL): by default the file store under `home`;
/// a directory is a home of its own (like `POD_HOME`); a PostgreSQL URL
/// (`postgres://…`) is connected to and migrated, and `home` keeps the
/// sessions' scratch directories.
pub async fn open(
    arg: Option<&str>,
    home: PodHome,
    tuning: Tuning,
) -> Result<(PodHome, Store, Option<PgStore>)> {
    match arg.map(str::trim).filter(|a| !a.is_empty()) {
        None => {
            let store = Arc::new(FileStore::new(home.clone()));
            Ok((home, store, None))
        }
        Some(url) if is_postgres_url(url) => {
            let mut config = PgStoreConfig::new(url);
            if let Some(ttl) = tuning.lease_ttl {
                config.lease_ttl = ttl;
            }
            if let Some(connections) = tuning.connections {
                config.connections = connections;
            }
            let store = PgStore::connect(config).await.map_err(|err| {
                Failure::new(
                    format!("{:#}", anyhow::Error::new(err)),
                    "check the URL in --store or POD_STORE, and that the database is up",
                )
            })?;
            Ok((home, Arc::new(store.clone()), Some(store)))
        }
        Some(dir) => {
            let home = PodHome::new(dir);
            let store = Arc::new(FileStore::new(home.clone()));
            Ok((home, store, None))
        }
    }
}
