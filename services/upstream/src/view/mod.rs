//! One grant's view of its tenant's upstream tools (built by
//! [`crate::Upstreams::view`]): the tool list it sees (board tools first)
//! and where each upstream tool goes; and the call itself
//! ([`crate::Upstreams::call`]): the agent's argument bytes passed on
//! unchanged, the upstream's answer mapped to a tool result, one audit
//! record and one log line per call (upstream, tool, tenant, run,
//! outcome, latency; never arguments, answers or the credential).
//!
//! A call takes the path of its agent's and its upstream's eras, one file
//! each:
//!
//! - [`modern`]: 2026-07-28 agent × 2026-07-28 upstream (`ModernCall`:
//!   `input_required` relayed with a sealed `requestState`, resumed on any
//!   replica);
//! - [`held`]: 2026-07-28 agent × 2025 upstream (the call held in this
//!   process between rounds);
//! - [`legacy`]: a 2025 agent, plain or through [`mixed`] (`MixedCall`:
//!   the upstream's requests relayed on the agent's stream; a 2026-07-28
//!   upstream's answers awaited in this process by relayed id);
//! - [`output`]: what they all answer with.
//!
//! Nothing here imports the hub: it hands a call what it needs
//! ([`CallEnv`]) and builds the view from [`crate::conn`]'s routes.

mod held;
mod legacy;
mod mixed;
mod modern;
mod output;

use crate::conn::{Conn, Route};
use crate::waiting::Waiting;
use corkboard_board::AuditSink;
use corkboard_board::{
    ArgumentsHash, AuditOutcome, AuditRecord, DefinitionHash, Timestamp, UpstreamName,
};
use corkboard_grants::{ResolvedGrant, UsedOnce};
use corkboard_mcp::relay::AgentCapabilities;
use corkboard_mcp::relay::seal::RelaySealer;
use corkboard_mcp::{RefusalKind, RefusedCall, ToolCall, ToolDef, ToolOutput, ToolSet};
use legacy::LegacyCall;
use modern::ModernCall;
use output::{lacking_capability, text_output, unavailable};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// See the module docs.
#[derive(Debug)]
pub struct UpstreamView {
    pub(crate) tools: Arc<ToolSet>,
    pub(crate) routes: HashMap<String, Route>,
    /// Upstream tools listed but outside the grant, with the capability
    /// that would allow each.
    pub(crate) denied: HashMap<String, String>,
    /// Upstream tools the grant allows whose listed definition is not the
    /// approved one (see [`crate::pins`]), with why they are refused.
    pub(crate) pending: HashMap<String, String>,
    pub(crate) stamp: Vec<(u64, u64, u64)>,
}

/// What a call needs of the upstreams it goes through.
pub(crate) struct CallEnv<'a> {
    pub call_timeout: Duration,
    /// The bound on a call that may wait for its agent's input.
    pub relay_call_timeout: Duration,
    /// Seals relayed ids and request states (none: nothing is relayed).
    pub relay: Option<&'a RelaySealer>,
    pub waiting: &'a Waiting,
    /// Where sealed states are recorded as used.
    pub used: &'a dyn UsedOnce,
    /// What the gateway declared when it listed the upstreams' tools.
    pub listed_with: AgentCapabilities,
}

impl UpstreamView {
    /// The board's tools for the grant plus its upstream tools.
    pub fn tools(&self) -> Arc<ToolSet> {
        self.tools.clone()
    }

    /// Whether `name` is one of this view's upstream tools.
    pub fn routes(&self, name: &str) -> bool {
        self.routes.contains_key(name)
    }

    /// Where the upstream tool `name` goes and its definition; `None`
    /// when it is not one (a board tool).
    pub(crate) fn route(&self, name: &str) -> Option<(&Route, &ToolDef)> {
        Some((self.routes.get(name)?, self.tools.get(name)?))
    }

    /// Audits a call the protocol layer refused when it names one of this
    /// view's upstream tools (listed, listed but outside the grant, or
    /// pending approval) and says why (the inner message); `None` leaves
    /// it to the board.
    pub(crate) fn refused(
        &self,
        audit: &dyn AuditSink,
        grant: &ResolvedGrant,
        call: &RefusedCall<'_>,
    ) -> Option<Option<String>> {
        let (outcome, message) = match (call.kind, self.denied.get(call.name)) {
            (RefusalKind::NotListed, None) if self.pending.contains_key(call.name) => {
                (AuditOutcome::Pending, self.pending.get(call.name).cloned())
            }
            (RefusalKind::NotListed, Some(needed)) => (
                AuditOutcome::Denied,
                Some(format!(
                    "tool {} is not allowed by this run's grant: it needs the capability {needed} (allowed: {})",
                    call.name,
                    grant.grant().capabilities.to_csv()
                )),
            ),
            (RefusalKind::InvalidArguments | RefusalKind::HeaderMismatch, _)
                if self.routes(call.name) =>
            {
                (AuditOutcome::ToolError, None)
            }
            _ => return None,
        };
        let g = grant.grant();
        audit.record(AuditRecord {
            at: Timestamp::now(),
            tenant: g.tenant.clone(),
            run: g.run.clone(),
            grant: g.id.clone(),
            // Listed names only (the upstream's, validated), never free text.
            tool: call.name.to_owned(),
            outcome,
            latency_micros: 0,
            arguments_hash: ArgumentsHash::of(call.raw_arguments),
            definition_hash: None,
            issue: None,
        });
        Some(message)
    }
}

