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
    /// `--db-outage-limit`.
    pub outage_limit: Option<Duration>,
    /// Wait for a database that cannot be reached at start (`pod serve`),
    /// rather than fail: a fleet restarted with its database comes up in
    /// any order.
    pub wait_for_database: bool,
}

/// Connects to the store; with `wait`, waits (saying so once) while its
/// database cannot be reached, up to the outage limit if one is set.
async fn connect(config: PgStoreConfig, wait: bool) -> Result<PgStore, pod_store_pg::PgStoreError> {
    let started = std::time::Instant::now();
    let mut said = false;
    let mut pause = Duration::from_millis(200);
    loop {
        match PgStore::connect(config.clone()).await {
            Err(err)
                if wait
                    && err.is_unreachable()
                    && config
                        .outage_limit
                        .is_none_or(|limit| started.elapsed() < limit) =>
            {
                if !said {
                    said = true;
                    let _ = crate::output::print(&format!(
                        "pod serve: the database {} cannot be reached ({}); waiting for it\n",
                        pod_store_pg::redact(&config.url),
                        pod_llm::error_chain(&err)
                    ));
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            Err(err) => return Err(err),
            Ok(store) => {
                if said {
                    let _ = crate::output::print(&format!(
                        "pod serve: the database is up after {:.1}s\n",
                        started.elapsed().as_secs_f64()
                    ));
                }
                return Ok(store);
            }
        }
    }
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
            config.outage_limit = tuning.outage_limit;
            let store = connect(config, tuning.wait_for_database)
                .await
                .map_err(|err| {
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
