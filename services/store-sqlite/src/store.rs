//! [`SqliteStore`]: the board traits over one writer thread and a read pool.

use crate::error::{OpError, SqliteError, store_error};
use crate::files;
use crate::open_titles::{self, OpenTitles};
use crate::ops::approvals::{self, DecideApproval, PutApproval, UseApproval};
use crate::ops::audit::{self, AppendAudit};
use crate::ops::claims::{ClaimIssue, ClaimNext, ExpireClaims, HandOverClaim, ReleaseIssue};
use crate::ops::comments::AddComment;
use crate::ops::issues::{self, CreateIssue, CreateIssueUnlessSimilar, SeedIssues, UpdateIssue};
use crate::ops::ledger::{
    self, RecordExpiry, RecordFirstUse, RecordGrant, RecordRevocation, ReleaseBudget, ReserveBudget,
};
use crate::ops::policy::{self, SetGrantPolicy};
use crate::ops::upstreams::{self, ApproveTool, DeleteUpstream, ObserveTools, PutUpstream};
use crate::ops::webhooks::{self, ClaimDeliveries, CreateWebhook, DeleteWebhook, RecordAttempt};
use crate::ops::{WriteOp, keys, search};
use crate::options::SqliteOptions;
use crate::readers::{ReadPool, snapshot};
use crate::schema;
use crate::wal_watch::{Check, WalWatch};
use crate::writer::{self, AuditSync, Counters, GroupPolicy, Keeps, Titles, WriteJob, WriteStats};
use async_trait::async_trait;
use corkboard_board::CreateOutcome;
use corkboard_board::{
    ApprovalId, ApprovalItem, ApprovalStatus, AuditEntry, AuditLog, AuditQuery, AuditRecord,
    Author, Claimant, CommentAdded, CommentBody, CommentWindow, Created, Decision, Grant,
    GrantEvent, GrantId, GrantLedger, GrantPolicy, IdempotencyKey, Issue, IssueId, IssuePatch,
    IssueStore, IssueView, ListQuery, NewComment, NewIssue, Page, ReadCost, RunId, SearchPage,
    SearchQuery, SimilarIssue, StoreError, StoreHealth, TenantId, Timestamp, Title, Upstream,
    UpstreamName, UpstreamStore, ValidationError, ViewSince, limits,
};
use corkboard_board::{DefinitionHash, ToolPin, ToolSighting};
use rusqlite::Connection;
use std::fmt;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::mpsc;

/// The file name [`SqliteStore::open_in_dir`] uses inside a data dir.
pub const FILE_NAME: &str = "board.sqlite3";

/// The audit file next to the board file [`FILE_NAME`] (see
/// [`SqliteStore::audit_path`]).
pub const AUDIT_FILE_NAME: &str = "board.audit.sqlite3";

/// Most audit records one [`AuditLog::list_audit`] call returns.
pub const AUDIT_PAGE_MAX: u32 = 1000;

