//! A 2025 agent's call, on its response stream, of an upstream that may
//! need input: the 2025 × 2026-07-28 path, and the 2025 × 2025 one with a
//! relay (the upstream's requests rewritten onto the agent's stream by
//! [`crate::seam`]). The answers a 2026-07-28 upstream's requests wait for
//! are kept in [`Waiting`] (this process).

use super::output::{asks, parsed, refused, text_output, to_output, unavailable};
use crate::client::UpstreamClient;
use crate::seam::{self, Relay};
use crate::shares::Holder;
use crate::waiting::Waiting;
use corkboard_board::AuditOutcome;
use corkboard_mcp::relay::seal::{self as seal, RelayedRequest, RunBinding};
use corkboard_mcp::relay::{self, Eras};
use corkboard_mcp::{Revision, ToolDef, ToolOutput};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::BTreeMap;
use std::time::Instant;

/// A 2025 agent's call (with a response stream) of an upstream tool: a
/// 2025 upstream's requests to the client are relayed on the call's stream
/// ([`crate::seam`]); a 2026-07-28 upstream's `input_required` is turned
/// into real requests on that stream, their answers awaited here (held in
/// this process, keyed by relayed id: an answer that reaches another
/// replica is refused there, saying so), and the upstream retried with
/// them, at most [`seal::MAX_ROUNDS`] rounds within the call's deadline.
pub(super) struct MixedCall<'a> {
    pub client: &'a UpstreamClient,
    pub def: &'a ToolDef,
    pub tool: &'a str,
    pub arguments: &'a [u8],
    pub relay: Relay<'a>,
    pub waiting: &'a Waiting,
    pub deadline: std::time::Duration,
}

/// Forgets a call's held requests when it ends, however it ends.
struct HeldGuard<'a> {
    waiting: &'a Waiting,
    ids: Vec<String>,
}

impl Drop for HeldGuard<'_> {
    fn drop(&mut self) {
        self.waiting.forget_answers(&self.ids);
    }
}

