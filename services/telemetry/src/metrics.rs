//! Prometheus metrics of one process, served at `/metrics`.
//!
//! [`Metrics`] wraps a `prometheus::Registry` with typed recording methods,
//! so that label values can only come from fixed vocabularies: HTTP methods
//! and MCP methods from known lists, tools from the vocabulary the binary
//! set ([`crate::mcp::set_known_tools`]),
//! outcomes from [`OUTCOMES`], routes from the application's route patterns,
//! store operations from `&'static str` names. Anything else is `other`.
//! Run ids never become labels; tenants only with
//! [`MetricsConfig::tenant_labels`], and then at most
//! [`MetricsConfig::max_tenants`] distinct ones.

use crate::error::TelemetryError;
use actix_web::http::{Method, StatusCode};
use actix_web::{HttpResponse, web};
use prometheus::core::{Collector, Desc, MetricVec, MetricVecBuilder};
use prometheus::proto::{self, MetricFamily, MetricType};
use prometheus::{
    Encoder, HistogramOpts, HistogramVec, IntCounter, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

/// Outcome labels; anything else is recorded as `other`.
pub const OUTCOMES: &[&str] = &[
    "ok",
    "error",
    "tool_error",
    "denied",
    "refused",
    "unavailable",
    "rate_limited",
    "accepted",
    "cancelled",
];

/// HTTP methods recorded by name; anything else is `other`.
pub const HTTP_METHODS: &[&str] = &["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// Label of requests that matched no route (never the raw path).
pub const UNMATCHED_ROUTE: &str = "unmatched";

/// Seconds; from sub-millisecond cache hits to multi-second store timeouts.
const LATENCY_BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// Label of tenants past [`MetricsConfig::max_tenants`].
const OTHER_TENANT: &str = "other";

/// Most tenants named in `corkboard_audit_records_lost_total`; losses of
/// further tenants are counted under `tenant="other"`. Only tenants that
/// lost records get a series at all, so this bounds the worst case (a
/// store outage that loses every tenant's records), not the normal one.
pub const AUDIT_LOSS_TENANTS_MAX: usize = 100;

/// Why audit records were lost; anything else is `other`.
pub const AUDIT_LOSS_REASONS: &[&str] = &["queue_full", "writer_stopped", "store_failed"];

/// Listener labels of the connection metrics; anything else is `other`.
pub const LISTENERS: &[&str] = &["server", "runner", "gateway_shared", "gateway_run"];

/// Why connections were refused (`conn::Refused`); anything else is `other`.
pub const REFUSAL_REASONS: &[&str] = &["cap", "source"];

fn listener_label(listener: &str) -> &'static str {
    LISTENERS
        .iter()
        .find(|l| **l == listener)
        .copied()
        .unwrap_or("other")
}

/// `outcome` if it is one of [`OUTCOMES`], else `other`.
pub fn outcome_label(outcome: &str) -> &'static str {
    OUTCOMES
        .iter()
        .find(|o| **o == outcome)
        .copied()
        .unwrap_or("other")
}

/// The method's name if it is a standard one, else `other`.
pub fn http_method_label(method: &Method) -> &'static str {
    HTTP_METHODS
        .iter()
        .find(|m| **m == method.as_str())
        .copied()
        .unwrap_or("other")
}

/// What a process's metrics may be labelled with.
#[derive(Debug, Clone)]
pub struct MetricsConfig {
    /// Adds a `tenant` label to MCP request, tool call and rate-limit
    /// counters. Off by default: tenants are unbounded in number.
    pub tenant_labels: bool,
    /// With `tenant_labels`, tenants beyond this many distinct ones are
    /// recorded as `other`.
    pub max_tenants: usize,
}

impl Default for MetricsConfig {
    fn default() -> Self {
        Self {
            tenant_labels: false,
            max_tenants: 1000,
        }
    }
}

/// Counters a token registry keeps itself (e.g. `RegistryStats` of the
/// Redis registry), read at scrape time through [`Metrics::observe_registry`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegistryCounters {
    pub cache_hits: u64,
    pub cache_misses: u64,
    pub redis_errors: u64,
}

