//! Tool arguments, parsed straight into domain types.
//!
//! Parsing is by hand rather than through serde so that every failure names
//! the argument at fault and the fix, which is what a model needs to correct
//! its next call. `null` counts as absent: models often send explicit nulls
//! for optional arguments, and treating them as "not given" never changes
//! what a call means.

use crate::error::ToolsError;
use crate::view::{COMMENTS_DEFAULT, ListView, SELECTABLE_FIELDS};
use corkboard_board::{
    BlockedBy, Body, ClaimFilter, CloseReason, CommentBody, CommentId, CommentWindow,
    IdempotencyKey, IssueId, IssuePatch, IssueState, Label, LabelFilter, Labels, ListQuery,
    NewComment, NewIssue, Priority, RunId, SearchQuery, SearchText, Timestamp, Title,
    ValidationError, limits,
};
use serde_json::{Map, Value};

/// Argument names that look like a way to pick the board. They get a
/// dedicated explanation because a model retrying with another spelling
/// would only waste turns.
const TENANT_LIKE: [&str; 3] = ["tenant", "tenant_id", "tenantId"];

/// A view over one call's `arguments` that refuses unknown keys up front.
struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    fn new(tool: &str, map: &'a Map<String, Value>, allowed: &[&str]) -> Result<Self, ToolsError> {
        if let Some(key) = map.keys().find(|k| !allowed.contains(&k.as_str())) {
            let reason = if TENANT_LIKE.contains(&key.as_str()) {
                "no tool takes a tenant: the board is fixed by this run's grant. Remove it"
                    .to_owned()
            } else {
                format!(
                    "not an argument of {tool}; its arguments are: {}",
                    allowed.join(", ")
                )
            };
            return Err(ToolsError::InvalidArgument {
                field: key.clone(),
                reason,
            });
        }
        Ok(Self { map })
    }

    fn get(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    fn str(&self, key: &str) -> Result<Option<&'a str>, ToolsError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(invalid(
                key,
                format!("must be a string, not {}", kind(other)),
            )),
        }
    }

    fn required_str(&self, key: &str) -> Result<&'a str, ToolsError> {
        self.str(key)?
            .ok_or_else(|| invalid(key, "is required".to_owned()))
    }

    fn str_list(&self, key: &str) -> Result<Option<Vec<&'a str>>, ToolsError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let Value::Array(items) = value else {
            return Err(invalid(
                key,
                format!("must be an array of strings, not {}", kind(value)),
            ));
        };
        items
            .iter()
            .map(|item| match item {
                Value::String(s) => Ok(s.as_str()),
                other => Err(invalid(
                    key,
                    format!("must be an array of strings; found {}", kind(other)),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    fn bool(&self, key: &str) -> Result<Option<bool>, ToolsError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(invalid(
                key,
                format!("must be true or false, not {}", kind(other)),
            )),
        }
    }

    /// An optional count between `min` and `max`.
    fn count(&self, key: &str, min: usize, max: usize) -> Result<Option<usize>, ToolsError> {
        self.u64(key)?
            .map(|n| {
                usize::try_from(n)
                    .ok()
                    .filter(|n| (min..=max).contains(n))
                    .ok_or_else(|| invalid(key, format!("must be between {min} and {max}")))
            })
            .transpose()
    }

    fn u64(&self, key: &str) -> Result<Option<u64>, ToolsError> {
        let Some(value) = self.get(key) else {
            return Ok(None);
        };
        let number = value.as_u64().or_else(|| {
            // Some clients send integral numbers as floats (`3.0`).
            value
                .as_f64()
                .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 9_007_199_254_740_992.0)
                .map(|f| f as u64)
        });
        number
            .map(Some)
            .ok_or_else(|| invalid(key, format!("must be a non-negative integer, not {value}")))
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

fn invalid(field: &str, reason: String) -> ToolsError {
    ToolsError::InvalidArgument {
        field: field.to_owned(),
        reason,
    }
}

/// Re-labels a domain error with the argument's name (the domain names the
/// concept, e.g. `id`, while the tool may call it `issue_id` or `cursor`).
fn as_field(field: &str) -> impl FnOnce(ValidationError) -> ToolsError + '_ {
    move |err| invalid(field, err.reason)
}

fn issue_id(args: &Args<'_>, key: &str) -> Result<IssueId, ToolsError> {
    IssueId::parse(args.required_str(key)?).map_err(as_field(key))
}

fn idempotency_key(args: &Args<'_>) -> Result<Option<IdempotencyKey>, ToolsError> {
    args.str("idempotency_key")?
        .map(IdempotencyKey::parse)
        .transpose()
        .map_err(as_field("idempotency_key"))
}

fn labels(args: &Args<'_>) -> Result<Option<Labels>, ToolsError> {
    args.str_list("labels")?
        .map(Labels::parse)
        .transpose()
        .map_err(as_field("labels"))
}

fn optional_id(args: &Args<'_>, key: &str) -> Result<Option<IssueId>, ToolsError> {
    args.str(key)?
        .map(IssueId::parse)
        .transpose()
        .map_err(as_field(key))
}

/// A relation update: absent leaves it, `""` clears it, an id sets it
/// (`null` counts as absent, like everywhere else).
fn relation_change(args: &Args<'_>, key: &str) -> Result<Option<Option<IssueId>>, ToolsError> {
    match args.str(key)? {
        None => Ok(None),
        Some("") => Ok(Some(None)),
        Some(id) => IssueId::parse(id)
            .map(|id| Some(Some(id)))
            .map_err(as_field(key)),
    }
}

fn blocked_by(args: &Args<'_>) -> Result<Option<BlockedBy>, ToolsError> {
    let Some(ids) = args.str_list("blocked_by")? else {
        return Ok(None);
    };
    let ids = ids
        .into_iter()
        .map(IssueId::parse)
        .collect::<Result<Vec<_>, _>>()
        .map_err(as_field("blocked_by"))?;
    BlockedBy::parse(ids).map(Some).map_err(Into::into)
}

fn close_reason(args: &Args<'_>) -> Result<Option<CloseReason>, ToolsError> {
    args.str("close_reason")?
        .map(CloseReason::parse)
        .transpose()
        .map_err(Into::into)
}

fn expected_version(args: &Args<'_>) -> Result<Option<u64>, ToolsError> {
    let expected_version = args.u64("expected_version")?;
    if expected_version == Some(0) {
        return Err(invalid(
            "expected_version",
            "versions start at 1; pass the version field of the issue as you last read it"
                .to_owned(),
        ));
    }
    Ok(expected_version)
}

/// The issue id a call names, if it names a well-formed one, so that even a
/// call refused for other reasons is audited against its issue.
pub(crate) fn issue_hint(map: &Map<String, Value>, key: &str) -> Option<IssueId> {
    map.get(key)
        .and_then(Value::as_str)
        .and_then(|s| IssueId::parse(s).ok())
}

pub(crate) const CREATE_ARGS: [&str; 11] = [
    "title",
    "body",
    "state",
    "labels",
    "priority",
    "idempotency_key",
    "parent",
    "duplicate_of",
    "blocked_by",
    "close_reason",
    "if_similar",
];
pub(crate) const GET_ARGS: [&str; 4] = ["id", "comments_before", "comments_limit", "body_offset"];
/// The list filters, shared by list_issues and search_issues (parsed by
/// [`filters`], their schemas taken from list_issues's by `defs.rs`).
pub(crate) const FILTER_ARGS: [&str; 10] = [
    "states",
    "labels",
    "label_match",
    "text",
    "author_run",
    "priorities",
    "updated_since",
    "parent",
    "unclaimed",
    "claimed_by",
];
pub(crate) const LIST_ARGS: [&str; 15] = [
    "states",
    "labels",
    "label_match",
    "text",
    "author_run",
    "priorities",
    "updated_since",
    "limit",
    "cursor",
    "fields",
    "include_body",
    "include_comments",
    "parent",
    "unclaimed",
    "claimed_by",
];
pub(crate) const SEARCH_ARGS: [&str; 13] = [
    "query",
    "states",
    "labels",
    "label_match",
    "text",
    "author_run",
    "priorities",
    "updated_since",
    "parent",
    "unclaimed",
    "claimed_by",
    "limit",
    "offset",
];

/// What create_issue does when an open issue is a near match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IfSimilar {
    /// Create anyway and report the similar issues (the default).
    Report,
    /// Create nothing and answer with the near match.
    Refuse,
}
pub(crate) const UPDATE_ARGS: [&str; 11] = [
    "id",
    "title",
    "body",
    "state",
    "labels",
    "priority",
    "expected_version",
    "parent",
    "duplicate_of",
    "blocked_by",
    "close_reason",
];
pub(crate) const CLAIM_ARGS: [&str; 2] = ["id", "expected_version"];
pub(crate) const COMMENT_ARGS: [&str; 3] = ["issue_id", "body", "idempotency_key"];

