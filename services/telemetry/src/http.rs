//! The actix-web middleware that observes every HTTP request.
//!
//! [`HttpTelemetry`] opens an `http.request` span per request whose parent
//! is the W3C trace context of the incoming `traceparent`/`tracestate`
//! headers (so a run's spans join the orchestrator's trace), assigns the
//! request a [`RequestId`] (the caller's `x-request-id` when it is sane,
//! else a fresh ULID) that is echoed in the response and recorded on the
//! span, and counts the request in [`Metrics`]. It never reads the body or
//! any header other than those three.

use crate::logs::{REQUEST_ID_FIELD, SPAN_ID_FIELD, TRACE_ID_FIELD};
use crate::metrics::{Metrics, UNMATCHED_ROUTE, http_method_label};
use actix_web::body::MessageBody;
use actix_web::dev::{Payload, Service, ServiceRequest, ServiceResponse, Transform, forward_ready};
use actix_web::http::header::{HeaderMap, HeaderName, HeaderValue};
use actix_web::{FromRequest, HttpMessage, HttpRequest};
use futures_util::future::{LocalBoxFuture, Ready, ready};
use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::{SpanContext, TraceContextExt};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::convert::Infallible;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// Name of the request id header, read from requests and set on responses.
pub const REQUEST_ID_HEADER: &str = "x-request-id";

/// [`REQUEST_ID_HEADER`] as a name: looked up by `&str`, a header that is
/// not standard makes an owned name (an allocation) on every request.
static REQUEST_ID_NAME: HeaderName = HeaderName::from_static(REQUEST_ID_HEADER);

/// Name of the span opened per request.
pub const SPAN_NAME: &str = "http.request";

/// Field names of the `http.request` span (OpenTelemetry semantic
/// conventions where one exists).
pub mod field {
    pub const METHOD: &str = "http.request.method";
    /// The matched route pattern (`/runs/{run}/mcp`), never the raw path.
    pub const ROUTE: &str = "http.route";
    pub const STATUS: &str = "http.response.status_code";
    /// Time to the response head in milliseconds (float).
    pub const LATENCY_MS: &str = "latency_ms";
    pub const REQUEST_ID: &str = super::REQUEST_ID_FIELD;
    pub const TRACE_ID: &str = super::TRACE_ID_FIELD;
    pub const SPAN_ID: &str = super::SPAN_ID_FIELD;
}

/// Longest request id taken from a caller.
const MAX_REQUEST_ID_LEN: usize = 64;

/// The id of one HTTP request, in the request's extensions (extract it in a
/// handler as a parameter) and in the `x-request-id` response header.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestId(Arc<str>);

impl RequestId {
    /// A fresh ULID.
    pub fn generate() -> Self {
        Self(ulid::Ulid::new().to_string().into())
    }

    /// The caller's id if it is 1-64 characters of `[A-Za-z0-9_-]` and does
    /// not look like a run token. Dots are refused, which keeps JWTs out,
    /// and anything refused is replaced, never echoed.
    pub fn from_caller(value: &str) -> Option<Self> {
        let sane = !value.is_empty()
            && value.len() <= MAX_REQUEST_ID_LEN
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !value.starts_with("cbr_");
        sane.then(|| Self(value.into()))
    }

    fn from_headers(headers: &HeaderMap) -> Self {
        headers
            .get(&REQUEST_ID_NAME)
            .and_then(|v| v.to_str().ok())
            .and_then(Self::from_caller)
            .unwrap_or_else(Self::generate)
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromRequest for RequestId {
    type Error = Infallible;
    type Future = Ready<Result<Self, Infallible>>;

    /// Outside the middleware (no id assigned) a fresh one is generated.
    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(Ok(req
            .extensions()
            .get::<RequestId>()
            .cloned()
            .unwrap_or_else(RequestId::generate)))
    }
}

/// The middleware; wrap an `App` (or a scope) with it:
/// `App::new().wrap(HttpTelemetry::new(metrics.clone()))`.
#[derive(Debug, Clone)]
pub struct HttpTelemetry {
    metrics: Option<Metrics>,
    quiet_routes: Arc<[String]>,
}

impl HttpTelemetry {
    /// Spans, request ids and HTTP metrics into `metrics`.
    pub fn new(metrics: Metrics) -> Self {
        Self {
            metrics: Some(metrics),
            quiet_routes: Arc::from([]),
        }
    }

    /// Spans and request ids only.
    pub fn without_metrics() -> Self {
        Self {
            metrics: None,
            quiet_routes: Arc::from([]),
        }
    }

