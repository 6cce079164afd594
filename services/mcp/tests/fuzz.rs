//! Property tests: arbitrary bytes and arbitrary JSON (deeply nested too)
//! never panic the endpoint and always get a well-formed JSON-RPC answer
//! with a sensible status.

use crate::common;

use actix_web::{App, test as actix_test};
use common::*;
use corkboard_mcp::{
    Context, Engine, HeaderSlot, Outcome, RequestHeaders, Revision, SessionRejection, SessionState,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Map, Value, json};

fn config(cases: u32) -> Config {
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(Value::from),
        ".{0,12}".prop_map(Value::String),
        prop_oneof![
            Just("2.0"),
            Just("tools/call"),
            Just("tools/list"),
            Just("initialize"),
            Just("ping"),
            Just("server/discover"),
            Just("echo"),
            Just("add"),
            Just("2026-07-28"),
            Just("2025-03-26"),
            Just("2025-11-25"),
            Just("notifications/initialized"),
        ]
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(8, 96, 6, |inner| {
        let keys = prop_oneof![
            Just("jsonrpc".to_owned()),
            Just("id".to_owned()),
            Just("method".to_owned()),
            Just("params".to_owned()),
            Just("name".to_owned()),
            Just("arguments".to_owned()),
            Just("_meta".to_owned()),
            Just("text".to_owned()),
            Just("a".to_owned()),
            Just("b".to_owned()),
            Just("protocolVersion".to_owned()),
            Just("capabilities".to_owned()),
            Just("clientInfo".to_owned()),
            Just("result".to_owned()),
            Just(PV_KEY.to_owned()),
            Just(CAPS_KEY.to_owned()),
            "[a-z]{1,4}",
        ];
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(keys, inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Values shaped like MCP messages, so the deeper handlers are reached.
fn message_like() -> impl Strategy<Value = Value> {
    let method = prop_oneof![
        Just("initialize"),
        Just("ping"),
        Just("tools/list"),
        Just("tools/call"),
        Just("server/discover"),
        Just("logging/setLevel"),
        Just("notifications/initialized"),
        Just("bogus"),
    ];
    let id = prop_oneof![
        Just(json!(1)),
        Just(json!("x")),
        Just(Value::Null),
        Just(json!(1.5))
    ];
    (method, id, json_value(), json_value(), any::<bool>(), any::<bool>()).prop_map(
        |(method, id, args, extra, with_meta, with_id)| {
            let mut params = json!({"name": "echo", "arguments": args, "extra": extra,
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "f", "version": "1"}});
            if with_meta {
                params["_meta"] = json!({PV_KEY: MODERN, CAPS_KEY: {}});
            }
            let mut message = json!({"jsonrpc": "2.0", "method": method, "params": params});
            if with_id {
                message["id"] = id;
            }
            message
        },
    )
}

fn deep(depth: usize, object: bool) -> Vec<u8> {
    let (open, close) = if object { ("{\"a\":", "}") } else { ("[", "]") };
    format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"echo","arguments":{{"text":{}1{}}}}}}}"#,
        open.repeat(depth),
        close.repeat(depth)
    )
    .into_bytes()
}

/// A response object: `jsonrpc`, an `id`, exactly one of result/error.
fn check_message(message: &Value) -> Result<bool, String> {
    let object = message.as_object().ok_or("response is not an object")?;
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Err("missing jsonrpc 2.0".into());
    }
    if !object.contains_key("id") {
        return Err("missing id".into());
    }
    match (object.get("result"), object.get("error")) {
        (Some(result), None) if result.is_object() => Ok(false),
        (None, Some(error)) => {
            if error["code"].as_i64().is_none() || !error["message"].is_string() {
                return Err(format!("malformed error {error}"));
            }
            Ok(true)
        }
        _ => Err("needs exactly one of result and error".into()),
    }
}

fn check_answer(status: u16, body: Option<&[u8]>) -> Result<(), String> {
    if ![200, 202, 400, 404].contains(&status) {
        return Err(format!("unexpected status {status}"));
    }
    let Some(body) = body.filter(|b| !b.is_empty()) else {
        return if status == 202 {
            Ok(())
        } else {
            Err(format!("status {status} without a body"))
        };
    };
    if status == 202 {
        return Err("202 with a body".into());
    }
    if body.contains(&b'\n') {
        return Err("raw newline in a message".into());
    }
    let value: Value =
        serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?;
    let errors = match &value {
        Value::Array(items) if !items.is_empty() => {
            let mut all_errors = true;
            for item in items {
                all_errors &= check_message(item)?;
            }
            all_errors
        }
        other => check_message(other)?,
    };
    if status >= 400 && !errors {
        return Err(format!("status {status} with a result"));
    }
    Ok(())
}