#[derive(Debug)]
pub(crate) struct CreateArgs {
    pub new: NewIssue,
    pub key: Option<IdempotencyKey>,
    pub if_similar: IfSimilar,
}

pub(crate) fn create(map: &Map<String, Value>) -> Result<CreateArgs, ToolsError> {
    let args = Args::new("create_issue", map, &CREATE_ARGS)?;
    let mut new = NewIssue::new(Title::parse(args.required_str("title")?)?);
    if let Some(body) = args.str("body")? {
        new.body = Body::parse(body)?;
    }
    if let Some(state) = args.str("state")? {
        new.state = IssueState::parse(state)?;
    }
    if let Some(labels) = labels(&args)? {
        new.labels = labels;
    }
    if let Some(priority) = args.str("priority")? {
        new.priority = Priority::parse(priority)?;
    }
    new.parent = optional_id(&args, "parent")?;
    new.duplicate_of = optional_id(&args, "duplicate_of")?;
    new.blocked_by = blocked_by(&args)?.unwrap_or_default();
    new.close_reason = close_reason(&args)?;
    new.validate()?;
    let if_similar = match args.str("if_similar")? {
        None | Some("report") => IfSimilar::Report,
        Some("refuse") => IfSimilar::Refuse,
        Some(other) => {
            return Err(invalid(
                "if_similar",
                format!("unknown value {other:?}; expected \"report\" or \"refuse\""),
            ));
        }
    };
    Ok(CreateArgs {
        new,
        key: idempotency_key(&args)?,
        if_similar,
    })
}

