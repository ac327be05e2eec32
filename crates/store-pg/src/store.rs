//! The store: sessions, their leases and records in PostgreSQL.

use crate::commit::GroupCommit;
use crate::db::{Db, Lease};
use crate::error::{query, PgStoreError};
use crate::health::{Availability, Health};
use crate::leases::Leases;
use crate::log::PgLog;
use crate::pool::{connect_raw, Pool, Pooled, DEFAULT_POOL_SIZE};
use crate::releases::Releases;
use crate::schema::migrate;
use crate::url::redact;
use chrono::{DateTime, Utc};
use pod::log::{LogContents, LogRecord, SessionHeader, LOG_FORMAT_VERSION};
use pod::store::{OpenedLog, SessionStat};
use pod::{Durability, LogWriter, PodError, SessionStore};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio_postgres::{Client, Row};
use uuid::Uuid;

/// Runs the read-only statement `$body` with `$client` a pooled
/// connection of `$store`. A connection that died idle in the pool (the
/// server restarted since) can look open until its first statement fails:
/// such a failure is tried once more on a fresh connection, since a read
/// may be repeated.
macro_rules! reading {
    ($store:expr, |$client:ident| $body:expr) => {{
        let conn = $store.conn().await?;
        let $client = &conn.client;
        let first = $body;
        if first.is_err() && conn.client.is_closed() {
            drop(conn);
            let conn = $store.conn().await?;
            let $client = &conn.client;
            $body
        } else {
            first
        }
    }};
}

/// How a [`PgStore`] connects and leases.
#[derive(Clone)]
pub struct PgStoreConfig {
    /// The connection URL (`postgres://user:password@host:port/db`, or
    /// `postgresql:///db?host=/socket/dir`). Never shown: messages use
    /// [`redact`]ed forms.
    pub url: String,
    /// This worker's name in leases; unique per store by default
    /// (`host:pid:random`).
    pub owner: String,
    /// How long a lease lasts unless renewed (renewed every third of it).
    /// A worker that stops renewing loses its sessions this long after.
    pub lease_ttl: Duration,
    /// The most connections the store opens, for all its sessions
    /// together (default 16).
    pub connections: usize,
    /// How long writes wait for a database that cannot be reached before
    /// they fail (and their sessions with them); `None` (the default):
    /// for as long as it takes. Meanwhile sessions pause: a Pod whose
    /// record waits sends no model request.
    pub outage_limit: Option<Duration>,
}

impl std::fmt::Debug for PgStoreConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStoreConfig")
            .field("url", &redact(&self.url))
            .field("owner", &self.owner)
            .field("lease_ttl", &self.lease_ttl)
            .field("connections", &self.connections)
            .field("outage_limit", &self.outage_limit)
            .finish()
    }
}

/// The default lease: long enough that a busy database or a slow network
/// never costs a healthy worker its sessions, short enough that a dead
/// worker's sessions move on within a minute.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(30);

impl PgStoreConfig {
    /// Defaults for `url`: a fresh owner name, a 30 s lease and up to 16
    /// connections.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            owner: default_owner(),
            lease_ttl: DEFAULT_LEASE_TTL,
            connections: DEFAULT_POOL_SIZE,
            outage_limit: None,
        }
    }
}

fn default_owner() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".into());
    let tag = Uuid::new_v4().simple().to_string();
    format!("{host}:{}:{}", std::process::id(), &tag[..8])
}

/// Sessions in PostgreSQL. Cheap to clone; clones share one bounded set
/// of connections ([`PgStoreConfig::connections`]), one group committer
/// and one lease renewal for all their sessions.
#[derive(Clone)]
pub struct PgStore {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    pub(crate) config: PgStoreConfig,
    pub(crate) db: Arc<Db>,
    // Leases taken by `claim` and not yet opened.
    pub(crate) claimed: parking_lot::Mutex<HashMap<Uuid, Claim>>,
    // Reads of sessions' records, for `StoreStats`.
    pub(crate) log_reads: std::sync::atomic::AtomicU64,
}

