//! Connections per listener: how many are open, a cap on them, and the
//! answer a connection over the cap gets.
//!
//! Every listener (the server's, the runner's, the shared gateway port,
//! each run's dedicated port) has a [`ConnectionCap`]. A connection takes a
//! [`ConnSlot`] when it is accepted and holds it until it closes, so the
//! count is exact whichever worker serves it. Connections over the cap are
//! still accepted up to twice the cap, to be answered clearly: their first
//! request gets 503 with `Retry-After` and `Connection: close` (from the
//! [`ConnectionGate`] middleware, before any handler or body read), and
//! each is counted in `corkboard_http_connections_refused_total`. Whether
//! a connection is over is decided when it is accepted. Past twice the
//! cap nothing more is accepted (actix's per-worker `max_connections`,
//! from [`ConnectionCap::per_worker`]; a run's accept loop closes them at
//! once, counted too), and the listen backlog, sized to the cap by
//! [`bind`], holds what waits beyond it; the kernel drops further
//! connection attempts.
//!
//! Time before a request is in is bounded too: every listener gives a
//! connection's first request head [`DEFAULT_HEADER_TIMEOUT`]
//! (configurable) to arrive, however slowly it dribbles in, and an idle
//! keep-alive connection [`DEFAULT_KEEP_ALIVE`]; bodies have their own
//! deadline (the MCP endpoint's `body_timeout`). actix's head deadline
//! covers only the first request of a connection, and its keep-alive
//! timer stops at the next request's first byte, so a client could send
//! one request and then dribble the next head for ever: a watchdog per
//! connection ([`ConnectionCap::with_next_head_deadline`]) closes a
//! connection whose next request has not reached the app within the
//! keep-alive period plus the header deadline after its last response was
//! written (never while a request is being served or its response body
//! is still streaming).

use crate::metrics::Metrics;
use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::{Extensions, Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::StatusCode;
use actix_web::web::Bytes;
use actix_web::{HttpResponse, ResponseError};
use futures_util::future::{LocalBoxFuture, Ready, ready};
use std::cell::Cell;
use std::fmt;
use std::net::{SocketAddr, TcpListener};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

/// Seconds a client over the cap is told to wait.
const RETRY_AFTER_SECS: u32 = 1;

/// Open connections per listener (the server's, the runner's, the shared
/// gateway port) unless configured (`max_connections`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Open connections per run's dedicated port (`max_connections_per_run`).
pub const DEFAULT_MAX_CONNECTIONS_PER_RUN: usize = 512;
/// Longest time a request's head may take to arrive (`header_timeout_ms`);
/// actix answers 408 and closes after it.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest time an idle keep-alive connection stays open (`keep_alive_ms`).
pub const DEFAULT_KEEP_ALIVE: Duration = Duration::from_secs(5);

/// Worker threads of an actix `HttpServer`: its own default (one per
/// core), set explicitly so that [`ConnectionCap::per_worker`] divides by
/// the right number.
pub fn http_workers() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get)
}

/// Binds `addr` with a listen backlog of `backlog` (a listener's cap; the
/// kernel may lower it to `net.core.somaxconn`), where the standard
/// library's bind gives 128 and a burst of connections loses its SYNs.
pub fn bind(addr: SocketAddr, backlog: usize) -> std::io::Result<TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // What the standard library's bind sets too: a restarted server may
    // bind while old connections linger in TIME_WAIT.
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())?;
    socket.listen(i32::try_from(backlog).unwrap_or(i32::MAX))?;
    Ok(socket.into())
}

/// The open connections of one listener, capped.
#[derive(Clone)]
pub struct ConnectionCap {
    inner: Arc<Inner>,
}

struct Inner {
    listener: &'static str,
    max: usize,
    open: AtomicUsize,
    metrics: Option<Metrics>,
    /// See [`ConnectionCap::with_next_head_deadline`].
    next_head: Option<Duration>,
}

impl fmt::Debug for ConnectionCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionCap")
            .field("listener", &self.inner.listener)
            .field("max", &self.inner.max)
            .field("open", &self.open())
            .finish()
    }
}

impl ConnectionCap {
    /// At most `max` (at least 1) open connections on `listener` (one of
    /// [`crate::LISTENERS`], the metrics' label).
    pub fn new(listener: &'static str, max: usize, metrics: Option<Metrics>) -> Self {
        Self {
            inner: Arc::new(Inner {
                listener,
                max: max.max(1),
                open: AtomicUsize::new(0),
                metrics,
                next_head: None,
            }),
        }
    }

