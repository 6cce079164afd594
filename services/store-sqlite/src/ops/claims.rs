//! Claims on issues: taking one (a run's exclusive hold until it expires),
//! releasing it, and a person's hand-over to another run. Each is one
//! conditional statement; when it matches nothing, the issue's row says
//! why. A new claim is announced to webhooks in the same op (undone with it).

use super::history;
use super::issues::{get_issue, issue_row};
use super::{WriteOp, webhooks};
use crate::codec::{from_sql_u64, to_sql_u64};
use crate::error::OpError;
use crate::query::{BLOCKED, IDS_WITH_AN_OPEN_BLOCKER, LIVE_CLAIM, READY_ORDER, push_filters};
use corkboard_board::webhook;
use corkboard_board::{
    Author, BoardStats, Change, ChangeKind, Claim, ClaimCheck, ClaimFilter, Claimant, ExpiredClaim,
    Issue, IssueId, IssueState, LabelCount, ListQuery, Priority, RunId, StatsPart, StoreError,
    TenantId, Timestamp, ValidationError, check_hand_over, check_release, queue_limits, run_author,
};
use rusqlite::types::Value;
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};

/// Claims an issue for a run (again, for its own claim: no change).
#[derive(Debug)]
pub(crate) struct ClaimIssue {
    pub tenant: TenantId,
    pub id: IssueId,
    pub claimant: Claimant,
    pub expected_version: Option<u64>,
}

impl WriteOp for ClaimIssue {
    type Output = Issue;
    const NAME: &'static str = "claim_issue";

    fn run(&self, conn: &Connection) -> Result<Issue, OpError> {
        let Self {
            tenant,
            id,
            claimant,
            expected_version,
        } = self;
        // Read first (without comments), for the history and to tell a new
        // claim from a repeat or a renewal of one's own.
        let before = issue_row(conn, tenant, id)?;
        let issue = claim_issue(conn, tenant, id, claimant, *expected_version)?;
        if webhook::is_new_claim(&before, &issue) {
            record_claimed(conn, tenant, &claimant.author(), &before, &issue)?;
        }
        webhooks::issue_claimed(conn, tenant, Some(before), &issue)?;
        Ok(issue)
    }
}

/// Records in the history that `issue`'s claim went to its claimant, from
/// whoever held it `before`, by `by` (the claimant itself, or the person
/// who handed it over).
fn record_claimed(
    conn: &Connection,
    tenant: &TenantId,
    by: &Author,
    before: &Issue,
    issue: &Issue,
) -> Result<(), OpError> {
    history::record(
        conn,
        tenant,
        &Change::claim(
            ChangeKind::Claimed,
            &issue.id,
            issue.version,
            issue.updated_at,
            by,
            before.claim.as_ref(),
            issue.claim.as_ref(),
        ),
    )
}

/// Who a change nobody asked for is recorded as (a claim that ended by
/// itself): the board itself, run `corkboard`.
pub(crate) fn system_author() -> Author {
    run_author(&RunId::parse("corkboard").expect("a valid run id"))
}

/// Claims the best ready issue a query selects for a run.
#[derive(Debug)]
pub(crate) struct ClaimNext {
    pub tenant: TenantId,
    pub query: ListQuery,
    pub claimant: Claimant,
}

impl WriteOp for ClaimNext {
    type Output = corkboard_board::ClaimNext;
    const NAME: &'static str = "claim_next";

    fn run(&self, conn: &Connection) -> Result<Self::Output, OpError> {
        let Self {
            tenant,
            query,
            claimant,
        } = self;
        claim_next(conn, tenant, query, claimant)
    }
}

/// The statement that picks [`claim_next`]'s issue: the candidates for
/// the best ready issue `query` matches at `now`, as `(urgency,
/// created_at, id)` rows, at most two. The best of them in the ready order
/// is the one to claim.
fn claim_next_candidates_sql(
    tenant: &TenantId,
    query: &ListQuery,
    now: Timestamp,
) -> (String, Vec<Value>) {
    let mut ready = query.clone();
    ready.ready = true;
    ready.cursor = None;
    ready.limit = 1;
    // The best unclaimed issue (`issues_ready_unclaimed`, which holds no
    // claimed issue, so live claims cost nothing to pass over) and the best
    // whose claim lapsed but was not swept yet (named: the tenant's claims
    // by their end, whose range is its few lapsed claims, not every
    // tenant's; the planner would otherwise walk the ready index through
    // every live claim); each has every ready condition. The better of
    // the two is chosen by the caller: an `ORDER BY` over both would sort
    // them in a temporary table.
    let mut text = String::from(
        "SELECT * FROM (SELECT i.urgency, i.created_at, i.id FROM issues i \
         WHERE i.tenant = ? AND i.claim_run IS NULL",
    );
    let mut values = vec![Value::Text(tenant.as_str().to_owned())];
    push_filters(&ready, now, &mut text, &mut values);
    text.push_str(READY_ORDER);
    text.push_str(
        " LIMIT 1) UNION ALL SELECT * FROM (SELECT i.urgency, i.created_at, i.id FROM issues i \
         INDEXED BY issues_claim_end_by_tenant WHERE i.tenant = ? AND i.claim_run IS NOT NULL AND i.claim_expires_at <= ?",
    );
    values.push(Value::Text(tenant.as_str().to_owned()));
    values.push(Value::Integer(now.as_millis()));
    push_filters(&ready, now, &mut text, &mut values);
    text.push_str(READY_ORDER);
    text.push_str(" LIMIT 1)");
    (text, values)
}