/// The metrics of one process. Cheap to clone (an `Arc`); create one per
/// process (or per test) and share it.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    tenant_labels: bool,
    max_tenants: usize,
    tenants: Mutex<HashSet<String>>,
    http_requests: PerThread<IntCounterVec>,
    http_duration: PerThread<HistogramVec>,
    mcp_requests: PerThread<IntCounterVec>,
    mcp_duration: PerThread<HistogramVec>,
    tool_calls: PerThread<IntCounterVec>,
    tool_duration: PerThread<HistogramVec>,
    store_operations: PerThread<IntCounterVec>,
    store_duration: PerThread<HistogramVec>,
    revocations: IntCounter,
    rate_limited: IntCounterVec,
    active_runs: IntGauge,
    legacy_sessions: IntCounterVec,
    registry_counters: Arc<RegistryCollector>,
    audit_lost: IntCounterVec,
    audit_loss_tenants: Mutex<HashSet<String>>,
    connections_open: prometheus::IntGaugeVec,
    connections_refused: IntCounterVec,
    connections_shed: IntCounterVec,
}

/// A vector whose series are looked up by label values. A trait, not a
/// bound on `MetricVec<P>`, so a field can be typed `PerThread<HistogramVec>`:
/// prometheus does not export the histogram vector's builder type.
trait Vector {
    type Series: Send;
    fn series(&self, values: &[&str]) -> Self::Series;
}

impl<P: MetricVecBuilder> Vector for MetricVec<P> {
    type Series = P::M;

    fn series(&self, values: &[&str]) -> P::M {
        self.with_label_values(values)
    }
}

/// A per-request vector with each thread's handles of the series it has
/// recorded. `with_label_values` hashes the values, takes the vector's
/// lock and clones the series' `Arc` at every call, and the lock and the
/// count are shared by every worker thread (about 1.2 µs of a kept
/// `get_issue`'s CPU went to Prometheus, services/bench/FINDINGS.md); a
/// handle kept here costs a look-up in a map of the thread's own. As many
/// handles as series recorded, which the labels' vocabularies bound.
struct PerThread<V: Vector> {
    vector: V,
    handles: thread_local::ThreadLocal<RefCell<Handles<V::Series>>>,
}

/// One thread's handles of one vector's series, by label values.
struct Handles<S> {
    /// The key being looked up, reused: the label values, each after a
    /// NUL (no label value holds one).
    key: String,
    /// Hashed with foldhash, not SipHash: eight look-ups a request, of
    /// keys from bounded vocabularies, where SipHash cost about 1,600
    /// instructions a request (services/bench/FINDINGS.md).
    by_values: HashMap<Box<str>, S, foldhash::fast::RandomState>,
}

impl<S> Default for Handles<S> {
    fn default() -> Self {
        Self {
            key: String::new(),
            by_values: HashMap::default(),
        }
    }
}

impl<V: Vector> PerThread<V> {
    fn new(vector: V) -> Self {
        Self {
            vector,
            handles: thread_local::ThreadLocal::new(),
        }
    }

    /// Records into the series of `values` with `record`.
    fn with(&self, values: &[&str], record: impl FnOnce(&V::Series)) {
        let mut handles = self.handles.get_or_default().borrow_mut();
        let Handles { key, by_values } = &mut *handles;
        key.clear();
        for value in values {
            key.push('\0');
            key.push_str(value);
        }
        if let Some(series) = by_values.get(key.as_str()) {
            record(series);
            return;
        }
        let series = self.vector.series(values);
        record(&series);
        by_values.insert(key.as_str().into(), series);
    }
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics")
            .field("tenant_labels", &self.inner.tenant_labels)
            .finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new(MetricsConfig::default())
    }
}