pub(crate) fn get(map: &Map<String, Value>) -> Result<IssueId, ToolsError> {
    let args = Args::new("get_issue", map, &GET_ARGS)?;
    issue_id(&args, "id")
}

/// The list filters ([`FILTER_ARGS`]) of a list or search call.
fn filters(args: &Args<'_>) -> Result<ListQuery, ToolsError> {
    let mut query = ListQuery::default();
    if let Some(states) = args.str_list("states")? {
        query.states = states
            .into_iter()
            .map(IssueState::parse)
            .collect::<Result<_, _>>()
            .map_err(as_field("states"))?;
    }
    let wanted = args
        .str_list("labels")?
        .unwrap_or_default()
        .into_iter()
        .map(Label::parse)
        .collect::<Result<Vec<_>, _>>()?;
    if wanted.len() > limits::LABELS_MAX {
        return Err(invalid(
            "labels",
            format!("at most {} labels may be given", limits::LABELS_MAX),
        ));
    }
    let match_all = match args.str("label_match")? {
        None | Some("all") => true,
        Some("any") => false,
        Some(other) => {
            return Err(invalid(
                "label_match",
                format!("unknown value {other:?}; expected \"all\" or \"any\""),
            ));
        }
    };
    query.labels = match (wanted.is_empty(), match_all) {
        (true, _) => LabelFilter::None,
        (false, true) => LabelFilter::All(wanted),
        (false, false) => LabelFilter::Any(wanted),
    };
    query.text = args.str("text")?.map(str::to_owned);
    query.author_run = args
        .str("author_run")?
        .map(RunId::parse)
        .transpose()
        .map_err(as_field("author_run"))?;
    if let Some(priorities) = args.str_list("priorities")? {
        query.priorities = priorities
            .into_iter()
            .map(Priority::parse)
            .collect::<Result<_, _>>()
            .map_err(as_field("priorities"))?;
    }
    query.updated_since = args
        .str("updated_since")?
        .map(|text| {
            Timestamp::parse_rfc3339(text).ok_or_else(|| {
                invalid(
                    "updated_since",
                    format!(
                        "{text:?} is not an RFC 3339 time; write e.g. 2026-01-31T12:00:00Z \
                         (an updated_at value from an issue works)"
                    ),
                )
            })
        })
        .transpose()?;
    query.parent = optional_id(args, "parent")?;
    let claimed_by = args
        .str("claimed_by")?
        .map(RunId::parse)
        .transpose()
        .map_err(as_field("claimed_by"))?;
    query.claim = match (args.bool("unclaimed")?, claimed_by) {
        (Some(true), Some(_)) => {
            return Err(invalid(
                "unclaimed",
                "cannot be combined with claimed_by; give one of them".to_owned(),
            ));
        }
        (Some(true), None) => ClaimFilter::Unclaimed,
        (_, Some(run)) => ClaimFilter::ClaimedBy(run),
        (_, None) => ClaimFilter::Any,
    };
    Ok(query)
}

