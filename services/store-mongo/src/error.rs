//! Errors of connecting, and how driver failures become [`StoreError`]s.

use corkboard_board::{ExpensiveReads, StoreError, ValidationError};
use mongodb::error::{Error, ErrorKind, WriteFailure};
use std::time::Duration;
use thiserror::Error;

/// Why a store could not be set up. Connection problems after start-up are
/// never this type: they are [`StoreError::Unavailable`] on the call that
/// met them, and the store recovers by itself when the server returns.
#[derive(Debug, Error)]
pub enum MongoStoreError {
    /// The URI did not parse (or a `mongodb+srv` lookup failed). The URI is
    /// not repeated in the message: it may carry a password.
    #[error("invalid MongoDB URI: {reason}")]
    InvalidUri { reason: String },
    #[error(
        "invalid MongoDB database name {name:?}: use 1 to 63 letters, digits, '-' and '_' (CORKBOARD_MONGODB_DATABASE)"
    )]
    InvalidDatabase { name: String },
    /// The server did not answer at start-up within the timeouts.
    #[error("MongoDB is unavailable at start-up: {reason}")]
    Unavailable { reason: String },
    /// The server answered but refused to set up the collections' indexes.
    #[error("cannot create the MongoDB indexes of {collection}: {reason}")]
    Indexes { collection: String, reason: String },
}

/// The server's duplicate-key code: a unique index refused the write.
pub(crate) const DUPLICATE_KEY: i32 = 11000;

/// The server's code for an operation stopped at its `maxTimeMS`.
pub(crate) const MAX_TIME_MS_EXPIRED: i32 = 50;

/// Server codes meaning "this server cannot serve you right now" (shutting
/// down, stepping down, not primary, network trouble between nodes, the
/// server's own time limit): the same call may succeed later.
const UNAVAILABLE_CODES: &[i32] = &[
    6,     // HostUnreachable
    7,     // HostNotFound
    50,    // MaxTimeMSExpired
    64,    // WriteConcernFailed
    89,    // NetworkTimeout
    91,    // ShutdownInProgress
    134,   // ReadConcernMajorityNotAvailableYet
    189,   // PrimarySteppedDown
    262,   // ExceededTimeLimit
    9001,  // SocketException
    10058, // LegacyNotPrimary
    10107, // NotWritablePrimary
    11600, // InterruptedAtShutdown
    11602, // InterruptedDueToReplStateChange
    13435, // NotPrimaryNoSecondaryOk
    13436, // NotPrimaryOrSecondary
];

/// Codes of a document that grew past MongoDB's 16 MiB limit (an issue with
/// too many comments).
const TOO_LARGE_CODES: &[i32] = &[10334, 17419, 17420];

/// Whether `err` is a unique-index violation.
pub(crate) fn is_duplicate_key(err: &Error) -> bool {
    match err.kind.as_ref() {
        ErrorKind::Write(WriteFailure::WriteError(e)) => e.code == DUPLICATE_KEY,
        ErrorKind::Command(e) => e.code == DUPLICATE_KEY,
        ErrorKind::InsertMany(e) => e
            .write_errors
            .as_ref()
            .is_some_and(|errs| errs.iter().any(|e| e.code == DUPLICATE_KEY)),
        _ => false,
    }
}

/// The answer of a deletion made of two writes (no transaction across the
/// collections): the record itself (`deleted`: whether this call removed
/// it), then what belongs to it (`dependents`, removed even when the record
/// was already gone, so a retry finishes a deletion cut off between the
/// two). Once the record is gone, a failure of the second write is past the
/// commit point: never "nothing applied".
pub(crate) fn two_write_deletion(
    deleted: bool,
    dependents: Result<(), StoreError>,
    missing: impl FnOnce() -> StoreError,
) -> Result<(), StoreError> {
    if !deleted {
        dependents?;
        return Err(missing());
    }
    dependents.map_err(StoreError::after_commit_point)
}