fn counter_vec(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<IntCounterVec> {
    let vec = IntCounterVec::new(Opts::new(name, help), labels)?;
    registry.register(Box::new(vec.clone()))?;
    Ok(vec)
}

fn histogram_vec(
    registry: &Registry,
    name: &str,
    help: &str,
    labels: &[&str],
) -> prometheus::Result<HistogramVec> {
    let vec = HistogramVec::new(
        HistogramOpts::new(name, help).buckets(LATENCY_BUCKETS.to_vec()),
        labels,
    )?;
    registry.register(Box::new(vec.clone()))?;
    Ok(vec)
}

fn with_tenant<'a>(labels: &[&'a str], tenant: bool) -> Vec<&'a str> {
    let mut all = labels.to_vec();
    if tenant {
        all.push("tenant");
    }
    all
}

impl Metrics {
    pub fn new(config: MetricsConfig) -> Self {
        // The names and label sets below are fixed and valid, and the
        // registry is fresh, so registration cannot fail.
        match Self::try_new(config) {
            Ok(metrics) => metrics,
            Err(e) => unreachable!("static metric definitions are valid: {e}"),
        }
    }

    fn try_new(config: MetricsConfig) -> prometheus::Result<Self> {
        let registry = Registry::new();
        let t = config.tenant_labels;
        let r = &registry;
        let registry_counters = Arc::new(RegistryCollector::new()?);
        registry.register(Box::new(SharedRegistryCollector(registry_counters.clone())))?;
        let active_runs = IntGauge::new("corkboard_active_runs", "Runs with a live gateway.")?;
        registry.register(Box::new(active_runs.clone()))?;
        // Legacy sessions are signed, self-contained ids with no server-side
        // record, so "open sessions" cannot be counted; starts and explicit
        // ends can.
        let legacy_sessions = IntCounterVec::new(
            Opts::new(
                "corkboard_legacy_sessions_total",
                "Legacy (2025 revision) MCP sessions started by initialize and ended by DELETE.",
            ),
            &["event"],
        )?;
        registry.register(Box::new(legacy_sessions.clone()))?;
        let revocations = IntCounter::new(
            "corkboard_revocations_total",
            "Grants or runs revoked by this process.",
        )?;
        registry.register(Box::new(revocations.clone()))?;
        let connections_open = prometheus::IntGaugeVec::new(
            Opts::new(
                "corkboard_http_connections_open",
                "Open client connections by listener (connections over the cap included until they are closed).",
            ),
            &["listener"],
        )?;
        registry.register(Box::new(connections_open.clone()))?;
        let inner = Inner {
            audit_lost: counter_vec(
                r,
                "corkboard_audit_records_lost_total",
                "Audit records never written, by tenant (at most 100 named, then `other`) and reason (queue_full, writer_stopped, store_failed).",
                &["tenant", "reason"],
            )?,
            audit_loss_tenants: Mutex::new(HashSet::new()),
            connections_open,
            connections_refused: counter_vec(
                r,
                "corkboard_http_connections_refused_total",
                "Client connections (or, behind a trusted proxy, requests) refused, by listener and reason (cap: the listener at its connection cap; source: the client at its share, max_connections_per_source).",
                &["listener", "reason"],
            )?,
            connections_shed: counter_vec(
                r,
                "corkboard_http_connections_shed_total",
                "Unauthenticated client connections closed to make room near the listener's connection cap, by listener.",
                &["listener"],
            )?,
            http_requests: PerThread::new(counter_vec(
                r,
                "corkboard_http_requests_total",
                "HTTP requests by route pattern, method and status.",
                &["route", "method", "status"],
            )?),
            http_duration: PerThread::new(histogram_vec(
                r,
                "corkboard_http_request_duration_seconds",
                "Time to the response head, by route pattern and method.",
                &["route", "method"],
            )?),
            mcp_requests: PerThread::new(counter_vec(
                r,
                "corkboard_mcp_requests_total",
                "MCP requests by method, tool and outcome.",
                &with_tenant(&["method", "tool", "outcome"], t),
            )?),
            mcp_duration: PerThread::new(histogram_vec(
                r,
                "corkboard_mcp_request_duration_seconds",
                "MCP request handling time by method and tool.",
                &["method", "tool"],
            )?),
            tool_calls: PerThread::new(counter_vec(
                r,
                "corkboard_tool_calls_total",
                "Tool calls by tool and outcome.",
                &with_tenant(&["tool", "outcome"], t),
            )?),
            tool_duration: PerThread::new(histogram_vec(
                r,
                "corkboard_tool_call_duration_seconds",
                "Tool execution time by tool.",
                &["tool"],
            )?),
            store_operations: PerThread::new(counter_vec(
                r,
                "corkboard_store_operations_total",
                "Board store operations by operation and result (ok, error).",
                &["op", "result"],
            )?),
            store_duration: PerThread::new(histogram_vec(
                r,
                "corkboard_store_operation_duration_seconds",
                "Board store operation time by operation.",
                &["op"],
            )?),
            rate_limited: counter_vec(
                r,
                "corkboard_rate_limited_total",
                "Requests refused by a run's rate limit.",
                &with_tenant(&[], t),
            )?,
            revocations,
            active_runs,
            legacy_sessions,
            registry_counters,
            tenant_labels: t,
            max_tenants: config.max_tenants,
            tenants: Mutex::new(HashSet::new()),
            registry,
        };
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// The underlying registry, to register further collectors.
    pub fn registry(&self) -> &Registry {
        &self.inner.registry
    }

    fn tool(&self, tool: &str) -> &'static str {
        crate::mcp::tool_label(tool)
    }

