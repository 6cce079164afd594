//! Export over OTLP/HTTP to a real receiver: oteltest's sink (PyPI
//! `oteltest`, installed in `target/venv` by `scripts/setup-test-deps`),
//! run by `tests/otlp_receiver.py`. The spans of a request served by an
//! actix app arrive with their fields and the caller's trace id, nothing
//! secret arrives, and shutting the pipeline down from the actix runtime
//! returns, also when the collector never answers.

use crate::support;

use actix_web::http::header;
use actix_web::{App, HttpResponse, test, web};
use corkboard_telemetry::{
    HttpTelemetry, Metrics, TelemetryBuilder, TelemetryConfig, mcp, mcp_span,
};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use support::*;
use tracing::Instrument;

/// Generous: only there so that a broken pipeline fails instead of hanging.
const DEADLINE: Duration = Duration::from_secs(30);

struct Receiver {
    child: Child,
    lines: mpsc::Receiver<String>,
    port: u16,
}

impl Receiver {
    fn start() -> Self {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let python = root.join("target/venv/bin/python");
        assert!(
            python.exists(),
            "{} is missing: run scripts/setup-test-deps (the venv must have PyPI `oteltest`, \
             listed in tests/clients/requirements.txt)",
            python.display()
        );
        let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/otlp_receiver.py");
        let mut child = Command::new(&python)
            .arg(&script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", python.display()));
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let first = lines.recv_timeout(DEADLINE).unwrap_or_else(|_| {
            panic!(
                "the OTLP receiver did not start (is PyPI `oteltest` installed in {}? \
                 run scripts/setup-test-deps)",
                python.display()
            )
        });
        let port = first
            .strip_prefix("LISTENING ")
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("unexpected receiver output: {first}"));
        Self { child, lines, port }
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Reads until `done` says everything needed has arrived.
    fn collect(
        &self,
        mut done: impl FnMut(&[serde_json::Value]) -> bool,
    ) -> (Vec<serde_json::Value>, String) {
        let started = Instant::now();
        let mut spans = Vec::new();
        let mut dumps = String::new();
        while !done(&spans) {
            let left = DEADLINE.saturating_sub(started.elapsed());
            let line = self
                .lines
                .recv_timeout(left)
                .unwrap_or_else(|_| panic!("the receiver got no (more) spans; so far: {spans:#?}"));
            if let Some(json) = line.strip_prefix("SPAN ") {
                spans.push(serde_json::from_str(json).expect("span json"));
            } else if let Some(json) = line.strip_prefix("DUMP ") {
                let text: String = serde_json::from_str(json).expect("dump json");
                dumps.push_str(&text);
            }
        }
        (spans, dumps)
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn mcp_handler(body: web::Bytes) -> HttpResponse {
    set_tool_vocabulary();
    let message: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let span = mcp_span(
        message["method"].as_str().unwrap_or_default(),
        message["params"]["name"].as_str(),
    );
    async {
        let current = tracing::Span::current();
        mcp::record_principal(&current, "tenant-otlp", "run-otlp", "grant-otlp");
        tracing::info!("mcp exchange");
        mcp::record_outcome(&current, "ok", None, Duration::from_millis(1));
        HttpResponse::Ok().finish()
    }
    .instrument(span)
    .await
}

#[actix_rt::test]
async fn spans_reach_a_real_otlp_receiver_and_shutdown_returns() {
    let receiver = Receiver::start();
    let mut config = TelemetryConfig::new("corkboard-otlp-test");
    config.otlp_endpoint = Some(receiver.endpoint());
    let logs = LogCapture::default();
    let (dispatch, guard) = TelemetryBuilder::new(config)
        .with_log_writer(logs.clone())
        .build()
        .expect("telemetry builds");
    assert!(guard.is_exporting());
    let _default = tracing::dispatcher::set_default(&dispatch);

    let app = test::init_service(
        App::new()
            .wrap(HttpTelemetry::new(Metrics::default()))
            .route("/runs/{run}/mcp", web::post().to(mcp_handler)),
    )
    .await;
    let response = test::call_service(
        &app,
        test::TestRequest::post()
            .uri("/runs/run-otlp/mcp")
            .insert_header(("traceparent", traceparent()))
            .insert_header(("x-request-id", "otlp-req-1"))
            .insert_header((header::AUTHORIZATION, format!("Bearer {FAKE_TOKEN}")))
            .insert_header(("x-admin-token", FAKE_JWT))
            .set_payload(tool_call_body())
            .to_request(),
    )
    .await;
    assert_eq!(response.status(), 200);

    // Shutting down from the actix runtime flushes the batch and returns.
    tokio::time::timeout(DEADLINE, guard.shutdown())
        .await
        .expect("shutdown must not hang under actix")
        .expect("shutdown flushes cleanly");

    let (spans, dumps) = receiver.collect(|spans| {
        ["http.request", "mcp.request"]
            .iter()
            .all(|name| spans.iter().any(|s| s["name"] == *name))
    });
    let by_name = |name: &str| {
        spans
            .iter()
            .find(|s| s["name"] == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let http = by_name("http.request");
    let mcp = by_name("mcp.request");
    assert_eq!(http["trace_id"], TRACE_ID, "the caller's trace is joined");
    assert_eq!(http["parent_span_id"], PARENT_SPAN_ID);
    assert_eq!(mcp["trace_id"], TRACE_ID);
    assert_eq!(mcp["parent_span_id"], http["span_id"]);
    assert_eq!(http["service"], "corkboard-otlp-test");
    assert_eq!(http["content_type"], "application/x-protobuf");
    assert_eq!(http["attributes"]["http.route"], "/runs/{run}/mcp");
    assert_eq!(http["attributes"]["http.response.status_code"], "200");
    assert_eq!(http["attributes"]["request_id"], "otlp-req-1");
    assert_eq!(mcp["attributes"]["mcp.method"], "tools/call");
    assert_eq!(mcp["attributes"]["mcp.tool"], "create_issue");
    assert_eq!(mcp["attributes"]["tenant"], "tenant-otlp");
    assert_eq!(mcp["attributes"]["run"], "run-otlp");
    assert_eq!(mcp["attributes"]["grant"], "grant-otlp");
    assert_eq!(mcp["attributes"]["outcome"], "ok");
    assert!(!dumps.is_empty());
    for secret in SECRETS {
        assert!(!dumps.contains(secret), "the receiver got {secret}");
        assert!(!logs.text().contains(secret), "logs contain {secret}");
    }
}

#[actix_rt::test]
async fn shutdown_returns_when_the_collector_never_answers() {
    // Accepts connections (the kernel backlog does) and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let mut config = TelemetryConfig::new("corkboard-otlp-test");
    config.otlp_endpoint = Some(format!("http://{}", silent.local_addr().expect("addr")));
    config.export_timeout = Duration::from_millis(500);
    config.shutdown_timeout = Duration::from_secs(1);
    let (dispatch, guard) = TelemetryBuilder::new(config)
        .with_log_writer(LogCapture::default())
        .build()
        .expect("telemetry builds");
    tracing::dispatcher::with_default(&dispatch, || {
        for _ in 0..3 {
            let _span = tracing::info_span!("work").entered();
        }
    });
    // The export cannot succeed; what matters is that this returns.
    let outcome = tokio::time::timeout(DEADLINE, guard.shutdown()).await;
    assert!(outcome.is_ok(), "shutdown hung");
    drop(silent);
}
