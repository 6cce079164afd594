//! What an API answers when actix-web's extractors cannot read a request
//! (a body that is not JSON or lacks a field, a wrong or missing content
//! type, a body over the limit, query or path parameters of the wrong
//! shape): the same JSON envelope as every other refusal, with a stable
//! code, instead of actix-web's `text/plain` texts. Registered once per
//! API scope ([`configure`]), so no handler has to think about it.

use crate::ApiError;
use actix_web::error::{JsonPayloadError, PathError, PayloadError, QueryPayloadError};
use actix_web::{HttpRequest, web};
use corkboard_board::Code;

/// Registers the JSON, query and path extractors' error handlers on the
/// scope or app being configured.
pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.app_data(web::JsonConfig::default().error_handler(json_error))
        .app_data(web::QueryConfig::default().error_handler(query_error))
        .app_data(web::PathConfig::default().error_handler(path_error));
}

fn json_error(err: JsonPayloadError, _req: &HttpRequest) -> actix_web::Error {
    json_refusal(&err).into()
}

/// The refusal of a JSON body the extractor could not read.
fn json_refusal(err: &JsonPayloadError) -> ApiError {
    match err {
        JsonPayloadError::ContentType => ApiError::new(
            Code::UnsupportedMediaType,
            "the body must be JSON, sent with Content-Type: application/json",
        ),
        JsonPayloadError::OverflowKnownLength { length, limit } => ApiError::new(
            Code::PayloadTooLarge,
            format!("the body is {length} bytes; this endpoint reads at most {limit}"),
        ),
        JsonPayloadError::Overflow { limit } => ApiError::new(
            Code::PayloadTooLarge,
            format!("the body is over this endpoint's limit of {limit} bytes"),
        ),
        JsonPayloadError::Payload(PayloadError::Overflow) => ApiError::new(
            Code::PayloadTooLarge,
            "the body is over this endpoint's size limit",
        ),
        // serde's text names the field and the position, never a value.
        JsonPayloadError::Deserialize(err) => ApiError::new(
            Code::InvalidBody,
            format!("the JSON body is invalid: {err}"),
        ),
        other => ApiError::new(
            Code::InvalidBody,
            format!("the body could not be read: {other}"),
        ),
    }
}

fn query_error(err: QueryPayloadError, _req: &HttpRequest) -> actix_web::Error {
    let QueryPayloadError::Deserialize(err) = &err else {
        return ApiError::new(Code::InvalidQuery, err.to_string()).into();
    };
    ApiError::new(
        Code::InvalidQuery,
        format!("the query parameters are invalid: {err}"),
    )
    .into()
}

fn path_error(err: PathError, _req: &HttpRequest) -> actix_web::Error {
    let PathError::Deserialize(err) = &err else {
        return ApiError::new(Code::InvalidPath, err.to_string()).into();
    };
    ApiError::new(Code::InvalidPath, format!("the path is invalid: {err}")).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::{App, HttpResponse, test};
    use serde::Deserialize;

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Body {
        name: String,
    }

    #[derive(Deserialize)]
    #[allow(dead_code)]
    struct Params {
        limit: u32,
    }

    async fn handler(_body: web::Json<Body>, _q: web::Query<Params>) -> HttpResponse {
        HttpResponse::Ok().finish()
    }

    async fn refusal(req: test::TestRequest) -> (u16, serde_json::Value) {
        let app = test::init_service(
            App::new().service(
                web::scope("/v1")
                    .configure(configure)
                    .route("/x", web::post().to(handler)),
            ),
        )
        .await;
        let resp = test::call_service(&app, req.to_request()).await;
        let status = resp.status().as_u16();
        let content_type = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        assert_eq!(content_type, "application/json");
        (status, test::read_body_json(resp).await)
    }

    #[actix_rt::test]
    async fn extractor_failures_answer_in_the_envelope() {
        let cases = [
            (
                test::TestRequest::post()
                    .uri("/v1/x?limit=1")
                    .insert_header(("content-type", "application/json"))
                    .set_payload("{}"),
                400,
                "invalid_body",
            ),
            (
                test::TestRequest::post()
                    .uri("/v1/x?limit=1")
                    .insert_header(("content-type", "text/plain"))
                    .set_payload(r#"{"name":"a"}"#),
                415,
                "unsupported_media_type",
            ),
            (
                test::TestRequest::post()
                    .uri("/v1/x?limit=1")
                    .insert_header(("content-type", "application/json"))
                    .set_payload(vec![b' '; 3 * 1024 * 1024]),
                413,
                "payload_too_large",
            ),
            (
                test::TestRequest::post()
                    .uri("/v1/x?limit=many")
                    .insert_header(("content-type", "application/json"))
                    .set_payload(r#"{"name":"a"}"#),
                400,
                "invalid_query",
            ),
        ];
        for (req, status, code) in cases {
            let (got, body) = refusal(req).await;
            assert_eq!((got, body["error"]["code"].as_str()), (status, Some(code)));
        }
    }
}
