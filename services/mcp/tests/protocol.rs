//! Table-driven protocol suite: every malformed or refused input gets its
//! exact HTTP status and JSON-RPC code, and no tool runs for it.

use crate::common;

use actix_web::http::Method;
use common::*;
use corkboard_mcp::{ErrorCode, code};
use serde_json::{Value, json};

struct Case {
    name: &'static str,
    req: Req,
    status: u16,
    code: Option<ErrorCode>,
    /// Expected `id` of the error response (`Value::Null` = null id).
    id: Option<Value>,
}

fn case(name: &'static str, req: Req, status: u16, code: Option<ErrorCode>) -> Case {
    Case {
        name,
        req,
        status,
        code,
        id: None,
    }
}

impl Case {
    fn id(mut self, id: Value) -> Self {
        self.id = Some(id);
        self
    }
}

fn modern_req(body: &Value) -> Req {
    Req::json(body).modern_headers(body)
}

fn legacy_call(id: i64, name: &str, args: Value) -> Value {
    request(
        json!(id),
        "tools/call",
        json!({"name": name, "arguments": args}),
    )
}

async fn run(ep: &corkboard_mcp::McpEndpoint<Toy>, toy: &Toy, cases: Vec<Case>) {
    let mut failures = Vec::new();
    for case in cases {
        let before = toy.calls();
        let reply = call(ep, &case.req).await;
        let mut problems = Vec::new();
        if reply.status != case.status {
            problems.push(format!("status {} != {}", reply.status, case.status));
        }
        if reply.code() != case.code {
            problems.push(format!("code {:?} != {:?}", reply.code(), case.code));
        }
        if let Some(id) = &case.id
            && &reply.json["id"] != id
        {
            problems.push(format!("id {} != {id}", reply.json["id"]));
        }
        if case.code.is_some() && toy.calls() != before {
            problems.push("a tool ran for a refused request".into());
        }
        if !reply.raw.is_empty() && reply.json["jsonrpc"] != "2.0" && !reply.json.is_array() {
            problems.push("body is not a JSON-RPC message".into());
        }
        if reply.status == 202 && !reply.raw.is_empty() {
            problems.push("202 with a body".into());
        }
        if case.code.is_some() && reply.content_type() != "application/json" {
            problems.push(format!("error content-type {}", reply.content_type()));
        }
        if !problems.is_empty() {
            failures.push(format!(
                "{}: {} (body: {})",
                case.name,
                problems.join("; "),
                reply.json
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} case(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[actix_rt::test]
async fn transport_refusals() {
    let toy = Toy::new();
    let ep = endpoint(toy.clone());
    let discover = modern(json!(9), "server/discover", json!({}));
    let ok = || modern_req(&discover);
    let big = vec![b' '; 1024 * 1024 + 1];
    let cases = vec![
        case(
            "foreign Host",
            ok().header("host", "evil.example.com"),
            403,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "foreign Host with port",
            ok().header("host", "evil.example.com:8080"),
            403,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "listed Host",
            ok().header("host", "gateway.internal:9000"),
            200,
            None,
        ),
        case(
            "localhost Host",
            ok().header("host", "localhost:1234"),
            200,
            None,
        ),
        case(
            "IPv6 loopback Host",
            ok().header("host", "[::1]:1234"),
            200,
            None,
        ),
        case(
            "foreign Origin",
            ok().header("origin", "http://evil.example.com"),
            403,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "null Origin",
            ok().header("origin", "null"),
            403,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "lookalike Origin",
            ok().header("origin", "http://localhost.evil.com"),
            403,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "loopback Origin",
            ok().header("origin", "http://localhost:8080"),
            200,
            None,
        ),
        case(
            "allowed Origin",
            ok().header("origin", "http://localhost:5173"),
            200,
            None,
        ),
        case(
            "GET",
            ok().method(Method::GET),
            405,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "PUT",
            ok().method(Method::PUT),
            405,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "text/plain body",
            ok().header("content-type", "text/plain"),
            415,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "no content type",
            ok().without("content-type"),
            415,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "json with charset",
            ok().header("content-type", "application/json; charset=utf-8"),
            200,
            None,
        ),
        case(
            "Accept json only",
            ok().header("accept", "application/json"),
            406,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "Accept sse only",
            ok().header("accept", "text/event-stream"),
            406,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "no Accept",
            ok().without("accept"),
            406,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "Accept q=0 sse",
            ok().header("accept", "application/json, text/event-stream;q=0"),
            406,
            Some(code::INVALID_REQUEST),
        ),
        case("Accept */*", ok().header("accept", "*/*"), 200, None),
        case(
            "Accept wildcards",
            ok().header("accept", "application/*, text/*"),
            200,
            None,
        ),
        case(
            "body over limit",
            Req::post(big.clone()),
            413,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "body over limit while streaming (lying Content-Length)",
            Req::post(big).header("content-length", "10"),
            413,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "no credential",
            ok().without("authorization"),
            401,
            Some(code::INVALID_REQUEST),
        )
        // Refused from the headers, before the body is read: no id.
        .id(Value::Null),
        case(
            "non-bearer credential",
            ok().header("authorization", "Basic Zm9v"),
            401,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "refused credential",
            ok().header("authorization", "Bearer nope"),
            403,
            Some(code::INVALID_REQUEST),
        )
        .id(Value::Null),
        case(
            "registry down",
            ok().header("authorization", "Bearer down"),
            503,
            Some(code::INTERNAL_ERROR),
        ),
        case(
            "no credential, unparsable body",
            Req::post("{").without("authorization"),
            401,
            Some(code::INVALID_REQUEST),
        )
        .id(Value::Null),
    ];
    run(&ep, &toy, cases).await;

    let reply = call(&ep, &Req::json(&discover).without("authorization")).await;
    assert_eq!(reply.header("www-authenticate").as_deref(), Some("Bearer"));
    let reply = call(
        &ep,
        &Req::json(&discover).header("authorization", "Bearer down"),
    )
    .await;
    assert_eq!(reply.header("retry-after").as_deref(), Some("2"));
    let reply = call(&ep, &Req::post("{}").method(Method::GET)).await;
    assert_eq!(reply.header("allow").as_deref(), Some("POST, DELETE"));
    let reply = call(
        &ep,
        &Req::json(&discover).header("authorization", "Bearer nope"),
    )
    .await;
    assert!(
        reply.json["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("revoked")),
        "refusal reason reaches the client: {}",
        reply.json
    );
}

#[actix_rt::test]
async fn envelope_errors() {
    let toy = Toy::new();
    let ep = endpoint(toy.clone());
    let invalid = Some(code::INVALID_REQUEST);
    let cases = vec![
        case(
            "unterminated JSON",
            Req::post("{"),
            400,
            Some(code::PARSE_ERROR),
        )
        .id(Value::Null),
        case("empty body", Req::post(""), 400, Some(code::PARSE_ERROR)),
        case(
            "trailing garbage",
            Req::post("{} x"),
            400,
            Some(code::PARSE_ERROR),
        ),
        case(
            "invalid UTF-8",
            Req::post(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}".to_vec()),
            400,
            Some(code::PARSE_ERROR),
        ),
        case("scalar body", Req::post("42"), 400, invalid),
        case("string body", Req::post("\"hi\""), 400, invalid),
        case("empty batch without session", Req::post("[]"), 400, invalid),
        case(
            "jsonrpc 1.0",
            Req::post(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#),
            400,
            invalid,
        )
        .id(json!(1)),
        case(
            "no jsonrpc",
            Req::post(r#"{"id":"a","method":"ping"}"#),
            400,
            invalid,
        )
        .id(json!("a")),
        case(
            "null id",
            Req::post(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            400,
            invalid,
        )
        .id(Value::Null),
        case(
            "fractional id",
            Req::post(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            400,
            invalid,
        )
        .id(Value::Null),
        case(
            "object id",
            Req::post(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#),
            400,
            invalid,
        )
        .id(Value::Null),
        case(
            "numeric method",
            Req::post(r#"{"jsonrpc":"2.0","id":3,"method":7}"#),
            400,
            invalid,
        )
        .id(json!(3)),
        case(
            "no method",
            Req::post(r#"{"jsonrpc":"2.0","id":3}"#),
            400,
            invalid,
        )
        .id(json!(3)),
        case(
            "method and result",
            Req::post(r#"{"jsonrpc":"2.0","id":3,"method":"ping","result":{}}"#),
            400,
            invalid,
        ),
        case(
            "duplicate member",
            Req::post(r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#),
            400,
            invalid,
        ),
        case(
            "request method as notification",
            Req::post(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add"}}"#),
            400,
            invalid,
        ),
    ];
    run(&ep, &toy, cases).await;
}

#[actix_rt::test]
async fn legacy_rules() {
    let toy = Toy::new();
    let ep = endpoint(toy.clone());
    let s0326 = open_session(&ep, "2025-03-26", "token-a").await;
    let s0618 = open_session(&ep, "2025-06-18", "token-a").await;
    let s1125 = open_session(&ep, "2025-11-25", "token-a").await;
    let in0326 = |v: &Value| Req::json(v).session(&s0326, "2025-03-26");
    let in0618 = |v: &Value| Req::json(v).session(&s0618, "2025-06-18");
    let in1125 = |v: &Value| Req::json(v).session(&s1125, "2025-11-25");
    let list = request(json!(5), "tools/list", json!({}));
    let no_client_info = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}});
    let bad_client_info = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x"}}});
    let no_caps = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","clientInfo":{"name":"x","version":"1"}}});
    let no_version = json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"capabilities":{},"clientInfo":{"name":"x","version":"1"}}});
    let params = Some(code::INVALID_PARAMS);
    let cases = vec![
        case(
            "initialize without clientInfo",
            Req::json(&no_client_info),
            200,
            params,
        )
        .id(json!(1)),
        case(
            "initialize clientInfo without version",
            Req::json(&bad_client_info),
            200,
            params,
        ),
        case(
            "initialize without capabilities",
            Req::json(&no_caps),
            200,
            params,
        ),
        case(
            "initialize without protocolVersion",
            Req::json(&no_version),
            200,
            params,
        ),
        case(
            "initialize with array params",
            Req::post(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":[]}"#),
            200,
            params,
        ),
        case(
            "request without session",
            Req::json(&list),
            400,
            Some(code::INVALID_REQUEST),
        )
        .id(json!(5)),
        case(
            "request with unknown session",
            Req::json(&list).header("mcp-session-id", "abc"),
            404,
            Some(code::INVALID_REQUEST),
        )
        .id(json!(5)),
        case(
            "request with forged session",
            Req::json(&list).header("mcp-session-id", &"A".repeat(s0618.len())),
            404,
            Some(code::INVALID_REQUEST),
        ),
        // The spec refuses only invalid or unsupported values; the
        // conformance suite sends 2025-03-26 inside 2025-11-25 sessions.
        case(
            "other supported header revision",
            in1125(&list).header("mcp-protocol-version", "2025-03-26"),
            200,
            None,
        ),
        case(
            "unsupported header revision",
            in0618(&list).header("mcp-protocol-version", "banana"),
            400,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "modern header on legacy session",
            in0618(&list).header("mcp-protocol-version", MODERN),
            400,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "no header assumes session revision",
            in0618(&list).without("mcp-protocol-version"),
            200,
            None,
        ),
        case("tools/list", in1125(&list), 200, None),
        case(
            "tools/list with foreign cursor",
            in1125(&request(json!(5), "tools/list", json!({"cursor": "x"}))),
            200,
            params,
        ),
        case(
            "ping",
            in0618(&request(json!(6), "ping", json!({}))),
            200,
            None,
        ),
        case(
            "setLevel",
            in0618(&request(
                json!(6),
                "logging/setLevel",
                json!({"level": "info"}),
            )),
            200,
            None,
        ),
        case(
            "setLevel bad level",
            in0618(&request(
                json!(6),
                "logging/setLevel",
                json!({"level": "loud"}),
            )),
            200,
            params,
        ),
        case(
            "unknown method",
            in0618(&request(json!(7), "resources/list", json!({}))),
            200,
            Some(code::METHOD_NOT_FOUND),
        )
        .id(json!(7)),
        case(
            "server/discover in a session",
            in0618(&request(json!(7), "server/discover", json!({}))),
            200,
            Some(code::METHOD_NOT_FOUND),
        ),
        case(
            "unknown tool",
            in0618(&legacy_call(8, "nope", json!({}))),
            200,
            params,
        )
        .id(json!(8)),
        case(
            "tool name missing",
            in0618(&request(json!(8), "tools/call", json!({"arguments": {}}))),
            200,
            params,
        ),
        case(
            "tool name not a string",
            in0618(&request(json!(8), "tools/call", json!({"name": 3}))),
            200,
            params,
        ),
        case(
            "arguments not an object",
            in0618(&request(
                json!(8),
                "tools/call",
                json!({"name": "add", "arguments": [1, 2]}),
            )),
            200,
            params,
        ),
        case(
            "_meta not an object",
            in0618(&request(
                json!(8),
                "tools/call",
                json!({"name": "add", "arguments": {"a": 1, "b": 2}, "_meta": 5}),
            )),
            200,
            params,
        ),
        case(
            "bad arguments before 2025-11-25 are -32602",
            in0618(&legacy_call(8, "add", json!({"a": "x", "b": 2}))),
            200,
            params,
        ),
        case(
            "missing argument before 2025-11-25",
            in0326(&legacy_call(8, "add", json!({"a": 1}))),
            200,
            params,
        ),
        case(
            "extra argument before 2025-11-25",
            in0618(&legacy_call(8, "add", json!({"a": 1, "b": 2, "c": 3}))),
            200,
            params,
        ),
        case(
            "integer out of range",
            in0618(&legacy_call(8, "add", json!({"a": 101, "b": 2}))),
            200,
            params,
        ),
        case(
            "null body in session",
            in0618(&Value::Null),
            400,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "notification in session",
            in0618(&json!({"jsonrpc":"2.0","method":"notifications/initialized"})),
            202,
            None,
        ),
        case(
            "notification without session",
            Req::json(&json!({"jsonrpc":"2.0","method":"notifications/initialized"})),
            400,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "response in session",
            in0618(&json!({"jsonrpc":"2.0","id":1,"result":{}})),
            202,
            None,
        ),
        case(
            "batch in 2025-06-18",
            in0618(&json!([request(json!(1), "ping", json!({}))])),
            400,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "batch without session",
            Req::json(&json!([request(json!(1), "ping", json!({}))])),
            400,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "empty batch in 2025-03-26",
            in0326(&json!([])),
            400,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "all-notification batch",
            in0326(&json!([{"jsonrpc":"2.0","method":"notifications/initialized"}])),
            202,
            None,
        ),
    ];
    run(&ep, &toy, cases).await;
}

#[actix_rt::test]
async fn legacy_argument_depth_is_bounded() {
    let toy = Toy::new();
    let ep = endpoint(toy.clone());
    let session = open_session(&ep, "2025-11-25", "token-a").await;
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"add","arguments":{{"a":{}1{}}}}}}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let reply = call(&ep, &Req::post(deep).session(&session, "2025-11-25")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.code(), Some(code::INVALID_PARAMS), "{}", reply.json);
    assert_eq!(toy.calls(), 0);
}

#[actix_rt::test]
async fn modern_rules() {
    let toy = Toy::new();
    let ep = endpoint(toy.clone());
    let discover = modern(json!(1), "server/discover", json!({}));
    let echo = modern(
        json!(2),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    let mut no_meta = request(json!(3), "server/discover", json!({}));
    let mut no_caps = discover.clone();
    no_caps["params"]["_meta"]
        .as_object_mut()
        .map(|m| m.remove(CAPS_KEY));
    let mut caps_not_object = discover.clone();
    caps_not_object["params"]["_meta"][CAPS_KEY] = json!([]);
    let mut bad_client_info = discover.clone();
    bad_client_info["params"]["_meta"]["io.modelcontextprotocol/clientInfo"] = json!({"name": "x"});
    let mut future = discover.clone();
    future["params"]["_meta"][PV_KEY] = json!("2099-01-01");
    let mut legacy_in_meta = discover.clone();
    legacy_in_meta["params"]["_meta"][PV_KEY] = json!("2025-11-25");
    let mut pv_number = discover.clone();
    pv_number["params"]["_meta"][PV_KEY] = json!(20260728);
    no_meta["params"] = json!({});
    let mismatch = Some(code::HEADER_MISMATCH);
    let params = Some(code::INVALID_PARAMS);
    let base64_name = format!("=?base64?{}?=", "ZWNobw==");
    let cases = vec![
        case("discover", modern_req(&discover), 200, None),
        case(
            "discover without modern headers fails header check",
            Req::json(&discover),
            400,
            mismatch,
        )
        .id(json!(1)),
        case(
            "discover without _meta (modern header)",
            Req::json(&no_meta)
                .header("mcp-protocol-version", MODERN)
                .header("mcp-method", "server/discover"),
            400,
            params,
        )
        .id(json!(3)),
        case(
            "discover without _meta (no header)",
            Req::json(&no_meta),
            400,
            params,
        ),
        case(
            "missing clientCapabilities",
            modern_req(&no_caps),
            400,
            params,
        ),
        case(
            "clientCapabilities not an object",
            modern_req(&caps_not_object),
            400,
            params,
        ),
        case(
            "clientInfo without version",
            modern_req(&bad_client_info),
            400,
            params,
        ),
        case(
            "protocol version header missing",
            modern_req(&discover).without("mcp-protocol-version"),
            400,
            mismatch,
        ),
        case(
            "protocol version header differs",
            modern_req(&discover).header("mcp-protocol-version", "2025-11-25"),
            400,
            mismatch,
        ),
        case(
            "Mcp-Method missing",
            modern_req(&discover).without("mcp-method"),
            400,
            mismatch,
        ),
        case(
            "Mcp-Method differs",
            modern_req(&discover).header("mcp-method", "tools/list"),
            400,
            mismatch,
        ),
        case(
            "Mcp-Name missing",
            modern_req(&echo).without("mcp-name"),
            400,
            mismatch,
        )
        .id(json!(2)),
        case(
            "Mcp-Name differs",
            modern_req(&echo).header("mcp-name", "add"),
            400,
            mismatch,
        ),
        case(
            "Mcp-Name base64 sentinel",
            modern_req(&echo).header("mcp-name", &base64_name),
            200,
            None,
        ),
        case(
            "unsupported version",
            modern_req(&future).header("mcp-protocol-version", "2099-01-01"),
            400,
            Some(code::UNSUPPORTED_PROTOCOL_VERSION),
        ),
        case(
            "legacy version in _meta",
            modern_req(&legacy_in_meta).header("mcp-protocol-version", "2025-11-25"),
            400,
            Some(code::UNSUPPORTED_PROTOCOL_VERSION),
        ),
        case(
            "version not a string",
            modern_req(&pv_number),
            400,
            mismatch,
        ),
        case(
            "ping removed",
            modern_req(&modern(json!(4), "ping", json!({}))),
            404,
            Some(code::METHOD_NOT_FOUND),
        )
        .id(json!(4)),
        case(
            "setLevel removed",
            modern_req(&modern(
                json!(4),
                "logging/setLevel",
                json!({"level": "info"}),
            )),
            404,
            Some(code::METHOD_NOT_FOUND),
        ),
        case(
            "unknown method",
            modern_req(&modern(json!("x"), "resources/list", json!({}))),
            404,
            Some(code::METHOD_NOT_FOUND),
        )
        .id(json!("x")),
        case(
            "tools/list",
            modern_req(&modern(json!(5), "tools/list", json!({}))),
            200,
            None,
        ),
        case(
            "unknown tool",
            modern_req(&modern(json!(6), "tools/call", json!({"name": "nope"}))),
            400,
            params,
        )
        .id(json!(6)),
        case(
            "tool name missing",
            modern_req(&modern(json!(6), "tools/call", json!({}))).header("mcp-name", "x"),
            400,
            params,
        ),
        case(
            "arguments not an object",
            modern_req(&modern(
                json!(6),
                "tools/call",
                json!({"name": "echo", "arguments": "x"}),
            )),
            400,
            params,
        ),
        case(
            "batch",
            Req::json(&json!([discover.clone()])).modern_headers(&discover),
            400,
            Some(code::INVALID_REQUEST),
        ),
        case(
            "stale session header is ignored",
            modern_req(&discover).header("mcp-session-id", "garbage"),
            200,
            None,
        ),
        case(
            "notification",
            Req::json(
                &json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"_meta":{PV_KEY: MODERN, CAPS_KEY: {}}}}),
            ),
            202,
            None,
        ),
        case(
            "DELETE",
            Req::post("")
                .method(Method::DELETE)
                .header("mcp-protocol-version", MODERN),
            405,
            Some(code::INVALID_REQUEST),
        ),
    ];
    run(&ep, &toy, cases).await;

    let reply = call(
        &ep,
        &modern_req(&future).header("mcp-protocol-version", "2099-01-01"),
    )
    .await;
    assert_eq!(
        reply.json["error"]["data"],
        json!({"supported": [MODERN], "requested": "2099-01-01"})
    );
    assert_eq!(reply.json["id"], json!(1));
}

#[actix_rt::test]
async fn stdio_style_modern_requests_need_no_headers_but_http_does() {
    // The same body is fine without headers on stdio (see stdio tests) but
    // over HTTP the mirrored headers are mandatory.
    let toy = Toy::new();
    let ep = endpoint(toy.clone());
    let list = modern(json!(1), "tools/list", json!({}));
    assert_eq!(
        call(&ep, &Req::json(&list)).await.code(),
        Some(code::HEADER_MISMATCH)
    );
    assert_eq!(
        call(&ep, &Req::json(&list).modern_headers(&list))
            .await
            .status,
        200
    );
}
