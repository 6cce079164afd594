//! Method and params validation: which methods a revision serves, the
//! members each one requires, and the one decoding of tool `arguments`.

use serde_json::value::RawValue;
use serde_json::{Map, Value};

use super::as_str;
use crate::revision::Revision;
use crate::wire::{ParamsHead, RpcError};

/// Reads the members of `params` the served methods use.
pub(crate) fn params_head(params: Option<&RawValue>) -> Result<ParamsHead<'_>, RpcError> {
    let Some(raw) = params else {
        return Ok(ParamsHead::default());
    };
    if !raw.get().starts_with('{') {
        return Err(RpcError::invalid_params(
            "Invalid params: `params` must be an object",
        ));
    }
    serde_json::from_str::<ParamsHead<'_>>(raw.get())
        .map_err(|e| RpcError::invalid_params(format!("Invalid params: {e}")))
}

/// A request after method and params validation.
#[derive(Debug)]
pub(crate) enum Call<'a> {
    Initialize {
        requested: String,
        /// The `capabilities` object the client declared.
        capabilities: &'a RawValue,
    },
    Ping,
    SetLevel,
    List,
    Tool {
        name: String,
        arguments: Option<&'a RawValue>,
        /// The request's `_meta` (2025 revisions: the progress token).
        meta: Option<&'a RawValue>,
        /// 2026-07-28: the capabilities the request declares in its
        /// `_meta`, as the envelope's check read them (set by the engine).
        declared: Option<&'a RawValue>,
        input_responses: Option<&'a RawValue>,
        request_state: Option<&'a RawValue>,
    },
    Discover,
}

const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Validates a request's method and params for `revision`.
pub(crate) fn request<'a>(
    revision: Revision,
    method: &str,
    head: &ParamsHead<'a>,
) -> Result<Call<'a>, RpcError> {
    if !revision.is_modern()
        && let Some(meta) = head.meta
        && !meta.get().starts_with('{')
    {
        return Err(RpcError::invalid_params(
            "Invalid params: `params._meta` must be an object",
        ));
    }
    match method {
        "initialize" if !revision.is_modern() => initialize(head),
        "ping" if revision.has_ping_and_set_level() => Ok(Call::Ping),
        "logging/setLevel" if revision.has_ping_and_set_level() => {
            match head.level.and_then(as_str) {
                Some(level) if LOG_LEVELS.contains(&level.as_str()) => Ok(Call::SetLevel),
                _ => Err(RpcError::invalid_params(format!(
                    "Invalid params: `params.level` is required and must be one of: {}",
                    LOG_LEVELS.join(", ")
                ))),
            }
        }
        "server/discover" if revision.is_modern() => Ok(Call::Discover),
        "tools/list" => match head.cursor {
            None => Ok(Call::List),
            Some(_) => Err(RpcError::invalid_params(
                "Invalid params: `params.cursor` is not a cursor this server issued (tools/list is not paginated)",
            )),
        },
        "tools/call" => {
            let Some(name) = head.name.and_then(as_str) else {
                return Err(RpcError::invalid_params(
                    "Invalid params: `params.name` is required and must be a string (the tool to call)",
                ));
            };
            if let Some(args) = head.arguments
                && !args.get().starts_with('{')
            {
                return Err(RpcError::invalid_params(
                    "Invalid params: `params.arguments` must be an object",
                ));
            }
            Ok(Call::Tool {
                name,
                arguments: head.arguments,
                meta: head.meta,
                declared: None,
                input_responses: head.input_responses,
                request_state: head.request_state,
            })
        }
        _ => Err(RpcError::method_not_found(format!(
            "Method not found: this server does not serve that method in revision {revision}"
        ))),
    }
}

fn initialize<'a>(head: &ParamsHead<'a>) -> Result<Call<'a>, RpcError> {
    let Some(requested) = head.protocol_version.and_then(as_str) else {
        return Err(RpcError::invalid_params(
            "Invalid params: `params.protocolVersion` is required and must be a string",
        ));
    };
    let Some(capabilities) = head.capabilities.filter(|raw| raw.get().starts_with('{')) else {
        return Err(RpcError::invalid_params(
            "Invalid params: `params.capabilities` is required and must be an object",
        ));
    };
    let Some(info) = head.client_info else {
        return Err(RpcError::invalid_params(
            "Invalid params: `params.clientInfo` is required (an object with string `name` and `version`)",
        ));
    };
    implementation(info).map_err(|problem| {
        RpcError::invalid_params(format!("Invalid params: `params.clientInfo` {problem}"))
    })?;
    Ok(Call::Initialize {
        requested,
        capabilities,
    })
}

/// Decodes `arguments` (absent means an empty object) exactly once.
pub(crate) fn decode_arguments(raw: Option<&RawValue>) -> Result<Map<String, Value>, RpcError> {
    match raw {
        None => Ok(Map::new()),
        Some(raw) => serde_json::from_str::<Map<String, Value>>(raw.get()).map_err(|e| {
            RpcError::invalid_params(format!("Invalid params: `params.arguments`: {e}"))
        }),
    }
}

/// Checks an `Implementation` object (`clientInfo`): string `name` and
/// `version` are required.
pub(super) fn implementation(raw: &RawValue) -> Result<(), String> {
    let Ok(Value::Object(map)) = serde_json::from_str::<Value>(raw.get()) else {
        return Err("must be an object with string `name` and `version`".into());
    };
    for key in ["name", "version"] {
        if !map.get(key).is_some_and(Value::is_string) {
            return Err(format!("needs a string `{key}`"));
        }
    }
    Ok(())
}
