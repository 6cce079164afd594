//! The relay: what happens to a request an upstream sends "to the client"
//! (`sampling/createMessage`, `elicitation/create`, `roots/list`, `ping`,
//! ...) on the response stream of a `tools/call` the gateway forwards, and
//! to the agent's answer on its way back. Every message passes the one
//! relay validator ([`corkboard_mcp::relay`]) for both sides' eras before
//! anything reaches the other side.
//!
//! A 2025 agent with a response stream ([`Relay`]) and a 2025 upstream:
//!
//! 1. The upstream's request is checked against the agent's declared
//!    capabilities and both revisions ([`relay::check_request`]). Refused:
//!    the upstream gets `-32602` under its own id at once, nothing is
//!    relayed.
//! 2. Accepted: its id is replaced by a signed relayed id
//!    ([`RelaySealer::mint_id`]: the upstream, its request id, the
//!    [`relay::Expectation`], the upstream's revision and the gateway's
//!    session with it, bound to the run and grant) and it goes to the agent
//!    on the response stream of the agent's POST, params byte for byte.
//!    An agent stream that is gone or not read within the send timeout
//!    completes the upstream's request with a correlated `-32603`.
//! 3. The agent answers with a POST carrying the relayed id, on any
//!    replica: [`answer`] opens the id (forged, expired, another run's:
//!    `-32602` to the agent), checks the answer against the expectation
//!    (refused: `-32602` to the agent, and the upstream's request completed
//!    with [`relay::RelayRefusal::peer_error`]), and the caller records the
//!    id as used ([`use_once`]: a second answer under it, on any replica,
//!    is refused `-32602` "already used") and delivers it to the upstream
//!    under the upstream's own id, in the gateway's session with it.
//!
//! Without a [`Relay`] (a 2026-07-28 agent, a board-only caller, an agent
//! that declared nothing), a request the upstream sends anyway is answered
//! at once with a JSON-RPC error carrying its id, so the upstream never
//! waits for an answer that will not come. `ping` is answered (it asks
//! nothing of the agent).
//!
//! Diagnostics name the method, upstream, run and outcome (the rule of a
//! refusal), never params, answers or ids' contents.

use corkboard_board::UpstreamName;
use corkboard_grants::{FirstUse, UsedOnce};
use corkboard_mcp::relay::seal::{
    RELAYED_ID_PREFIX, RelaySealer, RelayedRequest, RunBinding, SealRejection,
};
use corkboard_mcp::relay::{self, Eras, RelayMethod};
use corkboard_mcp::{ClientResponse, Peer, Revision, RpcError, code};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long delivering an answer to the upstream may take.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// Most server-to-client requests relayed within one tool call; the next
/// is refused to the upstream (the SDKs cap their rounds at about 10).
pub const MAX_RELAYED_PER_CALL: usize = relay::seal::MAX_ROUNDS as usize;

/// The used-once namespace of sealed `requestState`s.
pub const USED_REQUEST_STATE: &str = "relay-state";
/// The used-once namespace of relayed ids answered.
pub const USED_RELAYED_ID: &str = "relay-id";

/// Records the sealed value `what` (`requestState`, `response id`) of
/// `tenant` and `run` as used (its `nonce`, until its expiry), before the
/// relay acts on it. Err: the answer to the agent, nothing relayed: a
/// replay (`-32602`, [`SealRejection::Replayed`]), or a record that could
/// not answer (`-32603`, retryable: the value was not recorded).
pub async fn use_once(
    used: &dyn UsedOnce,
    kind: &'static str,
    nonce: &[u8],
    expires_at: u64,
    what: &str,
    (tenant, run): (&str, &str),
) -> Result<(), RpcError> {
    match used.first_use(kind, nonce, expires_at).await {
        Ok(FirstUse::First) => Ok(()),
        Ok(FirstUse::Replayed) => {
            tracing::info!(
                tenant,
                run,
                kind,
                outcome = "replayed",
                "relay value refused"
            );
            Err(SealRejection::Replayed.rpc_error(what))
        }
        Err(unavailable) => {
            tracing::warn!(tenant, run, kind, error = %unavailable, outcome = "unrecorded", "relay value refused");
            Err(RpcError::internal(format!(
                "Internal error: the gateway could not record this {what} as used ({unavailable}); nothing was relayed, retry shortly"
            )))
        }
    }
}