/// The embedded board store: every board trait on one SQLite file, and
/// the audit records on a second one next to it.
///
/// Cheap to clone (a handle); the writer thread stops when the last clone is
/// dropped. Several processes may open the same file at once. The async
/// methods must run inside a tokio runtime (any flavour): point reads run on
/// the calling thread when a point reader is free, other reads use
/// `spawn_blocking`, and every call that can wait is bounded by
/// `tokio::time::timeout` (an inline point read takes microseconds and
/// cannot be interrupted; see the `readers` module). Expensive reads
/// (`ReadCost::Expensive`) take their tenant's share and a search reader,
/// never a point reader, and are interrupted at their deadline.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    writes: mpsc::Sender<WriteJob>,
    /// The audit file's writer: audit records never queue behind board
    /// writes, and never change the board file.
    audit_writes: mpsc::Sender<WriteJob>,
    /// Audit listings' connection, on the audit file.
    audits: Arc<ReadPool>,
    /// Point reads' connections: no expensive read ever holds one.
    points: Arc<ReadPool>,
    /// Expensive reads' (each tenant at most its share) and admin listings'.
    searches: Arc<ReadPool>,
    counters: Arc<Counters>,
    /// The tenants' open titles, kept by the writer (open_titles.rs).
    open_titles: Arc<OpenTitles>,
    /// Whether anything committed since a tenant's epoch was read
    /// (wal_watch.rs): most epoch checks need no transaction.
    wal_watch: WalWatch,
    options: SqliteOptions,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating if needed) the board at `path` with default options.
    pub fn open(path: &Path) -> Result<Self, SqliteError> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens the board at `<data_dir>/board.sqlite3`.
    pub fn open_in_dir(data_dir: &Path) -> Result<Self, SqliteError> {
        Self::open(&data_dir.join(FILE_NAME))
    }

    /// Opens (creating if needed) the board at `path`: creates its directory
    /// (0700) and the file (0600, tightening one left readable by others),
    /// switches the file to WAL with `synchronous=FULL`, migrates the schema,
    /// and starts the writer thread. Blocking; call it at start-up (or in
    /// `spawn_blocking`).
    pub fn open_with(path: &Path, options: SqliteOptions) -> Result<Self, SqliteError> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            files::private_dir(parent)?;
        }
        // Before SQLite sees it, so the file and its WAL/SHM are 0600.
        files::private_db(path)?;
        let schema::Writers {
            board: write_conn,
            audit: audit_conn,
        } = schema::open_writers(path, &options)?;
        let audit_path = schema::audit_path(path);
        // One reader of each pool now, so a file readers cannot open fails
        // here, not on the first request.
        let reader = |file: &Path| {
            schema::open_reader(file, &options).map_err(|source| SqliteError::Open {
                path: file.to_path_buf(),
                source,
            })
        };
        let points = ReadPool::new(
            path.to_path_buf(),
            options.clone(),
            "point",
            options.point_readers,
            reader(path)?,
        );
        let searches = ReadPool::new(
            path.to_path_buf(),
            options.clone(),
            "search",
            options.search_readers,
            reader(path)?,
        );
        let audits = ReadPool::new(
            audit_path.clone(),
            options.clone(),
            "audit",
            1,
            reader(&audit_path)?,
        );
        let counters = Arc::new(Counters::default());
        let open_titles = Arc::new(OpenTitles::new(options.open_titles));
        open_titles::start_builder(&open_titles, path.to_path_buf(), options.clone()).map_err(
            |source| SqliteError::Thread {
                path: path.to_path_buf(),
                source,
            },
        )?;
        let writes = writer::spawn(
            write_conn,
            options.queue_capacity,
            GroupPolicy {
                max_group: options.max_group,
                busy_attempts: options.busy_attempts.max(1),
            },
            Arc::clone(&counters),
            Keeps::Board(Titles::new(
                Arc::clone(&open_titles),
                options.search_index_every,
            )),
        )
        .map_err(|source| SqliteError::Thread {
            path: path.to_path_buf(),
            source,
        })?;
        let audit_writes = writer::spawn(
            audit_conn,
            options.queue_capacity,
            GroupPolicy {
                max_group: options.max_group,
                busy_attempts: options.busy_attempts.max(1),
            },
            Arc::new(Counters::default()),
            Keeps::Audit(AuditSync::new()),
        )
        .map_err(|source| SqliteError::Thread {
            path: audit_path.clone(),
            source,
        })?;
        tracing::info!(path = %path.display(), "opened the SQLite board");
        Ok(Self {
            inner: Arc::new(Inner {
                path: path.to_path_buf(),
                writes,
                audit_writes,
                audits,
                points,
                searches,
                counters,
                open_titles,
                wal_watch: WalWatch::open(path),
                options,
            }),
        })
    }

    /// The board file this store writes.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// The audit file next to it: the board file's name with
    /// `.audit.sqlite3` for its extension ([`AUDIT_FILE_NAME`] in a data
    /// dir).
    pub fn audit_path(&self) -> PathBuf {
        schema::audit_path(&self.inner.path)
    }

    /// The open titles the similar look-up holds (for tests).
    #[cfg(test)]
    pub(crate) fn open_titles(&self) -> &OpenTitles {
        &self.inner.open_titles
    }

    /// What the board's writer thread has done so far (group commit at
    /// work: `writes / groups` is the average group size); audit records
    /// have a writer of their own and are not counted.
    pub fn write_stats(&self) -> WriteStats {
        self.inner.counters.snapshot()
    }

    /// Bench-only bulk seeding: creates each issue (and its comment, if
    /// any) exactly as `create_issue` and `add_comment` would, with the
    /// same rows, search index and webhook outbox entries, but many in one
    /// write transaction instead of one operation each, so the cost-curve
    /// benchmark can seed a million issues. No idempotency keys, no
    /// similarity check; the ids created, in order.
    pub async fn seed_issues(
        &self,
        tenant: &TenantId,
        author: &Author,
        items: Vec<(NewIssue, Option<CommentBody>)>,
    ) -> Result<Vec<IssueId>, StoreError> {
        self.write(SeedIssues {
            tenant: tenant.clone(),
            author: author.clone(),
            items,
        })
        .await
    }

    /// Queues `op` for its file's writer (the audit file's for audit
    /// records, [`WriteOp::AUDIT`]) and waits for its answer, which comes
    /// only once the write has committed.
    async fn write<O: WriteOp>(&self, op: O) -> Result<O::Output, StoreError> {
        let writes = if O::AUDIT {
            &self.inner.audit_writes
        } else {
            &self.inner.writes
        };
        let (job, answer) = writer::job(op);
        let limit = self.inner.options.operation_timeout;
        // One budget for the whole call. Until the writer has the job,
        // nothing can have been applied; from then on, no answer means the
        // outcome is unknown.
        let deadline = tokio::time::Instant::now() + limit;
        let queued = tokio::time::timeout_at(deadline, writes.send(job)).await;
        match queued {
            Err(_) => return Err(self.timed_out()),
            Ok(Err(_)) => return Err(StoreError::unavailable("the SQLite writer has stopped")),
            Ok(Ok(())) => {}
        }
        match tokio::time::timeout_at(deadline, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err(StoreError::outcome_unknown(
                "the SQLite writer stopped before answering",
            )),
            Err(_) => Err(StoreError::outcome_unknown(format!(
                "the SQLite board did not confirm the write within {} ms",
                limit.as_millis()
            ))),
        }
    }

    /// An admin listing that may scan (grants, audit, webhooks): on the
    /// blocking pool, on the search readers, in one snapshot.
    async fn read<T, F>(&self, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, OpError> + Send + 'static,
    {
        self.bounded(self.inner.searches.run(move |conn| snapshot(conn, read)))
            .await
    }

    /// A read bounded by its shape but too long for an async worker (an
    /// unfiltered page and its comments): on the blocking pool, on the
    /// point readers, in one snapshot.
    async fn page_read<T, F>(&self, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, OpError> + Send + 'static,
    {
        self.bounded(self.inner.points.run(move |conn| snapshot(conn, read)))
            .await
    }

    /// An expensive read of `tenant`'s (`ReadCost::Expensive`): it waits
    /// for one of the tenant's shares (and its time share) and then a search reader, both
    /// within one `expensive.timeout()` (past it: `TenantBusy`, or
    /// `Unavailable` when every reader stayed busy), then runs for at most
    /// that long again (past it: `QueryTooSlow`).
    async fn expensive_read<T, F>(&self, tenant: &TenantId, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, OpError> + Send + 'static,
    {
        let reads = &self.inner.options.expensive;
        let wait_until = tokio::time::Instant::now() + reads.timeout();
        let call = async {
            let _share = reads.admit_by(tenant, wait_until).await?;
            self.inner
                .searches
                .run_interruptible(wait_until, reads, read)
                .await
        };
        self.bounded(call).await
    }

    /// A point read (a primary-key lookup or two): on the calling thread
    /// when a connection is free. `read` sets up a [`snapshot`] itself if it
    /// runs more than one statement.
    async fn point_read<T, F>(&self, read: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: Fn(&Connection) -> Result<T, OpError> + Send + 'static,
    {
        self.bounded(self.inner.points.point(read)).await
    }

    /// Every call answers within `operation_timeout`, whatever the file does.
    async fn bounded<T>(
        &self,
        call: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let limit = self.inner.options.operation_timeout;
        tokio::time::timeout(limit, call)
            .await
            .unwrap_or_else(|_| Err(self.timed_out()))
    }

    /// Nothing answered within `operation_timeout`, before anything was
    /// handed to the writer.
    fn timed_out(&self) -> StoreError {
        StoreError::unavailable(format!(
            "the SQLite board did not answer within {} ms",
            self.inner.options.operation_timeout.as_millis()
        ))
    }
}

fn check_limit(field: &'static str, limit: u32, max: u32) -> Result<(), StoreError> {
    if limit == 0 || limit > max {
        return Err(ValidationError::new(field, format!("must be between 1 and {max}")).into());
    }
    Ok(())
}

#[async_trait]
impl IssueStore for SqliteStore {
    async fn idempotency_key_used(
        &self,
        tenant: &TenantId,
        run: &corkboard_board::RunId,
        key: &IdempotencyKey,
        comment: bool,
    ) -> Result<bool, StoreError> {
        let (tenant, run, key) = (tenant.clone(), run.clone(), key.clone());
        self.point_read(move |conn| keys::idempotency_key_used(conn, &tenant, &run, &key, comment))
            .await
    }

    async fn create_issue(
        &self,
        tenant: &TenantId,
        author: &Author,
        new: NewIssue,
        key: Option<&IdempotencyKey>,
    ) -> Result<Created, StoreError> {
        self.write(CreateIssue::new(tenant, author, new, key)).await
    }

    async fn create_issue_unless_similar(
        &self,
        tenant: &TenantId,
        author: &Author,
        new: NewIssue,
        key: Option<&IdempotencyKey>,
    ) -> Result<CreateOutcome, StoreError> {
        // The check runs on the writer, in the same transaction as the
        // insert: atomic against every other create on this file.
        let create = CreateIssue::new(tenant, author, new, key);
        self.write(CreateIssueUnlessSimilar(create)).await
    }

    async fn search_issues(
        &self,
        tenant: &TenantId,
        query: &SearchQuery,
    ) -> Result<SearchPage, StoreError> {
        query.validate()?;
        // The tenant's index rows still pending go in first
        // (search_writes.rs), so the search sees every write committed
        // before it began.
        let owner = tenant.clone();
        if self
            .point_read(move |conn| search::index_rows_pending(conn, &owner))
            .await?
        {
            self.write(search::ApplyPendingIndexRows).await?;
        }
        let (owner, query) = (tenant.clone(), query.clone());
        self.expensive_read(tenant, move |conn| {
            search::search_issues(conn, &owner, &query)
        })
        .await
    }

    async fn similar_open_issues(
        &self,
        tenant: &TenantId,
        title: &Title,
        limit: u32,
    ) -> Result<Vec<SimilarIssue>, StoreError> {
        check_limit("limit", limit, limits::SIMILAR_LIMIT_MAX)?;
        // The tenant's open titles in memory, as of this process's last
        // write (the create this look-up follows, or a later one).
        if let Some(similar) = self.inner.open_titles.similar(tenant, title, limit) {
            return Ok(similar);
        }
        let (tenant, title) = (tenant.clone(), title.clone());
        // Bounded index reads (`query::SimilarLookup`): a point read, so the
        // look-up after every create does not hop to a blocking thread.
        self.point_read(move |conn| {
            snapshot(conn, |conn| {
                search::similar_open_issues(conn, &tenant, &title, limit)
            })
        })
        .await
    }

    async fn get_issue(&self, tenant: &TenantId, id: &IssueId) -> Result<Issue, StoreError> {
        let (tenant, id) = (tenant.clone(), id.clone());
        // One statement (the issue joined with its comments): its own
        // read snapshot.
        self.point_read(move |conn| issues::get_issue(conn, &tenant, &id))
            .await
    }

    async fn list_issues(&self, tenant: &TenantId, query: &ListQuery) -> Result<Page, StoreError> {
        query.validate()?;
        let (owner, query) = (tenant.clone(), query.clone());
        match query.cost() {
            ReadCost::Point => {
                self.page_read(move |conn| issues::list_issues(conn, &owner, &query))
                    .await
            }
            ReadCost::Expensive => {
                self.expensive_read(tenant, move |conn| {
                    issues::list_issues(conn, &owner, &query)
                })
                .await
            }
        }
    }

    async fn update_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        patch: IssuePatch,
        expected_version: Option<u64>,
    ) -> Result<Issue, StoreError> {
        if patch.is_empty() {
            return Err(ValidationError::new("patch", "nothing to update").into());
        }
        self.write(UpdateIssue {
            tenant: tenant.clone(),
            id: id.clone(),
            patch,
            expected_version,
        })
        .await
    }

    async fn get_issue_view(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        window: &CommentWindow,
    ) -> Result<IssueView, StoreError> {
        let (tenant, id, window) = (tenant.clone(), id.clone(), window.clone());
        // Primary-key and index reads in one snapshot.
        self.point_read(move |conn| issues::get_issue_view(conn, &tenant, &id, &window))
            .await
    }

    async fn get_issue_view_since(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        window: &CommentWindow,
        seen: Option<u64>,
    ) -> Result<ViewSince, StoreError> {
        let header = match self.inner.wal_watch.check(tenant) {
            Check::Known(epoch) if seen == Some(epoch) => return Ok(ViewSince::Unchanged),
            // The kept answer is older than the epoch known now: read the
            // view; the epoch it comes with is the one already noted.
            Check::Known(_) => None,
            Check::Unknown(header) => header,
        };
        let (owned, id, window) = (tenant.clone(), id.clone(), window.clone());
        let since = self
            .point_read(move |conn| issues::get_issue_view_since(conn, &owned, &id, &window, seen))
            .await?;
        let epoch = match &since {
            ViewSince::Unchanged => seen,
            ViewSince::Read { epoch, .. } => *epoch,
        };
        if let Some(epoch) = epoch {
            self.inner.wal_watch.note(header, tenant, epoch);
        }
        Ok(since)
    }

    async fn tenant_epoch(&self, tenant: &TenantId) -> Result<Option<u64>, StoreError> {
        let header = match self.inner.wal_watch.check(tenant) {
            Check::Known(epoch) => return Ok(Some(epoch)),
            Check::Unknown(header) => header,
        };
        let owned = tenant.clone();
        let epoch = self
            .point_read(move |conn| issues::tenant_epoch(conn, &owned))
            .await?;
        self.inner.wal_watch.note(header, tenant, epoch);
        Ok(Some(epoch))
    }

    async fn claim_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        claimant: &Claimant,
        expected_version: Option<u64>,
    ) -> Result<Issue, StoreError> {
        self.write(ClaimIssue {
            tenant: tenant.clone(),
            id: id.clone(),
            claimant: claimant.clone(),
            expected_version,
        })
        .await
    }

    async fn issue_history(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        before: Option<u64>,
        limit: u32,
    ) -> Result<corkboard_board::HistoryPage, StoreError> {
        let (tenant, id) = (tenant.clone(), id.clone());
        // One index range, at most a page long.
        self.point_read(move |conn| {
            crate::ops::history::issue_history(conn, &tenant, &id, before, limit)
        })
        .await
    }

    async fn run_history(
        &self,
        tenant: &TenantId,
        run: &RunId,
        before: Option<Timestamp>,
        limit: u32,
    ) -> Result<corkboard_board::HistoryPage, StoreError> {
        let (tenant, run) = (tenant.clone(), run.clone());
        self.point_read(move |conn| {
            crate::ops::history::run_history(conn, &tenant, &run, before, limit)
        })
        .await
    }

    async fn board_stats(
        &self,
        tenant: &TenantId,
        stale_until: Timestamp,
    ) -> Result<corkboard_board::BoardStats, StoreError> {
        let owner = tenant.clone();
        self.expensive_read(tenant, move |conn| {
            crate::ops::claims::board_stats(conn, &owner, Timestamp::now(), stale_until)
        })
        .await
    }

    async fn claim_next(
        &self,
        tenant: &TenantId,
        query: &ListQuery,
        claimant: &Claimant,
    ) -> Result<corkboard_board::ClaimNext, StoreError> {
        query.validate()?;
        self.write(ClaimNext {
            tenant: tenant.clone(),
            query: query.clone(),
            claimant: claimant.clone(),
        })
        .await
    }

    async fn release_issue(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        run: &RunId,
        expected_version: Option<u64>,
    ) -> Result<Issue, StoreError> {
        self.write(ReleaseIssue {
            tenant: tenant.clone(),
            id: id.clone(),
            run: run.clone(),
            expected_version,
        })
        .await
    }

    async fn hand_over_claim(
        &self,
        tenant: &TenantId,
        id: &IssueId,
        claimant: &Claimant,
        by: &Author,
        expected_version: u64,
    ) -> Result<Issue, StoreError> {
        self.write(HandOverClaim {
            tenant: tenant.clone(),
            id: id.clone(),
            claimant: claimant.clone(),
            by: by.clone(),
            expected_version,
        })
        .await
    }

    async fn add_comment(
        &self,
        tenant: &TenantId,
        author: &Author,
        comment: NewComment,
        key: Option<&IdempotencyKey>,
    ) -> Result<CommentAdded, StoreError> {
        self.write(AddComment::new(tenant, author, comment, key))
            .await
    }
}

#[async_trait]
impl GrantLedger for SqliteStore {
    async fn record_grant(&self, grant: &Grant, token_hash: &str) -> Result<(), StoreError> {
        self.write(RecordGrant {
            grant: grant.clone(),
            token_hash: token_hash.to_owned(),
        })
        .await
    }

    async fn record_revocation(
        &self,
        id: &GrantId,
        by: &str,
        at: Timestamp,
    ) -> Result<GrantEvent, StoreError> {
        self.write(RecordRevocation {
            id: id.clone(),
            by: by.to_owned(),
            at,
        })
        .await
    }

    async fn record_expiry(
        &self,
        id: &GrantId,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<GrantEvent, StoreError> {
        self.write(RecordExpiry {
            id: id.clone(),
            expires_at,
            now,
        })
        .await
    }

    async fn grant_policy(&self, tenant: &TenantId) -> Result<GrantPolicy, StoreError> {
        let tenant = tenant.clone();
        self.point_read(move |conn| policy::load_policy(conn, &tenant))
            .await
    }

    async fn set_grant_policy(
        &self,
        tenant: &TenantId,
        policy: &GrantPolicy,
    ) -> Result<(), StoreError> {
        policy.validate()?;
        self.write(SetGrantPolicy {
            tenant: tenant.clone(),
            policy: policy.clone(),
        })
        .await
    }

    async fn reserve_budget(
        &self,
        id: &GrantId,
        kind: corkboard_board::BudgetKind,
        limit: u32,
    ) -> Result<bool, StoreError> {
        self.write(ReserveBudget {
            id: id.clone(),
            kind,
            limit,
        })
        .await
    }

    async fn release_budget(
        &self,
        id: &GrantId,
        kind: corkboard_board::BudgetKind,
    ) -> Result<(), StoreError> {
        self.write(ReleaseBudget {
            id: id.clone(),
            kind,
        })
        .await
    }

    async fn put_approval(&self, item: &ApprovalItem) -> Result<(), StoreError> {
        self.write(PutApproval(item.clone())).await
    }

    async fn approval(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
    ) -> Result<Option<ApprovalItem>, StoreError> {
        let (tenant, id) = (tenant.clone(), id.clone());
        self.point_read(move |conn| approvals::load(conn, &tenant, &id))
            .await
    }

    async fn list_approvals(
        &self,
        tenant: &TenantId,
        status: Option<ApprovalStatus>,
        limit: u32,
    ) -> Result<Vec<ApprovalItem>, StoreError> {
        let tenant = tenant.clone();
        self.point_read(move |conn| approvals::list(conn, &tenant, status, limit))
            .await
    }

    async fn approval_for_call(
        &self,
        tenant: &TenantId,
        run: &RunId,
        tool: &str,
        digest: &str,
    ) -> Result<Option<ApprovalItem>, StoreError> {
        let (tenant, run, tool, digest) = (
            tenant.clone(),
            run.clone(),
            tool.to_owned(),
            digest.to_owned(),
        );
        self.point_read(move |conn| approvals::for_call(conn, &tenant, &run, &tool, &digest))
            .await
    }

    async fn decide_approval(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        decision: &Decision,
    ) -> Result<ApprovalItem, StoreError> {
        self.write(DecideApproval {
            tenant: tenant.clone(),
            id: id.clone(),
            decision: decision.clone(),
        })
        .await
    }

    async fn use_approval(
        &self,
        tenant: &TenantId,
        id: &ApprovalId,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.write(UseApproval {
            tenant: tenant.clone(),
            id: id.clone(),
            now,
        })
        .await
    }

    async fn record_first_use(
        &self,
        kind: &str,
        id: &str,
        expires_at: Timestamp,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        self.write(RecordFirstUse {
            kind: kind.to_owned(),
            id: id.to_owned(),
            expires_at,
            now,
        })
        .await
    }

    async fn first_use_recorded(
        &self,
        kind: &str,
        id: &str,
        now: Timestamp,
    ) -> Result<bool, StoreError> {
        let (kind, id) = (kind.to_owned(), id.to_owned());
        self.point_read(move |conn| ledger::first_use_recorded(conn, &kind, &id, now))
            .await
    }

    async fn budget_used(
        &self,
        id: &GrantId,
    ) -> Result<std::collections::BTreeMap<corkboard_board::BudgetKind, u32>, StoreError> {
        let id = id.clone();
        self.point_read(move |conn| ledger::budget_used(conn, &id))
            .await
    }

    async fn grant(&self, id: &GrantId) -> Result<GrantEvent, StoreError> {
        let id = id.clone();
        // One statement: its own read transaction.
        self.point_read(move |conn| ledger::get_grant(conn, &id))
            .await
    }

    async fn grant_by_token_hash(
        &self,
        token_hash: &str,
    ) -> Result<Option<GrantEvent>, StoreError> {
        let token_hash = token_hash.to_owned();
        // One statement (the unique index, then the row): its own read
        // transaction. Every authenticated MCP request comes through here.
        self.point_read(move |conn| ledger::grant_by_token_hash(conn, &token_hash))
            .await
    }

    async fn list_grants(
        &self,
        tenant: &TenantId,
        run: Option<&RunId>,
        cursor: Option<&GrantId>,
        limit: u32,
    ) -> Result<Vec<GrantEvent>, StoreError> {
        check_limit("limit", limit, limits::PAGE_MAX)?;
        let (tenant, run, cursor) = (tenant.clone(), run.cloned(), cursor.cloned());
        self.read(move |conn| {
            ledger::list_grants(conn, &tenant, run.as_ref(), cursor.as_ref(), limit)
        })
        .await
    }

    async fn active_grants(&self, now: Timestamp) -> Result<Vec<GrantEvent>, StoreError> {
        self.read(move |conn| ledger::active_grants(conn, now))
            .await
    }

    async fn revoked_grants(&self, now: Timestamp) -> Result<Vec<GrantEvent>, StoreError> {
        self.read(move |conn| ledger::revoked_grants(conn, now))
            .await
    }
}

#[async_trait]
impl AuditLog for SqliteStore {
    async fn append_audit_entries(&self, entries: &[AuditEntry]) -> Result<(), StoreError> {
        if entries.is_empty() {
            return Ok(());
        }
        self.write(AppendAudit {
            entries: entries.to_vec(),
        })
        .await
    }

    async fn list_audit(
        &self,
        tenant: &TenantId,
        query: &AuditQuery,
    ) -> Result<Vec<AuditRecord>, StoreError> {
        check_limit("limit", query.limit, AUDIT_PAGE_MAX)?;
        let (tenant, query) = (tenant.clone(), query.clone());
        let list = self
            .inner
            .audits
            .run(move |conn| snapshot(conn, |conn| audit::list_audit(conn, &tenant, &query)));
        self.bounded(list).await
    }
}

#[async_trait]
impl UpstreamStore for SqliteStore {
    async fn put_upstream(&self, upstream: &Upstream) -> Result<(), StoreError> {
        self.write(PutUpstream {
            upstream: upstream.clone(),
        })
        .await
    }

    async fn list_upstreams(&self, tenant: &TenantId) -> Result<Vec<Upstream>, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn| upstreams::list_upstreams(conn, &tenant))
            .await
    }

    async fn delete_upstream(
        &self,
        tenant: &TenantId,
        name: &UpstreamName,
    ) -> Result<(), StoreError> {
        self.write(DeleteUpstream {
            tenant: tenant.clone(),
            name: name.clone(),
        })
        .await
    }

    async fn list_tool_pins(
        &self,
        tenant: &TenantId,
        upstream: &UpstreamName,
    ) -> Result<Vec<ToolPin>, StoreError> {
        let (tenant, upstream) = (tenant.clone(), upstream.clone());
        self.read(move |conn| upstreams::list_tool_pins(conn, &tenant, &upstream))
            .await
    }

    async fn observe_tools(
        &self,
        tenant: &TenantId,
        upstream: &UpstreamName,
        sightings: &[ToolSighting],
        trust_first_listing: bool,
        at: Timestamp,
    ) -> Result<Vec<ToolPin>, StoreError> {
        self.write(ObserveTools {
            tenant: tenant.clone(),
            upstream: upstream.clone(),
            sightings: sightings.to_vec(),
            trust_first_listing,
            at,
        })
        .await
    }

    async fn approve_tool(
        &self,
        tenant: &TenantId,
        upstream: &UpstreamName,
        tool: &str,
        hash: &DefinitionHash,
        by: &str,
        at: Timestamp,
    ) -> Result<ToolPin, StoreError> {
        self.write(ApproveTool {
            tenant: tenant.clone(),
            upstream: upstream.clone(),
            tool: tool.to_owned(),
            hash: hash.clone(),
            by: by.to_owned(),
            at,
        })
        .await
    }
}

