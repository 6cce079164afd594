//! Full-text search and the similar-title look-up: their reads, and the
//! write-side upkeep they rely on (the open-title word index, the issue's
//! row in `issue_search`; the index's own changes are pending in
//! [`crate::search_writes`] until a search or the writer moves them).

use super::WriteOp;
use super::issues::attach_comments;
use crate::codec::{ISSUE_COLUMN_COUNT, issue_from_row};
use crate::error::OpError;
use crate::query;
use crate::search_writes;
use corkboard_board::{
    Integrity, IssueId, IssueState, SearchPage, SearchQuery, SimilarIssue, SimilarRanking,
    StoreError, TenantId, Timestamp, Title, ValidationError, is_open, limits, term_set,
};
use rusqlite::{Connection, OptionalExtension, params, params_from_iter};
use std::collections::BTreeSet;

/// The write a search asks for when index rows are pending: moves them
/// into the index now, in the next group (search_writes.rs).
#[derive(Debug)]
pub(crate) struct ApplyPendingIndexRows;

impl WriteOp for ApplyPendingIndexRows {
    type Output = ();
    const NAME: &'static str = "apply_pending_index_rows";

    fn run(&self, conn: &Connection) -> Result<(), OpError> {
        Ok(search_writes::apply(conn)?)
    }
}

/// Whether an index row of `tenant` is pending (a point read).
pub(crate) fn index_rows_pending(conn: &Connection, tenant: &TenantId) -> Result<bool, OpError> {
    Ok(search_writes::tenant_pending(conn, tenant.as_str())?)
}

/// One page of ranked hits (bm25 order, see [`query::search_issues`]),
/// with their comments and snippets. SQLite ranks every match, so the page
/// is never partial.
pub(crate) fn search_issues(
    conn: &Connection,
    tenant: &TenantId,
    query: &SearchQuery,
) -> Result<SearchPage, OpError> {
    let sql = query::search_issues(tenant, query);
    let mut stmt = conn.prepare_cached(&sql.text)?;
    let mut rows = stmt.query(params_from_iter(sql.params.iter()))?;
    let limit = query.limit as usize;
    let mut issues = Vec::with_capacity(limit + 1);
    let mut ranks = Vec::with_capacity(limit + 1);
    while let Some(row) = rows.next()? {
        issues.push(issue_from_row(tenant, row)?);
        ranks.push(row.get::<_, f64>(ISSUE_COLUMN_COUNT)?);
    }
    let mut next_offset = (issues.len() > limit).then(|| query.offset + query.limit);
    issues.truncate(limit);
    if attach_comments(conn, tenant, &mut issues)? {
        // Cut for its comments' size: the next page starts after the last
        // hit it holds.
        next_offset = Some(query.offset + issues.len() as u32);
    }
    let hits = issues
        .into_iter()
        .zip(ranks)
        // bm25 is lower-is-better and negative; hits say higher-is-better.
        .map(|(issue, rank)| query.text.hit(issue, -rank))
        .collect();
    Ok(SearchPage {
        hits,
        next_offset,
        partial: false,
    })
}

/// The open issues most like `title` (see [`query::SimilarLookup`] for
/// the candidates, `SimilarRanking` for the choice).
pub(crate) fn similar_open_issues(
    conn: &Connection,
    tenant: &TenantId,
    title: &Title,
    limit: u32,
) -> Result<Vec<SimilarIssue>, OpError> {
    let mut ranking = SimilarRanking::new(title.as_str());
    let words = ranking.words();
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let lookup = query::SimilarLookup::new(tenant, words);
    let counts = {
        let sql = lookup.word_counts();
        let mut stmt = conn.prepare_cached(&sql.text)?;
        let rows = stmt.query_map(params_from_iter(sql.params.iter()), |row| {
            Ok((row.get::<_, String>(0)?, row.get::<_, i64>(1)?))
        })?;
        rows.collect::<Result<Vec<_>, _>>()?
    };
    // A word no open title holds leaves nothing holding every word.
    if counts.len() == words.len()
        && let Some((rarest, _)) = counts.iter().min_by_key(|(word, n)| (*n, word.clone()))
    {
        let sql = lookup.all_words(rarest);
        read_similar(conn, &sql, limits::SIMILAR_ALL_CANDIDATES, &mut ranking)?;
    }
    if !counts.is_empty() && !ranking.settled(limit) {
        let sql = lookup.any_word();
        read_similar(conn, &sql, u32::MAX, &mut ranking)?;
    }
    let mut similar = ranking.finish(limit);
    // The levels of the chosen few only: `integrity` is the row's last
    // column, behind the body (and its overflow pages), so reading it for
    // every candidate would cost the look-up every create makes.
    let mut level =
        conn.prepare_cached("SELECT integrity FROM issues WHERE tenant = ?1 AND id = ?2")?;
    for hint in &mut similar {
        hint.integrity = Integrity::from_rank(
            level.query_row(params![tenant.as_str(), hint.id.as_str()], |row| row.get(0))?,
        );
    }
    Ok(similar)
}