/// What relaying to the agent of one call needs.
#[derive(Debug, Clone, Copy)]
pub struct Relay<'a> {
    pub peer: &'a Peer,
    pub sealer: &'a RelaySealer,
    pub tenant: &'a str,
    pub run: &'a str,
    pub grant: &'a str,
    /// The agent-facing name of the tool whose call this is (diagnostics).
    pub tool: &'a str,
}

impl Relay<'_> {
    fn binding(&self) -> RunBinding<'_> {
        RunBinding {
            run: self.run,
            grant: self.grant,
        }
    }
}

/// A server-to-client request as the upstream sent it, undecoded.
#[derive(Deserialize)]
struct Incoming<'a> {
    #[serde(borrow)]
    id: &'a RawValue,
    method: std::borrow::Cow<'a, str>,
    #[serde(default, borrow)]
    params: Option<&'a RawValue>,
}

/// What to do with one request from the upstream.
#[derive(Debug)]
pub enum Decision {
    /// Send these bytes to the agent (relayed id in place of the
    /// upstream's); `relayed_id` is what the agent answers under.
    Relay {
        message: Vec<u8>,
        relayed_id: String,
    },
    /// Answer the upstream with this JSON-RPC response (correlated with
    /// its id).
    Reply(Vec<u8>),
}

pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A JSON-RPC error reply to the upstream's request `id` (written by
/// [`corkboard_mcp::error_response`], the one writer).
pub fn error_reply(id: &RawValue, error: &RpcError) -> Vec<u8> {
    corkboard_mcp::error_response(Some(id), error)
}

/// Decides about one request the upstream `upstream` (speaking
/// `upstream_revision`, in `session`) sent on a call's response stream;
/// `relayed` is how many this call relayed so far.
pub fn decide(
    upstream: &UpstreamName,
    upstream_revision: Revision,
    session: Option<&str>,
    relay: Option<&Relay<'_>>,
    relayed: usize,
    payload: &[u8],
) -> Decision {
    let Ok(request) = serde_json::from_slice::<Incoming<'_>>(payload) else {
        tracing::warn!(%upstream, "an upstream's request to the client could not be read; dropped");
        return Decision::Reply(corkboard_mcp::error_response(
            None,
            &RpcError::invalid_request("Invalid Request: not a JSON-RPC request"),
        ));
    };
    let method = request.method.as_ref();
    if method == "ping" {
        let id: Value = serde_json::from_str(request.id.get()).unwrap_or(Value::Null);
        return Decision::Reply(
            json!({ "jsonrpc": "2.0", "id": id, "result": {} })
                .to_string()
                .into_bytes(),
        );
    }
    let relayable = RelayMethod::parse(method);
    let label = relayable.map_or(
        corkboard_mcp::method::method_label(method),
        RelayMethod::as_str,
    );
    let Some(relay) = relay
        .filter(|r| r.peer.has_stream())
        .filter(|_| relayable.is_some())
    else {
        return Decision::Reply(not_relayed(
            upstream,
            request.id,
            method,
            relayable.is_some(),
        ));
    };
    let (tenant, run, tool) = (relay.tenant, relay.run, relay.tool);
    if relayed >= MAX_RELAYED_PER_CALL {
        tracing::info!(%upstream, method = label, tenant, run, tool, outcome = "too_many", "relay refused");
        return Decision::Reply(error_reply(
            request.id,
            &RpcError::invalid_params(format!(
                "Invalid params: this tool call already relayed {MAX_RELAYED_PER_CALL} requests to the agent, the limit per call"
            )),
        ));
    }
    let eras = Eras::new(relay.peer.revision(), upstream_revision);
    let expected = match relay::check_request(
        eras,
        &relay.peer.capabilities(),
        method,
        request.params,
    ) {
        Ok(expected) => expected,
        Err(refusal) => {
            tracing::info!(%upstream, method = label, tenant, run, tool, outcome = "refused", rule = refusal.rule.name(), "relay refused");
            return Decision::Reply(error_reply(request.id, &refusal.rpc_error()));
        }
    };
    let Ok(upstream_id) = RawValue::from_string(request.id.get().to_owned()) else {
        return Decision::Reply(error_reply(
            request.id,
            &RpcError::internal("Internal error"),
        ));
    };
    let sealed = RelayedRequest {
        upstream: upstream.to_string(),
        upstream_id,
        expected,
        upstream_revision: Some(upstream_revision.as_str().to_owned()),
        upstream_session: session.map(str::to_owned),
    };
    let relayed_id = match relay.sealer.mint_id(&relay.binding(), &sealed, now_secs()) {
        Ok(id) => id,
        Err(rejection) => {
            tracing::info!(%upstream, method = label, tenant, run, tool, outcome = rejection.name(), "relay refused");
            return Decision::Reply(error_reply(
                request.id,
                &RpcError::invalid_params(format!(
                    "Invalid params: the request could not be relayed to the agent ({})",
                    rejection.name()
                )),
            ));
        }
    };
    // The upstream's params, byte for byte, under the gateway's id.
    let mut message = Vec::with_capacity(payload.len() + relayed_id.len() + 64);
    message.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
    message.extend_from_slice(Value::String(relayed_id.clone()).to_string().as_bytes());
    message.extend_from_slice(b",\"method\":");
    message.extend_from_slice(Value::String(method.to_owned()).to_string().as_bytes());
    if let Some(params) = request.params {
        message.extend_from_slice(b",\"params\":");
        message.extend_from_slice(params.get().as_bytes());
    }
    message.push(b'}');
    tracing::info!(%upstream, method = label, tenant, run, tool, outcome = "relayed", "relay request");
    Decision::Relay {
        message,
        relayed_id,
    }
}