/// Maps a driver failure to what a caller can act on.
///
/// Anything that says the server could not be reached or could not serve
/// the call is `Unavailable` (retryable; nothing was applied), or
/// `OutcomeUnknown` when a write may have reached the server; a document too large is `Invalid`;
/// the rest is a bug or a damaged database and is `Internal`. Server
/// messages are neither passed on nor logged: a duplicate-key message
/// quotes the key's value and an invalid-regex message quotes the pattern,
/// both tool arguments. Codes, code names and connection-level causes are
/// enough for an operator, and those go to the log at `warn`.
pub(crate) fn store_error(err: &Error) -> StoreError {
    let code = server_code(err);
    if code.is_some_and(|c| TOO_LARGE_CODES.contains(&c)) {
        return StoreError::Invalid(ValidationError::new(
            "body",
            "the issue has reached MongoDB's 16 MiB document limit; no more comments fit",
        ));
    }
    // `(reason, may_be_applied)`: whether a write that met this error could
    // have reached the server and taken effect. Only failures that happen
    // before anything is sent (no server selectable, DNS, credentials, a
    // refused connection, a pool cleared before checkout) are known not to
    // have applied it.
    let unavailable = match err.kind.as_ref() {
        ErrorKind::Io(io) => Some((
            format!("cannot talk to MongoDB: {}", io.kind()),
            io.kind() != std::io::ErrorKind::ConnectionRefused,
        )),
        ErrorKind::ServerSelection { .. } => Some((
            "no MongoDB server could be reached (server selection timed out)".to_owned(),
            false,
        )),
        ErrorKind::ConnectionPoolCleared { .. } => {
            Some(("the connection to MongoDB was lost".to_owned(), false))
        }
        ErrorKind::DnsResolve { .. } => Some(("cannot resolve the MongoDB host".to_owned(), false)),
        ErrorKind::Authentication { .. } => {
            Some(("MongoDB refused the credentials".to_owned(), false))
        }
        ErrorKind::Write(WriteFailure::WriteConcernError(e)) => Some((
            format!(
                "MongoDB could not confirm the write as durable (write concern error {})",
                e.code
            ),
            true,
        )),
        ErrorKind::InsertMany(e) if e.write_concern_error.is_some() => Some((
            "MongoDB could not confirm the write as durable".to_owned(),
            true,
        )),
        _ if code.is_some_and(|c| UNAVAILABLE_CODES.contains(&c))
            || err.contains_label(mongodb::error::RETRYABLE_WRITE_ERROR) =>
        {
            Some((
                format!(
                    "MongoDB cannot serve the request right now (code {})",
                    code.unwrap_or_default()
                ),
                true,
            ))
        }
        _ => None,
    };
    match unavailable {
        Some((reason, may_be_applied)) => {
            tracing::warn!(error = %describe(err), "MongoDB unavailable");
            // A read changes nothing: `MongoStore::bounded` turns this back
            // into `Unavailable` for reads.
            if may_be_applied {
                StoreError::outcome_unknown(reason)
            } else {
                StoreError::unavailable(reason)
            }
        }
        None => {
            tracing::warn!(error = %describe(err), "MongoDB operation failed");
            StoreError::Internal(match code {
                Some(code) => format!("MongoDB error code {code}"),
                None => format!("MongoDB driver error: {}", kind_name(err.kind.as_ref())),
            })
        }
    }
}

/// [`store_error`] for an expensive read sent with its deadline as
/// `maxTimeMS`: the server stopping it there is [`ExpensiveReads::too_slow`],
/// not an unavailable server.
pub(crate) fn expensive_read_error(err: &Error, reads: &ExpensiveReads) -> StoreError {
    if server_code(err) == Some(MAX_TIME_MS_EXPIRED) {
        return reads.too_slow();
    }
    store_error(err)
}

/// The store call took longer than its budget.
pub(crate) fn timed_out(what: &str, budget: Duration, writes: bool) -> StoreError {
    let reason = format!(
        "MongoDB did not answer {what} within {} ms",
        budget.as_millis()
    );
    if writes {
        StoreError::outcome_unknown(reason)
    } else {
        StoreError::unavailable(reason)
    }
}

/// A stored document that does not parse back into a domain value.
pub(crate) fn corrupt(what: &str, id: &str, why: impl std::fmt::Display) -> StoreError {
    StoreError::Internal(format!("stored {what} {id} is invalid: {why}"))
}

fn server_code(err: &Error) -> Option<i32> {
    match err.kind.as_ref() {
        ErrorKind::Command(e) => Some(e.code),
        ErrorKind::Write(WriteFailure::WriteError(e)) => Some(e.code),
        ErrorKind::Write(WriteFailure::WriteConcernError(e)) => Some(e.code),
        ErrorKind::InsertMany(e) => e
            .write_errors
            .as_ref()
            .and_then(|errs| errs.first().map(|e| e.code))
            .or(e.write_concern_error.as_ref().map(|e| e.code)),
        _ => None,
    }
}

/// What the log may say about `err`: the kind, server codes and code
/// names, connection-level causes (addresses, I/O errors), never a server
/// message or a document.
fn describe(err: &Error) -> String {
    let labels = {
        let mut labels: Vec<&str> = err.labels().iter().map(String::as_str).collect();
        labels.sort_unstable();
        labels.join(",")
    };
    let what = match err.kind.as_ref() {
        ErrorKind::Io(io) => format!("I/O error: {io}"),
        ErrorKind::ServerSelection { message, .. } => format!("server selection: {message}"),
        ErrorKind::ConnectionPoolCleared { message, .. } => format!("pool cleared: {message}"),
        ErrorKind::DnsResolve { message, .. } => format!("DNS: {message}"),
        ErrorKind::Authentication { .. } => "authentication failed".to_owned(),
        ErrorKind::Command(e) => format!("command error {} ({})", e.code, e.code_name),
        ErrorKind::Write(WriteFailure::WriteError(e)) => format!(
            "write error {} ({})",
            e.code,
            e.code_name.as_deref().unwrap_or("")
        ),
        ErrorKind::Write(WriteFailure::WriteConcernError(e)) => {
            format!("write concern error {} ({})", e.code, e.code_name)
        }
        kind => match server_code(err) {
            Some(code) => format!("{} (code {code})", kind_name(kind)),
            None => kind_name(kind).to_owned(),
        },
    };
    format!("{what} [labels: {labels}]")
}