/// A lease taken by a claim and not yet opened, and the session's records
/// if they were read since. The lease freezes them: from the claim on,
/// only this store may append, and it appends only once it opened the
/// session. So `open` continues from that read instead of reading again
/// (a fleet worker reads a session to plan its start, then opens it).
pub(crate) struct Claim {
    pub(crate) epoch: i64,
    pub(crate) read: Option<ClaimedRead>,
}

/// What a read of a claimed session found.
pub(crate) struct ClaimedRead {
    header: Option<SessionHeader>,
    records: Vec<LogRecord>,
    next_seq: i64,
}

/// What a store did with the database, for benchmarks and `/metrics`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Connections open now.
    pub connections: usize,
    /// The most it opens.
    pub max_connections: usize,
    /// Leases it holds (open sessions).
    pub leases: usize,
    /// Group commits (statements) so far.
    pub batches: u64,
    /// Records they committed.
    pub records: u64,
    /// Appends waiting for a batch now.
    pub waiting: u64,
    /// Lease releases (statements) so far: sessions that ended or were
    /// handed to the fleet together give up their leases in one.
    pub release_batches: u64,
    /// Leases they released (or found taken over).
    pub releases: u64,
    /// Releases waiting for a batch now.
    pub releases_waiting: u64,
    /// Reads of a session's records from the database (a claimed session
    /// read before it is opened is opened from that read).
    pub log_reads: u64,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("location", &self.inner.db.location)
            .field("owner", &self.inner.config.owner)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects, migrates the schema to this build's version, and starts
    /// the group committer and the lease renewal (on the current tokio
    /// runtime).
    pub async fn connect(config: PgStoreConfig) -> Result<Self, PgStoreError> {
        let location = redact(&config.url);
        let mut client =
            connect_raw(&config.url)
                .await
                .map_err(|source| PgStoreError::Connect {
                    location: location.clone(),
                    source,
                })?;
        migrate(&mut client, &location).await?;
        let health = Arc::new(Health::new(location.clone(), config.outage_limit));
        let pool = Arc::new(Pool::new(
            config.url.clone().into(),
            location.clone(),
            config.connections,
            health,
        ));
        pool.adopt(client);
        // A quarter of the connections commit batches; the rest serve
        // reads, claims, renewals and releases meanwhile.
        let lanes = (pool.size() / 4).max(1);
        let leases = Arc::new(Leases::default());
        let ttl = config.lease_ttl;
        let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
        tokio::spawn(crate::leases::renew(
            Arc::downgrade(&leases),
            Arc::clone(&pool),
            ttl_ms,
            (ttl / 3).max(Duration::from_millis(10)),
        ));
        let db = Arc::new(Db {
            commits: GroupCommit::start(Arc::clone(&pool), lanes),
            releases: Releases::start(Arc::clone(&pool)),
            pool,
            leases,
            location,
        });
        Ok(Self {
            inner: Arc::new(Inner {
                config,
                db,
                claimed: parking_lot::Mutex::new(HashMap::new()),
                log_reads: std::sync::atomic::AtomicU64::new(0),
            }),
        })
    }

    /// What it did with the database so far.
    pub fn stats(&self) -> StoreStats {
        let db = &self.inner.db;
        let commits = db.commits.stats();
        let releases = db.releases.stats();
        let read = |n: &std::sync::atomic::AtomicU64| n.load(std::sync::atomic::Ordering::Relaxed);
        StoreStats {
            connections: db.pool.open(),
            max_connections: db.pool.size(),
            leases: db.leases.len(),
            batches: read(&commits.batches),
            records: read(&commits.items),
            waiting: read(&commits.waiting),
            release_batches: read(&releases.batches),
            releases: read(&releases.items),
            releases_waiting: read(&releases.waiting),
            log_reads: read(&self.inner.log_reads),
        }
    }

    /// This worker's name in leases.
    pub fn owner(&self) -> &str {
        &self.inner.config.owner
    }

    /// How long its leases last unless renewed.
    pub fn lease_ttl(&self) -> Duration {
        self.inner.config.lease_ttl
    }

    pub(crate) fn ttl_ms(&self) -> i64 {
        i64::try_from(self.inner.config.lease_ttl.as_millis()).unwrap_or(i64::MAX)
    }

    pub(crate) fn location(&self) -> &str {
        &self.inner.db.location
    }

    pub(crate) fn err(&self, what: &str) -> impl Fn(tokio_postgres::Error) -> PodError + '_ {
        let what = what.to_string();
        move |source| {
            if crate::health::unreachable(&source) {
                self.inner.db.pool.health().unreachable(&source);
            }
            query(self.location(), &what, source)
        }
    }

    /// Whether the store's last statements found its database
    /// unreachable (cheaper than [`availability`](Self::availability)).
    pub fn is_down(&self) -> bool {
        self.inner.db.pool.health().is_down()
    }

    /// Whether the database can be reached now, as the store's last
    /// statements found.
    pub fn availability(&self) -> Availability {
        *self.inner.db.pool.health().subscribe().borrow()
    }

    /// [`availability`](Self::availability) now and each time it changes:
    /// one change when an outage begins, one when it ends.
    pub fn watch_availability(&self) -> tokio::sync::watch::Receiver<Availability> {
        self.inner.db.pool.health().subscribe()
    }

    /// A connection of the pool (a new one if an idle one was closed).
    pub(crate) async fn conn(&self) -> Result<Pooled, PodError> {
        self.inner.db.pool.get().await
    }

    fn missing(&self, id: Uuid) -> PodError {
        PodError::NoSuchSession {
            id: id.to_string(),
            store: self.location().to_string(),
        }
    }

    /// Inserts a session row and its header; with a lease when `epoch` is
    /// given (the creator runs it), else queued for the fleet.
    pub(crate) async fn insert_session(
        &self,
        client: &mut Client,
        header: &SessionHeader,
        epoch: Option<i64>,
        first: &[LogRecord],
    ) -> Result<(), PodError> {
        let tx = client
            .transaction()
            .await
            .map_err(self.err("creating a session"))?;
        self.insert_rows(&tx, header, epoch, first).await?;
        tx.commit().await.map_err(self.err("creating a session"))
    }

    /// The rows of a new session, in the caller's transaction: `running`
    /// under this store's lease of `epoch`, or queued for the fleet.
    pub(crate) async fn insert_rows(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
        header: &SessionHeader,
        epoch: Option<i64>,
        first: &[LogRecord],
    ) -> Result<(), PodError> {
        let text =
            serde_json::to_string(&LogRecord::Header(header.clone())).map_err(PodError::Encode)?;
        let workspace = header.workspace.display().to_string();
        let inserted = match epoch {
            Some(epoch) => {
                tx.execute(
                    "INSERT INTO pod_sessions (id, state, owner, epoch, lease_until, workspace)
                     VALUES ($1::uuid, 'running', $2::text, $3::bigint,
                             now() + $4::bigint * interval '1 millisecond', $5::text)",
                    &[
                        &header.session_id,
                        &self.owner(),
                        &epoch,
                        &self.ttl_ms(),
                        &workspace,
                    ],
                )
                .await
            }
            None => {
                tx.execute(
                    "INSERT INTO pod_sessions (id, state, fleet, workspace)
                     VALUES ($1::uuid, 'queued', true, $2::text)",
                    &[&header.session_id, &workspace],
                )
                .await
            }
        };
        inserted.map_err(self.err("creating a session"))?;
        tx.execute(
            "INSERT INTO pod_records (session_id, seq, epoch, record)
             VALUES ($1::uuid, 0, $2::bigint, $3::text::json)",
            &[&header.session_id, &epoch.unwrap_or(0), &text],
        )
        .await
        .map_err(self.err("writing the session header"))?;
        for (seq, record) in (1i64..).zip(first) {
            let text = serde_json::to_string(record).map_err(PodError::Encode)?;
            tx.execute(
                "INSERT INTO pod_records (session_id, seq, epoch, record)
                 VALUES ($1::uuid, $2::bigint, $3::bigint, $4::text::json)",
                &[&header.session_id, &seq, &epoch.unwrap_or(0), &text],
            )
            .await
            .map_err(self.err("writing the session's first records"))?;
        }
        Ok(())
    }

    /// Takes the lease of session `id` if nobody holds it (or it expired).
    async fn take_lease(&self, id: Uuid) -> Result<i64, PodError> {
        let conn = self.conn().await?;
        let client = &conn.client;
        let row = client
            .query_opt(
                "UPDATE pod_sessions
                 SET owner = $2::text, epoch = epoch + 1, state = 'running',
                     lease_until = now() + $3::bigint * interval '1 millisecond'
                 WHERE id = $1::uuid AND (owner IS NULL OR lease_until IS NULL OR lease_until < now())
                 RETURNING epoch",
                &[&id, &self.owner(), &self.ttl_ms()],
            )
            .await
            .map_err(self.err("taking a lease"))?;
        match row {
            Some(row) => Ok(row.get(0)),
            None => Err(self.unavailable(client, id).await),
        }
    }

    /// Why session `id` could not be taken: it does not exist, or someone
    /// holds its lease.
    async fn unavailable(&self, client: &Client, id: Uuid) -> PodError {
        let holder = client
            .query_opt(
                "SELECT owner, lease_until FROM pod_sessions WHERE id = $1::uuid",
                &[&id],
            )
            .await;
        match holder {
            Err(err) => query(self.location(), "reading a lease", err),
            Ok(None) => self.missing(id),
            Ok(Some(row)) => PodError::SessionLeased {
                id,
                owner: row.get::<_, Option<String>>(0).unwrap_or_default(),
                until: row
                    .get::<_, Option<DateTime<Utc>>>(1)
                    .unwrap_or_else(Utc::now),
            },
        }
    }

    /// Gives a lease up (after a failed open).
    async fn release(&self, id: Uuid, epoch: i64) {
        self.inner.db.leases.forget(id, epoch);
        if let Ok(conn) = self.conn().await {
            let _ = conn
                .client
                .execute(
                    "UPDATE pod_sessions SET owner = NULL, lease_until = NULL
                     WHERE id = $1::uuid AND epoch = $2::bigint",
                    &[&id, &epoch],
                )
                .await;
        }
    }

    async fn records(&self, client: &Client, id: Uuid) -> Result<(LogContents, i64), PodError> {
        self.inner
            .log_reads
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let rows = client
            .query(
                "SELECT seq, record::text FROM pod_records WHERE session_id = $1::uuid ORDER BY seq",
                &[&id],
            )
            .await
            .map_err(self.err("reading a session"))?;
        if rows.is_empty() {
            let exists = client
                .query_opt("SELECT 1 FROM pod_sessions WHERE id = $1::uuid", &[&id])
                .await
                .map_err(self.err("reading a session"))?;
            if exists.is_none() {
                return Err(self.missing(id));
            }
        }
        parse_records(&rows, id, self.location(), 0)
    }

    /// The writer of session `id` under the lease of `epoch`, appending
    /// from `next_seq`.
    fn writer(&self, id: Uuid, epoch: i64, next_seq: i64, durability: Durability) -> LogWriter {
        let lease = Lease {
            id,
            epoch,
            ttl_ms: self.ttl_ms(),
        };
        let log = PgLog::start(Arc::clone(&self.inner.db), lease, next_seq, durability);
        LogWriter::new(id, Arc::new(log))
    }

    async fn open_log(
        &self,
        id: Uuid,
        epoch: i64,
        durability: Durability,
    ) -> Result<OpenedLog, PodError> {
        let conn = self.conn().await?;
        let (contents, next_seq) = self.records(&conn.client, id).await?;
        Ok(OpenedLog {
            contents,
            writer: self.writer(id, epoch, next_seq, durability),
        })
    }
}

