//! `GET /v1/tenants/{tenant}/board`: the web board's columns, each paged on
//! its own and each with the number of issues it really holds.
//!
//! A board of thousands of issues cannot be one list the page splits into
//! columns: the first page of the list is mostly one state, so the other
//! columns look empty and every count is "what was loaded". Instead the page
//! asks for one page per column (every state when it opens and after a live
//! event) and, when a person loads more of one column, for that column alone
//! with the column's cursor, so paging a column never touches another.
//!
//! Each column carries its total under the same filters. The totals are
//! decided in one place, [`column_totals`]: without filters the store's
//! `board_stats` (one bounded read; a state it stopped counting at its cap
//! is answered as "at least"), with filters a count through the list
//! itself, bounded at [`COUNT_MAX`] (answered as "at least").
//!
//! The same module reads the titles of the issues an issue's relations name
//! ([`related`]), so the issue view shows links with titles, not bare ids.

use crate::admin::{IssueListParams, ReadTenant};
use crate::state::AppState;
use actix_web::{HttpResponse, web};
use corkboard_api::ApiError;
use corkboard_board::{
    BoardStore, Issue, IssueId, IssueState, IssueView, ListQuery, Page, StoreError, TenantId,
    Timestamp, ValidationError, limits,
};
use futures_util::future::try_join_all;
use serde::{Deserialize, Serialize};

/// Issues per column page when the request names none.
pub const COLUMN_PAGE_DEFAULT: u32 = 25;
/// Most issues per column page: a board page asks for seven of them.
pub const COLUMN_PAGE_MAX: u32 = 100;
/// Where a counted total stops: a column holding more is answered
/// as "at least this many" (`total_exact: false`), so a count never reads
/// more than `COUNT_MAX` issues per column.
pub const COUNT_MAX: u64 = 1000;

/// The board route's query: the list filters of `GET .../issues` (but
/// `state`, which chooses columns here), and the paging of one column.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BoardParams {
    /// Comma-separated states: the columns to answer (default: every state,
    /// in the board's order).
    state: Option<String>,
    label: Option<String>,
    label_match: Option<String>,
    text: Option<String>,
    run: Option<String>,
    priority: Option<String>,
    updated_since: Option<String>,
    parent: Option<String>,
    unclaimed: Option<bool>,
    claimed_by: Option<String>,
    /// The column's `next_cursor`; only with exactly one state.
    cursor: Option<String>,
    /// Issues per column, 1 to [`COLUMN_PAGE_MAX`].
    limit: Option<u32>,
}

/// What a board request asks, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BoardRequest {
    pub columns: Vec<IssueState>,
    /// The filters every column shares (no states, no cursor).
    pub filter: ListQuery,
    pub cursor: Option<IssueId>,
    pub limit: u32,
}

impl BoardParams {
    pub(crate) fn into_request(self) -> Result<BoardRequest, ValidationError> {
        let mut columns = Vec::new();
        for name in self
            .state
            .as_deref()
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
        {
            let state = IssueState::parse(name)?;
            if !columns.contains(&state) {
                columns.push(state);
            }
        }
        if columns.is_empty() {
            columns = IssueState::ALL.to_vec();
        }
        let limit = match self.limit {
            None => COLUMN_PAGE_DEFAULT,
            Some(n) if (1..=COLUMN_PAGE_MAX).contains(&n) => n,
            Some(_) => {
                return Err(ValidationError::new(
                    "limit",
                    format!("must be between 1 and {COLUMN_PAGE_MAX} (issues per column)"),
                ));
            }
        };
        let cursor = self.cursor.map(IssueId::parse).transpose()?;
        if cursor.is_some() && columns.len() != 1 {
            return Err(ValidationError::new(
                "cursor",
                "pages one column: name exactly one state with it",
            ));
        }
        // The filters exactly as the list route reads them.
        let filter = IssueListParams {
            state: None,
            label: self.label,
            label_match: self.label_match,
            text: self.text,
            run: self.run,
            priority: self.priority,
            updated_since: self.updated_since,
            parent: self.parent,
            unclaimed: self.unclaimed,
            claimed_by: self.claimed_by,
            cursor: None,
            limit: None,
        }
        .into_query()?;
        Ok(BoardRequest {
            columns,
            filter,
            cursor,
            limit,
        })
    }
}