/// Offers the rows of one candidate statement of `similar_open_issues`
/// to `ranking`, until `every_word` of them held every word of the title
/// (the others are scored too: they share its rarest word).
fn read_similar(
    conn: &Connection,
    sql: &query::Sql,
    every_word: u32,
    ranking: &mut SimilarRanking,
) -> Result<(), OpError> {
    let mut stmt = conn.prepare_cached(&sql.text)?;
    let mut rows = stmt.query(params_from_iter(sql.params.iter()))?;
    let mut held = 0;
    while held < every_word
        && let Some(row) = rows.next()?
    {
        let id: String = row.get(0)?;
        let candidate: String = row.get(1)?;
        let state: String = row.get(2)?;
        let corrupt = |e: ValidationError| {
            OpError::Store(StoreError::Internal(format!(
                "stored issue {id} is invalid: {e}"
            )))
        };
        if ranking.offer(
            IssueId::parse(id.as_str()).map_err(corrupt)?,
            Title::parse(candidate).map_err(corrupt)?,
            IssueState::parse(&state).map_err(corrupt)?,
            Timestamp::from_millis(row.get(3)?),
            // Read for the chosen few afterwards (`similar_open_issues`).
            Integrity::External,
        ) {
            held += 1;
        }
    }
    Ok(())
}

/// Keeps `open_title_words` and `open_title_word_counts` in step with one
/// issue, in the write's transaction: they hold the words of its title
/// while it is open and none once it is done or closed. `before` and
/// `after` are its title and state around the write (`None`: no issue
/// before, i.e. a create). Only the words that changed are touched.
pub(crate) fn index_open_title(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
    before: Option<(&Title, IssueState)>,
    after: (&Title, IssueState),
) -> Result<(), OpError> {
    let words = |side: Option<(&Title, IssueState)>| match side {
        Some((title, state)) if is_open(state) => term_set(title.as_str()),
        _ => BTreeSet::new(),
    };
    let (old, new) = (words(before), words(Some(after)));
    if old == new {
        return Ok(());
    }
    let mut remove = conn.prepare_cached(
        "DELETE FROM open_title_words WHERE tenant = ?1 AND word = ?2 AND issue_id = ?3",
    )?;
    // Run in this order, exactly one of the two applies: the last title
    // holding the word takes its count row with it, any other lowers it
    // (lowering first would let the delete take a count just lowered to 1).
    let mut forget = conn.prepare_cached(
        "DELETE FROM open_title_word_counts WHERE tenant = ?1 AND word = ?2 AND open_titles = 1",
    )?;
    let mut lower = conn.prepare_cached(
        "UPDATE open_title_word_counts SET open_titles = open_titles - 1 \
         WHERE tenant = ?1 AND word = ?2 AND open_titles > 1",
    )?;
    for word in old.difference(&new) {
        remove.execute(params![tenant.as_str(), word, id.as_str()])?;
        forget.execute(params![tenant.as_str(), word])?;
        lower.execute(params![tenant.as_str(), word])?;
    }
    let mut add = conn.prepare_cached(
        "INSERT INTO open_title_words (tenant, word, issue_id) VALUES (?1, ?2, ?3)",
    )?;
    let mut count = conn.prepare_cached(
        "INSERT INTO open_title_word_counts (tenant, word, open_titles) VALUES (?1, ?2, 1) \
         ON CONFLICT (tenant, word) DO UPDATE SET open_titles = open_titles + 1",
    )?;
    for word in new.difference(&old) {
        add.execute(params![tenant.as_str(), word, id.as_str()])?;
        count.execute(params![tenant.as_str(), word])?;
    }
    Ok(())
}

