//! What waits in this process between a call's rounds, behind methods (no
//! other module touches these tables):
//!
//! - answers: requests relayed to 2025 agents from a 2026-07-28
//!   upstream's `input_required` (`view::mixed`), by relayed id; the call
//!   waiting for each answer lives here, and an answer that reaches
//!   another replica is refused there;
//! - held calls: a 2025 upstream's call held for a 2026-07-28 agent
//!   (`view::held`) between an `input_required` and the agent's retry, by
//!   the round's first relayed id; at most [`HELD_MAX`], the finished
//!   ones dropped first.

use crate::conn::lock;
use crate::error::UpstreamError;
use corkboard_mcp::RpcError;
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::sync::Mutex;
use tokio::sync::{mpsc, oneshot};

/// The agent's answer to a relayed request: its `result`, or why there is
/// none.
pub(crate) type Answer = Result<Box<RawValue>, RpcError>;

/// Most calls held for 2026-07-28 agents in one process.
pub(crate) const HELD_MAX: usize = 1024;

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
#[derive(Default)]
pub(crate) struct Waiting {
    answers: Mutex<HashMap<String, oneshot::Sender<Answer>>>,
    held: Mutex<HashMap<String, HeldCall>>,
}

impl Waiting {
    /// Where the answer to the relayed request `id` will arrive.
    pub(crate) fn expect_answer(&self, id: String) -> oneshot::Receiver<Answer> {
        let (tx, rx) = oneshot::channel();
        lock(&self.answers).insert(id, tx);
        rx
    }

    /// Stops waiting for the answers to `ids` (their call ended).
    pub(crate) fn forget_answers(&self, ids: &[String]) {
        let mut answers = lock(&self.answers);
        for id in ids {
            answers.remove(id);
        }
    }

    /// Hands `answer` to the call waiting for relayed id `id`; false when
    /// no call here waits for it (another replica's, or one that ended).
    pub(crate) fn answer(&self, id: &str, answer: Answer) -> bool {
        let waiting = lock(&self.answers).remove(id);
        match waiting {
            Some(waiting) => {
                // The call may have ended meanwhile: then nobody reads it.
                let _ = waiting.send(answer);
                true
            }
            None => false,
        }
    }

    /// Holds `call` under `key` until the agent's retry; false (and the
    /// call dropped, which stops it) when [`HELD_MAX`] calls are held.
    #[must_use]
    pub(crate) fn hold(&self, key: String, call: HeldCall) -> bool {
        let mut held = lock(&self.held);
        if held.len() >= HELD_MAX {
            // Calls whose time ran out (never retried) go first.
            held.retain(|_, held| !held.task.is_finished());
        }
        if held.len() >= HELD_MAX {
            return false;
        }
        held.insert(key, call);
        true
    }

    /// The call held under `key`, taken out (to resume it).
    pub(crate) fn take_held(&self, key: &str) -> Option<HeldCall> {
        lock(&self.held).remove(key)
    }
}
