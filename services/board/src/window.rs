//! Which comments an issue read carries: the window a store reads instead
//! of the whole issue.
//!
//! An issue may hold [`limits::COMMENTS_MAX`] comments of up to
//! [`limits::BODY_MAX_BYTES`] each (about 32 MiB). An answer shows a few of
//! them (the newest ones, paged back with a cursor), so the stores read only
//! the comments of the window and count the rest, instead of handing over
//! the whole issue to be cut afterwards.

use crate::ids::CommentId;
use crate::issue::{Comment, limits};

/// The comments an issue read returns: the newest `limit` comments, of
/// those older than `before` when it is set (a comment id of the issue),
/// read newest first and no more once the comments read exceed
/// `max_bytes` of body (always at least one). Comments come back oldest
/// first, as the issue holds them.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CommentWindow {
    before: Option<CommentId>,
    limit: usize,
    max_bytes: usize,
}

impl CommentWindow {
    /// The newest `limit` comments (at least one, at most
    /// [`limits::COMMENTS_MAX`], which is every comment), with no byte
    /// bound.
    pub fn latest(limit: usize) -> Self {
        Self {
            before: None,
            limit: limit.clamp(1, limits::COMMENTS_MAX),
            max_bytes: usize::MAX,
        }
    }

    /// Every comment of the issue (the REST and web board read).
    pub fn all() -> Self {
        Self::latest(limits::COMMENTS_MAX)
    }

    /// Only comments older than `before` (a comment id of the issue; a
    /// store reports whether it is one in [`CommentFacts::before_found`]).
    pub fn before(mut self, before: CommentId) -> Self {
        self.before = Some(before);
        self
    }

    /// Stops reading once the comments read exceed `max_bytes` of body (at
    /// least one comment is read whatever its size).
    pub fn max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    pub fn before_id(&self) -> Option<&CommentId> {
        self.before.as_ref()
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    pub fn byte_bound(&self) -> usize {
        self.max_bytes
    }

    /// Whether a store reading newest first takes one more comment after
    /// `taken` comments of `bytes` body bytes in all: below the limit, and
    /// the first one always, or while the bytes read do not exceed the
    /// bound. The one rule both stores apply.
    pub fn takes_more(&self, taken: usize, bytes: usize) -> bool {
        taken < self.limit && (taken == 0 || bytes <= self.max_bytes)
    }

    /// The window of `comments` (the issue's, oldest first) and its facts:
    /// the definition the stores' reads must agree with, for a caller that
    /// holds the comments anyway (a store contract test, a store kept in
    /// memory).
    pub fn cut(&self, mut comments: Vec<Comment>) -> (Vec<Comment>, CommentFacts) {
        let total = comments.len();
        let end = match &self.before {
            None => total,
            Some(before) => match comments.iter().position(|c| &c.id == before) {
                Some(at) => at,
                None => return (Vec::new(), CommentFacts::unknown_before(total)),
            },
        };
        comments.truncate(end);
        let (mut taken, mut bytes) = (0, 0);
        while end > taken && self.takes_more(taken, bytes) {
            bytes += comments[end - 1 - taken].body.as_str().len();
            taken += 1;
        }
        comments.drain(..end - taken);
        let facts = CommentFacts::new(self, total, end, taken);
        (comments, facts)
    }
}

/// What a windowed read says about the comments it left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CommentFacts {
    /// Comments the issue has.
    pub total: usize,
    /// Comments older than the first one returned that were left out.
    pub older: usize,
    /// Of those, how many the window's limit would have shown but its byte
    /// bound left out.
    pub over_bytes: usize,
    /// False when the window's `before` is not a comment of the issue
    /// (then no comment is returned).
    pub before_found: bool,
}

impl CommentFacts {
    /// The facts of a read of `window` that returned the `taken` comments
    /// just older than position `end` (the place of `before`, or the
    /// count) of an issue with `total` comments.
    pub fn new(window: &CommentWindow, total: usize, end: usize, taken: usize) -> Self {
        let older = end - taken;
        Self {
            total,
            older,
            over_bytes: window.limit.min(end) - taken,
            before_found: true,
        }
    }

    /// The facts of a read whose `before` is no comment of the issue.
    pub fn unknown_before(total: usize) -> Self {
        Self {
            total,
            older: 0,
            over_bytes: 0,
            before_found: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{GrantId, RunId};
    use crate::issue::{Author, CommentBody};
    use crate::timestamp::Timestamp;

    fn comments(sizes: &[usize]) -> Vec<Comment> {
        sizes
            .iter()
            .map(|&n| Comment {
                id: CommentId::generate(),
                body: CommentBody::parse("x".repeat(n)).unwrap(),
                author: Author {
                    kind: crate::AuthorKind::Run,
                    run: RunId::parse("run-1").unwrap(),
                    grant: None::<GrantId>,
                    integrity: crate::Integrity::Agent,
                },
                created_at: Timestamp::from_millis(1),
            })
            .collect()
    }

    #[test]
    fn the_newest_comments_up_to_the_limit() {
        let all = comments(&[1; 12]);
        let (shown, facts) = CommentWindow::latest(5).cut(all.clone());
        assert_eq!(shown, all[7..]);
        assert_eq!(
            facts,
            CommentFacts {
                total: 12,
                older: 7,
                over_bytes: 0,
                before_found: true
            }
        );
        let (shown, facts) = CommentWindow::latest(5)
            .before(all[3].id.clone())
            .cut(all.clone());
        assert_eq!(shown, all[..3]);
        assert_eq!((facts.older, facts.total), (0, 12));
        let (shown, facts) = CommentWindow::latest(5)
            .before(CommentId::generate())
            .cut(all);
        assert!(shown.is_empty());
        assert!(!facts.before_found);
    }

    #[test]
    fn the_byte_bound_stops_after_the_comment_that_exceeds_it() {
        let all = comments(&[10, 10, 10, 10, 10]);
        // 10 + 10 = 20 does not exceed 20, 30 does: three are read.
        let (shown, facts) = CommentWindow::latest(5).max_bytes(20).cut(all.clone());
        assert_eq!(shown, all[2..]);
        assert_eq!((facts.older, facts.over_bytes), (2, 2));
        // One comment is always read, however large.
        let (shown, facts) = CommentWindow::latest(5).max_bytes(0).cut(all.clone());
        assert_eq!(shown, all[4..]);
        assert_eq!((facts.older, facts.over_bytes), (4, 4));
        // The limit counts before the bound.
        let (shown, facts) = CommentWindow::latest(2).max_bytes(1000).cut(all);
        assert_eq!(shown.len(), 2);
        assert_eq!((facts.older, facts.over_bytes), (3, 0));
    }

    #[test]
    fn limits_are_clamped_to_what_an_issue_can_hold() {
        assert_eq!(CommentWindow::latest(0).limit(), 1);
        assert_eq!(CommentWindow::all().limit(), limits::COMMENTS_MAX);
        assert_eq!(CommentWindow::latest(10_000).limit(), limits::COMMENTS_MAX);
    }
}
