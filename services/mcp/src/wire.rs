//! JSON-RPC 2.0 and MCP wire shapes at the edge.
//!
//! Incoming messages are deserialized once into borrowed [`RawValue`]
//! slices of the request body; only the parts a handler needs are decoded
//! further (and `arguments` exactly once). Outgoing messages are written
//! compactly, so a serialized message never contains a raw newline (stdio
//! framing and SSE `data:` lines rely on that).

use bytes::Bytes;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::code::{self, ErrorCode};

/// `_meta` keys of the 2026-07-28 per-request envelope.
pub mod meta_key {
    pub const PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
    pub const CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
    pub const CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
    pub const SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
}

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn parse(message: impl Into<String>) -> Self {
        Self::new(code::PARSE_ERROR, message)
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_REQUEST, message)
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }

    pub fn method_not_found(message: impl Into<String>) -> Self {
        Self::new(code::METHOD_NOT_FOUND, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(code::INTERNAL_ERROR, message)
    }

    pub fn header_mismatch(message: impl Into<String>) -> Self {
        Self::new(code::HEADER_MISMATCH, message)
    }
}

/// Deserializes a present field as its raw text, keeping an explicit
/// `null` (plain `Option` would fold it into "absent").
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&'de RawValue>::deserialize(d).map(Some)
}

/// The top-level members of one JSON-RPC message, undecoded.
#[derive(Debug, Deserialize)]
pub(crate) struct Envelope<'a> {
    #[serde(default, deserialize_with = "present", borrow)]
    pub jsonrpc: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present", borrow)]
    pub id: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present", borrow)]
    pub method: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present", borrow)]
    pub params: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present", borrow)]
    pub result: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present", borrow)]
    pub error: Option<&'a RawValue>,
}

/// The `params` members any served method reads, undecoded.
#[derive(Debug, Default, Deserialize)]
pub(crate) struct ParamsHead<'a> {
    #[serde(rename = "_meta", default, deserialize_with = "present", borrow)]
    pub meta: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present", borrow)]
    pub name: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present", borrow)]
    pub arguments: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present", borrow)]
    pub cursor: Option<&'a RawValue>,
    #[serde(
        rename = "protocolVersion",
        default,
        deserialize_with = "present",
        borrow
    )]
    pub protocol_version: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present", borrow)]
    pub capabilities: Option<&'a RawValue>,
    #[serde(rename = "clientInfo", default, deserialize_with = "present", borrow)]
    pub client_info: Option<&'a RawValue>,
    #[serde(default, deserialize_with = "present", borrow)]
    pub level: Option<&'a RawValue>,
    /// 2026-07-28 retries of `tools/call` answering `input_required`.
    #[serde(
        rename = "inputResponses",
        default,
        deserialize_with = "present",
        borrow
    )]
    pub input_responses: Option<&'a RawValue>,
    #[serde(rename = "requestState", default, deserialize_with = "present", borrow)]
    pub request_state: Option<&'a RawValue>,
}

/// A 2025 request's `_meta.progressToken`, undecoded (a string or a
/// number: echoed exactly in each `notifications/progress`).
#[derive(Deserialize)]
pub(crate) struct ProgressMeta<'a> {
    #[serde(rename = "progressToken", default, borrow)]
    pub progress_token: Option<&'a RawValue>,
}

/// The 2026-07-28 `_meta` envelope members, undecoded.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
pub(crate) struct MetaHead<'a> {
    #[serde(
        rename = "io.modelcontextprotocol/protocolVersion",
        default,
        deserialize_with = "present",
        borrow
    )]
    pub protocol_version: Option<&'a RawValue>,
    #[serde(
        rename = "io.modelcontextprotocol/clientCapabilities",
        default,
        deserialize_with = "present",
        borrow
    )]
    pub client_capabilities: Option<&'a RawValue>,
    #[serde(
        rename = "io.modelcontextprotocol/clientInfo",
        default,
        deserialize_with = "present",
        borrow
    )]
    pub client_info: Option<&'a RawValue>,
}

/// What a successful handler produced: the serialized `result` member,
/// perhaps written after room for its JSON-RPC envelope
/// ([`ResultJson::buffer`]). A tool's answer can be a page of tens of
/// kilobytes; written with room in front, the response is that buffer
/// with the envelope filled in, not a second buffer it is copied into.
#[derive(Debug, Clone)]
pub(crate) struct ResultJson {
    buf: Vec<u8>,
    /// Where the result starts in `buf`; what comes before is room.
    start: usize,
}

/// The start of every response, up to its id: `{"jsonrpc":"2.0","id":`.
/// A result's envelope then has the id and [`RESULT_KEY`].
const ENVELOPE_HEAD: &[u8] = b"{\"jsonrpc\":\"2.0\",\"id\":";
const RESULT_KEY: &[u8] = b",\"result\":";

impl ResultJson {
    /// The longest id (as sent, quotes included) the room holds: the
    /// SDKs' numbers and a quoted UUID (38 bytes) fit.
    const ID_ROOM: usize = 48;
    /// Room for the envelope's head.
    const ROOM: usize = ENVELOPE_HEAD.len() + RESULT_KEY.len() + Self::ID_ROOM;

    /// A buffer to write a result of about `capacity` bytes into, after
    /// the room it already holds; [`Self::written`] takes it back.
    pub(crate) fn buffer(capacity: usize) -> Vec<u8> {
        // One more for the envelope's closing brace.
        let mut buf = Vec::with_capacity(Self::ROOM + capacity + 1);
        buf.resize(Self::ROOM, b' ');
        buf
    }

    /// A result written into a [`Self::buffer`].
    pub(crate) fn written(buf: Vec<u8>) -> Self {
        debug_assert!(buf.len() >= Self::ROOM, "not a ResultJson::buffer");
        Self {
            buf,
            start: Self::ROOM,
        }
    }

