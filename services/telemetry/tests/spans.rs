//! Spans and logs of HTTP and MCP requests, captured with the SDK's
//! in-memory exporter and a log buffer: the fields are there, the caller's
//! trace is joined, request ids correlate, and no secret sent in a request
//! (token, JWT, tool argument) appears anywhere in what was exported or
//! logged.

use crate::support;

use actix_web::http::header;
use actix_web::{App, HttpRequest, HttpResponse, test, web};
use corkboard_telemetry::mcp::{self, field};
use corkboard_telemetry::{
    HttpTelemetry, LogFormat, Metrics, RequestId, TelemetryBuilder, TelemetryConfig,
    TelemetryGuard, mcp_span,
};
use opentelemetry::trace::{SpanKind, Status};
use opentelemetry::{Key, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SpanData};
use std::time::Duration;
use support::*;
use tracing::{Dispatch, Instrument};

struct Capture {
    dispatch: Dispatch,
    _guard: TelemetryGuard,
    spans: InMemorySpanExporter,
    logs: LogCapture,
}

fn capture(format: LogFormat) -> Capture {
    let spans = InMemorySpanExporter::default();
    let logs = LogCapture::default();
    let mut config = TelemetryConfig::new("telemetry-test");
    config.log_format = format;
    config.log_filter = "debug".into();
    let (dispatch, guard) = TelemetryBuilder::new(config)
        .with_span_exporter(spans.clone())
        .with_log_writer(logs.clone())
        .build()
        .expect("telemetry builds");
    Capture {
        dispatch,
        _guard: guard,
        spans,
        logs,
    }
}

/// What an MCP transport does with the span helper: open it, fill in the
/// principal and the outcome, log one line inside it. It reads the body
/// (the arguments) to dispatch, and must not record it.
async fn mcp_handler(req: HttpRequest, body: web::Bytes, id: RequestId) -> HttpResponse {
    set_tool_vocabulary();
    let started = std::time::Instant::now();
    let message: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let method = message["method"].as_str().unwrap_or_default().to_owned();
    let tool = message["params"]["name"].as_str().map(str::to_owned);
    let span = mcp_span(&method, tool.as_deref());
    async {
        let run = req.match_info().get("run").unwrap_or_default();
        mcp::record_principal(&tracing::Span::current(), "tenant-a", run, "grant-01");
        tracing::info!(tool = tool.as_deref().unwrap_or(""), "mcp exchange");
        let failed = message["params"]["arguments"]["fail"].as_bool() == Some(true);
        if failed {
            mcp::record_outcome(
                &tracing::Span::current(),
                "error",
                Some(-32602),
                started.elapsed(),
            );
        } else {
            mcp::record_outcome(&tracing::Span::current(), "ok", None, started.elapsed());
        }
        HttpResponse::Ok().json(serde_json::json!({"handled_by": id.as_str()}))
    }
    .instrument(span)
    .await
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == Key::from(key.to_owned()))
        .map(|kv| &kv.value)
}

fn attr_str(span: &SpanData, key: &str) -> Option<String> {
    attr(span, key).map(|v| v.as_str().into_owned())
}

fn find<'a>(spans: &'a [SpanData], name: &str) -> &'a SpanData {
    spans
        .iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("no {name} span in {spans:#?}"))
}

fn assert_no_secrets(what: &str, text: &str) {
    for secret in SECRETS {
        assert!(
            !text.contains(secret),
            "{what} contains the secret {secret:?}:\n{text}"
        );
    }
    // Prefixes too: a truncated token is still a leak.
    assert!(!text.contains("cbr_AAAA"), "{what} contains a token prefix");
    assert!(!text.contains("eyJhbGci"), "{what} contains a JWT prefix");
}

macro_rules! app {
    ($metrics:expr) => {
        test::init_service(
            App::new()
                .wrap(HttpTelemetry::new($metrics))
                .route("/runs/{run}/mcp", web::post().to(mcp_handler))
                .route(
                    "/boom",
                    web::get().to(|| async {
                        Err::<HttpResponse, _>(actix_web::error::ErrorServiceUnavailable(
                            "board unavailable",
                        ))
                    }),
                ),
        )
        .await
    };
}

