//! The one error type of the suite. Every variant names what to fix: the
//! flag, the program to install, or the process whose log to read.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum BenchError {
    /// A flag or URL the suite refuses (non-loopback target, bad duration).
    #[error("{0}")]
    Usage(String),
    /// A program the scenario needs is missing or failed to start.
    #[error("{program}: {reason}")]
    Program { program: String, reason: String },
    /// A started process misbehaved (died, never became ready).
    #[error("{what}: {reason}")]
    Process { what: String, reason: String },
    /// The target answered something the scenario cannot use (a setup
    /// call refused, an unexpected body).
    #[error("{what}: {reason}")]
    Protocol { what: String, reason: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("http: {0}")]
    Http(String),
    #[error("json: {0}")]
    Json(#[from] serde_json::Error),
}

impl BenchError {
    pub fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }

    pub fn protocol(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Protocol {
            what: what.into(),
            reason: reason.into(),
        }
    }

    pub fn process(what: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Process {
            what: what.into(),
            reason: reason.into(),
        }
    }
}

impl From<hyper::Error> for BenchError {
    /// With the error's sources: hyper's own text is often only
    /// "connection error", its source says which (reset, closed early, …).
    fn from(err: hyper::Error) -> Self {
        let mut text = err.to_string();
        let mut source = std::error::Error::source(&err);
        while let Some(cause) = source {
            text.push_str(": ");
            text.push_str(&cause.to_string());
            source = cause.source();
        }
        Self::Http(text)
    }
}

impl From<hyper::http::Error> for BenchError {
    fn from(err: hyper::http::Error) -> Self {
        Self::Http(err.to_string())
    }
}

pub type Result<T, E = BenchError> = std::result::Result<T, E>;