    /// The result's JSON.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.buf[self.start..]
    }

    /// `{"jsonrpc":"2.0","id":<id>,"result":<result>}`, written into the
    /// room in front of the result when `id` fits there (the result is
    /// not copied), else into a new buffer.
    pub(crate) fn into_response(mut self, id: &RawValue) -> Bytes {
        let id_bytes = id.get().as_bytes();
        let head = ENVELOPE_HEAD.len() + id_bytes.len() + RESULT_KEY.len();
        if head > self.start {
            let mut out = Vec::with_capacity(head + self.as_bytes().len() + 1);
            write_result(&mut out, id, &self);
            return Bytes::from(out);
        }
        let at = self.start - head;
        let room = &mut self.buf[at..self.start];
        let (envelope, rest) = room.split_at_mut(ENVELOPE_HEAD.len());
        envelope.copy_from_slice(ENVELOPE_HEAD);
        let (own_id, key) = rest.split_at_mut(id_bytes.len());
        own_id.copy_from_slice(id_bytes);
        key.copy_from_slice(RESULT_KEY);
        self.buf.push(b'}');
        // Both steps keep the allocation: no byte of the result moves.
        Bytes::from(self.buf).slice(at..)
    }
}

impl From<Vec<u8>> for ResultJson {
    /// A result written without room (its envelope is then a copy).
    fn from(buf: Vec<u8>) -> Self {
        Self { buf, start: 0 }
    }
}

/// Writes `{"jsonrpc":"2.0","id":<id>,"result":<result>}`.
pub(crate) fn write_result(out: &mut Vec<u8>, id: &RawValue, result: &ResultJson) {
    out.extend_from_slice(ENVELOPE_HEAD);
    out.extend_from_slice(id.get().as_bytes());
    out.extend_from_slice(RESULT_KEY);
    out.extend_from_slice(result.as_bytes());
    out.push(b'}');
}

/// Writes `{"jsonrpc":"2.0","id":<id or null>,"error":{...}}`: the one
/// writer of JSON-RPC error responses (every crate's goes through it or
/// [`error_response`]).
pub(crate) fn write_error(out: &mut Vec<u8>, id: Option<&RawValue>, error: &RpcError) {
    out.extend_from_slice(ENVELOPE_HEAD);
    match id {
        Some(id) => out.extend_from_slice(id.get().as_bytes()),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"error\":");
    if serde_json::to_writer(&mut *out, error).is_err() {
        // Serializing a code, a string and a JSON value cannot fail; this
        // keeps the message well-formed even if that ever changed.
        out.extend_from_slice(b"{\"code\":-32603,\"message\":\"internal error\"}");
    }
    out.push(b'}');
}

/// A complete JSON-RPC error response with `id` (`null` when absent), as
/// bytes: what every crate answers a JSON-RPC error with (see
/// [`write_error`]).
pub fn error_response(id: Option<&RawValue>, error: &RpcError) -> Vec<u8> {
    let mut out = Vec::with_capacity(96 + error.message.len());
    write_error(&mut out, id, error);
    out
}

/// A JSON object key (or any string) as a JSON string literal.
pub(crate) fn json_string(text: &str) -> String {
    Value::String(text.to_owned()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::ResponseError;

    /// A result written with room gets its envelope in place (the
    /// result's bytes are not copied); an id too long for the room, or a
    /// result written without room, is copied; all three are the bytes
    /// `write_result` writes.
    #[test]
    fn a_response_is_the_envelope_around_its_result_in_place_when_the_id_fits() {
        let result = br#"{"content":[{"type":"text","text":"ok"}],"isError":false}"#;
        let long_id = format!("\"{}\"", "x".repeat(200));
        for id in [
            "7",
            "\"0b9f3c1e-5d2a-4c7e-9a41-6f2d8e0b7c55\"",
            long_id.as_str(),
        ] {
            let id = RawValue::from_string(id.to_owned()).unwrap();
            let mut buf = ResultJson::buffer(result.len());
            buf.extend_from_slice(result);
            let written = ResultJson::written(buf);
            let result_at = written.as_bytes().as_ptr();
            let mut expected = Vec::new();
            write_result(&mut expected, &id, &written);
            let response = written.into_response(&id);
            assert_eq!(response.as_ref(), expected.as_slice());
            let head = response.len() - result.len() - 1;
            let in_place = std::ptr::eq(response[head..].as_ptr(), result_at);
            assert_eq!(
                in_place,
                id.get().len() <= ResultJson::ID_ROOM,
                "{}",
                id.get()
            );
            let unroomed = ResultJson::from(result.to_vec()).into_response(&id);
            assert_eq!(unroomed.as_ref(), expected.as_slice());
        }
    }

    /// The connection gate's 503 is written in `corkboard-telemetry`,
    /// below this crate (which owns the writer and the codes): it must be
    /// what the one writer writes for the same error.
    #[actix_rt::test]
    async fn the_connection_gate_answers_what_the_writer_writes() {
        use corkboard_telemetry::conn::TooManyConnections;
        for over in [
            TooManyConnections::new(3),
            TooManyConnections::per_source(8),
            TooManyConnections::forwarded(8),
        ] {
            let response = over.error_response();
            let body = actix_web::body::to_bytes(response.into_body())
                .await
                .unwrap();
            let gate: Value = serde_json::from_slice(&body).unwrap();
            let error = RpcError::internal(over.to_string())
                .with_data(serde_json::json!({ "retryable": true }));
            let written: Value = serde_json::from_slice(&error_response(None, &error)).unwrap();
            assert_eq!(gate, written);
        }
    }
}