    /// The tenant label value, bounded by `max_tenants`.
    fn tenant(&self, tenant: Option<&str>) -> String {
        let Some(tenant) = tenant else {
            return String::new();
        };
        let mut seen = self
            .inner
            .tenants
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if seen.contains(tenant) {
            return tenant.to_owned();
        }
        if seen.len() < self.inner.max_tenants {
            seen.insert(tenant.to_owned());
            return tenant.to_owned();
        }
        OTHER_TENANT.to_owned()
    }

    /// One HTTP request (recorded by [`crate::HttpTelemetry`]). `route` is
    /// the matched route pattern or [`UNMATCHED_ROUTE`].
    pub fn http_request(
        &self,
        route: &str,
        method: &Method,
        status: StatusCode,
        latency: Duration,
    ) {
        let method = http_method_label(method);
        let inner = &self.inner;
        inner
            .http_requests
            .with(&[route, method, status.as_str()], IntCounter::inc);
        let seconds = latency.as_secs_f64();
        inner
            .http_duration
            .with(&[route, method], |series| series.observe(seconds));
    }

    /// One MCP request (any method).
    pub fn mcp_request(&self, method: &str, tool: Option<&str>, outcome: &str, latency: Duration) {
        self.record_mcp(None, method, tool, outcome, latency);
    }

    fn record_mcp(
        &self,
        tenant: Option<&str>,
        method: &str,
        tool: Option<&str>,
        outcome: &str,
        latency: Duration,
    ) {
        let method = crate::mcp::method_label(method);
        let tool = tool.map_or("", |t| self.tool(t));
        let outcome = outcome_label(outcome);
        let inner = &self.inner;
        if inner.tenant_labels {
            let tenant = self.tenant(tenant);
            inner
                .mcp_requests
                .with(&[method, tool, outcome, &tenant], IntCounter::inc);
        } else {
            inner
                .mcp_requests
                .with(&[method, tool, outcome], IntCounter::inc);
        }
        let seconds = latency.as_secs_f64();
        inner
            .mcp_duration
            .with(&[method, tool], |series| series.observe(seconds));
    }

    /// One tool execution.
    pub fn tool_call(&self, tool: &str, outcome: &str, latency: Duration) {
        self.record_tool(None, tool, outcome, latency);
    }

    fn record_tool(&self, tenant: Option<&str>, tool: &str, outcome: &str, latency: Duration) {
        let tool = self.tool(tool);
        let outcome = outcome_label(outcome);
        let inner = &self.inner;
        if inner.tenant_labels {
            let tenant = self.tenant(tenant);
            inner
                .tool_calls
                .with(&[tool, outcome, &tenant], IntCounter::inc);
        } else {
            inner.tool_calls.with(&[tool, outcome], IntCounter::inc);
        }
        let seconds = latency.as_secs_f64();
        inner
            .tool_duration
            .with(&[tool], |series| series.observe(seconds));
    }

