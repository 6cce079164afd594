//! Installing the subscriber and owning the trace pipeline's lifetime.

use crate::buffered::BufferedLog;
use crate::config::{LogFormat, TelemetryConfig};
use crate::error::TelemetryError;
use crate::logs::{CorrelationLayer, JsonLines, NoSpanFields};
use crate::otlp;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracerProvider, SpanExporter};
use std::fmt;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tracing::{Dispatch, Metadata, Subscriber};
use tracing_subscriber::filter::{FilterExt, FilterFn, LevelFilter, Targets, filter_fn};
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::fmt::writer::BoxMakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// Instrumentation scope name of every span this process exports.
const TRACER_NAME: &str = "corkboard";

/// Installs the global subscriber from `config`: logs to stderr, and the
/// OpenTelemetry pipeline (OTLP/HTTP, W3C TraceContext propagator) when
/// `config.otlp_endpoint` is set. Keep the guard and call
/// [`TelemetryGuard::shutdown`] before the process exits.
pub fn init(config: TelemetryConfig) -> Result<TelemetryGuard, TelemetryError> {
    TelemetryBuilder::new(config).init()
}

/// [`init`] with `exporter` in place of OTLP (e.g. the SDK's in-memory
/// exporter in tests). Spans are handed to it synchronously as they end.
pub fn init_with_exporter<E: SpanExporter + 'static>(
    config: TelemetryConfig,
    exporter: E,
) -> Result<TelemetryGuard, TelemetryError> {
    TelemetryBuilder::new(config)
        .with_span_exporter(exporter)
        .init()
}

/// Builds the subscriber; [`Self::init`] installs it process-wide,
/// [`Self::build`] returns it for scoped use (tests, embedding).
pub struct TelemetryBuilder {
    config: TelemetryConfig,
    /// Builds a provider around a caller-supplied exporter.
    exporter: Option<Box<dyn FnOnce(Resource) -> SdkTracerProvider + Send>>,
    writer: Option<BoxMakeWriter>,
}

impl fmt::Debug for TelemetryBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryBuilder")
            .field("config", &self.config)
            .field("custom_exporter", &self.exporter.is_some())
            .field("custom_writer", &self.writer.is_some())
            .finish()
    }
}

impl TelemetryBuilder {
    pub fn new(config: TelemetryConfig) -> Self {
        Self {
            config,
            exporter: None,
            writer: None,
        }
    }

