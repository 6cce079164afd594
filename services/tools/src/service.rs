//! [`BoardTools`]: the board served through [`ToolBackend`].

use crate::approvals::{ApprovalGate, Gate};
use crate::defs::{BoardTool, grant_tool_set};
use crate::error::ToolsError;
use crate::kept_answers::{KeptAnswers, KeptBounds};
use crate::result_budget::{DEFAULT_RESULT_BUDGET, MIN_RESULT_BUDGET};
use crate::text::{Screened, SecretPolicies, screen_fields};
use crate::tool::{
    Success, add_comment, args, board_stats, claim_issue, claim_next, collect_approval,
    create_issue, create_issues, get_issue, list_issues, release_issue, search_issues,
    update_issue,
};
use async_trait::async_trait;
use corkboard_board::AuditSink;
use corkboard_board::{
    ArgumentsHash, AuditOutcome, AuditRecord, Author, BudgetKind, Claimant, CommentWindow,
    IdempotencyKey, Integrity, Issue, IssueId, IssueStore, StoreError, Timestamp, queue_limits,
};
use corkboard_grants::{
    BudgetCounter, RateLimiter, Reservation, RunKey, TokenRegistry, UpstreamCalls,
};
use corkboard_grants::{ResolvedGrant, resolve_bearer};
use corkboard_mcp::{
    AuthRejection, Authenticate, Refusal, RefusalKind, RefusedCall, RpcError, ServerIdentity,
    ToolBackend, ToolCall, ToolOutput, ToolSet, Transport,
};
use serde_json::{Map, Value};
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a store or registry call may take before the tool answers
/// "board unavailable" instead of keeping the agent waiting.
pub const DEFAULT_STORE_TIMEOUT: Duration = Duration::from_secs(5);

const INSTRUCTIONS: &str = "Corkboard is the shared issue board of the team you work for. \
You are connected as one agent run: the board you see and what you may do on it come from \
your run's grant, so no tool takes a board or tenant argument, and the tools you see are the \
ones your grant allows. Typical flow: search_issues to find issues by words in their title, \
body or comments (and avoid duplicates), list_issues to see what exists by state or label (board_stats for the counts), \
get_issue to read one issue with its comments, create_issue to file new work (create_issues \
for up to 50 at once, e.g. the sub-issues of a plan), update_issue \
to move it between states (inbox, triage, todo, in_progress, blocked, done, closed) or \
change its labels and priority, add_comment to record progress. When several agents share \
the board and you may claim issues: claim_next takes the best ready issue for you (or \
list_issues with ready=true, then claim_issue one; if another run holds it, pick other work), \
release_issue if you give it up; a claim lapses unless you write to the issue or claim it \
again within its lease, and closing it or the end of your run ends it. Issue ids look like \
iss_01JD3Z9Q4X8M2N6P7R5S1T0V9W: always quote them exactly as a tool returned them, never \
shorten, guess or retype them. Pass an idempotency_key to create_issue and add_comment when \
you might retry, and expected_version to update_issue. Every answer fits a budget of about \
8,000 tokens (32,000 bytes unless the operator set another): list_issues returns short \
summaries (ask for more with fields, include_body or include_comments, or read one issue with \
get_issue), get_issue the latest 10 comments (comments_cursor reaches the older ones). An \
answer that would be larger is cut at an issue or comment boundary and says so in \
`truncated` (what was left out and the call that gets it) and, for a body, in \
`body_truncated`; nothing is dropped silently. An error starting with \"board \
unavailable\" is temporary: wait a few seconds and retry. A call that awaits a person's approval \
answers with a handle: collect_approval with it gives the outcome later.";

/// Who the board says it is in `initialize` and `server/discover`.
pub fn server_identity() -> ServerIdentity {
    ServerIdentity {
        name: "corkboard".to_owned(),
        version: env!("CARGO_PKG_VERSION").to_owned(),
        title: Some("Corkboard".to_owned()),
        instructions: Some(INSTRUCTIONS.to_owned()),
    }
}