/// Verifies a session's rows, which start at seq `first`: a header at seq
/// 0, records with no gap. Returns them and the next seq.
fn parse_records(
    rows: &[Row],
    id: Uuid,
    location: &str,
    first: i64,
) -> Result<(LogContents, i64), PodError> {
    let corrupt = |seq: i64, reason: String| PodError::CorruptLog {
        path: PathBuf::from(format!("{location} session {id}")),
        line: usize::try_from(seq).unwrap_or(0).saturating_add(1),
        reason: format!("record {seq}: {reason}"),
    };
    let mut contents = LogContents {
        records: Vec::with_capacity(rows.len()),
        ..LogContents::default()
    };
    let mut expected = first;
    for row in rows {
        let seq: i64 = row.get(0);
        if seq != expected {
            return Err(corrupt(seq, format!("expected record {expected} (a gap)")));
        }
        expected += 1;
        let text: String = row.get(1);
        let record: LogRecord =
            serde_json::from_str(&text).map_err(|err| corrupt(seq, err.to_string()))?;
        match (seq, record) {
            (0, LogRecord::Header(header)) => {
                if header.format_version > LOG_FORMAT_VERSION {
                    return Err(corrupt(
                        0,
                        format!(
                            "log format version {} is newer than this pod reads ({LOG_FORMAT_VERSION})",
                            header.format_version
                        ),
                    ));
                }
                if header.session_id != id {
                    return Err(corrupt(
                        0,
                        format!("the header names session {}", header.session_id),
                    ));
                }
                contents.header = Some(header);
            }
            (0, _) => {
                return Err(corrupt(
                    0,
                    "the first record is not a session header".into(),
                ))
            }
            (_, LogRecord::Header(_)) => {
                return Err(corrupt(seq, "a header after the first record".into()))
            }
            (_, record) => contents.records.push(record),
        }
    }
    Ok((contents, expected))
}