impl MixedCall<'_> {
    pub(super) async fn run(&self) -> (ToolOutput, AuditOutcome) {
        let started = Instant::now();
        let peer = self.relay.peer;
        let caps = peer.capabilities();
        let upstream = self.client.name().as_str();
        let eras = Eras::new(peer.revision(), Revision::V2026_07_28);
        let left = || self.deadline.saturating_sub(started.elapsed());
        let timed_out = || {
            unavailable(&format!(
                "upstream {upstream} unavailable: no answer within {} ms",
                self.deadline.as_millis()
            ))
        };
        let mut guard = HeldGuard {
            waiting: self.waiting,
            ids: Vec::new(),
        };
        let mut retry: Option<(Box<RawValue>, Option<String>)> = None;
        for round in 0..=seal::MAX_ROUNDS {
            let answering = retry.as_ref().map(|(r, s)| (&**r, s.clone()));
            let answer = match self
                .client
                .call_tool_modern(
                    self.relay.run,
                    self.tool,
                    self.arguments,
                    &self.def.input_schema,
                    left(),
                    caps,
                    answering,
                )
                .await
            {
                Some(answer) => answer,
                // A 2025 upstream: the id-rewriting relay on the stream.
                None => {
                    let answer = self
                        .client
                        .call_tool(
                            self.relay.run,
                            self.tool,
                            self.arguments,
                            left(),
                            Some(&self.relay),
                        )
                        .await;
                    return to_output(self.def, answer);
                }
            };
            let answer = match answer {
                Ok(answer) => answer,
                Err(err) => return to_output(self.def, Err(err)),
            };
            let Some(result) = asks(&answer) else {
                return to_output(self.def, parsed(&answer));
            };
            if round == seal::MAX_ROUNDS {
                return (
                    text_output(
                        format!(
                            "upstream {upstream} asked for input more than {} times in one call; the gateway stopped",
                            seal::MAX_ROUNDS
                        ),
                        true,
                    ),
                    AuditOutcome::ToolError,
                );
            }
            // Each request's params go to the agent as the upstream wrote
            // them.
            let raw = result.input_requests;
            let requests = raw.and_then(|raw| {
                serde_json::from_str::<BTreeMap<String, RawRequest<'_>>>(raw.get()).ok()
            });
            let (Some(requests), Some(raw)) = (requests, raw) else {
                return unavailable(&format!(
                    "upstream {upstream} asked for input with no inputRequests (state-only rounds are not relayed)"
                ));
            };
            let expected = match relay::check_input_requests(eras, &caps, raw) {
                Ok(expected) => expected,
                Err(refusal) => {
                    tracing::info!(
                        upstream,
                        tool = self.relay.tool,
                        tenant = self.relay.tenant,
                        run = self.relay.run,
                        outcome = "refused",
                        rule = refusal.rule.name(),
                        "relay request refused"
                    );
                    return (
                        text_output(
                            format!(
                                "upstream {upstream} asked for input the gateway does not relay: {refusal}"
                            ),
                            true,
                        ),
                        AuditOutcome::ToolError,
                    );
                }
            };
            let mut waits = Vec::with_capacity(requests.len());
            for (key, request) in requests {
                let (Some(expectation), Ok(upstream_id)) = (
                    expected.get(&key),
                    RawValue::from_string(Value::String(key.to_owned()).to_string()),
                ) else {
                    return unavailable("an input request could not be relayed");
                };
                let sealed = RelayedRequest {
                    upstream: upstream.to_owned(),
                    upstream_id,
                    expected: expectation.clone(),
                    upstream_revision: Some(Revision::V2026_07_28.as_str().to_owned()),
                    upstream_session: None,
                };
                let binding = RunBinding {
                    run: self.relay.run,
                    grant: self.relay.grant,
                };
                let Ok(id) = self
                    .relay
                    .sealer
                    .mint_id(&binding, &sealed, seam::now_secs())
                else {
                    return unavailable("an input request is too large to relay");
                };
                let holder = Holder::run(self.relay.tenant, self.relay.run);
                let rx = match self.waiting.expect_answer(&holder, id.clone()) {
                    Ok(rx) => rx,
                    Err(full) => {
                        tracing::info!(
                            upstream,
                            tool = self.relay.tool,
                            tenant = self.relay.tenant,
                            run = self.relay.run,
                            share = full.share.as_str(),
                            outcome = "share_exhausted",
                            "relay request"
                        );
                        return refused(full.rpc_error());
                    }
                };
                guard.ids.push(id.clone());
                let message = RelayedMessage {
                    jsonrpc: "2.0",
                    id: &id,
                    method: &request.method,
                    params: request.params,
                };
                let Ok(message) = serde_json::to_vec(&message) else {
                    return unavailable("an input request could not be relayed");
                };
                if let Err(why) = peer.send(message).await {
                    return unavailable(&format!(
                        "the agent could not be asked for upstream {upstream}'s input: {why}"
                    ));
                }
                tracing::info!(
                    upstream,
                    tool = self.relay.tool,
                    tenant = self.relay.tenant,
                    run = self.relay.run,
                    round = round + 1,
                    outcome = "relayed",
                    "relay request"
                );
                waits.push((key, rx));
            }
            // The agent's answers go to the upstream as it wrote them.
            let mut responses: BTreeMap<String, Box<RawValue>> = BTreeMap::new();
            for (key, rx) in waits {
                match tokio::time::timeout(left(), rx).await {
                    Ok(Ok(Ok(answer))) => {
                        responses.insert(key, answer);
                    }
                    Ok(Ok(Err(error))) => {
                        return (
                            text_output(
                                format!(
                                    "upstream {upstream}'s input request was not answered: {}",
                                    error.message
                                ),
                                true,
                            ),
                            AuditOutcome::ToolError,
                        );
                    }
                    Ok(Err(_)) | Err(_) => return timed_out(),
                }
            }
            let Ok(responses) = serde_json::value::to_raw_value(&responses) else {
                return unavailable("the agent's answers could not be relayed");
            };
            retry = Some((responses, result.request_state));
        }
        timed_out()
    }
}

/// One of the upstream's input requests, its params unparsed.
#[derive(Deserialize)]
struct RawRequest<'a> {
    method: String,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
}

/// A request relayed to a 2025 agent on its call's stream.
#[derive(serde::Serialize)]
struct RelayedMessage<'a> {
    jsonrpc: &'static str,
    id: &'a str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a RawValue>,
}
