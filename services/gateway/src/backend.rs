//! The MCP backend every run's requests are served by: the board tools,
//! pinned to the run the request arrived for.
//!
//! One [`corkboard_mcp::McpEndpoint`] serves every run of a gateway (a
//! per-run endpoint would cost memory per idle run for nothing). What makes
//! a request a request *for run R* is its `RequestScope`, set by the
//! gateway around the endpoint call: the run expected at this port or
//! route, the binding snapshot the request keeps for its whole life, and
//! (shared mode) the grant the gateway already resolved to route the
//! request. [`GatewayBackend::authenticate`] refuses a token whose grant is
//! for another run or tenant, however valid it is elsewhere.

use crate::binding::Binding;
use crate::boardless::BOARDLESS_MESSAGE;
use crate::key::RunKey;
use async_trait::async_trait;
use corkboard_board::{Grant, Timestamp};
use corkboard_grants::{RunToken, TokenHash};
use corkboard_mcp::{
    AuthRejection, Principal, RefusedCall, ServerIdentity, ToolBackend, ToolCall, ToolOutput,
    ToolSet,
};
use corkboard_tools::ResolvedGrant;
use std::sync::Arc;

tokio::task_local! {
    static SCOPE: RequestScope;
}

/// What the gateway knows about a request before the MCP endpoint sees it.
#[derive(Clone)]
pub(crate) struct RequestScope {
    pub binding: Arc<Binding>,
    pub expected: RunKey,
    /// A grant the gateway resolved from this request's token already
    /// (with the same binding), so the token is not resolved twice.
    pub resolved: Option<(TokenHash, Grant)>,
}

impl RequestScope {
    /// Runs `future` (the endpoint call) inside this scope.
    pub async fn run<F: std::future::Future>(self, future: F) -> F::Output {
        SCOPE.scope(self, future).await
    }
}

/// The caller of a run's request: its grant and the binding it is served with.
#[derive(Clone)]
pub struct RunPrincipal {
    grant: ResolvedGrant,
    binding: Arc<Binding>,
}

impl std::fmt::Debug for RunPrincipal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunPrincipal")
            .field("grant", &self.grant.grant().id)
            .finish_non_exhaustive()
    }
}

impl RunPrincipal {
    pub fn grant(&self) -> &Grant {
        self.grant.grant()
    }
}

impl Principal for RunPrincipal {
    fn session_binding(&self) -> &str {
        self.grant.grant().id.as_str()
    }
}

/// The board tools, pinned per request to the request's run.
#[derive(Debug)]
pub struct GatewayBackend {
    identity: ServerIdentity,
}

impl GatewayBackend {
    pub fn new() -> Self {
        Self {
            identity: corkboard_tools::server_identity(),
        }
    }
}

impl Default for GatewayBackend {
    fn default() -> Self {
        Self::new()
    }
}

/// The message for a valid token presented at another run's gateway.
pub(crate) const OTHER_RUN: &str = "this run token belongs to another run: each run's gateway accepts only the token issued for that run";

#[async_trait]
impl ToolBackend for GatewayBackend {
    type Principal = RunPrincipal;

    fn identity(&self) -> &ServerIdentity {
        &self.identity
    }

    async fn authenticate(&self, bearer: Option<&str>) -> Result<RunPrincipal, AuthRejection> {
        // Outside a gateway request there is no run to pin to: fail closed.
        let scope = SCOPE
            .try_with(RequestScope::clone)
            .map_err(|_| AuthRejection::Unavailable("gateway request scope missing".to_owned()))?;
        let pre_resolved = match (&scope.resolved, bearer.and_then(RunToken::from_presented)) {
            (Some((hash, grant)), Some(token)) if token.hash() == *hash => Some(grant.clone()),
            _ => None,
        };
        let grant = match pre_resolved {
            Some(grant) => {
                if grant.is_expired_at(Timestamp::now()) {
                    return Err(AuthRejection::Refused("run token expired".to_owned()));
                }
                grant
            }
            None => scope
                .binding
                .tools()
                .authenticate(bearer)
                .await?
                .grant()
                .clone(),
        };
        if grant.tenant != scope.expected.tenant || grant.run != scope.expected.run {
            return Err(AuthRejection::Refused(OTHER_RUN.to_owned()));
        }
        Ok(RunPrincipal {
            grant: ResolvedGrant::new(grant),
            binding: scope.binding,
        })
    }

    fn tools(&self, principal: &RunPrincipal) -> Arc<ToolSet> {
        principal.binding.tools().tools(&principal.grant)
    }

    async fn call_tool(&self, principal: &RunPrincipal, call: ToolCall<'_>) -> ToolOutput {
        let mut output = principal
            .binding
            .tools()
            .call_tool(&principal.grant, call)
            .await;
        // A boardless binding's store answers "unavailable" to everything;
        // the tools word that as a passing outage ("retryable"), which would
        // send the agent into a retry loop. Say what is actually the case.
        if principal.binding.is_boardless()
            && output.is_error
            && output.text.starts_with("board unavailable")
        {
            output.text = BOARDLESS_MESSAGE.to_owned();
        }
        output
    }

    fn call_refused(&self, principal: &RunPrincipal, call: RefusedCall<'_>) -> Option<String> {
        // The board tools audit refused calls and name missing capabilities.
        principal
            .binding
            .tools()
            .call_refused(&principal.grant, call)
    }
}
