//! The relay choke point: the one validator for server-to-client requests
//! (`sampling/createMessage`, `elicitation/create`, `roots/list`) that a
//! gateway carries from an upstream MCP server to the agent, and for the
//! agent's answers on the way back, plus the sealing that lets any replica
//! resume a relay ([`seal`]).
//!
//! What this module guarantees:
//!
//! - **Both eras, both sides.** Every check knows the agent's negotiated
//!   revision and the upstream's ([`Eras`]). A message must be legal in the
//!   revision of the side that sent it *and* in the revision of the side
//!   that receives it; when it is not, it is refused, never reshaped (a
//!   2025-11-25 content array is not cut down to one block for a
//!   2025-06-18 agent).
//! - **Refused before relayed.** Each entry point returns `Ok` or a
//!   [`RelayRefusal`] naming the rule ([`RelayRule`]), the party that sent
//!   the bad message ([`Party`]: that is who gets the error) and the path
//!   of the offending member. [`RelayRefusal::rpc_error`] is the JSON-RPC
//!   error, always `-32602` (`code::INVALID_PARAMS`);
//!   [`RelayRefusal::peer_error`] completes the other side's pending
//!   request when it had one (a refused answer still answers the
//!   upstream), so nothing is left hanging.
//! - **Nothing is filled in, nothing is changed.** The validator reads the
//!   message and never builds a new one: no invented `role`, `model`,
//!   `maxTokens` or defaults. A caller forwards the exact bytes it checked,
//!   so an accepted message relays byte-identical.
//! - **No values in messages.** Refusals name paths and rules, never the
//!   content (sampling messages and elicitation answers are user data, and
//!   refusals are logged).
//! - **Capabilities first.** A request the agent's declared capabilities
//!   cannot serve (no `sampling`, no `sampling.tools` for a request with
//!   tools, no `elicitation` or not its mode, no `roots`) is refused to the
//!   upstream at once ([`RelayRule::Undeclared`]), so it never waits on an
//!   agent that cannot answer.
//!
//! The answer to a request is checked against the [`Expectation`] its
//! check returned (whether the request carried `tools`, the requested
//! schema, ...). An `Expectation` is small and serialisable so it can
//! travel inside a signed relayed id (2025 agents) or a sealed
//! `requestState` (2026-07-28 agents), and any replica can check the
//! answer.
//!
//! One file per method: [`sampling`], [`elicitation`], [`roots`]; the
//! agent's declared capabilities are read once in [`caps`].

mod caps;
mod elicitation;
mod roots;
mod sampling;
pub mod seal;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

pub use caps::AgentCapabilities;

use crate::revision::Revision;
use crate::wire::RpcError;

/// The negotiated revision of each side of a relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Eras {
    /// The agent's: its `initialize` revision (2025 sessions) or its
    /// request's `_meta` protocol version (2026-07-28).
    pub agent: Revision,
    /// The upstream's, as the gateway negotiated it.
    pub upstream: Revision,
}

impl Eras {
    pub fn new(agent: Revision, upstream: Revision) -> Self {
        Self { agent, upstream }
    }

    fn of(self, party: Party) -> Revision {
        match party {
            Party::Agent => self.agent,
            Party::Upstream => self.upstream,
        }
    }

    /// The side whose revision lacks `feature`, sender first.
    fn lacking(self, sender: Party, feature: fn(Revision) -> bool) -> Option<Party> {
        [sender, sender.other()]
            .into_iter()
            .find(|party| !feature(self.of(*party)))
    }
}

/// One side of a relay.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Party {
    /// The upstream server: sends requests, receives answers.
    Upstream,
    /// The agent: receives requests, sends answers.
    Agent,
}

impl Party {
    pub fn other(self) -> Self {
        match self {
            Self::Upstream => Self::Agent,
            Self::Agent => Self::Upstream,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Upstream => "upstream",
            Self::Agent => "agent",
        }
    }
}

/// The server-to-client requests a gateway relays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum RelayMethod {
    #[serde(rename = "sampling/createMessage")]
    CreateMessage,
    #[serde(rename = "elicitation/create")]
    Elicit,
    #[serde(rename = "roots/list")]
    ListRoots,
}

impl RelayMethod {
    pub const ALL: [RelayMethod; 3] = [Self::CreateMessage, Self::Elicit, Self::ListRoots];

    pub fn parse(method: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.as_str() == method)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::CreateMessage => "sampling/createMessage",
            Self::Elicit => "elicitation/create",
            Self::ListRoots => "roots/list",
        }
    }
}