/// When each of `records` (the header first) was written, as a copy
/// stores it: a record's own time where it has one, else its predecessor's;
/// the last one's is `updated_at`, since [`SessionStore::stat`] reads when a
/// session was last written from its last row.
fn import_times(records: &[&LogRecord], updated_at: DateTime<Utc>) -> Vec<DateTime<Utc>> {
    let mut previous = updated_at;
    let mut times: Vec<DateTime<Utc>> = records
        .iter()
        .map(|record| {
            previous = record.at().unwrap_or(previous);
            previous
        })
        .collect();
    if let Some(last) = times.last_mut() {
        *last = updated_at;
    }
    times
}

#[async_trait::async_trait]
impl SessionStore for PgStore {
    fn location(&self) -> String {
        self.inner.db.location.clone()
    }

    fn shared_limits(&self) -> Option<Arc<dyn pod::shared_limits::SharedLimits>> {
        Some(Arc::new(self.clone()))
    }

    async fn create(
        &self,
        header: &SessionHeader,
        durability: Durability,
    ) -> Result<LogWriter, PodError> {
        let mut conn = self.conn().await?;
        const FIRST_EPOCH: i64 = 1;
        self.insert_session(&mut conn.client, header, Some(FIRST_EPOCH), &[])
            .await?;
        drop(conn);
        Ok(self.writer(header.session_id, FIRST_EPOCH, 1, durability))
    }

