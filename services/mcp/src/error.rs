//! The crate's error type.

/// Errors from setting up or running an MCP transport. Protocol-level
/// failures are never errors here: they are answered on the wire.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("session key is {0} bytes; at least 32 are required")]
    SessionKeyTooShort(usize),
    #[error("session store unavailable: {0}")]
    SessionStore(String),
    #[error("stdio transport I/O failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("HTTP client could not be set up: {0}")]
    HttpClient(#[source] reqwest::Error),
}
