//! The request path of a run: from an HTTP worker, through the run's
//! admission, to the MCP engine, with one correlated answer guaranteed.
//!
//! The gateway is a typed router, not a wrapper around an opaque handler.
//! It goes through the studio endpoint's phases in the studio's order:
//! the transport checks and the caller from the headers alone
//! ([`authenticate`]: the token must stand for exactly this run), only
//! then the body, read once under the endpoint's size limit and deadline
//! ([`corkboard_mcp::McpEndpoint::read_body`]), then the run's admission,
//! and the parsed request handed to the endpoint's
//! [`exchange`](corkboard_mcp::McpEndpoint::exchange) with a
//! [`RunPrincipal`] naming the run and the binding snapshot it is served
//! with. The engine's [`Summary`](corkboard_mcp::Summary) says how the
//! exchange ended, so nothing re-parses the response to log it.
//!
//! Every request that reaches a run gets exactly one correlated answer
//! (same JSON-RPC id): the engine's response, or a [`Refusal`] when the run
//! is gone or draining ("run ended"), when its rate limit is reached, or
//! when the run is stopped while the request is in flight. Admission does
//! not message the run's actor (see [`crate::actor`]), so a busy or stalled
//! actor thread holds up no request. A request whose client disconnects is
//! dropped by the HTTP server; its ticket and log guard release the slot
//! and record the outcome. Nothing waits without a bound.

use crate::actor::{Refused, RunHandle, Ticket};
use crate::backend::{GatewayBackend, RunPrincipal};
use crate::binding::{Binding, BindingCell};
use crate::refusals::{other_run, rate_limited, run_ended};
use actix_web::{HttpRequest, HttpResponse, web};
use bytes::Bytes;
use corkboard_board::TenantId;
use corkboard_grants::ResolvedGrant;
use corkboard_grants::RunKey;
use corkboard_grants::limiter::RateLimiter;
use corkboard_mcp::{Admitted, McpEndpoint, Refusal, RequestHead, Transport};
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;

/// A request whose body has been read.
pub(crate) struct Incoming {
    pub req: HttpRequest,
    pub body: Bytes,
    pub log: RequestLog,
}

impl Incoming {
    /// What the request asks for, for a refusal's id and log line: read
    /// only when the request is refused before the engine runs it.
    fn head(&self, binding: &Binding) -> RequestHead {
        let mut head = corkboard_mcp::peek(&self.body, |name| binding.backend().tool_label(name));
        if self.body.is_empty() {
            head.method = match *self.req.method() {
                actix_web::http::Method::DELETE => "session/delete",
                actix_web::http::Method::GET => "get",
                _ => "none",
            };
        }
        head
    }
}

/// The one request-log event of a request. Dropped without
/// [`RequestLog::finish`] (the client went away and the HTTP server
/// dropped the handler), it records that instead.
pub(crate) struct RequestLog {
    started: Instant,
    method: &'static str,
    tool: Option<String>,
    tenant: Option<TenantId>,
    run: String,
    done: bool,
}

impl RequestLog {
    fn new(run: String) -> Self {
        Self {
            started: Instant::now(),
            method: "none",
            tool: None,
            tenant: None,
            run,
            done: false,
        }
    }

    pub(crate) fn set_run(&mut self, key: &RunKey) {
        self.tenant = Some(key.tenant.clone());
        self.run = key.run.to_string();
    }

    fn emit(&self, status: u16, outcome: &str) {
        tracing::info!(
            method = self.method,
            tool = self.tool.as_deref().unwrap_or(""),
            tenant = self.tenant.as_ref().map_or("", TenantId::as_str),
            run = self.run.as_str(),
            outcome,
            status,
            latency_us = u64::try_from(self.started.elapsed().as_micros()).unwrap_or(u64::MAX),
            "gateway request"
        );
    }

    pub(crate) fn finish(mut self, status: u16, outcome: &str) {
        self.done = true;
        self.emit(status, outcome);
    }
}

impl Drop for RequestLog {
    fn drop(&mut self) {
        if !self.done {
            self.emit(499, "client_disconnected");
        }
    }
}

/// What the request path needs of its gateway, and all it sees of it:
/// the MCP endpoint, the binding new requests take their snapshot of,
/// and the rate limiter admission charges. The gateway owns it and hands
/// it to its listeners (the dedicated workers hold it weakly).
pub(crate) struct Bridge {
    pub endpoint: McpEndpoint<GatewayBackend>,
    pub binding: BindingCell,
    pub limiter: Arc<dyn RateLimiter>,
}

