//! A 2026-07-28 agent's call of a 2025 upstream that asks mid-call (the
//! 2026-07-28 × 2025 path): the call runs on in a task held in this
//! process ([`Waiting`]) and each round's requests become the agent's
//! `input_required`; the agent's retry delivers the answers to the
//! upstream under its own ids and waits for the next round. A retry that
//! reaches another replica is refused there, saying so.

use super::output::{refused, text_output, to_output, unavailable};
use crate::client::UpstreamClient;
use crate::conn::Conn;
use crate::error::UpstreamError;
use crate::seam::{self, Relay};
use crate::shares::Holder;
use crate::waiting::{HeldCall, Waiting};
use corkboard_board::{AuditOutcome, Grant};
use corkboard_mcp::relay::seal::{CallBinding, RelaySealer, RequestState, RunBinding};
use corkboard_mcp::{Peer, RelayAnswer, RpcError, ToolDef, ToolOutput};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::sync::Arc;
use std::time::Duration;

/// Starts `tool` of `conn`'s upstream for a 2026-07-28 agent (`peer`) in
/// a task of its own, whose requests to the client arrive in the held
/// call's inbox under ids sealed by `sealer`.
#[expect(
    clippy::too_many_arguments,
    reason = "one call's parts, each borrowed from the caller"
)]
pub(super) fn start(
    conn: &Arc<Conn>,
    sealer: &RelaySealer,
    peer: &Peer,
    grant: &Grant,
    tool: &str,
    name: &str,
    arguments: &[u8],
    deadline: Duration,
) -> HeldCall {
    let (peer, inbox) = Peer::channel(
        peer.revision(),
        peer.capabilities(),
        Peer::DEFAULT_SEND_TIMEOUT,
    );
    let conn = conn.clone();
    let sealer = sealer.clone();
    let (tenant, run, grant) = (
        grant.tenant.to_string(),
        grant.run.to_string(),
        grant.id.to_string(),
    );
    let (tool, name) = (tool.to_owned(), name.to_owned());
    let arguments = arguments.to_vec();
    let task = tokio::spawn(async move {
        let relay = Relay {
            peer: &peer,
            sealer: &sealer,
            tenant: &tenant,
            run: &run,
            grant: &grant,
            tool: &name,
        };
        match &conn.client {
            Ok(client) => {
                client
                    .call_tool(&run, &tool, &arguments, deadline, Some(&relay))
                    .await
            }
            Err(why) => Err(UpstreamError::Unavailable(why.clone())),
        }
    });
    HeldCall { task, inbox }
}

/// A held call's rounds, as one agent request sees them.
pub(super) struct HeldRounds<'a> {
    pub client: &'a UpstreamClient,
    pub waiting: &'a Waiting,
    pub def: &'a ToolDef,
    /// The tool's name as the agent called it.
    pub name: &'a str,
    pub peer: &'a Peer,
    pub sealer: &'a RelaySealer,
    pub tenant: &'a str,
}