/// The board's tools over MCP.
///
/// Cheap to share behind an `Arc`; to rebind a run to another store or
/// registry, build a new `BoardTools` and swap the `Arc` as a whole.
pub struct BoardTools {
    store: Arc<dyn IssueStore>,
    registry: Arc<dyn TokenRegistry>,
    audit: Arc<dyn AuditSink>,
    store_timeout: Duration,
    identity: ServerIdentity,
    metrics: Option<corkboard_telemetry::Metrics>,
    /// Meters each run's requests (HTTP, and each request of a batch);
    /// none: unmetered (stdio, where the caller is one local process).
    limiter: Option<Arc<dyn RateLimiter>>,
    /// Bytes one successful answer may cost (see `result_budget`).
    result_budget: usize,
    /// Where budgeted grants' writes are counted; none: a budgeted write
    /// is refused as unavailable (never let through uncounted).
    budgets: Option<Arc<dyn BudgetCounter>>,
    /// How long a claim lasts without a write to its issue or a renewal.
    claim_lease: Duration,
    /// Each tenant's choice for credentials in board writes (refused when
    /// unknown).
    secrets: Arc<SecretPolicies>,
    /// Decides which calls wait for a person; none: no call does.
    approvals: Option<Arc<ApprovalGate>>,
    /// Which grants' runs called upstream tools: the level of their writes.
    upstream_calls: Option<Arc<UpstreamCalls>>,
    /// The latest `get_issue` answers and `list_issues` pages, given again
    /// while the tenant's epoch says nothing changed (`kept_answers.rs`).
    kept: Arc<KeptAnswers>,
}

impl std::fmt::Debug for BoardTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BoardTools")
            .field("store_timeout", &self.store_timeout)
            .field("result_budget", &self.result_budget)
            .field("identity", &self.identity.name)
            .finish_non_exhaustive()
    }
}

impl BoardTools {
    /// The one audit record and the one log event of a tool call. A name
    /// that is not a board tool is recorded as `unknown`: client-chosen
    /// strings do not go into the audit trail.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn account(
        &self,
        principal: &ResolvedGrant,
        tool: Option<BoardTool>,
        at: Timestamp,
        latency: Duration,
        outcome: AuditOutcome,
        raw_arguments: &[u8],
        issue: Option<IssueId>,
    ) {
        let grant = principal.grant();
        let latency_micros = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        let name = tool.map_or("unknown", BoardTool::name);
        corkboard_telemetry::mcp::record_principal(
            &tracing::Span::current(),
            grant.tenant.as_str(),
            grant.run.as_str(),
            grant.id.as_str(),
        );
        if let Some(metrics) = &self.metrics {
            metrics.tool_call(name, outcome.as_str(), latency);
        }
        self.audit.record(AuditRecord {
            at,
            tenant: grant.tenant.clone(),
            run: grant.run.clone(),
            grant: grant.id.clone(),
            tool: name.to_owned(),
            outcome,
            latency_micros,
            arguments_hash: ArgumentsHash::of(raw_arguments),
            definition_hash: None,
            issue,
        });
        // Debug: the exchange's own event (MCP endpoint or gateway) already
        // says which tool ran and how, inside a span naming the grant; one
        // info line per request keeps logging off the hot path's profile.
        tracing::debug!(
            tool = name,
            tenant = %grant.tenant,
            run = %grant.run,
            grant = %grant.id,
            outcome = outcome.as_str(),
            latency_us = latency_micros,
            "tool call"
        );
    }
}

impl BoardTools {
    pub fn new(
        store: Arc<dyn IssueStore>,
        registry: Arc<dyn TokenRegistry>,
        audit: Arc<dyn AuditSink>,
    ) -> Self {
        Self {
            store,
            registry,
            audit,
            store_timeout: DEFAULT_STORE_TIMEOUT,
            identity: server_identity(),
            metrics: None,
            limiter: None,
            result_budget: DEFAULT_RESULT_BUDGET,
            budgets: None,
            claim_lease: queue_limits::CLAIM_LEASE_DEFAULT,
            secrets: Arc::default(),
            approvals: None,
            upstream_calls: None,
            kept: Arc::new(KeptAnswers::new(KeptBounds::DEFAULT)),
        }
    }

