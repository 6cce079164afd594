//! The agent on the other end of a request, as a backend may address it:
//! what it negotiated and declared, and (for a 2025 session's request
//! whose response is an SSE stream) a way to send it messages on that
//! stream before the final result.
//!
//! This is the one capability a gateway needs to relay an upstream's
//! server-to-client requests to a 2025 agent: the backend writes a
//! JSON-RPC request (with an id it minted) through [`Peer::send`], and the
//! transport turns the POST's response into a real event stream carrying
//! it, then the call's result. The agent's answer arrives as its own POST
//! and reaches the backend through [`crate::ToolBackend::client_response`],
//! on whichever replica the agent sent it to.
//!
//! Bounded: a send waits at most [`Peer::send_timeout`] for room on the
//! stream (an absent or stalled consumer is reported as
//! [`PeerError::TimedOut`], never waited on forever), and a stream whose
//! consumer went away reports [`PeerError::Gone`] at once.

use std::time::Duration;

use tokio::sync::mpsc;

use crate::relay::AgentCapabilities;
use crate::revision::Revision;

/// Messages queued on one response stream before a send waits.
pub(crate) const OUTBOX: usize = 16;

/// Why a message could not be sent to the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum PeerError {
    /// This request's response cannot carry requests (2026-07-28, stdio,
    /// or a transport without a stream).
    #[error("the agent's request has no response stream to carry requests on")]
    NoStream,
    /// The agent's response stream is closed (it disconnected).
    #[error("the agent's response stream is closed")]
    Gone,
    /// The agent did not read its stream within the send timeout.
    #[error("the agent did not read its response stream within {0:?}")]
    TimedOut(Duration),
}

/// See the module docs.
#[derive(Debug, Clone)]
pub struct Peer {
    revision: Revision,
    capabilities: AgentCapabilities,
    outbox: Option<mpsc::Sender<Vec<u8>>>,
    send_timeout: Duration,
}

impl Peer {
    /// How long a send waits for the agent's stream by default.
    pub const DEFAULT_SEND_TIMEOUT: Duration = Duration::from_secs(10);

    /// An agent that can be told nothing on this request (its answers may
    /// still be relayed).
    pub fn without_stream(revision: Revision, capabilities: AgentCapabilities) -> Self {
        Self {
            revision,
            capabilities,
            outbox: None,
            send_timeout: Self::DEFAULT_SEND_TIMEOUT,
        }
    }

    /// An agent reached through `outbox` (the transport reads it into the
    /// response stream).
    pub(crate) fn with_stream(
        revision: Revision,
        capabilities: AgentCapabilities,
        outbox: mpsc::Sender<Vec<u8>>,
        send_timeout: Duration,
    ) -> Self {
        Self {
            revision,
            capabilities,
            outbox: Some(outbox),
            send_timeout,
        }
    }

    /// An agent reached through a channel the caller reads itself (a
    /// gateway holding an upstream's call for a 2026-07-28 agent turns what
    /// arrives into `input_required` results), with at most [`OUTBOX`]
    /// messages queued.
    pub fn channel(
        revision: Revision,
        capabilities: AgentCapabilities,
        send_timeout: Duration,
    ) -> (Self, mpsc::Receiver<Vec<u8>>) {
        let (outbox, inbox) = mpsc::channel(OUTBOX);
        (
            Self::with_stream(revision, capabilities, outbox, send_timeout),
            inbox,
        )
    }

    /// The agent's negotiated revision.
    pub fn revision(&self) -> Revision {
        self.revision
    }

    /// What the agent declared in its `initialize`.
    pub fn capabilities(&self) -> AgentCapabilities {
        self.capabilities
    }

    /// Whether [`Self::send`] can reach the agent at all.
    pub fn has_stream(&self) -> bool {
        self.outbox.as_ref().is_some_and(|tx| !tx.is_closed())
    }

    pub fn send_timeout(&self) -> Duration {
        self.send_timeout
    }

    /// Sends one JSON-RPC message (its exact bytes) on the agent's
    /// response stream, within the send timeout.
    pub async fn send(&self, message: Vec<u8>) -> Result<(), PeerError> {
        let Some(outbox) = &self.outbox else {
            return Err(PeerError::NoStream);
        };
        match tokio::time::timeout(self.send_timeout, outbox.send(message)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(PeerError::Gone),
            Err(_) => Err(PeerError::TimedOut(self.send_timeout)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[actix_rt::test]
    async fn sends_are_bounded_and_report_a_gone_consumer() {
        let caps = AgentCapabilities::default();
        let none = Peer::without_stream(Revision::V2025_11_25, caps);
        assert_eq!(none.send(b"{}".to_vec()).await, Err(PeerError::NoStream));

        let (tx, mut rx) = mpsc::channel(1);
        let peer = Peer::with_stream(Revision::V2025_11_25, caps, tx, Duration::from_millis(50));
        assert!(peer.has_stream());
        assert_eq!(peer.send(b"1".to_vec()).await, Ok(()));
        // Nobody reads: the second send times out instead of waiting.
        assert_eq!(
            peer.send(b"2".to_vec()).await,
            Err(PeerError::TimedOut(Duration::from_millis(50)))
        );
        assert_eq!(rx.recv().await.as_deref(), Some(b"1".as_slice()));
        drop(rx);
        assert_eq!(peer.send(b"3".to_vec()).await, Err(PeerError::Gone));
        assert!(!peer.has_stream());
    }
}
