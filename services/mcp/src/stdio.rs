//! Newline-delimited JSON-RPC over any byte streams (the stdio transport).
//!
//! Only protocol messages are written to the output; diagnostics go to
//! `tracing`. Stdio has no headers, so 2026-07-28 requests rely on their
//! `_meta` alone, and the "session" of a legacy client is the process:
//! `initialize` sets the revision for the requests that follow. The
//! credential is checked once, by the embedder, before serving; a refused
//! credential answers every request with a clear error.

use std::io;
use std::time::Instant;

use bytes::Bytes;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncWrite, AsyncWriteExt};

use crate::backend::{AuthRejection, ToolBackend};
use crate::engine::{Context, Engine, SessionState, Summary, log_exchange};
use crate::error::McpError;
use crate::refusal::{Refusal, Transport};
use crate::validate::{self, Incoming, Message};
use crate::wire::{self, RpcError};
use corkboard_telemetry::mcp as telemetry;
use tracing::Instrument;

/// Stdio limits.
#[derive(Debug, Clone, Copy)]
pub struct StdioOptions {
    /// Longest accepted line; longer ones are answered with an error and
    /// skipped without buffering them.
    pub max_line_bytes: usize,
}

impl Default for StdioOptions {
    fn default() -> Self {
        Self {
            max_line_bytes: crate::http::McpSettings::DEFAULT_MAX_BODY_BYTES,
        }
    }
}

/// What [`read_line`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Line {
    Eof,
    Message,
    TooLong,
}

/// Reads one newline-delimited line into `buf` (without its newline),
/// never holding more than `max` bytes of it; a longer line is consumed
/// and reported as [`Line::TooLong`].
pub async fn read_line<R: AsyncBufRead + Unpin>(
    input: &mut R,
    buf: &mut Vec<u8>,
    max: usize,
) -> io::Result<Line> {
    buf.clear();
    let mut too_long = false;
    let mut saw_any = false;
    loop {
        let available = input.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (saw_any, too_long) {
                (false, _) => Line::Eof,
                (true, true) => Line::TooLong,
                (true, false) => Line::Message,
            });
        }
        saw_any = true;
        let (take, done) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (i, Some(i + 1)),
            None => (available.len(), None),
        };
        if !too_long {
            if buf.len() + take > max {
                too_long = true;
                buf.clear();
            } else {
                buf.extend_from_slice(&available[..take]);
            }
        }
        let consumed = done.unwrap_or(take);
        input.consume(consumed);
        if done.is_some() {
            return Ok(if too_long {
                Line::TooLong
            } else {
                Line::Message
            });
        }
    }
}

/// Room the framing buffer keeps between messages (a default result
/// budget's answer fits).
const FRAME_KEPT_BYTES: usize = 64 * 1024;

/// Serves MCP on `input`/`output` until EOF. A closed output (broken pipe)
/// also ends the loop cleanly; other I/O errors are returned.
pub async fn serve_stdio<B, R, W>(
    engine: &Engine<B>,
    principal: Result<B::Principal, AuthRejection>,
    options: StdioOptions,
    mut input: R,
    mut output: W,
) -> Result<(), McpError>
where
    B: ToolBackend,
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut session = SessionState::Missing;
    let mut line = Vec::new();
    // Each message and its newline, framed here so that they go out in
    // one write: tokio's stdout hands every write to a blocking thread and
    // waits for it before the next, so a second write for the newline was
    // a second round trip per message. Reused: one allocation, not one per
    // message.
    let mut framed = Vec::new();
    loop {
        let kind = read_line(&mut input, &mut line, options.max_line_bytes).await?;
        let started = Instant::now();
        let span = telemetry::mcp_span_open();
        let (summary, reply) = match kind {
            Line::Eof => return Ok(()),
            Line::TooLong => {
                let error = RpcError::invalid_request(format!(
                    "Invalid Request: message exceeds {} bytes",
                    options.max_line_bytes
                ));
                (
                    refused_summary(&error),
                    Some(Bytes::from(wire::error_response(None, &error))),
                )
            }
            Line::Message => {
                let text = line.strip_suffix(b"\r").unwrap_or(&line);
                if text.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match &principal {
                    Ok(principal) => {
                        let ctx = Context {
                            principal,
                            session,
                            headers: None,
                            peer: None,
                        };
                        let outcome = engine
                            .handle_message(&ctx, text)
                            .instrument(span.clone())
                            .await;
                        if let Some((revision, _)) = outcome.started {
                            session = SessionState::Active(revision);
                        }
                        (outcome.summary, outcome.body)
                    }
                    Err(rejection) => unauthenticated(rejection, text),
                }
            }
        };
        let elapsed = started.elapsed();
        telemetry::record_request(&span, summary.method, summary.tool.as_deref());
        telemetry::record_outcome(
            &span,
            summary.outcome,
            summary.code.map(crate::code::ErrorCode::get),
            elapsed,
        );
        span.in_scope(|| log_exchange("stdio", &summary, 0, elapsed));
        if let Some(body) = reply {
            framed.clear();
            // A rare large message does not keep its room for the session.
            framed.shrink_to(FRAME_KEPT_BYTES);
            framed.extend_from_slice(&body);
            framed.push(b'\n');
            let written = async {
                output.write_all(&framed).await?;
                output.flush().await
            }
            .await;
            match written {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
                Err(e) => return Err(McpError::Io(e)),
            }
        }
    }
}

fn refused_summary(error: &RpcError) -> Summary {
    Summary {
        method: "other",
        outcome: "error",
        code: Some(error.code),
        ..Summary::default()
    }
}

/// Answers a message when the start-up credential was refused: requests
/// get the reason, notifications and responses get nothing.
fn unauthenticated(rejection: &AuthRejection, text: &[u8]) -> (Summary, Option<Bytes>) {
    let refusal = Refusal::credential(rejection, Transport::Stdio);
    let reply = match validate::parse(text) {
        Ok(Incoming::Single(env)) => match validate::envelope(&env) {
            Ok(Message::Request { id, .. }) => Some(refusal.body(Some(id))),
            Ok(_) => None,
            Err(rejected) => Some(refusal.body(rejected.id)),
        },
        Ok(Incoming::Batch(_)) | Err(_) => Some(refusal.body(None)),
    };
    (refused_summary(&refusal.error), reply.map(Bytes::from))
}