    /// The `get_issue` answers and `list_issues` pages kept to be given
    /// again.
    pub(crate) fn kept(&self) -> &KeptAnswers {
        &self.kept
    }

    /// Gives claims a lease of `lease` (at least
    /// [`queue_limits::CLAIM_LEASE_MIN`], which a shorter one is raised
    /// to: configuration refuses one).
    pub fn with_claim_lease(mut self, lease: Duration) -> Self {
        self.claim_lease = lease.max(queue_limits::CLAIM_LEASE_MIN);
        self
    }

    pub fn claim_lease(&self) -> Duration {
        self.claim_lease
    }

    /// The caller as a claimant: its run, its grant and that grant's
    /// expiry (never from input), with this board's lease.
    pub(crate) async fn claimant(&self, principal: &ResolvedGrant) -> Claimant {
        Claimant::of(
            principal.grant(),
            self.claim_lease,
            self.writer_integrity(principal).await,
        )
    }

    /// Who a write is recorded as: the grant's run, at the level it
    /// writes at now (`UpstreamCalls::writer_integrity`).
    pub(crate) async fn author(&self, principal: &ResolvedGrant) -> Author {
        let grant = principal.grant();
        Author::run(
            grant.run.clone(),
            Some(grant.id.clone()),
            self.writer_integrity(principal).await,
        )
    }

    /// The level the caller's run writes at: [`Integrity::Agent`] unless
    /// its grant has called an upstream tool (or could have, where no
    /// record of such calls is kept).
    pub(crate) async fn writer_integrity(&self, principal: &ResolvedGrant) -> Integrity {
        UpstreamCalls::writer_integrity(self.upstream_calls.as_deref(), principal.grant()).await
    }

    /// Refuses a write to `id` when the issue is below the floor of the
    /// caller's grant, before anything is written: one read, made only
    /// for grants that set a floor.
    pub(crate) async fn check_floor(
        &self,
        principal: &ResolvedGrant,
        id: &IssueId,
    ) -> Result<(), ToolsError> {
        let grant = principal.grant();
        if grant.min_integrity.is_none() {
            return Ok(());
        }
        let read = self
            .bounded(
                Some(id),
                self.store
                    .get_issue_view(&grant.tenant, id, &CommentWindow::latest(1)),
            )
            .await?;
        crate::provenance::check(&read.issue, grant.min_integrity)
    }

    /// Reads which grants called upstream tools from `calls` (the run
    /// gateways mark them there); without, a grant that may call upstream
    /// tools writes at [`Integrity::External`].
    pub fn with_upstream_calls(mut self, calls: Arc<UpstreamCalls>) -> Self {
        self.upstream_calls = Some(calls);
        self
    }

    /// Renews the caller's lease on `issue` after a write of its to it
    /// (any write by the holder keeps its claim alive), answering the
    /// issue with the new end; a failed renewal leaves the answer as it
    /// was (the write itself succeeded) and is logged. `integrity` is the
    /// level the write was recorded at, so it is not looked up twice.
    pub(crate) async fn renew_claim(
        &self,
        principal: &ResolvedGrant,
        integrity: Integrity,
        issue: Issue,
    ) -> Issue {
        let grant = principal.grant();
        let holds = issue
            .claim
            .as_ref()
            .is_some_and(|c| c.run == grant.run && c.grant == grant.id);
        if !holds {
            return issue;
        }
        let claimant = Claimant::of(grant, self.claim_lease, integrity);
        match tokio::time::timeout(
            self.store_timeout,
            self.store
                .claim_issue(&grant.tenant, &issue.id, &claimant, None),
        )
        .await
        {
            Ok(Ok(renewed)) if renewed.version == issue.version => renewed,
            // Changed again meanwhile: the write's own answer stands.
            Ok(Ok(_)) => issue,
            Ok(Err(err)) => {
                tracing::debug!(issue = %issue.id, error = %err, "claim renewal after a write failed");
                issue
            }
            Err(_) => {
                tracing::debug!(issue = %issue.id, "claim renewal after a write timed out");
                issue
            }
        }
    }