    /// Exports spans to `exporter` (synchronously, as each span ends)
    /// instead of OTLP, whatever `otlp_endpoint` says.
    pub fn with_span_exporter<E: SpanExporter + 'static>(mut self, exporter: E) -> Self {
        self.exporter = Some(Box::new(move |resource| {
            SdkTracerProvider::builder()
                .with_resource(resource)
                .with_simple_exporter(exporter)
                .build()
        }));
        self
    }

    /// Writes log lines to `writer` instead of stderr.
    pub fn with_log_writer<W>(mut self, writer: W) -> Self
    where
        W: for<'a> MakeWriter<'a> + Send + Sync + 'static,
    {
        self.writer = Some(BoxMakeWriter::new(writer));
        self
    }

    /// Whether the subscriber reads the request spans' own fields: an
    /// exporter does, and text logs print them; JSON lines carry only the
    /// correlation ids.
    fn reads_span_fields(&self) -> bool {
        self.exporter.is_some()
            || self.config.otlp_endpoint.is_some()
            || !writes_json(self.config.log_format)
    }

    /// The subscriber as a [`Dispatch`] (use it with
    /// `tracing::dispatcher::set_default`) and the guard of its pipeline.
    pub fn build(self) -> Result<(Dispatch, TelemetryGuard), TelemetryError> {
        let config = self.config;
        let log_filter = LogFilter::parse(&config.log_filter)?;

        let resource = Resource::builder()
            .with_service_name(config.service_name.clone())
            .build();
        let provider = match (self.exporter, &config.otlp_endpoint) {
            (Some(custom), _) => Some(custom(resource)),
            (None, Some(endpoint)) => {
                let exporter = otlp::span_exporter(endpoint, config.export_timeout)?;
                Some(
                    SdkTracerProvider::builder()
                        .with_resource(resource)
                        .with_batch_exporter(exporter)
                        .build(),
                )
            }
            (None, None) => None,
        };

        let (writer, ansi, buffered) = match self.writer {
            Some(writer) => (writer, false, None),
            None => {
                let buffered = BufferedLog::stderr();
                (
                    BoxMakeWriter::new(buffered.clone()),
                    std::io::stderr().is_terminal(),
                    Some(buffered),
                )
            }
        };
        let log = LogLayer {
            json: writes_json(config.log_format),
            ansi,
            writer,
        };

        let dispatch = match (log_filter, &provider) {
            // Nothing to filter layer by layer: one filter for the whole
            // subscriber, the log filter widened to every span (whose
            // correlation ids the lines of any level carry), decided once
            // per callsite. Per-layer filters cost a look-up of the span
            // in the registry for each filtered layer at every entry, exit
            // and close of a span, about 36 a request
            // (services/bench/FINDINGS.md).
            (LogFilter::Targets(targets), None) => {
                let spans_or_logged = filter_fn(move |metadata| {
                    metadata.is_span() || targets.would_enable(metadata.target(), metadata.level())
                });
                Dispatch::new(
                    Registry::default()
                        .with(spans_or_logged)
                        .with(CorrelationLayer)
                        .with(log.layer()),
                )
            }
            (log_filter, provider) => {
                // The correlation layer reads spans only, and says so with
                // a filter of its own: a layer with none is interested in
                // every callsite, and then every event the log filter
                // leaves out was still dispatched, each time (actix-http's
                // `trace!` on every poll of a connection). With every layer
                // filtered, such a callsite is decided once.
                let correlation = CorrelationLayer.with_filter(every_span());
                let mut layers: Vec<Box<dyn Layer<Registry> + Send + Sync>> =
                    vec![correlation.boxed(), log_filter.wrap(log.layer())];
                if let Some(provider) = provider {
                    // Exported spans do not follow the log filter: turning
                    // logs down to `warn` must not silence traces.
                    layers.push(
                        tracing_opentelemetry::layer()
                            .with_tracer(provider.tracer(TRACER_NAME))
                            .with_filter(LevelFilter::INFO)
                            .boxed(),
                    );
                }
                Dispatch::new(Registry::default().with(layers))
            }
        };
        Ok((
            dispatch,
            TelemetryGuard {
                provider,
                timeout: config.shutdown_timeout,
                log: buffered,
            },
        ))
    }

    /// [`Self::build`], then installs the subscriber process-wide (with the
    /// `log` bridge), the W3C TraceContext propagator and, when exporting,
    /// the global tracer provider.
    pub fn init(self) -> Result<TelemetryGuard, TelemetryError> {
        let span_fields_read = self.reads_span_fields();
        let (dispatch, guard) = self.build()?;
        dispatch
            .try_init()
            .map_err(|_| TelemetryError::AlreadyInitialized)?;
        opentelemetry::global::set_text_map_propagator(TraceContextPropagator::new());
        // Only for the process-wide subscriber: a scoped one (tests) may sit
        // beside others in the same process that do read the fields.
        SPAN_FIELDS_READ.store(span_fields_read, Ordering::Relaxed);
        if let Some(provider) = &guard.provider {
            opentelemetry::global::set_tracer_provider(provider.clone());
        }
        Ok(guard)
    }
}

/// The log layer's filter. A filter of targets and levels only (the
/// default `info`, `corkboard=debug,info`, ...) is a [`Targets`]: decided
/// once per callsite, with nothing to do as spans open, are entered, left
/// and closed. An [`EnvFilter`] does work at each of those (a lock and a
/// look-up per span, a per-thread scope stack), about a dozen times per
/// request, which only its span and field directives (`[span{field=x}]`)
/// need; so it is kept for filters that use them.
enum LogFilter {
    // Both boxed: a filter is built once, and the enum is passed by value.
    Targets(Box<Targets>),
    Env(Box<EnvFilter>),
}

impl LogFilter {
    fn parse(filter: &str) -> Result<Self, TelemetryError> {
        // EnvFilter's syntax is the one documented and validated; Targets
        // accepts a subset of it with the same meaning, and would read a
        // span directive's brackets as part of a target name.
        let env = EnvFilter::try_new(filter).map_err(|e| TelemetryError::InvalidLogFilter {
            filter: filter.to_owned(),
            reason: e.to_string(),
        })?;
        // Nor is a space part of a directive Targets should read (it would
        // keep it in a target's name; EnvFilter refuses one today).
        if filter.contains(|c: char| c == '[' || c.is_whitespace()) {
            return Ok(Self::Env(Box::new(env)));
        }
        Ok(match filter.parse::<Targets>() {
            Ok(targets) => Self::Targets(Box::new(targets)),
            Err(_) => Self::Env(Box::new(env)),
        })
    }

