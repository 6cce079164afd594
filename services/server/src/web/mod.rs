//! The web board: a single page served at `/` with every asset embedded,
//! sign-in (a one-time link from `corkboard serve`, or an admin JWT
//! exchanged for a session), and live updates over Server-Sent Events.
//!
//! The page is a client of the JSON API under `/v1/`: it holds no
//! privileges of its own. Its requests carry the session cookie, which
//! [`session::authenticate`] turns into the same [`AdminPrincipal`] a bearer
//! JWT would give, so roles and tenant scoping are exactly the admin API's.
//!
//! Routes: `/`, `/assets/{name}`, `/signin`, `/web/session` (GET, POST),
//! `/web/logout`, `/web/tenants`, `/v1/tenants/{tenant}/events`,
//! `/v1/tenants/{tenant}/board` (the columns, each paged on its own).
//! They need a [`WebState`] in the app data beside the
//! [`AppState`](crate::AppState).
//!
//! [`AdminPrincipal`]: corkboard_grants::AdminPrincipal

pub mod actions;
pub mod board;
pub mod events;
pub mod live;
pub mod pages;
pub mod session;
pub mod signin;

pub use events::{
    BoardEvent, BoardEvents, EventPublishingSink, MemoryEvents, RedisEvents, RedisEventsConfig,
};
pub use session::{Session, WebAuth, authenticate};
pub use signin::SigninCodes;

use crate::state::StartError;
use actix_web::dev::Payload;
use actix_web::{FromRequest, HttpRequest, web};
use corkboard_api::ApiError;
use corkboard_board::{Issue, RunId, TenantId};
use corkboard_config::{RegistryKind, Settings};
use std::future::{Ready, ready};
use std::sync::Arc;
use tokio::sync::watch;

/// What the web routes share across workers (and, through the event bus,
/// across replicas). Cheap to clone.
#[derive(Clone)]
pub struct WebState {
    inner: Arc<Inner>,
}

struct Inner {
    events: Arc<dyn BoardEvents>,
    signin: SigninCodes,
    closing: watch::Sender<bool>,
}

impl std::fmt::Debug for WebState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebState")
            .field("events", &self.inner.events)
            .finish_non_exhaustive()
    }
}

impl WebState {
    pub fn new(events: Arc<dyn BoardEvents>) -> Self {
        let (closing, _) = watch::channel(false);
        Self {
            inner: Arc::new(Inner {
                events,
                signin: SigninCodes::default(),
                closing,
            }),
        }
    }

    /// The event bus the settings call for: Redis pub/sub when the token
    /// registry is Redis (so every replica's pages see every write),
    /// in-process otherwise. Must run inside the tokio runtime.
    pub fn from_settings(settings: &Settings) -> Result<Self, StartError> {
        let events: Arc<dyn BoardEvents> = match settings.registry {
            RegistryKind::Memory => Arc::new(MemoryEvents::new()),
            RegistryKind::Redis => {
                let urls = settings.redis_urls();
                Arc::new(RedisEvents::start(RedisEventsConfig {
                    urls,
                    key_prefix: settings.redis_key_prefix.clone(),
                })?)
            }
        };
        Ok(Self::new(events))
    }

    /// The event bus (to wrap the tools' audit sink with
    /// [`EventPublishingSink`]).
    pub fn events(&self) -> Arc<dyn BoardEvents> {
        self.inner.events.clone()
    }

    pub fn signin_codes(&self) -> &SigninCodes {
        &self.inner.signin
    }

    /// Creates a one-time sign-in link (platform admin, valid for
    /// [`signin::SIGNIN_LINK_TTL`]) for this process to print. The code is
    /// kept only as a hash.
    pub fn create_signin_link(&self, base_url: &str) -> String {
        let code = self.inner.signin.create(signin::SIGNIN_LINK_TTL);
        format!("{}/signin?code={code}", base_url.trim_end_matches('/'))
    }

    /// Publishes that `issue` changed (call after a successful write that
    /// did not go through the MCP tools, e.g. the API's PATCH).
    pub fn issue_changed(&self, issue: &Issue) {
        self.inner
            .events
            .publish(&issue.tenant, events::issue_changed(issue));
    }