    /// Asks `gate` before every board tool call whether it must wait for a
    /// person's approval.
    pub fn with_approvals(mut self, gate: Arc<ApprovalGate>) -> Self {
        self.approvals = Some(gate);
        self
    }

    /// The approval gate this board asks, if any (the collect tool's).
    pub(crate) fn approvals(&self) -> Option<&ApprovalGate> {
        self.approvals.as_deref()
    }

    /// Counts budgeted grants' writes in `counter` (the grant service's:
    /// the ledger, or Redis when the registry is Redis).
    pub fn with_budgets(mut self, counter: Arc<dyn BudgetCounter>) -> Self {
        self.budgets = Some(counter);
        self
    }

    /// Reads each tenant's choice for credentials in board writes
    /// (refuse or redact) from `policies` (without: refused).
    pub fn with_secret_policies(mut self, policies: Arc<SecretPolicies>) -> Self {
        self.secrets = policies;
        self
    }

    /// Runs `write` under the grant's budget of `kind`, if it has one: one
    /// write is reserved first (refused with [`ToolsError::BudgetExhausted`]
    /// when none is left) and given back when `wrote_nothing` says the
    /// store wrote nothing (an idempotent replay, a create refused for a
    /// near match) or the error says the write certainly did not happen
    /// ([`ToolsError::wrote_nothing`]); kept when the outcome is unknown.
    ///
    /// A spent budget still lets a repeat under an idempotency key the run
    /// already used through (`key`: the call's key, if any): the store
    /// answers it from its record (the original result, or a conflict) and
    /// writes nothing, so it takes nothing.
    pub(crate) async fn budgeted<T>(
        &self,
        principal: &ResolvedGrant,
        kind: BudgetKind,
        key: Option<&IdempotencyKey>,
        write: impl Future<Output = Result<T, ToolsError>>,
        wrote_nothing: impl FnOnce(&T) -> bool,
    ) -> Result<T, ToolsError> {
        let grant = principal.grant();
        if grant.budgets.limit(kind).is_none() {
            return write.await;
        }
        let Some(counter) = &self.budgets else {
            return Err(ToolsError::Unavailable {
                reason: format!("this run's {kind} budget cannot be counted here"),
            });
        };
        let unavailable = |reason: String| ToolsError::Unavailable { reason };
        match tokio::time::timeout(self.store_timeout, counter.reserve(grant, kind)).await {
            Ok(Ok(Reservation::Taken)) => {}
            Ok(Ok(Reservation::Exhausted { limit })) => {
                if let Some(key) = key {
                    let used = self
                        .bounded(
                            None,
                            self.store.idempotency_key_used(
                                &grant.tenant,
                                &grant.run,
                                key,
                                kind == BudgetKind::AddComment,
                            ),
                        )
                        .await?;
                    if used {
                        return write.await;
                    }
                }
                return Err(ToolsError::BudgetExhausted { kind, limit });
            }
            Ok(Err(err)) => return Err(unavailable(err.to_string())),
            Err(_elapsed) => {
                // Nothing was written; a late reservation may have been
                // counted, which can only make the budget stricter.
                return Err(unavailable(format!(
                    "the budget counter did not answer within {}s",
                    self.store_timeout.as_secs_f64()
                )));
            }
        }
        let result = write.await;
        let give_back = match &result {
            Ok(value) => wrote_nothing(value),
            Err(err) => err.wrote_nothing(),
        };
        if give_back {
            match tokio::time::timeout(self.store_timeout, counter.release(grant, kind)).await {
                Ok(Ok(())) => {}
                // A lost release leaves the budget stricter than it
                // should be, never looser: logged, not failed.
                Ok(Err(err)) => {
                    tracing::warn!(grant = %grant.id, budget = %kind, error = %err, "budget release failed");
                }
                Err(_) => {
                    tracing::warn!(grant = %grant.id, budget = %kind, "budget release timed out");
                }
            }
        }
        result
    }