    /// No span for these route patterns (probes and scrapes such as
    /// `/healthz`, `/readyz`, `/metrics`, which would otherwise fill traces
    /// with noise); they still get a request id and are counted.
    pub fn without_spans_for<I, R>(mut self, routes: I) -> Self
    where
        I: IntoIterator<Item = R>,
        R: Into<String>,
    {
        self.quiet_routes = routes.into_iter().map(Into::into).collect();
        self
    }
}

impl<S, B> Transform<S, ServiceRequest> for HttpTelemetry
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<B>;
    type Error = actix_web::Error;
    type Transform = HttpTelemetryService<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(HttpTelemetryService {
            service: Rc::new(service),
            metrics: self.metrics.clone(),
            quiet_routes: self.quiet_routes.clone(),
        }))
    }
}

/// The service [`HttpTelemetry`] wraps around the application.
pub struct HttpTelemetryService<S> {
    service: Rc<S>,
    metrics: Option<Metrics>,
    quiet_routes: Arc<[String]>,
}

impl<S> fmt::Debug for HttpTelemetryService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpTelemetryService")
            .field("metrics", &self.metrics.is_some())
            .finish_non_exhaustive()
    }
}

struct HeaderExtractor<'a>(&'a HeaderMap);

impl Extractor for HeaderExtractor<'_> {
    // Found by walking the names: `HeaderMap::get` with a `&str` makes an
    // owned name first (`traceparent` and `tracestate`, two allocations on
    // every request).
    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(name, _)| name.as_str().eq_ignore_ascii_case(key))
            .and_then(|(_, value)| value.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

impl<S, B> Service<ServiceRequest> for HttpTelemetryService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<B>;
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self::Response, Self::Error>>;

    forward_ready!(service);

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let started = Instant::now();
        let method = req.method().clone();
        // The pattern comes from the application's route table, so the set
        // of values is as small as the set of routes.
        let route: Rc<str> = req
            .match_pattern()
            .map_or_else(|| UNMATCHED_ROUTE.into(), Into::into);
        let request_id = RequestId::from_headers(req.headers());
        let parent = TraceContextPropagator::new().extract(&HeaderExtractor(req.headers()));

        let quiet = self.quiet_routes.iter().any(|r| **r == *route);
        let span = if quiet {
            tracing::Span::none()
        } else {
            tracing::info_span!(
                "http.request",
                "otel.kind" = "server",
                "http.request.method" = http_method_label(&method),
                "http.route" = &*route,
                "http.response.status_code" = tracing::field::Empty,
                latency_ms = tracing::field::Empty,
                request_id = request_id.as_str(),
                trace_id = tracing::field::Empty,
                span_id = tracing::field::Empty,
                "otel.status_code" = tracing::field::Empty,
            )
        };
        let remote = parent.span().span_context().clone();
        // Without an OpenTelemetry layer there is nothing to parent; the
        // caller's trace id is still recorded below for log correlation.
        let _ = span.set_parent(parent);
        record_ids(&span, &remote);

        req.extensions_mut().insert(request_id.clone());
        let future = span.in_scope(|| self.service.call(req));
        let metrics = self.metrics.clone();

        Box::pin(async move {
            let result = future.instrument(span.clone()).await;
            // Handlers' errors reach this point as responses already; an
            // `Err` here comes from an inner middleware, and actix renders
            // it later (without the id header: the request cannot be
            // borrowed back to build the response here).
            let status = match &result {
                Ok(response) => response.status(),
                Err(error) => error.as_response_error().status_code(),
            };
            let latency = started.elapsed();
            if crate::init::span_fields_read() {
                span.record(field::STATUS, i64::from(status.as_u16()));
                span.record(field::LATENCY_MS, latency.as_secs_f64() * 1000.0);
                if status.is_server_error() {
                    span.record("otel.status_code", "error");
                }
            }
            if let Some(metrics) = &metrics {
                metrics.http_request(&route, &method, status, latency);
            }
            let mut response = result?;
            if let Ok(value) = HeaderValue::from_str(request_id.as_str()) {
                response
                    .headers_mut()
                    .insert(REQUEST_ID_NAME.clone(), value);
            }
            Ok(response)
        })
    }
}

/// Records the span's own trace and span ids when an OpenTelemetry layer
/// is installed, else the caller's trace id (if any).
fn record_ids(span: &tracing::Span, remote: &SpanContext) {
    let context = span.context();
    let own = context.span().span_context().clone();
    if own.is_valid() {
        span.record(field::TRACE_ID, own.trace_id().to_string());
        span.record(field::SPAN_ID, own.span_id().to_string());
    } else if remote.is_valid() {
        span.record(field::TRACE_ID, remote.trace_id().to_string());
    }
}