    async fn open(&self, id: Uuid, durability: Durability) -> Result<OpenedLog, PodError> {
        let claimed = self.inner.claimed.lock().remove(&id);
        let epoch = match claimed {
            Some(Claim {
                epoch,
                read: Some(read),
            }) => {
                return Ok(OpenedLog {
                    contents: LogContents {
                        header: read.header,
                        records: read.records,
                        ..LogContents::default()
                    },
                    writer: self.writer(id, epoch, read.next_seq, durability),
                })
            }
            Some(Claim { epoch, read: None }) => epoch,
            None => self.take_lease(id).await?,
        };
        match self.open_log(id, epoch, durability).await {
            Ok(opened) => Ok(opened),
            Err(err) => {
                self.release(id, epoch).await;
                Err(err)
            }
        }
    }

    async fn read(&self, id: Uuid) -> Result<LogContents, PodError> {
        let claimed = self.inner.claimed.lock().get(&id).map(|c| c.epoch);
        let (contents, next_seq) = reading!(self, |client| self.records(client, id).await)?;
        // Read under this store's claim (the claim came before the read):
        // kept for the open (see `Claim`).
        if let Some(epoch) = claimed {
            if let Some(claim) = self
                .inner
                .claimed
                .lock()
                .get_mut(&id)
                .filter(|c| c.epoch == epoch)
            {
                claim.read = Some(ClaimedRead {
                    header: contents.header.clone(),
                    records: contents.records.clone(),
                    next_seq,
                });
            }
        }
        Ok(contents)
    }

