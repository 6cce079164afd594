//! Dedicated mode: a port per run, without a thread (or an `HttpServer`)
//! per run.
//!
//! A small pool of arbiters (threads) serves every run. Each builds one
//! actix-http `HttpService` over an actix-web `App` when it starts; a run's
//! listener is an accept loop (a task) on one of them, and the connections
//! it accepts are dealt round-robin to every worker (a run with many
//! connections uses every core, not just its listener's), each handed to
//! that worker's service, tagged with its run through the connection's
//! extensions. An idle run therefore costs a socket, a task and its actor,
//! not a server.
//!
//! Each run's port has its own connection cap (`max_connections_per_run`)
//! and each client its share of it (`max_connections_per_source`, see
//! `corkboard_telemetry::conn`): its accept loop counts every connection
//! (and may shed an unauthenticated one near the cap), the connection
//! carries its slot, and the workers' apps answer a connection over the
//! cap or its share 503 and close it; what the cap says to close at once
//! (past twice the cap, or a client with too many waiting for that
//! answer) the accept loop closes.
//!
//! When the run's actor stops, the accept loop ends (the port closes) and
//! every open connection is wound down: its reads report end-of-stream, so
//! the HTTP dispatcher finishes the response it is writing and closes.

use crate::actor::{Census, RunHandle};
use crate::bridge::{self, Bridge};
use crate::error::GatewayError;
use actix::Arbiter;
use actix_http::{Extensions, HttpService, KeepAlive, Protocol};
use actix_service::{Service, ServiceFactory, map_config};
use actix_web::dev::AppConfig;
use actix_web::{App, HttpRequest, HttpResponse, web};
use corkboard_telemetry::HttpTelemetry;
use corkboard_telemetry::conn::{ConnSlot, ConnectionCap, ConnectionGate};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

/// How long a connection may take to finish its last response once its
/// run stopped.
const CLOSE_GRACE: Duration = Duration::from_secs(2);
/// Pause after an accept error such as "too many open files", so the loop
/// does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// A run as its listener and connections see it.
pub(crate) struct RunConn {
    pub run: RunHandle,
    /// Turns true when the run's actor stopped.
    pub stop: watch::Receiver<bool>,
    /// The port's open connections, capped.
    pub cap: ConnectionCap,
}

/// How the workers' HTTP service runs, fixed when the gateway starts.
#[derive(Clone)]
pub(crate) struct ServiceSettings {
    /// Where the ports' HTTP requests are counted (spans either way).
    pub metrics: Option<corkboard_telemetry::Metrics>,
    pub keep_alive: Duration,
    pub header_timeout: Duration,
}

/// What a worker is handed.
enum Intake {
    /// A run's listener: run its accept loop here.
    Listen {
        listener: std::net::TcpListener,
        run: Arc<RunConn>,
    },
    /// A connection another worker accepted: serve it here.
    Connection {
        stream: std::net::TcpStream,
        peer: SocketAddr,
        run: Arc<RunConn>,
        slot: ConnSlot,
    },
}

/// Every worker's intake, for dealing out work round-robin.
struct Intakes {
    senders: Vec<mpsc::UnboundedSender<Intake>>,
    next: AtomicUsize,
}

impl Intakes {
    fn next(&self) -> usize {
        self.next.fetch_add(1, Ordering::Relaxed) % self.senders.len()
    }
}

/// The threads serving dedicated ports.
pub(crate) struct WorkerPool {
    arbiters: Vec<Arbiter>,
    intakes: Arc<Intakes>,
}

impl WorkerPool {
    pub(crate) fn start(
        count: usize,
        bridge: Weak<Bridge>,
        census: Arc<Census>,
        settings: ServiceSettings,
    ) -> Self {
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..count.max(1))
            .map(|_| mpsc::unbounded_channel::<Intake>())
            .unzip();
        let intakes = Arc::new(Intakes {
            senders,
            next: AtomicUsize::new(0),
        });
        let arbiters = receivers
            .into_iter()
            .enumerate()
            .map(|(me, mut intake)| {
                let arbiter = Arbiter::new();
                let bridge = bridge.clone();
                let settings = settings.clone();
                let census = census.clone();
                let intakes = Arc::clone(&intakes);
                // The service is not `Send`: it is built on the worker's
                // own thread and never leaves it.
                arbiter.spawn_fn(move || {
                    actix_rt::spawn(async move {
                        let service = match build_service(bridge, settings).await {
                            Ok(service) => Rc::new(service),
                            Err(()) => {
                                tracing::error!("gateway worker: the HTTP service failed to start");
                                return;
                            }
                        };
                        let worker = WorkerRef {
                            me,
                            intakes,
                            census,
                        };
                        while let Some(work) = intake.recv().await {
                            worker.take(&service, work);
                        }
                    });
                });
                arbiter
            })
            .collect();
        Self { arbiters, intakes }
    }

    /// Serves `run` on `listener` from one of the workers.
    pub(crate) fn listen(
        &self,
        listener: std::net::TcpListener,
        run: Arc<RunConn>,
    ) -> Result<(), GatewayError> {
        listener
            .set_nonblocking(true)
            .map_err(|e| GatewayError::Worker(format!("listener: {e}")))?;
        let index = self.intakes.next();
        self.intakes.senders[index]
            .send(Intake::Listen { listener, run })
            .map_err(|_| GatewayError::Worker("the gateway worker has stopped".to_owned()))
    }

    pub(crate) fn stop(&self) {
        for arbiter in &self.arbiters {
            arbiter.stop();
        }
    }
}

