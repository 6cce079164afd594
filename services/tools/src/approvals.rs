//! The approval gate: the one place that decides whether a run's tool call
//! (a board tool or an upstream's) may run now, must wait for a person, or
//! was denied.
//!
//! A call a tenant's policy covers ([`ApprovalPolicies::covering`]) becomes
//! an [`ApprovalItem`] bound to the tenant, run, grant, tool, the digest of
//! its arguments, the policy's name and version, and an expiry. The agent
//! is told at once, as a tool error it can act on, that the call awaits
//! approval, with the item's handle and how to collect the outcome: the
//! collect tool (`collect_approval`, [`ApprovalGate::collect`]) with the
//! handle, or the same call again. That works for every client, including
//! those that cannot wait (headless Claude Code declines elicitation). When a person
//! has approved, the same call (same run, grant, tool and arguments, so the
//! same digest) runs exactly once: the store marks the item used in one
//! conditional write before the call runs. A denial answers a tool error
//! with the person's reason. Agents hold run tokens, never admin roles, so
//! no agent can decide an item: deciding is an admin-API action.
//!
//! A 2025 session's call over HTTP can wait: the gate holds it (up to
//! [`ApprovalGate::with_hold`]'s bound, within the item's expiry, in a
//! per-tenant and per-run share of held calls, [`HoldShares`]) until a
//! person decides, sending `notifications/progress` on the call's event
//! stream when the agent gave a `progressToken`, and then answers the
//! real outcome: the approved call runs (once, the same conditional
//! write), a denied one answers the reason. Decisions reach held calls on
//! every replica through the live feed ([`ApprovalEvents::decisions`]),
//! and a held call re-reads its item at each progress tick in case an
//! event was lost. Past the bound it answers pending with the handle.
//!
//! The gate fails closed: when the policies or items cannot be read in
//! time, the call is not run and the agent is told to retry.
//!
//! Policies are read from the tenant's settings and cached for
//! [`POLICY_CACHE_TTL`] per tenant, so a call no policy covers costs one
//! map lookup and the policy match, not a store read.

use corkboard_board::RunId;
use corkboard_board::{
    ApprovalId, ApprovalItem, ApprovalPolicies, ApprovalStatus, ArgumentsHash, AuditOutcome,
    AuditRecord, AuditSink, Grant, GrantLedger, StoreError, TenantId, Timestamp, arguments_digest,
};
use corkboard_mcp::{Peer, ToolCall, ToolOutput};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How long a tenant's policies are used before they are read again: a
/// policy change reaches every replica's gate within this.
pub const POLICY_CACHE_TTL: Duration = Duration::from_secs(1);
/// The most tenants whose policies one process caches (beyond it, the
/// oldest entries go first).
const POLICY_CACHE_MAX: usize = 4096;

/// Told when an item is made or decided (the live feed).
pub trait ApprovalEvents: Send + Sync + 'static {
    fn approval_changed(&self, item: &ApprovalItem);

    /// The ids of `tenant`'s items changed from now on, on any replica
    /// (the live feed's subscription), while the receiver lives; `None`:
    /// not watched here (held calls then re-read their item at each
    /// progress tick only).
    fn decisions(&self, _tenant: &TenantId) -> Option<mpsc::Receiver<ApprovalId>> {
        None
    }
}

/// Room for one held call while the permit lives.
pub struct HoldPermit {
    _guard: Box<dyn Send + Sync>,
}

impl fmt::Debug for HoldPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("HoldPermit")
    }
}

impl HoldPermit {
    pub fn new(guard: impl Send + Sync + 'static) -> Self {
        Self {
            _guard: Box::new(guard),
        }
    }
}

/// The per-tenant and per-run shares of calls held in this process (the
/// relay's held-call table when the process relays upstreams).
pub trait HoldShares: Send + Sync + 'static {
    /// Room for one more held call of `run` of `tenant`, or why not (a
    /// full share: the call is then answered pending at once).
    fn hold(&self, tenant: &TenantId, run: &RunId) -> Result<HoldPermit, String>;
}

/// [`HoldShares`] of a process without an upstream relay: counts per
/// tenant and run, with the same limits as the relay's held-call table.
#[derive(Debug)]
pub struct LocalHolds {
    limits: (usize, usize, usize),
    counts: Arc<Mutex<HoldCounts>>,
}

