//! Runs without a board: `corkboard run` with neither a server nor a
//! usable data dir. The agent still gets every tool its grant allows, and
//! each call says plainly that this run has no board, so it never works
//! around a missing tool by inventing issues.

use async_trait::async_trait;
use corkboard_board::{
    ApprovalId, ApprovalItem, ApprovalStatus, Decision, Grant, GrantEvent, GrantId, GrantLedger,
    GrantPolicy, IssueStore, RunId, StoreDecorator, StoreError, TenantId, Timestamp,
};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// What a boardless run's tool calls answer.
pub const BOARDLESS_MESSAGE: &str = "board unavailable in this run: no board store is configured (start corkboard serve or pass --data-dir)";

/// The reason inside the store error (the tools word it as
/// [`BOARDLESS_MESSAGE`]).
const REASON: &str = "no board store is configured (start corkboard serve or pass --data-dir)";

/// An [`IssueStore`] that answers every call with
/// [`StoreError::NotConfigured`]: not an outage to wait out, so the agent is
/// not sent into a retry loop.
#[derive(Debug, Default, Clone, Copy)]
pub struct BoardlessStore;

fn not_configured() -> StoreError {
    StoreError::NotConfigured {
        reason: REASON.to_owned(),
    }
}

impl StoreDecorator for BoardlessStore {
    type Inner = dyn IssueStore;

    fn inner(&self) -> Result<&Self::Inner, StoreError> {
        Err(not_configured())
    }
}

corkboard_board::decorate_store!(BoardlessStore: IssueStore);

/// A grant ledger in this process's memory, for runs with no store to
/// record grants in. It lives exactly as long as the process that serves
/// the grants, which is all a boardless run needs.
#[derive(Debug, Default)]
pub struct MemoryLedger {
    grants: Mutex<BTreeMap<GrantId, GrantEvent>>,
    /// Writes taken per grant and budget kind (a boardless run writes
    /// nothing, but the ledger's contract is whole).
    budgets: Mutex<BTreeMap<(GrantId, corkboard_board::BudgetKind), u32>>,
}

