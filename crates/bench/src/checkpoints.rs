//! `checkpoints`: what a workspace snapshot (`pod diff`, `pod rewind`)
//! costs on a large workspace: the first one (every file hashed), one after
//! a call changed a file, one after a call changed nothing, a restore, and
//! the shadow store's size on disk.

use pod::checkpoints::Shadow;
use std::path::Path;
use std::time::{Duration, Instant};

/// Files and bytes of the workspace (10,000 files, 200 MB in the full run).
fn size(quick: bool) -> (usize, usize) {
    match quick {
        true => (1_000, 20 << 20),
        false => (10_000, 200 << 20),
    }
}

pub async fn run(quick: bool) -> Result<(), Box<dyn std::error::Error>> {
    let (files, bytes) = size(quick);
    let home = tempfile::tempdir()?;
    let ws = tempfile::tempdir()?;
    fill(ws.path(), files, bytes)?;
    let shadow = Shadow::new(
        home.path().join("checkpoints.git"),
        home.path().join("s.index"),
        ws.path().to_path_buf(),
    );
    println!("\n### Checkpoints: {files} files, {} MB\n", bytes >> 20);
    println!("| step | time |\n|---|---|");
    let (first, cold) = timed(shadow.snapshot()).await;
    let first = first?;
    println!("| first snapshot (every file hashed) | {} |", ms(cold));
    let mut unchanged = Vec::new();
    let mut changed = Vec::new();
    let mut last = first.clone();
    for n in 0..10 {
        let (tree, took) = timed(shadow.snapshot()).await;
        assert_eq_tree(&tree?, &last)?;
        unchanged.push(took);
        std::fs::write(
            ws.path().join(format!("d{}/f{n}.txt", n % 100)),
            format!("edit {n}\n"),
        )?;
        let (tree, took) = timed(shadow.snapshot()).await;
        last = tree?;
        changed.push(took);
    }
    println!(
        "| snapshot, nothing changed (median of 10) | {} |",
        ms(median(&mut unchanged))
    );
    println!(
        "| snapshot, one file changed (median of 10) | {} |",
        ms(median(&mut changed))
    );
    let (restored, took) = timed(shadow.restore(&last, &first)).await;
    restored?;
    println!("| restore 10 files to the first snapshot | {} |", ms(took));
    println!(
        "| shadow store on disk | {:.1} MB |",
        du(&home.path().join("checkpoints.git"))? as f64 / 1e6
    );
    Ok(())
}

/// `files` files over 100 directories, `bytes` in all, incompressible
/// enough that git's zlib cannot make them vanish.
fn fill(dir: &Path, files: usize, bytes: usize) -> std::io::Result<()> {
    let per = bytes / files;
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    for n in 0..files {
        let sub = dir.join(format!("d{}", n % 100));
        std::fs::create_dir_all(&sub)?;
        let mut content = Vec::with_capacity(per);
        while content.len() < per {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            content.extend_from_slice(&state.to_le_bytes());
        }
        content.truncate(per);
        std::fs::write(sub.join(format!("f{n}.txt")), content)?;
    }
    Ok(())
}

async fn timed<T>(work: impl std::future::Future<Output = T>) -> (T, Duration) {
    let start = Instant::now();
    let out = work.await;
    (out, start.elapsed())
}

fn assert_eq_tree(a: &str, b: &str) -> Result<(), Box<dyn std::error::Error>> {
    match a == b {
        true => Ok(()),
        false => Err(format!("an unchanged workspace gave another tree ({a} vs {b})").into()),
    }
}

fn median(times: &mut [Duration]) -> Duration {
    times.sort();
    times[times.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

fn du(path: &Path) -> std::io::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        let meta = entry.metadata()?;
        total += match meta.is_dir() {
            true => du(&entry.path())?,
            false => meta.len(),
        };
    }
    Ok(total)
}
