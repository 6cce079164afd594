//! One actix actor per run: its lifecycle; and the run's shared state,
//! through which requests are admitted without messaging the actor.
//!
//! The actor owns its run's lifecycle: the timers that end the run by
//! themselves (expiry, idleness, a grant revoked elsewhere), the drain, and
//! stopping. It never sees an HTTP request: those are not `Send`.
//!
//! Admission is on the request's own thread ([`RunHandle::admit`]): an
//! actor round trip per request cost two cross-thread wake-ups and was
//! the largest single cost of the gateway path (services/bench/FINDINGS.md).
//! The run's [`RunState`] holds the in-flight count, the draining flag and
//! the cancellation signal as atomics and a `watch`, shared by the actor
//! and every request. A request gets a [`Ticket`]; the HTTP worker drops it
//! when done, however the request ends (answered, failed, client gone),
//! which releases the slot. The draining flag and the in-flight count are
//! both read and written with `SeqCst`, in opposite orders by the two
//! sides (a request counts itself, then checks the flag; a drain sets the
//! flag, then reads the count), so a drain either sees a request or the
//! request sees the drain: none slips past it.
//!
//! Stopping: `Drain` refuses new requests at once, waits for in-flight
//! ones up to the drain timeout (the last ticket to go tells the actor),
//! then fires the tickets' cancellation signal (their requests answer with
//! a correlated "run ended" error) and stops after a short grace. Stopping
//! closes the run's listener and connections and tells the run's
//! [`RunHost`] (the gateway, which removes the run from its table): the
//! actor knows its gateway only through that trait.

use crate::stop::StopReason;
use actix::prelude::*;
use corkboard_board::Timestamp;
use corkboard_grants::RunKey;
use corkboard_grants::limiter::{RateLimited, RateLimiter};
use corkboard_grants::{RegistryError, TokenHash, TokenRegistry};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

/// How a drain went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DrainReport {
    pub reason: StopReason,
    /// Requests in flight when the drain began.
    pub in_flight_at_start: u32,
    /// Of those, the ones still running at the drain deadline, which were
    /// told to answer "run ended".
    pub cancelled: u32,
    /// Requests that had not finished even after the cancellation grace.
    pub abandoned: u32,
}

/// The gateway as its run actors see it. Held weakly: a gateway that is
/// gone is not kept alive by its actors (then expiry drains the run
/// without a look-up, and nothing is told of the stop).
pub(crate) trait RunHost: Send + Sync + 'static {
    /// The registry a run's grant is checked against: the one of the
    /// binding new requests are served with.
    fn registry(&self) -> Arc<dyn TokenRegistry>;

    /// The actor of run `key`, started as `generation`, stopped: forget
    /// it, unless a newer actor for the run has taken its place.
    fn run_stopped(&self, key: &RunKey, generation: u64);
}

/// A run's live state, shared by its actor and every request to it.
#[derive(Debug)]
pub(crate) struct RunState {
    pub key: RunKey,
    in_flight: AtomicU32,
    draining: AtomicBool,
    reason: AtomicU8,
    /// Requests admitted so far.
    admitted: AtomicU64,
    /// Requests refused by the rate limit so far.
    rate_limited: AtomicU64,
    /// When the last request came or went, in ms since `born`.
    last_active_ms: AtomicU64,
    born: Instant,
    /// Fired at the drain deadline (or when the actor stops); every ticket
    /// watches it.
    cancel: watch::Sender<bool>,
    /// Whether the run's own port (dedicated mode) still listens. Stopping
    /// a run waits for it to turn false, so a revoke that returned means
    /// the port is closed, not about to be.
    pub(crate) listening: watch::Sender<bool>,
}

impl RunState {
    pub(crate) fn new(key: RunKey) -> Self {
        Self {
            key,
            in_flight: AtomicU32::new(0),
            draining: AtomicBool::new(false),
            reason: AtomicU8::new(StopReason::Shutdown.to_u8()),
            admitted: AtomicU64::new(0),
            rate_limited: AtomicU64::new(0),
            last_active_ms: AtomicU64::new(0),
            born: Instant::now(),
            cancel: watch::channel(false).0,
            listening: watch::channel(false).0,
        }
    }

    pub(crate) fn in_flight(&self) -> u32 {
        self.in_flight.load(Ordering::SeqCst)
    }

    pub(crate) fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    pub(crate) fn admitted(&self) -> u64 {
        self.admitted.load(Ordering::Relaxed)
    }

    pub(crate) fn rate_limited(&self) -> u64 {
        self.rate_limited.load(Ordering::Relaxed)
    }

