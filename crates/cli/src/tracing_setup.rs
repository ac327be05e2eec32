//! Diagnostics: `tracing` to stderr or `--log-file`, never to stdout, so
//! `--json` output stays clean.

use crate::cli::GlobalArgs;
use anyhow::{Context, Result};
use std::io::IsTerminal;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Installs the subscriber: `RUST_LOG` if set, else errors only (warnings
/// and more with -v): what a person needs to know the CLI says itself, once,
/// in words. A retried model request is one such thing
/// ([`crate::notices`]): unless the log on stderr shows warnings, it
/// becomes a notice the driven session prints.
pub fn init(args: &GlobalArgs) -> Result<()> {
    let default = match args.verbose {
        0 => "error",
        1 => "info",
        2 => "debug",
        _ => "trace",
    };
    let from_env = std::env::var_os("RUST_LOG").is_some();
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    // With the log on stderr at warning level, its retry line says it all.
    let log_says_it = args.log_file.is_none() && (args.verbose > 0 || from_env);
    let notices =
        (!log_says_it).then(|| crate::notices::layer().with_filter(crate::notices::only_retries()));
    let json = args.log_format == crate::cli::LogFormat::Json;
    let (writer, ansi): (BoxMakeWriter, bool) = match &args.log_file {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .with_context(|| format!("cannot open log file {}", path.display()))?;
            let file = std::sync::Arc::new(file);
            (BoxMakeWriter::new(move || Forgiving(file.clone())), false)
        }
        None => (
            BoxMakeWriter::new(|| Forgiving(std::io::stderr())),
            std::io::stderr().is_terminal(),
        ),
    };
    let log = match json {
        true => tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_writer(writer)
            .with_filter(filter)
            .boxed(),
        false => tracing_subscriber::fmt::layer()
            .with_ansi(ansi)
            .with_writer(writer)
            .with_filter(filter)
            .boxed(),
    };
    tracing_subscriber::registry()
        .with(notices)
        .with(log)
        .init();
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
