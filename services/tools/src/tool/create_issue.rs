//! `create_issue`: files an issue, reports similar open ones, or (with
//! `if_similar: "refuse"`) files nothing when an open issue is a near
//! match.

use super::args::{Args, blocked_by, close_reason, idempotency_key, invalid, labels, optional_id};
use super::schema::{
    WRITABLE_FIELDS, blocked_by_schema, body_schema, close_reason_schema, issue_answer_schema,
    key_schema, labels_schema, object, priority_schema, related_id_schema, replayed_schema,
    state_schema, title_schema, with_properties, written_fields,
};
use super::{Success, insert, round, to_json};
use crate::error::ToolsError;
use crate::provenance;
use crate::result_budget;
use crate::service::BoardTools;
use crate::view;
use corkboard_board::{
    Author, Body, BudgetKind, Capability, CreateOutcome, Created, Grant, IdempotencyKey, Issue,
    IssueState, NEAR_MATCH, NewIssue, Priority, SimilarIssue, Title, limits,
};
use corkboard_grants::ResolvedGrant;
use serde_json::{Map, Value, json};

/// How many similar open issues create_issue reports.
const SIMILAR_SHOWN: u32 = 5;

pub(crate) const DESCRIPTION: &str = "Create an issue on this run's board and return it, with its \
new id (iss_ followed by 26 characters) and version 1. Only `title` is required; state \
defaults to inbox, priority to none, labels to none. The issue is recorded as written by this \
run. Pass an `idempotency_key` (a fresh unique string per intended issue, e.g. a UUID) \
whenever you might retry: resending the same arguments with the same key returns the \
original issue with replayed=true instead of a duplicate, and reusing a key with different \
arguments is refused. Relations: `parent` makes it a sub-issue, `blocked_by` lists issues \
that must be finished first (at most 50), `duplicate_of` names the original; every id must \
be an issue of this board. The answer has `created` (true when this call filed the issue) and, for \
a run that may read issues, `similar`: up to 5 open issues whose titles are most like this one, \
each {id, title, state, score} (score 0-1, the share of title words in common; 0.75 or more is a \
near match). With if_similar=\"refuse\" and a near match, NOTHING is created: the answer is that \
issue with created=false and `reason`; work on it instead of filing again. A retry with the same \
idempotency_key always returns the original issue (a run that may not read issues gets only what \
its call wrote). Search (search_issues) first so you do not file an issue that exists.";

pub(crate) const ARGS: [&str; 11] = [
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

/// What create_issue does when an open issue is a near match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IfSimilar {
    /// Create anyway and report the similar issues (the default).
    Report,
    /// Create nothing and answer with the near match.
    Refuse,
}

#[derive(Debug)]
pub(crate) struct CreateArgs {
    pub new: NewIssue,
    pub key: Option<IdempotencyKey>,
    pub if_similar: IfSimilar,
}

