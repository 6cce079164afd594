//! The list query, built from whichever filters are present so SQLite can
//! pick the index that fits (state, author, label) and every filter runs in
//! SQL. Each combination of filters is one statement text, cached once.

use crate::codec::ISSUE_COLUMNS;
use corkboard_board::{ClaimFilter, LabelFilter, ListQuery, TenantId, Timestamp};
use rusqlite::types::Value;
use std::collections::BTreeSet;

/// A statement and its positional parameters.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Sql {
    pub text: String,
    pub params: Vec<Value>,
}

/// `SELECT` of one page plus one row, so the caller knows whether another
/// page exists without a second query.
pub(crate) fn list_issues(tenant: &TenantId, query: &ListQuery) -> Sql {
    list_issues_at(tenant, query, Timestamp::now())
}

/// [`list_issues`] with claims judged live or ended as of `now`.
pub(crate) fn list_issues_at(tenant: &TenantId, query: &ListQuery, now: Timestamp) -> Sql {
    let mut text = format!("SELECT {ISSUE_COLUMNS} FROM issues i WHERE i.tenant = ?");
    let mut params = vec![Value::Text(tenant.as_str().to_owned())];

    if let Some(cursor) = &query.cursor {
        text.push_str(" AND i.id < ?");
        params.push(Value::Text(cursor.as_str().to_owned()));
    }
    if !query.states.is_empty() {
        let states: BTreeSet<&str> = query.states.iter().map(|s| s.as_str()).collect();
        text.push_str(" AND i.state IN (SELECT value FROM json_each(?))");
        params.push(Value::Text(json_array(states)));
    }
    if let Some(run) = &query.author_run {
        text.push_str(" AND i.author_run = ?");
        params.push(Value::Text(run.as_str().to_owned()));
    }
    if let Some(needle) = &query.text {
        // instr, not LIKE: no wildcard escaping, and the stored lower-cased
        // title matches Rust's Unicode lower-casing of the needle exactly.
        text.push_str(" AND instr(i.title_lower, ?) > 0");
        params.push(Value::Text(needle.to_lowercase()));
    }
    if let Some(parent) = &query.parent {
        text.push_str(" AND i.parent = ?");
        params.push(Value::Text(parent.as_str().to_owned()));
    }
    match &query.claim {
        ClaimFilter::Any => {}
        // An ended claim (its grant expired) is no claim.
        ClaimFilter::Unclaimed => {
            text.push_str(" AND (i.claim_run IS NULL OR i.claim_expires_at <= ?)");
            params.push(Value::Integer(now.as_millis()));
        }
        ClaimFilter::ClaimedBy(run) => {
            text.push_str(" AND i.claim_run = ? AND i.claim_expires_at > ?");
            params.push(Value::Text(run.as_str().to_owned()));
            params.push(Value::Integer(now.as_millis()));
        }
    }
    match &query.labels {
        LabelFilter::None => {}
        LabelFilter::All(wanted) => {
            let wanted: BTreeSet<&str> = wanted.iter().map(|l| l.as_str()).collect();
            text.push_str(
                " AND (SELECT count(*) FROM issue_labels l WHERE l.tenant = i.tenant \
                 AND l.issue_id = i.id AND l.label IN (SELECT value FROM json_each(?))) = ?",
            );
            let count = wanted.len() as i64;
            params.push(Value::Text(json_array(wanted)));
            params.push(Value::Integer(count));
        }
        LabelFilter::Any(wanted) => {
            let wanted: BTreeSet<&str> = wanted.iter().map(|l| l.as_str()).collect();
            text.push_str(
                " AND EXISTS (SELECT 1 FROM issue_labels l WHERE l.tenant = i.tenant \
                 AND l.issue_id = i.id AND l.label IN (SELECT value FROM json_each(?)))",
            );
            params.push(Value::Text(json_array(wanted)));
        }
    }
    text.push_str(" ORDER BY i.id DESC LIMIT ?");
    params.push(Value::Integer(i64::from(query.limit) + 1));
    Sql { text, params }
}

