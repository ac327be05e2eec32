//! The session store contract, run against both stores (the file store and
//! PostgreSQL in a throwaway cluster), and what only the PostgreSQL store
//! does: leases with epoch fencing, claims, reconnection, migrations.

use pod::log::{LogRecord, SessionHeader};
use pod::{
    Durability, FileStore, Item, PodError, PodHome, ScriptStep, SessionStore, Store, TodoStatus,
    Waits,
};
use pod_store_pg::{PgStore, PgStoreConfig, SessionState};
use pod_testkit::pod::{todo_step, TestPod};
use pod_testkit::postgres::Postgres;
use std::sync::Arc;
use std::time::Duration;
use uuid::Uuid;

pub(crate) fn header(id: Uuid) -> SessionHeader {
    SessionHeader::new(id, "scripted".into(), "/workspace".into())
}

fn assistant(text: &str, calls: Vec<pod_llm::ToolCall>) -> Item {
    Item::new(pod::ItemKind::Assistant {
        text: text.into(),
        reasoning: None,
        tool_calls: calls,
        usage: None,
    })
}

fn items(records: &[LogRecord]) -> Vec<Item> {
    records
        .iter()
        .filter_map(|r| match r {
            LogRecord::Item(item) => Some(item.clone()),
            _ => None,
        })
        .collect()
}

/// The texts of the user items, in order.
pub(crate) fn user_texts(records: &[LogRecord]) -> Vec<String> {
    items(records)
        .into_iter()
        .filter_map(|item| match item.kind {
            pod::ItemKind::User { text } => Some(text),
            _ => None,
        })
        .collect()
}

async fn pg_store(pg: &Postgres, owner: &str, ttl: Duration) -> PgStore {
    let mut config = PgStoreConfig::new(pg.url());
    config.owner = owner.into();
    config.lease_ttl = ttl;
    PgStore::connect(config)
        .await
        .expect("connect to the test cluster")
}

// ---- the contract ------------------------------------------------------

