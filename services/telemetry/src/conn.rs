//! Connections per listener: how many are open, a cap on them and a share
//! of it per source, and the answer a connection over either gets.
//!
//! Every listener (the server's, the runner's, the shared gateway port,
//! each run's dedicated port) has a [`ConnectionCap`]. A connection takes a
//! [`ConnSlot`] when it is accepted and holds it until it closes, so the
//! count is exact whichever worker serves it. Whether a connection is over
//! is decided when it is accepted, by the listener's book (`book.rs`):
//!
//! - **The cap** (`max_connections`, `max_connections_per_run`).
//!   Connections over it are still accepted up to twice the cap, to be
//!   answered clearly: their first request gets 503 with `Retry-After` and
//!   `Connection: close` (from the [`ConnectionGate`] middleware, before
//!   any handler or body read), counted in
//!   `corkboard_http_connections_refused_total{reason="cap"}`. Past twice
//!   the cap nothing more is accepted (actix's per-worker
//!   `max_connections`, from [`ConnectionCap::per_worker`]; a run's accept
//!   loop closes them at once, counted too), and the listen backlog, sized
//!   to the cap by [`bind`], holds what waits beyond it; the kernel drops
//!   further connection attempts.
//! - **A share per source** (`max_connections_per_source`): no client
//!   address (an IPv4 address or an IPv6 /64, `source.rs`) holds more
//!   than that many connections of one listener. Its next ones get the
//!   same 503 (`reason="source"`) and close; once as many again wait for
//!   that answer, further ones are closed at once. So one client cannot
//!   take the cap from the others, however slowly it sends.
//! - **Shedding** near the cap: once 90% of the cap is held, each new
//!   connection first closes one that has not authenticated (no request
//!   on it presented a valid run token, admin JWT or web session: the
//!   authenticating code calls [`mark_authenticated`]), the idle ones of
//!   the source holding the most first
//!   (`corkboard_http_connections_shed_total`). Authenticated connections
//!   are never shed, so unauthenticated ones only take each other's
//!   places, never an authenticated client's.
//!
//! **Behind a proxy** every connection comes from the proxy, so the
//! source at accept is the proxy and would give all its clients one
//! share. A connection from a trusted proxy (`trusted_proxies`, none by
//! default) therefore has no share of connections; instead each of its
//! requests is counted under the client its forwarded header names
//! (`forwarded_header`; the right-most hop that is not a trusted proxy,
//! `source.rs`), and a client with its share of requests in flight is
//! answered 503 (`reason="source"`) without closing the proxy's
//! connection, which carries other clients' requests. A proxy holds one
//! upstream connection per request it forwards, so a client's requests in
//! flight are the connections it makes the proxy hold; the proxy itself
//! buffers request heads and bodies, so a client behind it cannot hold a
//! connection with a slow head. The forwarded header of any other peer is
//! ignored.
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

mod book;
mod source;

pub use source::{DEFAULT_MAX_CONNECTIONS_PER_SOURCE, ForwardedHeader, Source, SourceLimits};

use crate::metrics::Metrics;
use actix_web::body::{BodySize, BoxBody, MessageBody};
use actix_web::dev::{Extensions, Service, ServiceRequest, ServiceResponse, Transform};
use actix_web::http::StatusCode;
use actix_web::web::Bytes;
use actix_web::{HttpRequest, HttpResponse, ResponseError};
use book::{Admission, Book, InFlight, Mark};
use futures_util::future::{LocalBoxFuture, Ready, ready};
use std::cell::Cell;
use std::fmt;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
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

/// Why a connection or request was refused (the metric's `reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// The listener is at its cap.
    Cap,
    /// The client holds its share (`max_connections_per_source`).
    Source,
}

impl Refused {
    pub fn label(self) -> &'static str {
        match self {
            Self::Cap => "cap",
            Self::Source => "source",
        }
    }
}

/// A connection's socket, shared with whatever may have to close it from
/// outside (its watchdog, the shedding of another thread's accept).
type Closer = Arc<socket2::Socket>;

/// The open connections of one listener, capped.
#[derive(Clone)]
pub struct ConnectionCap {
    inner: Arc<Inner>,
}

struct Inner {
    listener: &'static str,
    max: usize,
    /// Every open connection, over the cap or not.
    open: AtomicUsize,
    metrics: Option<Metrics>,
    /// See [`ConnectionCap::with_next_head_deadline`].
    next_head: Option<Duration>,
    sources: SourceLimits,
    /// Taken once per accepted and per closed connection, never per
    /// request (but for requests through a trusted proxy, `in_flight`).
    book: Mutex<Book<Closer>>,
    in_flight: Mutex<InFlight>,
}