/// What the headers established about a request before its body is
/// read: the endpoint's transport checks passed and the caller resolved.
pub(crate) struct Caller {
    admitted: Admitted,
    grant: ResolvedGrant,
    span: tracing::Span,
    started: Instant,
}

/// Starts the request log of a request whose body is not read yet. `run`
/// names the run for the log until the request is routed.
pub(crate) fn incoming(req: HttpRequest, run: String) -> Incoming {
    Incoming {
        req,
        body: Bytes::new(),
        log: RequestLog::new(run),
    }
}

/// The header phases of the studio endpoint, in its order: its transport
/// checks ([`corkboard_mcp::McpEndpoint::precheck`]), then the caller
/// through the one credential path, accepted only for the run `expected`
/// (when known). Nothing of the body has been read: a caller without a
/// valid token for this run costs no body buffer and cannot hold one open,
/// so these refusals carry no request id (`null`), as on the studio
/// endpoint.
pub(crate) async fn authenticate(
    bridge: &Bridge,
    incoming: &Incoming,
    binding: &Binding,
    expected: Option<&RunKey>,
) -> Result<Caller, Refusal> {
    let started = Instant::now();
    let admitted = bridge.endpoint.precheck(&incoming.req)?;
    // The credential path records tenant, run and grant into this span.
    let span = corkboard_telemetry::mcp::mcp_span_open();
    let grant = resolve(binding, &incoming.req, expected)
        .instrument(span.clone())
        .await?;
    // Its connection is not shed near the port's connection cap.
    corkboard_telemetry::conn::mark_authenticated(&incoming.req);
    Ok(Caller {
        admitted,
        grant,
        span,
        started,
    })
}

impl Caller {
    pub(crate) fn grant(&self) -> &ResolvedGrant {
        &self.grant
    }
}

/// Answers `incoming` with `refusal`, correlated with its id (when its
/// body was read).
pub(crate) fn refuse(bridge: &Bridge, mut incoming: Incoming, refusal: Refusal) -> HttpResponse {
    let head = incoming.head(&bridge.binding.load());
    incoming.log.method = head.method;
    incoming.log.tool = head.tool.map(str::to_owned);
    incoming
        .log
        .finish(refusal.status.as_u16(), refusal.outcome);
    refusal.response(head.id.as_deref())
}

/// Resolves the request's token through the one credential path, and
/// accepts it only for the run `expected` (when known).
async fn resolve(
    binding: &Binding,
    req: &HttpRequest,
    expected: Option<&RunKey>,
) -> Result<ResolvedGrant, Refusal> {
    let bearer = corkboard_mcp::bearer_token(req.headers());
    let grant = corkboard_grants::resolve_bearer(
        binding.registry().as_ref(),
        bearer,
        binding.store_timeout(),
    )
    .await
    .map_err(|rejection| Refusal::credential(&rejection, Transport::Http))?;
    if let Some(key) = expected
        && (grant.grant().tenant != key.tenant || grant.grant().run != key.run)
    {
        return Err(other_run());
    }
    Ok(grant)
}

