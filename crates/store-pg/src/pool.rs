//! A bounded set of connections every session of a store shares.
//!
//! A worker's sessions spend nearly all their time waiting for the model,
//! so they need the database for a millisecond now and then: connections
//! are taken for one statement (or one transaction) and given back. The
//! bound keeps several workers within a default server's
//! `max_connections` (100) however many sessions each runs.

use crate::error::query;
use crate::health::Health;
use pod::PodError;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_postgres::{Client, NoTls, Statement};

/// The default number of connections per store (per worker process).
pub const DEFAULT_POOL_SIZE: usize = 16;

/// Opens a connection; its driver task runs until the client is dropped.
/// It names itself `pod` in `pg_stat_activity` unless the URL names it.
pub(crate) async fn connect_raw(url: &str) -> Result<Client, tokio_postgres::Error> {
    let mut config: tokio_postgres::Config = url.parse()?;
    if config.get_application_name().is_none() {
        config.application_name("pod");
    }
    let (client, connection) = config.connect(NoTls).await?;
    tokio::spawn(async move {
        if let Err(err) = connection.await {
            tracing::debug!(err = %err, "session store connection closed");
        }
    });
    Ok(client)
}

/// One connection and the statements prepared on it.
pub(crate) struct PgConn {
    pub client: Client,
    prepared: HashMap<&'static str, Statement>,
}

impl PgConn {
    /// `sql` prepared on this connection, once: the hot statements then
    /// cost one round trip each instead of two.
    pub async fn prepared(
        &mut self,
        sql: &'static str,
    ) -> Result<Statement, tokio_postgres::Error> {
        if let Some(statement) = self.prepared.get(sql) {
            return Ok(statement.clone());
        }
        let statement = self.client.prepare(sql).await?;
        self.prepared.insert(sql, statement.clone());
        Ok(statement)
    }
}

/// The connections of one store.
pub(crate) struct Pool {
    url: Arc<str>,
    location: String,
    // Connections not in use. A plain lock: held only to push or pop.
    idle: parking_lot::Mutex<Vec<PgConn>>,
    // One permit per connection that may exist.
    permits: Arc<Semaphore>,
    size: usize,
    open: AtomicUsize,
    health: Arc<Health>,
}

impl Pool {
    /// A pool of at most `size` (at least one) connections to `url`.
    pub fn new(url: Arc<str>, location: String, size: usize, health: Arc<Health>) -> Self {
        let size = size.max(1);
        Self {
            health,
            url,
            location,
            idle: parking_lot::Mutex::new(Vec::with_capacity(size)),
            permits: Arc::new(Semaphore::new(size)),
            size,
            open: AtomicUsize::new(0),
        }
    }

    /// The most connections it opens.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Whether its database can be reached, as its connections found.
    pub fn health(&self) -> &Arc<Health> {
        &self.health
    }

    /// Connections open now (in use or idle).
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Hands back `client`, a connection made elsewhere (the migrating
    /// one), for reuse.
    pub fn adopt(&self, client: Client) {
        self.open.fetch_add(1, Ordering::Relaxed);
        self.idle.lock().push(PgConn {
            client,
            prepared: HashMap::new(),
        });
    }

    /// A connection: an idle one, else a new one; waits while all are in
    /// use. A closed one (the server restarted, a proxy timed it out) is
    /// dropped and replaced. Whether connecting worked tells [`Health`]
    /// whether the database can be reached.
    pub async fn get(self: &Arc<Self>) -> Result<Pooled, PodError> {
        let permit = Arc::clone(&self.permits)
            .acquire_owned()
            .await
            .map_err(|_| PodError::LogClosed)?;
        loop {
            let Some(conn) = self.idle.lock().pop() else {
                break;
            };
            if !conn.client.is_closed() {
                return Ok(Pooled {
                    conn: Some(conn),
                    pool: Arc::clone(self),
                    _permit: permit,
                });
            }
            self.open.fetch_sub(1, Ordering::Relaxed);
        }
        let client = match connect_raw(&self.url).await {
            Ok(client) => client,
            Err(err) => {
                if crate::health::unreachable(&err) {
                    self.health.unreachable(&err);
                }
                return Err(query(&self.location, "connecting", err));
            }
        };
        self.health.reachable();
        self.open.fetch_add(1, Ordering::Relaxed);
        Ok(Pooled {
            conn: Some(PgConn {
                client,
                prepared: HashMap::new(),
            }),
            pool: Arc::clone(self),
            _permit: permit,
        })
    }
}

/// A connection taken from the pool; it goes back when dropped (unless it
/// was closed).
pub(crate) struct Pooled {
    conn: Option<PgConn>,
    pool: Arc<Pool>,
    _permit: OwnedSemaphorePermit,
}

impl Pooled {
    /// Drops the connection instead of giving it back: after an error that
    /// may leave it in a state the next user must not inherit.
    pub fn discard(mut self) {
        if self.conn.take().is_some() {
            self.pool.open.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl std::ops::Deref for Pooled {
    type Target = PgConn;
    fn deref(&self) -> &PgConn {
        // Only `discard` and `drop` take it, and both consume the guard.
        self.conn.as_ref().unwrap_or_else(|| unreachable!())
    }
}

impl std::ops::DerefMut for Pooled {
    fn deref_mut(&mut self) -> &mut PgConn {
        self.conn.as_mut().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for Pooled {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            if conn.client.is_closed() {
                self.pool.open.fetch_sub(1, Ordering::Relaxed);
            } else {
                self.pool.idle.lock().push(conn);
            }
        }
    }
}