impl fmt::Debug for ConnectionCap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnectionCap")
            .field("listener", &self.inner.listener)
            .field("max", &self.inner.max)
            .field("open", &self.open())
            .field("sources", &self.inner.sources)
            .finish()
    }
}

/// A lock whose holder cannot leave its data half-changed (every change
/// is a few integer updates): a panic elsewhere does not poison it.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl ConnectionCap {
    /// At most `max` (at least 1) open connections on `listener` (one of
    /// [`crate::LISTENERS`], the metrics' label), each source its default
    /// share ([`DEFAULT_MAX_CONNECTIONS_PER_SOURCE`]), no proxy trusted.
    pub fn new(listener: &'static str, max: usize, metrics: Option<Metrics>) -> Self {
        let max = max.max(1);
        let sources = SourceLimits::default();
        Self {
            inner: Arc::new(Inner {
                listener,
                max,
                open: AtomicUsize::new(0),
                metrics,
                next_head: None,
                book: Mutex::new(Book::new(max, sources.per_source())),
                in_flight: Mutex::new(InFlight::new(sources.per_source())),
                sources,
            }),
        }
    }

    /// Each source's share and the trusted proxies (see the module docs).
    /// Call before the cap is shared.
    pub fn with_sources(mut self, sources: SourceLimits) -> Self {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            let share = sources.per_source();
            inner
                .book
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .set_per_source(share);
            inner
                .in_flight
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner)
                .set_per_source(share);
            inner.sources = sources;
        }
        self
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

    /// Counts a connection just accepted from `peer`, for as long as the
    /// slot lives, and decides what it is (see the module docs). `socket`
    /// (a second handle on the connection's socket) lets the connection be
    /// shed and watched; without it, it is neither. A slot that
    /// [closes at once](ConnSlot::closes_at_once) is counted refused here;
    /// the caller closes it. May close another connection (shedding).
    pub fn admit(&self, peer: Option<SocketAddr>, socket: Option<socket2::Socket>) -> ConnSlot {
        let before = self.inner.open.fetch_add(1, Ordering::AcqRel);
        if let Some(metrics) = &self.inner.metrics {
            metrics.connections_open(self.inner.listener).inc();
        }
        let mark = Arc::new(Mark::default());
        let socket = socket.map(Arc::new);
        let peer = peer.map(|peer| peer.ip());
        let proxy = peer.filter(|ip| self.inner.sources.is_trusted_proxy(*ip));
        let admission = if before >= self.accept_max() {
            None
        } else {
            let source = match proxy {
                Some(_) => None,
                None => peer.map(Source::of),
            };
            let verdict = lock(&self.inner.book).admit(source, mark.clone(), socket.clone());
            if let Some(victim) = verdict.shed {
                self.shed(&victim);
            }
            Some(verdict.admission)
        };
        let slot = ConnSlot {
            cap: self.clone(),
            admission,
            mark,
            socket,
            proxy,
        };
        if slot.closes_at_once() {
            self.refused(slot.refusal().unwrap_or(Refused::Cap));
        }
        slot
    }

    /// [`Self::admit`] for a TCP connection just accepted on `stream`.
    pub fn admit_stream(&self, stream: &tokio::net::TcpStream) -> ConnSlot {
        // A second handle on the same socket, to shut it down from outside
        // (shedding, the watchdog); the connection's reads then end and
        // its server closes it.
        let socket = socket2::SockRef::from(stream).try_clone().ok();
        self.admit(stream.peer_addr().ok(), socket)
    }

    /// Closes an unauthenticated connection to make room (see the module
    /// docs): its reads end, and its server closes it.
    fn shed(&self, victim: &socket2::Socket) {
        let _ = victim.shutdown(std::net::Shutdown::Both);
        if let Some(metrics) = &self.inner.metrics {
            metrics.connection_shed(self.inner.listener);
        }
        tracing::debug!(
            listener = self.inner.listener,
            "unauthenticated connection shed near the connection cap"
        );
    }

    /// For `HttpServer::on_connect`: admits the connection, puts its slot
    /// (and the state [`ConnectionGate`] reads) into its extensions, which
    /// live as long as the connection, and starts its watchdog; a
    /// connection refused at once is shut down here. `io` is what actix
    /// hands `on_connect` (a TCP stream on plain listeners).
    pub fn on_connect(&self, io: &dyn std::any::Any, extensions: &mut Extensions) {
        let slot = match io.downcast_ref::<tokio::net::TcpStream>() {
            Some(stream) => self.admit_stream(stream),
            None => self.admit(None, None),
        };
        if slot.closes_at_once() {
            slot.close();
        }
        extensions.insert(slot.state());
        self.watch(&slot, extensions);
        extensions.insert(slot);
    }

    /// Starts the next-head watchdog of the connection holding `slot`
    /// (when configured), its state in the connection's `extensions`.
    /// Runs on the connection's own worker (a local task).
    pub fn watch(&self, slot: &ConnSlot, extensions: &mut Extensions) {
        let (Some(limit), Some(socket)) = (self.inner.next_head, &slot.socket) else {
            return;
        };
        let state = Rc::new(Idle {
            mark: slot.mark.clone(),
            last_done: Cell::new(None),
            socket: socket.clone(),
        });
        tokio::task::spawn_local(watchdog(Rc::downgrade(&state), limit));
        extensions.insert(IdleGuard(state));
    }

    /// Counts a connection or request refused for `reason`.
    pub fn refused(&self, reason: Refused) {
        if let Some(metrics) = &self.inner.metrics {
            metrics.connection_refused(self.inner.listener, reason.label());
        }
        tracing::debug!(
            listener = self.inner.listener,
            max = self.inner.max,
            per_source = self.inner.sources.per_source(),
            reason = reason.label(),
            "connection refused"
        );
    }

    /// The answer to a connection over the cap or its source's share.
    fn over(&self, reason: Refused) -> TooManyConnections {
        match reason {
            Refused::Cap => TooManyConnections::new(self.inner.max),
            Refused::Source => TooManyConnections::per_source(self.inner.sources.per_source()),
        }
    }

    /// Counts a request of `source` through a trusted proxy in flight,
    /// unless the source has its share in flight.
    fn enter(&self, source: Source) -> Option<InFlightGuard> {
        lock(&self.inner.in_flight)
            .enter(source)
            .then(|| InFlightGuard {
                cap: self.clone(),
                source,
            })
    }
}