/// Sets `claimant`'s claim on the issue [`claim_next`] picked. Its own
/// statement, not `RETURNING` from one that picks and claims: SQLite
/// gathers returned rows in a temporary table, built at every run.
const CLAIM_PICKED: &str = "UPDATE issues SET claim_run = ?1, claim_grant = ?2, claimed_at = ?3, \
     claim_expires_at = ?4, version = version + 1, updated_at = max(updated_at, ?3) \
     WHERE tenant = ?5 AND id = ?6";

/// Picks and claims in the writer's transaction, which holds the file's
/// write lock from the pick to the claim: of racing claimants in any
/// process sharing the file each issue goes to exactly one, and no
/// claimant is refused an issue another took: it simply gets the next one.
fn claim_next(
    conn: &Connection,
    tenant: &TenantId,
    query: &ListQuery,
    claimant: &Claimant,
) -> Result<corkboard_board::ClaimNext, OpError> {
    let now = Timestamp::now();
    claimant
        .live_at(now)
        .map_err(|e| OpError::Store(StoreError::Invalid(e)))?;
    let (text, values) = claim_next_candidates_sql(tenant, query, now);
    let candidates: Vec<(i64, i64, String)> = conn
        .prepare_cached(&text)?
        .query_map(params_from_iter(values), |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })?
        .collect::<Result<_, _>>()?;
    // The ready order: urgency, then age, then id (SQLite's BINARY
    // collation compares bytes, as `String`'s order does).
    if let Some((_, _, id)) = candidates.into_iter().min() {
        conn.prepare_cached(CLAIM_PICKED)?.execute(params![
            claimant.run.as_str(),
            claimant.grant.as_str(),
            now.as_millis(),
            claimant.claim_expires_at(now).as_millis(),
            tenant.as_str(),
            id,
        ])?;
        let id = IssueId::parse(id).map_err(|e| OpError::Store(e.into()))?;
        let issue = get_issue(conn, tenant, &id)?;
        webhooks::issue_claimed_next(conn, tenant, &issue)?;
        history::record(
            conn,
            tenant,
            &Change::claim(
                ChangeKind::Claimed,
                &id,
                issue.version,
                issue.updated_at,
                &claimant.author(),
                None,
                issue.claim.as_ref(),
            ),
        )?;
        return Ok(corkboard_board::ClaimNext::Claimed {
            issue: Box::new(issue),
        });
    }
    // Nothing ready: say what the filters match instead.
    let mut open = query.clone();
    open.ready = false;
    open.claim = ClaimFilter::Any;
    let (from, values) = live_claims_from(tenant, Some(&open), now);
    let claimed = count_to_cap(conn, &from, values)?;
    let (from, values) = counted_from(
        OPEN_ISSUES,
        tenant,
        Some(&open),
        now,
        unclaimed_and_blocked(tenant, now),
    );
    let blocked = count_to_cap(conn, &from, values)?;
    Ok(corkboard_board::ClaimNext::no_ready_work(claimed, blocked))
}

/// `FROM ... WHERE ...` on `i`: a tenant's open issues (its one
/// parameter).
const OPEN_ISSUES: &str = "FROM issues i WHERE i.tenant = ? AND i.state NOT IN ('done', 'closed')";

/// [`OPEN_ISSUES`] along the tenant's claims by their end
/// (`issues_claim_end_by_tenant`), for conditions on the claim's end:
/// counting them reads the tenant's live (or stale) claims, not its
/// issues. Named, so no plan can fall back to the primary key, which the
/// planner took over `issues_by_claim` (`tenant = ?` on both): a count
/// then read every issue of the tenant until it had found 10,001 claimed
/// ones.
const CLAIMED_OPEN_ISSUES: &str = "FROM issues i INDEXED BY issues_claim_end_by_tenant \
     WHERE i.tenant = ? AND i.state NOT IN ('done', 'closed')";

