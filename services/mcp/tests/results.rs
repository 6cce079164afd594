//! What well-formed exchanges get back, per revision: results pass the
//! checks unchanged, fields a revision lacks are absent, malformed results
//! never leave.

use crate::common;

use actix_web::{App, test};
use common::*;
use corkboard_mcp::{ServerIdentity, ToolDef, code};
use serde_json::{Value, json};

fn tool<'a>(list: &'a Value, name: &str) -> &'a Value {
    list["result"]["tools"]
        .as_array()
        .and_then(|tools| tools.iter().find(|t| t["name"] == name))
        .unwrap_or_else(|| panic!("no tool {name} in {list}"))
}

#[actix_rt::test]
async fn initialize_negotiates_and_identifies() {
    let ep = endpoint(Toy::new());
    for (asked, answered) in [
        ("2025-03-26", "2025-03-26"),
        ("2025-06-18", "2025-06-18"),
        ("2025-11-25", "2025-11-25"),
        ("2024-11-05", "2025-11-25"),
        ("2026-07-28", "2025-11-25"),
    ] {
        let reply = call(&ep, &Req::json(&initialize_body(asked))).await;
        assert_eq!(reply.status, 200);
        let result = &reply.json["result"];
        assert_eq!(result["protocolVersion"], answered, "asked {asked}");
        assert_eq!(result["serverInfo"]["name"], "toy");
        assert_eq!(result["serverInfo"]["version"], "1.2.3");
        assert_eq!(
            result["serverInfo"].get("title").is_some(),
            answered != "2025-03-26"
        );
        assert_eq!(
            result["capabilities"]["tools"],
            json!({"listChanged": false})
        );
        assert_eq!(result["instructions"], "Use echo.");
        assert!(
            result.get("resultType").is_none(),
            "no resultType before 2026-07-28"
        );
        let session = reply.header("mcp-session-id").unwrap_or_default();
        assert!(!session.is_empty() && session.bytes().all(|b| (0x21..=0x7e).contains(&b)));
    }
}

#[actix_rt::test]
async fn ids_are_echoed_exactly() {
    let ep = endpoint(Toy::new());
    for id in [
        r#""abc""#,
        r#""\u00e9""#,
        "0",
        "-3",
        "123456789012345678901234567890",
    ] {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
        );
        let reply = call(&ep, &Req::post(body)).await;
        let text = String::from_utf8_lossy(&reply.raw);
        assert!(
            text.contains(&format!("\"id\":{id},")),
            "id {id} not echoed verbatim: {text}"
        );
    }
}

#[actix_rt::test]
async fn tools_list_per_revision() {
    let ep = endpoint(Toy::new());
    let list = request(json!(1), "tools/list", json!({}));
    let s0326 = open_session(&ep, "2025-03-26", "token-a").await;
    let old = call(&ep, &Req::json(&list).session(&s0326, "2025-03-26"))
        .await
        .json;
    let echo = tool(&old, "echo");
    assert!(
        echo.get("outputSchema").is_none() && echo.get("title").is_none(),
        "{echo}"
    );
    assert_eq!(echo["annotations"], json!({"readOnlyHint": true}));
    assert_eq!(echo["inputSchema"]["type"], "object");

    let s0618 = open_session(&ep, "2025-06-18", "token-a").await;
    let mid = call(&ep, &Req::json(&list).session(&s0618, "2025-06-18"))
        .await
        .json;
    let echo = tool(&mid, "echo");
    assert_eq!(echo["title"], "Echo");
    assert_eq!(echo["outputSchema"]["type"], "object");
    assert!(mid["result"].get("ttlMs").is_none());

    let body = modern(json!(1), "tools/list", json!({}));
    let new = call(&ep, &Req::json(&body).modern_headers(&body))
        .await
        .json;
    let result = &new["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["cacheScope"], "private");
    assert!(result["ttlMs"].as_u64().is_some());
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["version"],
        "1.2.3"
    );
    assert_eq!(result["tools"].as_array().map(Vec::len), Some(5));
    let limited = call(
        &ep,
        &Req::json(&body)
            .modern_headers(&body)
            .header("authorization", "Bearer limited"),
    )
    .await;
    assert_eq!(
        limited.json["result"]["tools"].as_array().map(Vec::len),
        Some(1)
    );
}