/// The issue's row in `issue_search`.
pub(crate) fn search_rowid(
    conn: &Connection,
    tenant: &TenantId,
    id: &IssueId,
) -> Result<i64, OpError> {
    let mut stmt =
        conn.prepare_cached("SELECT search_rowid FROM issues WHERE tenant = ?1 AND id = ?2")?;
    let rowid: Option<i64> = stmt
        .query_row(params![tenant.as_str(), id.as_str()], |row| row.get(0))
        .optional()?
        .flatten();
    rowid.ok_or_else(|| {
        OpError::Store(StoreError::Internal(format!(
            "issue {id} has no search row"
        )))
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::ops::WriteOp;
    use crate::ops::issues::{CreateIssue, update_issue};
    use crate::schema;
    use corkboard_board::{Author, IssuePatch, NewIssue, RunId};
    use std::collections::BTreeMap;

    /// What `open_title_words` and `open_title_word_counts` must hold,
    /// computed from `issues` by the domain's rules, next to what they
    /// hold: (tenant, word, issue) rows and (tenant, word, count) rows.
    #[allow(clippy::type_complexity)]
    pub(crate) fn open_title_index(
        conn: &Connection,
    ) -> (
        (Vec<(String, String, String)>, Vec<(String, String, i64)>),
        (Vec<(String, String, String)>, Vec<(String, String, i64)>),
    ) {
        let mut expected_words = BTreeSet::new();
        let mut stmt = conn
            .prepare("SELECT tenant, id, title, state FROM issues")
            .unwrap();
        let mut rows = stmt.query([]).unwrap();
        while let Some(row) = rows.next().unwrap() {
            let (tenant, id, title, state): (String, String, String, String) = (
                row.get(0).unwrap(),
                row.get(1).unwrap(),
                row.get(2).unwrap(),
                row.get(3).unwrap(),
            );
            if is_open(IssueState::parse(&state).unwrap()) {
                for word in term_set(&title) {
                    expected_words.insert((tenant.clone(), word, id.clone()));
                }
            }
        }
        let mut expected_counts: BTreeMap<(String, String), i64> = BTreeMap::new();
        for (tenant, word, _) in &expected_words {
            *expected_counts
                .entry((tenant.clone(), word.clone()))
                .or_default() += 1;
        }
        let words = triples(
            conn,
            "SELECT tenant, word, issue_id FROM open_title_words ORDER BY 1, 2, 3",
        );
        let counts = triples(
            conn,
            "SELECT tenant, word, open_titles FROM open_title_word_counts ORDER BY 1, 2",
        );
        (
            (
                expected_words.into_iter().collect(),
                expected_counts
                    .into_iter()
                    .map(|((t, w), n)| (t, w, n))
                    .collect(),
            ),
            (words, counts),
        )
    }

    /// Every row of a three-column query.
    fn triples<A, B, C>(conn: &Connection, sql: &str) -> Vec<(A, B, C)>
    where
        A: rusqlite::types::FromSql,
        B: rusqlite::types::FromSql,
        C: rusqlite::types::FromSql,
    {
        conn.prepare(sql)
            .unwrap()
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
    }

    fn author() -> Author {
        Author {
            kind: corkboard_board::AuthorKind::Run,
            run: RunId::parse("r").unwrap(),
            grant: None,
            integrity: corkboard_board::Integrity::Agent,
        }
    }

    fn create(conn: &Connection, tenant: &TenantId, title: &str) -> IssueId {
        let new = NewIssue::new(Title::parse(title).unwrap());
        match CreateIssue::new(tenant, &author(), new, None).run(conn) {
            Ok(created) => created.issue.id,
            other => panic!("{other:?}"),
        }
    }

    fn patch(conn: &Connection, tenant: &TenantId, id: &IssueId, patch: IssuePatch) {
        update_issue(conn, tenant, id, &patch, None).unwrap();
    }

    #[test]
    fn the_open_title_index_follows_creates_retitles_closes_and_reopens() {
        let dir = tempfile::tempdir().unwrap();
        let conn = schema::open_writer(&dir.path().join("i.sqlite3"), &Default::default()).unwrap();
        let (a, b) = (
            TenantId::parse("acme").unwrap(),
            TenantId::parse("beta").unwrap(),
        );
        let login = create(&conn, &a, "Login fails, login!");
        let other = create(&conn, &a, "Login page slow");
        create(&conn, &b, "Login fails");
        let check = |when: &str| {
            let (expected, actual) = open_title_index(&conn);
            assert_eq!(actual, expected, "{when}");
        };
        check("after the creates");
        let retitle = |text: &str| IssuePatch {
            title: Some(Title::parse(text).unwrap()),
            ..Default::default()
        };
        let state = |state: IssueState| IssuePatch {
            state: Some(state),
            ..Default::default()
        };
        let priority = IssuePatch {
            priority: Some(corkboard_board::Priority::High),
            ..Default::default()
        };
        for (id, change, when) in [
            (&login, retitle("Signup fails"), "after a retitle"),
            (&other, state(IssueState::Done), "after a close"),
            (
                &other,
                retitle("Login page fast"),
                "after retitling a closed issue",
            ),
            (&other, state(IssueState::Todo), "after a reopen"),
            (
                &other,
                priority,
                "after a change that leaves the title alone",
            ),
        ] {
            patch(&conn, &a, id, change);
            check(when);
        }
        let (_, (words, counts)) = open_title_index(&conn);
        assert!(words.contains(&("acme".into(), "fast".into(), other.to_string())));
        assert!(counts.contains(&("acme".into(), "fails".into(), 1)));
        assert!(counts.contains(&("beta".into(), "fails".into(), 1)));
        // The check can fail: a row the rules do not explain is found.
        conn.execute(
            "INSERT INTO open_title_words VALUES ('acme', 'stray', 'iss_x')",
            [],
        )
        .unwrap();
        let (expected, actual) = open_title_index(&conn);
        assert_ne!(actual, expected);
    }
}
