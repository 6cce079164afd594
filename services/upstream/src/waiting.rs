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
//!   first when a share is full.

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

/// See the module docs.
pub(crate) struct Waiting {
    answers: SharedTable<String, oneshot::Sender<Answer>>,
    held: SharedTable<String, HeldCall>,
}

/// A waiter whose call ended (its receiver dropped) waits for nothing.
fn answer_spent(waiter: &oneshot::Sender<Answer>) -> bool {
    waiter.is_closed()
}

/// A held call whose time ran out (never retried) holds nothing.
fn held_spent(call: &HeldCall) -> bool {
    call.task.is_finished()
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
        self.held.insert(holder, key, call, held_spent)
    }

    /// The call held under `key`, taken out (to resume it).
    pub(crate) fn take_held(&self, key: &str) -> Option<HeldCall> {
        self.held.take(key)
    }
}
