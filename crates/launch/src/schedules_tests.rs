use super::*;
use crate::timing::Timing;

fn schedule(name: &str, next_fire: DateTime<Utc>) -> Schedule {
    let template = SessionHeader::new(Uuid::nil(), "m".into(), PathBuf::from("/w"));
    Schedule {
        name: name.into(),
        timing: Timing::every(std::time::Duration::from_secs(2)).unwrap(),
        task: "t".into(),
        template,
        limits: None,
        overlap: Overlap::Skip,
        session: None,
        paused: false,
        next_fire,
        created_at: next_fire,
        run_now: None,
        last_fire: None,
        last_session: None,
        fires: 0,
        skipped: 0,
        missed: 0,
        recent: Vec::new(),
    }
}

#[test]
fn a_fire_time_is_taken_once_and_files_are_private() {
    let home = tempfile::tempdir().unwrap();
    let schedules = Schedules::new(&pod::PodHome::new(home.path()));
    let due = Utc::now();
    assert!(schedules.add(&schedule("tick", due)).unwrap());
    assert!(
        !schedules.add(&schedule("tick", due)).unwrap(),
        "a taken name"
    );
    let take = Take {
        name: "tick".into(),
        expected: due,
        fire_at: due,
        next: due + chrono::Duration::seconds(2),
        missed: 0,
        session: Some(Uuid::new_v4()),
        run_now: false,
    };
    let taken = schedules.take(&take).unwrap().unwrap();
    assert_eq!(taken.next_fire, take.next);
    assert_eq!((taken.fires, taken.last_session), (1, take.session));
    // A second taker (a restart that read the old file) finds it moved on.
    assert!(schedules.take(&take).unwrap().is_none());
    assert_eq!(schedules.get("tick").unwrap().unwrap().fires, 1);
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&home.path().join("schedules")), 0o700);
    assert_eq!(mode(&home.path().join("schedules/tick.json")), 0o600);
}

#[test]
fn a_paused_schedule_is_not_taken_and_only_one_process_fires() {
    let home = tempfile::tempdir().unwrap();
    let schedules = Schedules::new(&pod::PodHome::new(home.path()));
    let due = Utc::now();
    schedules.add(&schedule("tick", due)).unwrap();
    schedules.set_paused("tick", true, due).unwrap().unwrap();
    let take = Take {
        name: "tick".into(),
        expected: due,
        fire_at: due,
        next: due,
        missed: 0,
        session: None,
        run_now: false,
    };
    assert!(schedules.take(&take).unwrap().is_none());
    let held = schedules.lock_firing().unwrap();
    assert!(matches!(
        schedules.lock_firing(),
        Err(ScheduleError::Locked(_))
    ));
    drop(held);
    assert!(schedules.lock_firing().is_ok());
    assert!(schedules.remove("tick").unwrap());
    assert!(schedules.list().unwrap().is_empty());
}