/// Marks the connection `req` came on as authenticated (a valid run token,
/// admin JWT or web session): it is never shed (see the module docs).
/// Call where authentication succeeds.
pub fn mark_authenticated(req: &HttpRequest) {
    if let Some(state) = req.conn_data::<ConnState>() {
        state.mark.authenticate();
    }
}

/// A request of a forwarded client, counted in flight until dropped.
struct InFlightGuard {
    cap: ConnectionCap,
    source: Source,
}

impl Drop for InFlightGuard {
    fn drop(&mut self) {
        lock(&self.cap.inner.in_flight).leave(self.source);
    }
}

/// What a connection's watchdog watches.
struct Idle {
    /// Whether a request is being served or streaming its response body.
    mark: Arc<Mark>,
    /// When the last response body was written out.
    last_done: Cell<Option<Instant>>,
    socket: Closer,
}

/// The watchdog's state, in the connection's extensions (dropped with the
/// connection, which ends the watchdog).
#[derive(Clone)]
struct IdleGuard(Rc<Idle>);

/// Marks a request done when its response body is dropped (written out,
/// or abandoned): for the connection's shedding and its watchdog, and
/// behind a trusted proxy for its client's requests in flight.
struct Done {
    mark: Option<Arc<Mark>>,
    idle: Option<Rc<Idle>>,
    _in_flight: Option<InFlightGuard>,
}

impl Drop for Done {
    fn drop(&mut self) {
        if let Some(mark) = &self.mark {
            mark.leave();
        }
        if let Some(idle) = &self.idle {
            idle.last_done.set(Some(Instant::now()));
        }
    }
}

