//! OTLP/HTTP (protobuf) export with a blocking client.
//!
//! The SDK's batch processor exports from its own OS thread, so a blocking
//! client needs no async runtime and cannot deadlock against the actix
//! thread that asks for a flush. (An async client would need a Tokio
//! reactor that a blocked current-thread actix runtime cannot drive: the
//! classic "shutdown hangs" under actix.) Plain `http://` only: no TLS
//! stack is linked; a collector sidecar or node agent is the expected peer.

use crate::error::TelemetryError;
use async_trait::async_trait;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use opentelemetry_otlp::{SpanExporter, WithExportConfig, WithHttpConfig};
use std::io::Read;
use std::time::Duration;

/// Responses from a collector are tiny; anything larger is not a collector.
const MAX_RESPONSE_BYTES: u64 = 1024 * 1024;

/// `http://host:port` → `http://host:port/v1/traces`; a URL that already
/// names a path is used as given.
pub(crate) fn traces_url(endpoint: &str) -> Result<String, TelemetryError> {
    let invalid = |reason: &str| TelemetryError::InvalidEndpoint {
        endpoint: crate::config::redact_url(endpoint),
        reason: reason.to_owned(),
    };
    let trimmed = endpoint.trim();
    let rest = if let Some(rest) = trimmed.strip_prefix("http://") {
        rest
    } else if trimmed.starts_with("https://") {
        return Err(invalid(
            "https is not supported (no TLS stack is linked); use a plain-HTTP collector endpoint",
        ));
    } else {
        return Err(invalid("expected an http:// URL"));
    };
    if rest.is_empty() || rest.starts_with('/') {
        return Err(invalid("missing host"));
    }
    let url = match rest.find('/') {
        None => format!("{}/v1/traces", trimmed),
        Some(slash) if rest[slash..].trim_end_matches('/').is_empty() => {
            format!("{}/v1/traces", trimmed.trim_end_matches('/'))
        }
        Some(_) => trimmed.to_owned(),
    };
    reqwest::Url::parse(&url).map_err(|e| invalid(&e.to_string()))?;
    Ok(url)
}

pub(crate) fn span_exporter(
    endpoint: &str,
    timeout: Duration,
) -> Result<SpanExporter, TelemetryError> {
    let url = traces_url(endpoint)?;
    let client = BlockingClient::new(timeout)?;
    SpanExporter::builder()
        .with_http()
        .with_endpoint(url)
        .with_timeout(timeout)
        .with_http_client(client)
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))
}

/// reqwest's blocking client behind the SDK's [`HttpClient`] trait.
#[derive(Debug)]
struct BlockingClient {
    client: reqwest::blocking::Client,
}

impl BlockingClient {
    fn new(timeout: Duration) -> Result<Self, TelemetryError> {
        // The blocking client starts (and later drops) its own runtime; doing
        // that on a thread that is inside a Tokio runtime panics, so it is
        // built on a thread of its own.
        let client = std::thread::Builder::new()
            .name("otlp-client-init".into())
            .spawn(move || {
                reqwest::blocking::Client::builder()
                    .timeout(timeout)
                    .connect_timeout(timeout)
                    .redirect(reqwest::redirect::Policy::none())
                    .build()
            })
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?
            .join()
            .map_err(|_| TelemetryError::Exporter("HTTP client set-up panicked".into()))?
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        Ok(Self { client })
    }
}

#[async_trait]
impl HttpClient for BlockingClient {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let (parts, body) = request.into_parts();
        let response = self
            .client
            .request(parts.method, parts.uri.to_string())
            .headers(parts.headers)
            .body(body.to_vec())
            .send()?;
        let status = response.status();
        let headers = response.headers().clone();
        let mut buffer = Vec::new();
        response.take(MAX_RESPONSE_BYTES).read_to_end(&mut buffer)?;
        let mut answer = Response::builder().status(status);
        if let Some(map) = answer.headers_mut() {
            *map = headers;
        }
        Ok(answer.body(Bytes::from(buffer))?)
    }
}

#[cfg(test)]
mod tests {
    use super::traces_url;

    #[test]
    fn endpoint_gets_the_traces_path_unless_it_names_one() {
        assert_eq!(
            traces_url("http://collector:4318").ok().as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        assert_eq!(
            traces_url("http://collector:4318/").ok().as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        assert_eq!(
            traces_url("http://c:4318/custom/v1/traces").ok().as_deref(),
            Some("http://c:4318/custom/v1/traces")
        );
        assert!(traces_url("https://c:4318").is_err());
        assert!(traces_url("c:4318").is_err());
        assert!(traces_url("http://").is_err());
    }
}