/// One column of the answer.
#[derive(Debug, Serialize)]
pub(crate) struct Column {
    pub state: IssueState,
    /// Issues the column holds under the request's filters; at least this
    /// many when `total_exact` is false.
    pub total: u64,
    pub total_exact: bool,
    /// This page of the column, newest first.
    pub issues: Vec<Issue>,
    /// Pass back as `cursor` (with this column's `state`) for the next page;
    /// absent on the column's last page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<IssueId>,
}

/// A column's total.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Total {
    pub count: u64,
    pub exact: bool,
}

/// `GET /v1/tenants/{tenant}/board`.
pub(super) async fn board(
    state: web::Data<AppState>,
    scope: ReadTenant,
    params: web::Query<BoardParams>,
) -> Result<HttpResponse, ApiError> {
    let request = params.into_inner().into_request()?;
    let columns = read_columns(state.store.as_ref(), &scope.tenant, &request).await?;
    Ok(HttpResponse::Ok().json(serde_json::json!({ "columns": columns })))
}

/// The columns a request asks for: a page of each and their totals.
///
/// One read at a time: a page of one state is a filtered list page, which
/// the stores run under the tenant's small share of expensive reads; a
/// board that took every slot at once would make its own agents' searches
/// (and its other columns) wait.
pub(crate) async fn read_columns(
    store: &dyn BoardStore,
    tenant: &TenantId,
    request: &BoardRequest,
) -> Result<Vec<Column>, StoreError> {
    let mut pages = Vec::with_capacity(request.columns.len());
    for column in &request.columns {
        let query = ListQuery {
            states: vec![*column],
            limit: request.limit,
            cursor: request.cursor.clone(),
            ..request.filter.clone()
        };
        pages.push(store.list_issues(tenant, &query).await?);
    }
    let first_pages = request.cursor.is_none();
    let totals = column_totals(
        store,
        tenant,
        &request.filter,
        request
            .columns
            .iter()
            .zip(&pages)
            .map(|(state, page)| (*state, first_pages.then_some(page))),
    )
    .await?;
    Ok(request
        .columns
        .iter()
        .zip(pages)
        .zip(totals)
        .map(|((state, page), total)| Column {
            state: *state,
            total: total.count,
            total_exact: total.exact,
            issues: page.issues,
            next_cursor: page.next_cursor,
        })
        .collect())
}

/// How many issues each column holds under `filter`: the one place the
/// board's column totals are decided. A column whose first page is its last
/// is its own count. Without filters, the others come from the store's
/// `board_stats` (one bounded read for every column, exact up to its cap:
/// `queue_limits::STATS_COUNT_CAP`); with filters
/// they are counted through the list, reading at most [`COUNT_MAX`] issues.
async fn column_totals<'a>(
    store: &dyn BoardStore,
    tenant: &TenantId,
    filter: &ListQuery,
    columns: impl Iterator<Item = (IssueState, Option<&'a Page>)>,
) -> Result<Vec<Total>, StoreError> {
    let unfiltered = *filter
        == ListQuery {
            limit: filter.limit,
            ..ListQuery::default()
        };
    let mut stats: Option<corkboard_board::BoardStats> = None;
    let mut totals = Vec::new();
    for (state, first_page) in columns {
        totals.push(match first_page {
            Some(page) if page.next_cursor.is_none() => Total {
                count: page.issues.len() as u64,
                exact: true,
            },
            _ if unfiltered => {
                if stats.is_none() {
                    stats = Some(store.board_stats(tenant, Timestamp::now()).await?);
                }
                let stats = stats.as_ref().expect("read just above");
                Total {
                    count: stats.by_state.get(&state).copied().unwrap_or(0),
                    // A store may stop counting a state at the cap.
                    exact: !stats.at_least.contains(&corkboard_board::StatsPart::States),
                }
            }
            _ => bounded_count(store, tenant, filter, state, COUNT_MAX).await?,
        });
    }
    Ok(totals)
}