    /// One board store operation. `op` is a compile-time name such as
    /// `"create_issue"`, which keeps the label set bounded.
    pub fn store_operation(&self, op: &'static str, ok: bool, latency: Duration) {
        let result = if ok { "ok" } else { "error" };
        let inner = &self.inner;
        inner.store_operations.with(&[op, result], IntCounter::inc);
        let seconds = latency.as_secs_f64();
        inner
            .store_duration
            .with(&[op], |series| series.observe(seconds));
    }

    /// One token resolution answered from (`hit`) or past (`miss`) a cache.
    pub fn registry_cache(&self, hit: bool) {
        let counter = if hit {
            &self.inner.registry_counters.hits
        } else {
            &self.inner.registry_counters.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// One failed or timed-out Redis call.
    pub fn redis_error(&self) {
        self.inner
            .registry_counters
            .redis_errors
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Adds a registry's own counters to `corkboard_registry_cache_lookups_total`
    /// and `corkboard_redis_errors_total` at every scrape (they are summed
    /// with what [`Self::registry_cache`] and [`Self::redis_error`] counted),
    /// so this crate needs no dependency on the registry's crate:
    ///
    /// ```ignore
    /// let redis = redis_registry.clone();
    /// metrics.observe_registry(move || {
    ///     let s = redis.stats();
    ///     RegistryCounters { cache_hits: s.cache_hits, cache_misses: s.cache_misses, redis_errors: s.redis_errors }
    /// });
    /// ```
    pub fn observe_registry<F>(&self, read: F)
    where
        F: Fn() -> RegistryCounters + Send + Sync + 'static,
    {
        self.inner
            .registry_counters
            .sources
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Box::new(read));
    }

    /// `count` audit records of `tenant` lost for `reason` (one of
    /// [`AUDIT_LOSS_REASONS`]). The tenant is a label for the first
    /// [`AUDIT_LOSS_TENANTS_MAX`] tenants that lose records, `other` after.
    pub fn audit_records_lost(&self, tenant: &str, reason: &str, count: u64) {
        let reason = AUDIT_LOSS_REASONS
            .iter()
            .find(|r| **r == reason)
            .copied()
            .unwrap_or("other");
        let label = {
            let mut seen = self
                .inner
                .audit_loss_tenants
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if seen.contains(tenant) || seen.len() < AUDIT_LOSS_TENANTS_MAX {
                seen.insert(tenant.to_owned());
                tenant
            } else {
                OTHER_TENANT
            }
        };
        self.inner
            .audit_lost
            .with_label_values(&[label, reason])
            .inc_by(count);
    }

    /// Open connections of `listener` (one of [`LISTENERS`]).
    pub fn connections_open(&self, listener: &str) -> prometheus::IntGauge {
        self.inner
            .connections_open
            .with_label_values(&[listener_label(listener)])
    }

    /// One connection (or proxied request) of `listener` refused for
    /// `reason` (one of [`REFUSAL_REASONS`]).
    pub fn connection_refused(&self, listener: &str, reason: &str) {
        let reason = REFUSAL_REASONS
            .iter()
            .find(|r| **r == reason)
            .copied()
            .unwrap_or("other");
        self.inner
            .connections_refused
            .with_label_values(&[listener_label(listener), reason])
            .inc();
    }

    /// One unauthenticated connection of `listener` shed near its cap.
    pub fn connection_shed(&self, listener: &str) {
        self.inner
            .connections_shed
            .with_label_values(&[listener_label(listener)])
            .inc();
    }

    /// One grant or run revoked.
    pub fn revocation(&self) {
        self.inner.revocations.inc();
    }

    /// One request refused by a rate limit.
    pub fn rate_limited(&self) {
        self.record_rate_limited(None);
    }

    fn record_rate_limited(&self, tenant: Option<&str>) {
        if self.inner.tenant_labels {
            let tenant = self.tenant(tenant);
            self.inner.rate_limited.with_label_values(&[&tenant]).inc();
        } else {
            self.inner.rate_limited.with_label_values::<&str>(&[]).inc();
        }
    }

    /// Runs with a live gateway (`inc` on start, `dec` on stop, or `set`).
    pub fn active_runs(&self) -> &IntGauge {
        &self.inner.active_runs
    }

    /// Open legacy MCP sessions.
    /// A legacy session started (`initialize`).
    pub fn legacy_session_started(&self) {
        self.inner
            .legacy_sessions
            .with_label_values(&["started"])
            .inc();
    }

    /// A legacy session ended by the client (`DELETE`).
    pub fn legacy_session_ended(&self) {
        self.inner
            .legacy_sessions
            .with_label_values(&["ended"])
            .inc();
    }

    #[doc(hidden)]
    pub fn legacy_sessions(&self) -> &IntCounterVec {
        &self.inner.legacy_sessions
    }

    /// Recording methods that add the `tenant` label when
    /// [`MetricsConfig::tenant_labels`] is on (and ignore it otherwise).
    pub fn for_tenant<'a>(&'a self, tenant: &'a str) -> TenantMetrics<'a> {
        TenantMetrics {
            metrics: self,
            tenant,
        }
    }

    /// A counter whose value `read` returns at scrape time (it must never
    /// decrease), e.g. one kept by another crate.
    pub fn counter_fn<F>(&self, name: &str, help: &str, read: F) -> Result<(), TelemetryError>
    where
        F: Fn() -> f64 + Send + Sync + 'static,
    {
        self.register_fn(name, help, MetricType::COUNTER, Box::new(read))
    }

    /// A gauge whose value `read` returns at scrape time.
    pub fn gauge_fn<F>(&self, name: &str, help: &str, read: F) -> Result<(), TelemetryError>
    where
        F: Fn() -> f64 + Send + Sync + 'static,
    {
        self.register_fn(name, help, MetricType::GAUGE, Box::new(read))
    }

    fn register_fn(
        &self,
        name: &str,
        help: &str,
        kind: MetricType,
        read: Box<dyn Fn() -> f64 + Send + Sync>,
    ) -> Result<(), TelemetryError> {
        let desc = Desc::new(name.to_owned(), help.to_owned(), Vec::new(), HashMap::new())?;
        self.inner
            .registry
            .register(Box::new(FnMetric { desc, kind, read }))?;
        Ok(())
    }

    /// Everything in the Prometheus text exposition format (0.0.4).
    pub fn render(&self) -> String {
        let families = self.inner.registry.gather();
        let mut buffer = Vec::new();
        // Encoding into a Vec only fails on malformed families, which the
        // registry has already rejected at registration.
        if TextEncoder::new().encode(&families, &mut buffer).is_err() {
            return String::new();
        }
        String::from_utf8(buffer).unwrap_or_default()
    }
}

/// See [`Metrics::for_tenant`].
#[derive(Debug, Clone, Copy)]
pub struct TenantMetrics<'a> {
    metrics: &'a Metrics,
    tenant: &'a str,
}

impl TenantMetrics<'_> {
    pub fn mcp_request(&self, method: &str, tool: Option<&str>, outcome: &str, latency: Duration) {
        self.metrics
            .record_mcp(Some(self.tenant), method, tool, outcome, latency);
    }