/// What the queue counts read, with its parameters: `base` (one of the
/// `FROM ... WHERE i.tenant = ? ...` above) for `tenant`, `query`'s
/// filters when given (claims judged at `now`), then `extra` (` AND ...`
/// and its parameters).
fn counted_from(
    base: &str,
    tenant: &TenantId,
    query: Option<&ListQuery>,
    now: Timestamp,
    (extra, extra_values): (String, Vec<Value>),
) -> (String, Vec<Value>) {
    let mut from = String::from(base);
    let mut values = vec![Value::Text(tenant.as_str().to_owned())];
    if let Some(query) = query {
        push_filters(query, now, &mut from, &mut values);
    }
    from.push_str(&extra);
    values.extend(extra_values);
    (from, values)
}

/// `tenant`'s open issues with a live claim at `now` (and `query`'s
/// filters, when given), along the tenant's claims
/// ([`CLAIMED_OPEN_ISSUES`]).
fn live_claims_from(
    tenant: &TenantId,
    query: Option<&ListQuery>,
    now: Timestamp,
) -> (String, Vec<Value>) {
    let live = (
        format!(" AND {LIVE_CLAIM}"),
        vec![Value::Integer(now.as_millis())],
    );
    counted_from(CLAIMED_OPEN_ISSUES, tenant, query, now, live)
}

/// `tenant`'s open issues whose claim ends by `until`, along the tenant's
/// claims as well.
fn stale_claims_from(tenant: &TenantId, until: Timestamp) -> (String, Vec<Value>) {
    let stale = (
        " AND i.claim_run IS NOT NULL AND i.claim_expires_at <= ?".to_owned(),
        vec![Value::Integer(until.as_millis())],
    );
    counted_from(CLAIMED_OPEN_ISSUES, tenant, None, until, stale)
}

/// ` AND ...`: the issue row `i` has no live claim at `now` and waits on an
/// open blocker, with its parameters. Driven by the blocker relations
/// (`IDS_WITH_AN_OPEN_BLOCKER`), so a count of it costs the tenant's
/// relations, not every open issue; agrees with `BLOCKED`.
fn unclaimed_and_blocked(tenant: &TenantId, now: Timestamp) -> (String, Vec<Value>) {
    (
        format!(" AND NOT {LIVE_CLAIM} AND i.id IN ({IDS_WITH_AN_OPEN_BLOCKER})"),
        vec![
            Value::Integer(now.as_millis()),
            Value::Text(tenant.as_str().to_owned()),
        ],
    )
}

/// Counts the rows of `from` (a `FROM ... WHERE ...` on `i`) with `values`,
/// stopping at one more than [`queue_limits::STATS_COUNT_CAP`], so a
/// count's cost stops growing with the board there (the caller marks a
/// count past the cap as a lower bound).
fn count_to_cap(conn: &Connection, from: &str, mut values: Vec<Value>) -> Result<u64, OpError> {
    let cap = i64::try_from(queue_limits::STATS_COUNT_CAP + 1).unwrap_or(i64::MAX);
    values.push(Value::Integer(cap));
    let n: i64 = conn
        .prepare_cached(&count_sql(from))?
        .query_row(params_from_iter(values), |row| row.get(0))?;
    Ok(from_sql_u64(n))
}

/// The statement [`count_to_cap`] runs for `from`; its last parameter is
/// the cap.
fn count_sql(from: &str) -> String {
    format!("SELECT count(*) FROM (SELECT 1 {from} LIMIT ?)")
}

/// The claim stored on an issue, ended or not (a read normalises an
/// ended one away).
pub(crate) fn stored_claim(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
) -> Result<Option<Claim>, OpError> {
    let row: Option<(String, String, i64, i64)> = conn
        .prepare_cached(
            "SELECT claim_run, claim_grant, claimed_at, claim_expires_at FROM issues \
             WHERE tenant = ?1 AND id = ?2 AND claim_run IS NOT NULL",
        )?
        .query_row(params![tenant.as_str(), id.as_str()], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?))
        })
        .optional()?;
    let bad = |e: ValidationError| OpError::Store(e.into());
    row.map(|(run, grant, claimed_at, expires_at)| {
        Ok(Claim {
            run: RunId::parse(run).map_err(bad)?,
            grant: corkboard_board::GrantId::parse(grant).map_err(bad)?,
            claimed_at: Timestamp::from_millis(claimed_at),
            expires_at: Timestamp::from_millis(expires_at),
        })
    })
    .transpose()
}