#[actix_rt::test]
async fn mcp_request_spans_carry_the_fields_and_join_the_callers_trace() {
    let cap = capture(LogFormat::Json);
    let _default = tracing::dispatcher::set_default(&cap.dispatch);
    let app = app!(Metrics::default());

    let response = test::call_service(
        &app,
        test::TestRequest::post()
            .uri("/runs/run-42/mcp")
            .insert_header(("traceparent", traceparent()))
            .insert_header(("tracestate", "vendor=opaque"))
            .insert_header(("x-request-id", "req-123_abc"))
            .insert_header((header::AUTHORIZATION, format!("Bearer {FAKE_TOKEN}")))
            .insert_header(("x-admin-token", FAKE_JWT))
            .insert_header((header::CONTENT_TYPE, "application/json"))
            .set_payload(tool_call_body())
            .to_request(),
    )
    .await;
    assert_eq!(response.status(), 200);
    assert_eq!(
        response.headers().get("x-request-id").map(|v| v.as_bytes()),
        Some(&b"req-123_abc"[..]),
        "a sane caller request id is kept and echoed"
    );
    let body: serde_json::Value = test::read_body_json(response).await;
    assert_eq!(
        body["handled_by"], "req-123_abc",
        "handlers extract the same id"
    );

    let spans = cap.spans.get_finished_spans().expect("spans");
    let http = find(&spans, "http.request");
    let mcp = find(&spans, "mcp.request");

    // The caller's trace is joined: same trace id, parent is its span.
    assert_eq!(http.span_context.trace_id().to_string(), TRACE_ID);
    assert_eq!(http.parent_span_id.to_string(), PARENT_SPAN_ID);
    assert!(http.parent_span_is_remote);
    assert_eq!(http.span_kind, SpanKind::Server);
    assert_eq!(mcp.span_context.trace_id().to_string(), TRACE_ID);
    assert_eq!(mcp.parent_span_id, http.span_context.span_id());

    // HTTP fields: the route pattern, not the path with the run id.
    assert_eq!(
        attr_str(http, "http.route").as_deref(),
        Some("/runs/{run}/mcp")
    );
    assert_eq!(
        attr_str(http, "http.request.method").as_deref(),
        Some("POST")
    );
    assert_eq!(
        attr(http, "http.response.status_code"),
        Some(&Value::I64(200))
    );
    assert_eq!(attr_str(http, "request_id").as_deref(), Some("req-123_abc"));
    assert_eq!(attr_str(http, "trace_id").as_deref(), Some(TRACE_ID));
    assert_eq!(
        attr_str(http, "span_id"),
        Some(http.span_context.span_id().to_string())
    );
    assert!(matches!(attr(http, "latency_ms"), Some(Value::F64(ms)) if *ms >= 0.0));

    // MCP fields, under the documented names.
    assert_eq!(attr_str(mcp, field::METHOD).as_deref(), Some("tools/call"));
    assert_eq!(attr_str(mcp, field::TOOL).as_deref(), Some("create_issue"));
    assert_eq!(attr_str(mcp, field::TENANT).as_deref(), Some("tenant-a"));
    assert_eq!(attr_str(mcp, field::RUN).as_deref(), Some("run-42"));
    assert_eq!(attr_str(mcp, field::GRANT).as_deref(), Some("grant-01"));
    assert_eq!(attr_str(mcp, field::OUTCOME).as_deref(), Some("ok"));
    assert!(
        attr(mcp, field::RPC_CODE).is_none(),
        "no error code on success"
    );
    assert!(matches!(attr(mcp, field::LATENCY_MS), Some(Value::F64(ms)) if *ms >= 0.0));

    // Nothing secret in anything exported (attributes, events, resource).
    assert_no_secrets("exported spans", &format!("{spans:?}"));

    // Logs: the line logged inside the MCP span carries the request id and
    // the trace and span ids of the HTTP span, and no secret.
    let logs = cap.logs.text();
    assert_no_secrets("logs", &logs);
    let line: serde_json::Value = logs
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["message"] == "mcp exchange")
        .unwrap_or_else(|| panic!("no mcp exchange line in {logs}"));
    assert_eq!(line["request_id"], "req-123_abc");
    assert_eq!(line["trace_id"], TRACE_ID);
    assert_eq!(line["span_id"], http.span_context.span_id().to_string());
    assert_eq!(line["span"], "mcp.request");
    assert_eq!(line["level"], "INFO");
    assert_eq!(line["tool"], "create_issue");
}