    pub fn tool_call(&self, tool: &str, outcome: &str, latency: Duration) {
        self.metrics
            .record_tool(Some(self.tenant), tool, outcome, latency);
    }

    pub fn rate_limited(&self) {
        self.metrics.record_rate_limited(Some(self.tenant));
    }
}

/// `GET /metrics`: mount with
/// `.app_data(web::Data::new(metrics)).route("/metrics", web::get().to(metrics_handler))`.
pub async fn metrics_handler(metrics: web::Data<Metrics>) -> HttpResponse {
    HttpResponse::Ok()
        .content_type(prometheus::TEXT_FORMAT)
        .body(metrics.render())
}

/// A single unlabelled value read at scrape time.
struct FnMetric {
    desc: Desc,
    kind: MetricType,
    read: Box<dyn Fn() -> f64 + Send + Sync>,
}

impl Collector for FnMetric {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.desc]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let value = (self.read)();
        let mut metric = proto::Metric::default();
        if self.kind == MetricType::COUNTER {
            let mut counter = proto::Counter::default();
            counter.set_value(value);
            metric.set_counter(counter);
        } else {
            let mut gauge = proto::Gauge::default();
            gauge.set_value(value);
            metric.set_gauge(gauge);
        }
        vec![family(&self.desc, self.kind, vec![metric])]
    }
}