#[actix_rt::test]
async fn discover_result() {
    let ep = endpoint(Toy::new());
    let body = modern(json!(1), "server/discover", json!({}));
    let reply = call(&ep, &Req::json(&body).modern_headers(&body)).await;
    let result = &reply.json["result"];
    assert_eq!(result["supportedVersions"], json!([MODERN]));
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["cacheScope"], "public");
    assert_eq!(result["instructions"], "Use echo.");
    assert_eq!(
        result["capabilities"],
        json!({"tools": {"listChanged": false}})
    );
    assert_eq!(
        result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "toy"
    );
    // Later calls answer the result rendered at the first, under their
    // own id.
    let again = modern(json!("again"), "server/discover", json!({}));
    let second = call(&ep, &Req::json(&again).modern_headers(&again)).await;
    assert_eq!(second.json["id"], "again");
    assert_eq!(&second.json["result"], result);
}

#[actix_rt::test]
async fn tool_calls_per_revision() {
    let toy = Toy::new();
    let ep = endpoint(toy.clone());
    let echo = request(
        json!(1),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );

    let s0326 = open_session(&ep, "2025-03-26", "token-a").await;
    let r = call(&ep, &Req::json(&echo).session(&s0326, "2025-03-26"))
        .await
        .json;
    assert_eq!(
        r["result"]["content"],
        json!([{"type": "text", "text": "{\"echo\":\"hi\"}"}])
    );
    assert!(r["result"].get("structuredContent").is_none());
    assert_eq!(r["result"]["isError"], false);

    let s0618 = open_session(&ep, "2025-06-18", "token-a").await;
    let r = call(&ep, &Req::json(&echo).session(&s0618, "2025-06-18"))
        .await
        .json;
    assert_eq!(r["result"]["structuredContent"], json!({"echo": "hi"}));
    assert_eq!(r["result"]["content"][0]["text"], "{\"echo\":\"hi\"}");

    let body = modern(
        json!(1),
        "tools/call",
        json!({"name": "echo", "arguments": {"text": "hi"}}),
    );
    let r = call(&ep, &Req::json(&body).modern_headers(&body))
        .await
        .json;
    assert_eq!(r["result"]["structuredContent"], json!({"echo": "hi"}));
    assert_eq!(r["result"]["resultType"], "complete");
    assert_eq!(toy.calls(), 3);

    let add = request(
        json!(2),
        "tools/call",
        json!({"name": "add", "arguments": {"a": 2, "b": 40}}),
    );
    let r = call(&ep, &Req::json(&add).session(&s0618, "2025-06-18"))
        .await
        .json;
    assert_eq!(r["result"]["content"][0]["text"], "42");
    assert!(r["result"].get("structuredContent").is_none());

    let fail = request(json!(3), "tools/call", json!({"name": "fail"}));
    let r = call(&ep, &Req::json(&fail).session(&s0618, "2025-06-18"))
        .await
        .json;
    assert_eq!(r["result"]["isError"], true);
    assert_eq!(
        r["result"]["content"][0]["text"],
        "board unavailable: try again"
    );
}