/// Which rule a refused message broke: stable names for logs, metrics and
/// `docs/conformance.md` (section "Relay validation").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RelayRule {
    /// Not a server-to-client request this gateway relays.
    Method,
    /// The method or a feature it uses does not exist in the revision of
    /// one side (elicitation before 2025-06-18, tools and content arrays
    /// before 2025-11-25, ...).
    Revision,
    /// The agent did not declare the capability the request needs.
    Undeclared,
    /// A member is missing or has the wrong JSON type.
    Malformed,
    /// `messages` is empty.
    EmptyMessages,
    /// A message `role` is not `user` or `assistant`, or a block is in a
    /// message of the wrong role (`tool_use`: assistant, `tool_result`:
    /// user).
    Role,
    /// A content block is not one the revisions allow.
    Content,
    /// A user message carrying `tool_result` blocks holds other blocks too.
    MixedToolResults,
    /// A `tool_result` names no `tool_use` of the preceding assistant
    /// message (or answers one twice).
    UnpairedToolResult,
    /// An assistant message's `tool_use` is not answered by a `tool_result`
    /// in the next message.
    UnansweredToolUse,
    /// `maxTokens` is missing or not a number.
    MaxTokens,
    /// A sampling result without a `role`.
    ResultRole,
    /// A sampling result without a string `model`.
    ResultModel,
    /// A sampling result with `stopReason: "toolUse"` or `tool_use`
    /// content, answering a request that carried no `tools`.
    ToolUseUnrequested,
    /// The requested schema is not the restricted flat form.
    ElicitSchema,
    /// An elicitation answer's `action`/`content` do not fit the request.
    ElicitAnswer,
    /// A `roots/list` result is malformed (a root `uri` not `file://`).
    Roots,
    /// `inputResponses` keys do not match the `inputRequests` they answer.
    InputKeys,
}

impl RelayRule {
    pub fn name(self) -> &'static str {
        match self {
            Self::Method => "method",
            Self::Revision => "revision",
            Self::Undeclared => "undeclared_capability",
            Self::Malformed => "malformed",
            Self::EmptyMessages => "empty_messages",
            Self::Role => "role",
            Self::Content => "content",
            Self::MixedToolResults => "mixed_tool_results",
            Self::UnpairedToolResult => "unpaired_tool_result",
            Self::UnansweredToolUse => "unanswered_tool_use",
            Self::MaxTokens => "max_tokens",
            Self::ResultRole => "result_role",
            Self::ResultModel => "result_model",
            Self::ToolUseUnrequested => "tool_use_unrequested",
            Self::ElicitSchema => "elicit_schema",
            Self::ElicitAnswer => "elicit_answer",
            Self::Roots => "roots",
            Self::InputKeys => "input_keys",
        }
    }
}

/// A relayed message refused: answered to `sender` with `-32602`, and
/// nothing reaches the other side.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelayRefusal {
    /// Who sent the refused message, so who gets the error.
    pub sender: Party,
    pub rule: RelayRule,
    /// The relayed method, when it is known.
    pub method: Option<RelayMethod>,
    message: String,
}

impl RelayRefusal {
    fn new(sender: Party, rule: RelayRule, message: impl Into<String>) -> Self {
        Self {
            sender,
            rule,
            method: None,
            message: message.into(),
        }
    }

    /// What is wrong, naming paths, never values.
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The JSON-RPC error for the sender: `-32602` with this message.
    pub fn rpc_error(&self) -> RpcError {
        RpcError::invalid_params(self.to_string())
    }

    /// The error that completes the other side's pending request, so
    /// nothing is left hanging: when the agent's answer is refused, the
    /// upstream's request gets `-32603` naming the rule (no values). A
    /// refused upstream request never reached the agent: `None`.
    pub fn peer_error(&self) -> Option<RpcError> {
        match self.sender {
            Party::Upstream => None,
            Party::Agent => Some(RpcError::internal(format!(
                "Internal error: the agent's answer to this {} was refused by the gateway ({}) and not relayed",
                self.method.map_or("request", RelayMethod::as_str),
                self.rule.name()
            ))),
        }
    }
}

impl fmt::Display for RelayRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.method {
            Some(method) => method.as_str(),
            None => "message",
        };
        write!(
            f,
            "Invalid params: relayed {what} from the {}: {}",
            self.sender.as_str(),
            self.message
        )
    }
}

/// What the answer to a checked request must satisfy. Small and
/// serialisable: it travels in a signed relayed id or a sealed
/// `requestState` ([`seal`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "m")]
pub enum Expectation {
    #[serde(rename = "sampling/createMessage")]
    CreateMessage {
        /// The request carried `tools`: only then may the result use them.
        #[serde(rename = "t", default, skip_serializing_if = "std::ops::Not::not")]
        tools: bool,
    },
    #[serde(rename = "elicitation/create")]
    Elicit {
        /// The requested schema (form mode); `None` for URL mode, whose
        /// `accept` carries no content.
        #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
        schema: Option<Value>,
    },
    #[serde(rename = "roots/list")]
    ListRoots,
}