/// The claims whose end is at or before `?1`, the earliest ended first, at
/// most `?2`, as `(tenant, id)`. Claims are ordered by their end only
/// within their tenant (`issues_claim_end_by_tenant`, migration 26), so
/// the tenants holding claims are found one seek each (the next tenant
/// after the last, a skip-scan), and each one's ended claims are a range
/// of that index: a sweep costs the tenants with claims and the claims
/// that ended, not every live claim.
const DUE_CLAIMS: &str = "WITH RECURSIVE holders(tenant) AS ( \
       SELECT (SELECT min(tenant) FROM issues INDEXED BY issues_claim_end_by_tenant \
               WHERE claim_run IS NOT NULL) \
       UNION ALL \
       SELECT (SELECT min(i.tenant) FROM issues i INDEXED BY issues_claim_end_by_tenant \
               WHERE i.claim_run IS NOT NULL AND i.tenant > holders.tenant) \
       FROM holders WHERE holders.tenant IS NOT NULL) \
     SELECT i.tenant, i.id FROM holders \
       JOIN issues i INDEXED BY issues_claim_end_by_tenant ON i.tenant = holders.tenant \
     WHERE i.claim_run IS NOT NULL AND i.claim_expires_at <= ?1 \
     ORDER BY i.claim_expires_at LIMIT ?2";

/// Ends claims whose end has passed without a release.
#[derive(Debug)]
pub(crate) struct ExpireClaims {
    pub now: Timestamp,
    pub limit: u32,
}

impl WriteOp for ExpireClaims {
    type Output = Vec<ExpiredClaim>;
    const NAME: &'static str = "expire_claims";

    fn run(&self, conn: &Connection) -> Result<Vec<ExpiredClaim>, OpError> {
        let now = self.now.as_millis();
        let ended: Vec<(String, String)> = conn
            .prepare_cached(DUE_CLAIMS)?
            .query_map(params![now, i64::from(self.limit)], |row| {
                Ok((row.get(0)?, row.get(1)?))
            })?
            .collect::<Result<_, _>>()?;
        let mut out = Vec::new();
        for (tenant, id) in ended {
            let bad = |e: ValidationError| OpError::Store(e.into());
            let tenant = TenantId::parse(tenant).map_err(bad)?;
            let id = IssueId::parse(id).map_err(bad)?;
            // The stored claim, ended (a read normalises it away).
            let Some(claim) = stored_claim(conn, &tenant, &id)? else {
                continue;
            };
            conn.prepare_cached(
                "UPDATE issues SET claim_run = NULL, claim_grant = NULL, claimed_at = NULL, \
                 claim_expires_at = NULL, version = version + 1, updated_at = max(updated_at, ?1) \
                 WHERE tenant = ?2 AND id = ?3",
            )?
            .execute(params![now, tenant.as_str(), id.as_str()])?;
            let issue = issue_row(conn, &tenant, &id)?;
            webhooks::claim_expired(conn, &tenant, &issue, &claim)?;
            history::record(
                conn,
                &tenant,
                &Change::claim(
                    ChangeKind::ClaimExpired,
                    &id,
                    issue.version,
                    issue.updated_at,
                    &system_author(),
                    Some(&claim),
                    None,
                ),
            )?;
            out.push(ExpiredClaim {
                tenant,
                issue: id,
                version: issue.version,
                claim,
            });
        }
        Ok(out)
    }
}

/// Ends a run's live claim on an issue.
#[derive(Debug)]
pub(crate) struct ReleaseIssue {
    pub tenant: TenantId,
    pub id: IssueId,
    pub run: RunId,
    pub expected_version: Option<u64>,
}

impl WriteOp for ReleaseIssue {
    type Output = Issue;
    const NAME: &'static str = "release_issue";

    fn run(&self, conn: &Connection) -> Result<Issue, OpError> {
        let before = issue_row(conn, &self.tenant, &self.id)?;
        let issue = release_issue(
            conn,
            &self.tenant,
            &self.id,
            &self.run,
            self.expected_version,
        )?;
        history::record(
            conn,
            &self.tenant,
            &Change::claim(
                ChangeKind::Released,
                &self.id,
                issue.version,
                issue.updated_at,
                &run_author(&self.run),
                before.claim.as_ref(),
                None,
            ),
        )?;
        Ok(issue)
    }
}

/// Gives an issue's claim to a run whoever holds it (a person's hand-over).
#[derive(Debug)]
pub(crate) struct HandOverClaim {
    pub tenant: TenantId,
    pub id: IssueId,
    pub claimant: Claimant,
    /// The person handing it over: the history's author.
    pub by: Author,
    pub expected_version: u64,
}