#[derive(Debug, Default)]
struct HoldCounts {
    total: usize,
    tenants: HashMap<TenantId, usize>,
    runs: HashMap<(TenantId, RunId), usize>,
}

impl LocalHolds {
    /// At most `total` held calls, `per_tenant` of one tenant's and
    /// `per_run` of one run's.
    pub fn new(total: usize, per_tenant: usize, per_run: usize) -> Self {
        Self {
            limits: (total, per_tenant, per_run),
            counts: Arc::default(),
        }
    }
}

struct LocalPermit {
    counts: Arc<Mutex<HoldCounts>>,
    tenant: TenantId,
    run: RunId,
}

impl Drop for LocalPermit {
    fn drop(&mut self) {
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        counts.total = counts.total.saturating_sub(1);
        let tenant = self.tenant.clone();
        if let Some(n) = counts.tenants.get_mut(&tenant) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.tenants.remove(&tenant);
            }
        }
        let key = (tenant, self.run.clone());
        if let Some(n) = counts.runs.get_mut(&key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                counts.runs.remove(&key);
            }
        }
    }
}

impl HoldShares for LocalHolds {
    fn hold(&self, tenant: &TenantId, run: &RunId) -> Result<HoldPermit, String> {
        let (total, per_tenant, per_run) = self.limits;
        let mut counts = self.counts.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (tenant.clone(), run.clone());
        let (t, r) = (
            counts.tenants.get(tenant).copied().unwrap_or(0),
            counts.runs.get(&key).copied().unwrap_or(0),
        );
        if r >= per_run {
            return Err(format!(
                "this run's share of held calls ({per_run}) is full"
            ));
        }
        if t >= per_tenant {
            return Err(format!(
                "this tenant's share of held calls ({per_tenant}) is full"
            ));
        }
        if counts.total >= total {
            return Err(format!("this process's held calls ({total}) are full"));
        }
        counts.total += 1;
        *counts.tenants.entry(tenant.clone()).or_default() += 1;
        *counts.runs.entry(key).or_default() += 1;
        Ok(HoldPermit::new(LocalPermit {
            counts: self.counts.clone(),
            tenant: tenant.clone(),
            run: run.clone(),
        }))
    }
}

/// How often a held call tells the agent it is still waiting (when it
/// asked for progress) and re-reads its item.
pub const HOLD_TICK: Duration = Duration::from_secs(5);

/// What the gate decided before any holding.
enum Verdict {
    Run,
    Answer(String),
    Pending(Box<ApprovalItem>, String),
}

/// What the gate says about one call.
#[derive(Debug)]
pub enum Gate {
    /// No policy covers it, or its approval was just spent on it: run it.
    Proceed,
    /// Answer this instead of running the call.
    Answer(ToolOutput),
}

/// What collecting an item by its handle found.
#[derive(Debug)]
pub enum Collected {
    /// Still waiting for a person (not expired).
    Pending(ApprovalItem),
    /// Nothing to run, and why (denied, expired, used, not this run's):
    /// a tool error for the agent.
    Refused(String),
    /// Approved and now spent on this collection: run `arguments` as
    /// `item.tool`, once.
    Run {
        item: ApprovalItem,
        arguments: Map<String, Value>,
    },
    /// Approved for a tool this endpoint cannot run (an upstream's outside
    /// a run gateway): nothing was spent.
    Elsewhere(ApprovalItem),
}

/// The approval gate of a process (shared by its studio endpoint and its
/// run gateways).
pub struct ApprovalGate {
    ledger: Arc<dyn GrantLedger>,
    audit: Arc<dyn AuditSink>,
    events: Option<Arc<dyn ApprovalEvents>>,
    timeout: Duration,
    cache: Mutex<HashMap<TenantId, (Instant, Arc<ApprovalPolicies>)>>,
    /// How long a 2025 session's call may be held for a person (zero: never).
    hold: Duration,
    holds: std::sync::RwLock<Option<Arc<dyn HoldShares>>>,
}