/// The reply to a request this call cannot relay (no agent stream, no
/// declared capability, not a relayable method).
fn not_relayed(upstream: &UpstreamName, id: &RawValue, method: &str, relayable: bool) -> Vec<u8> {
    let label = corkboard_mcp::method::method_label(method);
    // The upstream's own method name, echoed to it only (never logged).
    let shown: String = method.chars().take(64).collect();
    tracing::info!(%upstream, method = label, outcome = "not_relayed", "refused an upstream's request to the client");
    let error = if relayable {
        RpcError::new(
            code::METHOD_NOT_FOUND,
            format!(
                "Method not found: the corkboard gateway cannot relay {shown} from upstream {upstream} to this agent (it declared no such capability, or its request has no response stream to carry it)"
            ),
        )
    } else {
        RpcError::new(
            code::METHOD_NOT_FOUND,
            format!(
                "Method not found: the corkboard gateway does not relay {shown} from upstream {upstream} to the agent"
            ),
        )
    };
    error_reply(id, &error)
}

/// The reply to the upstream that the agent's stream could not carry its
/// request (gone, or not read in time).
pub fn unreachable_reply(request: &[u8], why: &corkboard_mcp::PeerError) -> Vec<u8> {
    let request = serde_json::from_slice::<Incoming<'_>>(request).ok();
    corkboard_mcp::error_response(
        request.as_ref().map(|r| r.id),
        &RpcError::internal(format!(
            "Internal error: the gateway could not relay this request to the agent: {why}"
        )),
    )
}

/// The id of the request in `payload`, as the upstream wrote it.
pub fn request_id(payload: &[u8]) -> Option<Box<RawValue>> {
    let request = serde_json::from_slice::<Incoming<'_>>(payload).ok()?;
    RawValue::from_string(request.id.get().to_owned()).ok()
}

/// An agent's answer, checked and ready for its upstream.
#[derive(Debug)]
pub struct Delivery {
    pub upstream: String,
    /// The gateway's session with the upstream, and its revision.
    pub session: Option<String>,
    pub revision: String,
    /// The JSON-RPC response for the upstream, under its own id.
    pub body: Vec<u8>,
    /// `Some` when the agent's answer was refused: the `-32602` for the
    /// agent (the body then completes the upstream's request with the
    /// correlated error instead).
    pub refused: Option<RpcError>,
    /// The request came from a 2026-07-28 upstream's `input_required` and
    /// is held in the process of the call that relayed it (see
    /// [`crate::hub::Upstreams::deliver`]): the relayed id, and the checked
    /// answer (the agent's result, or the error the call ends with).
    pub held: Option<(String, Result<Box<RawValue>, RpcError>)>,
    /// The relayed id's nonce and expiry (Unix seconds): what
    /// [`use_once`] records.
    pub nonce: [u8; 16],
    pub expires_at: u64,
}