fn contexts() -> Vec<(SessionState, Option<RequestHeaders>)> {
    let modern_headers = RequestHeaders {
        protocol_version: HeaderSlot::Present(MODERN.into()),
        method: HeaderSlot::Present("tools/call".into()),
        name: HeaderSlot::Present("echo".into()),
        params: Vec::new(),
    };
    let malformed = RequestHeaders {
        protocol_version: HeaderSlot::Malformed,
        method: HeaderSlot::Malformed,
        name: HeaderSlot::Absent,
        params: Vec::new(),
    };
    let mut out = Vec::new();
    for session in [
        SessionState::Missing,
        SessionState::Active(Revision::V2025_03_26),
        SessionState::Active(Revision::V2025_11_25),
        SessionState::Rejected(SessionRejection::Expired),
    ] {
        out.push((session, None));
        out.push((session, Some(modern_headers.clone())));
        out.push((session, Some(malformed.clone())));
    }
    out
}

fn engine_check(
    rt: &tokio::runtime::Runtime,
    engine: &Engine<Toy>,
    bytes: &[u8],
) -> Result<(), TestCaseError> {
    let principal = ToyPrincipal {
        grant: "grant-a".into(),
        limited: false,
    };
    for (session, headers) in contexts() {
        let ctx = Context {
            principal: &principal,
            session,
            headers: headers.as_ref(),
            peer: None,
        };
        let outcome: Outcome = rt.block_on(engine.handle_message(&ctx, bytes));
        check_answer(outcome.status, outcome.body.as_deref()).map_err(|e| {
            TestCaseError::fail(format!(
                "{e} (session {session:?}) for input {}",
                String::from_utf8_lossy(bytes)
            ))
        })?;
    }
    Ok(())
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
}

#[test]
fn engine_survives_arbitrary_bytes() {
    let rt = runtime();
    let engine = Engine::new(Toy::new());
    let mut runner = TestRunner::new(config(256));
    let result = runner.run(&prop::collection::vec(any::<u8>(), 0..300), |bytes| {
        engine_check(&rt, &engine, &bytes)
    });
    assert!(result.is_ok(), "{result:?}");
}

#[test]
fn engine_survives_arbitrary_json() {
    let rt = runtime();
    let engine = Engine::new(Toy::new());
    let mut runner = TestRunner::new(config(384));
    let strategy = prop_oneof![json_value(), message_like()];
    let result = runner.run(&strategy, |value| {
        engine_check(&rt, &engine, value.to_string().as_bytes())
    });
    assert!(result.is_ok(), "{result:?}");
}

#[test]
fn engine_survives_deep_nesting() {
    let rt = runtime();
    let engine = Engine::new(Toy::new());
    for depth in [1, 100, 127, 128, 129, 1_000, 50_000] {
        for object in [false, true] {
            let result = engine_check(&rt, &engine, &deep(depth, object));
            assert!(result.is_ok(), "depth {depth}: {result:?}");
        }
    }
    let brackets = "[".repeat(200_000).into_bytes();
    assert!(engine_check(&rt, &engine, &brackets).is_ok());
    let balanced = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)).into_bytes();
    assert!(engine_check(&rt, &engine, &balanced).is_ok());
}

#[test]
fn http_endpoint_survives_arbitrary_input() {
    let system = actix_rt::System::new();
    let ep = endpoint(Toy::new());
    let session = system.block_on(open_session(&ep, "2025-03-26", "token-a"));
    let app = system.block_on(actix_test::init_service(
        App::new().configure(|cfg| ep.configure(cfg)),
    ));
    let mut runner = TestRunner::new(config(192));
    let input = prop_oneof![
        prop::collection::vec(any::<u8>(), 0..200),
        json_value().prop_map(|v| v.to_string().into_bytes()),
        message_like().prop_map(|v| v.to_string().into_bytes()),
    ];
    let result = runner.run(&(input, 0..3usize), |(bytes, flavour)| {
        let req = match flavour {
            0 => Req::post(bytes.clone()),
            1 => Req::post(bytes.clone()).session(&session, "2025-03-26"),
            _ => Req::post(bytes.clone())
                .header("mcp-protocol-version", MODERN)
                .header("mcp-method", "tools/call"),
        };
        let reply = system.block_on(async {
            let resp = actix_test::call_service(&app, to_test_request(&req).to_request()).await;
            read_reply(resp).await
        });
        let body = (!reply.raw.is_empty()).then_some(reply.raw.as_slice());
        check_answer(reply.status, body).map_err(|e| {
            TestCaseError::fail(format!("{e} for {}", String::from_utf8_lossy(&bytes)))
        })
    });
    assert!(result.is_ok(), "{result:?}");
}