/// One worker, as its own tasks see it.
#[derive(Clone)]
struct WorkerRef {
    me: usize,
    intakes: Arc<Intakes>,
    census: Arc<Census>,
}

impl WorkerRef {
    fn take<S>(&self, service: &Rc<S>, work: Intake)
    where
        S: Service<(RunStream, Protocol, Option<SocketAddr>), Response = ()> + 'static,
    {
        match work {
            Intake::Listen { listener, run } => {
                actix_rt::spawn(accept_loop(service.clone(), listener, run, self.clone()));
            }
            Intake::Connection {
                stream,
                peer,
                run,
                slot,
            } => match TcpStream::from_std(stream) {
                Ok(stream) => self.serve(service, stream, peer, run, slot),
                Err(err) => {
                    tracing::warn!(run = %run.run.state.key, error = %err, "gateway connection could not be taken over");
                }
            },
        }
    }

    fn serve<S>(
        &self,
        service: &Rc<S>,
        stream: TcpStream,
        peer: SocketAddr,
        run: Arc<RunConn>,
        slot: ConnSlot,
    ) where
        S: Service<(RunStream, Protocol, Option<SocketAddr>), Response = ()> + 'static,
    {
        let io = RunStream::new(stream, run, slot);
        actix_rt::spawn(serve_connection(
            service.clone(),
            io,
            peer,
            self.census.clone(),
        ));
    }

    /// Serves an accepted connection here or hands it to the next worker
    /// in turn (one hand-off per connection, not per request).
    fn deal<S>(
        &self,
        service: &Rc<S>,
        stream: TcpStream,
        peer: SocketAddr,
        run: &Arc<RunConn>,
        slot: ConnSlot,
    ) where
        S: Service<(RunStream, Protocol, Option<SocketAddr>), Response = ()> + 'static,
    {
        let to = self.intakes.next();
        if to == self.me {
            return self.serve(service, stream, peer, run.clone(), slot);
        }
        let handed = stream.into_std().map(|stream| Intake::Connection {
            stream,
            peer,
            run: run.clone(),
            slot,
        });
        match handed {
            Ok(work) => {
                if let Err(mpsc::error::SendError(work)) = self.intakes.senders[to].send(work) {
                    // That worker has stopped: serve it here after all.
                    self.take(service, work);
                }
            }
            Err(err) => {
                tracing::warn!(run = %run.run.state.key, error = %err, "gateway connection could not be handed on");
            }
        }
    }
}

/// The run a connection belongs to, in its extensions.
#[derive(Clone)]
struct ConnRun(Arc<RunConn>);

/// The request path, for the worker's app (weak: the workers must not
/// keep a stopped gateway's alive).
struct BridgeRef(Weak<Bridge>);

async fn build_service(
    bridge: Weak<Bridge>,
    settings: ServiceSettings,
) -> Result<
    impl Service<
        (RunStream, Protocol, Option<SocketAddr>),
        Response = (),
        Error = actix_http::error::DispatchError,
    >,
    (),
> {
    let telemetry = match settings.metrics {
        Some(metrics) => HttpTelemetry::new(metrics),
        None => HttpTelemetry::without_metrics(),
    };
    let app = App::new()
        .wrap(ConnectionGate)
        .wrap(telemetry)
        .app_data(web::Data::new(BridgeRef(bridge)))
        .default_service(web::to(dedicated_request));
    let factory = HttpService::build()
        .keep_alive(KeepAlive::Timeout(settings.keep_alive))
        .client_request_timeout(settings.header_timeout)
        // A client that closes its side is gone: drop its pending request
        // (releasing the slot) instead of computing an answer nobody reads.
        .h1_allow_half_closed(false)
        .on_connect_ext(|io: &RunStream, ext: &mut Extensions| {
            ext.insert(ConnRun(io.run.clone()));
            ext.insert(io.slot.state());
            io.run.cap.watch(&io.slot, ext);
        })
        .finish(map_config(app, |()| AppConfig::default()));
    factory.new_service(()).await
}