    /// Bounds every successful answer to `bytes` (structured JSON, text
    /// block and envelope; at least [`MIN_RESULT_BUDGET`], which a smaller
    /// value is raised to: configuration refuses one).
    pub fn with_result_budget(mut self, bytes: usize) -> Self {
        self.result_budget = bytes.max(MIN_RESULT_BUDGET);
        self
    }

    pub fn result_budget(&self) -> usize {
        self.result_budget
    }

    /// Charges every request to its run's rate limit in `limiter` (the
    /// same per-run limit as the run gateways').
    pub fn with_rate_limiter(mut self, limiter: Arc<dyn RateLimiter>) -> Self {
        self.limiter = Some(limiter);
        self
    }

    /// Takes one request from the caller's run rate limit.
    async fn charge(&self, principal: &ResolvedGrant) -> Result<(), Refusal> {
        let Some(limiter) = &self.limiter else {
            return Ok(());
        };
        let grant = principal.grant();
        let key = RunKey::new(grant.tenant.clone(), grant.run.clone());
        limiter.acquire(&key).await.map_err(|limited| {
            Refusal::rate_limited(format_args!("run {}", grant.run), limited.retry_after)
        })
    }

    /// Counts tool calls by tool and outcome.
    pub fn with_metrics(mut self, metrics: corkboard_telemetry::Metrics) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Bounds every store call, and the registry lookup of
    /// [`Authenticate::authenticate`], to `timeout`.
    pub fn with_store_timeout(mut self, timeout: Duration) -> Self {
        self.store_timeout = timeout;
        self
    }

    pub fn store_timeout(&self) -> Duration {
        self.store_timeout
    }

    /// The store every tool call goes to (each call through [`Self::bounded`]).
    pub(crate) fn store(&self) -> &dyn IssueStore {
        self.store.as_ref()
    }

    /// The registry run tokens are resolved through.
    pub fn registry(&self) -> &Arc<dyn TokenRegistry> {
        &self.registry
    }

    /// Runs one store call within the timeout, mapping its errors with the
    /// issue the call is about.
    pub(crate) async fn bounded<T>(
        &self,
        issue: Option<&IssueId>,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, ToolsError> {
        match tokio::time::timeout(self.store_timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(err)) => Err(ToolsError::from_store(err, issue)),
            Err(_elapsed) => Err(ToolsError::Timeout {
                after: self.store_timeout,
            }),
        }
    }

    /// Runs one call of `tool`: refused unless the grant has the tool's
    /// capability, otherwise the tool's own `run` (`tool/<name>.rs`) on
    /// its arguments with their free text cleaned and screened for
    /// credentials (`text.rs`); `true` with the answer when credentials
    /// were redacted.
    pub(crate) async fn execute(
        &self,
        principal: &ResolvedGrant,
        tool: BoardTool,
        arguments: &Map<String, Value>,
    ) -> Result<(Success, bool), ToolsError> {
        let grant = principal.grant();
        if let Some(missing) = tool.capability()
            && !grant.capabilities.allows(missing)
        {
            return Err(ToolsError::Denied {
                tool: tool.name(),
                missing,
                allowed: grant.capabilities.to_csv(),
            });
        }
        let (cleaned, screened) = match tool.text_fields() {
            [] => (None, Screened::default()),
            fields => screen_fields(&self.secrets, &grant.tenant, arguments, fields).await?,
        };
        let arguments = cleaned.as_ref().unwrap_or(arguments);
        let success = self.dispatch(principal, tool, arguments).await?;
        Ok((success, !screened.redacted.is_empty()))
    }

