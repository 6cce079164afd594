//! The one vocabulary of MCP method names the product records.
//!
//! Logs, spans and metrics name a request's method by one of these labels,
//! never by client text: an unknown method is `other` (`notifications/other`
//! for unknown notifications), so a client cannot put arbitrary strings (a
//! token, say) into telemetry through a method name. The table itself lives
//! in `corkboard-telemetry`, below this crate, because telemetry must bound
//! the labels it is handed whoever calls it; every transport here (the
//! engine, [`crate::peek`], the stdio bridge client) labels through this
//! module, so there is one table.

pub use corkboard_telemetry::mcp::{MCP_METHODS as METHODS, method_label};