impl WriteOp for HandOverClaim {
    type Output = Issue;
    const NAME: &'static str = "hand_over_claim";

    fn run(&self, conn: &Connection) -> Result<Issue, OpError> {
        let Self {
            tenant,
            id,
            claimant,
            by,
            expected_version,
        } = self;
        // Read first, for the history (the claim before) and the event.
        let before = issue_row(conn, tenant, id)?;
        let issue = hand_over_claim(conn, tenant, id, claimant, *expected_version)?;
        record_claimed(conn, tenant, by, &before, &issue)?;
        webhooks::issue_claimed(conn, tenant, Some(before), &issue)?;
        Ok(issue)
    }
}

/// One conditional statement moves the claim: it matches an open issue at
/// the version the person saw, whoever holds it, so the old holder's claim
/// ends and the new one starts in the same write.
fn hand_over_claim(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
    claimant: &Claimant,
    expected_version: u64,
) -> Result<Issue, OpError> {
    let now = Timestamp::now();
    claimant
        .live_at(now)
        .map_err(|e| OpError::Store(StoreError::Invalid(e)))?;
    let mut stmt = conn.prepare_cached(
        "UPDATE issues SET claim_run = ?1, claim_grant = ?2, claimed_at = ?3, \
         claim_expires_at = ?4, version = version + 1, updated_at = max(updated_at, ?3) \
         WHERE tenant = ?5 AND id = ?6 AND state NOT IN ('done', 'closed') AND version = ?7",
    )?;
    let changed = stmt.execute(params![
        claimant.run.as_str(),
        claimant.grant.as_str(),
        now.as_millis(),
        claimant.expires_at.as_millis(),
        tenant.as_str(),
        id.as_str(),
        to_sql_u64(expected_version),
    ])?;
    let issue = get_issue(conn, tenant, id)?;
    if changed == 1 {
        return Ok(issue);
    }
    check_hand_over(&issue, expected_version).map_err(OpError::Store)?;
    Err(OpError::Store(StoreError::Internal(format!(
        "handing over issue {id} matched nothing although it is open at the expected version"
    ))))
}

/// One conditional statement decides a claim: it matches only an open
/// issue with no live claim (none, an expired one, or the same run's under
/// another grant) at the expected version. Claims of revoked grants were
/// cleared with the revocation, in its transaction. When it matches
/// nothing, the row says why ([`ClaimCheck`]).
fn claim_issue(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
    claimant: &Claimant,
    expected_version: Option<u64>,
) -> Result<Issue, OpError> {
    let now = Timestamp::now();
    if claimant.renews() {
        // One's own live claim: only its end moves (no new version, so an
        // agent's expected_version stays good).
        let renewed = conn
            .prepare_cached(
                "UPDATE issues SET claim_expires_at = ?1 \
                 WHERE tenant = ?2 AND id = ?3 AND state NOT IN ('done', 'closed') \
                 AND claim_run = ?4 AND claim_grant = ?5 AND claim_expires_at > ?6 \
                 AND (?7 IS NULL OR version = ?7) AND ?1 > ?6",
            )?
            .execute(params![
                claimant.claim_expires_at(now).as_millis(),
                tenant.as_str(),
                id.as_str(),
                claimant.run.as_str(),
                claimant.grant.as_str(),
                now.as_millis(),
                expected_version.map(to_sql_u64),
            ])?;
        if renewed == 1 {
            return get_issue(conn, tenant, id);
        }
    }
    let mut stmt = conn.prepare_cached(
        "UPDATE issues SET claim_run = ?1, claim_grant = ?2, claimed_at = ?3, \
         claim_expires_at = ?4, version = version + 1, updated_at = max(updated_at, ?3) \
         WHERE tenant = ?5 AND id = ?6 AND state NOT IN ('done', 'closed') \
         AND (claim_run IS NULL OR claim_expires_at <= ?3 OR (claim_run = ?1 AND claim_grant <> ?2)) \
         AND (?7 IS NULL OR version = ?7) AND ?4 > ?3",
    )?;
    let changed = stmt.execute(params![
        claimant.run.as_str(),
        claimant.grant.as_str(),
        now.as_millis(),
        claimant.claim_expires_at(now).as_millis(),
        tenant.as_str(),
        id.as_str(),
        expected_version.map(to_sql_u64),
    ])?;
    let issue = get_issue(conn, tenant, id)?;
    if changed == 1 {
        return Ok(issue);
    }
    match ClaimCheck::of(&issue, claimant, expected_version) {
        ClaimCheck::Own => Ok(issue),
        ClaimCheck::Refused(err) => Err(OpError::Store(err)),
        // Only a claimant whose grant has already expired gets here.
        ClaimCheck::Free => Err(OpError::Store(StoreError::Invalid(Claimant::expired()))),
    }
}

