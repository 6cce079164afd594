//! Timeouts and names, with defaults that bound every call to a few seconds.

use corkboard_board::ExpensiveReads;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Database name used when the operator does not choose one.
pub const DEFAULT_DATABASE: &str = "corkboard";

/// How a [`crate::MongoStore`] talks to MongoDB.
///
/// The three timeouts are what keep a down or stuck server from hanging a
/// tool call: every store call ends within `operation_timeout`, and a server
/// that cannot be reached at all is reported after `server_selection_timeout`.
#[derive(Debug, Clone)]
pub struct MongoOptions {
    /// How long the driver looks for a usable server before giving up. A
    /// timeout or `serverSelectionTimeoutMS` in the URI wins over this.
    pub server_selection_timeout: Duration,
    /// How long opening one TCP (and TLS) connection may take. A
    /// `connectTimeoutMS` in the URI wins over this.
    pub connect_timeout: Duration,
    /// Longest one store call may take from start to answer, retries and
    /// every round trip included. Past it the call is `Unavailable`, and a
    /// write may or may not have been applied. Also sent to the server as
    /// `maxTimeMS` on reads and `wtimeout` on writes, so the server gives up
    /// too instead of working for a caller that has left.
    pub operation_timeout: Duration,
    /// Longest [`corkboard_board::StoreHealth::check`] (a `ping`) waits:
    /// shorter than the others, so `/readyz` answers before the probe's
    /// own deadline, with the reason.
    pub check_timeout: Duration,
    /// Connections kept per server at most. 32 by default, deliberately
    /// below the concurrency a busy replica sees: every connection costs
    /// the MongoDB server memory and a worker, every replica has its own
    /// pool, and two cores cannot usefully keep more operations in flight.
    /// Calls beyond it wait in the driver's queue, inside the same
    /// `operation_timeout` (measured in docs/numbers.md).
    pub max_pool_size: u32,
    /// `appName` shown in the server's logs and `currentOp`.
    pub app_name: String,
    /// The deadline of each expensive read (searches, filtered lists; sent
    /// as their `maxTimeMS`) and each tenant's share of them, so one
    /// tenant's costly queries cannot take every pooled connection.
    pub expensive: ExpensiveReads,
    /// PEM CA certificate(s) the server's certificate must chain to (a
    /// private CA). Set: TLS is on, whatever the URI says about the CA; a
    /// URI with `tls=false` is refused.
    pub tls_ca_file: Option<std::path::PathBuf>,
    /// Sees every command the store sends (tests count and explain them;
    /// see [`CommandObserver`]). `None` by default: no cost.
    pub command_observer: Option<CommandObserver>,
}

/// A function told of every command the store sends, before it is sent:
/// its name (`find`, `createIndexes`, ...) and the command itself as BSON
/// bytes (a document: its filter, sort, limit; the driver's BSON types stay
/// out of this crate's API, the bytes are the wire format). Runs on the
/// driver's task: keep it short.
#[derive(Clone)]
pub struct CommandObserver(Arc<Observe>);

/// What a [`CommandObserver`] calls: the command's name and its BSON.
type Observe = dyn Fn(&str, &[u8]) + Send + Sync;

impl CommandObserver {
    pub fn new(observe: impl Fn(&str, &[u8]) + Send + Sync + 'static) -> Self {
        Self(Arc::new(observe))
    }

    pub(crate) fn handler(
        &self,
    ) -> mongodb::event::EventHandler<mongodb::event::command::CommandEvent> {
        let observe = Arc::clone(&self.0);
        mongodb::event::EventHandler::callback(move |event| {
            if let mongodb::event::command::CommandEvent::Started(started) = event {
                let bytes = started.command.to_vec().unwrap_or_default();
                observe(&started.command_name, &bytes);
            }
        })
    }
}

impl fmt::Debug for CommandObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CommandObserver")
    }
}

impl Default for MongoOptions {
    fn default() -> Self {
        Self {
            server_selection_timeout: Duration::from_secs(3),
            connect_timeout: Duration::from_secs(3),
            operation_timeout: Duration::from_secs(5),
            check_timeout: Duration::from_millis(1500),
            max_pool_size: 32,
            app_name: "corkboard".to_owned(),
            expensive: ExpensiveReads::default(),
            tls_ca_file: None,
            command_observer: None,
        }
    }
}
