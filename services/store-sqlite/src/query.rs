//! The list query, built from whichever filters are present so SQLite can
//! pick the index that fits (state, author, label) and every filter runs in
//! SQL. Each combination of filters is one statement text, cached once.

use crate::codec::{ISSUE_COLUMNS, qualified};
use corkboard_board::{
    ClaimFilter, LabelFilter, ListQuery, SearchQuery, SearchText, TenantId, Timestamp, limits,
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
        if query.ready {
            // Ready work pages in its own order: after the cursor's issue
            // in (urgency, created_at, id), the ready index's order.
            text.push_str(
                " AND (i.urgency, i.created_at, i.id) > \
                 (SELECT c.urgency, c.created_at, c.id FROM issues c WHERE c.tenant = i.tenant AND c.id = ?)",
            );
        } else {
            text.push_str(" AND i.id < ?");
        }
        params.push(Value::Text(cursor.as_str().to_owned()));
    }
    push_filters(query, now, &mut text, &mut params);
    text.push_str(if query.ready {
        READY_ORDER
    } else {
        " ORDER BY i.id DESC"
    });
    text.push_str(" LIMIT ?");
    params.push(Value::Integer(i64::from(query.limit) + 1));
    Sql { text, params }
}

/// The order of ready work (`corkboard_board::ready_order`), which the
/// ready index (`issues_ready`) holds.
pub(crate) const READY_ORDER: &str = " ORDER BY i.urgency, i.created_at, i.id";

/// The condition that the open issue row `i` is blocked: one of its
/// blockers is open. A blocker that does not exist blocks nothing.
pub(crate) const BLOCKED: &str = "EXISTS (SELECT 1 FROM issue_blocked_by b \
     JOIN issues x ON x.tenant = b.tenant AND x.id = b.blocker_id \
     WHERE b.tenant = i.tenant AND b.issue_id = i.id AND x.state NOT IN ('done', 'closed'))";

/// The ids of the tenant's issues (the parameter) that have an open
/// blocker: read from the blocker relations, so a count over it costs the
/// relations, not every open issue (`board_stats`). Agrees with
/// [`BLOCKED`].
pub(crate) const IDS_WITH_AN_OPEN_BLOCKER: &str = "SELECT b.issue_id FROM issue_blocked_by b \
     JOIN issues x ON x.tenant = b.tenant AND x.id = b.blocker_id \
     WHERE b.tenant = ? AND x.state NOT IN ('done', 'closed')";