    /// Closes a connection whose next request has not reached the app
    /// within `keep_alive + header_timeout` of its last response (see the
    /// module docs). Call before the cap is shared.
    pub fn with_next_head_deadline(
        mut self,
        keep_alive: Duration,
        header_timeout: Duration,
    ) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.next_head = Some(keep_alive + header_timeout);
        }
        self
    }

    pub fn max(&self) -> usize {
        self.inner.max
    }

    /// Connections open now (over the cap included, until they close).
    pub fn open(&self) -> usize {
        self.inner.open.load(Ordering::Relaxed)
    }

    /// Most connections accepted at all: the cap, plus as many again to
    /// answer 503 rather than leave waiting.
    pub fn accept_max(&self) -> usize {
        self.inner.max.saturating_mul(2)
    }

    /// actix's `max_connections`, which is per worker: [`Self::accept_max`]
    /// spread over `workers`.
    pub fn per_worker(&self, workers: usize) -> usize {
        self.accept_max().div_ceil(workers.max(1))
    }

    /// Counts a connection just accepted, for as long as the slot lives.
    pub fn admit(&self) -> ConnSlot {
        let before = self.inner.open.fetch_add(1, Ordering::AcqRel);
        if let Some(metrics) = &self.inner.metrics {
            metrics.connections_open(self.inner.listener).inc();
        }
        ConnSlot {
            cap: self.clone(),
            over: before >= self.inner.max,
            beyond: before >= self.accept_max(),
        }
    }

    /// For `HttpServer::on_connect`: puts the connection's slot (and the
    /// state [`ConnectionGate`] reads) into its extensions, which live as
    /// long as the connection, and starts its watchdog. `io` is what
    /// actix hands `on_connect` (a TCP stream on plain listeners).
    pub fn on_connect(&self, io: &dyn std::any::Any, extensions: &mut Extensions) {
        let slot = self.admit();
        extensions.insert(slot.state());
        extensions.insert(slot);
        if let Some(stream) = io.downcast_ref::<tokio::net::TcpStream>() {
            self.watch(stream, extensions);
        }
    }

    /// Starts the next-head watchdog of the connection on `stream` (when
    /// configured), its state in the connection's `extensions`. Runs on
    /// the connection's own worker (a local task).
    pub fn watch(&self, stream: &tokio::net::TcpStream, extensions: &mut Extensions) {
        let Some(limit) = self.inner.next_head else {
            return;
        };
        // A second handle on the same socket, to shut it down from the
        // watchdog; the connection's reads then end and actix closes it.
        let Ok(socket) = socket2::SockRef::from(stream).try_clone() else {
            return;
        };
        let state = Rc::new(Idle {
            busy: Cell::new(0),
            last_done: Cell::new(None),
            socket,
        });
        tokio::task::spawn_local(watchdog(Rc::downgrade(&state), limit));
        extensions.insert(IdleGuard(state));
    }

    /// Counts a connection refused at the cap.
    pub fn refused(&self) {
        if let Some(metrics) = &self.inner.metrics {
            metrics.connection_refused(self.inner.listener);
        }
        tracing::debug!(
            listener = self.inner.listener,
            max = self.inner.max,
            "connection over the cap refused"
        );
    }
}

/// What a connection's watchdog watches.
struct Idle {
    /// Requests being served or streaming their response body.
    busy: Cell<u32>,
    /// When the last response body was written out.
    last_done: Cell<Option<Instant>>,
    socket: socket2::Socket,
}

/// The watchdog's state, in the connection's extensions (dropped with the
/// connection, which ends the watchdog).
#[derive(Clone)]
struct IdleGuard(Rc<Idle>);

/// Marks a request done when its response body is dropped (written out,
/// or abandoned).
struct Done(Rc<Idle>);

impl Drop for Done {
    fn drop(&mut self) {
        let idle = &self.0;
        idle.busy.set(idle.busy.get().saturating_sub(1));
        idle.last_done.set(Some(Instant::now()));
    }
}

async fn watchdog(state: Weak<Idle>, limit: Duration) {
    loop {
        let Some(idle) = state.upgrade() else {
            return;
        };
        let wait = match (idle.busy.get(), idle.last_done.get()) {
            (0, Some(done)) => match limit.checked_sub(done.elapsed()) {
                Some(left) if !left.is_zero() => left,
                _ => {
                    tracing::debug!(
                        "closing a connection whose next request head did not arrive in time"
                    );
                    let _ = idle.socket.shutdown(std::net::Shutdown::Both);
                    return;
                }
            },
            _ => limit,
        };
        drop(idle);
        tokio::time::sleep(wait).await;
    }
}

/// A response body that marks its request done (for the connection's
/// watchdog) when dropped.
pub struct Tracked {
    body: BoxBody,
    _done: Option<Done>,
}

impl fmt::Debug for Tracked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tracked").finish_non_exhaustive()
    }
}

impl MessageBody for Tracked {
    type Error = Box<dyn std::error::Error>;

    fn size(&self) -> BodySize {
        self.body.size()
    }

