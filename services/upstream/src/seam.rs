//! Where a request an upstream sends "to the client" (`sampling/
//! createMessage`, `elicitation/create`, `roots/list`, `ping`, ...) on a
//! response stream is handed over. Relaying those to the agent, through
//! the relay validator (`corkboard_mcp::relay`, built separately), plugs
//! in here: [`answer`] is the one place that decides the reply.
//!
//! Today nothing is relayed: the gateway declares no client capabilities
//! to upstreams, and a request that arrives anyway is refused at once
//! with a JSON-RPC error carrying the upstream's own request id, so the
//! upstream never waits for an answer that will not come. `ping` is
//! answered (it asks nothing of the agent).

use corkboard_board::UpstreamName;
use corkboard_mcp::code;
use serde_json::{Value, json};
use std::time::Duration;

/// How long delivering the answer may take.
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// The reply to `request` from `upstream`, correlated by its id.
pub fn answer(upstream: &UpstreamName, request: &Value) -> Value {
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let method = request.get("method").and_then(Value::as_str).unwrap_or("");
    if method == "ping" {
        return json!({ "jsonrpc": "2.0", "id": id, "result": {} });
    }
    let label = corkboard_mcp::method::method_label(method);
    // The upstream's own method name, echoed to it only (never logged).
    let shown: String = method.chars().take(64).collect();
    tracing::info!(%upstream, method = label, "refused an upstream's request to the client (not relayed)");
    json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": code::METHOD_NOT_FOUND.get(),
            "message": format!(
                "Method not found: the corkboard gateway does not relay {shown} from upstream {upstream} to the agent; it declared no such client capability"
            ),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_refused_with_their_own_id_and_pings_answered() {
        let name = UpstreamName::parse("everything").unwrap();
        let refused = answer(
            &name,
            &json!({ "jsonrpc": "2.0", "id": "u-7", "method": "sampling/createMessage", "params": {} }),
        );
        assert_eq!(refused["id"], "u-7");
        assert_eq!(refused["error"]["code"], -32601);
        let pong = answer(
            &name,
            &json!({ "jsonrpc": "2.0", "id": 3, "method": "ping" }),
        );
        assert_eq!(pong, json!({ "jsonrpc": "2.0", "id": 3, "result": {} }));
    }
}