/// Every store: what is appended is read back in order, one writer at a
/// time, a reopened log continues after its last record, removal is
/// refused while open, an imported copy keeps its last-written time, and a
/// Pod resumes its plan from the store.
async fn contract(store: Store) {
    let name = store.location();

    // Round trip.
    let id = Uuid::new_v4();
    let log = store.create(&header(id), Durability::Turn).await.unwrap();
    let written = vec![
        Item::user("hello"),
        assistant("hi", vec![]),
        Item::user("again"),
    ];
    for item in &written {
        log.append(&LogRecord::Item(item.clone()), false)
            .await
            .unwrap();
    }
    let stat = store.stat(id).await.unwrap();
    assert!(
        stat.holder.is_some(),
        "{name}: an open session has a holder"
    );
    assert!(store.list().await.unwrap().contains(&id), "{name}");

    // One writer.
    let second = store.open(id, Durability::Turn).await;
    assert!(
        matches!(
            second,
            Err(PodError::SessionBusy { .. } | PodError::SessionLeased { .. })
        ),
        "{name}: a second writer must be refused, got {second:?}"
    );
    let removed = store.remove(id).await;
    assert!(
        removed.is_err(),
        "{name}: an open session cannot be removed"
    );
    log.shutdown().await.unwrap();
    // A child process forked by a parallel test between our open and its
    // exec holds the file lock for that instant: wait it out.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while store.stat(id).await.unwrap().holder.is_some() {
        assert!(
            std::time::Instant::now() < deadline,
            "{name}: a closed session has no holder"
        );
        tokio::task::yield_now().await;
    }

    // Read back, then reopen and continue.
    let contents = store.read(id).await.unwrap();
    assert_eq!(contents.header.as_ref().map(|h| h.session_id), Some(id));
    assert_eq!(items(&contents.records), written, "{name}");
    let opened = store.open(id, Durability::Always).await.unwrap();
    assert_eq!(items(&opened.contents.records), written, "{name}");
    let more = assistant("continued", vec![]);
    opened
        .writer
        .append(&LogRecord::Item(more.clone()), true)
        .await
        .unwrap();
    opened.writer.shutdown().await.unwrap();
    let mut expected = written.clone();
    expected.push(more);
    assert_eq!(items(&store.read(id).await.unwrap().records), expected);

    // Fork and remove.
    let fork = pod::fork_session(store.as_ref(), id, Some(2))
        .await
        .unwrap();
    let forked = store.read(fork).await.unwrap();
    assert_eq!(items(&forked.records), written[..2].to_vec(), "{name}");
    assert_eq!(forked.header.unwrap().forked_from, Some((id, 2)));
    store.remove(fork).await.unwrap();
    assert!(
        matches!(store.read(fork).await, Err(PodError::NoSuchSession { .. })),
        "{name}: a removed session is gone"
    );
    assert!(matches!(
        store.open(Uuid::new_v4(), Durability::Turn).await,
        Err(PodError::NoSuchSession { .. })
    ));

    // Import: a session copied in whole (`pod store import`) keeps when it
    // was last written, is not open, and continues like any other; an
    // import over it is refused and leaves it as it was.
    let copied = Uuid::new_v4();
    let records: Vec<LogRecord> = written.iter().cloned().map(LogRecord::Item).collect();
    let then = chrono::Utc::now() - chrono::Duration::days(3);
    store.import(&header(copied), &records, then).await.unwrap();
    assert_eq!(
        items(&store.read(copied).await.unwrap().records),
        written,
        "{name}"
    );
    let stat = store.stat(copied).await.unwrap();
    // PostgreSQL keeps microseconds.
    let off = (stat.updated_at - then).num_milliseconds().abs();
    assert!(off < 1, "{name}: updated {} for {then}", stat.updated_at);
    assert!(
        stat.holder.is_none(),
        "{name}: an imported session is closed"
    );
    let again = store
        .import(&header(copied), &records[..1], chrono::Utc::now())
        .await;
    assert!(
        again.is_err(),
        "{name}: an import over a session is refused"
    );
    assert_eq!(
        items(&store.read(copied).await.unwrap().records),
        written,
        "{name}: the refused import changed nothing"
    );
    let opened = store.open(copied, Durability::Turn).await.unwrap();
    assert_eq!(items(&opened.contents.records), written, "{name}");
    opened.writer.shutdown().await.unwrap();
    store.remove(copied).await.unwrap();

    // A Pod on the store: the plan survives a resume, and a call the
    // "crash" left without a result gets the interrupted result.
    let mut test = TestPod::new(vec![
        todo_step(&[("a", "First", "completed"), ("b", "Second", "in_progress")]),
        ScriptStep::tool_call("echo", serde_json::json!({"text": "x"})),
        ScriptStep::text("working"),
    ]);
    test.store = Some(Arc::clone(&store));
    let pod = test.spawn().await;
    pod.prompt("plan it").await.unwrap();
    let session = pod.session_id();
    pod.shutdown().await.unwrap();
    let opened = store.open(session, Durability::Turn).await.unwrap();
    opened
        .writer
        .append(
            &LogRecord::Item(assistant(
                "",
                vec![pod_llm::ToolCall {
                    id: "dangling".into(),
                    name: "echo".into(),
                    arguments: "{}".into(),
                }],
            )),
            true,
        )
        .await
        .unwrap();
    opened.writer.shutdown().await.unwrap();
    let pod = test.resume(session).await;
    let todos = pod.get_todos().await.unwrap();
    assert_eq!(
        todos.iter().map(|t| t.status).collect::<Vec<_>>(),
        vec![TodoStatus::Completed, TodoStatus::InProgress],
        "{name}: the plan is replayed from the store"
    );
    let history = pod.get_history().await.unwrap();
    let (interrupted, is_error) = pod_testkit::result_of(&history, "dangling");
    assert!(
        is_error && interrupted.contains("Interrupted"),
        "{interrupted}"
    );
    pod.shutdown().await.unwrap();
}