#[actix_rt::test]
async fn argument_errors_are_tool_errors_from_2025_11_25() {
    let toy = Toy::new();
    let ep = endpoint(toy.clone());
    let s1125 = open_session(&ep, "2025-11-25", "token-a").await;
    for (args, field) in [
        (json!({"text": ""}), "`text` must be at least 1"),
        (json!({}), "`text` is required"),
        (json!({"text": 5}), "`text` must be a string, got integer"),
        (
            json!({"text": "x", "more": 1}),
            "`more` is not accepted (allowed: text)",
        ),
    ] {
        let body = request(
            json!(1),
            "tools/call",
            json!({"name": "echo", "arguments": args}),
        );
        let r = call(&ep, &Req::json(&body).session(&s1125, "2025-11-25")).await;
        assert_eq!(r.status, 200);
        assert_eq!(r.json["result"]["isError"], true, "{}", r.json);
        assert!(r.json["result"].get("structuredContent").is_none());
        let text = r.json["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(text.contains(field) && text.contains("echo"), "{text}");

        let body = modern(
            json!(1),
            "tools/call",
            json!({"name": "echo", "arguments": args}),
        );
        let r = call(&ep, &Req::json(&body).modern_headers(&body)).await;
        assert_eq!(
            (r.status, &r.json["result"]["isError"]),
            (200, &json!(true)),
            "{}",
            r.json
        );
    }
    assert_eq!(toy.calls(), 0, "no tool ran for invalid arguments");
}

#[actix_rt::test]
async fn malformed_results_never_leave() {
    let toy = Toy::new();
    let ep = endpoint(toy.clone());
    let s0618 = open_session(&ep, "2025-06-18", "token-a").await;
    for name in ["bad_output", "boom"] {
        let body = request(json!(1), "tools/call", json!({"name": name}));
        let r = call(&ep, &Req::json(&body).session(&s0618, "2025-06-18")).await;
        assert_eq!(
            (r.status, r.code()),
            (200, Some(code::INTERNAL_ERROR)),
            "{name}: {}",
            r.json
        );
        assert_eq!(r.json["id"], 1);
    }
    // 2025-03-26 has no structuredContent: bad_output's text is fine there.
    let s0326 = open_session(&ep, "2025-03-26", "token-a").await;
    let body = request(json!(1), "tools/call", json!({"name": "bad_output"}));
    let r = call(&ep, &Req::json(&body).session(&s0326, "2025-03-26")).await;
    assert_eq!(r.json["result"]["content"][0]["text"], "x");

    let nameless = ServerIdentity {
        version: String::new(),
        ..identity()
    };
    let ep = endpoint(Toy::with(nameless, toy_tools()));
    let r = call(&ep, &Req::json(&initialize_body("2025-06-18"))).await;
    assert_eq!(r.code(), Some(code::INTERNAL_ERROR));
    assert!(
        r.header("mcp-session-id").is_none(),
        "no session for a failed initialize"
    );
    let body = modern(json!(1), "server/discover", json!({}));
    assert_eq!(
        call(&ep, &Req::json(&body).modern_headers(&body))
            .await
            .code(),
        Some(code::INTERNAL_ERROR)
    );

    let mut tools = toy_tools();
    tools.push(ToolDef {
        name: "bad name".into(),
        ..echo_tool()
    });
    let ep = endpoint(Toy::with(identity(), tools));
    let body = modern(json!(1), "tools/list", json!({}));
    let r = call(&ep, &Req::json(&body).modern_headers(&body)).await;
    assert_eq!(r.code(), Some(code::INTERNAL_ERROR), "{}", r.json);

    let mut tools = toy_tools();
    tools[1].input_schema = json!({"type": "string"});
    let ep = endpoint(Toy::with(identity(), tools));
    let r = call(&ep, &Req::json(&body).modern_headers(&body)).await;
    assert_eq!(r.code(), Some(code::INTERNAL_ERROR), "{}", r.json);
}

#[actix_rt::test]
async fn batches_in_2025_03_26() {
    let toy = Toy::new();
    let ep = endpoint(toy.clone());
    let s0326 = open_session(&ep, "2025-03-26", "token-a").await;
    let batch = json!([
        request(json!(1), "ping", json!({})),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        request(json!(2), "tools/call", json!({"name": "add", "arguments": {"a": 1, "b": 2}})),
        initialize_body("2025-03-26"),
        {"jsonrpc": "1.0", "id": 4, "method": "ping"},
        7
    ]);
    let r = call(&ep, &Req::json(&batch).session(&s0326, "2025-03-26")).await;
    assert_eq!(r.status, 200);
    let replies = r.json.as_array().cloned().unwrap_or_default();
    assert_eq!(replies.len(), 5, "{}", r.json);
    assert_eq!(replies[0], json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    assert_eq!(replies[1]["result"]["content"][0]["text"], "3");
    assert_eq!(
        (
            replies[2]["id"].clone(),
            replies[2]["error"]["code"].clone()
        ),
        (json!(0), json!(code::INVALID_REQUEST))
    );
    assert_eq!(
        (
            replies[3]["id"].clone(),
            replies[3]["error"]["code"].clone()
        ),
        (json!(4), json!(code::INVALID_REQUEST))
    );
    assert_eq!(
        (
            replies[4]["id"].clone(),
            replies[4]["error"]["code"].clone()
        ),
        (Value::Null, json!(code::INVALID_REQUEST))
    );
    assert_eq!(toy.calls(), 1);
}

#[actix_rt::test]
async fn sse_when_preferred_and_concurrent_streams() {
    let ep = endpoint(Toy::new());
    let session = open_session(&ep, "2025-11-25", "token-a").await;
    let app = test::init_service(App::new().configure(|cfg| ep.configure(cfg))).await;
    // What the conformance scenario server-sse-multiple-streams sends: three
    // concurrent POSTs preferring SSE, with a hard-coded 2025-03-26
    // protocol header inside a 2025-11-25 session.
    let reqs = (0..3).map(|i| {
        let body = request(json!(1000 + i), "tools/list", json!({}));
        to_test_request(
            &Req::json(&body)
                .session(&session, "2025-03-26")
                .header("accept", "text/event-stream, application/json"),
        )
        .to_request()
    });
    let responses =
        futures_util::future::join_all(reqs.map(|req| test::call_service(&app, req))).await;
    for (i, resp) in responses.into_iter().enumerate() {
        let reply = read_reply(resp).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.content_type(), "text/event-stream");
        assert_eq!(reply.header("x-accel-buffering").as_deref(), Some("no"));
        let text = String::from_utf8_lossy(&reply.raw).into_owned();
        assert!(
            text.starts_with("event: message\ndata: {") && text.ends_with("}\n\n"),
            "{text}"
        );
        assert_eq!(
            text.matches('\n').count(),
            3,
            "one event, no raw newline in data"
        );
        assert_eq!(reply.json["id"], json!(1000 + i as i64));
        assert!(reply.json["result"]["tools"].is_array());
    }
    // The SDK clients' order asks for JSON.
    let body = request(json!(1), "ping", json!({}));
    let r = call(&ep, &Req::json(&body).session(&session, "2025-11-25")).await;
    assert_eq!(r.content_type(), "application/json");
    // Errors with an HTTP error status are always JSON.
    let r = call(
        &ep,
        &Req::json(&body).header("accept", "text/event-stream, application/json"),
    )
    .await;
    assert_eq!(
        (r.status, r.content_type().as_str()),
        (400, "application/json")
    );
}

#[actix_rt::test]
async fn configure_at_serves_any_path() {
    let ep = endpoint(Toy::new());
    let app =
        test::init_service(App::new().configure(|cfg| ep.configure_at(cfg, "/runs/{run}/mcp")))
            .await;
    let body = modern(json!(1), "server/discover", json!({}));
    let req = to_test_request(&Req::json(&body).modern_headers(&body))
        .uri("/runs/r1/mcp")
        .to_request();
    let reply = read_reply(test::call_service(&app, req).await).await;
    assert_eq!(reply.status, 200, "{}", reply.json);
}
