//! Diagnostics: `tracing` to stderr or `--log-file`, never to stdout, so
//! `--json` output stays clean.

use crate::cli::GlobalArgs;
use anyhow::{Context, Result};
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// Installs the subscriber: `RUST_LOG` if set, else warnings (more with -v).
pub fn init(args: &GlobalArgs) -> Result<()> {
    let default = match args.verbose {
        0 => "warn",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    match &args.log_file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?;
            builder
                .with_ansi(false)
                .with_writer(std::sync::Mutex::new(file))
                .init();
        }
        None => builder
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(std::io::stderr)
            .init(),
    }
    Ok(())
}
