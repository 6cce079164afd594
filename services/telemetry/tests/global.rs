//! The process-wide installation: one subscriber per process, the W3C
//! propagator installed with it.

use corkboard_telemetry::{TelemetryConfig, TelemetryError, init};

#[test]
fn init_installs_once_and_sets_the_w3c_propagator() {
    let mut config = TelemetryConfig::new("global-test");
    config.log_filter = "warn".into();
    let guard = init(config.clone()).expect("first init");
    assert!(!guard.is_exporting(), "no endpoint, no export");
    assert!(matches!(
        init(config),
        Err(TelemetryError::AlreadyInitialized)
    ));

    let fields: Vec<String> =
        opentelemetry::global::get_text_map_propagator(|p| p.fields().map(str::to_owned).collect());
    assert!(fields.contains(&"traceparent".to_owned()), "{fields:?}");
    guard.shutdown_blocking().expect("nothing to flush");
}

#[test]
fn bad_settings_are_refused_with_a_clear_error() {
    let mut config = TelemetryConfig::new("x");
    config.log_filter = "info,[[[".into();
    assert!(matches!(
        corkboard_telemetry::TelemetryBuilder::new(config).build(),
        Err(TelemetryError::InvalidLogFilter { .. })
    ));
    let mut config = TelemetryConfig::new("x");
    config.otlp_endpoint = Some("https://collector:4318".into());
    let err = corkboard_telemetry::TelemetryBuilder::new(config)
        .build()
        .expect_err("https refused");
    assert!(err.to_string().contains("no TLS"), "{err}");
}
