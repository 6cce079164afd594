//! A Streamable HTTP client for one MCP endpoint, speaking for a client
//! that cannot see HTTP (a stdio agent): each message is POSTed with the
//! headers the transport requires (`Accept`, `Content-Type`,
//! `Authorization`, and `Mcp-Session-Id` + `MCP-Protocol-Version` in a
//! 2025 session, or `MCP-Protocol-Version`/`Mcp-Method`/`Mcp-Name`
//! mirroring a 2026-07-28 body), and the JSON or SSE answer comes back as
//! JSON-RPC messages, one line each.
//!
//! The legacy session is the client's: it keeps the `Mcp-Session-Id` a
//! successful `initialize` returned, replays that `initialize` when the
//! server has forgotten the session (404), and ends it with `DELETE`.
//! Every request gets a correlated answer: a transport failure or an
//! answer without a JSON-RPC response becomes a JSON-RPC error with the
//! request's id, and a server refusal that could not name the id (`null`)
//! gets it.

use std::time::{Duration, Instant};

use serde_json::Value;
use serde_json::value::to_raw_value;

use super::shape::{Shape, header_text, is_revision};
use super::sse;
use crate::backend::AuthRejection;
use crate::error::McpError;
use crate::refusal::{Refusal, Transport};
use crate::validate;
use crate::wire::{self, RpcError};

/// How long one HTTP exchange with the server may take. Tool calls are
/// bounded on the server (store timeout), so this only catches a server
/// that stopped answering.
const EXCHANGE_TIMEOUT: Duration = Duration::from_secs(60);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Ending a session is a courtesy on the way out; it must not hold up exit.
const END_SESSION_TIMEOUT: Duration = Duration::from_secs(2);

/// The credential the client presents.
#[derive(Clone)]
pub enum Credential {
    /// Sent as `Authorization: Bearer <token>`.
    Bearer(String),
    /// None was configured: the server is not asked, and every request is
    /// answered `Forbidden: <reason>` (`-32600`) with its id.
    Missing(String),
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            // Never print a token.
            Credential::Bearer(_) => f.write_str("Bearer(<redacted>)"),
            Credential::Missing(reason) => f.debug_tuple("Missing").field(reason).finish(),
        }
    }
}

/// Where and how a [`StreamableHttpClient`] connects.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The MCP endpoint, a full URL (`http://host:port/mcp`).
    pub url: String,
    pub credential: Credential,
    /// How the error a request gets when the server cannot be reached
    /// begins, in the embedder's words for its degraded state; the client
    /// adds ` at <url> (<why>); retry in a few seconds`.
    pub unreachable: String,
}

/// A legacy (2025) session the client holds on its caller's behalf.
#[derive(Debug, Clone)]
struct LegacySession {
    id: Option<String>,
    /// The negotiated revision, sent as `MCP-Protocol-Version`.
    version: Option<String>,
    /// The caller's `initialize`, replayed if the server forgets the
    /// session (expired or ended): the caller cannot see HTTP sessions.
    initialize: Vec<u8>,
}

/// One HTTP answer, read whole.
struct Answer {
    status: u16,
    session_id: Option<String>,
    event_stream: bool,
    body: Vec<u8>,
}

impl Answer {
    /// The JSON-RPC messages in the answer: the JSON body, or the `data`
    /// of each server-sent event.
    fn messages(&self) -> Vec<Vec<u8>> {
        if self.event_stream {
            return sse::data_payloads(&self.body);
        }
        if self.body.iter().all(u8::is_ascii_whitespace) {
            return Vec::new();
        }
        vec![self.body.clone()]
    }
}

/// A client of one Streamable HTTP MCP endpoint; see the module docs.
#[derive(Debug)]
pub struct StreamableHttpClient {
    http: reqwest::Client,
    options: ClientOptions,
    session: Option<LegacySession>,
}

impl StreamableHttpClient {
    pub fn new(options: ClientOptions) -> Result<Self, McpError> {
        let http = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .timeout(EXCHANGE_TIMEOUT)
            .build()
            .map_err(McpError::HttpClient)?;
        Ok(Self {
            http,
            options,
            session: None,
        })
    }

    /// The endpoint this client talks to.
    pub fn url(&self) -> &str {
        &self.options.url
    }

