//! The crate's one error type.

/// Why telemetry could not be set up or shut down cleanly.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The log filter directive does not parse.
    #[error("invalid log filter {filter:?}: {reason}")]
    InvalidLogFilter { filter: String, reason: String },
    /// The OTLP endpoint is not an `http://` URL this crate can export to.
    #[error("invalid OTLP endpoint {endpoint:?}: {reason}")]
    InvalidEndpoint { endpoint: String, reason: String },
    /// The OTLP exporter could not be built.
    #[error("cannot build the OTLP exporter: {0}")]
    Exporter(String),
    /// A global subscriber is already installed in this process.
    #[error("a global tracing subscriber is already installed")]
    AlreadyInitialized,
    /// Flushing or shutting down the trace pipeline failed or timed out;
    /// spans still buffered may be lost.
    #[error("trace pipeline shutdown: {0}")]
    Shutdown(String),
    /// A metric could not be registered (usually a duplicate name).
    #[error("metric registration: {0}")]
    Metrics(#[from] prometheus::Error),
}
