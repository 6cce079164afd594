//! Domain values to and from columns.
//!
//! Stored values are parsed back through the domain's constructors, so a row
//! damaged outside this store surfaces as an error naming the row instead of
//! an invalid value travelling on.

use crate::error::OpError;
use corkboard_board::{
    ArgumentsHash, AuditOutcome, AuditRecord, Author, AuthorKind, BlockedBy, Body, Budgets,
    Capabilities, Claim, CloseReason, Comment, CommentBody, CommentId, DefinitionHash, Grant,
    GrantEvent, GrantId, Integrity, IssueId, IssueState, Labels, Priority, RunId, StoreError,
    TenantId, Timestamp, Title, ValidationError,
};
use rusqlite::Row;

/// Separator of the denormalised `issues.labels` column. Labels cannot
/// contain it (they are `[a-z0-9._:/-]`).
const LABEL_SEPARATOR: char = ',';

pub(crate) fn join_labels(labels: &Labels) -> String {
    let mut out = String::new();
    for (i, label) in labels.iter().enumerate() {
        if i > 0 {
            out.push(LABEL_SEPARATOR);
        }
        out.push_str(label.as_str());
    }
    out
}

pub(crate) fn split_labels(text: &str) -> Result<Labels, ValidationError> {
    if text.is_empty() {
        return Ok(Labels::default());
    }
    Labels::parse(text.split(LABEL_SEPARATOR))
}

/// Separator of the denormalised `issues.blocked_by` column (issue ids
/// are `iss_` and Crockford base 32).
const ID_SEPARATOR: char = ',';

pub(crate) fn join_ids(ids: &BlockedBy) -> String {
    ids.iter()
        .map(IssueId::as_str)
        .collect::<Vec<_>>()
        .join(&ID_SEPARATOR.to_string())
}

pub(crate) fn split_ids(text: &str) -> Result<BlockedBy, ValidationError> {
    if text.is_empty() {
        return Ok(BlockedBy::default());
    }
    BlockedBy::parse(
        text.split(ID_SEPARATOR)
            .map(IssueId::parse)
            .collect::<Result<Vec<_>, _>>()?,
    )
}

