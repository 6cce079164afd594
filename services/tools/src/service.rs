//! [`BoardTools`]: the board served through [`ToolBackend`].

use crate::args;
use crate::budget::{self, Answer, DEFAULT_RESULT_BUDGET, MIN_RESULT_BUDGET};
use crate::defs::{BoardTool, grant_tool_set};
use crate::error::ToolsError;
use crate::view;
use async_trait::async_trait;
use corkboard_board::AuditSink;
use corkboard_board::{
    ArgumentsHash, AuditOutcome, AuditRecord, Author, BudgetKind, Capability, Claimant,
    CreateOutcome, IdempotencyKey, Issue, IssueId, IssueStore, NEAR_MATCH, SearchHit, SimilarIssue,
    StoreError, TenantId, Timestamp,
};
use corkboard_grants::{BudgetCounter, RateLimiter, Reservation, RunKey, TokenRegistry};
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
body or comments (and avoid duplicates), list_issues to see what exists by state or label, \
get_issue to read one issue with its comments, create_issue to file new work, update_issue \
to move it between states (inbox, triage, todo, in_progress, blocked, done, closed) or \
change its labels and priority, add_comment to record progress. When several agents share \
the board and you may claim issues: claim_issue before you start on one (if another run \
holds it, pick other work: list_issues with unclaimed=true), release_issue if you give it up; \
closing it or the end of your run ends the claim. Issue ids look like \
iss_01JD3Z9Q4X8M2N6P7R5S1T0V9W: always quote them exactly as a tool returned them, never \
shorten, guess or retype them. Pass an idempotency_key to create_issue and add_comment when \
you might retry, and expected_version to update_issue. Every answer fits a budget of about \
8,000 tokens (32,000 bytes unless the operator set another): list_issues returns short \
summaries (ask for more with fields, include_body or include_comments, or read one issue with \
get_issue), get_issue the latest 10 comments (comments_cursor reaches the older ones). An \
answer that would be larger is cut at an issue or comment boundary and says so in \
`truncated` (what was left out and the call that gets it) and, for a body, in \
`body_truncated`; nothing is dropped silently. An error starting with \"board \
unavailable\" is temporary: wait a few seconds and retry.";

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
    /// Bytes one successful answer may cost (see `budget`).
    result_budget: usize,
    /// Where budgeted grants' writes are counted; none: a budgeted write
    /// is refused as unavailable (never let through uncounted).
    budgets: Option<Arc<dyn BudgetCounter>>,
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
    fn account(
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

/// What a successful call produced: the answer (structured and text,
/// within the budget) and the issue it touched, for the audit record.
struct Success {
    answer: Answer,
    issue: Option<IssueId>,
}

/// How many similar open issues create_issue reports.
const SIMILAR_SHOWN: u32 = 5;

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
        }
    }

    /// Counts budgeted grants' writes in `counter` (the grant service's:
    /// the ledger, or Redis when the registry is Redis).
    pub fn with_budgets(mut self, counter: Arc<dyn BudgetCounter>) -> Self {
        self.budgets = Some(counter);
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
    async fn budgeted<T>(
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

    /// Counts tool calls by tool and outcome.
    /// Charges every request to its run's budget in `limiter` (the same
    /// per-run budget as the run gateways').
    pub fn with_rate_limiter(mut self, limiter: Arc<dyn RateLimiter>) -> Self {
        self.limiter = Some(limiter);
        self
    }

    /// Takes one request from the caller's run budget.
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

    /// The registry run tokens are resolved through.
    pub fn registry(&self) -> &Arc<dyn TokenRegistry> {
        &self.registry
    }

    /// Runs one store call within the timeout, mapping its errors with the
    /// issue the call is about.
    async fn bounded<T>(
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

    async fn execute(
        &self,
        principal: &ResolvedGrant,
        tool: BoardTool,
        arguments: &Map<String, Value>,
    ) -> Result<Success, ToolsError> {
        let grant = principal.grant();
        if !grant.capabilities.allows(tool.capability()) {
            return Err(ToolsError::Denied {
                tool: tool.name(),
                missing: tool.capability(),
                allowed: grant.capabilities.to_csv(),
            });
        }
        let tenant = &grant.tenant;
        match tool {
            BoardTool::ListIssues => {
                let query = args::list(arguments)?;
                let shown = args::list_view(arguments)?;
                let page = self
                    .bounded(None, self.store.list_issues(tenant, &query))
                    .await?;
                let items = page
                    .issues
                    .iter()
                    .map(|issue| view::summary(to_json(issue)?, &shown))
                    .collect::<Result<Vec<_>, _>>()?;
                let cursor = page.next_cursor.map(|c| c.as_str().to_owned());
                Ok(Success {
                    answer: budget::page(items, cursor, self.result_budget),
                    issue: None,
                })
            }
            BoardTool::GetIssue => {
                let id = args::get(arguments)?;
                let (window, body_offset) = args::issue_view(arguments)?;
                // The answer is cut to the result budget anyway (oldest
                // comments first, the newest kept), so the store reads no
                // comments beyond that many bytes of body: what it leaves
                // out could not be shown. An issue may hold 500 comments
                // of 64 KiB; without the bound, comments_limit=500 reads
                // all ~32 MiB to show one of them.
                let window = window.max_bytes(self.result_budget);
                let issue = self
                    .bounded(Some(&id), self.store.get_issue_view(tenant, &id, &window))
                    .await?;
                let facts = issue.comment_facts;
                let mut value = view::windowed_issue(to_json(&issue)?, &facts, window.before_id())?;
                view::skip_body(&mut value, body_offset)?;
                if facts.over_bytes > 0 {
                    budget::comments_cut(&mut value, facts.over_bytes, self.result_budget);
                }
                let headline = format!("get_issue: issue {id}");
                Ok(Success {
                    answer: budget::issue(value, &headline, self.result_budget),
                    issue: Some(id),
                })
            }
            BoardTool::CreateIssue => {
                let args::CreateArgs {
                    new,
                    key,
                    if_similar,
                } = args::create(arguments)?;
                let reads = grant.capabilities.allows(Capability::IssuesRead);
                let title = new.title.clone();
                let created = match if_similar {
                    args::IfSimilar::Report => {
                        self.budgeted(
                            principal,
                            BudgetKind::CreateIssue,
                            key.as_ref(),
                            self.bounded(
                                None,
                                self.store.create_issue(
                                    tenant,
                                    &author(principal),
                                    new,
                                    key.as_ref(),
                                ),
                            ),
                            |created| created.replayed,
                        )
                        .await?
                    }
                    args::IfSimilar::Refuse => {
                        if !reads {
                            // A refusal answers with another issue: that
                            // is a read this grant may not do.
                            return Err(ToolsError::InvalidArgument {
                                field: "if_similar".to_owned(),
                                reason: format!(
                                    "\"refuse\" answers with the existing issue, which needs \
                                     the issues:read capability; this grant has {}. Omit \
                                     if_similar",
                                    grant.capabilities.to_csv()
                                ),
                            });
                        }
                        let outcome = self
                            .budgeted(
                                principal,
                                BudgetKind::CreateIssue,
                                key.as_ref(),
                                self.bounded(
                                    None,
                                    self.store.create_issue_unless_similar(
                                        tenant,
                                        &author(principal),
                                        new,
                                        key.as_ref(),
                                    ),
                                ),
                                |outcome| match outcome {
                                    CreateOutcome::Created(created) => created.replayed,
                                    CreateOutcome::Refused(_) => true,
                                },
                            )
                            .await?;
                        match outcome {
                            CreateOutcome::Created(created) => created,
                            CreateOutcome::Refused(near) => {
                                return self.refused(tenant, near).await;
                            }
                        }
                    }
                };
                let id = created.issue.id.clone();
                let mut value = view::whole_issue(to_json(&created.issue)?);
                insert(&mut value, "replayed", Value::Bool(created.replayed));
                insert(&mut value, "created", Value::Bool(true));
                if reads {
                    // After the create, so a replay reports the same way; the
                    // issue itself is left out. A failed lookup leaves
                    // `similar` out rather than failing a create that happened.
                    let similar = self
                        .bounded(
                            None,
                            self.store
                                .similar_open_issues(tenant, &title, SIMILAR_SHOWN + 1),
                        )
                        .await;
                    match similar {
                        Ok(similar) => {
                            let shown: Vec<Value> = similar
                                .iter()
                                .filter(|s| s.id != id)
                                .take(SIMILAR_SHOWN as usize)
                                .map(similar_json)
                                .collect();
                            insert(&mut value, "similar", Value::Array(shown));
                        }
                        Err(err) => {
                            tracing::warn!(error = %err, "similar issues unavailable after a create");
                        }
                    }
                }
                let headline = if created.replayed {
                    format!(
                        "create_issue: replayed; issue {id} was created by the earlier call with \
                         this idempotency_key"
                    )
                } else {
                    format!("create_issue: created issue {id}")
                };
                Ok(Success {
                    answer: budget::issue(value, &headline, self.result_budget),
                    issue: Some(id),
                })
            }
            BoardTool::SearchIssues => {
                let query = args::search(arguments)?;
                let page = self
                    .bounded(None, self.store.search_issues(tenant, &query))
                    .await?;
                let hits: Vec<Value> = page.hits.iter().map(hit_json).collect();
                Ok(Success {
                    answer: budget::hits(
                        hits,
                        query.offset,
                        page.next_offset,
                        page.partial,
                        self.result_budget,
                    ),
                    issue: None,
                })
            }
            BoardTool::UpdateIssue => {
                let args::UpdateArgs {
                    id,
                    patch,
                    expected_version,
                } = args::update(arguments)?;
                let set = patch_fields(&patch);
                let issue = self
                    .budgeted(
                        principal,
                        BudgetKind::UpdateIssue,
                        None,
                        self.bounded(
                            Some(&id),
                            self.store
                                .update_issue(tenant, &id, patch, expected_version),
                        ),
                        |_| false,
                    )
                    .await?;
                let headline = format!(
                    "update_issue: issue {id} is now at version {}",
                    issue.version
                );
                let mut value = to_json(&issue)?;
                if tool.answers_whole_issue(&grant.capabilities) {
                    value = view::whole_issue(value);
                } else {
                    // Only what this call wrote: the grant may not read the rest.
                    retain(
                        &mut value,
                        &[&["id", "version", "updated_at"], &set[..]].concat(),
                    );
                }
                Ok(Success {
                    answer: budget::issue(value, &headline, self.result_budget),
                    issue: Some(id),
                })
            }
            BoardTool::AddComment => {
                let args::CommentArgs { comment, key } = args::comment(arguments)?;
                let id = comment.issue.clone();
                let added = self
                    .budgeted(
                        principal,
                        BudgetKind::AddComment,
                        key.as_ref(),
                        self.bounded(
                            Some(&id),
                            self.store.add_comment(
                                tenant,
                                &author(principal),
                                comment,
                                key.as_ref(),
                            ),
                        ),
                        |added| added.replayed,
                    )
                    .await?;
                let mut value = to_json(&added.issue)?;
                if tool.answers_whole_issue(&grant.capabilities) {
                    value = view::whole_issue(value);
                } else {
                    // Not the body nor the other comments: this grant may
                    // write a comment, not read the issue.
                    retain(&mut value, &["id", "version", "updated_at"]);
                }
                insert(&mut value, "comment", to_json(&added.comment)?);
                insert(&mut value, "replayed", Value::Bool(added.replayed));
                let headline = if added.replayed {
                    format!(
                        "add_comment: replayed; comment {} on issue {id} was added by the \
                         earlier call with this idempotency_key",
                        added.comment.id
                    )
                } else {
                    format!(
                        "add_comment: added comment {} to issue {id}",
                        added.comment.id
                    )
                };
                Ok(Success {
                    answer: budget::issue(value, &headline, self.result_budget),
                    issue: Some(id),
                })
            }
            BoardTool::ClaimIssue | BoardTool::ReleaseIssue => {
                let args::ClaimArgs {
                    id,
                    expected_version,
                } = args::claim(tool.name(), arguments)?;
                let issue = if tool == BoardTool::ClaimIssue {
                    // The claim ends when the grant does: its expiry, from
                    // the grant, never from input.
                    let claimant = Claimant {
                        run: grant.run.clone(),
                        grant: grant.id.clone(),
                        expires_at: grant.expires_at,
                    };
                    self.bounded(
                        Some(&id),
                        self.store
                            .claim_issue(tenant, &id, &claimant, expected_version),
                    )
                    .await?
                } else {
                    self.bounded(
                        Some(&id),
                        self.store
                            .release_issue(tenant, &id, &grant.run, expected_version),
                    )
                    .await?
                };
                let headline = if tool == BoardTool::ClaimIssue {
                    format!("claim_issue: issue {id} is claimed by run {}", grant.run)
                } else {
                    format!("release_issue: issue {id} is unclaimed")
                };
                let mut value = to_json(&issue)?;
                if tool.answers_whole_issue(&grant.capabilities) {
                    value = view::whole_issue(value);
                } else {
                    retain(&mut value, &["id", "version", "updated_at", "claim"]);
                }
                Ok(Success {
                    answer: budget::issue(value, &headline, self.result_budget),
                    issue: Some(id),
                })
            }
        }
    }
}

impl BoardTools {
    /// The answer to a create refused for a near match: the existing issue
    /// (the best match) with `created: false`, the reason, and every near
    /// match; the text block leads with "NOT CREATED" for models that read
    /// only the text. Not an error result: the caller asked for exactly
    /// this outcome, and the answer carries the issue to work on.
    async fn refused(
        &self,
        tenant: &TenantId,
        near: Vec<SimilarIssue>,
    ) -> Result<Success, ToolsError> {
        let Some(best) = near.first() else {
            return Err(ToolsError::Internal {
                detail: "a create was refused without a near match".to_owned(),
            });
        };
        let existing: Issue = self
            .bounded(Some(&best.id), self.store.get_issue(tenant, &best.id))
            .await?;
        let reason = format!(
            "NOT CREATED: open issue {} \"{}\" ({}) is a near match for this title (similarity \
             {:.2}, near at {NEAR_MATCH}), and if_similar is \"refuse\". Nothing was filed; the \
             issue below is that existing one. Work on it (add_comment, update_issue), or call \
             create_issue with if_similar \"report\" to file a separate issue anyway.",
            best.id,
            best.title.as_str(),
            best.state,
            best.score
        );
        let mut value = view::whole_issue(to_json(&existing)?);
        insert(&mut value, "replayed", Value::Bool(false));
        insert(&mut value, "created", Value::Bool(false));
        insert(
            &mut value,
            "similar",
            Value::Array(near.iter().map(similar_json).collect()),
        );
        insert(&mut value, "reason", Value::String(reason.clone()));
        Ok(Success {
            answer: budget::issue(value, &reason, self.result_budget),
            issue: Some(existing.id),
        })
    }
}

fn similar_json(similar: &SimilarIssue) -> Value {
    serde_json::json!({
        "id": similar.id,
        "title": similar.title,
        "state": similar.state,
        "score": round(similar.score),
    })
}

/// A search hit as the tool answers it: a summary of the issue (read the
/// rest with get_issue), the score and the snippet.
fn hit_json(hit: &SearchHit) -> Value {
    let issue = &hit.issue;
    serde_json::json!({
        "id": issue.id,
        "title": issue.title,
        "state": issue.state,
        "labels": issue.labels,
        "priority": issue.priority,
        "updated_at": issue.updated_at,
        "version": issue.version,
        "comment_count": issue.comments.len(),
        "score": round(hit.score),
        "field": hit.field,
        "comment": hit.comment,
        "snippet": hit.snippet,
    })
}

/// Four decimals: enough to order by, short to read.
fn round(score: f64) -> f64 {
    (score * 10_000.0).round() / 10_000.0
}

/// Who a write is recorded as: the grant's run.
fn author(principal: &ResolvedGrant) -> Author {
    let grant = principal.grant();
    Author {
        run: grant.run.clone(),
        grant: Some(grant.id.clone()),
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> Result<Value, ToolsError> {
    serde_json::to_value(value).map_err(|err| ToolsError::Internal {
        detail: format!("result not serialisable: {err}"),
    })
}

/// The issue fields a patch sets, by their names in the issue's JSON.
fn patch_fields(patch: &corkboard_board::IssuePatch) -> Vec<&'static str> {
    [
        ("title", patch.title.is_some()),
        ("body", patch.body.is_some()),
        ("state", patch.state.is_some()),
        ("labels", patch.labels.is_some()),
        ("priority", patch.priority.is_some()),
        ("parent", patch.parent.is_some()),
        ("duplicate_of", patch.duplicate_of.is_some()),
        ("blocked_by", patch.blocked_by.is_some()),
        // Closing sets a reason even when none was given.
        (
            "close_reason",
            patch.close_reason.is_some() || patch.state.is_some_and(|s| s.is_terminal()),
        ),
    ]
    .into_iter()
    .filter_map(|(name, set)| set.then_some(name))
    .collect()
}

/// Drops every member of `object` not named in `keep`.
fn retain(object: &mut Value, keep: &[&str]) {
    if let Value::Object(map) = object {
        map.retain(|key, _| keep.contains(&key.as_str()));
    }
}

fn insert(object: &mut Value, key: &str, value: Value) {
    if let Value::Object(map) = object {
        map.insert(key.to_owned(), value);
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

    fn call_refused(&self, principal: &ResolvedGrant, call: RefusedCall<'_>) -> Option<String> {
        let tool = BoardTool::from_name(call.name);
        let (outcome, message) = match (call.kind, tool) {
            // A board tool the grant does not allow: say which capability.
            (RefusalKind::NotListed, Some(tool)) => {
                let caps = &principal.grant().capabilities;
                let denied = ToolsError::Denied {
                    tool: tool.name(),
                    missing: tool.capability(),
                    allowed: caps.to_csv(),
                };
                (AuditOutcome::Denied, Some(denied.to_string()))
            }
            (RefusalKind::NotListed, None) => (AuditOutcome::ToolError, None),
            (RefusalKind::InvalidArguments, _) => (AuditOutcome::ToolError, None),
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
        let result = match tool {
            Some(tool) => self.execute(principal, tool, call.arguments).await,
            None => Err(ToolsError::UnknownTool(call.name.to_owned())),
        };
        let latency = started.elapsed();
        let (outcome, issue) = match &result {
            Ok(success) => (AuditOutcome::Ok, success.issue.clone().or(hinted)),
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
            Ok(Success { answer, .. }) => ToolOutput {
                // Its own text, not the JSON again: clients that read only
                // `content` get the same answer in a compact form, and both
                // blocks together stay within the budget.
                text: answer.text,
                structured: Some(answer.structured),
                is_error: false,
                relay: None,
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
                    text: err.to_string(),
                    is_error: true,
                    relay: None,
                }
            }
        }
    }
}
