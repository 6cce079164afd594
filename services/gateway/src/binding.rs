//! What a run's requests are served with (the [`RunBackend`] its tool
//! calls are routed to, over a board store, a token registry and an audit
//! sink), and how it is replaced atomically.
//!
//! A request takes one snapshot of the binding when it enters the gateway
//! and uses that snapshot for everything it does: resolving its token,
//! listing tools, calling them. Swapping the binding (a store or registry
//! client replaced after a reconnect) therefore never shows a request half
//! of the old binding and half of the new one.

use crate::boardless::BoardlessStore;
use async_trait::async_trait;
use corkboard_board::AuditSink;
use corkboard_board::IssueStore;
use corkboard_grants::ResolvedGrant;
use corkboard_grants::TokenRegistry;
use corkboard_mcp::{RefusedCall, ToolBackend, ToolCall, ToolOutput, ToolSet};
use corkboard_tools::{ApprovalGate, BoardTool, BoardTools};
use corkboard_upstream::Upstreams;
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The tools a run's requests are routed to. **API boundary**: what the
/// gateway serves for a run is whatever implements this.
#[async_trait]
pub trait RunBackend: Send + Sync + 'static {
    /// The tools this grant may see, built once per capability set.
    fn tools(&self, grant: &ResolvedGrant) -> Arc<ToolSet>;

    /// Runs one listed tool whose arguments passed its schema.
    async fn call_tool(&self, grant: &ResolvedGrant, call: ToolCall<'_>) -> ToolOutput;

    /// Told about a call the protocol layer refused (audit); may name why.
    fn call_refused(&self, grant: &ResolvedGrant, call: RefusedCall<'_>) -> Option<String>;

    /// The log label of a tool name (never client text).
    fn tool_label(&self, name: &str) -> &'static str;
}

#[async_trait]
impl RunBackend for BoardTools {
    fn tools(&self, grant: &ResolvedGrant) -> Arc<ToolSet> {
        ToolBackend::tools(self, grant)
    }

    async fn call_tool(&self, grant: &ResolvedGrant, call: ToolCall<'_>) -> ToolOutput {
        ToolBackend::call_tool(self, grant, call).await
    }

    fn call_refused(&self, grant: &ResolvedGrant, call: RefusedCall<'_>) -> Option<String> {
        ToolBackend::call_refused(self, grant, call)
    }

    fn tool_label(&self, name: &str) -> &'static str {
        BoardTool::from_name(name).map_or("other", BoardTool::name)
    }
}

/// A board store, a registry and an audit sink, wired into the board
/// tools; and the tenants' upstream servers, when configured.
pub struct Binding {
    registry: Arc<dyn TokenRegistry>,
    tools: BoardTools,
    upstreams: Option<Arc<Upstreams>>,
    approvals: Option<Arc<ApprovalGate>>,
}

impl std::fmt::Debug for Binding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Binding")
            .field("tools", &self.tools)
            .finish_non_exhaustive()
    }
}

impl Binding {
    pub fn new(
        store: Arc<dyn IssueStore>,
        registry: Arc<dyn TokenRegistry>,
        audit: Arc<dyn AuditSink>,
        store_timeout: Duration,
    ) -> Self {
        let tools =
            BoardTools::new(store, registry.clone(), audit).with_store_timeout(store_timeout);
        Self {
            registry,
            tools,
            upstreams: None,
            approvals: None,
        }
    }

    /// A binding with no board behind it: every tool is listed and every
    /// call answers that this run has no board (see [`BoardlessStore`]: a
    /// typed "not configured" store error the tools word as such).
    pub fn boardless(
        registry: Arc<dyn TokenRegistry>,
        audit: Arc<dyn AuditSink>,
        store_timeout: Duration,
    ) -> Self {
        Self::new(Arc::new(BoardlessStore), registry, audit, store_timeout)
    }

    /// Bounds every tool result to `bytes` (see
    /// [`BoardTools::with_result_budget`]).
    pub fn with_result_budget(mut self, bytes: usize) -> Self {
        self.tools = self.tools.with_result_budget(bytes);
        self
    }

    /// Gives claims a lease of `lease` (see [`BoardTools::with_claim_lease`]).
    pub fn with_claim_lease(mut self, lease: Duration) -> Self {
        self.tools = self.tools.with_claim_lease(lease);
        self
    }

    /// Counts budgeted grants' writes in `counter` (see
    /// [`BoardTools::with_budgets`]).
    pub fn with_budgets(mut self, counter: Arc<dyn corkboard_grants::BudgetCounter>) -> Self {
        self.tools = self.tools.with_budgets(counter);
        self
    }

    /// Reads each tenant's choice for credentials in board writes from
    /// `policies` (see [`BoardTools::with_secret_policies`]).
    pub fn with_secret_policies(mut self, policies: Arc<corkboard_tools::SecretPolicies>) -> Self {
        self.tools = self.tools.with_secret_policies(policies);
        self
    }

    /// Reads which grants called upstream tools from `calls` (see
    /// [`BoardTools::with_upstream_calls`]).
    pub fn with_upstream_calls(mut self, calls: Arc<corkboard_grants::UpstreamCalls>) -> Self {
        self.tools = self.tools.with_upstream_calls(calls);
        self
    }

    /// Counts this binding's tool calls in `metrics`.
    pub fn with_metrics(mut self, metrics: corkboard_telemetry::Metrics) -> Self {
        self.tools = self.tools.with_metrics(metrics);
        self
    }

    /// Serves the tenants' upstream MCP servers next to the board (see
    /// `corkboard_upstream`): grants with `upstream:` capabilities see
    /// their tools.
    pub fn with_upstreams(mut self, upstreams: Arc<Upstreams>) -> Self {
        self.upstreams = Some(upstreams);
        self
    }

    /// Asks `gate` before every board and upstream tool call whether it must
    /// wait for a person's approval (board calls: [`BoardTools::with_approvals`];
    /// upstream calls: [`Binding::approvals`], asked by the gateway backend).
    pub fn with_approvals(mut self, gate: Arc<ApprovalGate>) -> Self {
        self.tools = self.tools.with_approvals(gate.clone());
        self.approvals = Some(gate);
        self
    }

    /// The approval gate, when configured.
    pub fn approvals(&self) -> Option<&Arc<ApprovalGate>> {
        self.approvals.as_ref()
    }

    /// The upstream servers, when configured.
    pub fn upstreams(&self) -> Option<&Arc<Upstreams>> {
        self.upstreams.as_ref()
    }

    pub fn registry(&self) -> &Arc<dyn TokenRegistry> {
        &self.registry
    }

    /// What this binding's tool calls are routed to.
    pub fn backend(&self) -> &dyn RunBackend {
        &self.tools
    }

    /// The bound on a store call and on a token lookup.
    pub fn store_timeout(&self) -> Duration {
        self.tools.store_timeout()
    }
}

/// The current binding, replaced as a whole.
#[derive(Debug)]
pub struct BindingCell {
    current: RwLock<Arc<Binding>>,
}

impl BindingCell {
    pub fn new(binding: Binding) -> Self {
        Self {
            current: RwLock::new(Arc::new(binding)),
        }
    }

    /// The binding a request keeps for its whole life.
    pub fn load(&self) -> Arc<Binding> {
        // The lock only guards an `Arc` clone or swap, which cannot panic
        // half-way; a poisoned lock still holds a whole binding.
        self.current
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }

    /// Replaces the binding; requests already in flight finish on the old one.
    pub fn swap(&self, binding: Binding) -> Arc<Binding> {
        let mut current = self
            .current
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        std::mem::replace(&mut *current, Arc::new(binding))
    }
}