/// The condition that the issue row `i` has a live claim at the
/// parameter's instant.
pub(crate) const LIVE_CLAIM: &str = "(i.claim_run IS NOT NULL AND i.claim_expires_at > ?)";

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
    if query.ready {
        // Written as the ready index's condition, so the planner uses it.
        text.push_str(" AND i.state NOT IN ('done', 'closed') AND NOT ");
        text.push_str(LIVE_CLAIM);
        text.push_str(" AND NOT ");
        text.push_str(BLOCKED);
        params.push(Value::Integer(now.as_millis()));
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
        // The stored claim, ended or not: a lapsed claim stays in its
        // columns until another claim, a release, a close or the
        // revocation of its grant clears them.
        ClaimFilter::Stale { until } => {
            text.push_str(
                " AND i.claim_run IS NOT NULL AND i.claim_expires_at <= ? \
                 AND i.state NOT IN ('done', 'closed')",
            );
            params.push(Value::Integer(until.as_millis()));
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
    // Always present (0, the lowest rank, when the grant sets no floor):
    // one statement shape whatever the grant, so the floor costs the
    // statement cache nothing.
    text.push_str(" AND i.integrity >= ?");
    params.push(Value::Integer(
        query.min_integrity.map_or(0, |floor| floor.rank()),
    ));
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

/// How far down the newest open issues holding the title's rarest word
/// the every-word candidate scan of `similar_open_issues` reads. An issue
/// holding every word of the title holds the rarest one, so this scan is
/// complete whenever that word is in at most this many open titles; on a
/// board where every word of the title is that common, only the newest
/// this many holding the rarest one are checked. Bounded because each row
/// read is one more issue read on every create.
pub(crate) const RAREST_WORD_SCAN: u32 = 256;

/// How many open titles hold each of the words (a JSON array), for the
/// words any open title holds.
const SIMILAR_WORD_COUNTS: &str = "SELECT word, open_titles FROM open_title_word_counts \
     WHERE tenant = ?1 AND word IN (SELECT value FROM json_each(?2))";

/// The newest `?3` open issues holding the word `?2`, newest first: id,
/// title, state, updated_at. The caller checks on each title whether it
/// holds every word and stops reading at `limits::SIMILAR_ALL_CANDIDATES`
/// of those: the title is read anyway, so checking it costs less than one
/// index probe per word and row (with the probes in SQL, index seeks were
/// over a third of the look-up's CPU under `create_issue` at c=64, most of
/// them probes).
const SIMILAR_ALL_WORDS: &str = "SELECT i.id, i.title, i.state, i.updated_at \
     FROM (SELECT issue_id FROM open_title_words WHERE tenant = ?1 AND word = ?2 \
           ORDER BY issue_id DESC LIMIT ?3) r \
     CROSS JOIN issues i ON i.tenant = ?1 AND i.id = r.issue_id";

/// The newest `?3` open issues holding any word of `?2` (a JSON array):
/// each word's range is read from its `?3`-th newest entry on (found by
/// one bounded walk down the same index), so at most `?3` rows per word
/// are merged, whatever the board's size.
const SIMILAR_ANY_WORD: &str = "SELECT i.id, i.title, i.state, i.updated_at \
     FROM (SELECT DISTINCT t.issue_id AS issue_id \
           FROM json_each(?2) w CROSS JOIN open_title_words t \
           WHERE t.tenant = ?1 AND t.word = w.value \
             AND t.issue_id >= coalesce((SELECT y.issue_id FROM open_title_words y \
                 WHERE y.tenant = ?1 AND y.word = w.value \
                 ORDER BY y.issue_id DESC LIMIT 1 OFFSET ?3 - 1), '') \
           ORDER BY t.issue_id DESC LIMIT ?3) s \
     CROSS JOIN issues i ON i.tenant = ?1 AND i.id = s.issue_id";

/// The statements of `similar_open_issues`, as the MongoDB store makes its
/// candidates: the newest open issues whose titles hold every word of the
/// title (near duplicates are there; `limits::SIMILAR_ALL_CANDIDATES`),
/// then the newest sharing any word (`SIMILAR_ANY_CANDIDATES`), both read
/// from `open_title_words` (schema migration 9), so the look-up every
/// create makes costs the same on a board of any size. `words` is the
/// title's word set (`corkboard_board::term_set`).
pub(crate) struct SimilarLookup {
    tenant: Value,
    words: Value,
}

impl SimilarLookup {
    pub(crate) fn new(tenant: &TenantId, words: &BTreeSet<String>) -> Self {
        Self {
            tenant: Value::Text(tenant.as_str().to_owned()),
            words: Value::Text(json_array(words.iter().map(String::as_str))),
        }
    }

    /// How many open titles hold each word: (word, count) rows.
    pub(crate) fn word_counts(&self) -> Sql {
        Sql {
            text: SIMILAR_WORD_COUNTS.to_owned(),
            params: vec![self.tenant.clone(), self.words.clone()],
        }
    }

    /// The candidates for issues holding every word: the newest holding
    /// the `rarest` one (the caller checks the other words).
    pub(crate) fn all_words(&self, rarest: &str) -> Sql {
        Sql {
            text: SIMILAR_ALL_WORDS.to_owned(),
            params: vec![
                self.tenant.clone(),
                Value::Text(rarest.to_owned()),
                Value::Integer(i64::from(RAREST_WORD_SCAN)),
            ],
        }
    }

    /// Issues sharing any word.
    pub(crate) fn any_word(&self) -> Sql {
        Sql {
            text: SIMILAR_ANY_WORD.to_owned(),
            params: vec![
                self.tenant.clone(),
                self.words.clone(),
                Value::Integer(i64::from(limits::SIMILAR_ANY_CANDIDATES)),
            ],
        }
    }
}

/// A JSON array of strings, for `json_each(?)`: one statement text whatever
/// the number of values, instead of one per `IN (?, ?, ...)` arity.
pub(crate) fn json_array<'a>(values: impl IntoIterator<Item = &'a str>) -> String {
    let values: Vec<&str> = values.into_iter().collect();
    serde_json::to_string(&values).unwrap_or_else(|_| "[]".to_owned())
}

/// The lines of SQLite's `EXPLAIN QUERY PLAN` for `sql` with `params`, for
/// tests that pin a statement's plan (an index search, no scan, no sort).
#[cfg(test)]
pub(crate) fn query_plan(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Vec<String> {
    // Its `detail` column.
    explained(conn, "EXPLAIN QUERY PLAN", 3, sql, params)
}

/// The opcodes of the program SQLite runs for `sql` with `params`
/// (`EXPLAIN`), its triggers' programs included, for tests that pin what a
/// statement does at every run (no temporary table: `OpenEphemeral`).
#[cfg(test)]
pub(crate) fn opcodes(
    conn: &rusqlite::Connection,
    sql: &str,
    params: impl rusqlite::Params,
) -> Vec<String> {
    // Its `opcode` column.
    explained(conn, "EXPLAIN", 1, sql, params)
}

/// One text column of each row of `explain` (an `EXPLAIN` form) for `sql`.
#[cfg(test)]
fn explained(
    conn: &rusqlite::Connection,
    explain: &str,
    column: usize,
    sql: &str,
    params: impl rusqlite::Params,
) -> Vec<String> {
    conn.prepare(&format!("{explain} {sql}"))
        .expect("a statement to explain")
        .query_map(params, |row| row.get::<_, String>(column))
        .expect("its explanation")
        .collect::<Result<_, _>>()
        .expect("its explanation's rows")
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
                .ends_with("WHERE i.tenant = ? AND i.integrity >= ? ORDER BY i.id DESC LIMIT ?")
        );
        assert_eq!(
            sql.params,
            vec![
                Value::Text("acme".into()),
                Value::Integer(0),
                Value::Integer(51)
            ]
        );
        // A grant's floor is the same statement with its rank.
        let floored = ListQuery {
            min_integrity: Some(corkboard_board::Integrity::Agent),
            ..ListQuery::default()
        };
        let with_floor = list_issues(&tenant(), &floored);
        assert_eq!(with_floor.text, sql.text);
        assert_eq!(with_floor.params[1], Value::Integer(1));
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
                Value::Integer(0),
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
                Value::Integer(0),
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
                                    ClaimFilter::Stale {
                                        until: Timestamp::from_millis(1),
                                    },
                                ] {
                                    for priorities in [vec![], vec![Priority::High]] {
                                        for (updated_since, ready) in
                                            [None, Some(Timestamp::from_millis(1))]
                                                .into_iter()
                                                .flat_map(|u| [(u, false), (u, true)])
                                        {
                                            let query = ListQuery {
                                                ready,
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
                                                // Always in the statement: the floor
                                                // adds no shape.
                                                min_integrity: None,
                                                // Read after the page's statement.
                                                comments: Default::default(),
                                            };
                                            // Ready work is unclaimed:
                                            // other claim filters are refused.
                                            if query.validate().is_ok() {
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
        }
        assert_eq!(shapes.len(), 2304);
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
                Value::Integer(0),
                Value::Integer(11),
                Value::Integer(20),
            ]
        );
        assert!(sql.text.contains("i.state IN"), "{}", sql.text);
        let words = corkboard_board::term_set("Login fails, login!");
        let similar = SimilarLookup::new(&tenant(), &words);
        assert_eq!(
            similar.word_counts().params,
            vec![
                Value::Text("acme".into()),
                Value::Text(r#"["fails","login"]"#.into())
            ]
        );
        assert_eq!(
            similar.all_words("fails").params[1..3],
            [
                Value::Text("fails".into()),
                Value::Integer(i64::from(RAREST_WORD_SCAN))
            ]
        );
        assert_eq!(
            similar.any_word().params[2],
            Value::Integer(i64::from(limits::SIMILAR_ANY_CANDIDATES))
        );
    }

    #[test]
    fn json_arrays_escape_their_values() {
        assert_eq!(json_array(["a\"b"]), r#"["a\"b"]"#);
        assert_eq!(json_array(Vec::<&str>::new()), "[]");
    }
}