fn family(desc: &Desc, kind: MetricType, metrics: Vec<proto::Metric>) -> MetricFamily {
    let mut family = MetricFamily::default();
    family.set_name(desc.fq_name.clone());
    family.set_help(desc.help.clone());
    family.set_field_type(kind);
    family.set_metric(metrics);
    family
}

fn counter_metric(value: u64, label: Option<(&str, &str)>) -> proto::Metric {
    let mut counter = proto::Counter::default();
    // Counts stay far below 2^53, where f64 is exact.
    counter.set_value(value as f64);
    let mut metric = proto::Metric::default();
    metric.set_counter(counter);
    if let Some((name, value)) = label {
        let mut pair = proto::LabelPair::default();
        pair.set_name(name.to_owned());
        pair.set_value(value.to_owned());
        metric.set_label(vec![pair]);
    }
    metric
}

type RegistrySource = Box<dyn Fn() -> RegistryCounters + Send + Sync>;

/// Registry cache and Redis counters: this process's own counts plus every
/// observed registry's, summed at scrape time.
struct RegistryCollector {
    lookups: Desc,
    errors: Desc,
    hits: AtomicU64,
    misses: AtomicU64,
    redis_errors: AtomicU64,
    sources: RwLock<Vec<RegistrySource>>,
}

impl RegistryCollector {
    fn new() -> prometheus::Result<Self> {
        Ok(Self {
            lookups: Desc::new(
                "corkboard_registry_cache_lookups_total".into(),
                "Token resolutions by registry cache result (hit, miss).".into(),
                vec!["result".into()],
                HashMap::new(),
            )?,
            errors: Desc::new(
                "corkboard_redis_errors_total".into(),
                "Redis calls that failed or timed out.".into(),
                Vec::new(),
                HashMap::new(),
            )?,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            redis_errors: AtomicU64::new(0),
            sources: RwLock::new(Vec::new()),
        })
    }
}

struct SharedRegistryCollector(Arc<RegistryCollector>);

impl Collector for SharedRegistryCollector {
    fn desc(&self) -> Vec<&Desc> {
        vec![&self.0.lookups, &self.0.errors]
    }

    fn collect(&self) -> Vec<MetricFamily> {
        let c = &self.0;
        let mut total = RegistryCounters {
            cache_hits: c.hits.load(Ordering::Relaxed),
            cache_misses: c.misses.load(Ordering::Relaxed),
            redis_errors: c.redis_errors.load(Ordering::Relaxed),
        };
        for source in c
            .sources
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
        {
            let more = source();
            total.cache_hits = total.cache_hits.saturating_add(more.cache_hits);
            total.cache_misses = total.cache_misses.saturating_add(more.cache_misses);
            total.redis_errors = total.redis_errors.saturating_add(more.redis_errors);
        }
        vec![
            family(
                &c.lookups,
                MetricType::COUNTER,
                vec![
                    counter_metric(total.cache_hits, Some(("result", "hit"))),
                    counter_metric(total.cache_misses, Some(("result", "miss"))),
                ],
            ),
            family(
                &c.errors,
                MetricType::COUNTER,
                vec![counter_metric(total.redis_errors, None)],
            ),
        ]
    }
}
