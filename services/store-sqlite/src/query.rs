//! The list query, built from whichever filters are present so SQLite can
//! pick the index that fits (state, author, label) and every filter runs in
//! SQL. Each combination of filters is one statement text, cached once.

use crate::codec::{ISSUE_COLUMNS, qualified};
use corkboard_board::{
    ClaimFilter, LabelFilter, ListQuery, SearchQuery, SearchText, TenantId, Timestamp, Title,
    limits, tokens,
};
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
    push_filters(query, now, &mut text, &mut params);
    text.push_str(" ORDER BY i.id DESC LIMIT ?");
    params.push(Value::Integer(i64::from(query.limit) + 1));
    Sql { text, params }
}

/// Appends the condition of every filter `query` sets (not its cursor) on
/// the issues row `i` (claims judged as of `now`), as ` AND ...` clauses
/// with their parameters: the one
/// WHERE builder of lists and searches, so each filter means the same in
/// both.
pub(crate) fn push_filters(
    query: &ListQuery,
    now: Timestamp,
    text: &mut String,
    params: &mut Vec<Value>,
) {
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
    if !query.priorities.is_empty() {
        let priorities: BTreeSet<&str> = query.priorities.iter().map(|p| p.as_str()).collect();
        text.push_str(" AND i.priority IN (SELECT value FROM json_each(?))");
        params.push(Value::Text(json_array(priorities)));
    }
    if let Some(since) = query.updated_since {
        text.push_str(" AND i.updated_at >= ?");
        params.push(Value::Integer(since.as_millis()));
    }
}

/// bm25 weights of the search table's columns, in its column order
/// (tenant, issue_id, title, body, comments): the tenant phrase every query
/// carries counts for nothing, a title match far more than a body match,
/// and a body match more than a comment match.
const BM25_WEIGHTS: &str = "0.0, 0.0, 10.0, 3.0, 1.0";

/// The FTS5 phrase of one word: our words are alphanumeric (see
/// `corkboard_board::tokens`), so they never contain a `"`.
fn phrase(word: &str) -> String {
    format!("\"{word}\"")
}

/// The MATCH expression pinning `tenant`: its one token in the tenant
/// column (tenant ids are `[a-z0-9-]`, and the table's tokenizer keeps `-`
/// inside a token).
fn tenant_phrase(tenant: &TenantId) -> String {
    format!("tenant : {}", phrase(tenant.as_str()))
}

/// The MATCH expression of a search: the tenant, and every term somewhere
/// in the title, body or comments (`word*` for a prefix term).
pub(crate) fn search_match(tenant: &TenantId, text: &SearchText) -> String {
    let terms: Vec<String> = text
        .terms()
        .iter()
        .map(|t| {
            let p = phrase(&t.word);
            if t.prefix { format!("{p}*") } else { p }
        })
        .collect();
    format!(
        "{} AND {{title body comments}} : ({})",
        tenant_phrase(tenant),
        terms.join(" AND ")
    )
}

/// The ranked hits of a search, one row more than the page (so the caller
/// knows whether another page exists): the issue's columns, then the bm25
/// rank (lower is better). The FTS table drives the join (CROSS JOIN), each
/// hit is found in `issues` by its primary key and must be that issue's
/// current search row, and every list filter applies through
/// [`push_filters`].
pub(crate) fn search_issues(tenant: &TenantId, query: &SearchQuery) -> Sql {
    let mut text = format!(
        "SELECT {}, bm25(issue_search, {BM25_WEIGHTS}) AS rank \
         FROM issue_search s CROSS JOIN issues i ON i.tenant = ? AND i.id = s.issue_id \
         WHERE issue_search MATCH ? AND i.search_rowid = s.rowid",
        qualified("i", ISSUE_COLUMNS)
    );
    let mut params = vec![
        Value::Text(tenant.as_str().to_owned()),
        Value::Text(search_match(tenant, &query.text)),
    ];
    push_filters(&query.filter, Timestamp::now(), &mut text, &mut params);
    text.push_str(" ORDER BY rank, i.updated_at DESC, i.id DESC LIMIT ? OFFSET ?");
    params.push(Value::Integer(i64::from(query.limit) + 1));
    params.push(Value::Integer(i64::from(query.offset)));
    Sql { text, params }
}

/// The statement of one bounded candidate scan of `similar_open_issues`:
/// the newest `limit` search rows matching the MATCH expression (FTS5
/// walks its doclists in rowid order and stops at the limit), joined to
/// their issues, closed ones left out: id, title, state, updated_at.
/// Without bm25 on purpose: ranking needs every matching row (bm25 counts
/// each phrase's matches), which made every create linear in the board;
/// the domain's `rank_similar` decides among the candidates.
const SIMILAR_SCAN: &str = "SELECT i.id, i.title, i.state, i.updated_at \
     FROM (SELECT rowid AS rid, issue_id FROM issue_search WHERE issue_search MATCH ? \
           ORDER BY rowid DESC LIMIT ?) s \
     CROSS JOIN issues i ON i.tenant = ? AND i.id = s.issue_id \
     WHERE i.search_rowid = s.rid AND i.state NOT IN (SELECT value FROM json_each(?))";