    async fn dispatch(
        &self,
        principal: &ResolvedGrant,
        tool: BoardTool,
        arguments: &Map<String, Value>,
    ) -> Result<Success, ToolsError> {
        match tool {
            BoardTool::ListIssues => list_issues::run(self, principal, arguments).await,
            BoardTool::GetIssue => get_issue::run(self, principal, arguments).await,
            BoardTool::CreateIssue => create_issue::run(self, principal, arguments).await,
            BoardTool::UpdateIssue => update_issue::run(self, principal, arguments).await,
            BoardTool::AddComment => add_comment::run(self, principal, arguments).await,
            BoardTool::ClaimIssue => claim_issue::run(self, principal, arguments).await,
            BoardTool::ReleaseIssue => release_issue::run(self, principal, arguments).await,
            BoardTool::SearchIssues => search_issues::run(self, principal, arguments).await,
            BoardTool::ClaimNext => claim_next::run(self, principal, arguments).await,
            BoardTool::CreateIssues => create_issues::run(self, principal, arguments).await,
            BoardTool::BoardStats => board_stats::run(self, principal, arguments).await,
            BoardTool::CollectApproval => collect_approval::run(self, principal, arguments).await,
        }
    }
}

#[async_trait]
impl Authenticate for BoardTools {
    async fn authenticate(&self, bearer: Option<&str>) -> Result<ResolvedGrant, AuthRejection> {
        resolve_bearer(self.registry.as_ref(), bearer, self.store_timeout).await
    }

    async fn admit(&self, principal: &ResolvedGrant) -> Result<(), Refusal> {
        self.charge(principal).await
    }
}

#[async_trait]
impl ToolBackend for BoardTools {
    type Principal = ResolvedGrant;

    fn identity(&self) -> &ServerIdentity {
        &self.identity
    }

    fn tools(&self, principal: &ResolvedGrant) -> Arc<ToolSet> {
        grant_tool_set(principal.grant())
    }

    async fn admit_batch_element(&self, principal: &ResolvedGrant) -> Result<(), RpcError> {
        // A grant revoked while the batch runs stops its other requests.
        corkboard_grants::reresolve(self.registry.as_ref(), principal, self.store_timeout)
            .await
            .map_err(|rejection| Refusal::credential(&rejection, Transport::Http).error)?;
        self.charge(principal)
            .await
            .map_err(|refusal| refusal.error)
    }

    /// A call that waits for a person may be held (2025 sessions), when
    /// the gate holds calls and the caller's tenant has policies.
    fn may_hold(&self, principal: &ResolvedGrant) -> bool {
        self.approvals
            .as_ref()
            .is_some_and(|gate| gate.may_hold(&principal.grant().tenant))
    }

    fn call_refused(&self, principal: &ResolvedGrant, call: RefusedCall<'_>) -> Option<String> {
        let tool = BoardTool::from_name(call.name);
        let (outcome, message) = match (call.kind, tool) {
            // A board tool the grant does not allow: say which capability.
            (RefusalKind::NotListed, Some(tool)) => match tool.capability() {
                Some(missing) => {
                    let caps = &principal.grant().capabilities;
                    let denied = ToolsError::Denied {
                        tool: tool.name(),
                        missing,
                        allowed: caps.to_csv(),
                    };
                    (AuditOutcome::Denied, Some(denied.to_string()))
                }
                None => (AuditOutcome::ToolError, None),
            },
            (RefusalKind::NotListed, None) => (AuditOutcome::ToolError, None),
            (RefusalKind::InvalidArguments | RefusalKind::HeaderMismatch, _) => {
                (AuditOutcome::ToolError, None)
            }
        };
        self.account(
            principal,
            tool,
            Timestamp::now(),
            Duration::ZERO,
            outcome,
            call.raw_arguments,
            None,
        );
        message
    }