    /// Sends one JSON-RPC message (sent as written) and returns the
    /// messages to hand back: none for a notification or response, else
    /// the server's answer or a correlated error. Each returned message is
    /// one line of JSON (no raw line break), ready for stdio framing.
    pub async fn relay(&mut self, text: &[u8]) -> Vec<Vec<u8>> {
        let started = Instant::now();
        let shape = Shape::of(text);
        let (status, replies) = self.exchange(text, &shape).await;
        tracing::info!(
            transport = "stdio-bridge",
            method = shape
                .method
                .as_deref()
                .map_or("none", crate::method::method_label),
            tool = shape
                .tool_name
                .as_deref()
                .filter(|n| validate::tool_name(n))
                .unwrap_or(""),
            revision = shape
                .modern_version
                .as_deref()
                .or_else(|| self.session.as_ref().and_then(|s| s.version.as_deref()))
                .filter(|v| is_revision(v))
                .unwrap_or(""),
            status,
            latency_us = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX),
            "mcp relay"
        );
        replies
    }

    /// Relays one message; returns the HTTP status (0 when the server was
    /// not asked or not reached) and the messages to hand back.
    async fn exchange(&mut self, text: &[u8], shape: &Shape) -> (u16, Vec<Vec<u8>>) {
        if let Credential::Missing(reason) = &self.options.credential {
            // The server is not bothered: it would refuse the same way.
            let replies = if shape.unanswered {
                Vec::new()
            } else {
                let rejection = AuthRejection::Refused(reason.clone());
                vec![error_reply(
                    shape.id.as_ref(),
                    &Refusal::credential(&rejection, Transport::Stdio).error,
                )]
            };
            return (0, replies);
        }
        let mut answer = match self.post(text, shape).await {
            Ok(answer) => answer,
            Err(err) => return (0, self.unreachable(shape, &err)),
        };
        if shape.is_initialize() {
            self.remember_session(text, &answer);
        } else if answer.status == 404
            && shape.modern_version.is_none()
            && self.session.is_some()
            && self.renew_session().await
        {
            // The server forgot the session (expired after its TTL, or
            // ended): the caller cannot see HTTP sessions, so the client
            // opened a new one and sends the message again.
            answer = match self.post(text, shape).await {
                Ok(answer) => answer,
                Err(err) => return (0, self.unreachable(shape, &err)),
            };
        }
        (answer.status, self.replies(shape, answer))
    }

    fn with_credential(&self, request: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.options.credential {
            Credential::Bearer(token) => request.bearer_auth(token),
            Credential::Missing(_) => request,
        }
    }

    async fn post(&self, body: &[u8], shape: &Shape) -> Result<Answer, reqwest::Error> {
        let mut request = self.with_credential(
            self.http
                .post(&self.options.url)
                .header("Content-Type", "application/json")
                .header("Accept", "application/json, text/event-stream")
                .body(body.to_vec()),
        );
        if let Some(version) = &shape.modern_version {
            // 2026-07-28: the headers mirror the body; no session.
            request = request.header("MCP-Protocol-Version", header_text(version));
            if let Some(method) = &shape.method {
                request = request.header("Mcp-Method", header_text(method));
            }
            if let Some(name) = &shape.tool_name {
                request = request.header("Mcp-Name", header_text(name));
            }
        } else if !shape.is_initialize()
            && let Some(session) = &self.session
        {
            if let Some(id) = &session.id {
                request = request.header("Mcp-Session-Id", id.as_str());
            }
            if let Some(version) = &session.version {
                request = request.header("MCP-Protocol-Version", version.as_str());
            }
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let session_id = response
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let event_stream = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().starts_with("text/event-stream"));
        let body = response.bytes().await?.to_vec();
        Ok(Answer {
            status,
            session_id,
            event_stream,
            body,
        })
    }

    /// Keeps what a successful `initialize` established.
    fn remember_session(&mut self, initialize: &[u8], answer: &Answer) {
        if !(200..300).contains(&answer.status) {
            return;
        }
        let version = answer
            .messages()
            .iter()
            .filter_map(|m| serde_json::from_slice::<Value>(m).ok())
            .find_map(|m| {
                m.get("result")
                    .and_then(|r| r.get("protocolVersion"))
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            });
        if version.is_none() {
            return;
        }
        self.session = Some(LegacySession {
            id: answer.session_id.clone(),
            version,
            initialize: initialize.to_vec(),
        });
    }

    /// Opens a new session with the caller's original `initialize`.
    async fn renew_session(&mut self) -> bool {
        let Some(old) = self.session.take() else {
            return false;
        };
        let init = Shape::of(&old.initialize);
        let renewed = match self.post(&old.initialize, &init).await {
            Ok(answer) => {
                self.remember_session(&old.initialize, &answer);
                self.session.is_some()
            }
            Err(err) => {
                tracing::warn!(error = %err, "could not renew the MCP session");
                false
            }
        };
        if !renewed {
            self.session = Some(old);
            return false;
        }
        let initialized = br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
        if let Err(err) = self.post(initialized, &Shape::of(initialized)).await {
            tracing::warn!(error = %err, "could not confirm the renewed MCP session");
        }
        tracing::info!("the server no longer knew the MCP session; opened a new one");
        true
    }

    /// Ends the legacy session on the server (the caller is gone).
    pub async fn end_session(&mut self) {
        let Some(LegacySession { id: Some(id), .. }) = self.session.take() else {
            return;
        };
        let request = self.with_credential(
            self.http
                .delete(&self.options.url)
                .timeout(END_SESSION_TIMEOUT)
                .header("Mcp-Session-Id", id),
        );
        if let Err(err) = request.send().await {
            tracing::debug!(error = %err, "could not end the MCP session");
        }
    }

    /// The error a request gets when the server cannot be reached.
    fn unreachable(&self, shape: &Shape, err: &reqwest::Error) -> Vec<Vec<u8>> {
        let why = if err.is_timeout() {
            format!("no answer within {}s", EXCHANGE_TIMEOUT.as_secs())
        } else {
            err.to_string()
        };
        let url = &self.options.url;
        tracing::warn!(url = %url, error = %why, "MCP server unreachable");
        match &shape.id {
            Some(id) if !shape.unanswered => vec![error_reply(
                Some(id),
                &RpcError::internal(format!(
                    "{} at {url} ({why}); retry in a few seconds",
                    self.options.unreachable
                )),
            )],
            _ => Vec::new(),
        }
    }

    /// Turns an HTTP answer into the messages the caller gets.
    fn replies(&self, shape: &Shape, answer: Answer) -> Vec<Vec<u8>> {
        let status = answer.status;
        let bodies = answer.messages();
        if shape.unanswered {
            // A notification or response gets nothing back, unless the
            // validator found the message itself malformed (400), which
            // the local transport answers too. Other refusals (revoked
            // token, forgotten session) are only logged.
            if status == 400 {
                return bodies.into_iter().map(one_line).collect();
            }
            if !(200..300).contains(&status) {
                tracing::warn!(status, "the server refused a notification");
            }
            return Vec::new();
        }
        if bodies.is_empty() {
            return match &shape.id {
                Some(id) => vec![error_reply(
                    Some(id),
                    &RpcError::internal(format!(
                        "Internal error: the MCP server answered HTTP {status} without a JSON-RPC response"
                    )),
                )],
                None => Vec::new(),
            };
        }
        bodies
            .into_iter()
            .map(|body| match serde_json::from_slice::<Value>(&body) {
                Ok(message) => with_request_id(message, shape.id.as_ref())
                    .map_or(body, |fixed| fixed.to_string().into_bytes()),
                Err(_) => error_reply(
                    shape.id.as_ref(),
                    &RpcError::internal(format!(
                        "Internal error: the MCP server answered HTTP {status} with a body that is not JSON-RPC"
                    )),
                ),
            })
            .map(one_line)
            .collect()
    }
}

