//! A 2026-07-28 agent's call of an upstream tool (the 2026-07-28 ×
//! 2026-07-28 path): a 2026-07-28 upstream's `input_required` relayed as
//! the gateway's own with a sealed `requestState` wrapping the
//! upstream's, resumed on any replica from the agent's retry, each
//! sealed state acted on once across replicas (recorded as used first);
//! a 2025 upstream that asks mid-call goes to [`super::held`].

use super::held::{self, HeldRounds};
use super::output::{asks, parsed, refused, text_output, to_output, unavailable};
use crate::client::UpstreamClient;
use crate::conn::Conn;
use crate::seam;
use crate::shares::Holder;
use crate::waiting::Waiting;
use corkboard_board::AuditOutcome;
use corkboard_grants::{ResolvedGrant, UsedOnce};
use corkboard_mcp::relay::seal::{ArgumentDigest, CallBinding, RelaySealer, RequestState};
use corkboard_mcp::relay::{self, Eras};
use corkboard_mcp::{Peer, RelayAnswer, Revision, RpcError, ToolCall, ToolDef, ToolOutput};
use serde_json::value::RawValue;
use std::sync::Arc;

/// A 2026-07-28 agent's call of an upstream tool, which may need input
/// (see [`crate::seam`], "2026-07-28"): relayed as the gateway's own
/// `input_required` with a sealed state wrapping the upstream's, and
/// resumed on any replica from the agent's retry.
pub(super) struct ModernCall<'a> {
    pub client: &'a UpstreamClient,
    pub conn: &'a Arc<Conn>,
    pub waiting: &'a Waiting,
    pub used: &'a dyn UsedOnce,
    pub def: &'a ToolDef,
    pub tool: &'a str,
    pub call: &'a ToolCall<'a>,
    pub peer: &'a Peer,
    pub sealer: &'a RelaySealer,
    pub grant: &'a ResolvedGrant,
    pub deadline: std::time::Duration,
}

