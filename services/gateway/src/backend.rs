//! What a run's MCP requests are served by.
//!
//! The gateway resolves every request's caller itself (the token must
//! resolve to a grant for exactly the run of the port or route) and hands
//! the engine a [`RunPrincipal`]: the grant plus the binding snapshot the
//! request keeps for its whole life. Tool calls are then routed to the
//! binding's [`RunBackend`](crate::binding::RunBackend), the seam a run's tools plug into: the board's
//! tools today (over a real store, or over one that answers "no board in
//! this run" as a typed error), and the tenant's upstream servers: a
//! request of a grant with `upstream:` capabilities carries its
//! [`UpstreamView`] (taken once, like the binding), whose tools are listed
//! after the board's and whose calls go to the upstream.

use crate::actor::{Refused, RunHandle};
use crate::binding::Binding;
use crate::refusals::{rate_limited, run_ended};
use async_trait::async_trait;
use corkboard_board::Grant;
use corkboard_grants::ResolvedGrant;
use corkboard_grants::limiter::RateLimiter;
use corkboard_mcp::{
    ClientResponse, Peer, Principal, RefusedCall, RpcError, ServerIdentity, ToolBackend, ToolCall,
    ToolOutput, ToolSet,
};
use corkboard_tools::{ApprovalGate, COLLECT_TOOL, Collected, Gate};
use corkboard_upstream::UpstreamView;
use corkboard_upstream::Upstreams;
use serde_json::json;
use std::sync::Arc;

/// The caller of a run's request: its grant and the binding it is served with.
#[derive(Clone)]
pub struct RunPrincipal {
    grant: ResolvedGrant,
    binding: Arc<Binding>,
    /// Admits a batch's requests after the first (none: all admitted).
    gate: Option<BatchGate>,
    /// The grant's upstream tools (none: the board's alone).
    upstream: Option<Arc<UpstreamView>>,
}

/// The run a request was admitted to and the limiter that admitted it:
/// what the batch's further requests are checked against.
#[derive(Clone)]
pub(crate) struct BatchGate {
    run: RunHandle,
    limiter: Arc<dyn RateLimiter>,
}

impl std::fmt::Debug for RunPrincipal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunPrincipal")
            .field("grant", &self.grant.grant().id)
            .finish_non_exhaustive()
    }
}

impl RunPrincipal {
    pub(crate) fn new(grant: ResolvedGrant, binding: Arc<Binding>) -> Self {
        Self {
            grant,
            binding,
            gate: None,
            upstream: None,
        }
    }

    /// Takes the grant's view of its tenant's upstream tools, when the
    /// binding serves upstreams and the grant names any (bounded: cached
    /// lists, or a fetch within the upstream list timeout).
    pub(crate) async fn with_upstreams(mut self) -> Self {
        if let Some(upstreams) = self.binding.upstreams() {
            self.upstream = upstreams.view(&self.grant).await;
        }
        self
    }

    /// Charges a batch's further requests to `run`'s rate limit and stops
    /// them once the run ends.
    pub(crate) fn with_batch_gate(mut self, run: RunHandle, limiter: Arc<dyn RateLimiter>) -> Self {
        self.gate = Some(BatchGate { run, limiter });
        self
    }

    pub fn grant(&self) -> &Grant {
        self.grant.grant()
    }
}

impl Principal for RunPrincipal {
    fn session_binding(&self) -> &str {
        self.grant.grant().id.as_str()
    }
}

/// The MCP backend of every run: routes each call to its principal's
/// binding.
#[derive(Debug)]
pub struct GatewayBackend {
    identity: ServerIdentity,
}

impl GatewayBackend {
    pub fn new() -> Self {
        Self {
            identity: corkboard_tools::server_identity(),
        }
    }
}

impl Default for GatewayBackend {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl ToolBackend for GatewayBackend {
    type Principal = RunPrincipal;

    fn identity(&self) -> &ServerIdentity {
        &self.identity
    }

    fn tools(&self, principal: &RunPrincipal) -> Arc<ToolSet> {
        match &principal.upstream {
            Some(view) => view.tools(),
            None => principal.binding.backend().tools(&principal.grant),
        }
    }

    async fn call_tool(&self, principal: &RunPrincipal, call: ToolCall<'_>) -> ToolOutput {
        if let (Some(view), Some(upstreams)) = (&principal.upstream, principal.binding.upstreams())
        {
            // An upstream's tool (`<upstream>__<tool>`; board tools have no
            // `__`) passes the approval gate here, a board tool in its own
            // backend: the one gate, each call asked once.
            if call.name.contains("__")
                && let Some(gate) = principal.binding.approvals()
                && let Gate::Answer(output) = gate.check(principal.grant(), &call).await
            {
                return output;
            }
            if let Some(output) = upstreams.call(view, &principal.grant, &call).await {
                return output;
            }
            if call.name == COLLECT_TOOL
                && let Some(gate) = principal.binding.approvals()
                && let Some(output) =
                    collect_upstream(gate, view, upstreams, principal, &call).await
            {
                return output;
            }
        }
        principal
            .binding
            .backend()
            .call_tool(&principal.grant, call)
            .await
    }

