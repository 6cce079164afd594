//! The peer capability over Streamable HTTP: a 2025 session's `tools/call`
//! whose backend sends the agent a request before its result gets a real
//! event stream (the request, then the result), the agent's answer POST
//! reaches the backend (`client_response`), and a call that sends nothing
//! is answered exactly as before. The capabilities the agent declared in
//! `initialize` travel in its session id to every later request.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use actix_web::body::MessageBody;
use actix_web::{App, test};
use async_trait::async_trait;
use corkboard_mcp::{
    AuthRejection, Authenticate, ClientResponse, McpEndpoint, McpSettings, Peer, Principal,
    ResultOrigin, RpcError, ServerIdentity, SessionKey, ToolBackend, ToolCall, ToolDef, ToolOutput,
    ToolSet,
};
use corkboard_testkit::mcp;
use serde_json::{Value, json};
use tokio::sync::oneshot;

#[derive(Debug, Clone)]
struct Agent;

impl Principal for Agent {
    fn session_binding(&self) -> &str {
        "grant-peer"
    }
}

/// `ask` sends the agent `sampling/createMessage` (id `q-1`) and answers
/// with the model the agent's answer names; `quiet` sends nothing.
struct Asker {
    identity: ServerIdentity,
    tools: Arc<ToolSet>,
    waiting: Mutex<HashMap<String, oneshot::Sender<Value>>>,
}

#[async_trait]
impl ToolBackend for Asker {
    type Principal = Agent;

    fn identity(&self) -> &ServerIdentity {
        &self.identity
    }

    fn tools(&self, _principal: &Agent) -> Arc<ToolSet> {
        self.tools.clone()
    }

    async fn call_tool(&self, _principal: &Agent, call: ToolCall<'_>) -> ToolOutput {
        let text = match (call.name, call.peer) {
            ("ask", Some(peer)) if peer.has_stream() && peer.capabilities().sampling => {
                let (tx, rx) = oneshot::channel();
                self.waiting.lock().unwrap().insert("q-1".into(), tx);
                let request = br#"{"jsonrpc":"2.0","id":"q-1","method":"sampling/createMessage","params":{"messages":[],"maxTokens":1}}"#;
                peer.send(request.to_vec()).await.unwrap();
                let answer = rx.await.unwrap();
                format!("model {}", answer["model"].as_str().unwrap_or("?"))
            }
            (name, peer) => format!("{name}: stream {}", peer.is_some_and(Peer::has_stream)),
        };
        ToolOutput {
            structured: None,
            text: text.into(),
            is_error: false,
            relay: None,
            content: Vec::new(),
        }
    }

    fn may_relay(&self, _principal: &Agent) -> bool {
        true
    }

    async fn client_response(
        &self,
        _principal: &Agent,
        peer: &Peer,
        response: ClientResponse<'_>,
    ) -> Result<(), RpcError> {
        assert!(peer.capabilities().sampling, "declared in initialize");
        let id: String = serde_json::from_str(response.id.get()).unwrap();
        let Some(waiting) = self.waiting.lock().unwrap().remove(&id) else {
            return Err(RpcError::invalid_params("Invalid params: unknown id"));
        };
        let result: Value = serde_json::from_str(response.result.unwrap().get()).unwrap();
        let _ = waiting.send(result);
        Ok(())
    }
}

#[async_trait]
impl Authenticate for Asker {
    async fn authenticate(&self, _bearer: Option<&str>) -> Result<Agent, AuthRejection> {
        Ok(Agent)
    }
}

fn tool(name: &str) -> ToolDef {
    ToolDef {
        name: name.into(),
        title: None,
        description: format!("{name} tool"),
        input_schema: json!({ "type": "object" }),
        output_schema: None,
        annotations: None,
        results: ResultOrigin::Relayed,
    }
}

fn post(body: &Value, session: Option<&str>) -> test::TestRequest {
    let mut request = test::TestRequest::post()
        .uri("/mcp")
        .insert_header(("host", "127.0.0.1:8080"))
        .insert_header(("content-type", "application/json"))
        .insert_header(("accept", mcp::ACCEPT))
        .set_payload(body.to_string());
    if let Some(session) = session {
        request = request
            .insert_header(("mcp-session-id", session))
            .insert_header(("mcp-protocol-version", "2025-11-25"));
    }
    request
}

#[actix_rt::test]
async fn a_call_that_asks_first_answers_as_an_event_stream_and_takes_the_answer() {
    let backend = Arc::new(Asker {
        identity: ServerIdentity {
            name: "peer-test".into(),
            version: "1.0.0".into(),
            title: None,
            instructions: None,
        },
        tools: Arc::new(ToolSet::new(vec![tool("ask"), tool("quiet")])),
        waiting: Mutex::new(HashMap::new()),
    });
    let key = SessionKey::new(vec![9; 32]).unwrap();
    let endpoint = McpEndpoint::new(backend, McpSettings::new(key));
    let app = test::init_service(App::new().configure(|cfg| endpoint.configure(cfg))).await;
    let init = mcp::initialize(
        0,
        "2025-11-25",
        json!({ "sampling": {} }),
        ("peer-test-agent", "1"),
    );
    let resp = test::call_service(&app, post(&init, None).to_request()).await;
    let session = resp
        .headers()
        .get("mcp-session-id")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();

    // Sends nothing: one ordinary JSON answer, as before.
    let quiet =
        json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": { "name": "quiet" } });
    let resp = test::call_service(&app, post(&quiet, Some(&session)).to_request()).await;
    assert_eq!(
        resp.headers().get("content-type").unwrap(),
        "application/json"
    );
    let body: Value = serde_json::from_slice(&test::read_body(resp).await).unwrap();
    assert_eq!(body["result"]["content"][0]["text"], "quiet: stream true");

    // Asks first: an event stream with the request, then (after the
    // answer POST) the result.
    let ask =
        json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": { "name": "ask" } });
    let resp = test::call_service(&app, post(&ask, Some(&session)).to_request()).await;
    assert_eq!(resp.status().as_u16(), 200);
    assert_eq!(
        resp.headers().get("content-type").unwrap(),
        "text/event-stream"
    );
    let mut body = resp.into_body();
    let mut next = async || {
        std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_next(cx))
            .await
            .map(|chunk| String::from_utf8(chunk.unwrap().to_vec()).unwrap())
    };
    let first = next().await.unwrap();
    assert!(
        first.starts_with("event: message\ndata: ")
            && first.contains(r#""id":"q-1","method":"sampling/createMessage""#),
        "{first}"
    );
    let answer = json!({ "jsonrpc": "2.0", "id": "q-1", "result": { "role": "assistant", "model": "m-7", "content": { "type": "text", "text": "x" } } });
    let resp = test::call_service(&app, post(&answer, Some(&session)).to_request()).await;
    assert_eq!(resp.status().as_u16(), 202, "the answer was taken");
    let last = next().await.unwrap();
    let data = last.strip_prefix("event: message\ndata: ").unwrap().trim();
    let result: Value = serde_json::from_str(data).unwrap();
    assert_eq!(result["id"], 2);
    assert_eq!(result["result"]["content"][0]["text"], "model m-7");
    assert!(next().await.is_none(), "the stream ends after the result");

    // An answer the backend refuses: 400 with its error.
    let stray = json!({ "jsonrpc": "2.0", "id": "q-9", "result": {} });
    let resp = test::call_service(&app, post(&stray, Some(&session)).to_request()).await;
    assert_eq!(resp.status().as_u16(), 400);
    let body: Value = serde_json::from_slice(&test::read_body(resp).await).unwrap();
    assert_eq!(body["error"]["code"], -32602);
}