impl ModernCall<'_> {
    pub(super) async fn run(&self) -> (ToolOutput, AuditOutcome) {
        let g = self.grant.grant();
        let digest = ArgumentDigest::of(
            std::str::from_utf8(self.call.raw_arguments)
                .ok()
                .and_then(|text| RawValue::from_string(text.to_owned()).ok())
                .as_deref(),
        );
        let Some(arguments) = digest else {
            return unavailable("the arguments are not JSON");
        };
        let upstream = self.client.name().as_str();
        let binding = CallBinding {
            run: g.run.as_str(),
            grant: g.id.as_str(),
            upstream,
            method: "tools/call",
            name: self.call.name,
            arguments,
        };
        let eras = Eras::new(self.peer.revision(), Revision::V2026_07_28);
        // A retry: the sealed state must be this call's, and each response
        // must answer what was asked.
        let empty = RawValue::from_string("{}".into()).ok();
        let (retry, round) = match self.call.request_state {
            None => (None, 0),
            Some(raw) => {
                let Ok(state) = serde_json::from_str::<String>(raw.get()) else {
                    return refused(RpcError::invalid_params(
                        "Invalid params: `requestState` must be a string",
                    ));
                };
                let opened = match self.sealer.open_state(&state, &binding, seam::now_secs()) {
                    Ok(opened) => opened,
                    Err(rejection) => {
                        tracing::info!(upstream, tool = %self.call.name, tenant = %g.tenant, run = %g.run, outcome = rejection.name(), "relay retry refused");
                        return refused(rejection.rpc_error("requestState"));
                    }
                };
                let Some(responses) = self.call.input_responses.or(empty.as_deref()) else {
                    return refused(RpcError::internal("Internal error"));
                };
                if let Err(refusal) =
                    relay::check_input_responses(eras, &opened.state.expected, responses)
                {
                    tracing::info!(upstream, tool = %self.call.name, tenant = %g.tenant, run = %g.run, outcome = "refused", rule = refusal.rule.name(), "relay retry refused");
                    if !opened.state.upstream_ids.is_empty() {
                        // A held call's answers refused: the call ends now,
                        // so the upstream's pending requests are completed
                        // with correlated errors at once, not when the
                        // relay's bounds run out.
                        self.held().end(&opened.state);
                    }
                    return refused(refusal.rpc_error());
                }
                // A held call's state is single-use by the call being taken
                // out of this process's table (another replica refuses it
                // as not held there, without using it up).
                if !opened.state.upstream_ids.is_empty() {
                    return self.held().resume(&binding, &opened.state, responses).await;
                }
                // Any replica may resume this one: recorded as used first,
                // so the upstream runs it once.
                if let Err(refusal) = seam::use_once(
                    self.used,
                    seam::USED_REQUEST_STATE,
                    &opened.nonce,
                    opened.expires_at,
                    "requestState",
                    (g.tenant.as_str(), g.run.as_str()),
                )
                .await
                {
                    return refused(refusal);
                }
                (
                    Some((responses, opened.state.upstream_state)),
                    opened.state.round,
                )
            }
        };
        let answer = match self
            .client
            .call_tool_modern(
                g.run.as_str(),
                self.tool,
                self.call.raw_arguments,
                &self.def.input_schema,
                self.deadline,
                self.peer.capabilities(),
                retry,
            )
            .await
        {
            Some(answer) => answer,
            None if self.call.request_state.is_some() => {
                return refused(RpcError::invalid_params(format!(
                    "Invalid params: upstream {upstream} asks nothing in 2026-07-28 form (it speaks a 2025 session); make the call again without requestState"
                )));
            }
            // A 2025 upstream asks mid-call: the call is held here and
            // its requests become this agent's input_required.
            None if self.peer.capabilities().any() => {
                let holder = Holder::run(g.tenant.as_str(), g.run.as_str());
                if let Err(full) = self.waiting.room_to_hold(&holder) {
                    tracing::info!(upstream, tool = %self.call.name, tenant = %g.tenant, run = %g.run, share = full.share.as_str(), outcome = "share_exhausted", "relay call refused");
                    return refused(full.rpc_error());
                }
                let call = held::start(
                    self.conn,
                    self.sealer,
                    self.peer,
                    g,
                    self.tool,
                    self.call.name,
                    self.call.raw_arguments,
                    self.deadline,
                );
                return self.held().next_round(&binding, call, 1).await;
            }
            // An agent that declared nothing: the upstream's requests are
            // refused at once.
            None => {
                let answer = self
                    .client
                    .call_tool(
                        g.run.as_str(),
                        self.tool,
                        self.call.raw_arguments,
                        self.deadline,
                        None,
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
        let Some(requests) = result.input_requests.map(ToOwned::to_owned) else {
            return unavailable(&format!(
                "upstream {upstream} asked for input with no inputRequests (state-only rounds are not relayed)"
            ));
        };
        let expected = match relay::check_input_requests(eras, &self.peer.capabilities(), &requests)
        {
            Ok(expected) => expected,
            Err(refusal) => {
                tracing::info!(upstream, tool = %self.call.name, tenant = %g.tenant, run = %g.run, outcome = "refused", rule = refusal.rule.name(), "relay request refused");
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
        let state = RequestState {
            upstream_state: result.request_state,
            expected,
            round: round.saturating_add(1),
            upstream_ids: Default::default(),
        };
        match self.sealer.seal_state(&binding, &state, seam::now_secs()) {
            Ok(sealed) => {
                tracing::info!(upstream, tool = %self.call.name, tenant = %g.tenant, run = %g.run, round = state.round, outcome = "input_required", "relay request");
                (
                    ToolOutput {
                        structured: None,
                        text: Default::default(),
                        is_error: false,
                        relay: Some(RelayAnswer::InputRequired {
                            input_requests: requests,
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
                        "upstream {upstream} asked for more input than the gateway relays: {}",
                        rejection.rpc_error("requestState").message
                    ),
                    true,
                ),
                AuditOutcome::ToolError,
            ),
        }
    }

    /// This call's held rounds (a 2025 upstream that asks mid-call).
    fn held(&self) -> HeldRounds<'_> {
        HeldRounds {
            client: self.client,
            waiting: self.waiting,
            def: self.def,
            name: self.call.name,
            peer: self.peer,
            sealer: self.sealer,
            tenant: self.grant.grant().tenant.as_str(),
        }
    }
}
