//! The stdio transport over in-memory pipes: malformed lines get errors
//! and serving continues; EOF and a closed output end cleanly.

use crate::common;

use common::*;
use corkboard_mcp::{AuthRejection, Engine, StdioOptions, code, serve_stdio};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

fn principal() -> ToyPrincipal {
    ToyPrincipal {
        grant: "grant-a".into(),
        limited: false,
    }
}

/// Feeds `input` (already newline-framed) and returns the output lines.
async fn run(
    input: &str,
    principal: Result<ToyPrincipal, AuthRejection>,
    options: StdioOptions,
) -> Vec<Value> {
    let engine = Engine::new(Toy::new());
    let mut output = Vec::new();
    let served = tokio::time::timeout(
        GENEROUS,
        serve_stdio(
            &engine,
            principal,
            options,
            BufReader::new(input.as_bytes()),
            &mut output,
        ),
    )
    .await;
    assert!(matches!(served, Ok(Ok(()))), "serve_stdio: {served:?}");
    let text = String::from_utf8(output).unwrap_or_default();
    assert!(text.is_empty() || text.ends_with('\n'));
    text.lines()
        .map(|line| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("non-JSON output line {line:?}: {e}"))
        })
        .collect()
}

fn line(value: &Value) -> String {
    format!("{value}\n")
}

