//! What the hub keeps per registered upstream and what a grant's view
//! routes to: one upstream's [`Conn`] (its record, its client, its cached
//! tool list) and a listed tool's [`Route`]. The hub builds both and the
//! call paths (`view`) use them; this module imports neither, so there
//! is no loop between the two.

use crate::client::UpstreamClient;
use crate::pins::Pins;
use corkboard_board::{DefinitionHash, Upstream};
use corkboard_mcp::ToolDef;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One upstream's tools as last listed: their agent-facing definitions,
/// which upstream tool each is, and the hash of its pinned definition.
#[derive(Debug)]
pub(crate) struct Listed {
    pub(crate) tools: Vec<(ToolDef, String, DefinitionHash)>,
}

/// An upstream's cached tool list, as the hub refreshes it.
#[derive(Debug, Default)]
pub(crate) struct ToolsState {
    pub(crate) listed: Option<Arc<Listed>>,
    pub(crate) failure: Option<String>,
    pub(crate) checked: Option<Instant>,
    pub(crate) generation: u64,
}

/// One registered upstream and its client.
pub(crate) struct Conn {
    pub(crate) record: Upstream,
    /// The client, or why none could be made (a credential that does not
    /// open with this key).
    pub(crate) client: Result<UpstreamClient, String>,
    pub(crate) tools: Mutex<ToolsState>,
    /// Its tools' approved definitions (see [`crate::pins`]).
    pub(crate) pins: Mutex<Pins>,
    /// Held by the one task fetching the list, so others wait for its
    /// result instead of asking the upstream too.
    pub(crate) fetching: tokio::sync::Mutex<()>,
    /// Unique per connection object, so a view built on a replaced one is
    /// rebuilt.
    pub(crate) serial: u64,
}

impl std::fmt::Debug for Conn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conn")
            .field("upstream", &self.record.name)
            .finish_non_exhaustive()
    }
}

/// Where an agent-visible upstream tool goes.
#[derive(Debug)]
pub(crate) enum Route {
    Tool {
        conn: Arc<Conn>,
        tool: String,
        /// The approved definition it is offered under (audited with
        /// every call).
        hash: DefinitionHash,
    },
    /// The stand-in of an upstream that could not be listed.
    Unavailable { conn: Arc<Conn> },
}

/// Locks one of this crate's mutexes. Every critical section is a map or
/// field update that cannot panic half-way, so a poisoned lock still
/// holds whole values.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
