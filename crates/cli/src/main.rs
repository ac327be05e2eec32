//! `pod`: run, resume, inspect and fork sessions of the pod agent runtime.
//!
//! The binary only parses and renders: flags become `pod_launch::Flags`
//! (the launcher starts every session), `PodEvent`s become text or NDJSON
//! (model and tool text through `render::safe`), session logs become tables;
//! `pod serve` hands its flags to `pod-http` and `pod-fleet`. It must not
//! know how turns, logs or tools work inside.

mod approval;
mod cli;
mod commands;
mod drive;
mod error;
mod notices;
mod output;
mod render;
mod store;
mod style;
mod tracing_setup;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Usage errors print clap's message and exit 2 from here.
    let cli = cli::Cli::parse();
    if let Err(err) = tracing_setup::init(&cli.global) {
        return error::report(&err);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        // Turns are IO-bound; two workers keep the Pod and the output apart.
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return error::report(&anyhow::Error::new(err).context("cannot start tokio")),
    };
    let result = runtime.block_on(commands::dispatch(cli.command, &cli.global));
    tracing_setup::shutdown();
    match result {
        Ok(outcome) => outcome.into(),
        Err(err) => error::report(&err),
    }
}