/// A JSON array of strings, for `json_each(?)`: one statement text whatever
/// the number of values, instead of one per `IN (?, ?, ...)` arity.
pub(crate) fn json_array<'a>(values: impl IntoIterator<Item = &'a str>) -> String {
    let values: Vec<&str> = values.into_iter().collect();
    serde_json::to_string(&values).unwrap_or_else(|_| "[]".to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::{IssueId, IssueState, Label, RunId};

    fn tenant() -> TenantId {
        TenantId::parse("acme").unwrap()
    }

    #[test]
    fn no_filters_is_tenant_and_order_only() {
        let sql = list_issues(&tenant(), &ListQuery::default());
        assert!(
            sql.text
                .ends_with("WHERE i.tenant = ? ORDER BY i.id DESC LIMIT ?")
        );
        assert_eq!(
            sql.params,
            vec![Value::Text("acme".into()), Value::Integer(51)]
        );
    }

    #[test]
    fn every_filter_adds_its_clause_and_parameters_in_order() {
        let cursor = IssueId::generate();
        let query = ListQuery {
            states: vec![IssueState::Todo, IssueState::Done, IssueState::Todo],
            labels: LabelFilter::All(vec![
                Label::parse("bug").unwrap(),
                Label::parse("ui").unwrap(),
                Label::parse("bug").unwrap(),
            ]),
            text: Some("FlAky".into()),
            author_run: Some(RunId::parse("r1").unwrap()),
            limit: 10,
            cursor: Some(cursor.clone()),
            ..ListQuery::default()
        };
        let sql = list_issues(&tenant(), &query);
        assert_eq!(sql.text.matches('?').count(), sql.params.len());
        assert_eq!(
            sql.params,
            vec![
                Value::Text("acme".into()),
                Value::Text(cursor.as_str().into()),
                Value::Text(r#"["done","todo"]"#.into()),
                Value::Text("r1".into()),
                Value::Text("flaky".into()),
                Value::Text(r#"["bug","ui"]"#.into()),
                Value::Integer(2),
                Value::Integer(11),
            ]
        );
    }

    #[test]
    fn relation_and_claim_filters_add_their_clauses() {
        let parent = IssueId::generate();
        let now = Timestamp::from_millis(77);
        let query = ListQuery {
            parent: Some(parent.clone()),
            claim: ClaimFilter::ClaimedBy(RunId::parse("r9").unwrap()),
            ..ListQuery::default()
        };
        let sql = list_issues_at(&tenant(), &query, now);
        assert_eq!(sql.text.matches('?').count(), sql.params.len());
        assert_eq!(
            sql.params,
            vec![
                Value::Text("acme".into()),
                Value::Text(parent.as_str().into()),
                Value::Text("r9".into()),
                Value::Integer(77),
                Value::Integer(51),
            ]
        );
        let unclaimed = ListQuery {
            claim: ClaimFilter::Unclaimed,
            ..ListQuery::default()
        };
        let sql = list_issues_at(&tenant(), &unclaimed, now);
        assert!(sql.text.contains("claim_run IS NULL"), "{}", sql.text);
        assert_eq!(sql.text.matches('?').count(), sql.params.len());
    }

    #[test]
    fn any_label_filter_uses_exists() {
        let query = ListQuery {
            labels: LabelFilter::Any(vec![Label::parse("ci").unwrap()]),
            ..ListQuery::default()
        };
        let sql = list_issues(&tenant(), &query);
        assert!(sql.text.contains("EXISTS"), "{}", sql.text);
        assert_eq!(sql.text.matches('?').count(), sql.params.len());
    }

    #[test]
    fn every_list_shape_fits_in_the_statement_cache_with_the_other_reads() {
        let mut shapes = BTreeSet::new();
        for cursor in [None, Some(IssueId::generate())] {
            for states in [vec![], vec![IssueState::Todo]] {
                for author_run in [None, Some(RunId::parse("r").unwrap())] {
                    for text in [None, Some("x".to_owned())] {
                        let label = || vec![Label::parse("l").unwrap()];
                        for labels in [
                            LabelFilter::None,
                            LabelFilter::All(label()),
                            LabelFilter::Any(label()),
                        ] {
                            for parent in [None, Some(IssueId::generate())] {
                                for claim in [
                                    ClaimFilter::Any,
                                    ClaimFilter::Unclaimed,
                                    ClaimFilter::ClaimedBy(RunId::parse("r").unwrap()),
                                ] {
                                    let query = ListQuery {
                                        states: states.clone(),
                                        labels: labels.clone(),
                                        text: text.clone(),
                                        author_run: author_run.clone(),
                                        limit: 10,
                                        cursor: cursor.clone(),
                                        parent: parent.clone(),
                                        claim,
                                    };
                                    shapes.insert(list_issues(&tenant(), &query).text);
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(shapes.len(), 288);
        // 4 point-read statements, page comments, active grants, 4 grant
        // lists, 4 audit lists, 2 inverse relations, BEGIN, COMMIT, ROLLBACK.
        let others = 4 + 1 + 1 + 4 + 4 + 2 + 3;
        assert!(shapes.len() + others <= crate::schema::STATEMENT_CACHE);
    }

    #[test]
    fn json_arrays_escape_their_values() {
        assert_eq!(json_array(["a\"b"]), r#"["a\"b"]"#);
        assert_eq!(json_array(Vec::<&str>::new()), "[]");
    }
}