    fn reason(&self) -> StopReason {
        StopReason::from_u8(self.reason.load(Ordering::SeqCst))
    }

    /// Marks the run draining; false if it already was. Only the run's
    /// actor calls this (on its own thread), so the check and the two
    /// stores cannot interleave with another drain.
    fn begin_drain(&self, reason: StopReason) -> bool {
        // The reason first, so whoever sees the flag reads the right one.
        if self.draining.load(Ordering::SeqCst) {
            return false;
        }
        self.reason.store(reason.to_u8(), Ordering::SeqCst);
        !self.draining.swap(true, Ordering::SeqCst)
    }

    fn touch(&self) {
        let now = u64::try_from(self.born.elapsed().as_millis()).unwrap_or(u64::MAX);
        self.last_active_ms.store(now, Ordering::Relaxed);
    }

    fn idle_for(&self) -> Duration {
        let last = Duration::from_millis(self.last_active_ms.load(Ordering::Relaxed));
        self.born.elapsed().saturating_sub(last)
    }
}

/// A run as the request path holds it: its actor and its shared state.
#[derive(Clone)]
pub(crate) struct RunHandle {
    /// Shared: each request holds a handle (its ticket, its batch gate),
    /// and cloning an actix `Addr` allocates a sender of its own.
    pub addr: Arc<Addr<RunActor>>,
    pub state: Arc<RunState>,
}

impl RunHandle {
    /// Admits one request: refused if the run is draining or over its rate
    /// limit; otherwise a ticket that holds the request's slot.
    pub(crate) async fn admit(&self, limiter: &dyn RateLimiter) -> Result<Ticket, Refused> {
        let state = &self.state;
        if state.is_draining() {
            return Err(Refused::Ended(state.reason()));
        }
        // Counted before the flag is checked again and before the (possibly
        // remote) rate check, so a drain that starts meanwhile either waits
        // for this request or is seen by it.
        state.in_flight.fetch_add(1, Ordering::SeqCst);
        let ticket = Ticket {
            run: self.clone(),
            cancel: None,
        };
        state.touch();
        // Refused here, the ticket drops and gives the slot back.
        self.admit_more(limiter).await?;
        Ok(ticket)
    }

