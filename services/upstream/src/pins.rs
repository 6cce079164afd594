//! Pinned tool definitions as the gateway applies them: which of an
//! upstream's listed tools runs may see and call.
//!
//! Each listing's definitions are hashed ([`corkboard_board::ToolSighting`])
//! and recorded in the store ([`UpstreamStore::observe_tools`], which
//! queues `upstream.tool_changed` for each new or changed tool); a tool is
//! offered only when the hash it was listed with is the one a tenant admin
//! approved. Approvals are made through the control plane on any replica,
//! so each upstream's approved hashes are re-read from the store once they
//! are older than the registry TTL. A store that cannot be read leaves the
//! last known approvals (none at first): a tool is never offered on a
//! guess.

use corkboard_board::{
    DefinitionHash, TenantId, Timestamp, ToolPin, ToolSighting, UpstreamName, UpstreamStore,
};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Called with the tenant, upstream and tool name of each tool this
/// process finds newly pending (the live board's hint to re-fetch).
pub type ToolChanged = Arc<dyn Fn(&TenantId, &UpstreamName, &str) + Send + Sync>;

/// One upstream's approved definitions, as last read.
#[derive(Debug, Default)]
pub(crate) struct Pins {
    /// Tool (the upstream's name) → its approved definition hash.
    approved: Arc<HashMap<String, DefinitionHash>>,
    /// Tools last seen pending (so each becomes an event here once).
    pending: Vec<(String, DefinitionHash)>,
    read: Option<Instant>,
    /// Bumped on every change, so views built on older approvals are
    /// rebuilt.
    pub(crate) generation: u64,
}

impl Pins {
    /// The approved hashes, and whether they are older than `ttl`.
    pub(crate) fn approved(&self, ttl: Duration) -> (Arc<HashMap<String, DefinitionHash>>, bool) {
        let stale = self.read.is_none_or(|read| read.elapsed() >= ttl);
        (self.approved.clone(), stale)
    }

    /// Takes `pins` as the store's answer; answers the tools that are
    /// pending now and were not when last read (by hash).
    fn update(&mut self, pins: &[ToolPin]) -> Vec<String> {
        let approved: HashMap<String, DefinitionHash> = pins
            .iter()
            .filter_map(|p| Some((p.tool.clone(), p.approved.as_ref()?.hash.clone())))
            .collect();
        let pending: Vec<(String, DefinitionHash)> = pins
            .iter()
            .filter(|p| !p.is_approved())
            .map(|p| (p.tool.clone(), p.seen.clone()))
            .collect();
        let fresh: Vec<String> = pending
            .iter()
            .filter(|p| !self.pending.contains(p))
            .map(|(tool, _)| tool.clone())
            .collect();
        if *self.approved != approved || self.pending != pending {
            self.generation += 1;
        }
        self.approved = Arc::new(approved);
        self.pending = pending;
        self.read = Some(Instant::now());
        fresh
    }

    /// Tries again after `retry` (a failed read keeps what was known).
    fn failed(&mut self, ttl: Duration, retry: Duration) {
        self.read = Instant::now().checked_sub(ttl.saturating_sub(retry));
    }
}

/// What pinning needs of the hub.
pub(crate) struct Pinning<'a> {
    pub store: &'a dyn UpstreamStore,
    pub timeout: Duration,
    pub ttl: Duration,
    pub retry: Duration,
    pub changed: Option<&'a ToolChanged>,
}

impl Pinning<'_> {
    /// Records one listing's `sightings` of `upstream` and takes the pins
    /// the store answers.
    pub(crate) async fn observe(
        &self,
        pins: &Mutex<Pins>,
        tenant: &TenantId,
        upstream: &UpstreamName,
        sightings: &[ToolSighting],
        trust_first_listing: bool,
    ) {
        let written = tokio::time::timeout(
            self.timeout,
            self.store.observe_tools(
                tenant,
                upstream,
                sightings,
                trust_first_listing,
                Timestamp::now(),
            ),
        )
        .await;
        self.take(pins, tenant, upstream, written);
    }

    /// Re-reads `upstream`'s approvals when they are older than the TTL.
    pub(crate) async fn refresh(
        &self,
        pins: &Mutex<Pins>,
        tenant: &TenantId,
        upstream: &UpstreamName,
    ) {
        if !lock(pins).approved(self.ttl).1 {
            return;
        }
        let read =
            tokio::time::timeout(self.timeout, self.store.list_tool_pins(tenant, upstream)).await;
        self.take(pins, tenant, upstream, read);
    }

    fn take(
        &self,
        pins: &Mutex<Pins>,
        tenant: &TenantId,
        upstream: &UpstreamName,
        answer: Result<
            Result<Vec<ToolPin>, corkboard_board::StoreError>,
            tokio::time::error::Elapsed,
        >,
    ) {
        let fresh = match answer {
            Ok(Ok(read)) => lock(pins).update(&read),
            Ok(Err(err)) => {
                tracing::warn!(%tenant, %upstream, error = %err, "upstream tool pins could not be read or written; keeping the last known approvals");
                lock(pins).failed(self.ttl, self.retry);
                return;
            }
            Err(_) => {
                tracing::warn!(%tenant, %upstream, "upstream tool pins timed out; keeping the last known approvals");
                lock(pins).failed(self.ttl, self.retry);
                return;
            }
        };
        for tool in fresh {
            tracing::warn!(%tenant, %upstream, %tool, "upstream tool is new or changed: hidden from runs until a tenant admin approves it");
            if let Some(changed) = self.changed {
                changed(tenant, upstream, &tool);
            }
        }
    }
}

/// Locks the pins; every critical section replaces whole values, so a
/// poisoned lock still holds whole values.
fn lock(pins: &Mutex<Pins>) -> std::sync::MutexGuard<'_, Pins> {
    pins.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::{ToolApproval, UpstreamName};

    fn pin(tool: &str, seen: &str, approved: Option<&str>) -> ToolPin {
        let hash = |h: &str| DefinitionHash::from_stored(h.repeat(64));
        ToolPin {
            tenant: TenantId::parse("acme").unwrap(),
            upstream: UpstreamName::parse("py").unwrap(),
            tool: tool.into(),
            seen: hash(seen),
            definition: "{}".into(),
            seen_at: Timestamp::from_millis(0),
            approved: approved.map(|a| ToolApproval {
                hash: hash(a),
                definition: "{}".into(),
                by: "alice".into(),
                at: Timestamp::from_millis(0),
            }),
        }
    }

    #[test]
    fn newly_pending_tools_are_reported_once_and_approvals_bump_the_generation() {
        let mut pins = Pins::default();
        let fresh = pins.update(&[pin("echo", "a", Some("a")), pin("add", "b", None)]);
        assert_eq!(fresh, vec!["add"]);
        let generation = pins.generation;
        assert!(
            pins.update(&[pin("echo", "a", Some("a")), pin("add", "b", None)])
                .is_empty()
        );
        assert_eq!(pins.generation, generation, "nothing changed");
        assert!(
            pins.update(&[pin("echo", "a", Some("a")), pin("add", "b", Some("b"))])
                .is_empty()
        );
        assert!(pins.generation > generation, "an approval rebuilds views");
        assert_eq!(pins.approved(Duration::from_secs(60)).0.len(), 2);
        let fresh = pins.update(&[pin("echo", "c", Some("a")), pin("add", "b", Some("b"))]);
        assert_eq!(fresh, vec!["echo"], "a changed definition is news again");
    }
}