#[async_trait]
impl StoreHealth for SqliteStore {
    async fn check(&self) -> Result<(), StoreError> {
        // On the point readers: a board busy with searches still answers
        // its readiness probe.
        self.page_read(|conn| {
            conn.query_row("SELECT count(*) FROM sqlite_schema", [], |row| {
                row.get::<_, i64>(0)
            })
            .map(|_| ())
            .map_err(|e| OpError::Store(store_error(&e)))
        })
        .await?;
        if self.inner.writes.is_closed() {
            return Err(StoreError::unavailable("the SQLite writer has stopped"));
        }
        Ok(())
    }
}

#[async_trait]
impl corkboard_board::WebhookStore for SqliteStore {
    async fn create_webhook(
        &self,
        tenant: &TenantId,
        new: &corkboard_board::NewWebhook,
        at: Timestamp,
    ) -> Result<corkboard_board::Webhook, StoreError> {
        self.write(CreateWebhook {
            tenant: tenant.clone(),
            new: new.clone(),
            at,
        })
        .await
    }

    async fn list_webhooks(
        &self,
        tenant: &TenantId,
    ) -> Result<Vec<corkboard_board::WebhookWithStatus>, StoreError> {
        let tenant = tenant.clone();
        self.read(move |conn| webhooks::list_webhooks(conn, &tenant))
            .await
    }

