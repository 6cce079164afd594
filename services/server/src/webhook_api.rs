//! The webhook endpoints of the admin API:
//!
//! - `POST /v1/tenants/{tenant}/webhooks` `{url, events, secret?}` → 201
//!   with the endpoint; the secret is in the answer only when the server
//!   generated it (then, and never again);
//! - `GET /v1/tenants/{tenant}/webhooks` → endpoints with their delivery
//!   status (pending, delivered, given up, dropped, last attempt);
//! - `DELETE /v1/tenants/{tenant}/webhooks/{id}` → gone, with its
//!   undelivered deliveries.

use crate::admin::{ManageTenant, ReadTenant};
use crate::state::AppState;
use actix_web::{HttpResponse, web};
use corkboard_api::ApiError;
use corkboard_board::{
    NewWebhook, StoreError, Timestamp, ValidationError, WebhookEvents, WebhookId, WebhookSecret,
    WebhookUrl,
};
use serde::Deserialize;
use serde_json::json;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CreateBody {
    url: String,
    events: Vec<String>,
    /// 16-256 bytes; generated when absent.
    secret: Option<String>,
}

// Never print the secret, nor the URL's query string (often a token).
impl std::fmt::Debug for CreateBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let end = self.url.find(['?', '#']).unwrap_or(self.url.len());
        f.debug_struct("CreateBody")
            .field("url", &&self.url[..end])
            .field("events", &self.events)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

pub(crate) async fn create(
    state: web::Data<AppState>,
    scope: ManageTenant,
    body: web::Json<CreateBody>,
) -> Result<HttpResponse, ApiError> {
    let tenant = scope.tenant;
    let body = body.into_inner();
    let url = WebhookUrl::parse(body.url)?;
    if let Some(refusal) = state.webhook_hosts.refusal(&url) {
        return Err(ValidationError::new("url", refusal).into());
    }
    let (secret, generated) = match body.secret {
        Some(secret) => (WebhookSecret::parse(secret)?, false),
        None => (WebhookSecret::generate(), true),
    };
    // Sealed at rest under the upstream key when the server has one
    // (`serve` always does), like upstream credentials; the delivery
    // worker opens it to sign.
    let stored = match &state.upstream_key {
        Some(key) => key
            .seal_webhook_secret(&tenant, &secret)
            .map_err(|e| ApiError::internal(e.to_string()))?,
        None => secret.clone(),
    };
    let new = NewWebhook {
        url,
        events: WebhookEvents::parse_list(&body.events)?,
        secret: stored,
    };
    let webhook = state
        .store
        .create_webhook(&tenant, &new, Timestamp::now())
        .await?;
    let mut answer = json!(webhook);
    if generated {
        answer["secret"] = json!(secret.expose());
    }
    Ok(HttpResponse::Created().json(answer))
}

pub(crate) async fn list(
    state: web::Data<AppState>,
    scope: ReadTenant,
) -> Result<HttpResponse, ApiError> {
    let tenant = scope.tenant;
    let webhooks = state.store.list_webhooks(&tenant).await?;
    Ok(HttpResponse::Ok().json(json!({ "webhooks": webhooks })))
}

pub(crate) async fn delete(
    state: web::Data<AppState>,
    scope: ManageTenant,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (_, id) = path.into_inner();
    let tenant = scope.tenant;
    let id = WebhookId::parse(id)?;
    match state.store.delete_webhook(&tenant, &id).await {
        Ok(()) => {}
        Err(StoreError::NotFound { .. }) => {
            return Err(ApiError::not_found(format!(
                "no webhook {id} in tenant {tenant}: nothing was deleted"
            )));
        }
        Err(err) => return Err(err.into()),
    }
    Ok(HttpResponse::Ok().json(json!({ "deleted": id })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_create_body_never_prints_its_secret_or_the_urls_query() {
        let body: CreateBody = serde_json::from_value(json!({
            "url": "https://hooks.example.com/in?token=url-token-1",
            "events": ["issue.created"],
            "secret": "whsec_do-not-print-me",
        }))
        .unwrap();
        let printed = format!("{body:?}");
        assert!(!printed.contains("do-not-print-me"), "{printed}");
        assert!(!printed.contains("url-token-1"), "{printed}");
        assert!(printed.contains("hooks.example.com/in"), "{printed}");
        assert!(printed.contains("<redacted>"), "{printed}");
    }
}
