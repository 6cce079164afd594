//! The closed-loop load generator: `concurrency` workers, each on its own
//! keep-alive connection, each sending the next request as soon as the
//! previous one is answered, for a warm-up and then a bounded measured
//! window. Latency is recorded per request (send to last body byte) in an
//! HDR histogram; throughput is the requests started and completed in the
//! window divided by its length.
//!
//! Closed loop means a slow server slows the offered load too; the
//! latencies are those a client of that concurrency sees, not those of an
//! open-loop arrival process.

use crate::client::{Connection, Target};
use crate::error::{BenchError, Result};
use crate::mcp::{self, Era, PreparedCall, Titles, Tool, Verdict};
use bytes::Bytes;
use hdrhistogram::Histogram;
use hyper::Method;
use hyper::header::HeaderMap;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Longest a single request may take before the worker gives up on its
/// connection (counted as an error). Generous: only to avoid hangs.
const REQUEST_DEADLINE: Duration = Duration::from_secs(30);
/// Histogram range: 1 µs to 60 s at 3 significant figures.
const HIST_MAX_MICROS: u64 = 60_000_000;

/// What to send and how hard.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub target: Target,
    pub token: String,
    pub era: Era,
    pub tool: Tool,
    /// The issue `get_issue` reads.
    pub issue: Option<String>,
    pub concurrency: usize,
    pub warmup: Duration,
    pub duration: Duration,
    /// The titles of a `create_issue` load (other tools: `One`).
    pub titles: Titles,
}

/// What a run measured.
#[derive(Debug, Clone)]
pub struct LoadResult {
    pub requests: u64,
    pub errors: u64,
    /// Error label → count (`http_429`, `rpc_-32602`, `connect`, ...).
    pub error_kinds: BTreeMap<String, u64>,
    pub window: Duration,
    pub histogram: Histogram<u64>,
}

impl LoadResult {
    pub fn rps(&self) -> f64 {
        let secs = self.window.as_secs_f64();
        if secs > 0.0 {
            self.requests as f64 / secs
        } else {
            0.0
        }
    }

    /// Latency quantile in milliseconds (0 when nothing was measured).
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.histogram.is_empty() {
            return 0.0;
        }
        self.histogram.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn max_ms(&self) -> f64 {
        if self.histogram.is_empty() {
            return 0.0;
        }
        self.histogram.max() as f64 / 1000.0
    }
}

fn new_histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, HIST_MAX_MICROS, 3)
        .map_err(|e| BenchError::Usage(format!("histogram: {e}")))
}

/// Per-worker tallies, merged at the end.
struct Tally {
    requests: u64,
    errors: BTreeMap<String, u64>,
    histogram: Histogram<u64>,
}

impl Tally {
    fn error(&mut self, label: impl Into<String>, measured: bool) {
        if measured {
            *self.errors.entry(label.into()).or_default() += 1;
        }
    }
}

/// How a worker builds the request it repeats.
#[derive(Debug)]
enum Shape {
    /// The same prepared request every time (stateless era, or a server
    /// that does not speak MCP, as the ceiling).
    Fixed(PreparedCall),
    /// Bodies sent in turn, across all workers, with the same headers (a
    /// `create_issue` load of [`Titles::Distinct`]).
    Turns {
        headers: HeaderMap,
        bodies: Vec<Bytes>,
        next: AtomicUsize,
    },
    /// A legacy session per connection.
    Legacy { arguments: Value },
}

impl Shape {
    fn of(spec: &LoadSpec) -> Result<Self> {
        let arguments = spec.tool.arguments(spec.issue.as_deref())?;
        Ok(match (spec.era, spec.titles) {
            (Era::Stateless, Titles::One) => {
                Self::Fixed(mcp::stateless_call(&spec.token, spec.tool, &arguments)?)
            }
            (Era::Stateless, Titles::Distinct) if spec.tool == Tool::CreateIssue => {
                let first = mcp::stateless_call(&spec.token, spec.tool, &arguments)?;
                let name = spec.tool.name();
                Self::Turns {
                    headers: first.headers,
                    bodies: (0..mcp::DISTINCT_TITLES)
                        .map(|i| {
                            let arguments = mcp::create_arguments(&mcp::distinct_title(i));
                            mcp::call_body(name, &arguments, &serde_json::json!({}))
                        })
                        .collect::<Result<_>>()?,
                    next: AtomicUsize::new(0),
                }
            }
            (Era::Legacy, Titles::One) => Self::Legacy { arguments },
            (_, Titles::Distinct) => {
                return Err(BenchError::Usage(
                    "distinct titles are for a stateless create_issue load".into(),
                ));
            }
        })
    }