impl Expectation {
    pub fn method(&self) -> RelayMethod {
        match self {
            Self::CreateMessage { .. } => RelayMethod::CreateMessage,
            Self::Elicit { .. } => RelayMethod::Elicit,
            Self::ListRoots => RelayMethod::ListRoots,
        }
    }
}

/// Where a check is: who sent the message, in which eras, for which
/// method. Builds refusals.
#[derive(Debug, Clone, Copy)]
struct Ctx {
    eras: Eras,
    sender: Party,
    method: RelayMethod,
}

impl Ctx {
    fn refuse(self, rule: RelayRule, message: impl Into<String>) -> RelayRefusal {
        RelayRefusal {
            method: Some(self.method),
            ..RelayRefusal::new(self.sender, rule, message)
        }
    }

    fn malformed(self, path: &str, problem: &str) -> RelayRefusal {
        self.refuse(RelayRule::Malformed, format!("`{path}` {problem}"))
    }

    /// Refuses `what` unless both revisions have `feature`.
    fn needs(self, feature: fn(Revision) -> bool, what: &str) -> Result<(), RelayRefusal> {
        match self.eras.lacking(self.sender, feature) {
            None => Ok(()),
            Some(party) => Err(self.refuse(
                RelayRule::Revision,
                format!(
                    "{what}, which revision {} (the {}'s) does not allow; refused, not reshaped",
                    self.eras.of(party),
                    party.as_str()
                ),
            )),
        }
    }

    /// A member that must be a string, if present.
    fn opt_str<'v>(
        self,
        obj: &'v Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Option<&'v str>, RelayRefusal> {
        match obj.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(_) => Err(self.malformed(&join(path, key), "must be a string")),
        }
    }

    /// A member that must be an object, if present.
    fn opt_object(
        self,
        obj: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<(), RelayRefusal> {
        match obj.get(key) {
            None | Some(Value::Object(_)) => Ok(()),
            Some(_) => Err(self.malformed(&join(path, key), "must be an object")),
        }
    }
}

/// `params.messages` + `[0]` style paths.
fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

/// A key or name the sender chose, as it may appear in a refusal:
/// bounded, since refusals are logged.
fn label(name: &str) -> String {
    let mut short: String = name.chars().take(64).collect();
    if short.len() < name.len() {
        short.push_str("...");
    }
    short
}

fn decode(ctx: Ctx, raw: &RawValue, path: &str) -> Result<Value, RelayRefusal> {
    serde_json::from_str(raw.get()).map_err(|_| ctx.malformed(path, "is not valid JSON"))
}

fn as_object<'v>(
    ctx: Ctx,
    value: &'v Value,
    path: &str,
) -> Result<&'v Map<String, Value>, RelayRefusal> {
    value
        .as_object()
        .ok_or_else(|| ctx.malformed(path, "must be an object"))
}

/// Checks a server-to-client request from the upstream (`method` and its
/// `params`) before it goes to the agent, in both eras and against the
/// agent's declared capabilities. On success the caller forwards the
/// exact bytes it passed in, and keeps the returned [`Expectation`] to
/// check the answer with [`check_answer`].
pub fn check_request(
    eras: Eras,
    agent: &AgentCapabilities,
    method: &str,
    params: Option<&RawValue>,
) -> Result<Expectation, RelayRefusal> {
    let Some(relayed) = RelayMethod::parse(method) else {
        return Err(RelayRefusal::new(
            Party::Upstream,
            RelayRule::Method,
            "the method is not a server-to-client request this gateway relays (sampling/createMessage, elicitation/create, roots/list)",
        ));
    };
    let ctx = Ctx {
        eras,
        sender: Party::Upstream,
        method: relayed,
    };
    let params = match params {
        Some(raw) => Some(decode(ctx, raw, "params")?),
        None => None,
    };
    check_request_value(ctx, agent, params.as_ref())
}

fn check_request_value(
    ctx: Ctx,
    agent: &AgentCapabilities,
    params: Option<&Value>,
) -> Result<Expectation, RelayRefusal> {
    match ctx.method {
        RelayMethod::CreateMessage => sampling::request(ctx, agent, params),
        RelayMethod::Elicit => elicitation::request(ctx, agent, params),
        RelayMethod::ListRoots => roots::request(ctx, agent, params),
    }
}

/// Checks the agent's answer (a JSON-RPC `result`, or one value of
/// 2026-07-28 `inputResponses`) to a request checked into `expected`,
/// before it goes to the upstream.
pub fn check_answer(
    eras: Eras,
    expected: &Expectation,
    result: &RawValue,
) -> Result<(), RelayRefusal> {
    let ctx = Ctx {
        eras,
        sender: Party::Agent,
        method: expected.method(),
    };
    let value = decode(ctx, result, "result")?;
    check_answer_value(ctx, expected, &value, "result")
}