impl fmt::Debug for ApprovalGate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalGate")
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl ApprovalGate {
    /// A gate over the store's tenant settings and approval items, auditing
    /// its answers to `audit`; every store call is bounded by `timeout`.
    pub fn new(ledger: Arc<dyn GrantLedger>, audit: Arc<dyn AuditSink>, timeout: Duration) -> Self {
        Self {
            ledger,
            audit,
            events: None,
            timeout,
            cache: Mutex::new(HashMap::new()),
            hold: Duration::ZERO,
            holds: std::sync::RwLock::new(None),
        }
    }

    /// Holds 2025 sessions' calls that wait for a person up to `bound`,
    /// counted in `shares` (zero: never held).
    pub fn with_hold(mut self, bound: Duration, shares: Arc<dyn HoldShares>) -> Self {
        self.hold = bound;
        self.holds = std::sync::RwLock::new(Some(shares));
        self
    }

    /// Counts held calls in `shares` from now on (the relay's table, once
    /// the process has one).
    pub fn hold_in(&self, shares: Arc<dyn HoldShares>) {
        *self.holds.write().unwrap_or_else(PoisonError::into_inner) = Some(shares);
    }

    /// Whether a call of `tenant`'s may be held here: holding is on and the
    /// tenant has policies (or they are not cached yet).
    pub fn may_hold(&self, tenant: &TenantId) -> bool {
        !self.hold.is_zero()
            && self
                .cache
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .get(tenant)
                .is_none_or(|(_, policies)| !policies.is_empty())
    }

    /// Also tells `events` about every item made or decided.
    pub fn with_events(mut self, events: Arc<dyn ApprovalEvents>) -> Self {
        self.events = Some(events);
        self
    }

    /// Forgets `tenant`'s cached policies (after this process changed them).
    pub fn policies_changed(&self, tenant: &TenantId) {
        self.cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(tenant);
    }

    async fn bounded<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        tokio::time::timeout(self.timeout, call)
            .await
            .unwrap_or_else(|_| Err(StoreError::unavailable("the store did not answer in time")))
    }

    async fn policies(&self, tenant: &TenantId) -> Result<Arc<ApprovalPolicies>, StoreError> {
        let now = Instant::now();
        if let Some((at, policies)) = self
            .cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(tenant)
            && now.duration_since(*at) < POLICY_CACHE_TTL
        {
            return Ok(policies.clone());
        }
        let policies = Arc::new(
            self.bounded(self.ledger.grant_policy(tenant))
                .await?
                .approvals,
        );
        let mut cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        if cache.len() >= POLICY_CACHE_MAX {
            cache.retain(|_, (at, _)| now.duration_since(*at) < POLICY_CACHE_TTL);
            if cache.len() >= POLICY_CACHE_MAX {
                cache.clear();
            }
        }
        cache.insert(tenant.clone(), (now, policies.clone()));
        Ok(policies)
    }

    /// Decides one call by `grant` (its tool as the agent named it); both
    /// call paths (board tools, upstream tools) ask through this.
    pub async fn check(&self, grant: &Grant, call: &ToolCall<'_>) -> Gate {
        let (tool, arguments, raw_arguments) = (call.name, call.arguments, call.raw_arguments);
        if tool == COLLECT_TOOL {
            // Collecting is never itself held for a person (a policy glob
            // could name it): it runs only what a person approved.
            return Gate::Proceed;
        }
        let started = Instant::now();
        let verdict = match self.decide(grant, tool, arguments).await {
            Ok(Verdict::Pending(item, text)) => {
                match self.hold_until_decided(grant, &item, call).await {
                    // Decided while held: the same rules as a repeated call.
                    true => match self.decide(grant, tool, arguments).await {
                        Ok(Verdict::Pending(_, _)) => Ok(Verdict::Answer(text)),
                        other => other,
                    },
                    false => Ok(Verdict::Answer(text)),
                }
            }
            other => other,
        };
        match verdict {
            Ok(Verdict::Run) => Gate::Proceed,
            Ok(Verdict::Answer(text) | Verdict::Pending(_, text)) => {
                self.account(grant, tool, raw_arguments, started);
                Gate::Answer(ToolOutput {
                    structured: None,
                    text: text.into(),
                    is_error: true,
                    relay: None,
                    content: Vec::new(),
                })
            }
            Err(err) => {
                self.account(grant, tool, raw_arguments, started);
                Gate::Answer(ToolOutput {
                    structured: None,
                    text: format!(
                        "board unavailable: whether this call needs a person's approval could \
                         not be checked ({err}); nothing was done (retryable: call it again \
                         shortly)"
                    )
                    .into(),
                    is_error: true,
                    relay: None,
                    content: Vec::new(),
                })
            }
        }
    }

    /// Holds a 2025 session's call whose item is pending until a person
    /// decides (`true`), or the bound or the item's expiry passes, the
    /// agent goes away, or no share is left (`false`: answer pending).
    async fn hold_until_decided(
        &self,
        grant: &Grant,
        item: &ApprovalItem,
        call: &ToolCall<'_>,
    ) -> bool {
        let Some(peer) = call.peer.filter(|peer| !peer.revision().is_modern()) else {
            return false;
        };
        if self.hold.is_zero() {
            return false;
        }
        let Some(shares) = self
            .holds
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        else {
            return false;
        };
        let _permit = match shares.hold(&grant.tenant, &grant.run) {
            Ok(permit) => permit,
            Err(reason) => {
                tracing::debug!(tenant = %grant.tenant, run = %grant.run, %reason, "approval: call not held");
                return false;
            }
        };
        // Subscribed before the first read, so no decision falls between.
        let mut decisions = self
            .events
            .as_ref()
            .and_then(|events| events.decisions(&grant.tenant));
        let left_ms = item
            .expires_at
            .as_millis()
            .saturating_sub(Timestamp::now().as_millis());
        let until_expiry = Duration::from_millis(u64::try_from(left_ms).unwrap_or(0));
        let deadline = tokio::time::Instant::now() + self.hold.min(until_expiry);
        let mut tick = tokio::time::interval(HOLD_TICK);
        let mut progress = 0u64;
        loop {
            tokio::select! {
                biased;
                () = tokio::time::sleep_until(deadline) => return false,
                changed = recv(&mut decisions) => match changed {
                    Some(id) if id == item.id => {}
                    Some(_) => continue,
                    // The feed went away: ticks alone from now on.
                    None => {
                        decisions = None;
                        continue;
                    }
                },
                _ = tick.tick() => {
                    if let Some(token) = call.progress_token {
                        progress += 1;
                        if !send_progress(peer, token, progress, item).await {
                            return false;
                        }
                    }
                }
            }
            match self
                .bounded(self.ledger.approval(&grant.tenant, &item.id))
                .await
            {
                Ok(Some(now)) if now.status != ApprovalStatus::Pending => return true,
                Ok(_) => {}
                // A store hiccup while holding: keep waiting, the next
                // tick reads again.
                Err(err) => {
                    tracing::debug!(error = %err, "approval: held call could not read its item")
                }
            }
        }
    }

    /// Run the call, answer a tool error instead, or answer that it is
    /// pending (which a held call waits out).
    async fn decide(
        &self,
        grant: &Grant,
        tool: &str,
        arguments: &Map<String, Value>,
    ) -> Result<Verdict, StoreError> {
        let policies = self.policies(&grant.tenant).await?;
        if policies.is_empty() {
            return Ok(Verdict::Run);
        }
        let Some(policy) = policies.covering(&grant.id, tool, &Value::Object(arguments.clone()))
        else {
            return Ok(Verdict::Run);
        };
        let digest = arguments_digest(arguments);
        let now = Timestamp::now();
        let existing = self
            .bounded(
                self.ledger
                    .approval_for_call(&grant.tenant, &grant.run, tool, &digest),
            )
            .await?
            .filter(|item| item.grant == grant.id);
        let earlier = match existing {
            Some(item) if item.status == ApprovalStatus::Approved && !item.is_expired_at(now) => {
                if self
                    .bounded(self.ledger.use_approval(&grant.tenant, &item.id, now))
                    .await?
                {
                    return Ok(Verdict::Run);
                }
                // Spent by a racing call of the same run, or expired just now.
                return Ok(Verdict::Answer(format!(
                    "approval {} was already used or has expired: an approval runs its call \
                     once. Call the tool again to request a new approval.",
                    item.id
                )));
            }
            Some(item) if item.status == ApprovalStatus::Pending && !item.is_expired_at(now) => {
                let text = pending_text(&item, tool, false);
                return Ok(Verdict::Pending(Box::new(item), text));
            }
            Some(item) if item.status == ApprovalStatus::Denied && !item.is_expired_at(now) => {
                return Ok(Verdict::Answer(denied_text(&item)));
            }
            other => other,
        };
        let item = ApprovalItem::new(
            grant.tenant.clone(),
            grant.run.clone(),
            grant.id.clone(),
            tool,
            arguments,
            policy,
            now,
        );
        self.bounded(self.ledger.put_approval(&item)).await?;
        if let Some(events) = &self.events {
            events.approval_changed(&item);
        }
        let mut text = pending_text(&item, tool, true);
        if let Some(earlier) = earlier {
            text = format!(
                "The earlier approval {} of this call expired before it was used. {text}",
                earlier.id
            );
        }
        Ok(Verdict::Pending(Box::new(item), text))
    }

    /// Collects the outcome of item `id` for `grant` (the collect tool):
    /// pending, refused with the reason (denied, expired, used), or, once
    /// approved, spent in the same one conditional write as a repeated
    /// call ([`GrantLedger::use_approval`]) and handed back to run once;
    /// `runs_here` says whether this endpoint can run the item's tool
    /// (when not, nothing is spent). Only the run and grant the item was
    /// made for can collect it; for any other it does not exist.
    pub async fn collect(
        &self,
        grant: &Grant,
        id: &ApprovalId,
        runs_here: impl Fn(&str) -> bool,
    ) -> Result<Collected, StoreError> {
        let now = Timestamp::now();
        let item = self
            .bounded(self.ledger.approval(&grant.tenant, id))
            .await?
            .filter(|item| item.run == grant.run && item.grant == grant.id);
        let Some(item) = item else {
            return Ok(Collected::Refused(format!(
                "there is no approval {id} for this run: quote the handle exactly as the \
                 pending answer gave it"
            )));
        };
        let again = format!(
            "Call {} again to request a new approval if it is still needed.",
            item.tool
        );
        match item.status {
            ApprovalStatus::Pending if !item.is_expired_at(now) => Ok(Collected::Pending(item)),
            ApprovalStatus::Pending => Ok(Collected::Refused(format!(
                "approval {id} expired at {} before a person decided; the call was not run. \
                 {again}",
                item.expires_at
            ))),
            ApprovalStatus::Denied => Ok(Collected::Refused(denied_text(&item))),
            ApprovalStatus::Used => Ok(Collected::Refused(format!(
                "approval {id} was already used: an approval runs its call once. {again}"
            ))),
            ApprovalStatus::Approved if item.is_expired_at(now) => Ok(Collected::Refused(format!(
                "approval {id} expired at {} before it was used; the call was not run. \
                     {again}",
                item.expires_at
            ))),
            ApprovalStatus::Approved => {
                if !runs_here(&item.tool) {
                    return Ok(Collected::Elsewhere(item));
                }
                // The item keeps the arguments for people to read; cut
                // ones (too large) cannot be run from it.
                let arguments = serde_json::from_str::<Map<String, Value>>(&item.arguments)
                    .ok()
                    .filter(|arguments| arguments_digest(arguments) == item.digest);
                let Some(arguments) = arguments else {
                    return Ok(Collected::Refused(format!(
                        "approval {id} is approved, but its arguments were too large to keep \
                         with it: call {} again with exactly the same arguments to run it",
                        item.tool
                    )));
                };
                if self
                    .bounded(self.ledger.use_approval(&grant.tenant, id, now))
                    .await?
                {
                    Ok(Collected::Run { item, arguments })
                } else {
                    Ok(Collected::Refused(format!(
                        "approval {id} was already used or has expired: an approval runs its \
                         call once. {again}"
                    )))
                }
            }
        }
    }

    /// Audits a collect call answered where the board's collect tool does
    /// not see it (a gateway running an approved upstream call): one
    /// record under [`COLLECT_TOOL`], as the board's own collect calls
    /// get, `Ok` when the approved call ran and answered without error.
    /// The approved call itself is audited under its own tool where it
    /// runs.
    pub fn record_collect(
        &self,
        grant: &Grant,
        raw_arguments: &[u8],
        started: Instant,
        ran_cleanly: bool,
    ) {
        let outcome = if ran_cleanly {
            AuditOutcome::Ok
        } else {
            AuditOutcome::ToolError
        };
        self.record(grant, COLLECT_TOOL, outcome, raw_arguments, started);
    }

    fn account(&self, grant: &Grant, tool: &str, raw_arguments: &[u8], started: Instant) {
        self.record(grant, tool, AuditOutcome::Denied, raw_arguments, started);
    }

    /// One audit record of the gate's: the call's tool, outcome and
    /// argument hash (never the arguments).
    fn record(
        &self,
        grant: &Grant,
        tool: &str,
        outcome: AuditOutcome,
        raw_arguments: &[u8],
        started: Instant,
    ) {
        self.audit.record(AuditRecord {
            at: Timestamp::now(),
            tenant: grant.tenant.clone(),
            run: grant.run.clone(),
            grant: grant.id.clone(),
            tool: tool.to_owned(),
            outcome,
            latency_micros: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            arguments_hash: ArgumentsHash::of(raw_arguments),
            issue: None,
            definition_hash: None,
        });
    }
}

