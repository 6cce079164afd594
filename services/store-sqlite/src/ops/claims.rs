//! Claims on issues: taking one (a run's exclusive hold until it expires),
//! releasing it, and a person's hand-over to another run. Each is one
//! conditional statement; when it matches nothing, the issue's row says
//! why. A new claim is announced to webhooks in the same savepoint.

use super::issues::get_issue;
use super::{WriteOp, webhooks};
use crate::codec::to_sql_u64;
use crate::error::OpError;
use corkboard_board::{
    ClaimCheck, Claimant, Issue, IssueId, RunId, StoreError, TenantId, Timestamp, ValidationError,
    check_hand_over, check_release,
};
use rusqlite::{Connection, params};

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
        let before = webhooks::watched_issue(conn, tenant, id)?;
        let issue = claim_issue(conn, tenant, id, claimant, *expected_version)?;
        webhooks::issue_claimed(conn, tenant, before, &issue)?;
        Ok(issue)
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
        release_issue(
            conn,
            &self.tenant,
            &self.id,
            &self.run,
            self.expected_version,
        )
    }
}

/// Gives an issue's claim to a run whoever holds it (a person's hand-over).
#[derive(Debug)]
pub(crate) struct HandOverClaim {
    pub tenant: TenantId,
    pub id: IssueId,
    pub claimant: Claimant,
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
            expected_version,
        } = self;
        let before = webhooks::watched_issue(conn, tenant, id)?;
        let issue = hand_over_claim(conn, tenant, id, claimant, *expected_version)?;
        webhooks::issue_claimed(conn, tenant, before, &issue)?;
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
    if claimant.expires_at <= now {
        return Err(OpError::Store(StoreError::Invalid(ValidationError::new(
            "grant",
            "the grant of this run has expired; a claim needs a live grant",
        ))));
    }
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
        claimant.expires_at.as_millis(),
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
        ClaimCheck::Free => Err(OpError::Store(StoreError::Invalid(ValidationError::new(
            "grant",
            "the grant of this run has expired; a claim needs a live grant",
        )))),
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