pub(crate) fn list(map: &Map<String, Value>) -> Result<ListQuery, ToolsError> {
    let args = Args::new("list_issues", map, &LIST_ARGS)?;
    let mut query = filters(&args)?;
    if let Some(limit) = args.u64("limit")? {
        query.limit = u32::try_from(limit)
            .ok()
            .filter(|l| (1..=limits::PAGE_MAX).contains(l))
            .ok_or_else(|| {
                invalid(
                    "limit",
                    format!("must be between 1 and {}", limits::PAGE_MAX),
                )
            })?;
    }
    query.cursor = args
        .str("cursor")?
        .map(IssueId::parse)
        .transpose()
        .map_err(|_| {
            invalid(
                "cursor",
                "must be the next_cursor value of the previous list_issues page, unchanged"
                    .to_owned(),
            )
        })?;
    query.validate()?;
    Ok(query)
}

/// What a list shows of each issue: `fields`, `include_body` and
/// `include_comments`.
pub(crate) fn list_view(map: &Map<String, Value>) -> Result<ListView, ToolsError> {
    let args = Args::new("list_issues", map, &LIST_ARGS)?;
    let fields = args
        .str_list("fields")?
        .unwrap_or_default()
        .into_iter()
        .map(|name| {
            if SELECTABLE_FIELDS.contains(&name) {
                Ok(name.to_owned())
            } else {
                Err(invalid(
                    "fields",
                    format!(
                        "unknown field {name:?}; a summary always has id, title, state, labels, \
                         priority, author_run, claim, updated_at, version, comment_count and \
                         excerpt, and fields may add: {}",
                        SELECTABLE_FIELDS.join(", ")
                    ),
                ))
            }
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(ListView {
        fields,
        body: args.bool("include_body")?.unwrap_or(false),
        comments: args.count("include_comments", 0, limits::COMMENTS_MAX)?,
    })
}

/// Which part of an issue get_issue shows: its comment window and where
/// its body starts (`body_offset`, in bytes).
pub(crate) fn issue_view(map: &Map<String, Value>) -> Result<(CommentWindow, usize), ToolsError> {
    let args = Args::new("get_issue", map, &GET_ARGS)?;
    let before = args
        .str("comments_before")?
        .map(|id| {
            CommentId::parse(id).map_err(|_| {
                invalid(
                    "comments_before",
                    "must be the comments_cursor of an earlier get_issue answer, unchanged"
                        .to_owned(),
                )
            })
        })
        .transpose()?;
    let limit = args
        .count("comments_limit", 1, limits::COMMENTS_MAX)?
        .unwrap_or(COMMENTS_DEFAULT);
    let offset = args
        .count("body_offset", 0, limits::BODY_MAX_BYTES)?
        .unwrap_or(0);
    let window = CommentWindow::latest(limit);
    let window = match before {
        Some(before) => window.before(before),
        None => window,
    };
    Ok((window, offset))
}

/// `search_issues`: the query, the list filters, the page.
pub(crate) fn search(map: &Map<String, Value>) -> Result<SearchQuery, ToolsError> {
    let args = Args::new("search_issues", map, &SEARCH_ARGS)?;
    let text = SearchText::parse(args.required_str("query")?)?;
    let mut query = SearchQuery::new(text);
    query.filter = filters(&args)?;
    if let Some(limit) = args.u64("limit")? {
        query.limit = u32::try_from(limit)
            .ok()
            .filter(|l| (1..=limits::SEARCH_LIMIT_MAX).contains(l))
            .ok_or_else(|| {
                invalid(
                    "limit",
                    format!("must be between 1 and {}", limits::SEARCH_LIMIT_MAX),
                )
            })?;
    }
    if let Some(offset) = args.u64("offset")? {
        query.offset = u32::try_from(offset).unwrap_or(u32::MAX);
    }
    query.validate()?;
    Ok(query)
}

#[derive(Debug)]
pub(crate) struct UpdateArgs {
    pub id: IssueId,
    pub patch: IssuePatch,
    pub expected_version: Option<u64>,
}

pub(crate) fn update(map: &Map<String, Value>) -> Result<UpdateArgs, ToolsError> {
    let args = Args::new("update_issue", map, &UPDATE_ARGS)?;
    let id = issue_id(&args, "id")?;
    let patch = IssuePatch {
        title: args.str("title")?.map(Title::parse).transpose()?,
        body: args.str("body")?.map(Body::parse).transpose()?,
        state: args.str("state")?.map(IssueState::parse).transpose()?,
        labels: labels(&args)?,
        priority: args.str("priority")?.map(Priority::parse).transpose()?,
        parent: relation_change(&args, "parent")?,
        duplicate_of: relation_change(&args, "duplicate_of")?,
        blocked_by: blocked_by(&args)?,
        close_reason: close_reason(&args)?,
    };
    if patch.is_empty() {
        return Err(ToolsError::NothingToUpdate);
    }
    let expected_version = expected_version(&args)?;
    Ok(UpdateArgs {
        id,
        patch,
        expected_version,
    })
}

/// `claim_issue` and `release_issue`: the issue and an optional version.
#[derive(Debug)]
pub(crate) struct ClaimArgs {
    pub id: IssueId,
    pub expected_version: Option<u64>,
}

pub(crate) fn claim(tool: &str, map: &Map<String, Value>) -> Result<ClaimArgs, ToolsError> {
    let args = Args::new(tool, map, &CLAIM_ARGS)?;
    Ok(ClaimArgs {
        id: issue_id(&args, "id")?,
        expected_version: expected_version(&args)?,
    })
}

#[derive(Debug)]
pub(crate) struct CommentArgs {
    pub comment: NewComment,
    pub key: Option<IdempotencyKey>,
}

pub(crate) fn comment(map: &Map<String, Value>) -> Result<CommentArgs, ToolsError> {
    let args = Args::new("add_comment", map, &COMMENT_ARGS)?;
    let issue = issue_id(&args, "issue_id")?;
    let body = CommentBody::parse(args.required_str("body")?)?;
    Ok(CommentArgs {
        comment: NewComment { issue, body },
        key: idempotency_key(&args)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(map) => map,
            _ => Map::new(),
        }
    }

    fn field_of(err: ToolsError) -> String {
        match err {
            ToolsError::InvalidArgument { field, .. } => field,
            other => panic!("expected an invalid argument, got {other:?}"),
        }
    }

    #[test]
    fn create_applies_documented_defaults_and_parses_everything_given() {
        let plain = create(&map(json!({"title": "Fix CI"}))).unwrap();
        assert_eq!(plain.new.state, IssueState::Inbox);
        assert_eq!(plain.new.priority, Priority::None);
        assert!(plain.key.is_none());
        let full = create(&map(json!({
            "title": "Fix CI", "body": "it is red", "state": "todo",
            "labels": ["ci", "bug", "ci"], "priority": "high", "idempotency_key": "k-1",
            "ignored_null": null
        })));
        // Unknown keys are refused even when null.
        assert_eq!(field_of(full.unwrap_err()), "ignored_null");
        let full = create(&map(json!({
            "title": "Fix CI", "body": null, "state": "todo",
            "labels": ["ci", "bug", "ci"], "priority": "high", "idempotency_key": "k-1"
        })))
        .unwrap();
        assert_eq!(full.new.state, IssueState::Todo);
        assert_eq!(full.new.labels.to_strings(), ["bug", "ci"]);
        assert_eq!(full.new.body.as_str(), "");
        assert_eq!(full.key.unwrap().as_str(), "k-1");
    }

    #[test]
    fn errors_name_the_argument() {
        let cases = [
            (json!({}), "title"),
            (json!({"title": ""}), "title"),
            (json!({"title": 5}), "title"),
            (json!({"title": "t", "state": "doing"}), "state"),
            (json!({"title": "t", "priority": "p0"}), "priority"),
            (json!({"title": "t", "labels": "bug"}), "labels"),
            (json!({"title": "t", "labels": ["Bug"]}), "labels"),
            (
                json!({"title": "t", "idempotency_key": "has space"}),
                "idempotency_key",
            ),
            (json!({"title": "t", "tenant": "other"}), "tenant"),
        ];
        for (args, field) in cases {
            let err = create(&map(args.clone())).unwrap_err();
            assert_eq!(field_of(err), field, "{args}");
        }
        let err = create(&map(json!({"title": "t", "tenant": "x"}))).unwrap_err();
        assert!(
            err.to_string().contains("fixed by this run's grant"),
            "{err}"
        );
    }

    #[test]
    fn list_parses_filters_and_bounds() {
        let q = list(&map(json!({}))).unwrap();
        assert_eq!(q, ListQuery::default());
        let q = list(&map(json!({
            "states": ["todo", "in_progress"], "labels": ["a", "b"], "label_match": "any",
            "text": "flaky", "author_run": "run-1", "limit": 10.0
        })))
        .unwrap();
        assert_eq!(q.states, [IssueState::Todo, IssueState::InProgress]);
        assert!(matches!(q.labels, LabelFilter::Any(ref l) if l.len() == 2));
        assert_eq!(q.limit, 10);
        assert_eq!(q.author_run.unwrap().as_str(), "run-1");
        for (args, field) in [
            (json!({"limit": 0}), "limit"),
            (json!({"limit": 201}), "limit"),
            (json!({"limit": -1}), "limit"),
            (json!({"limit": 1.5}), "limit"),
            (json!({"cursor": "page-2"}), "cursor"),
            (json!({"author_run": "a/b"}), "author_run"),
            (json!({"states": ["open"]}), "states"),
            (json!({"label_match": "some"}), "label_match"),
            (json!({"text": "x".repeat(201)}), "text"),
        ] {
            assert_eq!(
                field_of(list(&map(args.clone())).unwrap_err()),
                field,
                "{args}"
            );
        }
    }

    #[test]
    fn list_and_search_share_the_filters() {
        let filters = json!({
            "states": ["todo"], "priorities": ["high", "urgent"],
            "updated_since": "2026-01-31T12:00:00Z", "author_run": "run-1"
        });
        let listed = list(&map(filters.clone())).unwrap();
        assert_eq!(listed.priorities, [Priority::High, Priority::Urgent]);
        assert_eq!(
            listed.updated_since,
            Timestamp::parse_rfc3339("2026-01-31T12:00:00Z")
        );
        let mut with_query = filters.clone();
        with_query["query"] = json!("login timeo*");
        with_query["limit"] = json!(5);
        with_query["offset"] = json!(10);
        let searched = search(&map(with_query)).unwrap();
        assert_eq!(searched.filter, listed, "the same filters, parsed once");
        assert_eq!((searched.limit, searched.offset), (5, 10));
        assert_eq!(searched.text.terms().len(), 2);
        for name in FILTER_ARGS {
            assert!(
                LIST_ARGS.contains(&name) && SEARCH_ARGS.contains(&name),
                "{name}"
            );
        }
        for (args, field) in [
            (json!({}), "query"),
            (json!({"query": "  "}), "query"),
            (json!({"query": "x", "limit": 51}), "limit"),
            (json!({"query": "x", "offset": 995}), "offset"),
            (json!({"query": "x", "cursor": "c"}), "cursor"),
            (json!({"query": "x", "priorities": ["p1"]}), "priorities"),
            (
                json!({"query": "x", "updated_since": "yesterday"}),
                "updated_since",
            ),
        ] {
            assert_eq!(
                field_of(search(&map(args.clone())).unwrap_err()),
                field,
                "{args}"
            );
        }
    }

    #[test]
    fn create_reads_if_similar() {
        let plain = create(&map(json!({"title": "t"}))).unwrap();
        assert_eq!(plain.if_similar, IfSimilar::Report);
        let refuse = create(&map(json!({"title": "t", "if_similar": "refuse"}))).unwrap();
        assert_eq!(refuse.if_similar, IfSimilar::Refuse);
        let err = create(&map(json!({"title": "t", "if_similar": "merge"}))).unwrap_err();
        assert_eq!(field_of(err), "if_similar");
    }

    #[test]
    fn update_needs_a_change_and_a_sane_version() {
        let id = IssueId::generate();
        let ok = update(&map(
            json!({"id": id.as_str(), "state": "done", "expected_version": 3}),
        ))
        .unwrap();
        assert_eq!(ok.patch.state, Some(IssueState::Done));
        assert_eq!(ok.expected_version, Some(3));
        assert_eq!(
            update(&map(json!({"id": id.as_str(), "body": null}))).unwrap_err(),
            ToolsError::NothingToUpdate
        );
        let err = update(&map(
            json!({"id": id.as_str(), "title": "x", "expected_version": 0}),
        ))
        .unwrap_err();
        assert_eq!(field_of(err), "expected_version");
        let err = update(&map(json!({"id": "42", "title": "x"}))).unwrap_err();
        assert_eq!(field_of(err), "id");
    }

    #[test]
    fn relations_and_claim_filters_parse() {
        let parent = IssueId::generate();
        let created = create(&map(json!({
            "title": "t", "parent": parent.as_str(), "blocked_by": [parent.as_str()],
            "state": "closed", "close_reason": "not_planned"
        })))
        .unwrap();
        assert_eq!(created.new.parent.as_ref(), Some(&parent));
        assert_eq!(created.new.blocked_by.len(), 1);
        assert_eq!(created.new.close_reason, Some(CloseReason::NotPlanned));
        let err = create(&map(json!({"title": "t", "close_reason": "completed"}))).unwrap_err();
        assert_eq!(field_of(err), "close_reason");
        let cleared = update(&map(json!({"id": parent.as_str(), "parent": ""}))).unwrap();
        assert_eq!(cleared.patch.parent, Some(None));
        let err = update(&map(json!({"id": parent.as_str(), "duplicate_of": "x"}))).unwrap_err();
        assert_eq!(field_of(err), "duplicate_of");
        let q = list(&map(json!({"unclaimed": true, "parent": parent.as_str()}))).unwrap();
        assert_eq!(q.claim, ClaimFilter::Unclaimed);
        assert_eq!(q.parent, Some(parent.clone()));
        let q = list(&map(json!({"claimed_by": "run-2"}))).unwrap();
        assert!(matches!(q.claim, ClaimFilter::ClaimedBy(ref r) if r.as_str() == "run-2"));
        let err = list(&map(json!({"claimed_by": "run-2", "unclaimed": true}))).unwrap_err();
        assert_eq!(field_of(err), "unclaimed");
        let err = claim(
            "claim_issue",
            &map(json!({"id": parent.as_str(), "run": "x"})),
        )
        .unwrap_err();
        assert_eq!(field_of(err), "run");
    }

    #[test]
    fn comment_names_issue_id() {
        let err = comment(&map(json!({"issue_id": "iss_x", "body": "hi"}))).unwrap_err();
        assert_eq!(field_of(err), "issue_id");
        let err = comment(&map(
            json!({"issue_id": IssueId::generate().as_str(), "body": " "}),
        ))
        .unwrap_err();
        assert_eq!(field_of(err), "body");
        assert_eq!(
            issue_hint(&map(json!({"issue_id": "nope"})), "issue_id"),
            None
        );
    }
}