    /// The headers and body to send now on a connection that repeats
    /// `repeated`.
    fn request<'a>(&'a self, repeated: &'a PreparedCall) -> (&'a HeaderMap, Bytes) {
        match self {
            Self::Turns {
                headers,
                bodies,
                next,
            } => {
                let turn = next.fetch_add(1, Ordering::Relaxed) % bodies.len();
                (headers, bodies[turn].clone())
            }
            _ => (&repeated.headers, repeated.body.clone()),
        }
    }
}

/// Runs the load described by `spec`. Errors during the run are counted,
/// never fatal; only a spec the generator cannot even start with fails.
pub async fn run(spec: &LoadSpec) -> Result<LoadResult> {
    if spec.concurrency == 0 {
        return Err(BenchError::Usage("concurrency must be at least 1".into()));
    }
    if spec.duration.is_zero() {
        return Err(BenchError::Usage("duration must be positive".into()));
    }
    let shape = Arc::new(Shape::of(spec)?);
    let start = Instant::now();
    let measure_from = start + spec.warmup;
    let end = measure_from + spec.duration;
    let mut tasks = Vec::with_capacity(spec.concurrency);
    for _ in 0..spec.concurrency {
        let spec = spec.clone();
        let shape = Arc::clone(&shape);
        tasks.push(tokio::spawn(async move {
            worker(&spec, &shape, measure_from, end).await
        }));
    }
    let mut histogram = new_histogram()?;
    let mut requests = 0;
    let mut error_kinds: BTreeMap<String, u64> = BTreeMap::new();
    for task in tasks {
        let tally = task
            .await
            .map_err(|e| BenchError::process("load worker", e.to_string()))??;
        requests += tally.requests;
        histogram
            .add(&tally.histogram)
            .map_err(|e| BenchError::Usage(format!("histogram merge: {e}")))?;
        for (label, count) in tally.errors {
            *error_kinds.entry(label).or_default() += count;
        }
    }
    Ok(LoadResult {
        requests,
        errors: error_kinds.values().sum(),
        error_kinds,
        window: spec.duration,
        histogram,
    })
}

async fn worker(
    spec: &LoadSpec,
    shape: &Shape,
    measure_from: Instant,
    end: Instant,
) -> Result<Tally> {
    let mut tally = Tally {
        requests: 0,
        errors: BTreeMap::new(),
        histogram: new_histogram()?,
    };
    let path = spec.target.path.as_str();
    let mut session: Option<(Connection, PreparedCall)> = None;
    loop {
        if Instant::now() >= end {
            break;
        }
        if !session.as_ref().is_some_and(|open| open.0.is_open()) {
            session = None;
            match connect(spec, shape).await {
                Ok(opened) => session = Some(opened),
                Err(e) => {
                    tally.error(connect_label(&e), Instant::now() >= measure_from);
                    // Do not spin on a refusing server.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            }
        }
        let Some((connection, repeated)) = session.as_mut() else {
            continue;
        };
        let (headers, body) = shape.request(repeated);
        let sent = Instant::now();
        let outcome = tokio::time::timeout(
            REQUEST_DEADLINE,
            connection.send(Method::POST, path, headers, body),
        )
        .await;
        let done = Instant::now();
        // Counted when started inside the window, wherever it ends.
        let measured = sent >= measure_from;
        match outcome {
            Ok(Ok(reply)) => {
                if !measured {
                    continue;
                }
                tally.requests += 1;
                let micros = u64::try_from(done.duration_since(sent).as_micros())
                    .unwrap_or(HIST_MAX_MICROS)
                    .clamp(1, HIST_MAX_MICROS);
                tally.histogram.saturating_record(micros);
                let verdict = mcp::classify_for(spec.tool, &reply);
                if verdict != Verdict::Ok {
                    tally.error(verdict.label(), true);
                }
            }
            Ok(Err(_)) => {
                tally.error("connection", measured);
                session = None;
            }
            Err(_) => {
                tally.error("timeout", measured);
                session = None;
            }
        }
    }
    Ok(tally)
}

async fn connect(spec: &LoadSpec, shape: &Shape) -> Result<(Connection, PreparedCall)> {
    let mut connection = Connection::open(&spec.target).await?;
    let call = match shape {
        Shape::Fixed(call) => call.clone(),
        // Each request takes its own turn (`Shape::request`).
        Shape::Turns {
            headers, bodies, ..
        } => PreparedCall {
            headers: headers.clone(),
            body: bodies[0].clone(),
        },
        Shape::Legacy { arguments } => {
            mcp::legacy_session(
                &mut connection,
                &spec.target.path,
                &spec.token,
                spec.tool,
                arguments,
            )
            .await?
        }
    };
    Ok((connection, call))
}

fn connect_label(err: &BenchError) -> &'static str {
    match err {
        BenchError::Protocol { .. } => "session",
        _ => "connect",
    }
}