/// The candidate scans of `similar_open_issues`, as the MongoDB store
/// makes them: the newest open issues whose titles hold every word of
/// `title` (near duplicates are there), then the newest sharing any word;
/// each bounded (`limits::SIMILAR_ALL_CANDIDATES`, `SIMILAR_ANY_CANDIDATES`),
/// so the look-up every create makes does not grow with the board. Empty
/// when the title has no words.
pub(crate) fn similar_candidates(tenant: &TenantId, title: &Title) -> Vec<Sql> {
    let words: BTreeSet<String> = tokens(title.as_str()).collect();
    if words.is_empty() {
        return Vec::new();
    }
    let words: Vec<String> = words.iter().map(|w| phrase(w)).collect();
    let open: Vec<&str> = corkboard_board::IssueState::ALL
        .into_iter()
        .filter(|s| !corkboard_board::is_open(*s))
        .map(|s| s.as_str())
        .collect();
    let closed = json_array(open);
    [
        (words.join(" AND "), limits::SIMILAR_ALL_CANDIDATES),
        (words.join(" OR "), limits::SIMILAR_ANY_CANDIDATES),
    ]
    .into_iter()
    .map(|(terms, limit)| Sql {
        text: SIMILAR_SCAN.to_owned(),
        params: vec![
            Value::Text(format!("{} AND title : ({terms})", tenant_phrase(tenant))),
            Value::Integer(i64::from(limit)),
            Value::Text(tenant.as_str().to_owned()),
            Value::Text(closed.clone()),
        ],
    })
    .collect()
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
    use corkboard_board::{IssueId, IssueState, Label, Priority, RunId, Timestamp};

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
            priorities: vec![Priority::Urgent, Priority::None],
            updated_since: Some(Timestamp::from_millis(1234)),
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
                Value::Text(r#"["none","urgent"]"#.into()),
                Value::Integer(1234),
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
        let label = || vec![Label::parse("l").unwrap()];
        for cursor in [None, Some(IssueId::generate())] {
            for states in [vec![], vec![IssueState::Todo]] {
                for author_run in [None, Some(RunId::parse("r").unwrap())] {
                    for text in [None, Some("x".to_owned())] {
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
                                    for priorities in [vec![], vec![Priority::High]] {
                                        for updated_since in [None, Some(Timestamp::from_millis(1))]
                                        {
                                            let query = ListQuery {
                                                states: states.clone(),
                                                labels: labels.clone(),
                                                text: text.clone(),
                                                author_run: author_run.clone(),
                                                limit: 10,
                                                cursor: cursor.clone(),
                                                parent: parent.clone(),
                                                claim: claim.clone(),
                                                priorities: priorities.clone(),
                                                updated_since,
                                            };
                                            shapes.insert(list_issues(&tenant(), &query).text);
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(shapes.len(), 1152);
        // 4 point-read statements, page comments, active grants, 4 grant
        // lists, 4 audit lists, 2 inverse relations, BEGIN, COMMIT, ROLLBACK.
        let others = 4 + 1 + 1 + 4 + 4 + 2 + 3;
        assert!(shapes.len() + others <= crate::schema::STATEMENT_CACHE);
    }

    #[test]
    fn searches_pin_the_tenant_in_the_join_and_the_match_and_reuse_the_filters() {
        let mut query = SearchQuery::new(SearchText::parse("Login timeo* \"x\"").unwrap());
        query.filter.states = vec![IssueState::Todo];
        query.offset = 20;
        let sql = search_issues(&tenant(), &query);
        assert_eq!(sql.text.matches('?').count(), sql.params.len());
        assert_eq!(
            sql.params,
            vec![
                Value::Text("acme".into()),
                Value::Text(
                    r#"tenant : "acme" AND {title body comments} : ("login" AND "timeo"* AND "x")"#
                        .into()
                ),
                Value::Text(r#"["todo"]"#.into()),
                Value::Integer(11),
                Value::Integer(20),
            ]
        );
        assert!(sql.text.contains("i.state IN"), "{}", sql.text);
        let similar = similar_candidates(&tenant(), &Title::parse("Login fails, login!").unwrap());
        assert_eq!(similar.len(), 2);
        assert_eq!(
            similar[0].params[0],
            Value::Text(r#"tenant : "acme" AND title : ("fails" AND "login")"#.into())
        );
        assert_eq!(
            similar[1].params[0],
            Value::Text(r#"tenant : "acme" AND title : ("fails" OR "login")"#.into())
        );
        assert_eq!(
            similar[1].params[1],
            Value::Integer(i64::from(limits::SIMILAR_ANY_CANDIDATES))
        );
        assert_eq!(
            similar[1].params[3],
            Value::Text(r#"["done","closed"]"#.into())
        );
        assert!(similar_candidates(&tenant(), &Title::parse("!!").unwrap()).is_empty());
    }

    #[test]
    fn json_arrays_escape_their_values() {
        assert_eq!(json_array(["a\"b"]), r#"["a\"b"]"#);
        assert_eq!(json_array(Vec::<&str>::new()), "[]");
    }
}
