//! What waits in this process between a call's rounds, behind methods (no
//! other module touches these tables), each a [`SharedTable`] with
//! per-tenant and per-run shares:
//!
//! - answers: requests relayed to 2025 agents from a 2026-07-28
//!   upstream's `input_required` (`view::mixed`), by relayed id; the call
//!   waiting for each answer lives here, and an answer that reaches
//!   another replica is refused there. Taking an answer's waiter out is
//!   what makes the answer single-use;
//! - held calls: a 2025 upstream's call held for a 2026-07-28 agent
//!   (`view::held`) between an `input_required` and the agent's retry, by
//!   the round's first relayed id; taking it out for a retry is what makes
//!   that round's `requestState` single-use. Finished ones are dropped
//!   first when a share is full. A 2025 session's call held for a
//!   person's approval (the tools crate's gate) takes a place in the same
//!   table while it waits ([`Waiting::hold_for_approval`]).

use crate::error::UpstreamError;
use crate::shares::{Holder, ShareExhausted, ShareLimits, SharedTable, Table};
use corkboard_mcp::RpcError;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};

/// The agent's answer to a relayed request: its `result`, or why there is
/// none.
pub(crate) type Answer = Result<Box<RawValue>, RpcError>;

/// A 2025 upstream's call held for a 2026-07-28 agent: the task running
/// it, and where the requests it relays arrive.
pub(crate) struct HeldCall {
    pub(crate) task: tokio::task::JoinHandle<Result<Value, UpstreamError>>,
    pub(crate) inbox: mpsc::Receiver<Vec<u8>>,
}

impl Drop for HeldCall {
    fn drop(&mut self) {
        // Forgotten (expired, never retried, replaced): stop the call; the
        // upstream gets error replies for what it asked (see `client`).
        self.task.abort();
    }
}

/// An entry of the held-calls table: a relayed call, or the place of a
/// call held for a person's approval (spent once its permit is dropped).
pub(crate) enum Held {
    Call(HeldCall),
    Approval(std::sync::Weak<()>),
}

/// See the module docs.
pub(crate) struct Waiting {
    answers: SharedTable<String, oneshot::Sender<Answer>>,
    held: SharedTable<String, Held>,
}

/// A waiter whose call ended (its receiver dropped) waits for nothing.
fn answer_spent(waiter: &oneshot::Sender<Answer>) -> bool {
    waiter.is_closed()
}

/// A held call whose time ran out (never retried) holds nothing.
fn held_spent(held: &Held) -> bool {
    match held {
        Held::Call(call) => call.task.is_finished(),
        Held::Approval(permit) => permit.strong_count() == 0,
    }
}

impl Waiting {
    pub(crate) fn new(held: ShareLimits, pending: ShareLimits) -> Self {
        Self {
            answers: SharedTable::new(Table::PendingRequests, pending),
            held: SharedTable::new(Table::HeldCalls, held),
        }
    }

    /// Where the answer to the relayed request `id` of `holder` will
    /// arrive; refused when its share of pending requests is full.
    pub(crate) fn expect_answer(
        &self,
        holder: &Holder,
        id: String,
    ) -> Result<oneshot::Receiver<Answer>, ShareExhausted> {
        let (tx, rx) = oneshot::channel();
        self.answers.insert(holder, id, tx, answer_spent)?;
        Ok(rx)
    }

    /// Stops waiting for the answers to `ids` (their call ended).
    pub(crate) fn forget_answers(&self, ids: &[String]) {
        for id in ids {
            self.answers.take(id);
        }
    }

    /// Hands `answer` to the call waiting for relayed id `id`; false when
    /// no call here waits for it (another replica's, one that ended, or
    /// an answer already given).
    pub(crate) fn answer(&self, id: &str, answer: Answer) -> bool {
        match self.answers.take(id) {
            Some(waiting) => {
                // The call may have ended meanwhile: then nobody reads it.
                let _ = waiting.send(answer);
                true
            }
            None => false,
        }
    }

    /// Whether `holder` may hold a call now (asked before the call starts,
    /// so a full share is refused before the upstream sees anything).
    pub(crate) fn room_to_hold(&self, holder: &Holder) -> Result<(), ShareExhausted> {
        self.held.room(holder, held_spent)
    }

    /// Holds `call` of `holder` under `key` until the agent's retry;
    /// refused (and the call dropped, which stops it) when a share is
    /// full.
    pub(crate) fn hold(
        &self,
        holder: &Holder,
        key: String,
        call: HeldCall,
    ) -> Result<(), ShareExhausted> {
        self.held.insert(holder, key, Held::Call(call), held_spent)
    }

    /// The call held under `key`, taken out (to resume it).
    pub(crate) fn take_held(&self, key: &str) -> Option<HeldCall> {
        match self.held.take(key)? {
            Held::Call(call) => Some(call),
            Held::Approval(_) => None,
        }
    }

    /// A place in the held-calls table for a call of `holder` waiting for
    /// a person's approval, kept while the returned permit lives.
    pub(crate) fn hold_for_approval(
        &self,
        holder: &Holder,
    ) -> Result<std::sync::Arc<()>, ShareExhausted> {
        let permit = std::sync::Arc::new(());
        let key = format!("approval:{}", ulid_like());
        self.held.insert(
            holder,
            key,
            Held::Approval(std::sync::Arc::downgrade(&permit)),
            held_spent,
        )?;
        Ok(permit)
    }
}

/// A key no other entry has: the process's next number.
fn ulid_like() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