    async fn call_tool(&self, principal: &ResolvedGrant, call: ToolCall<'_>) -> ToolOutput {
        let started = Instant::now();
        let at = Timestamp::now();
        let tool = BoardTool::from_name(call.name);
        // Known up front so that refused calls are still audited against
        // the issue they named.
        let hinted = tool
            .and_then(|t| t.spec().issue_argument)
            .and_then(|key| args::issue_hint(call.arguments, key));
        if let (Some(gate), Some(_)) = (&self.approvals, tool)
            && let Gate::Answer(output) = gate.check(principal.grant(), &call).await
        {
            // The gate audited its answer; the call did not run.
            return output;
        }
        let result = match tool {
            Some(tool) => self.execute(principal, tool, call.arguments).await,
            None => Err(ToolsError::UnknownTool(call.name.to_owned())),
        };
        let latency = started.elapsed();
        let (outcome, issue) = match &result {
            Ok((success, false)) => (AuditOutcome::Ok, success.issue.clone().or(hinted)),
            Ok((success, true)) => (
                AuditOutcome::SecretRedacted,
                success.issue.clone().or(hinted),
            ),
            Err(err) => (err.outcome(), hinted),
        };
        let grant = principal.grant();
        self.account(
            principal,
            tool,
            at,
            latency,
            outcome,
            call.raw_arguments,
            issue,
        );
        match result {
            Ok((Success { answer, .. }, _)) => ToolOutput {
                // Its own text, not the JSON again: clients that read only
                // `content` get the same answer in a compact form, and both
                // blocks together stay within the budget.
                text: answer.text,
                structured: Some(answer.structured),
                is_error: false,
                relay: None,
                content: Vec::new(),
            },
            Err(err) => {
                if let ToolsError::Internal { detail } = &err {
                    tracing::warn!(
                        tool = tool.map_or("unknown", BoardTool::name),
                        tenant = %grant.tenant,
                        run = %grant.run,
                        detail = %detail,
                        "internal board error"
                    );
                }
                ToolOutput {
                    structured: None,
                    text: err.to_string().into(),
                    is_error: true,
                    relay: None,
                    content: Vec::new(),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::IssueState;
    use std::collections::BTreeSet;

    /// What is wrong with `instructions` against the tool table: a tool of
    /// the table it does not name, or a snake_case word that is not a
    /// tool, an argument or answer field of one, an issue state or an
    /// issue id (a tool that does not exist, or a misspelt one).
    fn instruction_problems(instructions: &str) -> Vec<String> {
        let words: BTreeSet<&str> = instructions
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|word| word.contains('_'))
            .collect();
        let mut problems: Vec<String> = BoardTool::ALL
            .iter()
            .filter(|tool| !words.contains(tool.name()))
            .map(|tool| format!("the tool {} is not named", tool.name()))
            .collect();
        let mut fields: BTreeSet<String> = IssueState::names()
            .iter()
            .map(|state| (*state).to_owned())
            .collect();
        for tool in BoardTool::ALL {
            let spec = tool.spec();
            let schemas = [
                Some(spec.input_schema),
                Some(spec.output_schema),
                spec.write_only_output_schema,
            ];
            for schema in schemas.into_iter().flatten() {
                if let Some(properties) = schema()["properties"].as_object() {
                    fields.extend(properties.keys().cloned());
                }
            }
        }
        problems.extend(
            words
                .iter()
                .filter(|word| BoardTool::from_name(word).is_none())
                .filter(|word| !fields.contains(**word))
                .filter(|word| IssueId::parse(**word).is_err())
                .map(|word| format!("{word} is neither a tool of the table nor one's field")),
        );
        problems
    }

    #[test]
    fn the_instructions_name_every_tool_of_the_table_and_no_other() {
        assert_eq!(instruction_problems(INSTRUCTIONS), Vec::<String>::new());
        // The check sees a tool the instructions leave out, and a name
        // that is no tool.
        assert_eq!(
            instruction_problems(&INSTRUCTIONS.replace("release_issue", "release")),
            ["the tool release_issue is not named"]
        );
        assert_eq!(
            instruction_problems(&INSTRUCTIONS.replace("add_comment", "add_note")),
            [
                "the tool add_comment is not named",
                "add_note is neither a tool of the table nor one's field"
            ]
        );
    }
}