fn check_answer_value(
    ctx: Ctx,
    expected: &Expectation,
    value: &Value,
    path: &str,
) -> Result<(), RelayRefusal> {
    match expected {
        Expectation::CreateMessage { tools } => sampling::result(ctx, *tools, value, path),
        Expectation::Elicit { schema } => elicitation::result(ctx, schema.as_ref(), value, path),
        Expectation::ListRoots => roots::result(ctx, value, path),
    }
}

/// Checks a JSON-RPC `error` the agent answers a relayed request with:
/// an integer `code` and a string `message`, as JSON-RPC requires.
pub fn check_answer_error(error: &RawValue) -> Result<(), RelayRefusal> {
    let refuse = |problem: &str| {
        RelayRefusal::new(
            Party::Agent,
            RelayRule::Malformed,
            format!("`error` {problem}"),
        )
    };
    let Ok(Value::Object(error)) = serde_json::from_str::<Value>(error.get()) else {
        return Err(refuse("must be an object"));
    };
    if !error.get("code").is_some_and(|c| c.is_i64()) {
        return Err(refuse("needs an integer `code`"));
    }
    if !error.get("message").is_some_and(Value::is_string) {
        return Err(refuse("needs a string `message`"));
    }
    Ok(())
}

/// Checks the `inputRequests` of a 2026-07-28 upstream's `input_required`
/// result: each value a `{method, params}` relayed request, checked as
/// [`check_request`] does. Returns each key's [`Expectation`], for the
/// sealed `requestState`.
pub fn check_input_requests(
    eras: Eras,
    agent: &AgentCapabilities,
    input_requests: &RawValue,
) -> Result<BTreeMap<String, Expectation>, RelayRefusal> {
    let refuse =
        |problem: String| RelayRefusal::new(Party::Upstream, RelayRule::Malformed, problem);
    let Ok(Value::Object(requests)) = serde_json::from_str::<Value>(input_requests.get()) else {
        return Err(refuse("`inputRequests` must be an object".into()));
    };
    if requests.is_empty() {
        return Err(refuse("`inputRequests` is empty (omit it instead)".into()));
    }
    let mut expected = BTreeMap::new();
    for (key, request) in &requests {
        let path = format!("inputRequests[{:?}]", label(key));
        let Some(request) = request.as_object() else {
            return Err(refuse(format!("`{path}` must be an object")));
        };
        let Some(method) = request.get("method").and_then(Value::as_str) else {
            return Err(refuse(format!("`{path}.method` must be a string")));
        };
        let Some(relayed) = RelayMethod::parse(method) else {
            return Err(RelayRefusal::new(
                Party::Upstream,
                RelayRule::Method,
                format!(
                    "`{path}.method` is not sampling/createMessage, elicitation/create or roots/list"
                ),
            ));
        };
        let ctx = Ctx {
            eras,
            sender: Party::Upstream,
            method: relayed,
        };
        let expectation =
            check_request_value(ctx, agent, request.get("params")).map_err(|mut refusal| {
                refusal.message = format!("{path}: {}", refusal.message);
                refusal
            })?;
        expected.insert(key.clone(), expectation);
    }
    Ok(expected)
}

/// Checks a 2026-07-28 agent's `inputResponses` against the requests they
/// answer: the same keys, each value an answer [`check_answer`] accepts.
pub fn check_input_responses(
    eras: Eras,
    expected: &BTreeMap<String, Expectation>,
    input_responses: &RawValue,
) -> Result<(), RelayRefusal> {
    let keys = |problem: String| RelayRefusal::new(Party::Agent, RelayRule::InputKeys, problem);
    let Ok(Value::Object(responses)) = serde_json::from_str::<Value>(input_responses.get()) else {
        return Err(RelayRefusal::new(
            Party::Agent,
            RelayRule::Malformed,
            "`inputResponses` must be an object",
        ));
    };
    if let Some(key) = expected.keys().find(|k| !responses.contains_key(*k)) {
        return Err(keys(format!(
            "`inputResponses` lacks the answer to input request {:?}",
            label(key)
        )));
    }
    if let Some(key) = responses.keys().find(|k| !expected.contains_key(*k)) {
        return Err(keys(format!(
            "`inputResponses` answers {:?}, which no input request asked",
            label(key)
        )));
    }
    for (key, expectation) in expected {
        let ctx = Ctx {
            eras,
            sender: Party::Agent,
            method: expectation.method(),
        };
        let path = format!("inputResponses[{:?}]", label(key));
        check_answer_value(ctx, expectation, &responses[key], &path)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