/// The next changed item's id, or `None` when the feed ended; never
/// resolves without a feed.
async fn recv(decisions: &mut Option<mpsc::Receiver<ApprovalId>>) -> Option<ApprovalId> {
    match decisions {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// One `notifications/progress` on the held call's stream; `false` when
/// the agent is gone (stop holding).
async fn send_progress(
    peer: &Peer,
    token: &serde_json::value::RawValue,
    progress: u64,
    item: &ApprovalItem,
) -> bool {
    let message = format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{},"progress":{progress},"message":{}}}}}"#,
        token.get(),
        Value::String(format!(
            "awaiting a person's approval ({}, expires at {})",
            item.id, item.expires_at
        )),
    );
    match peer.send(message.into_bytes()).await {
        Ok(()) => true,
        Err(corkboard_mcp::PeerError::NoStream) => true,
        Err(_) => false,
    }
}

/// The answer of a denied call: who denied it and why.
pub(crate) fn denied_text(item: &ApprovalItem) -> String {
    let decision = item.decision.as_ref();
    format!(
        "A person ({}) denied this call (approval {}): {}. It was not run; do not retry it \
         unchanged.",
        decision.map_or("unknown", |d| d.by.as_str()),
        item.id,
        decision
            .and_then(|d| d.reason.as_deref())
            .unwrap_or("no reason given"),
    )
}