#[actix_rt::test]
async fn legacy_session_over_stdio() {
    let input = [
        line(&request(json!(1), "tools/list", json!({}))),
        line(&initialize_body("2025-06-18")),
        line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
        line(&request(
            json!(2),
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi"}}),
        )),
        line(&request(json!(3), "ping", json!({}))),
    ]
    .concat();
    let out = run(&input, Ok(principal()), StdioOptions::default()).await;
    assert_eq!(out.len(), 4, "{out:?}");
    assert_eq!(
        (out[0]["id"].clone(), out[0]["error"]["code"].clone()),
        (json!(1), json!(code::INVALID_REQUEST))
    );
    assert_eq!(out[1]["result"]["protocolVersion"], "2025-06-18");
    assert_eq!(out[2]["result"]["structuredContent"], json!({"echo": "hi"}));
    assert_eq!(out[3], json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
}

#[actix_rt::test]
async fn modern_requests_rely_on_meta_only() {
    let input = [
        line(&modern(json!(1), "server/discover", json!({}))),
        line(&modern(
            json!(2),
            "tools/call",
            json!({"name": "add", "arguments": {"a": 1, "b": 1}}),
        )),
        line(&request(json!(3), "server/discover", json!({}))),
    ]
    .concat();
    let out = run(&input, Ok(principal()), StdioOptions::default()).await;
    assert_eq!(out[0]["result"]["supportedVersions"], json!([MODERN]));
    assert_eq!(out[1]["result"]["content"][0]["text"], "2");
    assert_eq!(out[2]["error"]["code"], code::INVALID_PARAMS);
}

#[actix_rt::test]
async fn malformed_lines_get_errors_and_serving_continues() {
    let long = format!("{}\n", "x".repeat(500));
    let input = [
        "{not json\n".to_owned(),
        "\n".to_owned(),
        "   \r\n".to_owned(),
        "42\n".to_owned(),
        long,
        "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"bogus\"}\r\n".to_owned(),
        line(&modern(json!(5), "ping", json!({}))),
        // A final line without a newline is still a message.
        modern(json!(6), "server/discover", json!({})).to_string(),
    ]
    .concat();
    let out = run(
        &input,
        Ok(principal()),
        StdioOptions {
            max_line_bytes: 400,
        },
    )
    .await;
    let codes: Vec<Value> = out.iter().map(|m| m["error"]["code"].clone()).collect();
    assert_eq!(
        codes,
        vec![
            json!(code::PARSE_ERROR),
            json!(code::INVALID_REQUEST),
            json!(code::INVALID_REQUEST),
            json!(code::INVALID_REQUEST),
            json!(code::METHOD_NOT_FOUND),
            Value::Null,
        ],
        "{out:?}"
    );
    // No `initialize` yet and no `_meta`: a legacy request without a session.
    assert_eq!(out[3]["id"], 9);
    assert_eq!(out[5]["id"], 6);
}

#[actix_rt::test]
async fn refused_credential_answers_every_request() {
    let input = [
        line(&initialize_body("2025-06-18")),
        line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
        line(&modern(json!("m"), "tools/list", json!({}))),
        "garbage\n".to_owned(),
    ]
    .concat();
    let out = run(
        &input,
        Err(AuthRejection::Refused("run token revoked".into())),
        StdioOptions::default(),
    )
    .await;
    assert_eq!(out.len(), 3, "notifications get nothing: {out:?}");
    assert_eq!(out[0]["id"], 0);
    assert_eq!(out[1]["id"], "m");
    assert_eq!(out[2]["id"], Value::Null);
    for message in &out {
        assert!(
            message["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("run token revoked")),
            "{message}"
        );
    }
}

/// An output that keeps each write apart.
#[derive(Default)]
struct Writes(Vec<Vec<u8>>);

impl tokio::io::AsyncWrite for Writes {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.0.push(buf.to_vec());
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[actix_rt::test]
async fn each_message_goes_out_in_one_write_with_its_newline() {
    let input = [
        line(&initialize_body("2025-06-18")),
        line(&request(json!(1), "tools/list", json!({}))),
        "not json\n".to_owned(),
    ]
    .concat();
    let engine = Engine::new(Toy::new());
    let mut writes = Writes::default();
    serve_stdio(
        &engine,
        Ok(principal()),
        StdioOptions::default(),
        BufReader::new(input.as_bytes()),
        &mut writes,
    )
    .await
    .unwrap();
    assert_eq!(writes.0.len(), 3, "three answers, a write each");
    for write in &writes.0 {
        let text = std::str::from_utf8(write).unwrap();
        let message = text.strip_suffix('\n').expect("ends with its newline");
        assert!(!message.contains('\n'));
        serde_json::from_str::<Value>(message).expect("one whole message");
    }
}

#[actix_rt::test]
async fn eof_ends_cleanly_with_no_output() {
    assert!(
        run("", Ok(principal()), StdioOptions::default())
            .await
            .is_empty()
    );
}

#[actix_rt::test]
async fn closed_output_ends_without_panic() {
    let engine = Engine::new(Toy::new());
    let (client_in, server_out) = tokio::io::duplex(64);
    drop(client_in);
    let input = line(&initialize_body("2025-06-18"));
    let served = tokio::time::timeout(
        GENEROUS,
        serve_stdio(
            &engine,
            Ok(principal()),
            StdioOptions::default(),
            BufReader::new(input.as_bytes()),
            server_out,
        ),
    )
    .await;
    assert!(matches!(served, Ok(Ok(()))), "{served:?}");
}

#[actix_rt::test]
async fn interleaved_over_a_real_pipe() {
    let engine = Engine::new(Toy::new());
    let (mut client_writer, server_reader) = tokio::io::duplex(1024);
    let (server_writer, client_reader) = tokio::io::duplex(1024);
    let server = serve_stdio(
        &engine,
        Ok(principal()),
        StdioOptions::default(),
        BufReader::new(server_reader),
        server_writer,
    );
    let client = async move {
        let mut lines = BufReader::new(client_reader).lines();
        let mut answers = Vec::new();
        for id in 0..3 {
            let body = modern(
                json!(id),
                "tools/call",
                json!({"name": "add", "arguments": {"a": id, "b": 1}}),
            );
            client_writer
                .write_all(line(&body).as_bytes())
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let answer = lines.next_line().await.ok().flatten().unwrap_or_default();
            answers.push(serde_json::from_str::<Value>(&answer).unwrap_or(Value::Null));
        }
        drop(client_writer);
        answers
    };
    let (served, answers) = tokio::time::timeout(GENEROUS, async { tokio::join!(server, client) })
        .await
        .unwrap_or_else(|_| panic!("stdio exchange hung"));
    assert!(served.is_ok());
    let texts: Vec<Value> = answers
        .iter()
        .map(|a| a["result"]["content"][0]["text"].clone())
        .collect();
    assert_eq!(texts, vec![json!("1"), json!("2"), json!("3")]);
}