    async fn read_after(&self, id: Uuid, skip: usize) -> Result<Vec<LogRecord>, PodError> {
        let after = i64::try_from(skip).unwrap_or(i64::MAX);
        let rows = reading!(self, |client| client
            .query(
                "SELECT seq, record::text FROM pod_records
                 WHERE session_id = $1::uuid AND seq > $2::bigint ORDER BY seq",
                &[&id, &after],
            )
            .await
            .map_err(self.err("reading a session")))?;
        Ok(parse_records(&rows, id, self.location(), after + 1)?
            .0
            .records)
    }

    async fn list(&self) -> Result<Vec<Uuid>, PodError> {
        let rows = reading!(self, |client| client
            .query("SELECT id FROM pod_sessions ORDER BY created_at", &[])
            .await
            .map_err(self.err("listing sessions")))?;
        Ok(rows.iter().map(|row| row.get(0)).collect())
    }

    async fn stat(&self, id: Uuid) -> Result<SessionStat, PodError> {
        let row = reading!(self, |client| client
            .query_opt(
                "SELECT CASE WHEN lease_until > now() THEN owner END,
                        state = 'queued' OR (fleet AND state = 'running')
                            OR coalesce(fleet AND state = 'parked' AND wake_at <= now(), false),
                        coalesce((SELECT at FROM pod_records r WHERE r.session_id = s.id
                                  ORDER BY seq DESC LIMIT 1), created_at)
                 FROM pod_sessions s WHERE id = $1::uuid",
                &[&id],
            )
            .await
            .map_err(self.err("reading a session")))?
        .ok_or_else(|| self.missing(id))?;
        Ok(SessionStat {
            holder: row.get(0),
            queued: row.get(1),
            updated_at: row.get(2),
        })
    }

    fn log_location(&self, id: Uuid) -> String {
        format!("{} session {id}", self.location())
    }

    async fn import(
        &self,
        header: &SessionHeader,
        records: &[LogRecord],
        updated_at: DateTime<Utc>,
    ) -> Result<(), PodError> {
        let mut conn = self.conn().await?;
        let client = &mut conn.client;
        let id = header.session_id;
        let workspace = header.workspace.display().to_string();
        let header_record = LogRecord::Header(header.clone());
        let all: Vec<&LogRecord> = std::iter::once(&header_record).chain(records).collect();
        let times = import_times(&all, updated_at);
        // One transaction: a copy is whole or absent.
        let tx = client
            .transaction()
            .await
            .map_err(self.err("importing a session"))?;
        // Idle, as a session nobody runs: resumed by hand, like the original.
        // Its creation time is the original's, so listings keep their order.
        tx.execute(
            "INSERT INTO pod_sessions (id, created_at, state, workspace)
             VALUES ($1::uuid, $2, 'idle', $3::text)",
            &[&id, &header.created_at, &workspace],
        )
        .await
        .map_err(self.err("importing a session"))?;
        for (seq, (record, at)) in (0i64..).zip(all.iter().zip(&times)) {
            let text = serde_json::to_string(record).map_err(PodError::Encode)?;
            tx.execute(
                "INSERT INTO pod_records (session_id, seq, epoch, at, record)
                 VALUES ($1::uuid, $2::bigint, 0, $3, $4::text::json)",
                &[&id, &seq, at, &text],
            )
            .await
            .map_err(self.err("importing a session's records"))?;
        }
        tx.commit().await.map_err(self.err("importing a session"))
    }

    async fn remove(&self, id: Uuid) -> Result<(), PodError> {
        let conn = self.conn().await?;
        let client = &conn.client;
        let removed = client
            .execute(
                "DELETE FROM pod_sessions
                 WHERE id = $1::uuid AND (owner IS NULL OR lease_until IS NULL OR lease_until < now())",
                &[&id],
            )
            .await
            .map_err(self.err("deleting a session"))?;
        match removed {
            0 => Err(self.unavailable(client, id).await),
            _ => Ok(()),
        }
    }
}
