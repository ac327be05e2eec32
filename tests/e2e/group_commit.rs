//! The PostgreSQL store's shared connections and group commit: appends of
//! many sessions committed together, each fenced on its own lease; a
//! connection dropped under a batch; more sessions than connections.

use crate::store::{expire, header, raw, user_texts};
use pod::log::LogRecord;
use pod::store::Waits;
use pod::{Durability, Item, LogWriter, PodError, SessionStore};
use pod_store_pg::{PgStore, PgStoreConfig};
use pod_testkit::postgres::Postgres;
use std::time::{Duration, Instant};
use uuid::Uuid;

/// A hang guard, not a timing assertion.
const PATIENCE: Duration = Duration::from_secs(60);

async fn store(pg: &Postgres, owner: &str, connections: usize) -> PgStore {
    let mut config = PgStoreConfig::new(pg.url());
    config.owner = owner.into();
    config.connections = connections;
    PgStore::connect(config).await.expect("connect")
}

async fn sessions(store: &PgStore, n: usize) -> Vec<(Uuid, LogWriter)> {
    let mut out = Vec::new();
    for _ in 0..n {
        let id = Uuid::new_v4();
        let log = store.create(&header(id), Durability::Turn).await.unwrap();
        out.push((id, log));
    }
    out
}

fn append(log: &LogWriter, text: &str) -> tokio::task::JoinHandle<Result<(), PodError>> {
    let (log, record) = (log.clone(), LogRecord::Item(Item::user(text)));
    tokio::spawn(async move { log.append(&record, false).await })
}

