//! A tenant's upstream MCP servers behind a run's gateway.
//!
//! Modules in dependency order (each imports only those after its
//! arrow, all above it; no loop):
//!
//! - [`shares`]: a table every tenant and run shares, with per-tenant and
//!   per-run shares (`SharedTable`; a leaf).
//! - `error`: [`UpstreamError`] → shares.
//! - [`seal`]: credentials sealed at rest ([`CredentialKey`], ChaCha20-
//!   Poly1305 under a key from a secret file) and held in clear only on
//!   their way into a request header ([`Credential`], redacted `Debug`)
//!   → error.
//! - [`seam`]: where requests an upstream sends to the client are decided
//!   (refused, or relayed to the agent under a sealed id) and the agent's
//!   answers checked (a leaf).
//! - [`client`]: the gateway's client of one upstream, in the upstream's
//!   era (2026-07-28 stateless, or a 2025 session the gateway owns and
//!   renews, one per run), every exchange bounded → error, seal, seam,
//!   shares.
//! - [`pins`]: which listed tools runs may see (their definitions'
//!   hashes recorded in the store, offered only as a tenant admin
//!   approved them; `upstream.tool_changed` for new and changed ones;
//!   a leaf).
//! - `conn`: one registered upstream (`Conn`: record, client, cached
//!   tool list, approved pins) and where a listed tool goes (`Route`)
//!   → client, pins.
//! - `waiting`: the relayed answers and held calls waiting in this
//!   process, behind methods → error, shares.
//! - [`view`]: a grant's [`UpstreamView`] and the call paths, one file per
//!   era pairing (`view/modern.rs`, `held.rs`, `legacy.rs`, `mixed.rs`)
//!   → client, conn, error, seam, shares, waiting.
//! - [`hub`]: every tenant's upstreams ([`Upstreams`]), their cached tool
//!   lists, each grant's view (`<upstream>__<tool>`, definitions checked
//!   by the one validator, capabilities `upstream:<name>:<glob>`), and the
//!   entry points of a call ([`Upstreams::call`], [`Upstreams::deliver`])
//!   → client, conn, error, pins, seal, seam, shares, view, waiting.
//!
//! The gateway hooks this in per request (its binding holds an
//! [`Upstreams`]); the control plane uses [`seal`] to register upstreams.
//!
//! In detail: A tenant's upstream MCP servers behind a run's gateway. Every
//! connection goes through `egress` (the client checked by its policy: the URL
//! parsed once, literal addresses judged when the client is made, names when
//! resolved). credentials sealed at rest (`seal`: ChaCha20-Poly1305 under
//! `upstream_key_file`, bound to tenant, name and header; the same key seals
//! webhook signing secrets), the client of one upstream (`client`: 2026-07-28
//! stateless or a 2025 session the gateway owns; every exchange bounded), every
//! tenant's upstreams and cached tool lists (`hub`: `<upstream>__<tool>` after
//! `mcp::check_tool_definition`, `<upstream>__unavailable` for an unlisted one;
//! `Upstreams::call`), a grant's `UpstreamView` and its call paths, one file
//! per era pairing (`view/`: `modern.rs` 2026×2026, `held.rs` 2026 agent × 2025
//! upstream, `legacy.rs` and `mixed.rs` for 2025 agents), what waits in-process
//! between rounds (`waiting`: relayed answers and held calls, behind methods),
//! and `seam`: the relay of an upstream's requests to the client (checked by
//! `mcp::relay`, under signed relayed ids). All four era combinations; the
//! module graph (a DAG) is in `lib.rs`.

#![forbid(unsafe_code)]

pub mod client;
mod conn;
mod error;
pub mod hub;
pub mod pins;
pub mod seal;
pub mod seam;
pub mod shares;
pub mod view;
mod waiting;

pub use client::{Era, UpstreamClient};
pub use error::UpstreamError;
pub use hub::{
    DEFAULT_HELD_CALLS_MAX, DEFAULT_MAX_ANSWER_BYTES, DEFAULT_PENDING_REQUESTS_MAX,
    DEFAULT_SESSIONS_MAX, RelayShares, SEPARATOR, UNAVAILABLE_TOOL, UpstreamOptions, Upstreams,
};
pub use pins::ToolChanged;
pub use seal::{CREDENTIAL_MAX, Credential, CredentialKey};
pub use view::UpstreamView;