/// Counts a column by listing it, in the largest pages the list allows,
/// stopping at `max` ([`COUNT_MAX`]).
pub(crate) async fn bounded_count(
    store: &dyn BoardStore,
    tenant: &TenantId,
    filter: &ListQuery,
    state: IssueState,
    max: u64,
) -> Result<Total, StoreError> {
    let mut query = ListQuery {
        states: vec![state],
        limit: u32::try_from(max)
            .unwrap_or(u32::MAX)
            .clamp(1, limits::PAGE_MAX),
        cursor: None,
        ..filter.clone()
    };
    let mut count = 0u64;
    loop {
        let page = store.list_issues(tenant, &query).await?;
        count += page.issues.len() as u64;
        match page.next_cursor {
            None => return Ok(Total { count, exact: true }),
            Some(_) if count >= max => {
                return Ok(Total {
                    count,
                    exact: false,
                });
            }
            Some(next) => query.cursor = Some(next),
        }
    }
}

/// The title and state of an issue a relation names.
#[derive(Debug, Serialize)]
pub(crate) struct Related {
    pub title: String,
    pub state: IssueState,
}

/// The issues `view`'s relations name (parent, duplicate of, blocked by,
/// sub-issues, blocks), by id, read together. Each list is already bounded
/// by the relation limits; an issue that no longer reads (deleted, or never
/// of this tenant) is left out and the page shows its id.
pub(crate) async fn related(
    store: &dyn BoardStore,
    tenant: &TenantId,
    view: &IssueView,
) -> Result<serde_json::Map<String, serde_json::Value>, StoreError> {
    let issue = &view.issue;
    let mut ids: Vec<&IssueId> = Vec::new();
    for id in issue
        .parent
        .iter()
        .chain(issue.duplicate_of.iter())
        .chain(issue.blocked_by.iter())
        .chain(view.children.iter())
        .chain(view.blocks.iter())
    {
        if !ids.contains(&id) && *id != issue.id {
            ids.push(id);
        }
    }
    let found = try_join_all(ids.into_iter().map(|id| async move {
        match store.get_issue(tenant, id).await {
            Ok(issue) => Ok(Some(issue)),
            Err(StoreError::NotFound { .. }) => Ok(None),
            Err(err) => Err(err),
        }
    }))
    .await?;
    Ok(found
        .into_iter()
        .flatten()
        .map(|issue| {
            let related = Related {
                title: issue.title.as_str().to_owned(),
                state: issue.state,
            };
            (
                issue.id.to_string(),
                serde_json::to_value(related).unwrap_or_default(),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(query: &str) -> Result<BoardRequest, ValidationError> {
        web::Query::<BoardParams>::from_query(query)
            .expect("query parses")
            .into_inner()
            .into_request()
    }

    #[test]
    fn a_board_request_asks_every_column_unless_it_names_states() {
        let all = parse("").unwrap();
        assert_eq!(all.columns, IssueState::ALL.to_vec());
        assert_eq!(all.limit, COLUMN_PAGE_DEFAULT);
        let some = parse("state=todo,inbox,todo&limit=5").unwrap();
        assert_eq!(some.columns, vec![IssueState::Todo, IssueState::Inbox]);
        assert_eq!(some.limit, 5);
    }

    #[test]
    fn a_cursor_pages_one_column_and_pages_are_bounded() {
        let cursor = "iss_00000000000000000000000000";
        assert_eq!(
            parse(&format!("cursor={cursor}")).unwrap_err().field,
            "cursor"
        );
        assert_eq!(
            parse(&format!("state=inbox,todo&cursor={cursor}"))
                .unwrap_err()
                .field,
            "cursor"
        );
        assert!(parse(&format!("state=inbox&cursor={cursor}")).is_ok());
        assert_eq!(parse("limit=0").unwrap_err().field, "limit");
        assert_eq!(
            parse(&format!("limit={}", COLUMN_PAGE_MAX + 1))
                .unwrap_err()
                .field,
            "limit"
        );
        assert_eq!(parse("state=nowhere").unwrap_err().field, "state");
    }
}