    fn poll_next(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Bytes, Self::Error>>> {
        Pin::new(&mut self.get_mut().body).poll_next(cx)
    }
}

/// A connection's place in its listener's count; dropping it frees it.
pub struct ConnSlot {
    cap: ConnectionCap,
    over: bool,
    beyond: bool,
}

impl fmt::Debug for ConnSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnSlot")
            .field("over", &self.over)
            .finish()
    }
}

impl ConnSlot {
    /// Whether the connection came in over the cap (to be answered 503).
    pub fn over(&self) -> bool {
        self.over
    }

    /// Whether it came in past [`ConnectionCap::accept_max`] (to be closed
    /// without an answer).
    pub fn beyond(&self) -> bool {
        self.beyond
    }

    /// What [`ConnectionGate`] reads from a connection's extensions.
    pub fn state(&self) -> ConnState {
        ConnState {
            cap: self.cap.clone(),
            over: self.over,
        }
    }
}

impl Drop for ConnSlot {
    fn drop(&mut self) {
        let inner = &self.cap.inner;
        inner.open.fetch_sub(1, Ordering::AcqRel);
        if let Some(metrics) = &inner.metrics {
            metrics.connections_open(inner.listener).dec();
        }
    }
}

/// A connection's listener cap and whether it came in over it, in the
/// connection's extensions.
#[derive(Debug, Clone)]
pub struct ConnState {
    cap: ConnectionCap,
    over: bool,
}

/// The answer to a request on a connection over the cap.
#[derive(Debug)]
pub struct TooManyConnections {
    max: usize,
}

impl TooManyConnections {
    /// The answer on a listener capped at `max` connections.
    pub fn new(max: usize) -> Self {
        Self { max }
    }
}

impl fmt::Display for TooManyConnections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Service Unavailable: this listener is at its cap of {} open connections (max_connections); retry shortly or reuse an open connection",
            self.max
        )
    }
}

impl ResponseError for TooManyConnections {
    fn status_code(&self) -> StatusCode {
        StatusCode::SERVICE_UNAVAILABLE
    }

    /// A JSON-RPC error (an MCP client shows its message; any HTTP client
    /// sees the status), and the connection closes after it.
    ///
    /// Written here because this crate sits below `corkboard-mcp`, which
    /// owns the JSON-RPC error writer and codes; `corkboard-mcp`'s tests
    /// check that this body is what its writer writes for the same error
    /// (`-32603` with `data.retryable`).
    fn error_response(&self) -> HttpResponse {
        let body = serde_json::json!({
            "jsonrpc": "2.0",
            "id": null,
            "error": {"code": -32603, "message": self.to_string(), "data": {"retryable": true}},
        });
        HttpResponse::build(self.status_code())
            .insert_header(("Retry-After", RETRY_AFTER_SECS.to_string()))
            .force_close()
            .json(body)
    }
}

/// The middleware answering requests on connections over their
/// listener's cap (see the module docs); wrap every app of a capped
/// listener with it. Connections without a [`ConnState`] pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnectionGate;

impl<S, B> Transform<S, ServiceRequest> for ConnectionGate
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<Tracked>;
    type Error = actix_web::Error;
    type Transform = ConnectionGateService<S>;
    type InitError = ();
    type Future = Ready<Result<Self::Transform, Self::InitError>>;

    fn new_transform(&self, service: S) -> Self::Future {
        ready(Ok(ConnectionGateService { service }))
    }
}

/// The service [`ConnectionGate`] wraps around an app.
pub struct ConnectionGateService<S> {
    service: S,
}

impl<S> fmt::Debug for ConnectionGateService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionGateService")
            .finish_non_exhaustive()
    }
}

impl<S, B> Service<ServiceRequest> for ConnectionGateService<S>
where
    S: Service<ServiceRequest, Response = ServiceResponse<B>, Error = actix_web::Error> + 'static,
    B: MessageBody + 'static,
{
    type Response = ServiceResponse<Tracked>;
    type Error = actix_web::Error;
    type Future = LocalBoxFuture<'static, Result<Self::Response, Self::Error>>;

    fn poll_ready(&self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.service.poll_ready(cx)
    }

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let over = req
            .conn_data::<ConnState>()
            .filter(|state| state.over)
            .map(|state| state.cap.clone());
        if let Some(cap) = over {
            cap.refused();
            return Box::pin(ready(Err(TooManyConnections { max: cap.max() }.into())));
        }
        let done = req.conn_data::<IdleGuard>().map(|guard| {
            let idle = &guard.0;
            idle.busy.set(idle.busy.get() + 1);
            Done(Rc::clone(idle))
        });
        let call = self.service.call(req);
        Box::pin(async move {
            // An error is rendered by actix after this: done is dropped
            // (the request counted done) as it is answered.
            let response = call.await?;
            Ok(response.map_body(|_, body| Tracked {
                body: body.boxed(),
                _done: done,
            }))
        })
    }
}