async fn watchdog(state: Weak<Idle>, limit: Duration) {
    loop {
        let Some(idle) = state.upgrade() else {
            return;
        };
        let wait = match (idle.mark.busy(), idle.last_done.get()) {
            (false, Some(done)) => match limit.checked_sub(done.elapsed()) {
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

/// A response body that marks its request done (see [`Done`]) when
/// dropped.
pub struct Tracked {
    body: BoxBody,
    _done: Done,
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
    /// `None`: accepted past [`ConnectionCap::accept_max`].
    admission: Option<Admission>,
    mark: Arc<Mark>,
    socket: Option<Closer>,
    /// The peer, when it is a trusted proxy.
    proxy: Option<IpAddr>,
}

impl fmt::Debug for ConnSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConnSlot")
            .field("admission", &self.admission)
            .field("proxied", &self.proxy.is_some())
            .finish()
    }
}

impl ConnSlot {
    /// Why the connection's first request is to be answered 503 and the
    /// connection closed, if it is.
    pub fn refusal(&self) -> Option<Refused> {
        match self.admission {
            None | Some(Admission::OverCap) => Some(Refused::Cap),
            Some(Admission::OverShare(_) | Admission::Closed) => Some(Refused::Source),
            Some(Admission::Held(_)) => None,
        }
    }

    /// Whether the connection is to be closed without an answer (past
    /// [`ConnectionCap::accept_max`], or past what its source may have
    /// waiting for an answer).
    pub fn closes_at_once(&self) -> bool {
        matches!(self.admission, None | Some(Admission::Closed))
    }

    /// Shuts the connection down (when its socket handle is here).
    pub fn close(&self) {
        if let Some(socket) = &self.socket {
            let _ = socket.shutdown(std::net::Shutdown::Both);
        }
    }

    /// What [`ConnectionGate`] reads from a connection's extensions.
    pub fn state(&self) -> ConnState {
        ConnState {
            cap: self.cap.clone(),
            refusal: self.refusal(),
            mark: self.mark.clone(),
            proxy: self.proxy,
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
        if let Some(admission @ (Admission::Held(_) | Admission::OverShare(_))) = self.admission {
            lock(&inner.book).release(admission);
        }
    }
}

/// A connection's listener cap, whether it came in over it (or its
/// source's share), its mark, and its peer when that is a trusted proxy,
/// in the connection's extensions.
#[derive(Debug, Clone)]
pub struct ConnState {
    cap: ConnectionCap,
    refusal: Option<Refused>,
    mark: Arc<Mark>,
    proxy: Option<IpAddr>,
}

/// What a client was over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Over {
    /// The listener's cap of open connections.
    Cap(usize),
    /// Its share of the listener's open connections.
    Share(usize),
    /// Behind a trusted proxy, its share of requests in flight.
    ForwardedShare(usize),
}

/// The answer to a request on a connection over the cap or its source's
/// share, or of a proxied client with its share of requests in flight.
#[derive(Debug)]
pub struct TooManyConnections {
    over: Over,
}

impl TooManyConnections {
    /// The answer on a listener capped at `max` connections.
    pub fn new(max: usize) -> Self {
        Self {
            over: Over::Cap(max),
        }
    }

    /// The answer to a client holding its `share` of connections.
    pub fn per_source(share: usize) -> Self {
        Self {
            over: Over::Share(share),
        }
    }

    /// The answer to a client behind a trusted proxy with its `share` of
    /// requests in flight; the proxy's connection stays open.
    pub fn forwarded(share: usize) -> Self {
        Self {
            over: Over::ForwardedShare(share),
        }
    }
}

impl fmt::Display for TooManyConnections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.over {
            Over::Cap(max) => write!(
                f,
                "Service Unavailable: this listener is at its cap of {max} open connections (max_connections); retry shortly or reuse an open connection"
            ),
            Over::Share(share) => write!(
                f,
                "Service Unavailable: this client address holds its share of {share} open connections of this listener (max_connections_per_source); retry shortly or reuse an open connection"
            ),
            Over::ForwardedShare(share) => write!(
                f,
                "Service Unavailable: this client has its share of {share} requests in flight (max_connections_per_source); retry shortly"
            ),
        }
    }
}

impl ResponseError for TooManyConnections {
    fn status_code(&self) -> StatusCode {
        StatusCode::SERVICE_UNAVAILABLE
    }

    /// A JSON-RPC error (an MCP client shows its message; any HTTP client
    /// sees the status), and the connection closes after it (but a trusted
    /// proxy's).
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
        let mut response = HttpResponse::build(self.status_code());
        response.insert_header(("Retry-After", RETRY_AFTER_SECS.to_string()));
        if !matches!(self.over, Over::ForwardedShare(_)) {
            response.force_close();
        }
        response.json(body)
    }
}

/// The middleware answering requests on connections over their
/// listener's cap or their source's share, and counting the requests of
/// clients behind trusted proxies (see the module docs); wrap every app of
/// a capped listener with it. Connections without a [`ConnState`] pass.
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
        let mut in_flight = None;
        let mut mark = None;
        if let Some(state) = req.conn_data::<ConnState>() {
            if let Some(reason) = state.refusal {
                state.cap.refused(reason);
                return Box::pin(ready(Err(state.cap.over(reason).into())));
            }
            if let Some(proxy) = state.proxy {
                let source = state
                    .cap
                    .inner
                    .sources
                    .forwarded_source(proxy, req.headers());
                match state.cap.enter(source) {
                    Some(guard) => in_flight = Some(guard),
                    None => {
                        state.cap.refused(Refused::Source);
                        let share = state.cap.inner.sources.per_source();
                        return Box::pin(ready(Err(TooManyConnections::forwarded(share).into())));
                    }
                }
            }
            state.mark.enter();
            mark = Some(state.mark.clone());
        }
        let done = Done {
            mark,
            idle: req
                .conn_data::<IdleGuard>()
                .map(|guard| Rc::clone(&guard.0)),
            _in_flight: in_flight,
        };
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
