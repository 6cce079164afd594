//! Which grants' runs have called an upstream tool: what decides whether a
//! run writes to the board at [`Integrity::Agent`] or
//! [`Integrity::External`].
//!
//! A run's gateway marks its grant before it relays the run's first call
//! to an upstream tool ([`UpstreamCalls::mark`]), so no answer from outside
//! the board reaches the run before the mark is recorded; every board
//! write of a run whose grant could call upstream tools asks
//! ([`UpstreamCalls::writer_integrity`]). The mark lives in the shared
//! record of values used once ([`UsedOnce`]: the store's ledger, or Redis
//! with the Redis registry), so a write served by another replica or
//! process than the call sees it too. It expires with the latest moment
//! the grant can live (its creation plus the maximum lifetime, which no
//! renewal passes).
//!
//! A grant without upstream capabilities cannot call one, so its writes
//! need no look-up; a grant already seen marked stays marked in this
//! process (a mark is never taken back). Fails closed: when the record
//! cannot answer, the run counts as having called one.

use crate::used_once::{UsedOnce, UsedOnceUnavailable};
use corkboard_board::{AuthorKind, Grant, GrantId, Integrity};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The namespace of the marks in the used-once record.
const KIND: &str = "upstream-called";

/// Grants remembered as marked in one process; past it the memory is
/// cleared (the record still answers, one read per write).
const KNOWN_MAX: usize = 65_536;

/// The record of grants whose runs called an upstream tool.
pub struct UpstreamCalls {
    record: Arc<dyn UsedOnce>,
    max_lifetime: Duration,
    known: Mutex<HashSet<GrantId>>,
}

impl std::fmt::Debug for UpstreamCalls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UpstreamCalls")
            .field("max_lifetime", &self.max_lifetime)
            .finish_non_exhaustive()
    }
}

impl UpstreamCalls {
    /// Marks in `record`, kept until a grant's creation plus
    /// `max_lifetime` (the grants' maximum lifetime).
    pub fn new(record: Arc<dyn UsedOnce>, max_lifetime: Duration) -> Self {
        Self {
            record,
            max_lifetime,
            known: Mutex::new(HashSet::new()),
        }
    }

    fn known(&self, grant: &GrantId) -> bool {
        self.known
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(grant)
    }

    fn remember(&self, grant: &GrantId) {
        let mut known = self.known.lock().unwrap_or_else(|p| p.into_inner());
        if known.len() >= KNOWN_MAX {
            known.clear();
        }
        known.insert(grant.clone());
    }

    /// Records that `grant`'s run calls an upstream tool; call it before
    /// the call is relayed, and refuse the call when it fails.
    pub async fn mark(&self, grant: &Grant) -> Result<(), UsedOnceUnavailable> {
        if self.known(&grant.id) {
            return Ok(());
        }
        let until_ms = grant
            .created_at
            .plus_millis(i64::try_from(self.max_lifetime.as_millis()).unwrap_or(i64::MAX))
            .as_millis()
            .max(grant.expires_at.as_millis());
        let until = u64::try_from(until_ms / 1000 + 1).unwrap_or(u64::MAX);
        // First or a repeat: either way the mark is there.
        self.record
            .first_use(KIND, grant.id.as_str().as_bytes(), until)
            .await?;
        self.remember(&grant.id);
        Ok(())
    }

    /// Whether `grant`'s run has called an upstream tool.
    pub async fn called(&self, grant: &Grant) -> Result<bool, UsedOnceUnavailable> {
        if self.known(&grant.id) {
            return Ok(true);
        }
        let called = self
            .record
            .recorded(KIND, grant.id.as_str().as_bytes())
            .await?;
        if called {
            self.remember(&grant.id);
        }
        Ok(called)
    }

    /// The level `grant`'s run writes at now ([`Integrity::of_writer`]):
    /// no look-up for a grant that cannot call upstream tools, and the
    /// lowest when the record cannot answer.
    pub async fn writer_integrity(calls: Option<&Self>, grant: &Grant) -> Integrity {
        if grant.capabilities.upstream_patterns().next().is_none() {
            return Integrity::of_writer(AuthorKind::Run, false);
        }
        let called = match calls {
            Some(calls) => calls.called(grant).await.unwrap_or_else(|err| {
                tracing::warn!(grant = %grant.id, error = %err, "upstream-call record unavailable: writing at the lowest integrity");
                true
            }),
            // Nothing here records calls: assume the worst.
            None => true,
        };
        Integrity::of_writer(AuthorKind::Run, called)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::used_once::MemoryUsedOnce;
    use corkboard_board::{Capabilities, RunId, TenantId, Timestamp};

    fn grant(capabilities: &str) -> Grant {
        let now = Timestamp::now();
        Grant {
            id: GrantId::generate(),
            tenant: TenantId::parse("t").unwrap(),
            run: RunId::parse("r").unwrap(),
            capabilities: Capabilities::parse_csv(capabilities).unwrap(),
            created_at: now,
            expires_at: now.plus_millis(60_000),
            created_by: "test".to_owned(),
            budgets: Default::default(),
            min_integrity: None,
        }
    }

    #[actix_rt::test]
    async fn a_run_is_external_once_marked_and_a_board_only_grant_never_is() {
        let record: Arc<dyn UsedOnce> = Arc::new(MemoryUsedOnce::default());
        let calls = UpstreamCalls::new(record.clone(), Duration::from_secs(3600));
        let upstream = grant("issues:read,upstream:github:*");
        assert_eq!(
            UpstreamCalls::writer_integrity(Some(&calls), &upstream).await,
            Integrity::Agent
        );
        calls.mark(&upstream).await.unwrap();
        assert_eq!(
            UpstreamCalls::writer_integrity(Some(&calls), &upstream).await,
            Integrity::External
        );
        // Another process sharing the record sees the mark.
        let elsewhere = UpstreamCalls::new(record, Duration::from_secs(3600));
        assert!(elsewhere.called(&upstream).await.unwrap());
        // Without a record, a grant that could call one is assumed to have.
        assert_eq!(
            UpstreamCalls::writer_integrity(None, &upstream).await,
            Integrity::External
        );
        let board_only = grant("issues:read,issues:create");
        assert_eq!(
            UpstreamCalls::writer_integrity(None, &board_only).await,
            Integrity::Agent
        );
    }
}