/// Opens and checks the agent's `response`. `Ok(None)`: not an answer to
/// a relayed request (no relayed id): accepted and dropped, as before. An
/// `Err` is answered to the agent and nothing goes to the upstream (the id
/// could not be trusted).
pub fn answer(
    sealer: &RelaySealer,
    tenant: &str,
    run: &str,
    grant: &str,
    peer: &Peer,
    response: ClientResponse<'_>,
) -> Result<Option<Delivery>, RpcError> {
    let Ok(id) = serde_json::from_str::<String>(response.id.get()) else {
        return Ok(None);
    };
    if !id.starts_with(RELAYED_ID_PREFIX) {
        return Ok(None);
    }
    let opened = sealer
        .open_id(&id, &RunBinding { run, grant }, now_secs())
        .map_err(|rejection| {
            tracing::info!(
                tenant,
                run,
                outcome = rejection.name(),
                "relay answer refused"
            );
            rejection.rpc_error("response id")
        })?;
    let (nonce, expires_at) = (opened.nonce, opened.expires_at);
    let relayed = opened.request;
    let revision = relayed
        .upstream_revision
        .clone()
        .unwrap_or_else(|| Revision::LATEST_LEGACY.as_str().to_owned());
    let upstream_revision = Revision::parse(&revision).unwrap_or(Revision::LATEST_LEGACY);
    let eras = Eras::new(peer.revision(), upstream_revision);
    let method = relayed.expected.method();
    let checked = match (response.result, response.error) {
        (Some(result), _) => relay::check_answer(eras, &relayed.expected, result),
        (None, Some(error)) => relay::check_answer_error(error),
        (None, None) => {
            return Err(RpcError::invalid_params(
                "Invalid params: a response needs `result` or `error`",
            ));
        }
    };
    let (body, refused) = match checked {
        Ok(()) => {
            // The agent's answer, byte for byte, under the upstream's id.
            let mut body = Vec::with_capacity(256);
            body.extend_from_slice(b"{\"jsonrpc\":\"2.0\",\"id\":");
            body.extend_from_slice(relayed.upstream_id.get().as_bytes());
            match (response.result, response.error) {
                (Some(result), _) => {
                    body.extend_from_slice(b",\"result\":");
                    body.extend_from_slice(result.get().as_bytes());
                }
                (None, Some(error)) => {
                    body.extend_from_slice(b",\"error\":");
                    body.extend_from_slice(error.get().as_bytes());
                }
                (None, None) => {}
            }
            body.push(b'}');
            tracing::info!(upstream = %relayed.upstream, method = method.as_str(), tenant, run, outcome = "relayed", "relay answer");
            (body, None)
        }
        Err(refusal) => {
            tracing::info!(upstream = %relayed.upstream, method = method.as_str(), tenant, run, outcome = "refused", rule = refusal.rule.name(), "relay answer refused");
            let peer_error = refusal
                .peer_error()
                .unwrap_or_else(|| RpcError::internal("Internal error"));
            let body = corkboard_mcp::error_response(Some(&relayed.upstream_id), &peer_error);
            (body, Some(refusal.rpc_error()))
        }
    };
    let held = upstream_revision.is_modern().then(|| {
        let answer = match (&refused, response.result, response.error) {
            (None, Some(result), _) => RawValue::from_string(result.get().to_owned())
                .map_err(|_| RpcError::internal("Internal error")),
            (Some(_), _, _) => Err(RpcError::internal(format!(
                "the agent's answer to this {} was refused by the gateway",
                method.as_str()
            ))),
            (None, _, _) => Err(RpcError::internal(format!(
                "the agent answered this {} with an error",
                method.as_str()
            ))),
        };
        (id.clone(), answer)
    });
    Ok(Some(Delivery {
        upstream: relayed.upstream,
        session: relayed.upstream_session,
        revision,
        body,
        refused,
        held,
        nonce,
        expires_at,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_mcp::SessionKey;
    use corkboard_mcp::relay::AgentCapabilities;

    fn caps(json: Value) -> AgentCapabilities {
        AgentCapabilities::from_declared(Revision::V2025_11_25, &json)
    }

    #[test]
    fn without_a_relay_requests_are_refused_with_their_own_id_and_pings_answered() {
        let name = UpstreamName::parse("everything").unwrap();
        let request =
            br#"{"jsonrpc":"2.0","id":"u-7","method":"sampling/createMessage","params":{}}"#;
        let Decision::Reply(refused) = decide(&name, Revision::V2025_11_25, None, None, 0, request)
        else {
            panic!("not relayed without a relay");
        };
        let refused: Value = serde_json::from_slice(&refused).unwrap();
        assert_eq!(refused["id"], "u-7");
        assert_eq!(refused["error"]["code"], -32601);
        let Decision::Reply(pong) = decide(
            &name,
            Revision::V2025_11_25,
            None,
            None,
            0,
            br#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#,
        ) else {
            panic!("pong");
        };
        let pong: Value = serde_json::from_slice(&pong).unwrap();
        assert_eq!(pong, json!({ "jsonrpc": "2.0", "id": 3, "result": {} }));
    }

    #[actix_rt::test]
    async fn relayed_ids_round_trip_and_answers_are_checked() {
        let name = UpstreamName::parse("everything").unwrap();
        let sealer = RelaySealer::new(SessionKey::generate(), Duration::from_secs(60));
        let peer = corkboard_mcp::Peer::without_stream(
            Revision::V2025_11_25,
            caps(json!({"sampling": {}})),
        );
        // A peer without a stream relays nothing.
        let relay = Relay {
            peer: &peer,
            sealer: &sealer,
            tenant: "acme",
            run: "r1",
            grant: "g1",
            tool: "everything__t",
        };
        let request = br#"{"jsonrpc":"2.0","id":17,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":5}}"#;
        assert!(matches!(
            decide(
                &name,
                Revision::V2025_11_25,
                Some("s-1"),
                Some(&relay),
                0,
                request
            ),
            Decision::Reply(_)
        ));

        // The answer path: a minted id opens for its run only, and the
        // answer is checked against what the request expected.
        let sealed = RelayedRequest {
            upstream: "everything".into(),
            upstream_id: RawValue::from_string("17".into()).unwrap(),
            expected: relay::Expectation::CreateMessage { tools: false },
            upstream_revision: Some("2025-11-25".into()),
            upstream_session: Some("s-1".into()),
        };
        let id = sealer
            .mint_id(
                &RunBinding {
                    run: "r1",
                    grant: "g1",
                },
                &sealed,
                now_secs(),
            )
            .unwrap();
        let id_raw = RawValue::from_string(Value::String(id).to_string()).unwrap();
        let good = RawValue::from_string(
            r#"{"role":"assistant","content":{"type":"text","text":"ok"},"model":"m"}"#.into(),
        )
        .unwrap();
        let delivery = answer(
            &sealer,
            "acme",
            "r1",
            "g1",
            &peer,
            ClientResponse {
                id: &id_raw,
                result: Some(&good),
                error: None,
            },
        )
        .unwrap()
        .unwrap();
        assert!(delivery.refused.is_none());
        assert_eq!(delivery.session.as_deref(), Some("s-1"));
        assert_eq!(
            String::from_utf8(delivery.body).unwrap(),
            format!(r#"{{"jsonrpc":"2.0","id":17,"result":{}}}"#, good.get()),
            "the answer relays byte-identical under the upstream's id"
        );
        let no_model = RawValue::from_string(
            r#"{"role":"assistant","content":{"type":"text","text":"ok"}}"#.into(),
        )
        .unwrap();
        let refused = answer(
            &sealer,
            "acme",
            "r1",
            "g1",
            &peer,
            ClientResponse {
                id: &id_raw,
                result: Some(&no_model),
                error: None,
            },
        )
        .unwrap()
        .unwrap();
        assert_eq!(refused.refused.unwrap().code.get(), -32602);
        let body: Value = serde_json::from_slice(&refused.body).unwrap();
        assert_eq!(body["id"], 17);
        assert_eq!(
            body["error"]["code"], -32603,
            "the upstream's request is completed"
        );
        let foreign = answer(
            &sealer,
            "acme",
            "r2",
            "g1",
            &peer,
            ClientResponse {
                id: &id_raw,
                result: Some(&good),
                error: None,
            },
        )
        .unwrap_err();
        assert_eq!(foreign.code.get(), -32602);
        let plain = RawValue::from_string("5".into()).unwrap();
        assert!(
            answer(
                &sealer,
                "acme",
                "r1",
                "g1",
                &peer,
                ClientResponse {
                    id: &plain,
                    result: Some(&good),
                    error: None
                }
            )
            .unwrap()
            .is_none(),
            "not a relayed id: dropped as before"
        );
    }
}