impl HeldRounds<'_> {
    /// Waits for the held call to end (its result) or to ask (the next
    /// `input_required`, the call held again under its first relayed id).
    pub(super) async fn next_round(
        &self,
        binding: &CallBinding<'_>,
        mut held: HeldCall,
        round: u8,
    ) -> (ToolOutput, AuditOutcome) {
        let first = tokio::select! {
            biased;
            message = held.inbox.recv() => message,
            joined = &mut held.task => {
                let answer = joined.unwrap_or_else(|_| {
                    Err(UpstreamError::Unavailable("the held call failed".into()))
                });
                return to_output(self.def, answer);
            }
        };
        let Some(first) = first else {
            let answer = (&mut held.task)
                .await
                .unwrap_or_else(|_| Err(UpstreamError::Unavailable("the held call failed".into())));
            return to_output(self.def, answer);
        };
        let mut messages = vec![first];
        while let Ok(more) = held.inbox.try_recv() {
            messages.push(more);
        }
        // The agent's `inputRequests`, written here member by member: each
        // request's `params` as the upstream's bytes (carried verbatim in
        // the relayed message), never re-serialised from a parsed value.
        let mut requests: std::collections::BTreeMap<String, String> = Default::default();
        let mut expected = std::collections::BTreeMap::new();
        let mut upstream_ids = std::collections::BTreeMap::new();
        let binding_run = RunBinding {
            run: binding.run,
            grant: binding.grant,
        };
        for message in &messages {
            let Ok(message) = serde_json::from_slice::<HeldRequest<'_>>(message) else {
                continue;
            };
            let Ok(opened) = self
                .sealer
                .open_id(&message.id, &binding_run, seam::now_secs())
            else {
                continue;
            };
            let relayed = opened.request;
            let mut request = String::with_capacity(64);
            request.push_str("{\"method\":");
            request.push_str(&Value::String(message.method).to_string());
            if let Some(params) = message.params {
                request.push_str(",\"params\":");
                request.push_str(params.get());
            }
            request.push('}');
            requests.insert(message.id.clone(), request);
            expected.insert(message.id.clone(), relayed.expected);
            upstream_ids.insert(message.id, relayed.upstream_id);
        }
        let Some(key) = requests.keys().next().cloned() else {
            return unavailable("the upstream's requests could not be relayed");
        };
        let state = RequestState {
            upstream_state: None,
            expected,
            round,
            upstream_ids,
        };
        let mut joined = String::from("{");
        for (i, (id, request)) in requests.iter().enumerate() {
            if i > 0 {
                joined.push(',');
            }
            joined.push_str(&Value::String(id.clone()).to_string());
            joined.push(':');
            joined.push_str(request);
        }
        joined.push('}');
        let Ok(raw) = RawValue::from_string(joined) else {
            return unavailable("the upstream's requests could not be relayed");
        };
        match self.sealer.seal_state(binding, &state, seam::now_secs()) {
            Ok(sealed) => {
                let holder = Holder::run(self.tenant, binding.run);
                if let Err(full) = self.waiting.hold(&holder, key, held) {
                    tracing::info!(upstream = binding.upstream, tool = %self.name, run = binding.run, share = full.share.as_str(), outcome = "share_exhausted", "relay request");
                    return refused(full.rpc_error());
                }
                tracing::info!(upstream = binding.upstream, tool = %self.name, run = binding.run, round, outcome = "input_required_held", "relay request");
                (
                    ToolOutput {
                        structured: None,
                        text: Default::default(),
                        is_error: false,
                        relay: Some(RelayAnswer::InputRequired {
                            input_requests: raw,
                            request_state: sealed,
                        }),
                        content: Vec::new(),
                    },
                    AuditOutcome::Ok,
                )
            }
            Err(rejection) => (
                text_output(
                    format!(
                        "upstream {} asked for more input than the gateway relays: {}",
                        binding.upstream,
                        rejection.rpc_error("requestState").message
                    ),
                    true,
                ),
                AuditOutcome::ToolError,
            ),
        }
    }

    /// Ends the held call `state` belongs to, if it is held here: dropped,
    /// its task stops and the upstream's requests still pending get error
    /// replies (see `HeldCall`'s `Drop`).
    pub(super) fn end(&self, state: &RequestState) {
        if let Some(key) = state.expected.keys().next() {
            drop(self.waiting.take_held(key));
        }
    }

    /// A retry answering a held call's requests: each answer delivered to
    /// the upstream under its own id, then the next round.
    pub(super) async fn resume(
        &self,
        binding: &CallBinding<'_>,
        state: &RequestState,
        responses: &RawValue,
    ) -> (ToolOutput, AuditOutcome) {
        let Some(key) = state.expected.keys().next() else {
            return refused(RpcError::internal("Internal error"));
        };
        let held = self.waiting.take_held(key);
        let Some(held) = held else {
            return refused(RpcError::invalid_params(
                "Invalid params: this requestState belongs to a call held by another gateway replica, or one that already ended; make the original call again (without requestState)",
            ));
        };
        // Each answer borrowed from the agent's bytes, so the upstream's
        // JSON-RPC `result` is exactly what the agent wrote.
        let responses: std::collections::BTreeMap<String, &RawValue> =
            serde_json::from_str(responses.get()).unwrap_or_default();
        for (id, result) in responses {
            let Ok(id_raw) = RawValue::from_string(Value::String(id).to_string()) else {
                return refused(RpcError::internal("Internal error"));
            };
            let delivery = match seam::answer(
                self.sealer,
                self.tenant,
                binding.run,
                binding.grant,
                self.peer,
                corkboard_mcp::ClientResponse {
                    id: &id_raw,
                    result: Some(result),
                    error: None,
                },
            ) {
                Ok(Some(delivery)) => delivery,
                Ok(None) => return refused(RpcError::internal("Internal error")),
                Err(error) => return refused(error),
            };
            let delivered = self
                .client
                .deliver(
                    delivery.session.as_deref(),
                    &delivery.revision,
                    delivery.body,
                )
                .await;
            if let Some(refusal) = delivery.refused {
                return refused(refusal);
            }
            if let Err(e) = delivered {
                return unavailable(&e.to_string());
            }
        }
        self.next_round(binding, held, state.round.saturating_add(1))
            .await
    }
}

/// A held call's request as relayed (see [`seam::decide`]): the
/// gateway's id, and the upstream's params unparsed.
#[derive(Deserialize)]
struct HeldRequest<'a> {
    id: String,
    method: String,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}
