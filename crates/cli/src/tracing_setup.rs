//! Diagnostics: `tracing` to stderr or `--log-file`, never to stdout, so
//! `--json` output stays clean.

use crate::cli::GlobalArgs;
use anyhow::{Context, Result};
use std::io::IsTerminal;
use tracing_subscriber::EnvFilter;

/// Installs the subscriber: `RUST_LOG` if set, else errors only (warnings
/// and more with -v): what a person needs to know (a retry, a server that
/// did not start) the CLI says itself, once, in words.
pub fn init(args: &GlobalArgs) -> Result<()> {
    let default = match args.verbose {
        0 => "error",
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
            let file = std::sync::Arc::new(file);
            builder
                .with_ansi(false)
                .with_writer(move || Forgiving(file.clone()))
                .init();
        }
        None => builder
            .with_ansi(std::io::stderr().is_terminal())
            .with_writer(|| Forgiving(std::io::stderr()))
            .init(),
    }
    Ok(())
}

/// A writer whose failures are dropped: diagnostics on a closed stderr
/// (`pod -vvv run … 2>&1 | head`) are lost, not a reason to abort. Without
/// it tracing-subscriber reports the failed write with `eprintln!`, which
/// panics on the same closed stderr.
struct Forgiving<W>(W);

impl<W: std::io::Write> std::io::Write for Forgiving<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = self.0.write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = self.0.flush();
        Ok(())
    }
}
