//! The JSON-RPC 2.0 layer: parsing a body once (one message or a batch)
//! and checking each message's envelope (`jsonrpc`, `id`, `method`,
//! `result`/`error`) to tell requests, notifications and responses apart.

use serde_json::value::RawValue;

use super::as_str;
use crate::wire::{Envelope, RpcError};

/// A whole incoming body: one message or (2025-03-26 only) a batch.
#[derive(Debug)]
pub(crate) enum Incoming<'a> {
    Single(Envelope<'a>),
    Batch(Vec<&'a RawValue>),
}

/// Parses a body once. Syntax errors are `-32700`; valid JSON that is not
/// a message object (or array of them) is `-32600`.
pub(crate) fn parse(bytes: &[u8]) -> Result<Incoming<'_>, RpcError> {
    match bytes.iter().find(|b| !b.is_ascii_whitespace()) {
        None => Err(RpcError::parse("Parse error: the body is empty")),
        Some(b'[') => serde_json::from_slice::<Vec<&RawValue>>(bytes)
            .map(Incoming::Batch)
            .map_err(body_error),
        Some(b'{') => serde_json::from_slice::<Envelope<'_>>(bytes)
            .map(Incoming::Single)
            .map_err(body_error),
        Some(_) => match serde_json::from_slice::<&RawValue>(bytes) {
            Ok(_) => Err(RpcError::invalid_request(
                "Invalid Request: a JSON-RPC message must be a JSON object",
            )),
            Err(e) => Err(body_error(e)),
        },
    }
}

/// Parses one element of a batch.
pub(crate) fn parse_element(raw: &RawValue) -> Result<Envelope<'_>, RpcError> {
    if !raw.get().starts_with('{') {
        return Err(RpcError::invalid_request(
            "Invalid Request: each batch element must be a JSON-RPC message object",
        ));
    }
    serde_json::from_str::<Envelope<'_>>(raw.get()).map_err(body_error)
}

fn body_error(e: serde_json::Error) -> RpcError {
    match e.classify() {
        serde_json::error::Category::Data => {
            RpcError::invalid_request(format!("Invalid Request: {e}"))
        }
        _ => RpcError::parse(format!("Parse error: {e}")),
    }
}

/// One message after envelope validation.
#[derive(Debug)]
pub(crate) enum Message<'a> {
    Request {
        id: &'a RawValue,
        method: String,
        params: Option<&'a RawValue>,
    },
    Notification {
        method: String,
        params: Option<&'a RawValue>,
    },
    Response {
        id: &'a RawValue,
        result: Option<&'a RawValue>,
        error: Option<&'a RawValue>,
    },
}

/// An envelope refusal, with the id when it was readable.
#[derive(Debug)]
pub(crate) struct Refusal<'a> {
    pub id: Option<&'a RawValue>,
    pub error: RpcError,
}

/// True when `raw` is a JSON string or an integer literal: the only ids
/// MCP allows (no null, no fractions, no exponents).
fn is_valid_id(raw: &RawValue) -> bool {
    let text = raw.get();
    if text.starts_with('"') {
        return true;
    }
    let digits = text.strip_prefix('-').unwrap_or(text);
    !digits.is_empty()
        && digits.bytes().all(|b| b.is_ascii_digit())
        && (digits == "0" || !digits.starts_with('0'))
}

/// Checks the JSON-RPC 2.0 envelope and tells requests, notifications and
/// responses apart.
pub(crate) fn envelope<'a>(env: &Envelope<'a>) -> Result<Message<'a>, Refusal<'a>> {
    let id = env.id.filter(|raw| is_valid_id(raw));
    let refuse = |message: &str| Refusal {
        id,
        error: RpcError::invalid_request(format!("Invalid Request: {message}")),
    };
    match env.jsonrpc.map(|raw| raw.get()) {
        Some("\"2.0\"") => {}
        Some(_) => return Err(refuse("`jsonrpc` must be the string \"2.0\"")),
        None => return Err(refuse("`jsonrpc` is required and must be \"2.0\"")),
    }
    if let Some(raw_id) = env.id
        && !is_valid_id(raw_id)
    {
        return Err(refuse("`id` must be a string or an integer (not null)"));
    }
    match env.method {
        Some(raw_method) => {
            let Some(method) = as_str(raw_method) else {
                return Err(refuse("`method` must be a string"));
            };
            if env.result.is_some() || env.error.is_some() {
                return Err(refuse(
                    "a message cannot carry `method` together with `result` or `error`",
                ));
            }
            Ok(match id {
                Some(id) => Message::Request {
                    id,
                    method,
                    params: env.params,
                },
                None => Message::Notification {
                    method,
                    params: env.params,
                },
            })
        }
        None => match (env.id, env.result.is_some(), env.error.is_some()) {
            (Some(id), true, false) | (Some(id), false, true) => Ok(Message::Response {
                id,
                result: env.result,
                error: env.error,
            }),
            (None, _, _) => Err(refuse("`method` is required")),
            _ => Err(refuse(
                "a response must carry exactly one of `result` and `error`",
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        let raw =
            |s: &str| serde_json::from_str::<Box<RawValue>>(s).unwrap_or_else(|_| panic!("{s}"));
        for good in ["1", "0", "-7", "\"x\"", "12345678901234567890123"] {
            assert!(is_valid_id(&raw(good)), "{good}");
        }
        for bad in ["null", "1.5", "1e3", "-0.0", "true", "{}", "[]"] {
            assert!(!is_valid_id(&raw(bad)), "{bad}");
        }
    }
}