    fn call_refused(&self, principal: &RunPrincipal, call: RefusedCall<'_>) -> Option<String> {
        if let (Some(view), Some(upstreams)) = (&principal.upstream, principal.binding.upstreams())
            && let Some(message) = upstreams.refused(view, &principal.grant, &call)
        {
            return message;
        }
        principal
            .binding
            .backend()
            .call_refused(&principal.grant, call)
    }
    async fn admit_batch_element(&self, principal: &RunPrincipal) -> Result<(), RpcError> {
        let Some(gate) = &principal.gate else {
            return Ok(());
        };
        let key = &gate.run.state.key;
        match gate.run.admit_more(gate.limiter.as_ref()).await {
            Ok(()) => Ok(()),
            Err(Refused::Ended(reason)) => Err(run_ended(key, Some(reason), false).error),
            Err(Refused::RateLimited(limited)) => Err(rate_limited(key, limited).error),
        }
    }

    /// A call that waits for a person may be held (2025 sessions), when
    /// the gate holds calls and the caller's tenant has policies.
    fn may_hold(&self, principal: &RunPrincipal) -> bool {
        principal
            .binding
            .approvals()
            .is_some_and(|gate| gate.may_hold(&principal.grant().tenant))
    }

    /// Only a grant with upstream tools, on a gateway that relays, can be
    /// sent requests before its result.
    fn may_relay(&self, principal: &RunPrincipal) -> bool {
        principal.upstream.is_some()
            && principal
                .binding
                .upstreams()
                .is_some_and(|upstreams| upstreams.relays())
    }

    /// The agent's answer to a relayed request goes to its upstream (on
    /// whichever replica it arrives: the relayed id says where).
    async fn client_response(
        &self,
        principal: &RunPrincipal,
        peer: &Peer,
        response: ClientResponse<'_>,
    ) -> Result<(), RpcError> {
        match principal.binding.upstreams() {
            Some(upstreams) => upstreams.deliver(&principal.grant, peer, response).await,
            None => Ok(()),
        }
    }
}

/// The collect tool for an approved upstream call: the gate spends the
/// item (the one conditional write) and the upstream runs the call once,
/// here, where the upstreams are. `None` for everything else (a bad
/// handle, a pending, refused or board tool's item): the board's collect
/// tool answers and audits those.
async fn collect_upstream(
    gate: &ApprovalGate,
    view: &UpstreamView,
    upstreams: &Upstreams,
    principal: &RunPrincipal,
    call: &ToolCall<'_>,
) -> Option<ToolOutput> {
    let started = std::time::Instant::now();
    let id = call
        .arguments
        .get("handle")
        .and_then(|handle| handle.as_str())
        .and_then(|handle| corkboard_board::ApprovalId::parse(handle).ok())?;
    let (item, arguments) = match gate
        .collect(principal.grant(), &id, |tool| tool.contains("__"))
        .await
    {
        Ok(Collected::Run { item, arguments }) => (item, arguments),
        _ => return None,
    };
    let approved = ToolCall {
        name: &item.tool,
        arguments: &arguments,
        raw_arguments: item.arguments.as_bytes(),
        peer: call.peer,
        input_responses: None,
        request_state: None,
        progress_token: None,
    };
    let Some(mut output) = upstreams.call(view, &principal.grant, &approved).await else {
        gate.record_collect(principal.grant(), call.raw_arguments, started, false);
        return Some(ToolOutput {
            structured: None,
            text: format!(
                "approval {} was used, but {} is no longer among this run's tools; it was not \
                 run",
                item.id, item.tool
            )
            .into(),
            is_error: true,
            relay: None,
            content: Vec::new(),
        });
    };
    if output.relay.is_none() && !output.is_error {
        let mut wrapped = json!({ "status": "ran", "handle": item.id, "tool": item.tool });
        if let Some(result) = output.structured.take() {
            wrapped["result"] = result.into_value();
        }
        output.structured = Some(wrapped.into());
        output.text = format!(
            "approval {} was used: {} ran once.\n{}",
            item.id, item.tool, output.text
        )
        .into();
    }
    gate.record_collect(
        principal.grant(),
        call.raw_arguments,
        started,
        !output.is_error,
    );
    Some(output)
}
