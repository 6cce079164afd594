//! Newline-delimited JSON-RPC in, a [`StreamableHttpClient`] out: the
//! stdio side of a bridge that lets a stdio-only agent use an HTTP MCP
//! server. Framing and limits are those of the stdio server transport
//! ([`read_line`]); only the handling of each message differs.

use std::future::Future;
use std::io;

use tokio::io::{AsyncBufRead, AsyncWrite, AsyncWriteExt};

use super::StreamableHttpClient;
use crate::error::McpError;
use crate::stdio::{Line, StdioOptions, read_line};
use crate::wire::{self, RpcError};

/// Relays each line of `input` through `client` and writes the answers to
/// `output`, one per line, until EOF, a closed `output`, or `stop`
/// resolves (checked while reading and while a message is relayed, so a
/// signal is never lost). Then ends the client's session on the server.
pub async fn relay_stdio<R, W>(
    client: &mut StreamableHttpClient,
    options: StdioOptions,
    mut input: R,
    mut output: W,
    stop: impl Future<Output = ()>,
) -> Result<(), McpError>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let max = options.max_line_bytes;
    let mut line = Vec::new();
    tokio::pin!(stop);
    let served: io::Result<()> = async {
        loop {
            let kind = tokio::select! {
                read = read_line(&mut input, &mut line, max) => read?,
                () = &mut stop => {
                    tracing::info!("stop requested; ending the stdio session");
                    return Ok(());
                }
            };
            let replies = match kind {
                Line::Eof => return Ok(()),
                Line::TooLong => vec![wire::error_response(
                    None,
                    &RpcError::invalid_request(format!(
                        "Invalid Request: message exceeds {max} bytes"
                    )),
                )],
                Line::Message => {
                    let text = line.strip_suffix(b"\r").unwrap_or(&line);
                    if text.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    tokio::select! {
                        replies = client.relay(text) => replies,
                        () = &mut stop => {
                            tracing::info!("stop requested; ending the stdio session");
                            return Ok(());
                        }
                    }
                }
            };
            for reply in replies {
                if !write_line(&mut output, &reply).await? {
                    tracing::info!("stdout closed; ending the stdio session");
                    return Ok(());
                }
            }
        }
    }
    .await;
    client.end_session().await;
    served.map_err(McpError::Io)
}

/// Writes one message line. `Ok(false)`: the reader went away (broken
/// pipe), which ends the session without an error.
async fn write_line<W: AsyncWrite + Unpin>(output: &mut W, message: &[u8]) -> io::Result<bool> {
    let mut framed = Vec::with_capacity(message.len() + 1);
    framed.extend_from_slice(message);
    framed.push(b'\n');
    let written = match output.write_all(&framed).await {
        Ok(()) => output.flush().await,
        Err(e) => Err(e),
    };
    match written {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(false),
        Err(e) => Err(e),
    }
}
