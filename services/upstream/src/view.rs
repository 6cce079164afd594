//! One grant's view of its tenant's upstream tools (built by
//! [`crate::Upstreams::view`]): the tool list it sees (board tools first)
//! and where each upstream tool goes, plus the call itself: the agent's
//! argument bytes passed on unchanged, the upstream's answer mapped to a
//! tool result, one audit record and one log line per call (upstream,
//! tool, tenant, run, outcome, latency; never arguments, answers or the
//! credential).

use crate::Upstreams;
use crate::hub::Conn;
use crate::seam::{self, Relay};
use corkboard_board::{ArgumentsHash, AuditOutcome, AuditRecord, Timestamp};
use corkboard_mcp::relay::seal::{
    self as seal, ArgumentDigest, CallBinding, RelaySealer, RelayedRequest, RequestState,
    RunBinding,
};
use corkboard_mcp::relay::{self, Eras};
use corkboard_mcp::{
    Peer, RefusalKind, RefusedCall, RelayAnswer, Revision, RpcError, ToolCall, ToolDef, ToolOutput,
    ToolSet,
};
use corkboard_tools::ResolvedGrant;
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

/// Where an agent-visible upstream tool goes.
#[derive(Debug)]
pub(crate) enum Route {
    Tool {
        conn: Arc<Conn>,
        tool: String,
    },
    /// The stand-in of an upstream that could not be listed.
    Unavailable {
        conn: Arc<Conn>,
    },
}

/// See the module docs.
#[derive(Debug)]
pub struct UpstreamView {
    pub(crate) tools: Arc<ToolSet>,
    pub(crate) routes: HashMap<String, Route>,
    /// Upstream tools listed but outside the grant, with the capability
    /// that would allow each.
    pub(crate) denied: HashMap<String, String>,
    pub(crate) stamp: Vec<(u64, u64)>,
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

