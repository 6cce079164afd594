//! A 2025 agent's call of an upstream tool (the 2025 paths): with a
//! response stream and declared capabilities the call may relay the
//! upstream's requests to the agent ([`super::mixed`], for either era of
//! upstream); otherwise it is one bounded call whose requests to the
//! client the upstream gets refused at once.

use super::mixed::MixedCall;
use super::output::to_output;
use crate::client::UpstreamClient;
use crate::seam::Relay;
use crate::waiting::Waiting;
use corkboard_board::AuditOutcome;
use corkboard_grants::ResolvedGrant;
use corkboard_mcp::relay::seal::RelaySealer;
use corkboard_mcp::{ToolCall, ToolDef, ToolOutput};
use std::time::Duration;

/// See the module docs.
pub(super) struct LegacyCall<'a> {
    pub client: &'a UpstreamClient,
    pub def: &'a ToolDef,
    pub tool: &'a str,
    pub call: &'a ToolCall<'a>,
    pub grant: &'a ResolvedGrant,
    /// Seals relayed ids (none: nothing is relayed).
    pub sealer: Option<&'a RelaySealer>,
    pub waiting: &'a Waiting,
    pub call_timeout: Duration,
    pub relay_call_timeout: Duration,
}

impl LegacyCall<'_> {
    pub(super) async fn run(&self) -> (ToolOutput, AuditOutcome) {
        let g = self.grant.grant();
        let call = self.call;
        // A 2025 agent with a response stream and declared capabilities
        // can be asked; then the call may wait on it (bounded by
        // `relay_call_timeout`).
        let relay = match (call.peer, self.sealer) {
            (Some(peer), Some(sealer)) if peer.has_stream() && peer.capabilities().any() => {
                Some(Relay {
                    peer,
                    sealer,
                    tenant: g.tenant.as_str(),
                    run: g.run.as_str(),
                    grant: g.id.as_str(),
                    tool: call.name,
                })
            }
            _ => None,
        };
        let deadline = if relay.is_some() {
            self.relay_call_timeout
        } else {
            self.call_timeout
        };
        match relay {
            Some(relay) => {
                let mixed = MixedCall {
                    client: self.client,
                    def: self.def,
                    tool: self.tool,
                    arguments: call.raw_arguments,
                    relay,
                    waiting: self.waiting,
                    deadline,
                };
                mixed.run().await
            }
            None => {
                let answer = self
                    .client
                    .call_tool(
                        g.run.as_str(),
                        self.tool,
                        call.raw_arguments,
                        deadline,
                        None,
                    )
                    .await;
                to_output(self.def, answer)
            }
        }
    }
}
