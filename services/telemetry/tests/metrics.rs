//! `/metrics`: the exposition parses as Prometheus text, counters move with
//! traffic, label sets stay bounded, and counters owned elsewhere are read
//! at scrape time.

use crate::support;

use actix_web::{App, HttpResponse, test, web};
use corkboard_telemetry::metrics::RegistryCounters;
use corkboard_telemetry::{HttpTelemetry, Metrics, MetricsConfig, metrics_handler};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use support::*;

const MS: Duration = Duration::from_millis(3);

/// GETs `/metrics` and parses it.
macro_rules! scrape {
    ($app:expr) => {{
        let response =
            test::call_service($app, test::TestRequest::get().uri("/metrics").to_request()).await;
        assert_eq!(response.status(), 200);
        let content_type = response
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        assert!(
            content_type.starts_with("text/plain; version=0.0.4"),
            "{content_type}"
        );
        let body = test::read_body(response).await;
        let text = String::from_utf8(body.to_vec()).expect("utf-8");
        let samples = parse_prometheus(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        (text, samples)
    }};
}

#[actix_rt::test]
async fn http_counters_and_histograms_move_with_traffic() {
    let metrics = Metrics::default();
    let app = test::init_service(
        App::new()
            .wrap(HttpTelemetry::new(metrics.clone()))
            .app_data(web::Data::new(metrics.clone()))
            .route("/metrics", web::get().to(metrics_handler))
            .route("/runs/{run}/mcp", web::post().to(HttpResponse::Ok)),
    )
    .await;
    let hits = |samples: &[Sample]| {
        value(
            samples,
            "corkboard_http_requests_total",
            &[
                ("route", "/runs/{run}/mcp"),
                ("method", "POST"),
                ("status", "200"),
            ],
        )
    };

    test::call_service(
        &app,
        test::TestRequest::post().uri("/runs/a/mcp").to_request(),
    )
    .await;
    let (_, before) = scrape!(&app);
    assert_eq!(hits(&before), Some(1.0));

    for run in ["b", "c", "d"] {
        test::call_service(
            &app,
            test::TestRequest::post()
                .uri(&format!("/runs/{run}/mcp"))
                .to_request(),
        )
        .await;
    }
    let (text, after) = scrape!(&app);
    assert_eq!(hits(&after), Some(4.0), "{text}");
    assert_eq!(
        value(
            &after,
            "corkboard_http_request_duration_seconds_count",
            &[("route", "/runs/{run}/mcp"), ("method", "POST")]
        ),
        Some(4.0)
    );
    // The first scrape itself was counted by the second.
    assert_eq!(
        value(
            &after,
            "corkboard_http_requests_total",
            &[("route", "/metrics"), ("method", "GET"), ("status", "200")]
        ),
        Some(1.0)
    );
    for run in ["/runs/a/", "/runs/b/", "run=\"a\""] {
        assert!(!text.contains(run), "run ids are never labels: {run}");
    }
}

#[actix_rt::test]
async fn typed_recorders_appear_with_bounded_labels() {
    set_tool_vocabulary();
    let metrics = Metrics::default();
    metrics.mcp_request("tools/call", Some("create_issue"), "ok", MS);
    metrics.mcp_request("tools/call", Some("create_issue"), "ok", MS);
    metrics.mcp_request("tools/call", Some(FAKE_TOKEN), "ok", MS);
    metrics.mcp_request(FAKE_JWT, None, "weird outcome", MS);
    metrics.tool_call("list_issues", "tool_error", MS);
    metrics.store_operation("create_issue", true, MS);
    metrics.store_operation("create_issue", false, MS);
    metrics.registry_cache(true);
    metrics.registry_cache(true);
    metrics.registry_cache(false);
    metrics.redis_error();
    metrics.revocation();
    metrics.rate_limited();
    metrics.active_runs().set(3);
    metrics.legacy_session_started();
    metrics
        .for_tenant("tenant-a")
        .tool_call("get_issue", "ok", MS);

    let text = metrics.render();
    assert_no_leak(&text);
    let s = parse_prometheus(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mcp = "corkboard_mcp_requests_total";
    assert_eq!(
        value(
            &s,
            mcp,
            &[
                ("method", "tools/call"),
                ("tool", "create_issue"),
                ("outcome", "ok")
            ]
        ),
        Some(2.0)
    );
    assert_eq!(
        value(
            &s,
            mcp,
            &[
                ("method", "tools/call"),
                ("tool", "other"),
                ("outcome", "ok")
            ]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &s,
            mcp,
            &[("method", "other"), ("tool", ""), ("outcome", "other")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &s,
            "corkboard_tool_calls_total",
            &[("tool", "list_issues"), ("outcome", "tool_error")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &s,
            "corkboard_tool_calls_total",
            &[("tool", "get_issue"), ("outcome", "ok")]
        ),
        Some(1.0),
        "tenant labels are off by default: for_tenant records without one"
    );
    assert_eq!(
        value(
            &s,
            "corkboard_store_operations_total",
            &[("op", "create_issue"), ("result", "error")]
        ),
        Some(1.0)
    );
    assert_eq!(
        value(
            &s,
            "corkboard_store_operation_duration_seconds_count",
            &[("op", "create_issue")]
        ),
        Some(2.0)
    );
    let lookups = "corkboard_registry_cache_lookups_total";
    assert_eq!(value(&s, lookups, &[("result", "hit")]), Some(2.0));
    assert_eq!(value(&s, lookups, &[("result", "miss")]), Some(1.0));
    assert_eq!(value(&s, "corkboard_redis_errors_total", &[]), Some(1.0));
    assert_eq!(value(&s, "corkboard_revocations_total", &[]), Some(1.0));
    assert_eq!(value(&s, "corkboard_rate_limited_total", &[]), Some(1.0));
    assert_eq!(value(&s, "corkboard_active_runs", &[]), Some(3.0));
    assert_eq!(
        value(
            &s,
            "corkboard_legacy_sessions_total",
            &[("event", "started")]
        ),
        Some(1.0)
    );
    assert!(!text.contains("tenant"), "no tenant label unless enabled");
}

/// Each thread keeps handles of the series it records: what several
/// threads record of one series adds up in that series, and two
/// `Metrics` (two processes' worth) never share one.
#[actix_rt::test]
async fn a_series_recorded_on_several_threads_adds_up() {
    set_tool_vocabulary();
    let one = Metrics::default();
    let other = Metrics::default();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..25 {
                    one.tool_call("get_issue", "ok", MS);
                    one.store_operation("get_issue", true, MS);
                }
                other.tool_call("get_issue", "ok", MS);
            });
        }
    });
    one.tool_call("get_issue", "error", MS);
    let text = one.render();
    let s = parse_prometheus(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let calls = "corkboard_tool_calls_total";
    let ok = [("tool", "get_issue"), ("outcome", "ok")];
    assert_eq!(value(&s, calls, &ok), Some(100.0));
    let failed = [("tool", "get_issue"), ("outcome", "error")];
    assert_eq!(value(&s, calls, &failed), Some(1.0));
    let timed = "corkboard_tool_call_duration_seconds_count";
    assert_eq!(value(&s, timed, &[("tool", "get_issue")]), Some(101.0));
    let stored = [("op", "get_issue"), ("result", "ok")];
    let ops = "corkboard_store_operations_total";
    assert_eq!(value(&s, ops, &stored), Some(100.0));
    let text = other.render();
    let s = parse_prometheus(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(value(&s, calls, &ok), Some(4.0));
    assert_eq!(value(&s, ops, &stored), None);
}

fn assert_no_leak(text: &str) {
    for secret in SECRETS {
        assert!(!text.contains(secret), "metrics contain {secret}");
    }
}

#[actix_rt::test]
async fn tenant_labels_when_enabled_are_bounded() {
    let metrics = Metrics::new(MetricsConfig {
        tenant_labels: true,
        max_tenants: 2,
    });
    for tenant in ["t1", "t2", "t3", "t4", "t1"] {
        metrics
            .for_tenant(tenant)
            .mcp_request("tools/list", None, "ok", MS);
        metrics.for_tenant(tenant).rate_limited();
    }
    let text = metrics.render();
    let s = parse_prometheus(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let mcp = |tenant| {
        value(
            &s,
            "corkboard_mcp_requests_total",
            &[
                ("method", "tools/list"),
                ("tool", ""),
                ("outcome", "ok"),
                ("tenant", tenant),
            ],
        )
    };
    assert_eq!(mcp("t1"), Some(2.0));
    assert_eq!(mcp("t2"), Some(1.0));
    assert_eq!(mcp("other"), Some(2.0), "t3 and t4 exceed max_tenants");
    assert_eq!(mcp("t3"), None);
    assert_eq!(
        value(&s, "corkboard_rate_limited_total", &[("tenant", "other")]),
        Some(2.0)
    );
}

#[actix_rt::test]
async fn counters_owned_elsewhere_are_read_at_scrape_time() {
    let metrics = Metrics::default();
    // Stand-in for a registry's own atomics (e.g. RedisRegistry::stats()).
    let hits = Arc::new(AtomicU64::new(0));
    let source = hits.clone();
    metrics.observe_registry(move || RegistryCounters {
        cache_hits: source.load(Ordering::Relaxed),
        cache_misses: 5,
        redis_errors: 2,
    });
    metrics.registry_cache(true);
    let entries = Arc::new(AtomicU64::new(7));
    let read = entries.clone();
    metrics
        .gauge_fn(
            "corkboard_registry_cache_entries",
            "Grants cached.",
            move || read.load(Ordering::Relaxed) as f64,
        )
        .expect("registers");
    let invalidations = Arc::new(AtomicU64::new(1));
    let read = invalidations.clone();
    metrics
        .counter_fn(
            "corkboard_registry_invalidations_total",
            "Revocation messages received.",
            move || read.load(Ordering::Relaxed) as f64,
        )
        .expect("registers");
    assert!(
        metrics
            .gauge_fn("corkboard_registry_cache_entries", "again", || 0.0)
            .is_err(),
        "a duplicate name is refused"
    );

    let s = parse_prometheus(&metrics.render()).expect("valid");
    let lookups = "corkboard_registry_cache_lookups_total";
    assert_eq!(value(&s, lookups, &[("result", "hit")]), Some(1.0));
    assert_eq!(value(&s, lookups, &[("result", "miss")]), Some(5.0));
    assert_eq!(value(&s, "corkboard_redis_errors_total", &[]), Some(2.0));
    assert_eq!(
        value(&s, "corkboard_registry_cache_entries", &[]),
        Some(7.0)
    );

    hits.store(10, Ordering::Relaxed);
    entries.store(4, Ordering::Relaxed);
    invalidations.store(3, Ordering::Relaxed);
    let text = metrics.render();
    let s = parse_prometheus(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(value(&s, lookups, &[("result", "hit")]), Some(11.0));
    assert_eq!(
        value(&s, "corkboard_registry_cache_entries", &[]),
        Some(4.0)
    );
    assert_eq!(
        value(&s, "corkboard_registry_invalidations_total", &[]),
        Some(3.0)
    );
    assert!(text.contains("# TYPE corkboard_registry_invalidations_total counter"));
    assert!(text.contains("# TYPE corkboard_registry_cache_entries gauge"));
}

#[::core::prelude::v1::test]
fn the_parser_rejects_what_a_scraper_would() {
    for bad in [
        "no_type 1\n",
        "# TYPE x counter\nx{a=\"1\" 1\n",
        "# TYPE x counter\nx{a=1} 1\n",
        "# TYPE x counter\nx one\n",
        "# TYPE x counter\nx -1\n",
        "# TYPE 1x counter\n",
        "# TYPE h histogram\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 1\nh_count 1\nh_sum 0\n",
        "# TYPE h histogram\nh_bucket{le=\"+Inf\"} 2\nh_count 1\nh_sum 0\n",
    ] {
        assert!(parse_prometheus(bad).is_err(), "accepted: {bad:?}");
    }
    let good = "# HELP x a \"help\"\n# TYPE x counter\nx{a=\"q\\\"\\\\\\n\",b=\"\"} 1.5e3\n";
    let s = parse_prometheus(good).expect("valid");
    assert_eq!(value(&s, "x", &[("a", "q\"\\\n"), ("b", "")]), Some(1500.0));
}
