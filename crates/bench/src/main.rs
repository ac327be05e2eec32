//! `pod-bench`: measures the runtime on this machine and prints Markdown
//! tables for BENCHMARKS.md.
//!
//! ```text
//! cargo run --release -p pod-bench -- [all|resume|turns|wire|idle|fleet|reminders|cache|store|http|checkpoints|serve|verify|outage|submit] [--quick]
//! ```
//! `--quick` runs smaller sizes (a smoke run, not for the published table);
//! `serve --sessions=N` one worker of N sessions (with and without checkpoints);
//! `outage` (not in `all`: minutes of a database away) 300 sessions through
//! PostgreSQL crashes of 8, 15 and 60 s; `submit` (not in `all`) `pod submit --from`
//! with 10,000 and 100,000 lines;
//! `turns --turns=N` runs N turns; `http --watchers` only the watchers' table; `wire --api=chat|responses` one of the two OpenAI wires (both by default).

mod cache;
mod checkpoints;
mod fleet;
mod http;
mod idle;
mod loopback;
mod outage;
mod reminders;
mod resume;
mod serve;
mod store;
mod submit;
mod support;
mod turns;
mod verify;
mod watchers;
mod wire;

use std::process::ExitCode;

#[tokio::main]
async fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let which = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .map(String::as_str)
        .unwrap_or("all");
    if which == "loopback-server" {
        // The separate process the wire and fleet benchmarks talk to.
        return match loopback::serve_forever(loopback::Options::from_args(&args)).await {
            Ok(()) => ExitCode::SUCCESS,
            Err(err) => {
                eprintln!("pod-bench loopback-server: {err}");
                ExitCode::FAILURE
            }
        };
    }
    let run = |name: &str| which == "all" || which == name;
    if ![
        "all",
        "resume",
        "turns",
        "idle",
        "fleet",
        "reminders",
        "cache",
        "store",
        "http",
        "wire",
        "checkpoints",
        "serve",
        "verify",
        "outage",
        "submit",
    ]
    .contains(&which)
    {
        eprintln!(
            "unknown benchmark `{which}`; use all, resume, turns, idle, fleet, reminders, cache, store, http, wire, checkpoints, serve, verify, outage or submit"
        );
        return ExitCode::from(2);
    }
    println!("{}", support::machine_line());
    let result = async {
        if run("resume") {
            resume::run(quick).await?;
        }
        if run("turns") {
            turns::run(quick).await?;
        }
        if run("wire") {
            wire::encoding(quick)?;
            for api in wire::apis() {
                wire::run(quick, api).await?;
            }
        }
        if run("reminders") {
            reminders::run(quick).await?;
        }
        if run("cache") {
            cache::run(quick).await?;
        }
        if run("idle") {
            idle::run(quick).await?;
        }
        if run("fleet") {
            fleet::run(quick).await?;
        }
        if run("store") {
            store::run(quick).await?;
        }
        if run("http") {
            http::run(quick).await?;
        }
        if run("checkpoints") {
            checkpoints::run(quick).await?;
        }
        if run("serve") {
            serve::run(quick, &args).await?;
        }
        if which == "outage" {
            outage::run(quick).await?;
        }
        if which == "submit" {
            submit::run(quick).await?;
        }
        if run("verify") {
            verify::run(quick).await?;
        }
        Ok::<(), Box<dyn std::error::Error>>(())
    }
    .await;
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("pod-bench: {err}");
            ExitCode::FAILURE
        }
    }
}
