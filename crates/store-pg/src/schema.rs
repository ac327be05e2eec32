//! Versioned schema migrations, shipped with the crate.

use crate::error::PgStoreError;
use tokio_postgres::Client;

/// The schema version this build writes and reads.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// Every migration, in order; version N is `MIGRATIONS[N - 1]`. Never edit
/// one that shipped: add the next.
const MIGRATIONS: &[&str] = &[
    include_str!("../migrations/001_sessions.sql"),
    include_str!("../migrations/002_parked.sql"),
    include_str!("../migrations/003_expiring_leases.sql"),
    include_str!("../migrations/004_schedules.sql"),
    include_str!("../migrations/005_heartbeats.sql"),
    include_str!("../migrations/006_shared_limits.sql"),
    include_str!("../migrations/007_documents.sql"),
];

// Any constant both sides agree on: workers migrating at once take turns.
const MIGRATION_LOCK: i64 = 0x706f_645f_7363_6865; // "pod_sche"

/// Brings the database's schema up to [`SCHEMA_VERSION`], in one
/// transaction; refuses a database migrated by a newer pod.
pub async fn migrate(client: &mut Client, location: &str) -> Result<(), PgStoreError> {
    let query = |what| {
        move |source| PgStoreError::Query {
            what,
            location: location.to_string(),
            source,
        }
    };
    let tx = client
        .transaction()
        .await
        .map_err(query("starting the migration"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(query("locking the schema"))?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS pod_schema (
             version    integer PRIMARY KEY,
             applied_at timestamptz NOT NULL DEFAULT now()
         )",
    )
    .await
    .map_err(query("creating pod_schema"))?;
    let row = tx
        .query_one("SELECT coalesce(max(version), 0) FROM pod_schema", &[])
        .await
        .map_err(query("reading the schema version"))?;
    let found: i32 = row.get(0);
    if found > SCHEMA_VERSION {
        return Err(PgStoreError::SchemaTooNew {
            location: location.to_string(),
            found,
            known: SCHEMA_VERSION,
        });
    }
    for (index, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        let version = index as i32 + 1;
        tx.batch_execute(sql).await.map_err(query("migrating"))?;
        tx.execute("INSERT INTO pod_schema (version) VALUES ($1)", &[&version])
            .await
            .map_err(query("recording the schema version"))?;
        tracing::info!(version, "session store schema migrated");
    }
    tx.commit().await.map_err(query("committing the migration"))
}
