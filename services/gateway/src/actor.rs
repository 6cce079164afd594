//! One actix actor per run: admission and bookkeeping.
//!
//! The actor owns its run's state: whether it still serves (active or
//! draining), how many requests are in flight, the rate-limit check, and the
//! timers that end the run by themselves (expiry, idleness, a grant revoked
//! elsewhere). It never sees an HTTP request: those are not `Send`. A
//! request asks for admission (`Admit`) and gets a `Ticket`; the HTTP
//! worker serves the request and drops the ticket when done, however it
//! ends (answered, failed, client gone), which releases the slot.
//!
//! Stopping: `Drain` refuses new requests at once, waits for in-flight
//! ones up to the drain timeout, then fires the tickets' cancellation
//! signal (their requests answer with a correlated "run ended" error) and
//! stops after a short grace. Stopping closes the run's listener and
//! connections and removes the run from the gateway's table.

use crate::gateway::Inner;
use crate::key::RunKey;
use crate::limiter::{RateLimited, RateLimiter};
use actix::prelude::*;
use corkboard_board::Timestamp;
use corkboard_grants::{RegistryError, TokenHash};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::sync::{oneshot, watch};

/// Why a run stopped (or is stopping).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Revoked through this runner (the register API or `corkboard run`).
    Revoked,
    /// The grant reached its expiry.
    Expired,
    /// The grant stopped resolving (revoked on another replica, expired,
    /// or gone from the registry).
    GrantEnded,
    /// No request for the idle timeout (shared-mode actors only; the next
    /// request activates the run again).
    Idle,
    /// The runner is shutting down.
    Shutdown,
}

impl StopReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Revoked => "revoked",
            Self::Expired => "expired",
            Self::GrantEnded => "grant_ended",
            Self::Idle => "idle",
            Self::Shutdown => "shutdown",
        }
    }
}

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

/// Live numbers of a run, readable without messaging its actor.
#[derive(Debug, Default)]
pub(crate) struct RunGauge {
    pub in_flight: AtomicU32,
    pub draining: AtomicBool,
    /// Requests admitted so far.
    pub admitted: AtomicU64,
    /// Requests refused by the rate limit so far.
    pub rate_limited: AtomicU64,
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
    pub mailbox_capacity: usize,
    pub drain_timeout: Duration,
    pub cancel_grace: Duration,
    /// Shared mode: stop after this long without a request.
    pub idle_timeout: Option<Duration>,
    /// How often the run's grant is checked against the registry.
    pub revalidate_interval: Option<Duration>,
    /// Bound on one revalidation lookup.
    pub lookup_timeout: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Active,
    Draining,
}

/// Everything a new actor starts from.
pub(crate) struct RunSpec {
    pub key: RunKey,
    pub generation: u64,
    pub expires_at: Timestamp,
    pub token_hash: TokenHash,
    pub stop: watch::Sender<bool>,
    pub gauge: Arc<RunGauge>,
}

pub(crate) struct RunActor {
    key: RunKey,
    generation: u64,
    phase: Phase,
    reason: StopReason,
    in_flight: u32,
    in_flight_at_drain: u32,
    cancelled: u32,
    revalidating: bool,
    last_active: Instant,
    expires_at: Timestamp,
    token_hash: TokenHash,
    limiter: Arc<dyn RateLimiter>,
    /// Fired at the drain deadline; every ticket watches it.
    cancel: watch::Sender<bool>,
    /// Fired when the actor stops; the run's listener and connections watch it.
    stop: watch::Sender<bool>,
    waiters: Vec<oneshot::Sender<DrainReport>>,
    gauge: Arc<RunGauge>,
    census: Arc<Census>,
    settings: Arc<ActorSettings>,
    gateway: Weak<Inner>,
}

impl RunActor {
    pub(crate) fn new(
        spec: RunSpec,
        limiter: Arc<dyn RateLimiter>,
        census: Arc<Census>,
        settings: Arc<ActorSettings>,
        gateway: Weak<Inner>,
    ) -> Self {
        census.actors.fetch_add(1, Ordering::Relaxed);
        Self {
            key: spec.key,
            generation: spec.generation,
            phase: Phase::Active,
            reason: StopReason::Shutdown,
            in_flight: 0,
            in_flight_at_drain: 0,
            cancelled: 0,
            revalidating: false,
            last_active: Instant::now(),
            expires_at: spec.expires_at,
            token_hash: spec.token_hash,
            limiter,
            cancel: watch::channel(false).0,
            stop: spec.stop,
            waiters: Vec::new(),
            gauge: spec.gauge,
            census,
            settings,
            gateway,
        }
    }

    /// Starts the actor on `arbiter` with a bounded mailbox.
    pub(crate) fn launch(self, arbiter: &ArbiterHandle) -> Addr<Self> {
        let capacity = self.settings.mailbox_capacity;
        Self::start_in_arbiter(arbiter, move |ctx| {
            ctx.set_mailbox_capacity(capacity);
            self
        })
    }

    fn set_in_flight(&mut self, value: u32) {
        self.in_flight = value;
        self.gauge.in_flight.store(value, Ordering::Relaxed);
    }