/// Reads the body of an authenticated request (bounded by the endpoint's
/// body limit and deadline), admits it to its run, routes it to the engine
/// with the `binding` snapshot its caller was resolved with, and answers
/// it.
pub(crate) async fn serve(
    bridge: &Bridge,
    run: &RunHandle,
    mut incoming: Incoming,
    payload: web::Payload,
    binding: Arc<Binding>,
    caller: Caller,
) -> HttpResponse {
    let key = &run.state.key;
    incoming.log.set_run(key);
    let Caller {
        admitted,
        grant,
        span,
        started,
    } = caller;
    if admitted.has_body() {
        match bridge.endpoint.read_body(&incoming.req, payload).await {
            Ok(body) => incoming.body = body,
            Err(refusal) => return refuse(bridge, incoming, refusal.outcome("error")),
        }
    }
    let mut ticket = match run.admit(bridge.limiter.as_ref()).await {
        Ok(ticket) => ticket,
        Err(Refused::Ended(reason)) => {
            return refuse(bridge, incoming, run_ended(key, Some(reason), false));
        }
        Err(Refused::RateLimited(limited)) => {
            return refuse(bridge, incoming, rate_limited(key, limited));
        }
    };
    let principal = RunPrincipal::new(grant, binding)
        .with_batch_gate(run.clone(), bridge.limiter.clone())
        .with_upstreams()
        .await;
    let exchange = {
        let exchange = bridge
            .endpoint
            .exchange(&incoming.req, admitted, &incoming.body, &principal)
            .instrument(span.clone());
        tokio::pin!(exchange);
        tokio::select! {
            biased;
            exchange = &mut exchange => Some(exchange),
            () = ticket.cancelled() => None,
        }
    };
    let Some(exchange) = exchange else {
        return refuse(bridge, incoming, run_ended(key, None, true));
    };
    bridge.endpoint.observe(&span, &exchange, started.elapsed());
    // A call that relays goes on inside its event stream: it stays in
    // flight (the ticket travels with the stream), and the run's end stops
    // it there with the same correlated "run ended" error.
    let streaming = exchange.summary.outcome == "stream";
    let ended = streaming.then(|| {
        let head = incoming.head(&bridge.binding.load());
        let refusal = run_ended(key, None, true);
        let error = corkboard_mcp::error_response(head.id.as_deref(), &refusal.error);
        sse_event(&error)
    });
    let Incoming { mut log, .. } = incoming;
    let summary = &exchange.summary;
    log.method = summary.method;
    log.tool = summary.tool.clone();
    let status = exchange.status();
    match (ended, summary.settled.clone()) {
        // A streamed call is logged when its stream ends, with the call's
        // own outcome.
        (Some(ended), Some(settled)) => {
            let done = Settle {
                log,
                status,
                settled,
                span: span.clone(),
            };
            guard_stream(exchange.response, ticket, ended, Some(done))
        }
        (ended, _) => {
            log.finish(status, summary.outcome);
            match ended {
                Some(ended) => guard_stream(exchange.response, ticket, ended, None),
                None => {
                    drop(ticket);
                    exchange.response
                }
            }
        }
    }
}

/// What finishes a streamed call's request log when its stream ends: the
/// call's settled summary (its tool and outcome), `run_ended` when the
/// run cut it off; dropped unfinished (the agent went away), the log says
/// so itself.
struct Settle {
    log: RequestLog,
    status: u16,
    settled: std::sync::Arc<std::sync::OnceLock<corkboard_mcp::Summary>>,
    /// The request's span, so the late log line keeps its request id.
    span: tracing::Span,
}

impl Settle {
    fn finish(self, cut: bool) {
        let _entered = self.span.enter();
        let mut log = self.log;
        match self.settled.get() {
            Some(summary) if !cut => {
                if summary.tool.is_some() {
                    log.tool = summary.tool.clone();
                }
                log.finish(self.status, summary.outcome);
            }
            _ if cut => log.finish(self.status, "run_ended"),
            _ => log.finish(self.status, "stream_ended"),
        }
    }
}

/// `response`'s event stream, held in flight by `ticket` and cut off with
/// the event `ended` when the run ends. Dropping the inner body (here, or
/// when the agent disconnects) stops the call behind it.
fn guard_stream(
    response: HttpResponse,
    ticket: Ticket,
    ended: bytes::Bytes,
    settle: Option<Settle>,
) -> HttpResponse {
    use actix_web::body::{BodyStream, MessageBody};
    let (head, body) = response.into_parts();
    let start = Some((body, ticket, ended, settle));
    let events = futures_util::stream::unfold(start, |state| async move {
        let (mut body, mut ticket, ended, settle) = state?;
        tokio::select! {
            biased;
            () = ticket.cancelled() => {
                if let Some(settle) = settle {
                    settle.finish(true);
                }
                Some((Ok::<_, actix_web::Error>(ended), None))
            }
            chunk = std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_next(cx)) => match chunk {
                Some(Ok(bytes)) => Some((Ok(bytes), Some((body, ticket, ended, settle)))),
                Some(Err(e)) => Some((Err(actix_web::error::ErrorInternalServerError(e.to_string())), None)),
                None => {
                    if let Some(settle) = settle {
                        settle.finish(false);
                    }
                    None
                }
            },
        }
    });
    head.set_body(BodyStream::new(events)).map_into_boxed_body()
}

/// One SSE event carrying one JSON-RPC message.
fn sse_event(message: &[u8]) -> bytes::Bytes {
    let mut event = Vec::with_capacity(message.len() + 24);
    event.extend_from_slice(b"event: message\ndata: ");
    event.extend_from_slice(message);
    event.extend_from_slice(b"\n\n");
    bytes::Bytes::from(event)
}

/// A bare JSON-RPC error response for paths that serve nothing.
pub(crate) fn not_found(bridge: &Bridge, incoming: Incoming, what: &str) -> HttpResponse {
    refuse(bridge, incoming, crate::refusals::not_found(what))
}
