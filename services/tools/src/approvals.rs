//! The approval gate: the one place that decides whether a run's tool call
//! (a board tool or an upstream's) may run now, must wait for a person, or
//! was denied.
//!
//! A call a tenant's policy covers ([`ApprovalPolicies::covering`]) becomes
//! an [`ApprovalItem`] bound to the tenant, run, grant, tool, the digest of
//! its arguments, the policy's name and version, and an expiry. The agent
//! is told at once, as a tool error it can act on, that the call awaits
//! approval, with the item's handle and how to collect the outcome: the
//! same call again. That works for every client, including those that
//! cannot wait (headless Claude Code declines elicitation). When a person
//! has approved, the same call (same run, grant, tool and arguments, so the
//! same digest) runs exactly once: the store marks the item used in one
//! conditional write before the call runs. A denial answers a tool error
//! with the person's reason. Agents hold run tokens, never admin roles, so
//! no agent can decide an item: deciding is an admin-API action.
//!
//! The gate fails closed: when the policies or items cannot be read in
//! time, the call is not run and the agent is told to retry.
//!
//! Policies are read from the tenant's settings and cached for
//! [`POLICY_CACHE_TTL`] per tenant, so a call no policy covers costs one
//! map lookup and the policy match, not a store read.

use corkboard_board::{
    ApprovalItem, ApprovalPolicies, ApprovalStatus, ArgumentsHash, AuditOutcome, AuditRecord,
    AuditSink, Grant, GrantLedger, StoreError, TenantId, Timestamp, arguments_digest,
};
use corkboard_mcp::{ToolCall, ToolOutput};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// How long a tenant's policies are used before they are read again: a
/// policy change reaches every replica's gate within this.
pub const POLICY_CACHE_TTL: Duration = Duration::from_secs(1);
/// The most tenants whose policies one process caches (beyond it, the
/// oldest entries go first).
const POLICY_CACHE_MAX: usize = 4096;

/// Told when an item is made or decided (the live feed).
pub trait ApprovalEvents: Send + Sync + 'static {
    fn approval_changed(&self, item: &ApprovalItem);
}

/// What the gate says about one call.
#[derive(Debug)]
pub enum Gate {
    /// No policy covers it, or its approval was just spent on it: run it.
    Proceed,
    /// Answer this instead of running the call.
    Answer(ToolOutput),
}

/// The approval gate of a process (shared by its studio endpoint and its
/// run gateways).
pub struct ApprovalGate {
    ledger: Arc<dyn GrantLedger>,
    audit: Arc<dyn AuditSink>,
    events: Option<Arc<dyn ApprovalEvents>>,
    timeout: Duration,
    cache: Mutex<HashMap<TenantId, (Instant, Arc<ApprovalPolicies>)>>,
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
        }
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
        let started = Instant::now();
        match self.decide(grant, tool, arguments).await {
            Ok(None) => Gate::Proceed,
            Ok(Some(text)) => {
                self.account(grant, tool, raw_arguments, started);
                Gate::Answer(ToolOutput {
                    structured: None,
                    text,
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
                    ),
                    is_error: true,
                    relay: None,
                    content: Vec::new(),
                })
            }
        }
    }

    /// `None`: run the call; `Some(text)`: answer this tool error instead.
    async fn decide(
        &self,
        grant: &Grant,
        tool: &str,
        arguments: &Map<String, Value>,
    ) -> Result<Option<String>, StoreError> {
        let policies = self.policies(&grant.tenant).await?;
        if policies.is_empty() {
            return Ok(None);
        }
        let Some(policy) = policies.covering(&grant.id, tool, &Value::Object(arguments.clone()))
        else {
            return Ok(None);
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
                    return Ok(None);
                }
                // Spent by a racing call of the same run, or expired just now.
                return Ok(Some(format!(
                    "approval {} was already used or has expired: an approval runs its call \
                     once. Call the tool again to request a new approval.",
                    item.id
                )));
            }
            Some(item) if item.status == ApprovalStatus::Pending && !item.is_expired_at(now) => {
                return Ok(Some(pending_text(&item, tool, false)));
            }
            Some(item) if item.status == ApprovalStatus::Denied && !item.is_expired_at(now) => {
                let decision = item.decision.clone();
                return Ok(Some(format!(
                    "A person ({}) denied this call (approval {}): {}. It was not run; do not \
                     retry it unchanged.",
                    decision.as_ref().map_or("unknown", |d| d.by.as_str()),
                    item.id,
                    decision
                        .as_ref()
                        .and_then(|d| d.reason.as_deref())
                        .unwrap_or("no reason given"),
                )));
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
        Ok(Some(text))
    }

    fn account(&self, grant: &Grant, tool: &str, raw_arguments: &[u8], started: Instant) {
        self.audit.record(AuditRecord {
            at: Timestamp::now(),
            tenant: grant.tenant.clone(),
            run: grant.run.clone(),
            grant: grant.id.clone(),
            tool: tool.to_owned(),
            outcome: AuditOutcome::Denied,
            latency_micros: u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            arguments_hash: ArgumentsHash::of(raw_arguments),
            issue: None,
            definition_hash: None,
        });
    }
}

/// The answer of a call waiting for a person: honest (nothing was done),
/// with the handle and how to collect the outcome.
fn pending_text(item: &ApprovalItem, tool: &str, new: bool) -> String {
    format!(
        "This call awaits a person's approval (policy \"{}\"); nothing was done yet. \
         Approval handle: {} ({}, expires at {}). To collect the outcome, call {tool} again \
         with exactly the same arguments once a person has decided on the Corkboard web board: \
         an approved call then runs, once; a denied one answers with the person's reason. \
         Meanwhile, carry on with other work.",
        item.policy,
        item.id,
        if new {
            "requested now"
        } else {
            "still pending"
        },
        item.expires_at,
    )
}