/// Runs `tool` of `conn`'s upstream (`def` as the agent sees it) on the
/// path of the agent's and the upstream's eras.
pub(crate) async fn call_tool(
    env: &CallEnv<'_>,
    conn: &Arc<Conn>,
    tool: &str,
    def: &ToolDef,
    grant: &ResolvedGrant,
    call: &ToolCall<'_>,
) -> (ToolOutput, AuditOutcome) {
    let (output, outcome) = call_path(env, conn, tool, def, grant, call).await;
    let agent = call.peer.map(|p| p.capabilities()).unwrap_or_default();
    match lacking_capability(
        &output,
        env.listed_with,
        agent,
        conn.record.name.as_str(),
        call.name,
    ) {
        Some(told) => (told, outcome),
        None => (output, outcome),
    }
}

/// [`call_tool`]'s path by era.
async fn call_path(
    env: &CallEnv<'_>,
    conn: &Arc<Conn>,
    tool: &str,
    def: &ToolDef,
    grant: &ResolvedGrant,
    call: &ToolCall<'_>,
) -> (ToolOutput, AuditOutcome) {
    let modern_agent = call.peer.filter(|p| p.revision().is_modern());
    match (&conn.client, modern_agent, env.relay) {
        (Ok(client), Some(peer), Some(sealer)) => {
            let deadline = if peer.capabilities().any() {
                env.relay_call_timeout
            } else {
                env.call_timeout
            };
            let modern = ModernCall {
                client,
                conn,
                waiting: env.waiting,
                used: env.used,
                def,
                tool,
                call,
                peer,
                sealer,
                grant,
                deadline,
            };
            modern.run().await
        }
        (Ok(client), _, _) => {
            let legacy = LegacyCall {
                client,
                def,
                tool,
                call,
                grant,
                sealer: env.relay,
                waiting: env.waiting,
                call_timeout: env.call_timeout,
                relay_call_timeout: env.relay_call_timeout,
            };
            legacy.run().await
        }
        (Err(why), _, _) => {
            unavailable(&format!("upstream {} unavailable: {why}", conn.record.name))
        }
    }
}

/// The answer of a call whose arguments hold a credential the tenant
/// refuses (`kinds`, never the text): nothing was sent.
pub(crate) fn secret_refused(upstream: &UpstreamName, kinds: &str) -> (ToolOutput, AuditOutcome) {
    (
        text_output(
            format!(
                "the call's arguments hold a credential ({kinds}); nothing was sent to upstream {upstream}. This tenant refuses credentials in upstream calls: the gateway adds the upstream's own credential, so leave it out"
            ),
            true,
        ),
        AuditOutcome::SecretRefused,
    )
}

/// The answer of a call that was not sent because the record of which
/// grants called upstream tools could not take this one
/// (`UpstreamCalls::mark`): its writes' integrity would be wrong.
pub(crate) fn unmarked(upstream: &UpstreamName, why: &str) -> (ToolOutput, AuditOutcome) {
    (
        text_output(
            format!(
                "upstream unavailable: nothing was sent to upstream {upstream}, because the call could not be recorded ({why}); retry shortly"
            ),
            true,
        ),
        AuditOutcome::Unavailable,
    )
}

/// The answer of a call of `upstream`'s stand-in tool, after its tools
/// were listed again (their count, or why not).
pub(crate) fn relisted(
    upstream: &UpstreamName,
    listed: Result<usize, String>,
) -> (ToolOutput, AuditOutcome) {
    match listed {
        Ok(count) => (
            text_output(
                format!(
                    "upstream {upstream} answers again and lists {count} tools: call tools/list to see them"
                ),
                false,
            ),
            AuditOutcome::Ok,
        ),
        Err(why) => unavailable(&format!("upstream {upstream} could not be listed: {why}")),
    }
}

/// The one audit record and the one log line of an upstream call.
#[expect(
    clippy::too_many_arguments,
    reason = "one call's record, each part borrowed from the caller"
)]
pub(crate) fn record_call(
    audit: &dyn AuditSink,
    upstream: &UpstreamName,
    grant: &ResolvedGrant,
    call: &ToolCall<'_>,
    at: Timestamp,
    latency: Duration,
    outcome: AuditOutcome,
    definition_hash: Option<&DefinitionHash>,
) {
    let g = grant.grant();
    audit.record(AuditRecord {
        at,
        tenant: g.tenant.clone(),
        run: g.run.clone(),
        grant: g.id.clone(),
        tool: call.name.to_owned(),
        outcome,
        latency_micros: u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
        arguments_hash: ArgumentsHash::of(call.raw_arguments),
        definition_hash: definition_hash.cloned(),
        issue: None,
    });
    tracing::info!(
        upstream = %upstream,
        tool = %call.name,
        tenant = %g.tenant,
        run = %g.run,
        outcome = outcome.as_str(),
        latency_us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
        "upstream call"
    );
}