    /// The checks of a request that holds a ticket: the run must still be
    /// live and the request is charged to the rate limit. [`Self::admit`]
    /// runs them for a request, and a batch for each element after its
    /// first (a revocation mid-batch stops the rest).
    pub(crate) async fn admit_more(&self, limiter: &dyn RateLimiter) -> Result<(), Refused> {
        let state = &self.state;
        if state.is_draining() {
            return Err(Refused::Ended(state.reason()));
        }
        if let Err(limited) = limiter.acquire(&state.key).await {
            state.rate_limited.fetch_add(1, Ordering::Relaxed);
            return Err(Refused::RateLimited(limited));
        }
        if state.is_draining() {
            return Err(Refused::Ended(state.reason()));
        }
        state.admitted.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

/// Counts live actors (a leak check for tests and `/v1/runs`).
#[derive(Debug, Default)]
pub(crate) struct Census {
    pub actors: AtomicUsize,
    pub listeners: AtomicUsize,
    pub connections: AtomicUsize,
}

/// Timings every actor of a gateway shares.
#[derive(Debug, Clone)]
pub(crate) struct ActorSettings {
    pub drain_timeout: Duration,
    pub cancel_grace: Duration,
    /// Shared mode: stop after this long without a request.
    pub idle_timeout: Option<Duration>,
    /// How often the run's grant is checked against the registry.
    pub revalidate_interval: Option<Duration>,
    /// Bound on one revalidation lookup.
    pub lookup_timeout: Duration,
}

/// Everything a new actor starts from.
pub(crate) struct RunSpec {
    pub generation: u64,
    pub expires_at: Timestamp,
    pub token_hash: TokenHash,
    pub stop: watch::Sender<bool>,
    pub state: Arc<RunState>,
}

pub(crate) struct RunActor {
    generation: u64,
    in_flight_at_drain: u32,
    cancelled: u32,
    revalidating: bool,
    expires_at: Timestamp,
    token_hash: TokenHash,
    limiter: Arc<dyn RateLimiter>,
    /// Fired when the actor stops; the run's listener and connections watch it.
    stop: watch::Sender<bool>,
    waiters: Vec<oneshot::Sender<DrainReport>>,
    state: Arc<RunState>,
    census: Arc<Census>,
    /// Whether this actor still counts in `census.actors`.
    counted: bool,
    settings: Arc<ActorSettings>,
    host: Weak<dyn RunHost>,
}

impl RunActor {
    pub(crate) fn new(
        spec: RunSpec,
        limiter: Arc<dyn RateLimiter>,
        census: Arc<Census>,
        settings: Arc<ActorSettings>,
        host: Weak<dyn RunHost>,
    ) -> Self {
        census.actors.fetch_add(1, Ordering::Relaxed);
        Self {
            counted: true,
            generation: spec.generation,
            in_flight_at_drain: 0,
            cancelled: 0,
            revalidating: false,
            expires_at: spec.expires_at,
            token_hash: spec.token_hash,
            limiter,
            stop: spec.stop,
            waiters: Vec::new(),
            state: spec.state,
            census,
            settings,
            host,
        }
    }

    /// Starts the actor on `arbiter`.
    pub(crate) fn launch(self, arbiter: &ArbiterHandle) -> Addr<Self> {
        Self::start_in_arbiter(arbiter, move |_| self)
    }

    fn key(&self) -> &RunKey {
        &self.state.key
    }

    fn begin_drain(
        &mut self,
        ctx: &mut Context<Self>,
        reason: StopReason,
        done: Option<oneshot::Sender<DrainReport>>,
    ) {
        if let Some(done) = done {
            self.waiters.push(done);
        }
        if !self.state.begin_drain(reason) {
            return;
        }
        // After the flag: every request counted from here on sees it.
        let in_flight = self.state.in_flight();
        self.in_flight_at_drain = in_flight;
        tracing::info!(
            tenant = %self.key().tenant,
            run = %self.key().run,
            reason = reason.as_str(),
            in_flight,
            "run draining"
        );
        if in_flight == 0 {
            ctx.stop();
            return;
        }
        ctx.run_later(self.settings.drain_timeout, |act, ctx| {
            act.cancelled = act.state.in_flight();
            act.state.cancel.send_replace(true);
            ctx.run_later(act.settings.cancel_grace, |_, ctx| ctx.stop());
        });
    }

    fn schedule_expiry(&self, ctx: &mut Context<Self>) {
        let left = self.expires_at.as_millis() - Timestamp::now().as_millis();
        let left = Duration::from_millis(u64::try_from(left).unwrap_or(0));
        ctx.run_later(left, |act, ctx| act.expiry_due(ctx));
    }

    /// The expiry the actor knows of has come: unless the grant was renewed
    /// meanwhile (here, which moved `expires_at`, or elsewhere: the admin
    /// API, another replica, which the registry knows), the run drains.
    fn expiry_due(&mut self, ctx: &mut Context<Self>) {
        if self.state.is_draining() {
            return;
        }
        if Timestamp::now() < self.expires_at {
            self.schedule_expiry(ctx);
            return;
        }
        let Some(host) = self.host.upgrade() else {
            self.begin_drain(ctx, StopReason::Expired, None);
            return;
        };
        let registry = host.registry();
        let hash = self.token_hash;
        let limit = self.settings.lookup_timeout;
        ctx.spawn(
            async move { tokio::time::timeout(limit, registry.resolve(&hash)).await }
                .into_actor(self)
                .map(|result, act, ctx| match result {
                    Ok(Ok(grant)) if grant.expires_at > Timestamp::now() => {
                        act.expires_at = act.expires_at.max(grant.expires_at);
                        act.schedule_expiry(ctx);
                    }
                    // Expired, gone, or no answer in time: as far as
                    // anyone can tell the grant has expired.
                    _ => act.begin_drain(ctx, StopReason::Expired, None),
                }),
        );
    }

    fn revalidate(&mut self, ctx: &mut Context<Self>) {
        if self.revalidating || self.state.is_draining() {
            return;
        }
        let Some(host) = self.host.upgrade() else {
            return;
        };
        let registry = host.registry();
        let hash = self.token_hash;
        let limit = self.settings.lookup_timeout;
        self.revalidating = true;
        ctx.spawn(
            async move { tokio::time::timeout(limit, registry.resolve(&hash)).await }
                .into_actor(self)
                .map(|result, act, ctx| {
                    act.revalidating = false;
                    if let Ok(Ok(grant)) = &result {
                        // Renewed elsewhere: the expiry timer will see it.
                        act.expires_at = act.expires_at.max(grant.expires_at);
                    }
                    // Only a definite answer ends the run; an unreachable
                    // registry is not a revocation.
                    if let Ok(Err(
                        RegistryError::Revoked
                        | RegistryError::Expired
                        | RegistryError::UnknownToken
                        | RegistryError::GrantNotFound,
                    )) = result
                    {
                        act.begin_drain(ctx, StopReason::GrantEnded, None);
                    }
                }),
        );
    }
}

impl Actor for RunActor {
    type Context = Context<Self>;

    fn started(&mut self, ctx: &mut Context<Self>) {
        self.schedule_expiry(ctx);
        if let Some(idle) = self.settings.idle_timeout {
            let every = (idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
            ctx.run_interval(every, move |act, ctx| {
                if !act.state.is_draining()
                    && act.state.in_flight() == 0
                    && act.state.idle_for() >= idle
                {
                    act.begin_drain(ctx, StopReason::Idle, None);
                }
            });
        }
        if let Some(every) = self.settings.revalidate_interval {
            ctx.run_interval(every, |act, ctx| act.revalidate(ctx));
        }
    }

    fn stopped(&mut self, _ctx: &mut Context<Self>) {
        // However it stopped (drained, or its arbiter went away), nothing
        // is admitted any more and whatever is still running is told so.
        self.state.begin_drain(StopReason::Shutdown);
        self.state.cancel.send_replace(true);
        self.stop.send_replace(true);
        self.limiter.forget(self.key());
        let report = DrainReport {
            reason: self.state.reason(),
            in_flight_at_start: self.in_flight_at_drain,
            cancelled: self.cancelled,
            abandoned: self.state.in_flight(),
        };
        // Out of the table and the census first: whoever waits for the
        // drain (a revoke) finds the run gone when it is told, though the
        // actor's value is dropped a moment later.
        self.uncount();
        if let Some(host) = self.host.upgrade() {
            host.run_stopped(self.key(), self.generation);
        }
        for waiter in self.waiters.drain(..) {
            let _ = waiter.send(report);
        }
        tracing::info!(
            tenant = %self.key().tenant,
            run = %self.key().run,
            reason = report.reason.as_str(),
            cancelled = self.cancelled,
            "run stopped"
        );
    }
}

impl RunActor {
    /// Takes this actor out of the census, once (at `stopped`, or at drop
    /// for an actor that never started).
    fn uncount(&mut self) {
        if std::mem::take(&mut self.counted) {
            self.census.actors.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for RunActor {
    fn drop(&mut self) {
        self.uncount();
    }
}

/// Why admission was refused.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Refused {
    Ended(StopReason),
    RateLimited(RateLimited),
}

/// The last request of a draining run finished.
struct Drained;

impl Message for Drained {
    type Result = ();
}

impl Handler<Drained> for RunActor {
    type Result = ();

    fn handle(&mut self, _: Drained, ctx: &mut Context<Self>) {
        if self.state.is_draining() && self.state.in_flight() == 0 {
            ctx.stop();
        }
    }
}

/// The run's grant was renewed: it now expires at this instant (never
/// earlier than before).
pub(crate) struct Renewed {
    pub expires_at: Timestamp,
}

impl Message for Renewed {
    type Result = ();
}

impl Handler<Renewed> for RunActor {
    type Result = ();

    fn handle(&mut self, renewed: Renewed, _: &mut Context<Self>) {
        // The pending expiry timer reschedules itself when it fires early.
        self.expires_at = self.expires_at.max(renewed.expires_at);
    }
}

/// Stops the run: refuse new requests, drain, cancel, stop.
pub(crate) struct Drain {
    pub reason: StopReason,
    pub done: Option<oneshot::Sender<DrainReport>>,
}

impl Message for Drain {
    type Result = ();
}

impl Handler<Drain> for RunActor {
    type Result = ();

    fn handle(&mut self, msg: Drain, ctx: &mut Context<Self>) {
        self.begin_drain(ctx, msg.reason, msg.done);
    }
}

/// An admitted request's slot. Dropping it (on any path: answered, failed,
/// cancelled, refused, or the client went away and the handler was
/// dropped) releases the slot.
pub(crate) struct Ticket {
    run: RunHandle,
    cancel: Option<watch::Receiver<bool>>,
}

impl Ticket {
    /// Resolves when the run's drain deadline passed (or its actor is gone):
    /// the request must stop and answer "run ended".
    pub(crate) async fn cancelled(&mut self) {
        let cancel = self
            .cancel
            .get_or_insert_with(|| self.run.state.cancel.subscribe());
        // `wait_for` looks at the current value first: a cancellation sent
        // before this subscription is seen too.
        let _ = cancel.wait_for(|cancelled| *cancelled).await;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let state = &self.run.state;
        state.touch();
        let before = state.in_flight.fetch_sub(1, Ordering::SeqCst);
        // Only a draining run waits for its last request; `do_send` never
        // waits and does nothing once the actor is gone.
        if before == 1 && state.is_draining() {
            self.run.addr.do_send(Drained);
        }
    }
}