    /// Runs an upstream tool; `None` when `call` is not one (a board tool).
    pub async fn call(
        &self,
        upstreams: &Upstreams,
        grant: &ResolvedGrant,
        call: &ToolCall<'_>,
    ) -> Option<ToolOutput> {
        let route = self.routes.get(call.name)?;
        let def = self.tools.get(call.name)?;
        let started = Instant::now();
        let at = Timestamp::now();
        let (upstream, output, outcome) = match route {
            Route::Tool { conn, tool } => {
                let modern_agent = call.peer.filter(|p| p.revision().is_modern());
                let (output, outcome) = match (&conn.client, modern_agent, &upstreams.relay) {
                    (Ok(client), Some(peer), Some(sealer)) => {
                        let deadline = if peer.capabilities().any() {
                            upstreams.options.relay_call_timeout
                        } else {
                            upstreams.options.call_timeout
                        };
                        let modern = ModernCall {
                            client,
                            conn,
                            upstreams,
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
                        let g = grant.grant();
                        // A 2025 agent with a response stream and declared
                        // capabilities can be asked; then the call may wait
                        // on it (bounded by `relay_call_timeout`).
                        let relay = match (call.peer, &upstreams.relay) {
                            (Some(peer), Some(sealer))
                                if peer.has_stream() && peer.capabilities().any() =>
                            {
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
                            upstreams.options.relay_call_timeout
                        } else {
                            upstreams.options.call_timeout
                        };
                        match relay {
                            Some(relay) => {
                                let mixed = MixedCall {
                                    client,
                                    def,
                                    tool,
                                    arguments: call.raw_arguments,
                                    relay,
                                    upstreams,
                                    deadline,
                                };
                                mixed.run().await
                            }
                            None => {
                                let answer = client
                                    .call_tool(tool, call.raw_arguments, deadline, None)
                                    .await;
                                to_output(def, answer)
                            }
                        }
                    }
                    (Err(why), _, _) => {
                        unavailable(&format!("upstream {} unavailable: {why}", conn.record.name))
                    }
                };
                (&conn.record.name, output, outcome)
            }
            Route::Unavailable { conn } => {
                let (output, outcome) = match upstreams.relist(conn).await {
                    Ok(count) => (
                        text_output(
                            format!(
                                "upstream {} answers again and lists {count} tools: call tools/list to see them",
                                conn.record.name
                            ),
                            false,
                        ),
                        AuditOutcome::Ok,
                    ),
                    Err(why) => unavailable(&format!(
                        "upstream {} could not be listed: {why}",
                        conn.record.name
                    )),
                };
                (&conn.record.name, output, outcome)
            }
        };
        let latency = started.elapsed();
        let g = grant.grant();
        upstreams.audit.record(AuditRecord {
            at,
            tenant: g.tenant.clone(),
            run: g.run.clone(),
            grant: g.id.clone(),
            tool: call.name.to_owned(),
            outcome,
            latency_micros: u64::try_from(latency.as_micros()).unwrap_or(u64::MAX),
            arguments_hash: ArgumentsHash::of(call.raw_arguments),
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
        Some(output)
    }

    /// Audits a call the protocol layer refused when it names one of this
    /// view's upstream tools (listed, or listed but outside the grant) and
    /// says why (the inner message); `None` leaves it to the board.
    pub fn refused(
        &self,
        upstreams: &Upstreams,
        grant: &ResolvedGrant,
        call: &RefusedCall<'_>,
    ) -> Option<Option<String>> {
        let (outcome, message) = match (call.kind, self.denied.get(call.name)) {
            (RefusalKind::NotListed, Some(needed)) => (
                AuditOutcome::Denied,
                Some(format!(
                    "tool {} is not allowed by this run's grant: it needs the capability {needed} (allowed: {})",
                    call.name,
                    grant.grant().capabilities.to_csv()
                )),
            ),
            (RefusalKind::InvalidArguments, _) if self.routes(call.name) => {
                (AuditOutcome::ToolError, None)
            }
            _ => return None,
        };
        let g = grant.grant();
        upstreams.audit.record(AuditRecord {
            at: Timestamp::now(),
            tenant: g.tenant.clone(),
            run: g.run.clone(),
            grant: g.id.clone(),
            // Listed names only (the upstream's, validated), never free text.
            tool: call.name.to_owned(),
            outcome,
            latency_micros: 0,
            arguments_hash: ArgumentsHash::of(call.raw_arguments),
            issue: None,
        });
        Some(message)
    }
}

/// A 2026-07-28 agent's call of an upstream tool, which may need input
/// (see [`crate::seam`], "2026-07-28"): relayed as the gateway's own
/// `input_required` with a sealed state wrapping the upstream's, and
/// resumed on any replica from the agent's retry.
struct ModernCall<'a> {
    client: &'a crate::UpstreamClient,
    conn: &'a Arc<Conn>,
    upstreams: &'a Upstreams,
    def: &'a ToolDef,
    tool: &'a str,
    call: &'a ToolCall<'a>,
    peer: &'a Peer,
    sealer: &'a RelaySealer,
    grant: &'a ResolvedGrant,
    deadline: std::time::Duration,
}

impl ModernCall<'_> {
    async fn run(&self) -> (ToolOutput, AuditOutcome) {
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
                    return refused(refusal.rpc_error());
                }
                if !opened.state.upstream_ids.is_empty() {
                    return self.resume_held(&binding, &opened.state, responses).await;
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
                self.tool,
                self.call.raw_arguments,
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
                let (peer, inbox) = corkboard_mcp::Peer::channel(
                    self.peer.revision(),
                    self.peer.capabilities(),
                    corkboard_mcp::Peer::DEFAULT_SEND_TIMEOUT,
                );
                let conn = self.conn.clone();
                let sealer = self.sealer.clone();
                let (tenant, run, grant) =
                    (g.tenant.to_string(), g.run.to_string(), g.id.to_string());
                let (tool, name) = (self.tool.to_owned(), self.call.name.to_owned());
                let arguments = self.call.raw_arguments.to_vec();
                let deadline = self.deadline;
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
                                .call_tool(&tool, &arguments, deadline, Some(&relay))
                                .await
                        }
                        Err(why) => Err(crate::UpstreamError::Unavailable(why.clone())),
                    }
                });
                return self
                    .next_held_round(&binding, HeldCall { task, inbox }, 1)
                    .await;
            }
            // An agent that declared nothing: the upstream's requests are
            // refused at once.
            None => {
                let answer = self
                    .client
                    .call_tool(self.tool, self.call.raw_arguments, self.deadline, None)
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
                        text: String::new(),
                        is_error: false,
                        relay: Some(RelayAnswer::InputRequired {
                            input_requests: requests,
                            request_state: sealed,
                        }),
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
}