    /// Publishes that grants of `tenant` (of `run`, when known) changed.
    pub fn grants_changed(&self, tenant: &TenantId, run: Option<&RunId>) {
        self.inner
            .events
            .publish(tenant, BoardEvent::GrantsChanged { run: run.cloned() });
    }

    /// Ends every open event stream (browsers reconnect to whichever
    /// replica is still up). Call when the server starts shutting down, so
    /// open pages do not hold the graceful shutdown for its whole timeout.
    pub fn close(&self) {
        self.inner.closing.send_replace(true);
    }

    fn closing(&self) -> watch::Receiver<bool> {
        self.inner.closing.subscribe()
    }
}

/// Approval items made or decided reach open pages of their tenant.
impl corkboard_tools::ApprovalEvents for WebState {
    fn approval_changed(&self, item: &corkboard_board::ApprovalItem) {
        self.inner.events.publish(
            &item.tenant,
            BoardEvent::ApprovalChanged {
                id: item.id.clone(),
                status: item.status,
            },
        );
    }

    /// The live feed's approval events of `tenant` (from every replica on
    /// the Redis bus), forwarded while a held call listens.
    fn decisions(
        &self,
        tenant: &TenantId,
    ) -> Option<tokio::sync::mpsc::Receiver<corkboard_board::ApprovalId>> {
        use futures_util::StreamExt as _;
        let mut events = self.inner.events.subscribe(tenant);
        let (tx, rx) = tokio::sync::mpsc::channel(16);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    () = tx.closed() => break,
                    event = events.next() => match event {
                        Some(BoardEvent::ApprovalChanged { id, .. }) => {
                            if tx.send(id).await.is_err() {
                                break;
                            }
                        }
                        Some(_) => {}
                        None => break,
                    },
                }
            }
        });
        Some(rx)
    }
}

/// The request's [`WebState`]: the one place that says where it lives
/// (the app data, beside the `AppState`).
pub fn web_state_of(req: &HttpRequest) -> Option<WebState> {
    req.app_data::<web::Data<crate::state::AppState>>()
        .map(|state| state.web.clone())
}

impl FromRequest for WebState {
    type Error = ApiError;
    type Future = Ready<Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        ready(
            web_state_of(req)
                .ok_or_else(|| ApiError::internal("web state missing from the app data".into())),
        )
    }
}

/// [`WebState::issue_changed`] for a request (no-op without a
/// [`WebState`]): the one call the API handlers need after a PATCH.
pub fn publish_issue_changed(req: &HttpRequest, issue: &Issue) {
    if let Some(web_state) = web_state_of(req) {
        web_state.issue_changed(issue);
    }
}

/// [`WebState::grants_changed`] for a request (no-op without a
/// [`WebState`]): the call the API handlers need after issuing or revoking.
pub fn publish_grants_changed(req: &HttpRequest, tenant: &TenantId, run: Option<&RunId>) {
    if let Some(web_state) = web_state_of(req) {
        web_state.grants_changed(tenant, run);
    }
}

/// Mounts the web routes. Must be registered before the `/v1` API scope,
/// which would otherwise answer the event stream's path with its 404.
pub fn configure(cfg: &mut web::ServiceConfig) {
    let headers = pages::security_headers;
    cfg.service(
        web::resource("/")
            .wrap(headers())
            .route(web::get().to(pages::index)),
    )
    .service(
        web::resource("/assets/{name}")
            .wrap(headers())
            .route(web::get().to(pages::asset)),
    )
    .service(
        web::resource("/signin")
            .wrap(headers())
            .route(web::get().to(signin::signin_link)),
    )
    .service(
        web::resource("/web/session")
            .wrap(headers())
            .route(web::get().to(signin::current))
            .route(web::post().to(signin::exchange)),
    )
    .service(
        web::resource("/web/logout")
            .wrap(headers())
            .route(web::post().to(signin::logout)),
    )
    .service(
        web::resource("/web/tenants")
            .wrap(headers())
            .route(web::get().to(signin::tenants)),
    )
    .service(
        web::resource("/v1/tenants/{tenant}/events")
            .wrap(headers())
            .route(web::get().to(live::events)),
    )
    .service(
        web::resource("/v1/tenants/{tenant}/board")
            .wrap(headers())
            .route(web::get().to(board::board)),
    );
}

#[cfg(test)]
mod tests;