/// SQLite integers are signed; versions and latencies never get near the
/// limit, and saturating keeps a corrupt huge value from wrapping.
pub(crate) fn to_sql_u64(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(crate) fn from_sql_u64(value: i64) -> u64 {
    u64::try_from(value).unwrap_or(0)
}

pub(crate) fn outcome_from_str(text: &str) -> Option<AuditOutcome> {
    AuditOutcome::parse(text)
}

pub(crate) fn corrupt(what: &str, id: &str, err: impl std::fmt::Display) -> OpError {
    OpError::Store(StoreError::Internal(format!(
        "stored {what} {id} is invalid: {err}"
    )))
}

/// Columns of `issues` that [`issue_from_row`] reads, in its order.
pub(crate) const ISSUE_COLUMNS: &str = "id, title, body, state, labels, priority, author_run, \
     author_grant, created_at, updated_at, version, parent, duplicate_of, blocked_by, \
     close_reason, claim_run, claim_grant, claimed_at, claim_expires_at, author_kind, \
     author_integrity, integrity";

/// `columns` (a comma-separated list) each prefixed with `alias.`, for
/// statements joining tables whose column names overlap.
pub(crate) fn qualified(alias: &str, columns: &str) -> String {
    columns
        .split(',')
        .map(|c| format!("{alias}.{}", c.trim()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How many columns [`ISSUE_COLUMNS`] names.
pub(crate) const ISSUE_COLUMN_COUNT: usize = column_count(ISSUE_COLUMNS);

/// Columns in a comma-separated list.
const fn column_count(columns: &str) -> usize {
    let bytes = columns.as_bytes();
    let (mut i, mut count) = (0, 1);
    while i < bytes.len() {
        if bytes[i] == b',' {
            count += 1;
        }
        i += 1;
    }
    count
}

/// An issue row without its comments. A claim that has ended (its grant
/// expired) reads as none, as of now.
pub(crate) fn issue_from_row(
    tenant: &TenantId,
    row: &Row<'_>,
) -> Result<corkboard_board::Issue, OpError> {
    let id: String = row.get(0)?;
    let bad = |e: ValidationError| corrupt("issue", &id, e);
    let author_grant: Option<String> = row.get(7)?;
    let opt_id = |at: usize| -> Result<Option<IssueId>, OpError> {
        row.get::<_, Option<String>>(at)?
            .map(IssueId::parse)
            .transpose()
            .map_err(bad)
    };
    let close_reason = row
        .get::<_, Option<String>>(14)?
        .map(|r| CloseReason::parse(&r))
        .transpose()
        .map_err(bad)?;
    let claim = match (
        row.get::<_, Option<String>>(15)?,
        row.get::<_, Option<String>>(16)?,
        row.get::<_, Option<i64>>(17)?,
        row.get::<_, Option<i64>>(18)?,
    ) {
        (Some(run), Some(grant), Some(at), Some(expires)) => Claim {
            run: RunId::parse(run).map_err(bad)?,
            grant: GrantId::parse(grant).map_err(bad)?,
            claimed_at: Timestamp::from_millis(at),
            expires_at: Timestamp::from_millis(expires),
        }
        .live_at(Timestamp::now()),
        _ => None,
    };
    Ok(corkboard_board::Issue {
        id: IssueId::parse(id.as_str()).map_err(bad)?,
        tenant: tenant.clone(),
        title: Title::parse(row.get::<_, String>(1)?).map_err(bad)?,
        body: Body::parse(row.get::<_, String>(2)?).map_err(bad)?,
        state: IssueState::parse(&row.get::<_, String>(3)?).map_err(bad)?,
        labels: split_labels(&row.get::<_, String>(4)?).map_err(bad)?,
        priority: Priority::parse(&row.get::<_, String>(5)?).map_err(bad)?,
        author: author(
            AuthorKind::parse(&row.get::<_, String>(19)?).map_err(bad)?,
            RunId::parse(row.get::<_, String>(6)?).map_err(bad)?,
            author_grant.map(GrantId::parse).transpose().map_err(bad)?,
            row.get(20)?,
        ),
        integrity: Integrity::from_rank(row.get(21)?),
        created_at: Timestamp::from_millis(row.get(8)?),
        updated_at: Timestamp::from_millis(row.get(9)?),
        version: from_sql_u64(row.get(10)?),
        comments: Vec::new(),
        parent: opt_id(11)?,
        duplicate_of: opt_id(12)?,
        blocked_by: split_ids(&row.get::<_, String>(13)?).map_err(bad)?,
        close_reason,
        claim,
    })
}

/// An author as stored: its level's rank, NULL in rows written before
/// levels existed ([`Integrity::unrecorded`]).
fn author(kind: AuthorKind, run: RunId, grant: Option<GrantId>, rank: Option<i64>) -> Author {
    Author {
        kind,
        run,
        grant,
        integrity: stored_level(kind, rank),
    }
}

/// The level of an author stored as `kind` and `rank` (NULL in rows
/// written before levels existed: [`Integrity::unrecorded`]).
pub(crate) fn stored_level(kind: AuthorKind, rank: Option<i64>) -> Integrity {
    rank.map_or_else(|| Integrity::unrecorded(kind), Integrity::from_rank)
}

/// Columns of `comments` that [`comment_from_row`] reads, in its order.
pub(crate) const COMMENT_COLUMNS: &str =
    "issue_id, id, body, author_run, author_grant, created_at, author_kind, author_integrity";

/// A comment row and the issue it belongs to.
pub(crate) fn comment_from_row(row: &Row<'_>) -> Result<(String, Comment), OpError> {
    comment_from_row_at(row, 0)
}

/// [`comment_from_row`] for a row whose [`COMMENT_COLUMNS`] start at
/// column `at` (after an issue's, in a join).
pub(crate) fn comment_from_row_at(row: &Row<'_>, at: usize) -> Result<(String, Comment), OpError> {
    let issue_id: String = row.get(at)?;
    let id: String = row.get(at + 1)?;
    let bad = |e: ValidationError| corrupt("comment", &id, e);
    let author_grant: Option<String> = row.get(at + 4)?;
    let comment = Comment {
        id: CommentId::parse(id.as_str()).map_err(bad)?,
        body: CommentBody::parse(row.get::<_, String>(at + 2)?).map_err(bad)?,
        author: author(
            AuthorKind::parse(&row.get::<_, String>(at + 6)?).map_err(bad)?,
            RunId::parse(row.get::<_, String>(at + 3)?).map_err(bad)?,
            author_grant.map(GrantId::parse).transpose().map_err(bad)?,
            row.get(at + 7)?,
        ),
        created_at: Timestamp::from_millis(row.get(at + 5)?),
    };
    Ok((issue_id, comment))
}

/// Columns of `grants` that [`grant_from_row`] reads, in its order.
pub(crate) const GRANT_COLUMNS: &str = "id, tenant, run, capabilities, created_at, expires_at, \
     created_by, token_hash, revoked_at, revoked_by, budgets, min_integrity";

pub(crate) fn grant_from_row(row: &Row<'_>) -> Result<GrantEvent, OpError> {
    let id: String = row.get(0)?;
    let bad = |e: ValidationError| corrupt("grant", &id, e);
    Ok(GrantEvent {
        grant: Grant {
            id: GrantId::parse(id.as_str()).map_err(bad)?,
            tenant: TenantId::parse(row.get::<_, String>(1)?).map_err(bad)?,
            run: RunId::parse(row.get::<_, String>(2)?).map_err(bad)?,
            capabilities: Capabilities::parse_csv(&row.get::<_, String>(3)?).map_err(bad)?,
            created_at: Timestamp::from_millis(row.get(4)?),
            expires_at: Timestamp::from_millis(row.get(5)?),
            created_by: row.get(6)?,
            budgets: serde_json::from_str::<Budgets>(&row.get::<_, String>(10)?)
                .map_err(|e| corrupt("grant", &id, e))?,
            min_integrity: row
                .get::<_, Option<String>>(11)?
                .map(|level| Integrity::parse("min_integrity", &level))
                .transpose()
                .map_err(bad)?,
        },
        token_hash: row.get(7)?,
        revoked_at: row.get::<_, Option<i64>>(8)?.map(Timestamp::from_millis),
        revoked_by: row.get(9)?,
    })
}

/// Columns of `audit` that [`audit_from_row`] reads, in its order.
pub(crate) const AUDIT_COLUMNS: &str = "at, tenant, run, grant_id, tool, outcome, latency_micros, arguments_hash, issue_id, \
     definition_hash";

pub(crate) fn audit_from_row(row: &Row<'_>) -> Result<AuditRecord, OpError> {
    let bad = |e: ValidationError| corrupt("audit record of", "a tool call", e);
    let outcome: String = row.get(5)?;
    let issue: Option<String> = row.get(8)?;
    Ok(AuditRecord {
        at: Timestamp::from_millis(row.get(0)?),
        tenant: TenantId::parse(row.get::<_, String>(1)?).map_err(bad)?,
        run: RunId::parse(row.get::<_, String>(2)?).map_err(bad)?,
        grant: GrantId::parse(row.get::<_, String>(3)?).map_err(bad)?,
        tool: row.get(4)?,
        outcome: outcome_from_str(&outcome).ok_or_else(|| {
            corrupt(
                "audit record of",
                "a tool call",
                format!("unknown outcome {outcome:?}"),
            )
        })?,
        latency_micros: from_sql_u64(row.get(6)?),
        arguments_hash: ArgumentsHash::from_hex(row.get(7)?),
        definition_hash: row
            .get::<_, Option<String>>(9)?
            .map(DefinitionHash::from_stored),
        issue: issue.map(IssueId::parse).transpose().map_err(bad)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_column_count_matches_the_column_list() {
        assert_eq!(ISSUE_COLUMNS.split(',').count(), ISSUE_COLUMN_COUNT);
    }

    #[test]
    fn labels_round_trip_through_the_column() {
        for labels in [
            Labels::default(),
            Labels::parse(["bug"]).unwrap(),
            Labels::parse(["ui", "area:api/v1", "p-1_x.y"]).unwrap(),
        ] {
            let text = join_labels(&labels);
            assert_eq!(split_labels(&text).unwrap(), labels, "{text}");
        }
        assert_eq!(
            join_labels(&Labels::parse(["b", "a"]).unwrap()),
            "a,b",
            "labels are stored sorted"
        );
        assert!(split_labels("Bad").is_err());
    }

    #[test]
    fn every_outcome_round_trips() {
        for outcome in AuditOutcome::ALL {
            assert_eq!(outcome_from_str(outcome.as_str()), Some(outcome));
        }
        assert_eq!(outcome_from_str("nope"), None);
    }

    #[test]
    fn unsigned_values_saturate_instead_of_wrapping() {
        assert_eq!(to_sql_u64(7), 7);
        assert_eq!(to_sql_u64(u64::MAX), i64::MAX);
        assert_eq!(from_sql_u64(-1), 0);
        assert_eq!(from_sql_u64(42), 42);
    }
}