/// The answer of a call waiting for a person: honest (nothing was done),
/// with the handle and how to collect the outcome.
fn pending_text(item: &ApprovalItem, tool: &str, new: bool) -> String {
    format!(
        "This call awaits a person's approval (policy \"{}\"); nothing was done yet. \
         Approval handle: {} ({}, expires at {}). To collect the outcome once a person has \
         decided on the Corkboard web board, call {COLLECT_TOOL} with {{\"handle\": \"{}\"}} \
         (or call {tool} again with exactly the same arguments): an approved call then runs, \
         once; a denied one answers with the person's reason. Meanwhile, carry on with other \
         work.",
        item.policy,
        item.id,
        if new {
            "requested now"
        } else {
            "still pending"
        },
        item.expires_at,
        item.id,
    )
}

/// The collect tool's name, as the pending answer names it.
pub const COLLECT_TOOL: &str = "collect_approval";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_holds_keep_each_share_and_free_a_place_when_a_permit_drops() {
        let holds = LocalHolds::new(3, 2, 1);
        let (acme, other) = (
            TenantId::parse("acme").unwrap(),
            TenantId::parse("other").unwrap(),
        );
        let (r1, r2, r3) = (
            RunId::parse("r1").unwrap(),
            RunId::parse("r2").unwrap(),
            RunId::parse("r3").unwrap(),
        );
        let first = holds.hold(&acme, &r1).expect("room");
        let refused = holds.hold(&acme, &r1).unwrap_err();
        assert!(refused.contains("run's share"), "{refused}");
        let _second = holds.hold(&acme, &r2).expect("another run of the tenant");
        let refused = holds.hold(&acme, &r3).unwrap_err();
        assert!(refused.contains("tenant's share"), "{refused}");
        let _third = holds.hold(&other, &r1).expect("another tenant");
        let refused = holds.hold(&other, &r2).unwrap_err();
        assert!(refused.contains("process"), "{refused}");
        drop(first);
        holds
            .hold(&acme, &r1)
            .expect("the dropped permit's place is free");
    }
}