#[actix_rt::test]
async fn error_outcomes_record_the_rpc_code_and_fail_the_span() {
    let cap = capture(LogFormat::Text);
    let _default = tracing::dispatcher::set_default(&cap.dispatch);
    let app = app!(Metrics::default());
    let body = corkboard_testkit::mcp::tools_call(
        1,
        "update_issue",
        serde_json::json!({"fail": true, "title": ARGUMENT_VALUE}),
    );
    let response = test::call_service(
        &app,
        test::TestRequest::post()
            .uri("/runs/r/mcp")
            .insert_header((header::AUTHORIZATION, format!("Bearer {FAKE_TOKEN}")))
            .set_json(&body)
            .to_request(),
    )
    .await;
    assert_eq!(response.status(), 200);
    let spans = cap.spans.get_finished_spans().expect("spans");
    let mcp = find(&spans, "mcp.request");
    assert_eq!(attr_str(mcp, field::OUTCOME).as_deref(), Some("error"));
    assert_eq!(attr(mcp, field::RPC_CODE), Some(&Value::I64(-32602)));
    assert!(
        matches!(mcp.status, Status::Error { .. }),
        "{:?}",
        mcp.status
    );
    assert_no_secrets("exported spans", &format!("{spans:?}"));
    let logs = cap.logs.text();
    assert!(logs.contains("mcp exchange"), "text logs: {logs}");
    assert_no_secrets("text logs", &logs);
}

#[actix_rt::test]
async fn without_traceparent_a_new_trace_starts_and_a_request_id_is_generated() {
    let cap = capture(LogFormat::Json);
    let _default = tracing::dispatcher::set_default(&cap.dispatch);
    let app = app!(Metrics::default());
    let response = test::call_service(
        &app,
        test::TestRequest::post()
            .uri("/runs/r/mcp")
            .set_payload(tool_call_body())
            .to_request(),
    )
    .await;
    let id = response
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned)
        .expect("a request id is always echoed");
    assert_eq!(id.len(), 26, "a ULID: {id}");
    let spans = cap.spans.get_finished_spans().expect("spans");
    let http = find(&spans, "http.request");
    assert!(http.span_context.is_valid());
    assert_ne!(http.span_context.trace_id().to_string(), TRACE_ID);
    assert_eq!(http.parent_span_id, opentelemetry::trace::SpanId::INVALID);
    assert_eq!(attr_str(http, "request_id"), Some(id));
}