impl MemoryLedger {
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<GrantId, GrantEvent>> {
        // Every mutation below is a single insert or field write.
        self.grants
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn budgets(
        &self,
    ) -> std::sync::MutexGuard<'_, BTreeMap<(GrantId, corkboard_board::BudgetKind), u32>> {
        // One map update per call.
        self.budgets
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[async_trait]
impl GrantLedger for MemoryLedger {
    async fn record_grant(&self, grant: &Grant, token_hash: &str) -> Result<(), StoreError> {
        self.lock().insert(
            grant.id.clone(),
            GrantEvent {
                grant: grant.clone(),
                token_hash: token_hash.to_owned(),
                revoked_at: None,
                revoked_by: None,
            },
        );
        Ok(())
    }

    async fn record_revocation(
        &self,
        id: &GrantId,
        by: &str,
        at: Timestamp,
    ) -> Result<GrantEvent, StoreError> {
        let mut grants = self.lock();
        let event = grants
            .get_mut(id)
            .ok_or_else(|| StoreError::not_found(format!("grant {id}")))?;
        if event.revoked_at.is_none() {
            event.revoked_at = Some(at);
            event.revoked_by = Some(by.to_owned());
        }
        Ok(event.clone())
    }

    async fn record_expiry(
        &self,
        id: &GrantId,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<GrantEvent, StoreError> {
        let mut grants = self.lock();
        let event = grants
            .get_mut(id)
            .ok_or_else(|| StoreError::not_found(format!("grant {id}")))?;
        if event.revoked_at.is_none() && !event.grant.is_expired_at(now) {
            event.grant.expires_at = expires_at;
        }
        Ok(event.clone())
    }

    async fn grant_policy(&self, _tenant: &TenantId) -> Result<GrantPolicy, StoreError> {
        // A boardless run has no tenant settings: the configuration applies.
        Ok(GrantPolicy::default())
    }

    async fn set_grant_policy(
        &self,
        _tenant: &TenantId,
        _policy: &GrantPolicy,
    ) -> Result<(), StoreError> {
        Err(StoreError::NotConfigured {
            reason: "this run has no board store to keep tenant settings in".into(),
        })
    }

    async fn reserve_budget(
        &self,
        id: &GrantId,
        kind: corkboard_board::BudgetKind,
        limit: u32,
    ) -> Result<bool, StoreError> {
        let mut budgets = self.budgets();
        let used = budgets.entry((id.clone(), kind)).or_insert(0);
        if *used < limit {
            *used += 1;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    async fn release_budget(
        &self,
        id: &GrantId,
        kind: corkboard_board::BudgetKind,
    ) -> Result<(), StoreError> {
        if let Some(used) = self.budgets().get_mut(&(id.clone(), kind)) {
            *used = used.saturating_sub(1);
        }
        Ok(())
    }

    // A boardless run has no tenant settings, so no approval policies and
    // never an item: nothing to keep, and nothing to decide.
    async fn put_approval(&self, _item: &ApprovalItem) -> Result<(), StoreError> {
        Err(StoreError::NotConfigured {
            reason: "this run has no board store to keep approvals in".into(),
        })
    }

    async fn approval(
        &self,
        _tenant: &TenantId,
        _id: &ApprovalId,
    ) -> Result<Option<ApprovalItem>, StoreError> {
        Ok(None)
    }

    async fn list_approvals(
        &self,
        _tenant: &TenantId,
        _status: Option<ApprovalStatus>,
        _limit: u32,
    ) -> Result<Vec<ApprovalItem>, StoreError> {
        Ok(Vec::new())
    }

    async fn approval_for_call(
        &self,
        _tenant: &TenantId,
        _run: &RunId,
        _tool: &str,
        _digest: &str,
    ) -> Result<Option<ApprovalItem>, StoreError> {
        Ok(None)
    }

    async fn decide_approval(
        &self,
        _tenant: &TenantId,
        id: &ApprovalId,
        _decision: &Decision,
    ) -> Result<ApprovalItem, StoreError> {
        Err(StoreError::not_found(format!("approval {id}")))
    }

    async fn use_approval(
        &self,
        _tenant: &TenantId,
        _id: &ApprovalId,
        _now: Timestamp,
    ) -> Result<bool, StoreError> {
        Ok(false)
    }

    async fn first_use_recorded(
        &self,
        _kind: &str,
        _id: &str,
        _now: Timestamp,
    ) -> Result<bool, StoreError> {
        // Nothing is recorded here (see `record_first_use`).
        Ok(false)
    }

    async fn record_first_use(
        &self,
        _kind: &str,
        _id: &str,
        _expires_at: Timestamp,
        _now: Timestamp,
    ) -> Result<bool, StoreError> {
        // Nothing relays sealed values without a store (upstreams live
        // there), so there is nothing to record; refusing keeps a use from
        // passing unrecorded.
        Err(StoreError::NotConfigured {
            reason: "this run has no board store to record used values in".into(),
        })
    }

    async fn budget_used(
        &self,
        id: &GrantId,
    ) -> Result<std::collections::BTreeMap<corkboard_board::BudgetKind, u32>, StoreError> {
        Ok(self
            .budgets()
            .iter()
            .filter(|((grant, _), _)| grant == id)
            .map(|((_, kind), used)| (*kind, *used))
            .collect())
    }

    async fn grant(&self, id: &GrantId) -> Result<GrantEvent, StoreError> {
        self.lock()
            .get(id)
            .cloned()
            .ok_or_else(|| StoreError::not_found(format!("grant {id}")))
    }

    async fn grant_by_token_hash(
        &self,
        token_hash: &str,
    ) -> Result<Option<GrantEvent>, StoreError> {
        Ok(self
            .lock()
            .values()
            .find(|e| e.token_hash == token_hash)
            .cloned())
    }

    async fn list_grants(
        &self,
        tenant: &TenantId,
        run: Option<&RunId>,
        cursor: Option<&GrantId>,
        limit: u32,
    ) -> Result<Vec<GrantEvent>, StoreError> {
        // Grant ids are ULIDs: newest first is descending id order.
        Ok(self
            .lock()
            .values()
            .rev()
            .filter(|e| &e.grant.tenant == tenant && run.is_none_or(|r| &e.grant.run == r))
            .filter(|e| cursor.is_none_or(|c| &e.grant.id < c))
            .take(limit as usize)
            .cloned()
            .collect())
    }

    async fn active_grants(&self, now: Timestamp) -> Result<Vec<GrantEvent>, StoreError> {
        Ok(self
            .lock()
            .values()
            .filter(|e| e.revoked_at.is_none() && !e.grant.is_expired_at(now))
            .cloned()
            .collect())
    }

    async fn revoked_grants(&self, now: Timestamp) -> Result<Vec<GrantEvent>, StoreError> {
        Ok(self
            .lock()
            .values()
            .filter(|e| e.revoked_at.is_some() && !e.grant.is_expired_at(now))
            .cloned()
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tools_word_a_boardless_store_as_the_message() {
        let err = corkboard_tools::ToolsError::from_store(not_configured(), None);
        assert_eq!(err.to_string(), BOARDLESS_MESSAGE);
    }
}
