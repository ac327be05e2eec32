//! Crash injection in CI: the real `pod` binary killed with SIGKILL at 30
//! seeded random points over long scripted sessions, resumed until each
//! plan is complete, its log checked after every kill (see
//! `pod_crashtest::check::check_log`). `POD_CRASH_SEED` picks another seed;
//! `pod-crash --soak` runs thousands.

use pod_crashtest::harness::{run, CrashConfig, Durability};

fn seed() -> u64 {
    std::env::var("POD_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(20_250_901)
}

fn crash_run(kills: u64, durability: Durability) {
    let mut config = CrashConfig::new(env!("CARGO_BIN_EXE_pod"), kills, seed());
    config.durability = durability;
    match run(&config) {
        Ok(report) => {
            // Printed so a CI log shows the seed and what was exercised.
            eprintln!("durability {}: {report}", durability.as_arg());
            assert_eq!(report.kills, kills);
            assert!(report.sessions_completed >= 1);
            assert!(report.acks_checked > 0);
        }
        Err(err) => panic!("{err}"),
    }
}

#[test]
fn sigkill_at_random_points_loses_nothing_acknowledged_durability_turn() {
    crash_run(20, Durability::Turn);
}

#[test]
fn sigkill_at_random_points_loses_nothing_acknowledged_durability_never() {
    crash_run(10, Durability::Never);
}

/// The fleet mode, bounded: 3 `pod serve` workers on a throwaway
/// PostgreSQL cluster, 8 sessions, 12 kills and pauses at random.
#[test]
fn fleet_workers_killed_and_paused_at_random_lose_nothing() {
    let pg = pod_testkit::postgres::Postgres::start();
    let mut config =
        pod_crashtest::fleet::FleetConfig::new(env!("CARGO_BIN_EXE_pod"), pg.url(), 12, seed());
    config.sessions = 8;
    config.items = 8;
    match pod_crashtest::fleet::run(&config) {
        Ok(report) => {
            eprintln!("fleet: {report}");
            assert_eq!(report.sessions_completed, 8);
            assert!(report.snapshots > 0 && report.records > 0);
        }
        Err(err) => panic!("{err}"),
    }
}

/// The fleet mode with the database crashed too: three outages of one to
/// four leases among 12 kills and pauses; still nothing acknowledged is
/// lost, no session is written by two workers at once, every plan ends
/// complete.
#[test]
fn fleet_through_database_outages_loses_nothing() {
    let mut pg = pod_testkit::postgres::Postgres::start();
    let mut config =
        pod_crashtest::fleet::FleetConfig::new(env!("CARGO_BIN_EXE_pod"), pg.url(), 12, seed());
    config.sessions = 8;
    config.items = 8;
    config.outages = 3;
    match pod_crashtest::fleet::run_with(&config, Some(&mut pg)) {
        Ok(report) => {
            eprintln!("fleet with outages: {report}");
            assert_eq!(report.sessions_completed, 8);
            assert!(report.outages > 0, "{report}");
        }
        Err(err) => panic!("{err}"),
    }
}

/// The tree mode, bounded: a parent whose `task` calls run two subagents in
/// parallel, killed at 16 random points and resumed until it answers; no
/// child is started over, none loses work, every log stays valid.
#[test]
fn a_parent_with_two_parallel_subagents_killed_at_random_resumes_the_whole_tree() {
    let config = pod_crashtest::tree::TreeConfig::new(env!("CARGO_BIN_EXE_pod"), 16, seed());
    match pod_crashtest::tree::run(&config) {
        Ok(report) => {
            eprintln!("tree: {report}");
            assert_eq!(report.kills, 16);
            assert!(report.trees_completed >= 1);
            assert!(
                report.kills_in_children > 0,
                "no kill landed while a child ran"
            );
            assert!(report.child_checks > 0);
        }
        Err(err) => panic!("{err}"),
    }
}