#[tokio::test]
async fn the_file_store_keeps_the_contract() {
    let dir = tempfile::tempdir().unwrap();
    contract(Arc::new(FileStore::new(PodHome::new(dir.path())))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_postgres_store_keeps_the_contract() {
    let pg = Postgres::start();
    contract(Arc::new(
        pg_store(&pg, "contract", Duration::from_secs(30)).await,
    ))
    .await;
}

// ---- PostgreSQL only ---------------------------------------------------

pub(crate) async fn raw(pg: &Postgres) -> tokio_postgres::Client {
    let (client, connection) = tokio_postgres::connect(&pg.url(), tokio_postgres::NoTls)
        .await
        .expect("raw connection");
    tokio::spawn(connection);
    client
}

/// Expires a session's lease now, as time passing without renewals would.
pub(crate) async fn expire(client: &tokio_postgres::Client, id: Uuid) {
    client
        .execute(
            "UPDATE pod_sessions SET lease_until = now() - interval '1 second' WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_writer_whose_lease_was_taken_over_never_writes_again() {
    let pg = Postgres::start();
    let a = pg_store(&pg, "worker-a", Duration::from_secs(30)).await;
    let b = pg_store(&pg, "worker-b", Duration::from_secs(30)).await;
    let sql = raw(&pg).await;
    let id = Uuid::new_v4();
    let old = a.create(&header(id), Durability::Turn).await.unwrap();
    old.append(&LogRecord::Item(Item::user("by a")), false)
        .await
        .unwrap();

    // A live lease keeps b out.
    match b.open(id, Durability::Turn).await {
        Err(PodError::SessionLeased { owner, .. }) => assert_eq!(owner, "worker-a"),
        other => panic!("expected the lease to refuse b, got {other:?}"),
    }

    // a stops renewing (paused, partitioned): its lease runs out and b
    // takes the session over with the next epoch.
    expire(&sql, id).await;
    let new = b.open(id, Durability::Turn).await.unwrap();
    assert_eq!(user_texts(&new.contents.records), ["by a"]);
    new.writer
        .append(&LogRecord::Item(Item::user("by b")), false)
        .await
        .unwrap();

    // a wakes up: every append is refused, and so is its release.
    let late = old
        .append(&LogRecord::Item(Item::user("late a")), false)
        .await;
    assert!(
        matches!(late, Err(PodError::LeaseLost { id: lost, epoch: 1 }) if lost == id),
        "{late:?}"
    );
    assert!(matches!(
        old.shutdown().await,
        Err(PodError::LeaseLost { .. })
    ));
    // b's lease is untouched by a's attempts.
    let row = sql
        .query_one(
            "SELECT owner, epoch FROM pod_sessions WHERE id = $1",
            &[&id],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, Option<String>>(0).as_deref(), Some("worker-b"));
    assert_eq!(row.get::<_, i64>(1), 2);
    new.writer
        .append(&LogRecord::Item(Item::user("b goes on")), false)
        .await
        .unwrap();
    new.writer.shutdown().await.unwrap();

    let records = b.read(id).await.unwrap().records;
    assert_eq!(user_texts(&records), ["by a", "by b", "b goes on"]);
    // Which epoch wrote what is on record.
    let epochs: Vec<i64> = sql
        .query(
            "SELECT epoch FROM pod_records WHERE session_id = $1 ORDER BY seq",
            &[&id],
        )
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(epochs, vec![1, 1, 2, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fenced_pod_stops_and_says_why() {
    let pg = Postgres::start();
    let a: Store = Arc::new(pg_store(&pg, "worker-a", Duration::from_secs(30)).await);
    let b = pg_store(&pg, "worker-b", Duration::from_secs(30)).await;
    let sql = raw(&pg).await;
    let mut test = TestPod::new(vec![
        ScriptStep::text("first answer"),
        ScriptStep::text("never committed"),
    ]);
    test.store = Some(a);
    let pod = test.spawn().await;
    pod.prompt("one").await.unwrap();
    let id = pod.session_id();

    expire(&sql, id).await;
    let taken = b.open(id, Durability::Turn).await.unwrap();
    let turn = pod.prompt("two").await;
    assert!(
        format!("{:?}", turn).contains("LeaseLost"),
        "the turn fails on the lost lease: {turn:?}"
    );
    let again = pod.prompt("three").await;
    assert!(
        matches!(again, Err(PodError::LeaseLost { .. })),
        "a fenced Pod runs nothing more: {again:?}"
    );
    taken.writer.shutdown().await.unwrap();
    let records = b.read(id).await.unwrap().records;
    let texts: Vec<String> = items(&records)
        .iter()
        .map(|item| format!("{:?}", item.kind))
        .collect();
    assert!(
        !texts
            .iter()
            .any(|t| t.contains("two") || t.contains("never committed")),
        "nothing of the fenced Pod reached the log: {texts:?}"
    );
    let _ = pod.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_claim_disjoint_sessions_and_reclaim_orphans() {
    let pg = Postgres::start();
    let a = pg_store(&pg, "worker-a", Duration::from_secs(30)).await;
    let b = pg_store(&pg, "worker-b", Duration::from_secs(30)).await;
    let sql = raw(&pg).await;
    let mut queued = Vec::new();
    for _ in 0..6 {
        let id = Uuid::new_v4();
        a.submit(&header(id), &[]).await.unwrap();
        queued.push(id);
    }
    // A session that is not the fleet's is never claimed.
    let mine = Uuid::new_v4();
    a.create(&header(mine), Durability::Turn)
        .await
        .unwrap()
        .shutdown()
        .await
        .unwrap();

    let (mut got_a, mut got_b) = (Vec::new(), Vec::new());
    loop {
        let (x, y) = tokio::join!(a.claim(), b.claim());
        let (x, y) = (x.unwrap(), y.unwrap());
        if x.is_none() && y.is_none() {
            break;
        }
        got_a.extend(x);
        got_b.extend(y);
    }
    let mut all: Vec<Uuid> = got_a.iter().chain(&got_b).map(|c| c.id).collect();
    all.sort();
    let mut expected = queued.clone();
    expected.sort();
    assert_eq!(all, expected, "every queued session claimed exactly once");
    assert!(got_a.iter().chain(&got_b).all(|c| !c.orphaned));

    // A claimed session opens under the claim's lease.
    let first = got_a.first().expect("a claimed at least one").clone();
    let opened = a.open(first.id, Durability::Turn).await.unwrap();
    opened
        .writer
        .append(&LogRecord::Item(Item::user("task")), false)
        .await
        .unwrap();
    // Its worker dies (the lease runs out): b reclaims it as an orphan.
    expire(&sql, first.id).await;
    let orphan = b.claim().await.unwrap().expect("the orphan");
    assert_eq!(orphan.id, first.id);
    assert!(orphan.orphaned);
    assert_eq!(orphan.epoch, first.epoch + 1);
    let resumed = b.open(orphan.id, Durability::Turn).await.unwrap();
    assert_eq!(user_texts(&resumed.contents.records), ["task"]);
    resumed.writer.shutdown().await.unwrap();
    // Released sessions are idle until handed back.
    assert_eq!(b.claim().await.unwrap(), None);
    assert!(b.set_state(first.id, SessionState::Queued).await.unwrap());
    assert_eq!(b.claim().await.unwrap().map(|c| c.id), Some(first.id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_connection_is_reconnected_and_nothing_is_written_twice() {
    let pg = Postgres::start();
    let store = pg_store(&pg, "worker", Duration::from_secs(30)).await;
    let sql = raw(&pg).await;
    let id = Uuid::new_v4();
    let log = store.create(&header(id), Durability::Turn).await.unwrap();
    log.append(&LogRecord::Item(Item::user("before")), false)
        .await
        .unwrap();
    // The database drops every other connection (a restart, a failover,
    // an idle timeout in a proxy).
    terminate_others(&sql).await;
    log.append(&LogRecord::Item(Item::user("after")), false)
        .await
        .expect("the append reconnects");
    log.shutdown().await.unwrap();
    assert_eq!(
        user_texts(&store.read(id).await.unwrap().records),
        ["before", "after"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn records_keep_their_json_and_the_schema_is_versioned() {
    let pg = Postgres::start();
    let store = pg_store(&pg, "worker", Duration::from_secs(30)).await;
    // Connecting again migrates nothing.
    let _again = pg_store(&pg, "other", Duration::from_secs(30)).await;
    let sql = raw(&pg).await;
    let versions: Vec<i32> = sql
        .query("SELECT version FROM pod_schema ORDER BY version", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        versions,
        (1..=pod_store_pg::SCHEMA_VERSION).collect::<Vec<_>>()
    );

    let id = Uuid::new_v4();
    let log = store.create(&header(id), Durability::Turn).await.unwrap();
    let record = LogRecord::Item(Item::user("shape \"quoted\" ünïcode"));
    log.append(&record, false).await.unwrap();
    log.shutdown().await.unwrap();
    let stored: String = sql
        .query_one(
            "SELECT record::text FROM pod_records WHERE session_id = $1 AND seq = 1",
            &[&id],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(stored, serde_json::to_string(&record).unwrap());

    // A duplicate (session, seq) is impossible.
    let dup = sql
        .execute(
            "INSERT INTO pod_records (session_id, seq, epoch, record) VALUES ($1, 1, 1, '{}')",
            &[&id],
        )
        .await;
    assert!(dup.is_err());

    // A database migrated by a newer pod is refused, not misread.
    sql.execute("INSERT INTO pod_schema (version) VALUES (999)", &[])
        .await
        .unwrap();
    let newer = PgStore::connect(PgStoreConfig::new(pg.url())).await;
    let message = format!("{}", newer.expect_err("a newer schema is refused"));
    assert!(message.contains("999"), "{message}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_committed_before_its_connection_dropped_is_not_written_twice() {
    let pg = Postgres::start();
    let store = pg_store(&pg, "worker", Duration::from_secs(30)).await;
    let sql = raw(&pg).await;
    let id = Uuid::new_v4();
    let log = store.create(&header(id), Durability::Turn).await.unwrap();
    log.append(&LogRecord::Item(Item::user("one")), false)
        .await
        .unwrap();
    // The next append's first attempt committed, then the connection
    // dropped before the writer heard back: the record is there (seq 2),
    // the writer does not know it, and its connection is gone.
    let two = LogRecord::Item(Item::user("two"));
    let text = serde_json::to_string(&two).unwrap();
    sql.execute(
        "INSERT INTO pod_records (session_id, seq, epoch, record) VALUES ($1, 2, 1, $2::text::json)",
        &[&id, &text],
    )
    .await
    .unwrap();
    terminate_others(&sql).await;
    log.append(&two, false)
        .await
        .expect("the retry finds its own record and succeeds");
    log.append(&LogRecord::Item(Item::user("three")), false)
        .await
        .unwrap();
    log.shutdown().await.unwrap();
    assert_eq!(
        user_texts(&store.read(id).await.unwrap().records),
        ["one", "two", "three"]
    );

    // A different record in its place is not taken for its own.
    let id = Uuid::new_v4();
    let log = store.create(&header(id), Durability::Turn).await.unwrap();
    let other = serde_json::to_string(&LogRecord::Item(Item::user("someone else"))).unwrap();
    sql.execute(
        "INSERT INTO pod_records (session_id, seq, epoch, record) VALUES ($1, 1, 1, $2::text::json)",
        &[&id, &other],
    )
    .await
    .unwrap();
    terminate_others(&sql).await;
    let refused = log
        .append(&LogRecord::Item(Item::user("mine")), false)
        .await;
    assert!(
        matches!(refused, Err(PodError::Store { .. })),
        "{refused:?}"
    );
    assert_eq!(
        user_texts(&store.read(id).await.unwrap().records),
        ["someone else"]
    );
}

/// Terminates every connection to the database but `sql`'s own, and waits
/// until they are gone.
async fn terminate_others(sql: &tokio_postgres::Client) {
    sql.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
         WHERE pid <> pg_backend_pid() AND datname = current_database()",
        &[],
    )
    .await
    .unwrap();
    loop {
        let left: i64 = sql
            .query_one(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE pid <> pg_backend_pid() AND datname = current_database()",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if left == 0 {
            return;
        }
        tokio::task::yield_now().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_of_the_first_schema_is_migrated_and_keeps_its_sessions() {
    let pg = Postgres::start();
    let sql = raw(&pg).await;
    // A database as the first release left it, with a queued session.
    sql.batch_execute(
        "CREATE TABLE pod_schema (version integer PRIMARY KEY,
                                  applied_at timestamptz NOT NULL DEFAULT now());
         INSERT INTO pod_schema (version) VALUES (1);",
    )
    .await
    .unwrap();
    sql.batch_execute(include_str!(
        "../../crates/store-pg/migrations/001_sessions.sql"
    ))
    .await
    .unwrap();
    let id = Uuid::new_v4();
    sql.execute(
        "INSERT INTO pod_sessions (id, state, fleet, workspace) VALUES ($1, 'queued', true, '/w')",
        &[&id],
    )
    .await
    .unwrap();
    let store = pg_store(&pg, "worker", Duration::from_secs(30)).await;
    let versions: Vec<i32> = sql
        .query("SELECT version FROM pod_schema ORDER BY version", &[])
        .await
        .unwrap()
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert_eq!(
        versions,
        (1..=pod_store_pg::SCHEMA_VERSION).collect::<Vec<_>>()
    );
    // The session is still there and still claimable; a parked state is
    // allowed now.
    let claimed = store.claim().await.unwrap().expect("the queued session");
    assert_eq!(claimed.id, id);
    sql.execute(
        "UPDATE pod_sessions SET state = 'parked', wake_at = now() WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_handed_over_parked_waits_for_its_answer_or_its_timeout() {
    let pg = Postgres::start();
    let store = pg_store(&pg, "worker", Duration::from_secs(30)).await;
    let sql = raw(&pg).await;
    let id = Uuid::new_v4();
    store.submit(&header(id), &[]).await.unwrap();
    let claimed = store.claim().await.unwrap().expect("queued");
    assert_eq!(claimed.id, id);
    // Parked until someone answers: nobody claims it, and the fleet is
    // idle (nothing wakes it by itself).
    let opened = store.open(id, Durability::Turn).await.unwrap();
    assert!(opened
        .writer
        .hand_over(Waits::Answer { wake_at: None })
        .await
        .unwrap());
    assert_eq!(store.claim().await.unwrap(), None);
    assert!(store.fleet_idle().await.unwrap());
    // Parked with a timeout: not idle, and claimed once it is due.
    let opened = store.open(id, Durability::Turn).await.unwrap();
    let later = chrono::Utc::now() + chrono::Duration::hours(1);
    opened
        .writer
        .hand_over(Waits::Answer {
            wake_at: Some(later),
        })
        .await
        .unwrap();
    assert!(!store.fleet_idle().await.unwrap());
    assert_eq!(store.claim().await.unwrap(), None);
    assert!(!store.stat(id).await.unwrap().queued);
    sql.execute(
        "UPDATE pod_sessions SET wake_at = now() - interval '1 second' WHERE id = $1",
        &[&id],
    )
    .await
    .unwrap();
    assert!(store.stat(id).await.unwrap().queued);
    let woken = store.claim().await.unwrap().expect("due");
    assert_eq!(woken.id, id);
    assert!(!woken.orphaned);
    // Answered: handed to the workers, claimed at once.
    let opened = store.open(id, Durability::Turn).await.unwrap();
    opened.writer.hand_over(Waits::Worker).await.unwrap();
    assert_eq!(store.claim().await.unwrap().map(|c| c.id), Some(id));
    // A writer whose lease was taken over cannot hand the session over.
    let stale = store.open(id, Durability::Turn).await.unwrap();
    expire(&sql, id).await;
    let _taken = pg_store(&pg, "other", Duration::from_secs(30))
        .await
        .open(id, Durability::Turn)
        .await
        .unwrap();
    assert!(stale.writer.hand_over(Waits::Worker).await.is_err());
}