    async fn delete_webhook(
        &self,
        tenant: &TenantId,
        id: &corkboard_board::WebhookId,
    ) -> Result<(), StoreError> {
        self.write(DeleteWebhook {
            tenant: tenant.clone(),
            id: id.clone(),
        })
        .await
    }

    async fn expire_claims(
        &self,
        now: Timestamp,
        limit: u32,
    ) -> Result<Vec<corkboard_board::ExpiredClaim>, StoreError> {
        self.write(ExpireClaims { now, limit }).await
    }

    async fn claim_deliveries(
        &self,
        now: Timestamp,
        lease: std::time::Duration,
        limit: u32,
        per_endpoint: u32,
    ) -> Result<Vec<corkboard_board::ClaimedDelivery>, StoreError> {
        self.write(ClaimDeliveries {
            now,
            lease,
            limit,
            per_endpoint,
        })
        .await
    }

    async fn record_attempt(
        &self,
        id: &corkboard_board::DeliveryId,
        outcome: &corkboard_board::AttemptOutcome,
    ) -> Result<(), StoreError> {
        self.write(RecordAttempt {
            id: id.clone(),
            outcome: outcome.clone(),
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::{ExpensiveReads, IssueState, SearchText};
    use std::sync::mpsc;
    use std::time::Duration;

    /// Long enough that nothing in these tests waits it out: a read that
    /// should answer at once and does not fails the test instead of hanging.
    const PATIENCE: Duration = Duration::from_secs(20);

    fn tenant(name: &str) -> TenantId {
        TenantId::parse(name).unwrap()
    }

    /// A read of B's that must not have waited out [`PATIENCE`].
    fn answered<T>(what: &str, answer: Result<T, tokio::time::error::Elapsed>) -> T {
        answer.unwrap_or_else(|_| panic!("B's {what} waited behind A's reads"))
    }

    /// Tenant A holds its whole share of expensive reads, each holding a
    /// search reader until released, and has more waiting behind them.
    /// Tenant B's point reads, and its own searches on the readers A's
    /// share leaves, all answer while every one of A's is still running.
    #[test]
    fn a_tenant_holding_its_share_does_not_delay_another_tenants_reads() {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteOptions {
            expensive: ExpensiveReads::new(PATIENCE, 2),
            ..SqliteOptions::default()
        };
        assert!(options.search_readers > 2, "the share leaves readers free");
        let store = SqliteStore::open_with(&dir.path().join(FILE_NAME), options).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let (a, b) = (tenant("noisy"), tenant("quiet"));
            let author = Author {
                kind: corkboard_board::AuthorKind::Run,
                run: RunId::parse("r").unwrap(),
                grant: None,
                integrity: corkboard_board::Integrity::Agent,
            };
            let mut issue = NewIssue::new(Title::parse("Quiet tenant's login bug").unwrap());
            issue.state = IssueState::Todo;
            let b_issue = store
                .create_issue(&b, &author, issue, None)
                .await
                .unwrap()
                .issue;

            // A's slow reads: each tells when it runs on a reader, then
            // holds it until released.
            let (started, runs) = mpsc::channel::<()>();
            let mut releases = Vec::new();
            let mut slow = tokio::task::JoinSet::new();
            for _ in 0..4 {
                let (release, released) = mpsc::channel::<()>();
                releases.push(release);
                let (store, a, started) = (store.clone(), a.clone(), started.clone());
                slow.spawn(async move {
                    store
                        .expensive_read(&a, move |conn| {
                            let _ = started.send(());
                            let _ = released.recv();
                            Ok(conn.query_row("SELECT 1", [], |row| row.get::<_, i64>(0))?)
                        })
                        .await
                });
            }
            for _ in 0..2 {
                runs.recv_timeout(PATIENCE).expect("A's share runs");
            }
            assert!(
                runs.recv_timeout(Duration::from_millis(200)).is_err(),
                "A runs its share (2), no more"
            );

            let (plain, search) = (
                ListQuery::default(),
                SearchQuery::new(SearchText::parse("login").unwrap()),
            );
            let filtered = ListQuery {
                states: vec![IssueState::Todo],
                ..ListQuery::default()
            };
            let got = tokio::time::timeout(PATIENCE, store.get_issue(&b, &b_issue.id)).await;
            assert_eq!(answered("get_issue", got).unwrap().id, b_issue.id);
            let page = tokio::time::timeout(PATIENCE, store.list_issues(&b, &plain)).await;
            assert_eq!(answered("list_issues", page).unwrap().issues.len(), 1);
            let page = tokio::time::timeout(PATIENCE, store.list_issues(&b, &filtered)).await;
            let page = answered("filtered list_issues", page).unwrap();
            assert_eq!(page.issues.len(), 1);
            let hits = tokio::time::timeout(PATIENCE, store.search_issues(&b, &search)).await;
            assert_eq!(answered("search_issues", hits).unwrap().hits.len(), 1);
            assert!(
                slow.try_join_next().is_none(),
                "B was answered while all of A's reads were still running"
            );

            for release in releases {
                let _ = release.send(());
            }
            let mut finished = 0;
            while let Some(done) = slow.join_next().await {
                assert_eq!(done.unwrap().unwrap(), 1);
                finished += 1;
            }
            assert_eq!(finished, 4, "A's waiting reads ran once its share was free");
        });
    }

    /// An expensive read abandoned by its caller (a tool's timeout) is
    /// interrupted where it runs, and its reader goes back to the pool.
    #[test]
    fn an_abandoned_expensive_read_is_interrupted_and_frees_its_reader() {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteOptions {
            search_readers: 1,
            expensive: ExpensiveReads::new(PATIENCE, 1),
            ..SqliteOptions::default()
        };
        let store = SqliteStore::open_with(&dir.path().join(FILE_NAME), options).unwrap();
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            let t = tenant("acme");
            // A statement that never ends by itself.
            let endless = |conn: &Connection| -> Result<i64, OpError> {
                Ok(conn.query_row(
                    "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) \
                     SELECT count(*) FROM n",
                    [],
                    |row| row.get(0),
                )?)
            };
            let gave_up = tokio::time::timeout(
                Duration::from_millis(200),
                store.expensive_read(&t, endless),
            )
            .await;
            assert!(gave_up.is_err(), "the caller stopped waiting");
            // The one search reader is free again: the endless statement
            // was interrupted, not left running.
            let next = tokio::time::timeout(
                PATIENCE,
                store.expensive_read(&t, |conn: &Connection| {
                    Ok(conn.query_row("SELECT 2", [], |row| row.get::<_, i64>(0))?)
                }),
            )
            .await
            .expect("the reader came back");
            assert_eq!(next.unwrap(), 2);
        });
    }
}