/// Ends `run`'s live claim, in one conditional statement.
fn release_issue(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
    run: &RunId,
    expected_version: Option<u64>,
) -> Result<Issue, OpError> {
    let now = Timestamp::now();
    let mut stmt = conn.prepare_cached(
        "UPDATE issues SET claim_run = NULL, claim_grant = NULL, claimed_at = NULL, \
         claim_expires_at = NULL, version = version + 1, updated_at = max(updated_at, ?1) \
         WHERE tenant = ?2 AND id = ?3 AND claim_run = ?4 AND claim_expires_at > ?1 \
         AND (?5 IS NULL OR version = ?5)",
    )?;
    let changed = stmt.execute(params![
        now.as_millis(),
        tenant.as_str(),
        id.as_str(),
        run.as_str(),
        expected_version.map(to_sql_u64),
    ])?;
    let issue = get_issue(conn, tenant, id)?;
    if changed == 1 {
        return Ok(issue);
    }
    check_release(&issue, run, expected_version).map_err(OpError::Store)?;
    Err(OpError::Store(StoreError::Internal(format!(
        "releasing issue {id} matched nothing although the run holds it"
    ))))
}

/// `board_stats`: the per-state, per-priority and per-label counts from
/// `board_counts` (kept exact by triggers in every write's transaction:
/// migration 18), so they cost the number of keys, not of issues; the
/// claimed and stale counts along `issues_by_claim`, the blocked count
/// from the blocker relations, each stopped at one more than
/// [`queue_limits::STATS_COUNT_CAP`]; ready derived from them when they
/// are exact, else counted along the ready index, stopped likewise.
pub(crate) fn board_stats(
    conn: &Connection,
    tenant: &TenantId,
    now: Timestamp,
    stale_until: Timestamp,
) -> Result<BoardStats, OpError> {
    let mut stats = BoardStats::default();
    let t = tenant.as_str();
    let bad = |e: ValidationError| OpError::Store(e.into());
    let mut counts =
        conn.prepare_cached("SELECT kind, key, n FROM board_counts WHERE tenant = ?1 AND n > 0")?;
    let mut rows = counts.query(params![t])?;
    let mut labels = Vec::new();
    while let Some(row) = rows.next()? {
        let (kind, key): (String, String) = (row.get(0)?, row.get(1)?);
        let n = from_sql_u64(row.get(2)?);
        match kind.as_str() {
            "state" => {
                stats
                    .by_state
                    .insert(IssueState::parse(&key).map_err(bad)?, n);
            }
            "priority" => {
                stats
                    .by_priority
                    .insert(Priority::parse(&key).map_err(bad)?, n);
            }
            _ => labels.push(LabelCount {
                label: key,
                issues: n,
            }),
        }
    }
    stats.set_labels(labels);
    stats.finish();
    let count = |(from, values): (String, Vec<Value>)| count_to_cap(conn, &from, values);
    let claimed = count(live_claims_from(tenant, None, now))?;
    stats.claimed = stats.capped(StatsPart::Claimed, claimed);
    let blocked = count(counted_from(
        OPEN_ISSUES,
        tenant,
        None,
        now,
        unclaimed_and_blocked(tenant, now),
    ))?;
    stats.blocked = stats.capped(StatsPart::Blocked, blocked);
    let stale = count(stale_claims_from(tenant, stale_until))?;
    stats.stale = stats.capped(StatsPart::Stale, stale);
    if !stats.derive_ready() {
        let unclaimed_and_unblocked = (
            format!(" AND NOT {LIVE_CLAIM} AND NOT {BLOCKED}"),
            vec![Value::Integer(now.as_millis())],
        );
        let ready = count(counted_from(
            OPEN_ISSUES,
            tenant,
            None,
            now,
            unclaimed_and_unblocked,
        ))?;
        stats.ready = stats.capped(StatsPart::Ready, ready);
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema;

    /// A board file's writer connection, in a directory that lives as
    /// long as the returned guard.
    fn writer() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let conn = schema::open_writer(&dir.path().join("s.sqlite3"), &Default::default()).unwrap();
        (dir, conn)
    }

    #[test]
    fn claim_next_passes_over_no_claimed_issue() {
        let (_dir, conn) = writer();
        let tenant = TenantId::parse("t").unwrap();
        let (text, values) =
            claim_next_candidates_sql(&tenant, &ListQuery::default(), Timestamp::now());
        let plan = crate::query::query_plan(&conn, &text, params_from_iter(values)).join("\n");
        // Unclaimed issues from the index without claims, in the ready
        // order (no sort of the board); lapsed claims from the tenant's
        // claims by their end (sorted: only those, and only this
        // tenant's); never the ready index, which holds every live claim.
        assert!(
            plan.contains("SEARCH i USING INDEX issues_ready_unclaimed (tenant=?)"),
            "{plan}"
        );
        assert!(
            plan.contains(
                "SEARCH i USING INDEX issues_claim_end_by_tenant (tenant=? AND claim_expires_at<?)"
            ),
            "{plan}"
        );
        assert!(!plan.contains("issues_ready ("), "{plan}");
        assert!(!plan.contains("SCAN i"), "{plan}");
    }

    /// A temporary table costs a claim a B-tree and its page cache, built
    /// and dropped at every run (opcode `OpenEphemeral`). The claim builds
    /// none; the pick builds one, to sort the lapsed claims it considers
    /// (few, and not in the ready order); with `RETURNING` and an `ORDER BY`
    /// over both candidates it built three.
    #[test]
    fn a_claim_builds_no_temporary_table_but_the_lapsed_claims_sort() {
        let (_dir, conn) = writer();
        // The writer's own notes of what its group touched (open_titles.rs).
        conn.execute_batch(crate::open_titles::CREATE_TOUCHED)
            .unwrap();
        let tenant = TenantId::parse("t").unwrap();
        let (text, values) =
            claim_next_candidates_sql(&tenant, &ListQuery::default(), Timestamp::now());
        let pick = crate::query::opcodes(&conn, &text, params_from_iter(values));
        assert_eq!(
            pick.iter().filter(|op| *op == "OpenEphemeral").count(),
            1,
            "{pick:?}"
        );
        let claim = crate::query::opcodes(
            &conn,
            CLAIM_PICKED,
            params!["run-a", "grt_x", 1, 2, "t", "iss_1"],
        );
        assert!(claim.iter().any(|op| op == "Program"), "{claim:?}");
        assert!(!claim.iter().any(|op| op == "OpenEphemeral"), "{claim:?}");
    }

    /// The sweep's claims: every tenant's ended ones, the earliest ended
    /// first, none still running, found by one seek per tenant holding
    /// claims and a range of each one's ended claims (no pass over every
    /// claim or issue).
    #[test]
    fn the_sweep_takes_every_tenants_ended_claims_earliest_first() {
        let (_dir, conn) = writer();
        let mut insert = conn
            .prepare(
                "INSERT INTO issues (tenant, id, title, title_lower, body, state, priority, \
                 labels, author_run, created_at, updated_at, version, claim_run, claim_grant, \
                 claimed_at, claim_expires_at) \
                 VALUES (?1, ?2, 'x', 'x', '', 'todo', 'low', '', 'r', 1, 1, 1, ?3, ?4, 1, ?5)",
            )
            .unwrap();
        // (tenant, id, the claim's end; none: unclaimed)
        for (tenant, id, end) in [
            ("a", "a-late", Some(50)),
            ("a", "a-first", Some(10)),
            ("b", "b-second", Some(20)),
            ("b", "b-running", Some(1_000)),
            ("b", "b-unclaimed", None),
            ("c", "c-third", Some(30)),
            ("d", "d-running", Some(2_000)),
        ] {
            let holder = end.map(|_| "run-c");
            insert
                .execute(params![tenant, id, holder, holder.map(|_| "gr_1"), end])
                .unwrap();
        }
        drop(insert);
        let due = |limit: i64| -> Vec<String> {
            conn.prepare(DUE_CLAIMS)
                .unwrap()
                .query_map(params![100, limit], |row| row.get::<_, String>(1))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(due(10), ["a-first", "b-second", "c-third", "a-late"]);
        assert_eq!(due(3), ["a-first", "b-second", "c-third"]);
        let plan = crate::query::query_plan(&conn, DUE_CLAIMS, params![100, 10]).join("\n");
        for step in [
            // The next tenant holding claims.
            "SEARCH i USING INDEX issues_claim_end_by_tenant (tenant>?)",
            // Its ended claims.
            "SEARCH i USING INDEX issues_claim_end_by_tenant (tenant=? AND claim_expires_at<?)",
        ] {
            assert!(plan.contains(step), "{step}: {plan}");
        }
        assert!(!plan.contains("SCAN i"), "{plan}");
        assert!(!plan.contains("SCAN issues"), "{plan}");
    }

    /// The counts of a tenant's claims read its claims, not its issues: on
    /// the primary key (which the planner took while only `tenant = ?`
    /// told the two apart) a count read every issue of the tenant until it
    /// had found 10,001 claimed ones.
    #[test]
    fn the_claim_counts_read_the_tenants_claims_not_its_issues() {
        let (_dir, conn) = writer();
        let tenant = TenantId::parse("t").unwrap();
        let now = Timestamp::now();
        let cap = 10_001;
        let plan = |from: &str, values: Vec<Value>| {
            let mut values = values;
            values.push(Value::Integer(cap));
            crate::query::query_plan(&conn, &count_sql(from), params_from_iter(values)).join("\n")
        };
        // board_stats' claimed count, and claim_next's with the filters a
        // call may give (a label, a priority, the integrity floor).
        let (from, values) = live_claims_from(&tenant, None, now);
        let filtered = ListQuery {
            labels: corkboard_board::LabelFilter::All(vec![
                corkboard_board::Label::parse("bug").unwrap(),
            ]),
            priorities: vec![Priority::High],
            min_integrity: Some(corkboard_board::Integrity::Agent),
            ..ListQuery::default()
        };
        let (filtered_from, filtered_values) = live_claims_from(&tenant, Some(&filtered), now);
        let (stale_from, stale_values) = stale_claims_from(&tenant, now);
        for (what, plan) in [
            ("claimed", plan(&from, values)),
            ("claimed, filtered", plan(&filtered_from, filtered_values)),
            ("stale", plan(&stale_from, stale_values)),
        ] {
            assert!(
                plan.contains(
                    "USING INDEX issues_claim_end_by_tenant (tenant=? AND claim_expires_at"
                ),
                "{what}: {plan}"
            );
        }
    }

    /// A board of `claimed` issues of tenant `t` claimed by run `run-c` for
    /// an hour from `now` and `ready` unclaimed ones, all `todo` and `low`,
    /// written in one transaction.
    fn claimed_board(conn: &Connection, claimed: u64, ready: u64, now: Timestamp) {
        conn.execute_batch("BEGIN").unwrap();
        let mut insert = conn
            .prepare(
                "INSERT INTO issues (tenant, id, title, title_lower, body, state, priority, \
                 labels, author_run, created_at, updated_at, version, claim_run, claim_grant, \
                 claimed_at, claim_expires_at) \
                 VALUES ('t', ?1, 'x', 'x', '', 'todo', 'low', '', 'r', 1, 1, 1, ?2, ?3, 1, ?4)",
            )
            .unwrap();
        for i in 0..claimed + ready {
            let holder = (i < claimed).then_some("run-c");
            insert
                .execute(params![
                    format!("iss_{i:06}"),
                    holder,
                    holder.map(|_| "gr_1"),
                    holder.map(|_| now.plus_millis(3_600_000).as_millis()),
                ])
                .unwrap();
        }
        drop(insert);
        conn.execute_batch("COMMIT").unwrap();
    }

    #[test]
    fn claim_next_with_no_ready_work_stops_its_counts_at_the_cap_and_says_so() {
        let (_dir, conn) = writer();
        let cap = queue_limits::STATS_COUNT_CAP;
        let now = Timestamp::now();
        claimed_board(&conn, cap + 5, 0, now);
        let claimant = corkboard_store_contract::fixtures::claimant("run-a", None);
        let tenant = TenantId::parse("t").unwrap();
        let next = claim_next(&conn, &tenant, &ListQuery::default(), &claimant).unwrap();
        assert_eq!(
            next,
            corkboard_board::ClaimNext::NoReadyWork {
                claimed: cap,
                blocked: 0,
                at_least: [StatsPart::Claimed].into_iter().collect(),
            }
        );
    }

    #[test]
    fn board_stats_stop_the_queue_counts_at_the_cap_and_say_so() {
        let (_dir, conn) = writer();
        let cap = queue_limits::STATS_COUNT_CAP;
        let now = Timestamp::now();
        // `cap` + 5 claimed issues and 7 ready ones.
        let claimed = cap + 5;
        claimed_board(&conn, claimed, 7, now);
        let stats = board_stats(&conn, &TenantId::parse("t").unwrap(), now, now).unwrap();
        // Per state and priority: exact, from the kept counts.
        assert_eq!(stats.by_state.get(&IssueState::Todo), Some(&(claimed + 7)));
        assert_eq!(stats.by_priority.get(&Priority::Low), Some(&(claimed + 7)));
        assert_eq!(stats.claimed, cap);
        assert_eq!(stats.ready, 7, "counted along the ready index");
        assert_eq!(
            stats.at_least,
            [StatsPart::Claimed].into_iter().collect(),
            "only the claimed count stopped"
        );
    }
}