/// A 2025 agent's call (with a response stream) of an upstream tool: a
/// 2025 upstream's requests to the client are relayed on the call's stream
/// ([`crate::seam`]); a 2026-07-28 upstream's `input_required` is turned
/// into real requests on that stream, their answers awaited here (held in
/// this process, keyed by relayed id: an answer that reaches another
/// replica is refused there, saying so), and the upstream retried with
/// them, at most [`seal::MAX_ROUNDS`] rounds within the call's deadline.
struct MixedCall<'a> {
    client: &'a crate::UpstreamClient,
    def: &'a ToolDef,
    tool: &'a str,
    arguments: &'a [u8],
    relay: Relay<'a>,
    upstreams: &'a Upstreams,
    deadline: std::time::Duration,
}

/// Forgets a call's held requests when it ends, however it ends.
struct HeldGuard<'a> {
    upstreams: &'a Upstreams,
    ids: Vec<String>,
}

impl Drop for HeldGuard<'_> {
    fn drop(&mut self) {
        let mut pending = crate::hub::lock(&self.upstreams.pending);
        for id in &self.ids {
            pending.remove(id);
        }
    }
}

impl MixedCall<'_> {
    async fn run(&self) -> (ToolOutput, AuditOutcome) {
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
            upstreams: self.upstreams,
            ids: Vec::new(),
        };
        let mut retry: Option<(Box<RawValue>, Option<String>)> = None;
        for round in 0..=seal::MAX_ROUNDS {
            let answering = retry.as_ref().map(|(r, s)| (&**r, s.clone()));
            let answer = match self
                .client
                .call_tool_modern(self.tool, self.arguments, left(), caps, answering)
                .await
            {
                Some(answer) => answer,
                // A 2025 upstream: the id-rewriting relay on the stream.
                None => {
                    let answer = self
                        .client
                        .call_tool(self.tool, self.arguments, left(), Some(&self.relay))
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
                let (tx, rx) = tokio::sync::oneshot::channel();
                crate::hub::lock(&self.upstreams.pending).insert(id.clone(), tx);
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

/// What a 2026-07-28 upstream's `input_required` carries, its
/// `inputRequests` as the upstream wrote them.
#[derive(Deserialize)]
struct Asks<'a> {
    #[serde(rename = "resultType", default)]
    result_type: Option<String>,
    #[serde(rename = "inputRequests", borrow, default)]
    input_requests: Option<&'a RawValue>,
    #[serde(rename = "requestState", default)]
    request_state: Option<String>,
}

/// One of the upstream's input requests, its params unparsed.
#[derive(Deserialize)]
struct RawRequest<'a> {
    method: String,
    #[serde(borrow, default)]
    params: Option<&'a RawValue>,
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

/// A request relayed to a 2025 agent on its call's stream.
#[derive(serde::Serialize)]
struct RelayedMessage<'a> {
    jsonrpc: &'static str,
    id: &'a str,
    method: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    params: Option<&'a RawValue>,
}

/// A 2026-07-28 upstream's answer when it is an `input_required`
/// (borrowed from its bytes).
fn asks(answer: &RawValue) -> Option<Asks<'_>> {
    serde_json::from_str::<Asks<'_>>(answer.get())
        .ok()
        .filter(|asks| asks.result_type.as_deref() == Some("input_required"))
}

