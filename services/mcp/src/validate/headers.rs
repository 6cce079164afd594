//! The HTTP headers MCP reads beside the body: `MCP-Protocol-Version` in
//! a legacy session, and the 2026-07-28 headers that mirror the body
//! (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`). Stdio has none, so
//! every check here takes the headers as an `Option`.

use super::as_str;
use crate::revision::Revision;
use crate::wire::{ParamsHead, RpcError};

/// One HTTP request header relevant to MCP validation.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum HeaderSlot {
    #[default]
    Absent,
    Present(String),
    /// Repeated, or not visible ASCII.
    Malformed,
}

impl HeaderSlot {
    fn describe(&self) -> &'static str {
        match self {
            HeaderSlot::Absent => "missing",
            HeaderSlot::Present(_) => "present",
            HeaderSlot::Malformed => "malformed (repeated or not visible ASCII)",
        }
    }
}

/// The HTTP headers MCP mirrors from the body. `None` on stdio.
#[derive(Debug, Clone, Default)]
pub struct RequestHeaders {
    pub protocol_version: HeaderSlot,
    pub method: HeaderSlot,
    pub name: HeaderSlot,
    /// Every `Mcp-Param-*` header (2026-07-28): its name as received and
    /// its value, `None` when repeated or not visible ASCII. Checked
    /// against the called tool's `x-mcp-header` arguments
    /// ([`crate::param_headers::check`]).
    pub params: Vec<(String, Option<String>)>,
}

/// Checks that the 2026-07-28 headers mirror the body: the protocol
/// version of `params._meta` (`version`, when it is a string), `method`,
/// and for `tools/call` the tool name.
pub(super) fn mirrored(
    headers: &RequestHeaders,
    method: &str,
    head: &ParamsHead<'_>,
    version: Option<&String>,
) -> Result<(), RpcError> {
    // Header rung before the version rung: a client that disagrees with
    // itself is told so, rather than told its version is unsupported.
    match (&headers.protocol_version, version) {
        (HeaderSlot::Present(h), Some(v)) if h == v => {}
        (HeaderSlot::Present(_), _) => {
            return Err(RpcError::header_mismatch(
                "Header mismatch: MCP-Protocol-Version does not match params._meta[\"io.modelcontextprotocol/protocolVersion\"]",
            ));
        }
        (slot, _) => {
            return Err(RpcError::header_mismatch(format!(
                "Header mismatch: the MCP-Protocol-Version header is {}; it must equal params._meta[\"io.modelcontextprotocol/protocolVersion\"]",
                slot.describe()
            )));
        }
    }
    match &headers.method {
        HeaderSlot::Present(h) if h == method => {}
        HeaderSlot::Present(_) => {
            return Err(RpcError::header_mismatch(
                "Header mismatch: the Mcp-Method header does not match the body's `method`",
            ));
        }
        slot => {
            return Err(RpcError::header_mismatch(format!(
                "Header mismatch: the Mcp-Method header is {}; it must equal the body's `method`",
                slot.describe()
            )));
        }
    }
    if method == "tools/call"
        && let Some(body_name) = head.name.and_then(as_str)
    {
        match &headers.name {
            HeaderSlot::Present(h) if decode_header_value(h).as_deref() == Some(&body_name) => {}
            HeaderSlot::Present(_) => {
                return Err(RpcError::header_mismatch(
                    "Header mismatch: the Mcp-Name header does not match `params.name`",
                ));
            }
            slot => {
                return Err(RpcError::header_mismatch(format!(
                    "Header mismatch: the Mcp-Name header is {}; tools/call requires it to equal `params.name`",
                    slot.describe()
                )));
            }
        }
    }
    Ok(())
}

/// Decodes the `=?base64?...?=` sentinel form of `Mcp-Name`.
fn decode_header_value(value: &str) -> Option<String> {
    crate::param_headers::decode_value(value)
}

/// Checks the `MCP-Protocol-Version` header of a request in a legacy
/// session. Absent means "the session's revision" (2025-06-18 transports
/// spec); present, it must name a served legacy revision, else 400. The
/// spec refuses only invalid or unsupported values, and real clients (the
/// official conformance suite among them) send a different supported
/// revision than the negotiated one, so a mismatch is accepted and the
/// session's negotiated revision governs the response.
pub(crate) fn legacy_protocol_header(
    headers: Option<&RequestHeaders>,
    session: Revision,
) -> Result<(), RpcError> {
    let Some(headers) = headers else {
        return Ok(());
    };
    match &headers.protocol_version {
        HeaderSlot::Absent => Ok(()),
        HeaderSlot::Malformed => Err(RpcError::invalid_request(
            "Bad Request: the MCP-Protocol-Version header is malformed (repeated or not visible ASCII)",
        )),
        HeaderSlot::Present(value) => match Revision::parse(value) {
            Some(rev) if !rev.is_modern() => Ok(()),
            Some(_) => Err(RpcError::invalid_request(format!(
                "Bad Request: MCP-Protocol-Version {value} is stateless; this request is in a {session} session (send params._meta to use {value})"
            ))),
            None => Err(RpcError::invalid_request(format!(
                "Bad Request: unsupported MCP-Protocol-Version header; this session speaks {session}"
            ))),
        },
    }
}