#[actix_rt::test]
async fn request_ids_that_look_like_credentials_are_replaced_not_echoed() {
    let cap = capture(LogFormat::Json);
    let _default = tracing::dispatcher::set_default(&cap.dispatch);
    let app = app!(Metrics::default());
    for hostile in [FAKE_TOKEN, FAKE_JWT, "has space", &"x".repeat(65)] {
        let response = test::call_service(
            &app,
            test::TestRequest::post()
                .uri("/runs/r/mcp")
                .insert_header(("x-request-id", hostile))
                .set_payload(tool_call_body())
                .to_request(),
        )
        .await;
        let echoed = response
            .headers()
            .get("x-request-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert_ne!(echoed, hostile);
        assert_eq!(echoed.len(), 26, "replaced by a ULID: {echoed}");
    }
    let spans = cap.spans.get_finished_spans().expect("spans");
    assert_no_secrets("exported spans", &format!("{spans:?}"));
    assert_no_secrets("logs", &cap.logs.text());
}

#[actix_rt::test]
async fn handler_errors_get_their_status_the_id_header_and_a_failed_span() {
    let cap = capture(LogFormat::Json);
    let _default = tracing::dispatcher::set_default(&cap.dispatch);
    let metrics = Metrics::default();
    let app = app!(metrics.clone());
    let response = test::call_service(
        &app,
        test::TestRequest::get()
            .uri("/boom")
            .insert_header(("x-request-id", "boom-1"))
            .to_request(),
    )
    .await;
    assert_eq!(response.status(), 503);
    assert_eq!(
        response.headers().get("x-request-id").map(|v| v.as_bytes()),
        Some(&b"boom-1"[..])
    );
    let spans = cap.spans.get_finished_spans().expect("spans");
    let http = find(&spans, "http.request");
    assert_eq!(
        attr(http, "http.response.status_code"),
        Some(&Value::I64(503))
    );
    assert!(matches!(http.status, Status::Error { .. }));
    let text = metrics.render();
    let samples = parse_prometheus(&text).expect("valid exposition");
    assert_eq!(
        value(
            &samples,
            "corkboard_http_requests_total",
            &[("route", "/boom"), ("method", "GET"), ("status", "503")]
        ),
        Some(1.0),
        "{text}"
    );
}

#[actix_rt::test]
async fn unmatched_paths_never_become_labels_or_attributes() {
    let cap = capture(LogFormat::Json);
    let _default = tracing::dispatcher::set_default(&cap.dispatch);
    let metrics = Metrics::default();
    let app = app!(metrics.clone());
    let path = format!("/probe/{}", FAKE_TOKEN);
    let response = test::call_service(&app, test::TestRequest::get().uri(&path).to_request()).await;
    assert_eq!(response.status(), 404);
    let spans = cap.spans.get_finished_spans().expect("spans");
    let http = find(&spans, "http.request");
    assert_eq!(attr_str(http, "http.route").as_deref(), Some("unmatched"));
    assert_no_secrets("exported spans", &format!("{spans:?}"));
    let text = metrics.render();
    assert_no_secrets("metrics", &text);
    let samples = parse_prometheus(&text).expect("valid exposition");
    assert_eq!(
        value(
            &samples,
            "corkboard_http_requests_total",
            &[("route", "unmatched"), ("method", "GET"), ("status", "404")]
        ),
        Some(1.0)
    );
}

#[actix_rt::test]
async fn unknown_names_from_clients_are_mapped_to_other() {
    set_tool_vocabulary();
    let cap = capture(LogFormat::Json);
    let _default = tracing::dispatcher::set_default(&cap.dispatch);
    {
        let span = mcp_span(FAKE_TOKEN, Some(FAKE_TOKEN));
        let _entered = span.enter();
    }
    let spans = cap.spans.get_finished_spans().expect("spans");
    let mcp = find(&spans, "mcp.request");
    assert_eq!(attr_str(mcp, field::METHOD).as_deref(), Some("other"));
    assert_eq!(attr_str(mcp, field::TOOL).as_deref(), Some("other"));
    assert_no_secrets("exported spans", &format!("{spans:?}"));
}

#[actix_rt::test]
async fn shutdown_under_actix_returns_promptly_with_the_in_memory_exporter() {
    let spans = InMemorySpanExporter::default();
    let (dispatch, guard) = TelemetryBuilder::new(TelemetryConfig::new("t"))
        .with_span_exporter(spans.clone())
        .with_log_writer(LogCapture::default())
        .build()
        .expect("builds");
    tracing::dispatcher::with_default(&dispatch, || {
        let _span = tracing::info_span!("work").entered();
    });
    assert!(guard.is_exporting());
    assert_eq!(spans.get_finished_spans().expect("spans").len(), 1);
    assert!(!spans.is_shutdown_called());
    tokio::time::timeout(Duration::from_secs(30), guard.shutdown())
        .await
        .expect("shutdown must not hang")
        .expect("shutdown succeeds");
    assert!(spans.is_shutdown_called(), "the exporter was shut down");
}

#[actix_rt::test]
async fn quiet_routes_get_no_span_but_an_id_and_a_count() {
    let cap = capture(LogFormat::Json);
    let _default = tracing::dispatcher::set_default(&cap.dispatch);
    let metrics = Metrics::default();
    let app = test::init_service(
        App::new()
            .wrap(HttpTelemetry::new(metrics.clone()).without_spans_for(["/healthz"]))
            .route("/healthz", web::get().to(HttpResponse::Ok)),
    )
    .await;
    let response =
        test::call_service(&app, test::TestRequest::get().uri("/healthz").to_request()).await;
    assert!(response.headers().contains_key("x-request-id"));
    assert!(cap.spans.get_finished_spans().expect("spans").is_empty());
    let samples = parse_prometheus(&metrics.render()).expect("valid");
    assert_eq!(
        value(
            &samples,
            "corkboard_http_requests_total",
            &[("route", "/healthz"), ("method", "GET"), ("status", "200")]
        ),
        Some(1.0)
    );
}

/// `HttpServer::new` needs a `Send + Clone` factory: the middleware and the
/// metrics must be movable into it.
#[::core::prelude::v1::test]
fn middleware_and_metrics_can_move_into_an_http_server_factory() {
    fn assert_factory_safe<T: Send + Sync + Clone + 'static>() {}
    assert_factory_safe::<HttpTelemetry>();
    assert_factory_safe::<Metrics>();
}