/// A 2026-07-28 upstream's final result, parsed.
fn parsed(answer: &RawValue) -> Result<Value, crate::UpstreamError> {
    serde_json::from_str(answer.get())
        .map_err(|_| crate::UpstreamError::Unavailable("its result is not a JSON object".into()))
}

/// A 2025 upstream's call held for a 2026-07-28 agent: the task running
/// it, and where the requests it relays arrive.
pub(crate) struct HeldCall {
    task: tokio::task::JoinHandle<Result<Value, crate::UpstreamError>>,
    inbox: tokio::sync::mpsc::Receiver<Vec<u8>>,
}

impl Drop for HeldCall {
    fn drop(&mut self) {
        // Forgotten (expired, never retried, replaced): stop the call; the
        // upstream gets error replies for what it asked (see `client`).
        self.task.abort();
    }
}

impl ModernCall<'_> {
    /// Waits for the held call to end (its result) or to ask (the next
    /// `input_required`, the call held again under its first relayed id).
    async fn next_held_round(
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
                    Err(crate::UpstreamError::Unavailable("the held call failed".into()))
                });
                return to_output(self.def, answer);
            }
        };
        let Some(first) = first else {
            let answer = (&mut held.task).await.unwrap_or_else(|_| {
                Err(crate::UpstreamError::Unavailable(
                    "the held call failed".into(),
                ))
            });
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
            let Ok(relayed) = self
                .sealer
                .open_id(&message.id, &binding_run, seam::now_secs())
            else {
                continue;
            };
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
                let mut pending = crate::hub::lock(&self.upstreams.held);
                if pending.len() >= HELD_MAX {
                    // Calls whose time ran out (never retried) go first.
                    pending.retain(|_, held| !held.task.is_finished());
                }
                if pending.len() >= HELD_MAX {
                    return unavailable(&format!(
                        "this gateway replica already holds {HELD_MAX} calls waiting for their agents' input; retry later"
                    ));
                }
                pending.insert(key, held);
                tracing::info!(upstream = binding.upstream, tool = %self.call.name, run = binding.run, round, outcome = "input_required_held", "relay request");
                (
                    ToolOutput {
                        structured: None,
                        text: String::new(),
                        is_error: false,
                        relay: Some(RelayAnswer::InputRequired {
                            input_requests: raw,
                            request_state: sealed,
                        }),
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

    /// A retry answering a held call's requests: each answer delivered to
    /// the upstream under its own id, then the next round.
    async fn resume_held(
        &self,
        binding: &CallBinding<'_>,
        state: &RequestState,
        responses: &RawValue,
    ) -> (ToolOutput, AuditOutcome) {
        let Some(key) = state.expected.keys().next() else {
            return refused(RpcError::internal("Internal error"));
        };
        let held = crate::hub::lock(&self.upstreams.held).remove(key);
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
                self.grant.grant().tenant.as_str(),
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
        self.next_held_round(binding, held, state.round.saturating_add(1))
            .await
    }
}

/// Most calls held for 2026-07-28 agents in one process.
const HELD_MAX: usize = 1024;

fn refused(error: RpcError) -> (ToolOutput, AuditOutcome) {
    (
        ToolOutput {
            structured: None,
            text: String::new(),
            is_error: true,
            relay: Some(RelayAnswer::Refused(error)),
        },
        AuditOutcome::Denied,
    )
}

fn text_output(text: String, is_error: bool) -> ToolOutput {
    ToolOutput {
        structured: None,
        text,
        is_error,
        relay: None,
    }
}

fn unavailable(why: &str) -> (ToolOutput, AuditOutcome) {
    (
        text_output(format!("{why}; retry later"), true),
        AuditOutcome::Unavailable,
    )
}

/// The upstream's `tools/call` result as this gateway's tool output: text
/// blocks joined, other blocks named (not relayed), `structuredContent`
/// kept when the tool declares an `outputSchema`.
fn to_output(
    def: &ToolDef,
    answer: Result<Value, crate::UpstreamError>,
) -> (ToolOutput, AuditOutcome) {
    let result = match answer {
        Ok(result) => result,
        Err(err @ (crate::UpstreamError::Rpc { .. } | crate::UpstreamError::TooLarge(_))) => {
            return (text_output(err.to_string(), true), AuditOutcome::ToolError);
        }
        Err(err) => return unavailable(&err.to_string()),
    };
    if result.get("resultType").and_then(Value::as_str) == Some("input_required") {
        // Reached only when the agent cannot be asked in 2026-07-28 form.
        return (
            text_output(
                "the upstream needs input from the agent (input_required), which this gateway relays only to 2026-07-28 agents; call it from a 2026-07-28 client".to_owned(),
                true,
            ),
            AuditOutcome::ToolError,
        );
    }
    let is_error = result.get("isError").and_then(Value::as_bool) == Some(true);
    let mut parts = Vec::new();
    for block in result
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match (
            block.get("type").and_then(Value::as_str),
            block.get("text").and_then(Value::as_str),
        ) {
            (Some("text"), Some(text)) => parts.push(text.to_owned()),
            (kind, _) => parts.push(format!(
                "[{} content from the upstream, not relayed by this gateway]",
                kind.unwrap_or("unknown")
            )),
        }
    }
    let structured = match (&def.output_schema, is_error) {
        (Some(_), false) => match result.get("structuredContent") {
            Some(value) => Some(value.clone()),
            None => {
                return (
                    text_output(
                        format!(
                            "tool {} declares an outputSchema but the upstream returned no structured content",
                            def.name
                        ),
                        true,
                    ),
                    AuditOutcome::ToolError,
                );
            }
        },
        _ => None,
    };
    let outcome = if is_error {
        AuditOutcome::ToolError
    } else {
        AuditOutcome::Ok
    };
    (
        ToolOutput {
            structured,
            text: parts.join("\n"),
            is_error,
            relay: None,
        },
        outcome,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn def(output_schema: Option<Value>) -> ToolDef {
        ToolDef {
            name: "up__t".into(),
            title: None,
            description: String::new(),
            input_schema: json!({ "type": "object" }),
            output_schema,
            annotations: None,
        }
    }

    #[test]
    fn upstream_results_map_to_tool_outputs() {
        let (out, outcome) = to_output(
            &def(None),
            Ok(json!({ "content": [
                { "type": "text", "text": "one" },
                { "type": "image", "data": "AAAA", "mimeType": "image/png" },
                { "type": "text", "text": "two" },
            ] })),
        );
        assert_eq!(outcome, AuditOutcome::Ok);
        assert!(!out.is_error);
        assert_eq!(
            out.text,
            "one\n[image content from the upstream, not relayed by this gateway]\ntwo"
        );
        assert!(
            out.structured.is_none(),
            "no outputSchema, no structured content"
        );

        let schema = Some(json!({ "type": "object" }));
        let (out, _) = to_output(
            &def(schema.clone()),
            Ok(json!({ "content": [], "structuredContent": { "r": 1 } })),
        );
        assert_eq!(out.structured, Some(json!({ "r": 1 })));
        let (out, outcome) = to_output(&def(schema), Ok(json!({ "content": [] })));
        assert!(
            out.is_error && outcome == AuditOutcome::ToolError,
            "{}",
            out.text
        );

        let (out, outcome) = to_output(
            &def(None),
            Ok(json!({ "content": [{ "type": "text", "text": "nope" }], "isError": true })),
        );
        assert!(out.is_error);
        assert_eq!(outcome, AuditOutcome::ToolError);

        let (out, outcome) = to_output(
            &def(None),
            Err(crate::UpstreamError::Unavailable(
                "upstream up unavailable: no answer within 5 ms".into(),
            )),
        );
        assert_eq!(outcome, AuditOutcome::Unavailable);
        assert_eq!(
            out.text,
            "upstream up unavailable: no answer within 5 ms; retry later"
        );
    }
}
