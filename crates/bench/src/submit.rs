//! Bulk submission (issue 54): `pod submit --from` with N task lines into
//! a throwaway PostgreSQL (default settings), all or none, as an operator
//! queues a day's work. Reported: the wall time of the one command, lines
//! per second, and the rows it wrote (sessions queued, records).

use crate::serve::{setup_with, sql, submit, write_tasks};
use crate::support::fmt_duration;
use std::time::Duration;

type Error = Box<dyn std::error::Error>;

async fn measure(lines: usize) -> Result<(Duration, i64, i64), Error> {
    let setup = setup_with(Duration::from_secs(1), false).await?;
    let tasks = write_tasks(&setup, lines)?;
    let wall = submit(&setup, &tasks)?;
    let client = sql(&setup.pg).await?;
    let queued: i64 = client
        .query_one(
            "SELECT count(*) FROM pod_sessions WHERE state = 'queued'",
            &[],
        )
        .await?
        .get(0);
    let records: i64 = client
        .query_one("SELECT count(*) FROM pod_records", &[])
        .await?
        .get(0);
    Ok((wall, queued, records))
}

/// Prints the table (see the module docs).
pub async fn run(quick: bool) -> Result<(), Error> {
    let sizes: &[usize] = if quick { &[20_000] } else { &[10_000, 100_000] };
    println!("\n### Bulk submission: `pod submit --from` with N lines\n");
    println!("| lines | wall | lines/s | sessions queued | records |");
    println!("|---:|---:|---:|---:|---:|");
    for &lines in sizes {
        let (wall, queued, records) = measure(lines).await?;
        println!(
            "| {lines} | {} | {:.0} | {queued} | {records} |",
            fmt_duration(wall),
            lines as f64 / wall.as_secs_f64()
        );
    }
    Ok(())
}