    /// `layer` behind this filter for events, and every span: a line
    /// carries the correlation ids of the request it is logged in even
    /// when the request's spans are below the filter's level.
    fn wrap(
        self,
        layer: Box<dyn Layer<Registry> + Send + Sync>,
    ) -> Box<dyn Layer<Registry> + Send + Sync> {
        match self {
            Self::Targets(targets) => layer.with_filter(targets.or(every_span())).boxed(),
            Self::Env(env) => layer.with_filter(env.or(every_span())).boxed(),
        }
    }
}

/// A per-layer filter that takes every span and no event.
fn every_span() -> FilterFn<fn(&Metadata<'_>) -> bool> {
    filter_fn(|metadata| metadata.is_span())
}

/// The log layer's settings, built into a layer for whichever subscriber
/// [`TelemetryBuilder::build`] assembles.
struct LogLayer {
    json: bool,
    ansi: bool,
    writer: BoxMakeWriter,
}

impl LogLayer {
    fn layer<S>(self) -> Box<dyn Layer<S> + Send + Sync>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        if self.json {
            tracing_subscriber::fmt::layer()
                .event_format(JsonLines)
                .fmt_fields(NoSpanFields)
                .with_writer(self.writer)
                .boxed()
        } else {
            tracing_subscriber::fmt::layer()
                .with_ansi(self.ansi)
                .with_writer(self.writer)
                .boxed()
        }
    }
}

/// Whether log lines are JSON (else text).
fn writes_json(format: LogFormat) -> bool {
    match format {
        LogFormat::Json => true,
        LogFormat::Text => false,
        LogFormat::Auto => !std::io::stderr().is_terminal(),
    }
}

/// Whether anything reads the request spans' own fields (tenant, method,
/// outcome, status, latency, ...). True unless the process-wide subscriber
/// says otherwise ([`TelemetryBuilder::init`]): its JSON log lines carry
/// only the correlation ids of the spans they are in, so without an
/// exporter and without text logs nothing reads the rest. Recording them
/// anyway went through every layer once per field, about a dozen times per
/// request (services/bench/FINDINGS.md).
static SPAN_FIELDS_READ: AtomicBool = AtomicBool::new(true);

/// See [`SPAN_FIELDS_READ`]. The recorders of the request spans' fields
/// ([`crate::mcp`], [`crate::http`]) skip them when this is false; the
/// correlation ids are recorded either way.
pub(crate) fn span_fields_read() -> bool {
    SPAN_FIELDS_READ.load(Ordering::Relaxed)
}

/// Owns the trace pipeline. Call [`Self::shutdown`] (async) or
/// [`Self::shutdown_blocking`] (no runtime) before exit so buffered spans
/// are flushed; dropping the guard does the blocking variant.
#[must_use = "dropping the guard shuts the trace pipeline down"]
pub struct TelemetryGuard {
    provider: Option<SdkTracerProvider>,
    timeout: Duration,
    /// The buffered stderr log, flushed (and its thread stopped) at the end.
    log: Option<BufferedLog>,
}

impl fmt::Debug for TelemetryGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TelemetryGuard")
            .field("exporting", &self.provider.is_some())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl TelemetryGuard {
    /// Whether spans leave the process at all.
    pub fn is_exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Exports what is buffered now, without stopping the pipeline.
    pub async fn force_flush(&self) -> Result<(), TelemetryError> {
        let Some(provider) = self.provider.clone() else {
            return Ok(());
        };
        off_thread(self.timeout, move || provider.force_flush()).await
    }

    /// Flushes and stops the pipeline, within the configured timeout.
    ///
    /// The work runs on Tokio's blocking pool: the SDK waits on its export
    /// thread with a blocking receive, which must never happen on the actix
    /// (current-thread) runtime's only thread. The outer timeout bounds the
    /// wait even if the SDK overran its own.
    pub async fn shutdown(mut self) -> Result<(), TelemetryError> {
        let result = match self.provider.take() {
            Some(provider) => {
                let timeout = self.timeout;
                off_thread(timeout, move || provider.shutdown_with_timeout(timeout)).await
            }
            None => Ok(()),
        };
        self.close_log();
        result
    }

    fn close_log(&mut self) {
        if let Some(log) = self.log.take() {
            log.close();
        }
    }

    /// [`Self::shutdown`] for callers without an async runtime.
    pub fn shutdown_blocking(mut self) -> Result<(), TelemetryError> {
        self.close_log();
        match self.provider.take() {
            Some(provider) => provider
                .shutdown_with_timeout(self.timeout)
                .map_err(|e| TelemetryError::Shutdown(e.to_string())),
            None => Ok(()),
        }
    }
}