async fn dedicated_request(
    req: HttpRequest,
    payload: web::Payload,
    bridge: web::Data<BridgeRef>,
) -> HttpResponse {
    let run = req.conn_data::<ConnRun>().map(|c| c.0.clone());
    let name = run
        .as_ref()
        .map_or_else(String::new, |r| r.run.state.key.run.to_string());
    let Some(bridge) = bridge.0.upgrade() else {
        return HttpResponse::ServiceUnavailable().finish();
    };
    let incoming = bridge::incoming(req, name);
    let Some(run) = run else {
        return bridge::not_found(&bridge, incoming, "this connection belongs to no run");
    };
    if incoming.req.path() != "/mcp" {
        return bridge::not_found(&bridge, incoming, "this run's MCP endpoint is /mcp");
    }
    // One binding snapshot for the caller's resolution and its exchange.
    let binding = bridge.binding.load();
    let key = &run.run.state.key;
    let caller = match bridge::authenticate(&bridge, &incoming, &binding, Some(key)).await {
        Ok(caller) => caller,
        Err(refusal) => return bridge::refuse(&bridge, incoming, refusal),
    };
    bridge::serve(&bridge, &run.run, incoming, payload, binding, caller).await
}

/// Counts a live listener or connection for as long as it exists.
struct Counted<'a>(&'a AtomicUsize);

impl<'a> Counted<'a> {
    fn new(counter: &'a AtomicUsize) -> Self {
        counter.fetch_add(1, Ordering::Relaxed);
        Self(counter)
    }
}

impl Drop for Counted<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn accept_loop<S>(
    service: Rc<S>,
    listener: std::net::TcpListener,
    run: Arc<RunConn>,
    worker: WorkerRef,
) where
    S: Service<(RunStream, Protocol, Option<SocketAddr>), Response = ()> + 'static,
{
    let counted = Counted::new(&worker.census.listeners);
    let listener = match tokio::net::TcpListener::from_std(listener) {
        Ok(listener) => listener,
        Err(err) => {
            tracing::error!(run = %run.run.state.key, error = %err, "gateway listener could not start");
            drop(counted);
            run.run.state.listening.send_replace(false);
            return;
        }
    };
    let mut stop = run.stop.clone();
    loop {
        tokio::select! {
            // An error means the actor is gone: the same as stopped.
            _ = stop.wait_for(|stopped| *stopped) => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let slot = run.cap.admit_stream(&stream);
                    if slot.closes_at_once() {
                        // Refused at accept (counted): closed, unanswered.
                        continue;
                    }
                    // One-buffer responses still meet delayed ACKs on
                    // keep-alive connections without this.
                    let _ = stream.set_nodelay(true);
                    worker.deal(&service, stream, peer, &run, slot);
                }
                Err(err) => {
                    tracing::warn!(run = %run.run.state.key, error = %err, "gateway accept failed");
                    tokio::time::sleep(ACCEPT_BACKOFF).await;
                }
            },
        }
    }
    // Closing the run's port and leaving the census, then saying so:
    // whoever stops the run waits for this before reporting the run
    // stopped, and the runner's stats read on another thread right after
    // must not still count this listener.
    drop(listener);
    drop(counted);
    run.run.state.listening.send_replace(false);
}

async fn serve_connection<S>(service: Rc<S>, io: RunStream, peer: SocketAddr, census: Arc<Census>)
where
    S: Service<(RunStream, Protocol, Option<SocketAddr>), Response = ()> + 'static,
{
    let _counted = Counted::new(&census.connections);
    let closing = io.closing.clone();
    let mut stop = io.run.stop.clone();
    let dispatch = service.call((io, Protocol::Http1, Some(peer)));
    tokio::pin!(dispatch);
    tokio::select! {
        _ = &mut dispatch => return,
        _ = stop.wait_for(|stopped| *stopped) => {}
    }
    // From now on reads see end-of-stream: the dispatcher writes out what
    // it has and closes the connection.
    closing.store(true, Ordering::Release);
    let _ = tokio::time::timeout(CLOSE_GRACE, dispatch).await;
}

/// A run's TCP connection, carrying the run and a switch that ends reads
/// when the run stops.
pub(crate) struct RunStream {
    io: TcpStream,
    run: Arc<RunConn>,
    closing: Arc<AtomicBool>,
    /// Counted in the port's cap for as long as the connection lives.
    slot: ConnSlot,
}

impl RunStream {
    fn new(io: TcpStream, run: Arc<RunConn>, slot: ConnSlot) -> Self {
        Self {
            io,
            run,
            closing: Arc::new(AtomicBool::new(false)),
            slot,
        }
    }
}

impl AsyncRead for RunStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.closing.load(Ordering::Acquire) {
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for RunStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