    fn release_one(&mut self, ctx: &mut Context<Self>) {
        self.set_in_flight(self.in_flight.saturating_sub(1));
        self.last_active = Instant::now();
        if self.phase == Phase::Draining && self.in_flight == 0 {
            ctx.stop();
        }
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
        if self.phase == Phase::Draining {
            return;
        }
        self.phase = Phase::Draining;
        self.reason = reason;
        self.in_flight_at_drain = self.in_flight;
        self.gauge.draining.store(true, Ordering::Relaxed);
        tracing::info!(
            tenant = %self.key.tenant,
            run = %self.key.run,
            reason = reason.as_str(),
            in_flight = self.in_flight,
            "run draining"
        );
        if self.in_flight == 0 {
            ctx.stop();
            return;
        }
        ctx.run_later(self.settings.drain_timeout, |act, ctx| {
            act.cancelled = act.in_flight;
            act.cancel.send_replace(true);
            ctx.run_later(act.settings.cancel_grace, |_, ctx| ctx.stop());
        });
    }

    fn schedule_expiry(&self, ctx: &mut Context<Self>) {
        let left = self.expires_at.as_millis() - Timestamp::now().as_millis();
        let left = Duration::from_millis(u64::try_from(left).unwrap_or(0));
        ctx.run_later(left, |act, ctx| {
            act.begin_drain(ctx, StopReason::Expired, None);
        });
    }

    fn revalidate(&mut self, ctx: &mut Context<Self>) {
        if self.revalidating || self.phase == Phase::Draining {
            return;
        }
        let Some(gateway) = self.gateway.upgrade() else {
            return;
        };
        let registry = gateway.binding.load().registry().clone();
        let hash = self.token_hash;
        let limit = self.settings.lookup_timeout;
        self.revalidating = true;
        ctx.spawn(
            async move { tokio::time::timeout(limit, registry.resolve(&hash)).await }
                .into_actor(self)
                .map(|result, act, ctx| {
                    act.revalidating = false;
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
                if act.phase == Phase::Active
                    && act.in_flight == 0
                    && act.last_active.elapsed() >= idle
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
        self.stop.send_replace(true);
        self.limiter.forget(&self.key);
        let report = DrainReport {
            reason: self.reason,
            in_flight_at_start: self.in_flight_at_drain,
            cancelled: self.cancelled,
            abandoned: self.in_flight,
        };
        for waiter in self.waiters.drain(..) {
            let _ = waiter.send(report);
        }
        if let Some(gateway) = self.gateway.upgrade() {
            gateway.run_stopped(&self.key, self.generation);
        }
        tracing::info!(
            tenant = %self.key.tenant,
            run = %self.key.run,
            reason = self.reason.as_str(),
            cancelled = self.cancelled,
            "run stopped"
        );
    }
}

impl Drop for RunActor {
    fn drop(&mut self) {
        self.census.actors.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Why admission was refused.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Refused {
    Ended(StopReason),
    RateLimited(RateLimited),
}

/// Asks the run's actor to admit one request.
pub(crate) struct Admit;

impl Message for Admit {
    type Result = Result<Ticket, Refused>;
}

impl Handler<Admit> for RunActor {
    type Result = ResponseActFuture<Self, Result<Ticket, Refused>>;

    fn handle(&mut self, _: Admit, ctx: &mut Context<Self>) -> Self::Result {
        if self.phase == Phase::Draining {
            return Box::pin(fut::ready(Err(Refused::Ended(self.reason))));
        }
        // Counted before the (possibly remote) rate check, so a drain that
        // starts meanwhile waits for this request too.
        self.set_in_flight(self.in_flight + 1);
        self.last_active = Instant::now();
        let limiter = self.limiter.clone();
        let key = self.key.clone();
        let addr = ctx.address();
        Box::pin(
            async move { limiter.acquire(&key).await }
                .into_actor(self)
                .map(move |allowed, act, ctx| {
                    let refusal = match allowed {
                        Err(limited) => Some(Refused::RateLimited(limited)),
                        Ok(()) if act.phase == Phase::Draining => Some(Refused::Ended(act.reason)),
                        Ok(()) => None,
                    };
                    match refusal {
                        Some(refusal) => {
                            if matches!(refusal, Refused::RateLimited(_)) {
                                act.gauge.rate_limited.fetch_add(1, Ordering::Relaxed);
                            }
                            act.release_one(ctx);
                            Err(refusal)
                        }
                        None => {
                            act.gauge.admitted.fetch_add(1, Ordering::Relaxed);
                            Ok(Ticket {
                                addr,
                                cancel: act.cancel.subscribe(),
                            })
                        }
                    }
                }),
        )
    }
}

/// Returns a request's slot.
struct Release;

impl Message for Release {
    type Result = ();
}

impl Handler<Release> for RunActor {
    type Result = ();

    fn handle(&mut self, _: Release, ctx: &mut Context<Self>) {
        self.release_one(ctx);
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
/// cancelled, or the client went away and the handler was dropped)
/// releases the slot.
pub(crate) struct Ticket {
    addr: Addr<RunActor>,
    cancel: watch::Receiver<bool>,
}

impl Ticket {
    /// Resolves when the run's drain deadline passed (or its actor is gone):
    /// the request must stop and answer "run ended".
    pub(crate) async fn cancelled(&mut self) {
        // An error means the actor (the sender) is gone: the same thing.
        let _ = self.cancel.wait_for(|cancelled| *cancelled).await;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        // `do_send` ignores the mailbox bound (a release must never wait)
        // and does nothing once the actor is gone.
        self.addr.do_send(Release);
    }
}
