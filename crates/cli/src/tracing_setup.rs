//! Diagnostics: `tracing` to stderr or `--log-file`, never to stdout, so
//! `--json` output stays clean.

use crate::cli::GlobalArgs;
use anyhow::{Context, Result};
use std::io::IsTerminal;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

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
    // A list of the layers there are, not `Option`s: an absent layer
    // (`None`) says it is interested in every span, so the registry would
    // make and keep every span of every request though nothing records
    // it (BENCHMARKS.md section 22).
    let mut layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> = Vec::new();
    if let Some(notices) = notices {
        layers.push(notices.boxed());
    }
    layers.push(log);
    if let Some(otel) = traces()? {
        layers.push(otel.boxed());
    }
    tracing_subscriber::registry().with(layers).init();
    Ok(())
}

/// The tracer provider exporting spans, when OTLP is configured; shut
/// down (its last spans sent) when the process ends.
static TRACES: std::sync::OnceLock<opentelemetry_sdk::trace::SdkTracerProvider> =
    std::sync::OnceLock::new();

/// The OpenTelemetry layer, when the environment names an OTLP endpoint
/// (`OTEL_EXPORTER_OTLP_ENDPOINT` or `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`,
/// with `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME` and
/// `OTEL_RESOURCE_ATTRIBUTES` as the SDK reads them); `None` otherwise, so
/// nothing is exported and nothing costs.
fn traces<S>() -> Result<Option<impl tracing_subscriber::Layer<S>>>
where
    S: tracing::Subscriber + Send + Sync + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    use opentelemetry::trace::TracerProvider as _;
    let from_env =
        env_set("OTEL_EXPORTER_OTLP_ENDPOINT") || env_set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    // The config file's [telemetry] table when the environment says
    // nothing (a config error shows later, where the command reads it).
    let table = match from_env {
        true => Telemetry::default(),
        false => Telemetry::from_config(),
    };
    if otel_disabled() || !(from_env || table.endpoint.is_some()) {
        return Ok(None);
    }
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|_| std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .unwrap_or_default();
    if !protocol.is_empty() && protocol != "http/protobuf" {
        let _ = crate::output::eprint(&format!(
            "pod: OTLP protocol {protocol:?} is not supported; spans go as http/protobuf\n"
        ));
    }
    let mut builder = opentelemetry_otlp::SpanExporter::builder().with_http();
    if let Some(endpoint) = &table.endpoint {
        use opentelemetry_otlp::{WithExportConfig as _, WithHttpConfig as _};
        let base = endpoint.trim_end_matches('/');
        let traces = match base.ends_with("/v1/traces") {
            true => base.to_string(),
            false => format!("{base}/v1/traces"),
        };
        builder = builder
            .with_endpoint(traces)
            .with_headers(table.headers.clone());
    }
    let exporter = builder
        .build()
        .context("cannot build the OTLP span exporter (OTEL_EXPORTER_OTLP_* or [telemetry])")?;
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource(table.service.as_deref()))
        .build();
    let tracer = provider.tracer("pod");
    let _ = TRACES.set(provider);
    // Runs that continue a session carry on its trace (pod::trace).
    pod::trace::set_trace_context(std::sync::Arc::new(OtelContext));
    // pod's own spans and events at info and above: the runs, requests and
    // calls, not the libraries' internals.
    let ours = tracing_subscriber::filter::filter_fn(|meta| {
        meta.target().starts_with("pod") && *meta.level() <= tracing::Level::INFO
    });
    Ok(Some(
        tracing_opentelemetry::layer()
            .with_tracer(tracer)
            .with_filter(ours),
    ))
}

/// Whether environment variable `name` is set to something.
fn env_set(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.trim().is_empty())
}

/// `OTEL_SDK_DISABLED=true`: nothing is exported, whatever else is set.
fn otel_disabled() -> bool {
    std::env::var("OTEL_SDK_DISABLED").is_ok_and(|v| v.eq_ignore_ascii_case("true"))
}

/// The resource spans and metrics are exported with: the SDK's (it reads
/// `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES`), named `service`
/// (else `pod`) unless `OTEL_SERVICE_NAME` names it.
fn resource(service: Option<&str>) -> opentelemetry_sdk::Resource {
    let resource = opentelemetry_sdk::Resource::builder();
    match env_set("OTEL_SERVICE_NAME") {
        true => resource.build(),
        false => resource
            .with_service_name(service.unwrap_or("pod").to_string())
            .build(),
    }
}

/// The config file's `[telemetry]` table.
#[derive(Default)]
struct Telemetry {
    endpoint: Option<String>,
    headers: std::collections::HashMap<String, String>,
    service: Option<String>,
}

