//! Bench-only bulk seeding: [`MongoStore::seed_issues`] writes exactly the
//! documents `create_issue` + `add_comment` write, many per `insert_many`,
//! so the cost-curve benchmark can seed a million issues in minutes instead
//! of hours (the create path does a few hundred issues a second, each a
//! round trip, plus one more for its comment).
//!
//! Not for production writes: no idempotency keys, no similarity check,
//! and a batch is not atomic (an `insert_many` that fails part-way leaves
//! the issues before the failure written). Proven equivalent to the create
//! path by `tests/seed.rs`.

use crate::codec::{change_doc, created_doc, field, issue_doc};
use crate::error::store_error;
use crate::staged::{self, created_doc_staged};
use crate::store::MongoStore;
use corkboard_board::{
    Author, Comment, CommentAdded, CommentBody, CommentId, Created, Issue, IssueId, NewIssue,
    StoreError, TenantId, Timestamp,
};

/// Issues per `insert_many`: each document is a few KiB at most, so a batch
/// stays far below the server's 48 MB message size (the driver splits a
/// larger one anyway), and small enough that one batch answers well within
/// a call's bound on a busy server.
const SEED_BATCH: usize = 500;

impl MongoStore {
    /// Bench-only bulk seeding: creates each issue (and its comment, if
    /// any) exactly as `create_issue` and `add_comment` would, with the
    /// same document (version, timestamps, embedded comment, search word
    /// arrays) and the same webhook deliveries, but 500 issues per
    /// `insert_many` instead of one round trip each (two with a comment).
    /// No idempotency keys, no similarity check; the ids created, in
    /// order. Each write is bounded like a create: a batch that times out
    /// may or may not have been written.
    pub async fn seed_issues(
        &self,
        tenant: &TenantId,
        author: &Author,
        items: Vec<(NewIssue, Option<CommentBody>)>,
    ) -> Result<Vec<IssueId>, StoreError> {
        self.bounded_write("seed_issues", self.ensure_tenant(tenant))
            .await?;
        // Webhook deliveries are queued after the write, as the create path
        // does; a tenant without endpoints (every benchmark tenant) skips
        // the per-issue lookups.
        let webhooks = self
            .bounded("seed_issues", self.has_webhooks(tenant))
            .await?;
        let mut ids = Vec::with_capacity(items.len());
        let mut items = items.into_iter().peekable();
        while items.peek().is_some() {
            let mut issues = Vec::with_capacity(SEED_BATCH);
            for (new, comment) in items.by_ref().take(SEED_BATCH) {
                new.validate()?;
                self.bounded(
                    "seed_issues",
                    self.check_relations(tenant, None, &new.related(), new.parent.as_ref()),
                )
                .await?;
                let now = Timestamp::now();
                let created = new.into_issue(tenant.clone(), author.clone(), now);
                let comment = comment.map(|body| Comment {
                    id: CommentId::generate(),
                    body,
                    author: author.clone(),
                    created_at: Timestamp::now(),
                });
                issues.push((created, comment));
            }
            let docs: Vec<_> = issues
                .iter()
                .map(|(created, comment)| seeded_doc(created, comment.as_ref(), webhooks))
                .collect();
            self.bounded_write("seed_issues", async {
                self.issues(tenant)
                    .insert_many(docs)
                    .await
                    .map(|_| ())
                    .map_err(|e| store_error(&e))
            })
            .await?;
            // As the create path: blockers were written counted open.
            for (issue, _) in &issues {
                if !issue.blocked_by.is_empty() {
                    self.bounded_write("seed_issues", async {
                        self.settle_blockers(tenant, issue.id.as_str()).await
                    })
                    .await?;
                }
            }
            for (issue, comment) in issues {
                if webhooks {
                    let created = Created {
                        issue,
                        replayed: false,
                    };
                    self.created_event(tenant, &created, true, None).await;
                    let issue = created.issue;
                    if let Some(comment) = comment {
                        let added = CommentAdded {
                            issue: commented(issue.clone(), Some(&comment)),
                            comment,
                            replayed: false,
                        };
                        self.commented_event(tenant, &added, true, None).await;
                    }
                    ids.push(issue.id);
                } else {
                    ids.push(issue.id);
                }
            }
        }
        Ok(ids)
    }
}

/// The document `create_issue` and then `add_comment` leave: the created
/// issue's, with the comment embedded and both changes in its history
/// (and, for a tenant with webhooks, both events staged until queued).
fn seeded_doc(
    created: &Issue,
    comment: Option<&Comment>,
    webhooks: bool,
) -> mongodb::bson::Document {
    let Some(comment) = comment else {
        return created_doc_staged(created, webhooks);
    };
    let mut history = created_doc(created)
        .get_array(field::HISTORY)
        .cloned()
        .unwrap_or_default();
    let issue = commented(created.clone(), Some(comment));
    let change = corkboard_board::Change::commented(&issue, &comment.id, &comment.author);
    history.push(change_doc(&change).into());
    let mut doc = issue_doc(&issue);
    doc.insert(field::HISTORY, history);
    if webhooks {
        let events = [staged::created(created), staged::commented(comment)];
        staged::insert_markers(&mut doc, &events);
    }
    doc
}

/// `issue` as `add_comment` leaves it after adding `comment`: the comment
/// embedded, the version bumped, `updated_at` moved to the comment's time
/// (the words of its body come with the document, see `issue_doc`).
fn commented(mut issue: Issue, comment: Option<&Comment>) -> Issue {
    if let Some(comment) = comment {
        issue.updated_at = issue.updated_at.max(comment.created_at);
        issue.version += 1;
        issue.comments.push(comment.clone());
    }
    issue
}
