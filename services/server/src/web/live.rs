//! `GET /v1/tenants/{tenant}/events`: a tenant's board events as
//! Server-Sent Events, authenticated and tenant-scoped exactly like the
//! board API (bearer JWT or web session).
//!
//! A stream opens with `retry:` and a `ready` event, sends a comment line
//! every [`HEARTBEAT`] (so proxies keep it open and a dead peer is noticed),
//! and ends after [`MAX_STREAM`] or when the server shuts down. The browser
//! then reconnects on its own, which re-checks the credential, and the page
//! re-fetches on every (re)connect, so nothing sent in between is missed.

use super::WebState;
use super::events::{BoardEvent, EventStream};
use crate::admin::ReadTenant;
use actix_web::HttpResponse;
use actix_web::http::header;
use actix_web::web::Bytes;
use corkboard_api::ApiError;
use futures_util::StreamExt;
use std::convert::Infallible;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::{Instant, Interval};

/// How often an idle stream sends a comment line.
pub const HEARTBEAT: Duration = Duration::from_secs(15);
/// Longest one stream stays open before the browser must reconnect.
pub const MAX_STREAM: Duration = Duration::from_secs(30 * 60);
/// Reconnection delay the browser is told to use.
const RETRY_MILLIS: u64 = 1000;

pub(super) async fn events(
    web_state: WebState,
    scope: ReadTenant,
) -> Result<HttpResponse, ApiError> {
    let tenant = scope.tenant;
    let stream = sse_stream(
        web_state.events().subscribe(&tenant),
        web_state.closing(),
        HEARTBEAT,
        MAX_STREAM,
    );
    Ok(HttpResponse::Ok()
        .insert_header((header::CONTENT_TYPE, "text/event-stream"))
        .insert_header((header::CACHE_CONTROL, "no-store"))
        // Reverse proxies (nginx) must pass events through as they come.
        .insert_header(("X-Accel-Buffering", "no"))
        .streaming(stream))
}

struct Sse {
    events: EventStream,
    heartbeat: Interval,
    deadline: Instant,
    closing: watch::Receiver<bool>,
    opened: bool,
}

/// The SSE body: `ready`, then events and heartbeats until `max` elapses,
/// the bus ends, or `closing` turns true.
pub fn sse_stream(
    events: EventStream,
    closing: watch::Receiver<bool>,
    heartbeat: Duration,
    max: Duration,
) -> impl futures_util::Stream<Item = Result<Bytes, Infallible>> + 'static {
    let now = Instant::now();
    let state = Sse {
        events,
        heartbeat: tokio::time::interval_at(now + heartbeat, heartbeat),
        deadline: now + max,
        closing,
        opened: false,
    };
    futures_util::stream::unfold(state, |mut s| async move {
        if !s.opened {
            s.opened = true;
            let hello = format!("retry: {RETRY_MILLIS}\nevent: ready\ndata: {{}}\n\n");
            return Some((Ok(Bytes::from(hello)), s));
        }
        if *s.closing.borrow() {
            return None;
        }
        let frame = tokio::select! {
            event = s.events.next() => event.map(|e: BoardEvent| e.sse_frame()),
            _ = s.heartbeat.tick() => Some(Bytes::from_static(b": heartbeat\n\n")),
            () = tokio::time::sleep_until(s.deadline) => None,
            _ = s.closing.changed() => None,
        }?;
        Some((Ok(frame), s))
    })
}