pub(crate) fn parse(map: &Map<String, Value>) -> Result<CreateArgs, ToolsError> {
    let args = Args::new("create_issue", map, &ARGS)?;
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

pub(crate) async fn run(
    tools: &BoardTools,
    principal: &ResolvedGrant,
    arguments: &Map<String, Value>,
) -> Result<Success, ToolsError> {
    let grant = principal.grant();
    let tenant = &grant.tenant;
    let author = tools.author(principal).await;
    let CreateArgs {
        new,
        key,
        if_similar,
    } = parse(arguments)?;
    let reads = grant.capabilities.allows(Capability::IssuesRead);
    let title = new.title.clone();
    // A grant that may not read issues is answered with what its call
    // wrote, taken from the call itself: a replay must not show what
    // others changed since (a rewritten body, later comments).
    let written = if reads { None } else { Some(to_json(&new)?) };
    // The similar open issues, for a run that may read issues. Looked up
    // beside the write, not after it: on MongoDB each is a round trip
    // (the write's, then the look-up's), and on SQLite the look-up runs
    // while the create waits for its group's commit. What it finds does
    // not depend on the order: a look-up after the write found the new
    // issue too, and that one is left out of the answer either way (the
    // look-up asks for one more than it shows); a replay answers from
    // the board as it is then, like the first call.
    let similar = async {
        if reads {
            let lookup = tools
                .store()
                .similar_open_issues(tenant, &title, SIMILAR_SHOWN + 1);
            Some(tools.bounded(None, lookup).await)
        } else {
            None
        }
    };
    let (created, similar) = match if_similar {
        IfSimilar::Report => {
            let create = budgeted_create(tools, principal, &author, new, key.as_ref());
            let (created, similar) = tokio::join!(create, similar);
            (created?, similar)
        }
        IfSimilar::Refuse => {
            if !reads {
                // A refusal answers with another issue: that
                // is a read this grant may not do.
                return Err(ToolsError::InvalidArgument {
                    field: "if_similar".to_owned(),
                    reason: format!(
                        "\"refuse\" answers with the existing issue, which needs \
                                     the issues:read capability; this grant has {}. Omit \
                                     if_similar",
                        grant.capabilities.to_csv()
                    ),
                });
            }
            let outcome = tools
                .budgeted(
                    principal,
                    BudgetKind::CreateIssue,
                    key.as_ref(),
                    tools.bounded(
                        None,
                        tools.store().create_issue_unless_similar(
                            tenant,
                            &author,
                            new,
                            key.as_ref(),
                        ),
                    ),
                    |outcome| match outcome {
                        CreateOutcome::Created(created) => created.replayed,
                        CreateOutcome::Refused(_) => true,
                    },
                )
                .await?;
            match outcome {
                // The store's own check read the near matches only: the
                // answer's list is looked up once the create is decided.
                CreateOutcome::Created(created) => (created, similar.await),
                CreateOutcome::Refused(near) => {
                    return refused(tools, grant, near).await;
                }
            }
        }
    };
    let id = created.issue.id.clone();
    let mut value = match written {
        None => view::whole_issue(provenance::issue_json(
            &created.issue,
            grant.min_integrity,
            false,
        )?),
        Some(written) => what_was_written(&created.issue, written)?,
    };
    insert(&mut value, "replayed", Value::Bool(created.replayed));
    insert(&mut value, "created", Value::Bool(true));
    match similar {
        Some(Ok(similar)) => {
            let visible = provenance::visible_similar(&similar, grant.min_integrity);
            let shown: Vec<Value> = visible
                .into_iter()
                .filter(|s| s.id != id)
                .take(SIMILAR_SHOWN as usize)
                .map(similar_json)
                .collect();
            insert(&mut value, "similar", Value::Array(shown));
        }
        // A failed look-up leaves `similar` out rather than failing a
        // create that happened.
        Some(Err(err)) => {
            tracing::warn!(error = %err, "similar issues unavailable for a create");
        }
        None => {}
    }
    let headline = if created.replayed {
        format!(
            "create_issue: replayed; issue {id} was created by the earlier call with \
                         this idempotency_key"
        )
    } else {
        format!("create_issue: created issue {id}")
    };
    Ok(Success {
        answer: result_budget::issue(value, &headline, tools.result_budget()),
        issue: Some(id),
    })
}

/// One create, counted against the run's `create_issue` budget (a replay
/// wrote nothing and is given back): the write of `create_issue` and of
/// each `create_issues` item.
pub(crate) async fn budgeted_create(
    tools: &BoardTools,
    principal: &ResolvedGrant,
    author: &Author,
    new: NewIssue,
    key: Option<&IdempotencyKey>,
) -> Result<Created, ToolsError> {
    let tenant = &principal.grant().tenant;
    let write = tools.store().create_issue(tenant, author, new, key);
    tools
        .budgeted(
            principal,
            BudgetKind::CreateIssue,
            key,
            tools.bounded(None, write),
            |created| created.replayed,
        )
        .await
}

/// The answer to a create refused for a near match: the existing issue
/// (the best match) with `created: false`, the reason, and every near
/// match; the text block leads with "NOT CREATED" for models that read
/// only the text. Not an error result: the caller asked for exactly
/// this outcome, and the answer carries the issue to work on.
async fn refused(
    tools: &BoardTools,
    grant: &Grant,
    near: Vec<SimilarIssue>,
) -> Result<Success, ToolsError> {
    if near.is_empty() {
        return Err(ToolsError::Internal {
            detail: "a create was refused without a near match".to_owned(),
        });
    }
    // Only the near matches this run may be shown (its grant's floor).
    let near = provenance::visible_similar(&near, grant.min_integrity);
    let Some(best) = near.first() else {
        return Err(ToolsError::InvalidArgument {
            field: "if_similar".to_owned(),
            reason: "NOT CREATED: an open issue this run is not shown (below the integrity \
                     floor of its grant) is a near match for this title; nothing was filed. \
                     Call create_issue with if_similar \"report\" to file it anyway"
                .to_owned(),
        });
    };
    let existing: Issue = tools
        .bounded(
            Some(&best.id),
            tools.store().get_issue(&grant.tenant, &best.id),
        )
        .await?;
    let reason = format!(
        "NOT CREATED: open issue {} \"{}\" ({}) is a near match for this title (similarity \
             {:.2}, near at {NEAR_MATCH}), and if_similar is \"refuse\". Nothing was filed; the \
             issue below is that existing one. Work on it (add_comment, update_issue), or call \
             create_issue with if_similar \"report\" to file a separate issue anyway.",
        best.id,
        best.title.as_str(),
        best.state,
        best.score
    );
    let mut value = view::whole_issue(provenance::issue_json(
        &existing,
        grant.min_integrity,
        true,
    )?);
    insert(&mut value, "replayed", Value::Bool(false));
    insert(&mut value, "created", Value::Bool(false));
    insert(
        &mut value,
        "similar",
        Value::Array(near.iter().copied().map(similar_json).collect()),
    );
    insert(&mut value, "reason", Value::String(reason.clone()));
    Ok(Success {
        answer: result_budget::issue(value, &reason, tools.result_budget()),
        issue: Some(existing.id),
    })
}

fn similar_json(similar: &SimilarIssue) -> Value {
    json!({
        "id": similar.id,
        "title": similar.title,
        "state": similar.state,
        "score": round(similar.score),
    })
}

pub(crate) fn input_schema() -> Value {
    object(
        json!({
            "title": title_schema("Short summary of the issue."),
            "body": body_schema("Details: context, steps to reproduce, what done means.", 0),
            "state": state_schema("Initial state; defaults to inbox."),
            "labels": labels_schema(&format!(
                "Labels to attach, e.g. [\"bug\", \"area:ci\"]. Each 1-{} of lowercase \
                 letters, digits and - _ . : /; at most {} labels.",
                limits::LABEL_MAX_CHARS,
                limits::LABELS_MAX
            )),
            "priority": priority_schema("Defaults to none (nobody has said)."),
            "idempotency_key": key_schema("issue"),
            "parent": related_id_schema("Make it a sub-issue of this issue."),
            "duplicate_of": related_id_schema("The original issue this one duplicates."),
            "blocked_by": blocked_by_schema("Issues that must be finished before this one."),
            "close_reason": close_reason_schema(),
            "if_similar": {
                "type": "string",
                "enum": ["report", "refuse"],
                "default": "report",
                "description": "\"report\" (default): create, and list similar open issues in \
                                `similar`. \"refuse\": create nothing when an open issue's title \
                                is a near match (score 0.75 or more); the answer is then that \
                                issue with created=false. Needs issues:read.",
            },
        }),
        &["title"],
    )
}

fn similar_schema() -> Value {
    json!({
        "type": "array",
        "description": "Open issues with titles like this one, most similar first; present for \
                        a run that may read issues (absent if the lookup failed).",
        "items": {
            "type": "object",
            "properties": {
                "id": { "type": "string" },
                "title": { "type": "string" },
                "state": { "type": "string", "enum": IssueState::names() },
                "score": {
                    "type": "number",
                    "minimum": 0,
                    "maximum": 1,
                    "description": "Share of title words in common; 0.75 or more is a near match.",
                },
            },
            "required": ["id", "title", "state", "score"],
        },
    })
}

/// The answer to a grant without `issues:read` has, besides the fields
/// the call wrote (`WRITABLE_FIELDS`), these the store gave it.
const GIVEN_FIELDS: [&str; 2] = ["id", "created_at"];

/// The answer to a grant that may not read issues: the issue's id and
/// creation instant with the fields of `written` (the call's own
/// `NewIssue`; on a replay equal to the original's, or the store would
/// have refused the key), never the issue as it is now.
fn what_was_written(issue: &Issue, written: Value) -> Result<Value, ToolsError> {
    let stored = to_json(issue)?;
    let mut value = Map::new();
    for name in GIVEN_FIELDS {
        if let Some(field) = stored.get(name) {
            value.insert(name.to_owned(), field.clone());
        }
    }
    if let Value::Object(fields) = written {
        value.extend(
            fields
                .into_iter()
                .filter(|(name, _)| WRITABLE_FIELDS.contains(&name.as_str())),
        );
    }
    Ok(Value::Object(value))
}

/// Without `issues:read`: the fields the call wrote, `replayed` and
/// `created` (never `similar`: that is a read).
pub(crate) fn write_only_output_schema() -> Value {
    with_properties(
        written_fields(&GIVEN_FIELDS, &["id", "title", "state", "created_at"]),
        [
            ("replayed", replayed_schema("issue")),
            (
                "created",
                json!({
                    "type": "boolean",
                    "description": "True: this call (or the original call of a replay) filed the issue.",
                }),
            ),
        ],
    )
}

/// create_issue's answer: the issue it filed (or, refused, the existing
/// near match), `replayed`, `created`, and optionally `similar`/`reason`.
pub(crate) fn output_schema() -> Value {
    let mut schema = with_properties(
        issue_answer_schema(),
        [
            ("replayed", replayed_schema("issue")),
            (
                "created",
                json!({
                    "type": "boolean",
                    "description": "True when this call (or the original call of a replay) \
                                    filed this issue; false when if_similar=\"refuse\" found a \
                                    near match: nothing was created and this is the existing issue.",
                }),
            ),
        ],
    );
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        properties.insert("similar".to_owned(), similar_schema());
        properties.insert(
            "reason".to_owned(),
            json!({
                "type": "string",
                "description": "Why nothing was created (only when created is false).",
            }),
        );
    }
    schema
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::args::testing::{field_of, map};
    use serde_json::json;

    #[test]
    fn create_applies_documented_defaults_and_parses_everything_given() {
        let plain = parse(&map(json!({"title": "Fix CI"}))).unwrap();
        assert_eq!(plain.new.state, IssueState::Inbox);
        assert_eq!(plain.new.priority, Priority::None);
        assert!(plain.key.is_none());
        let full = parse(&map(json!({
            "title": "Fix CI", "body": "it is red", "state": "todo",
            "labels": ["ci", "bug", "ci"], "priority": "high", "idempotency_key": "k-1",
            "ignored_null": null
        })));
        // Unknown keys are refused even when null.
        assert_eq!(field_of(full.unwrap_err()), "ignored_null");
        let full = parse(&map(json!({
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
            let err = parse(&map(args.clone())).unwrap_err();
            assert_eq!(field_of(err), field, "{args}");
        }
        let err = parse(&map(json!({"title": "t", "tenant": "x"}))).unwrap_err();
        assert!(
            err.to_string().contains("fixed by this run's grant"),
            "{err}"
        );
    }

    #[test]
    fn create_reads_if_similar() {
        let plain = parse(&map(json!({"title": "t"}))).unwrap();
        assert_eq!(plain.if_similar, IfSimilar::Report);
        let refuse = parse(&map(json!({"title": "t", "if_similar": "refuse"}))).unwrap();
        assert_eq!(refuse.if_similar, IfSimilar::Refuse);
        let err = parse(&map(json!({"title": "t", "if_similar": "merge"}))).unwrap_err();
        assert_eq!(field_of(err), "if_similar");
    }
}