fn kind_name(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidArgument { .. } => "invalid argument",
        ErrorKind::BsonDeserialization(_) | ErrorKind::BsonSerialization(_) => "BSON conversion",
        ErrorKind::InvalidResponse { .. } => "invalid server response",
        ErrorKind::IncompatibleServer { .. } => "incompatible server",
        ErrorKind::InvalidTlsConfig { .. } => "invalid TLS configuration",
        ErrorKind::Transaction { .. } => "transaction",
        ErrorKind::Internal { .. } => "internal",
        ErrorKind::InsertMany(_) => "insert many",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn io(kind: std::io::ErrorKind) -> Error {
        Error::from(std::io::Error::from(kind))
    }

    #[test]
    fn a_deletion_is_past_its_commit_point_once_the_record_is_gone() {
        let missing = || StoreError::not_found("webhook w");
        let down = || Err(StoreError::unavailable("no server"));
        // The record gone by this call: the second write's failure is in doubt.
        let err = two_write_deletion(true, down(), missing).unwrap_err();
        assert!(err.may_have_been_applied(), "{err:?}");
        assert_eq!(two_write_deletion(true, Ok(()), missing), Ok(()));
        // Already gone: not found once the leftovers are removed; until
        // then, the failure (nothing of this call applied).
        let err = two_write_deletion(false, Ok(()), missing).unwrap_err();
        assert!(matches!(err, StoreError::NotFound { .. }), "{err:?}");
        let err = two_write_deletion(false, down(), missing).unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::Unavailable {
                    maybe_applied: false,
                    ..
                }
            ),
            "{err:?}"
        );
    }

    #[test]
    fn network_failures_are_retryable_and_name_no_details() {
        let err = store_error(&io(std::io::ErrorKind::ConnectionRefused));
        assert!(err.is_retryable(), "{err}");
        assert!(err.to_string().starts_with("board unavailable"), "{err}");
    }

    #[test]
    fn timeouts_say_the_write_may_have_happened() {
        let err = timed_out("create_issue", Duration::from_millis(1500), true);
        assert!(err.is_retryable());
        let text = err.to_string();
        assert!(
            text.contains("1500 ms") && text.contains("may or may not"),
            "{text}"
        );
        let read = timed_out("get_issue", Duration::from_millis(1500), false).to_string();
        assert!(!read.contains("may or may not"), "{read}");
    }

    #[test]
    fn server_messages_reach_neither_callers_nor_logs() {
        let secret = "E11000 duplicate key error dup key: { key: \"agent-key-42\" }";
        let write: mongodb::error::WriteError =
            mongodb::bson::deserialize_from_document(mongodb::bson::doc! {
                "code": DUPLICATE_KEY, "codeName": "DuplicateKey", "errmsg": secret,
            })
            .unwrap();
        let err = Error::from(ErrorKind::Write(WriteFailure::WriteError(write)));
        assert!(is_duplicate_key(&err));
        let mapped = store_error(&err).to_string();
        assert!(
            !mapped.contains("agent-key-42") && mapped.contains("11000"),
            "{mapped}"
        );
        let logged = describe(&err);
        assert!(
            !logged.contains("agent-key-42") && logged.contains("DuplicateKey"),
            "{logged}"
        );

        let command: mongodb::error::CommandError =
            mongodb::bson::deserialize_from_document(mongodb::bson::doc! {
                "code": 91, "codeName": "ShutdownInProgress", "errmsg": "bye",
            })
            .unwrap();
        let err = Error::from(ErrorKind::Command(command));
        assert!(
            store_error(&err).is_retryable(),
            "shutting down is retryable"
        );
        assert!(!describe(&err).contains("bye"));
    }

    #[test]
    fn max_time_expired_is_too_slow_only_for_expensive_reads() {
        let command: mongodb::error::CommandError =
            mongodb::bson::deserialize_from_document(mongodb::bson::doc! {
                "code": MAX_TIME_MS_EXPIRED, "codeName": "MaxTimeMSExpired",
                "errmsg": "operation exceeded time limit",
            })
            .unwrap();
        let err = Error::from(ErrorKind::Command(command));
        let reads = ExpensiveReads::new(Duration::from_millis(1500), 2);
        assert_eq!(
            expensive_read_error(&err, &reads),
            StoreError::QueryTooSlow { limit_ms: 1500 }
        );
        assert!(store_error(&err).is_retryable(), "elsewhere: unavailable");
        let other = io(std::io::ErrorKind::ConnectionReset);
        assert!(expensive_read_error(&other, &reads).is_retryable());
    }

    #[test]
    fn other_driver_errors_are_internal() {
        let err = Error::custom(42_u8);
        assert!(matches!(store_error(&err), StoreError::Internal(_)));
        assert!(!is_duplicate_key(&err));
    }
}