impl Drop for TelemetryGuard {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take() {
            // Bounded by the timeout; the export itself runs on the SDK's
            // thread, so this cannot deadlock even on an async thread.
            let _ = provider.shutdown_with_timeout(self.timeout);
        }
        self.close_log();
    }
}

async fn off_thread<F>(timeout: Duration, work: F) -> Result<(), TelemetryError>
where
    F: FnOnce() -> opentelemetry_sdk::error::OTelSdkResult + Send + 'static,
{
    let grace = timeout + Duration::from_secs(1);
    match tokio::time::timeout(grace, tokio::task::spawn_blocking(work)).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(e))) => Err(TelemetryError::Shutdown(e.to_string())),
        Ok(Err(join)) => Err(TelemetryError::Shutdown(format!(
            "flush task failed: {join}"
        ))),
        Err(_) => Err(TelemetryError::Shutdown(format!(
            "gave up after {}s",
            grace.as_secs()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_sdk::trace::InMemorySpanExporter;

    fn reads_span_fields(format: LogFormat, exporter: bool) -> bool {
        let mut config = TelemetryConfig::new("span-fields");
        config.log_format = format;
        let mut builder = TelemetryBuilder::new(config);
        if exporter {
            builder = builder.with_span_exporter(InMemorySpanExporter::default());
        }
        builder.reads_span_fields()
    }

    /// The lines a log layer behind `filter` writes for events at several
    /// targets and levels, inside and outside a span.
    fn lines_logged(filter: LogFilter) -> String {
        let out = corkboard_testkit::LogCapture::default();
        let layer = tracing_subscriber::fmt::layer()
            .without_time()
            .with_ansi(false)
            .with_writer(out.clone())
            .boxed();
        let dispatch = Dispatch::new(Registry::default().with(filter.wrap(layer)));
        tracing::dispatcher::with_default(&dispatch, || {
            tracing::debug!(target: "corkboard_gateway", "gateway debug");
            tracing::info!(target: "corkboard_gateway", "gateway info");
            tracing::warn!(target: "corkboard_gateway", "gateway warn");
            tracing::trace!(target: "corkboard_gateway::bridge", "bridge trace");
            tracing::debug!(target: "corkboard_gateway::bridge", "bridge debug");
            let span = tracing::info_span!(target: "corkboard_mcp", "mcp.request", tenant = "acme");
            let _entered = span.enter();
            tracing::info!(target: "actix_server", "actix info");
            tracing::warn!(target: "actix_server", "actix warn");
            tracing::debug!(target: "h2", "h2 debug");
            tracing::error!(target: "h2", "h2 error");
        });
        out.text()
    }

    #[test]
    fn a_filter_of_targets_and_levels_logs_what_the_env_filter_logs() {
        // With and without a default level, levels in either case.
        for filter in [
            "info",
            "warn",
            "trace",
            "off",
            "corkboard_gateway=debug,warn",
            "corkboard_gateway::bridge=trace,corkboard_gateway=info,error",
            "actix_server=off,debug",
            "h2=error,actix_server=warn,info",
            "corkboard_gateway=DEBUG",
        ] {
            let chosen = LogFilter::parse(filter).unwrap();
            assert!(
                matches!(chosen, LogFilter::Targets(_)),
                "{filter}: targets and levels only"
            );
            let env = LogFilter::Env(Box::new(EnvFilter::try_new(filter).unwrap()));
            let logged = lines_logged(chosen);
            assert_eq!(logged, lines_logged(env), "{filter}");
            if filter != "off" {
                assert!(!logged.is_empty(), "{filter}: something passes");
            }
        }
    }

    #[test]
    fn span_and_field_directives_keep_the_env_filter() {
        for filter in [
            "info,[mcp.request]=debug",
            "corkboard_mcp[mcp.request{tenant=acme}]=trace",
        ] {
            assert!(
                matches!(LogFilter::parse(filter).unwrap(), LogFilter::Env(_)),
                "{filter}"
            );
        }
        let logged = lines_logged(LogFilter::parse("warn,[mcp.request]=info").unwrap());
        assert!(logged.contains("actix info"), "inside the span: {logged}");
        assert!(!logged.contains("gateway info"), "outside it: {logged}");
        for invalid in ["corkboard=loud", "warn, corkboard_gateway=debug"] {
            assert!(
                matches!(
                    LogFilter::parse(invalid),
                    Err(TelemetryError::InvalidLogFilter { .. })
                ),
                "{invalid}"
            );
        }
    }

    /// Whether an event is enabled under the subscriber `build` makes with
    /// the log filter `filter` (JSON lines, with an exporter or not): an
    /// actix-http `trace` event when `actix_trace`, else a gateway `info`
    /// event.
    fn event_enabled(filter: &str, exporter: bool, actix_trace: bool) -> bool {
        let mut config = TelemetryConfig::new("interest");
        config.log_filter = filter.to_owned();
        config.log_format = LogFormat::Json;
        let mut builder = TelemetryBuilder::new(config).with_log_writer(std::io::sink);
        if exporter {
            builder = builder.with_span_exporter(InMemorySpanExporter::default());
        }
        let (dispatch, _guard) = builder.build().unwrap();
        tracing::dispatcher::with_default(&dispatch, || {
            if actix_trace {
                tracing::enabled!(target: "actix_http::h1::dispatcher", tracing::Level::TRACE)
            } else {
                tracing::enabled!(target: "corkboard_gateway", tracing::Level::INFO)
            }
        })
    }

    #[test]
    fn an_event_no_layer_writes_is_not_enabled() {
        // The correlation layer wants spans only: an event the log filter
        // leaves out (actix-http's `trace!` on every poll of a connection)
        // is decided once per callsite, not dispatched at each.
        for exporter in [false, true] {
            assert!(!event_enabled("info", exporter, true), "{exporter}");
            assert!(event_enabled("info", exporter, false), "{exporter}");
            assert!(event_enabled("trace", exporter, true), "{exporter}");
        }
    }

    /// The lines `build` writes under the log filter `filter` (JSON, with
    /// an exporter or not) for a `debug` and a `warn` event inside an
    /// `info` span that carries a request id.
    fn lines_in_a_request(filter: &str, exporter: bool) -> Vec<serde_json::Value> {
        let out = corkboard_testkit::LogCapture::default();
        let mut config = TelemetryConfig::new("correlation");
        config.log_filter = filter.to_owned();
        config.log_format = LogFormat::Json;
        let mut builder = TelemetryBuilder::new(config).with_log_writer(out.clone());
        if exporter {
            builder = builder.with_span_exporter(InMemorySpanExporter::default());
        }
        let (dispatch, _guard) = builder.build().unwrap();
        tracing::dispatcher::with_default(&dispatch, || {
            let span = tracing::info_span!(
                target: "corkboard_telemetry::http",
                "http.request",
                request_id = "req-1"
            );
            let _entered = span.enter();
            tracing::debug!(target: "corkboard_gateway", "debug inside");
            tracing::warn!(target: "corkboard_gateway", "warn inside");
        });
        out.text()
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }

    #[test]
    fn lines_carry_the_request_id_whatever_the_filter_and_the_layers() {
        // Without an exporter one filter serves the whole subscriber, with
        // one each layer has its own: either way the span of a request is
        // kept for its lines even where the log filter is above its level.
        for exporter in [false, true] {
            for (filter, debug_logged) in [("debug", true), ("info", false), ("warn", false)] {
                let lines = lines_in_a_request(filter, exporter);
                let messages: Vec<&str> = lines
                    .iter()
                    .map(|line| line["message"].as_str().unwrap())
                    .collect();
                let expected: &[&str] = if debug_logged {
                    &["debug inside", "warn inside"]
                } else {
                    &["warn inside"]
                };
                assert_eq!(messages, expected, "{filter}, exporter {exporter}");
                for line in &lines {
                    assert_eq!(line["request_id"], "req-1", "{filter}, exporter {exporter}");
                    assert_eq!(
                        line["span"], "http.request",
                        "{filter}, exporter {exporter}"
                    );
                }
            }
        }
        assert!(lines_in_a_request("off", false).is_empty());
    }

    #[test]
    fn span_fields_are_recorded_only_where_something_reads_them() {
        assert!(
            !reads_span_fields(LogFormat::Json, false),
            "JSON lines carry only the correlation ids"
        );
        assert!(
            reads_span_fields(LogFormat::Json, true),
            "an exporter reads them"
        );
        assert!(
            reads_span_fields(LogFormat::Text, false),
            "text lines print them"
        );
    }
}
