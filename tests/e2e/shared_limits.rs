//! The profiles' shared limits on PostgreSQL (`pod_store_pg`'s
//! `SharedLimits`): workers reserving at once, from separate stores
//! (separate pools, as separate processes have), never hold more than
//! the limit together; a settlement gives back what an answer did not use
//! and counts what it cost; profiles and windows are apart.

use pod::shared_limits::{Amounts, Cap, Measure, Reserve, SharedLimits, Window};
use pod_store_pg::{PgStore, PgStoreConfig};
use pod_testkit::postgres::Postgres;
use std::sync::Arc;

async fn store(pg: &Postgres, owner: &str) -> PgStore {
    let mut config = PgStoreConfig::new(pg.url());
    config.owner = owner.into();
    PgStore::connect(config).await.expect("connect")
}

fn ask(money: u64) -> Amounts {
    Amounts {
        money,
        tokens: 10,
        requests: 1,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn workers_reserving_at_once_never_hold_more_than_the_limit_together() {
    let pg = Postgres::start();
    let caps = [
        Cap {
            measure: Measure::Money,
            window: Window::Day,
            max: 1_000,
        },
        Cap {
            measure: Measure::Requests,
            window: Window::Hour,
            max: 1_000,
        },
    ];
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..3 {
        let limits: Arc<dyn SharedLimits> = Arc::new(store(&pg, &format!("w{worker}")).await);
        for _ in 0..20 {
            let limits = Arc::clone(&limits);
            tasks.spawn(async move { limits.reserve("p", &caps, ask(30)).await.unwrap() });
        }
    }
    let mut granted = Vec::new();
    let mut refused = 0;
    while let Some(done) = tasks.join_next().await {
        match done.unwrap() {
            Reserve::Granted(reservation) => granted.push(reservation),
            Reserve::Refused { cap, spent, .. } => {
                assert_eq!(cap, caps[0], "money, not requests");
                assert!(spent + 30 > 1_000, "refused with room: {spent}");
                refused += 1;
            }
        }
    }
    // 60 asked for 30 each of 1000: exactly 33 fit, whoever asked first.
    assert_eq!((granted.len(), refused), (33, 27));
    let a = store(&pg, "reader").await;
    let held = |rows: Vec<(String, String, i64, i64)>| {
        rows.into_iter()
            .map(|(measure, window, spent, reserved)| {
                format!("{measure}/{window}: {spent}+{reserved}")
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(
        held(a.limit_windows("p").await.unwrap()),
        ["money/day: 0+990", "requests/hour: 0+33"]
    );
    // Answers that cost 10 each: the rest of each reservation comes back.
    for reservation in &granted {
        a.settle(reservation, ask(10)).await.unwrap();
    }
    assert_eq!(
        held(a.limit_windows("p").await.unwrap()),
        ["money/day: 330+0", "requests/hour: 33+0"]
    );
    assert!(matches!(
        a.reserve("p", &caps, ask(670)).await.unwrap(),
        Reserve::Granted(_)
    ));
    assert!(matches!(
        a.reserve("p", &caps, ask(1)).await.unwrap(),
        Reserve::Refused { spent: 1_000, .. }
    ));
    // Another profile counts apart; an estimate above the limit never fits.
    assert!(matches!(
        a.reserve("q", &caps, ask(1_000)).await.unwrap(),
        Reserve::Granted(_)
    ));
    assert!(matches!(
        a.reserve("r", &caps, ask(1_001)).await.unwrap(),
        Reserve::Refused { spent: 0, .. }
    ));
}