/// An error response for a request the client answers itself; `id` as the
/// caller sent it (`None`: `null`).
fn error_reply(id: Option<&Value>, error: &RpcError) -> Vec<u8> {
    // A JSON value always serializes; compact, so it stays one line.
    let id = id.and_then(|id| to_raw_value(id).ok());
    wire::error_response(id.as_deref(), error)
}

/// A refusal the server could not tie to a request (id null) gets the
/// request's id, so that the caller can match it. `None`: leave as is.
fn with_request_id(mut message: Value, request_id: Option<&Value>) -> Option<Value> {
    // Only a valid id (string or number) may be echoed.
    let id = request_id.filter(|id| id.is_string() || id.is_number())?;
    let object = message.as_object_mut()?;
    if object.contains_key("error") && object.get("id").is_none_or(Value::is_null) {
        object.insert("id".to_owned(), id.clone());
        return Some(message);
    }
    None
}

/// Makes a JSON text one line. Raw line breaks can only be whitespace
/// between tokens in valid JSON (inside strings they are escaped), so
/// replacing them with spaces keeps the value and frames it for stdio.
fn one_line(mut body: Vec<u8>) -> Vec<u8> {
    for byte in &mut body {
        if *byte == b'\n' || *byte == b'\r' {
            *byte = b' ';
        }
    }
    body
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn refusals_get_the_request_id_and_bodies_become_one_line() {
        let refusal = json!({"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}});
        let fixed = with_request_id(refusal, Some(&json!(5)));
        assert_eq!(fixed.map(|m| m["id"].clone()), Some(json!(5)));
        let result = json!({"jsonrpc":"2.0","id":5,"result":{}});
        assert!(with_request_id(result, Some(&json!(5))).is_none());
        let pretty = b"{\n  \"a\": \"x\\ny\"\r\n}".to_vec();
        let line = one_line(pretty);
        assert!(!line.contains(&b'\n'));
        assert_eq!(
            serde_json::from_slice::<Value>(&line).ok(),
            Some(json!({"a": "x\ny"}))
        );
    }

    #[test]
    fn errors_the_client_makes_carry_the_id_it_was_given() {
        let error = RpcError::internal("down");
        let reply = |id: Option<&Value>| {
            serde_json::from_slice::<Value>(&error_reply(id, &error)).unwrap_or_default()
        };
        assert_eq!(
            reply(Some(&json!({"odd": [1, 2]}))),
            json!({"jsonrpc":"2.0","id":{"odd":[1,2]},"error":{"code":-32603,"message":"down"}})
        );
        assert_eq!(reply(None)["id"], Value::Null);
        assert_eq!(reply(Some(&json!("a")))["id"], json!("a"));
    }

    #[test]
    fn a_token_never_shows_in_debug_output() {
        let text = format!("{:?}", Credential::Bearer("cb_secret".into()));
        assert!(!text.contains("cb_secret"), "{text}");
    }
}