impl Telemetry {
    fn from_config() -> Self {
        let Some(path) = pod_providers::ConfigFile::default_path() else {
            return Self::default();
        };
        let Some(table) = pod_providers::ConfigFile::load(&path)
            .ok()
            .and_then(|file| file.telemetry)
        else {
            return Self::default();
        };
        let text = |key: &str| table.get(key).and_then(|v| v.as_str()).map(str::to_string);
        Self {
            endpoint: text("otlp_endpoint").filter(|e| !e.trim().is_empty()),
            headers: table
                .get("otlp_headers")
                .and_then(|v| v.as_table())
                .map(|headers| {
                    headers
                        .iter()
                        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
                        .collect()
                })
                .unwrap_or_default(),
            service: text("service_name"),
        }
    }
}

/// Span contexts as W3C `traceparent` strings, for the log.
struct OtelContext;

impl pod::trace::TraceContext for OtelContext {
    fn traceparent(&self, span: &tracing::Span) -> Option<String> {
        use opentelemetry::trace::TraceContextExt as _;
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let context = span.context();
        let span = context.span();
        let ids = span.span_context();
        ids.is_valid().then(|| {
            format!(
                "00-{}-{}-{:02x}",
                ids.trace_id(),
                ids.span_id(),
                ids.trace_flags().to_u8()
            )
        })
    }

    fn continue_from(&self, span: &tracing::Span, traceparent: &str) {
        use opentelemetry::trace::{
            SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId, TraceState,
        };
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        let mut parts = traceparent.split('-');
        let (Some("00"), Some(trace), Some(parent), Some(flags)) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return;
        };
        let (Ok(trace), Ok(parent), Ok(flags)) = (
            TraceId::from_hex(trace),
            SpanId::from_hex(parent),
            u8::from_str_radix(flags, 16),
        ) else {
            return;
        };
        let remote = SpanContext::new(
            trace,
            parent,
            TraceFlags::new(flags),
            true,
            TraceState::default(),
        );
        let _ = span.set_parent(opentelemetry::Context::new().with_remote_span_context(remote));
    }
}

/// The meter provider exporting `/metrics`' counters over OTLP, when
/// configured; shut down (its last export sent) when the process ends.
static METRICS: std::sync::OnceLock<opentelemetry_sdk::metrics::SdkMeterProvider> =
    std::sync::OnceLock::new();

/// Exports the counters of `pod serve`'s `/metrics` over OTLP too, when an
/// OTLP endpoint is configured (`OTEL_EXPORTER_OTLP_ENDPOINT` or
/// `_METRICS_ENDPOINT`; every `OTEL_METRIC_EXPORT_INTERVAL`, 60 s by
/// default). Counter names lose Prometheus' `_total` (an OTLP receiver
/// that writes Prometheus adds it back). The gauges that read the store
/// (sessions by status, questions waiting) stay on `/metrics`.
pub fn otlp_metrics(runner: &pod_http::Runner) -> Result<()> {
    use opentelemetry::metrics::MeterProvider as _;
    if otel_disabled()
        || !(env_set("OTEL_EXPORTER_OTLP_ENDPOINT")
            || env_set("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"))
    {
        return Ok(());
    }
    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .build()
        .context("cannot build the OTLP metric exporter (OTEL_EXPORTER_OTLP_* settings)")?;
    let reader = opentelemetry_sdk::metrics::PeriodicReader::builder(exporter).build();
    let provider = opentelemetry_sdk::metrics::SdkMeterProvider::builder()
        .with_reader(reader)
        .with_resource(resource(None))
        .build();
    let meter = provider.meter("pod");
    for family in runner.metrics().counters() {
        let name = family.name;
        let observed = runner.clone();
        // Registered with the meter for the provider's life; the handle
        // itself is not needed.
        let _counter = meter
            .f64_observable_counter(name.trim_end_matches("_total").to_string())
            .with_description(family.help)
            .with_callback(move |out| {
                let Some(now) = observed
                    .metrics()
                    .counters()
                    .into_iter()
                    .find(|f| f.name == name)
                else {
                    return;
                };
                for (labels, value) in now.samples {
                    let attributes: Vec<opentelemetry::KeyValue> = labels
                        .into_iter()
                        .map(|(key, value)| opentelemetry::KeyValue::new(key, value))
                        .collect();
                    out.observe(value, &attributes);
                }
            })
            .build();
    }
    let _ = METRICS.set(provider);
    Ok(())
}

/// Sends the spans still buffered (a bounded wait) before the process
/// exits.
pub fn shutdown() {
    if let Some(provider) = METRICS.get() {
        if let Err(err) = provider.shutdown() {
            tracing::debug!(%err, "OTLP metrics shutdown");
        }
    }
    if let Some(provider) = TRACES.get() {
        if let Err(err) = provider.shutdown() {
            tracing::debug!(%err, "OTLP shutdown");
        }
    }
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