/// Polls `condition` until it holds; fails the test after [`PATIENCE`],
/// saying what it waited for.
async fn until<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + PATIENCE;
    while !condition().await {
        assert!(Instant::now() < deadline, "waited a minute for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether one of the store's connections waits for a row lock.
async fn pod_waits_on_a_lock(sql: &tokio_postgres::Client) -> bool {
    let waiting: i64 = sql
        .query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE application_name = 'pod' AND wait_event_type = 'Lock'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    waiting > 0
}

/// A connection holding session `id`'s row locked until it runs
/// `COMMIT`.
async fn lock_row(pg: &Postgres, id: Uuid) -> tokio_postgres::Client {
    let locker = raw(pg).await;
    locker
        .batch_execute(&format!(
            "BEGIN; SELECT 1 FROM pod_sessions WHERE id = '{id}' FOR UPDATE"
        ))
        .await
        .unwrap();
    locker
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_fenced_session_in_a_batch_fails_alone() {
    let pg = Postgres::start();
    // One connection: one batch in flight, so the next one waits and grows.
    let a = store(&pg, "worker-a", 1).await;
    let b = store(&pg, "worker-b", 4).await;
    let sql = raw(&pg).await;
    let logs = sessions(&a, 6).await;
    let ids: Vec<Uuid> = logs.iter().map(|(id, _)| *id).collect();

    // The first batch (session 0 alone) waits on a row lock held here.
    let locker = lock_row(&pg, ids[0]).await;
    let first = append(&logs[0].1, "zero");
    until("the first batch to wait on the lock", || {
        pod_waits_on_a_lock(&sql)
    })
    .await;

    // Session 3's lease runs out and worker B takes it over.
    expire(&sql, ids[3]).await;
    let taken = b.open(ids[3], Durability::Turn).await.unwrap();

    // The other five queue up behind the first batch: the next batch.
    let rest: Vec<_> = (1..6)
        .map(|i| append(&logs[i].1, &format!("from a {i}")))
        .collect();
    until("five appends to queue", || async { a.stats().waiting == 5 }).await;
    let before = a.stats();
    locker.batch_execute("COMMIT").await.unwrap();

    first.await.unwrap().expect("session 0's append commits");
    let mut outcomes = Vec::new();
    for handle in rest {
        outcomes.push(handle.await.unwrap());
    }
    let after = a.stats();
    assert_eq!(
        (
            after.batches - before.batches,
            after.records - before.records
        ),
        (1, 5),
        "the five appends went to the database as one batch"
    );
    for (i, outcome) in (1..6).zip(&outcomes) {
        match i {
            3 => assert!(
                matches!(outcome, Err(PodError::LeaseLost { id, epoch: 1 }) if *id == ids[3]),
                "the fenced session's append is refused: {outcome:?}"
            ),
            _ => assert!(outcome.is_ok(), "session {i}'s append commits: {outcome:?}"),
        }
    }
    for (i, id) in ids.iter().enumerate() {
        let texts = user_texts(&a.read(*id).await.unwrap().records);
        let expected: Vec<String> = match i {
            0 => vec!["zero".into()],
            3 => vec![],
            _ => vec![format!("from a {i}")],
        };
        assert_eq!(texts, expected, "session {i}");
    }
    // The fenced writer stays refused; the new holder writes on.
    let late = LogRecord::Item(Item::user("late"));
    let again = logs[3].1.append(&late, false).await;
    assert!(matches!(again, Err(PodError::LeaseLost { .. })));
    taken
        .writer
        .append(&LogRecord::Item(Item::user("from b")), false)
        .await
        .unwrap();
    assert_eq!(
        user_texts(&b.read(ids[3]).await.unwrap().records),
        ["from b"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_dropped_under_a_batch_is_replaced_and_nothing_is_written_twice() {
    let pg = Postgres::start();
    let a = store(&pg, "worker", 2).await;
    let sql = raw(&pg).await;
    let logs = sessions(&a, 5).await;
    for (_, log) in &logs {
        log.append(&LogRecord::Item(Item::user("before")), false)
            .await
            .unwrap();
    }
    // Every session's row is locked here: whatever batches form wait.
    let locker = raw(&pg).await;
    let list: Vec<String> = logs.iter().map(|(id, _)| format!("'{id}'")).collect();
    locker
        .batch_execute(&format!(
            "BEGIN; SELECT 1 FROM pod_sessions WHERE id IN ({}) FOR UPDATE",
            list.join(", ")
        ))
        .await
        .unwrap();
    let pending: Vec<_> = logs.iter().map(|(_, log)| append(log, "after")).collect();
    until("a batch to wait on the lock", || pod_waits_on_a_lock(&sql)).await;

    // The database drops the store's connections under the batch.
    sql.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pod'",
        &[],
    )
    .await
    .unwrap();
    // The batch is tried again on a new connection, and waits again.
    until("the retried batch to wait on the lock", || {
        pod_waits_on_a_lock(&sql)
    })
    .await;
    locker.batch_execute("COMMIT").await.unwrap();
    for handle in pending {
        handle.await.unwrap().expect("the append commits after all");
    }
    for (id, log) in &logs {
        log.shutdown().await.unwrap();
        assert_eq!(
            user_texts(&a.read(*id).await.unwrap().records),
            ["before", "after"],
            "session {id}: each record once, in order"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_sessions_write_through_two_connections() {
    let pg = Postgres::start();
    let a = store(&pg, "worker", 2).await;
    let sql = raw(&pg).await;
    let logs = sessions(&a, 50).await;
    let writers: Vec<_> = logs
        .iter()
        .map(|(_, log)| {
            let log = log.clone();
            tokio::spawn(async move {
                for n in 0..20 {
                    log.append(&LogRecord::Item(Item::user(format!("{n}"))), false)
                        .await?;
                }
                Ok::<_, PodError>(())
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap().unwrap();
    }
    let used: i64 = sql
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pod'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(
        used <= 2,
        "the store holds at most two connections, saw {used}"
    );
    assert!(a.stats().connections <= 2);
    assert_eq!(a.stats().leases, 50);
    let expected: Vec<String> = (0..20).map(|n| n.to_string()).collect();
    for (id, log) in &logs {
        log.shutdown().await.unwrap();
        assert_eq!(user_texts(&a.read(*id).await.unwrap().records), expected);
    }
    assert_eq!(a.stats().leases, 0, "released leases are renewed no more");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_session_is_renewed_before_it_is_opened() {
    let pg = Postgres::start();
    let mut config = PgStoreConfig::new(pg.url());
    config.owner = "worker-a".into();
    config.lease_ttl = Duration::from_millis(600);
    let a = PgStore::connect(config).await.unwrap();
    let b = store(&pg, "worker-b", 2).await;
    let sql = raw(&pg).await;
    let id = Uuid::new_v4();
    a.submit(&header(id), &[LogRecord::Item(Item::user("task"))])
        .await
        .unwrap();
    let claimed = a.claim_many(10).await.unwrap();
    assert_eq!(claimed.len(), 1);
    // The first lease's end passes on the database's clock: a renewal has
    // moved it, and the other worker finds nothing to claim.
    let first: chrono::DateTime<chrono::Utc> = sql
        .query_one("SELECT lease_until FROM pod_sessions WHERE id = $1", &[&id])
        .await
        .unwrap()
        .get(0);
    until(
        "the first lease to run out on the database's clock",
        || async {
            let now: chrono::DateTime<chrono::Utc> =
                sql.query_one("SELECT now()", &[]).await.unwrap().get(0);
            now > first + chrono::Duration::milliseconds(200)
        },
    )
    .await;
    assert!(
        b.claim_many(10).await.unwrap().is_empty(),
        "a claimed session's lease is renewed while its worker starts it"
    );
    // Opened under the claim, it continues under the same lease.
    let opened = a.open(id, Durability::Turn).await.unwrap();
    opened
        .writer
        .append(&LogRecord::Item(Item::user("ran")), false)
        .await
        .unwrap();
    opened.writer.shutdown().await.unwrap();
    assert_eq!(
        user_texts(&a.read(id).await.unwrap().records),
        ["task", "ran"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_ending_together_give_up_their_leases_in_one_statement_each_fenced() {
    let pg = Postgres::start();
    let a = store(&pg, "worker-a", 2).await;
    let b = store(&pg, "worker-b", 2).await;
    let sql = raw(&pg).await;
    let logs = sessions(&a, 6).await;
    let ids: Vec<Uuid> = logs.iter().map(|(id, _)| *id).collect();

    // The first release (session 0 alone) waits on a row lock held here.
    let locker = lock_row(&pg, ids[0]).await;
    let end = |i: usize| {
        let log = logs[i].1.clone();
        tokio::spawn(async move { log.shutdown().await.map(|()| true) })
    };
    let first = end(0);
    until("the first release to wait on the lock", || {
        pod_waits_on_a_lock(&sql)
    })
    .await;

    // Session 3's lease runs out and worker B takes it over.
    expire(&sql, ids[3]).await;
    let taken = b.open(ids[3], Durability::Turn).await.unwrap();

    // Five more end or are handed to the fleet meanwhile: they queue
    // behind the first and go as the next statement.
    let wake_at = chrono::DateTime::from_timestamp(4_000_000_000, 0).unwrap();
    let mut rest = vec![end(1), end(2), end(3)];
    let handed = |i: usize, waits: Waits| {
        let log = logs[i].1.clone();
        tokio::spawn(async move { log.hand_over(waits).await })
    };
    rest.push(handed(4, Waits::Worker));
    rest.push(handed(
        5,
        Waits::Answer {
            wake_at: Some(wake_at),
        },
    ));
    until("five releases to queue", || async {
        a.stats().releases_waiting == 5
    })
    .await;
    let before = a.stats();
    locker.batch_execute("COMMIT").await.unwrap();

    assert!(first.await.unwrap().expect("session 0 is released"));
    let mut outcomes = Vec::new();
    for handle in rest {
        outcomes.push(handle.await.unwrap());
    }
    let after = a.stats();
    assert_eq!(
        (
            after.release_batches - before.release_batches,
            after.releases - before.releases
        ),
        (1, 5),
        "the five releases went to the database as one statement"
    );
    for (i, outcome) in (1..6).zip(&outcomes) {
        match i {
            3 => assert!(
                matches!(outcome, Err(PodError::LeaseLost { id, epoch: 1 }) if *id == ids[3]),
                "the taken-over session's release is refused: {outcome:?}"
            ),
            _ => assert!(
                matches!(outcome, Ok(true)),
                "session {i} is released: {outcome:?}"
            ),
        }
    }
    let row = |id: Uuid| {
        let sql = &sql;
        async move {
            sql.query_one(
                "SELECT owner, state, fleet, wake_at, lease_until IS NULL FROM pod_sessions WHERE id = $1",
                &[&id],
            )
            .await
            .unwrap()
        }
    };
    for i in [0, 1, 2] {
        let r = row(ids[i]).await;
        assert_eq!(r.get::<_, Option<String>>(0), None, "session {i}");
        assert_eq!(r.get::<_, String>(1), "idle", "session {i}");
        assert!(!r.get::<_, bool>(2), "session {i} stays out of the fleet");
        assert!(r.get::<_, bool>(4), "session {i} has no lease");
    }
    // B's lease of session 3 is untouched.
    let r = row(ids[3]).await;
    assert_eq!(r.get::<_, Option<String>>(0).as_deref(), Some("worker-b"));
    assert_eq!(r.get::<_, String>(1), "running");
    let r = row(ids[4]).await;
    assert_eq!(
        (r.get::<_, String>(1), r.get::<_, bool>(2)),
        ("queued".into(), true)
    );
    assert_eq!(r.get::<_, Option<chrono::DateTime<chrono::Utc>>>(3), None);
    let r = row(ids[5]).await;
    assert_eq!(
        (r.get::<_, String>(1), r.get::<_, bool>(2)),
        ("parked".into(), true)
    );
    assert_eq!(
        r.get::<_, Option<chrono::DateTime<chrono::Utc>>>(3),
        Some(wake_at)
    );
    // The handed-over sessions are the fleet's: the queued one is claimed,
    // the parked one waits.
    assert_eq!(a.claim().await.unwrap().map(|c| c.id), Some(ids[4]));
    assert_eq!(a.claim().await.unwrap(), None);
    taken.writer.shutdown().await.unwrap();
    assert_eq!(row(ids[3]).await.get::<_, String>(1), "idle");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimed_session_read_before_it_is_opened_is_opened_from_that_read() {
    let pg = Postgres::start();
    let a = store(&pg, "worker", 2).await;
    let id = Uuid::new_v4();
    a.submit(&header(id), &[LogRecord::Item(Item::user("the task"))])
        .await
        .unwrap();
    assert_eq!(a.claim().await.unwrap().map(|c| c.id), Some(id));
    // A fleet worker reads the session to plan its start, then opens it:
    // the claim's lease kept anyone from appending in between, so the
    // open continues from the read.
    let before = a.stats().log_reads;
    let read = a.read(id).await.unwrap();
    let opened = a.open(id, Durability::Turn).await.unwrap();
    assert_eq!(a.stats().log_reads - before, 1, "the open read nothing");
    assert_eq!(opened.contents.header, read.header);
    assert_eq!(user_texts(&opened.contents.records), ["the task"]);
    // Its writer continues after the records read.
    opened
        .writer
        .append(&LogRecord::Item(Item::user("next")), false)
        .await
        .unwrap();
    assert_eq!(
        user_texts(&a.read(id).await.unwrap().records),
        ["the task", "next"]
    );
    opened.writer.shutdown().await.unwrap();
    // An open that was not claimed reads the records itself.
    let before = a.stats().log_reads;
    let again = a.open(id, Durability::Turn).await.unwrap();
    assert_eq!(a.stats().log_reads - before, 1);
    assert_eq!(user_texts(&again.contents.records), ["the task", "next"]);
    again.writer.shutdown().await.unwrap();
}
