//! The 2026-07-28 per-request envelope: `params._meta` carries the
//! protocol version, the client's capabilities and (optionally) its
//! `clientInfo`; over HTTP the mirrored headers must agree with it.

use super::headers::{self, RequestHeaders};
use super::{as_str, params::implementation};
use crate::revision::Revision;
use crate::wire::{MetaHead, ParamsHead, RpcError, meta_key};

/// The request's `_meta` when it names a protocol version (the marker of
/// a 2026-07-28 stateless request), read once: the era's choice looks at
/// presence only, and [`modern_envelope`] validates the values without
/// reading the object again.
pub(crate) fn modern_meta<'a>(head: &ParamsHead<'a>) -> Option<MetaHead<'a>> {
    head.meta
        .filter(|raw| raw.get().starts_with('{'))
        .and_then(|raw| serde_json::from_str::<MetaHead<'a>>(raw.get()).ok())
        .filter(|meta| meta.protocol_version.is_some())
}

/// Validates the 2026-07-28 per-request envelope (and, over HTTP, the
/// mirrored headers) and returns the request's revision and its `_meta`.
/// `read` is what [`modern_meta`] read of it, if anything.
pub(crate) fn modern_envelope<'a>(
    method: &str,
    head: &ParamsHead<'a>,
    read: Option<MetaHead<'a>>,
    headers: Option<&RequestHeaders>,
) -> Result<(Revision, MetaHead<'a>), RpcError> {
    let meta = match read {
        Some(meta) => meta,
        None => read_meta(head)?,
    };
    check_meta(method, head, meta, headers).map(|revision| (revision, meta))
}

/// Reads `_meta` of a request the era's choice found modern by other
/// signs (its headers, `server/discover`), refusing what is not an object.
fn read_meta<'a>(head: &ParamsHead<'a>) -> Result<MetaHead<'a>, RpcError> {
    let pv_key = meta_key::PROTOCOL_VERSION;
    let caps_key = meta_key::CLIENT_CAPABILITIES;
    let Some(raw_meta) = head.meta else {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: `params._meta` is required and must carry \"{pv_key}\" and \"{caps_key}\""
        )));
    };
    if !raw_meta.get().starts_with('{') {
        return Err(RpcError::invalid_params(
            "Invalid params: `params._meta` must be an object",
        ));
    }
    serde_json::from_str(raw_meta.get())
        .map_err(|e| RpcError::invalid_params(format!("Invalid params: `params._meta`: {e}")))
}

/// Checks the envelope's values: the required keys, the version (and the
/// mirrored headers), the capabilities' and `clientInfo`'s shapes.
fn check_meta(
    method: &str,
    head: &ParamsHead<'_>,
    meta: MetaHead<'_>,
    headers: Option<&RequestHeaders>,
) -> Result<Revision, RpcError> {
    let pv_key = meta_key::PROTOCOL_VERSION;
    let caps_key = meta_key::CLIENT_CAPABILITIES;
    let missing: Vec<&str> = [
        (meta.protocol_version.is_none(), pv_key),
        (meta.client_capabilities.is_none(), caps_key),
    ]
    .into_iter()
    .filter_map(|(absent, key)| absent.then_some(key))
    .collect();
    if !missing.is_empty() {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: `params._meta` is missing the required key(s): {}",
            missing.join(", ")
        )));
    }
    let version = meta.protocol_version.and_then(as_str);
    if let Some(headers) = headers {
        headers::mirrored(headers, method, head, version.as_ref())?;
    }

    let Some(version) = version else {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: params._meta[\"{pv_key}\"] must be a string"
        )));
    };
    let revision = match Revision::parse(&version) {
        Some(rev) if rev.is_modern() => rev,
        _ => {
            let supported: Vec<&str> = Revision::MODERN.iter().map(|r| r.as_str()).collect();
            return Err(RpcError::new(
                crate::code::UNSUPPORTED_PROTOCOL_VERSION,
                format!(
                    "Unsupported protocol version: this server serves {} per request (legacy revisions only through `initialize`)",
                    supported.join(", ")
                ),
            )
            .with_data(serde_json::json!({ "supported": supported, "requested": version })));
        }
    };
    if meta
        .client_capabilities
        .is_some_and(|raw| !raw.get().starts_with('{'))
    {
        return Err(RpcError::invalid_params(format!(
            "Invalid params: params._meta[\"{caps_key}\"] must be an object"
        )));
    }
    if let Some(info) = meta.client_info {
        implementation(info).map_err(|problem| {
            RpcError::invalid_params(format!(
                "Invalid params: params._meta[\"{}\"] {problem}",
                meta_key::CLIENT_INFO
            ))
        })?;
    }
    Ok(revision)
}
