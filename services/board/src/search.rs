//! Search and similarity: how text becomes terms, what a query matches, how
//! hits rank, what a snippet shows, and how alike two titles are. Every
//! store and the contract tests use these functions, so "what matches" is
//! decided once.
//!
//! # The search contract
//!
//! - **Terms.** Text is cut into words: maximal runs of alphanumeric
//!   characters (Unicode), each lower-cased with Rust's Unicode
//!   lower-casing. Everything else (spaces, punctuation, `-`, `_`, `.`)
//!   separates words, so `login-page` is the two words `login` and `page`.
//! - **Query.** 1 to 200 characters with 1 to 16 distinct terms. A term
//!   followed directly by `*` (`timeo*`) matches every word starting with
//!   it (at least 2 characters before the `*`); any other term matches the
//!   whole word only. An issue matches when **every** term occurs in its
//!   title, its body or one of its comments (not necessarily the same one).
//! - **Ranking.** Title matches before body matches before comment-only
//!   matches; ties go to the most recently updated issue. The reference
//!   score ([`SearchText::score`]) is, per term, 3 for the title, 2 for the
//!   body, 1 for a comment (its best field), summed and divided by 3 × the
//!   number of terms, so 1.0 means every term is in the title. SQLite ranks
//!   with FTS5's bm25 weighted the same way (title ≫ body ≫ comments),
//!   which also weighs how often and how rare a word is; its scores are
//!   comparable only within one answer.
//! - **Snippet.** A short excerpt (about [`SNIPPET_CHARS`] characters) of
//!   the field with the most matching terms, each matching word wrapped in
//!   `**`, with `…` where the field was cut.
//! - **Similarity** ([`title_similarity`]): the Jaccard index of two
//!   titles' word sets (shared words / all words), in 0..1. An open issue
//!   (any state but done and closed) at or above [`NEAR_MATCH`] is a near
//!   match: what `create_issue`'s `if_similar: "refuse"` refuses on.

use crate::error::ValidationError;
use crate::ids::{CommentId, IssueId};
use crate::issue::{Created, Issue, IssueState, ListQuery, Title, limits};
use crate::timestamp::Timestamp;
use serde::Serialize;
use std::cmp::Ordering;
use std::collections::BTreeSet;

/// Similarity at or above which an open issue is a near match.
pub const NEAR_MATCH: f64 = 0.75;

/// About how many characters a snippet of a body or comment shows.
pub const SNIPPET_CHARS: usize = 160;

/// Characters of context kept before the first match in a snippet.
const SNIPPET_LEAD_CHARS: usize = 50;

/// Shortest prefix a `word*` term may have: a one-letter prefix matches
/// nearly every issue and makes the index lookup as big as the board.
pub const PREFIX_MIN_CHARS: usize = 2;

/// The words of `text`, lower-cased, in order (repeats kept).
pub fn tokens(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// The distinct words of `text`, sorted.
pub fn term_set(text: &str) -> BTreeSet<String> {
    tokens(text).collect()
}

/// `text` as its words joined by single spaces: what a full-text index is
/// fed, so its own tokenizer only has to split on spaces and agrees with
/// [`tokens`] exactly.
pub fn normalized(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in tokens(text) {
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(&word);
    }
    out
}

/// One term of a query.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Term {
    /// Lower-cased, alphanumeric only.
    pub word: String,
    /// Matches every word starting with `word`.
    pub prefix: bool,
}

impl Term {
    /// Whether the (normalised) word `token` satisfies this term.
    pub fn matches(&self, token: &str) -> bool {
        if self.prefix {
            token.starts_with(&self.word)
        } else {
            token == self.word
        }
    }

    /// Whether any word of the sorted set `words` satisfies this term.
    pub fn in_set(&self, words: &BTreeSet<String>) -> bool {
        if self.prefix {
            words
                .range(self.word.clone()..)
                .next()
                .is_some_and(|w| w.starts_with(&self.word))
        } else {
            words.contains(&self.word)
        }
    }
}

/// A parsed free-text query (see the module docs for the rules).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchText {
    raw: String,
    terms: Vec<Term>,
}

impl SearchText {
    pub fn parse(raw: impl Into<String>) -> Result<Self, ValidationError> {
        let raw: String = raw.into();
        let chars = raw.chars().count();
        if chars == 0 || chars > limits::SEARCH_QUERY_MAX_CHARS {
            return Err(ValidationError::new(
                "query",
                format!("must be 1 to {} characters", limits::SEARCH_QUERY_MAX_CHARS),
            ));
        }
        let mut terms: BTreeSet<Term> = BTreeSet::new();
        let mut rest = raw.as_str();
        while let Some(start) = rest.find(|c: char| c.is_alphanumeric()) {
            let word_and_after = &rest[start..];
            let end = word_and_after
                .find(|c: char| !c.is_alphanumeric())
                .unwrap_or(word_and_after.len());
            let word = word_and_after[..end].to_lowercase();
            let after = &word_and_after[end..];
            let prefix = after.starts_with('*');
            if prefix && word.chars().count() < PREFIX_MIN_CHARS {
                return Err(ValidationError::new(
                    "query",
                    format!(
                        "a prefix term (word*) needs at least {PREFIX_MIN_CHARS} characters \
                         before the *; {word:?}* is too short"
                    ),
                ));
            }
            terms.insert(Term { word, prefix });
            rest = after;
        }
        if terms.is_empty() {
            return Err(ValidationError::new(
                "query",
                "must contain at least one word (letters or digits)",
            ));
        }
        if terms.len() > limits::SEARCH_TERMS_MAX {
            return Err(ValidationError::new(
                "query",
                format!(
                    "has {} distinct words; at most {} are allowed",
                    terms.len(),
                    limits::SEARCH_TERMS_MAX
                ),
            ));
        }
        Ok(Self {
            raw,
            terms: terms.into_iter().collect(),
        })
    }

    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// The distinct terms, sorted.
    pub fn terms(&self) -> &[Term] {
        &self.terms
    }

    /// Whether `issue` matches: every term somewhere in it.
    pub fn matches(&self, issue: &Issue) -> bool {
        self.score(&IssueTerms::of(issue)).is_some()
    }

    /// The reference score of an issue with `words`, in 0..=1, or `None`
    /// when it does not match.
    pub fn score(&self, words: &IssueTerms) -> Option<f64> {
        let mut total = 0u32;
        for term in &self.terms {
            total += if term.in_set(&words.title) {
                3
            } else if term.in_set(&words.body) {
                2
            } else if term.in_set(&words.comments) {
                1
            } else {
                return None;
            };
        }
        Some(f64::from(total) / (3.0 * self.terms.len() as f64))
    }

    /// How many terms the text's words satisfy.
    fn count_in(&self, text: &str) -> usize {
        let words = term_set(text);
        self.terms.iter().filter(|t| t.in_set(&words)).count()
    }

    /// The hit for a matching `issue` with `score`: the best-matching field
    /// (most terms; title before body before comments, later comments
    /// before earlier ones on a tie) and its snippet.
    pub fn hit(&self, issue: Issue, score: f64) -> SearchHit {
        let mut best = (self.count_in(issue.title.as_str()), MatchField::Title, None);
        let body = self.count_in(issue.body.as_str());
        if body > best.0 {
            best = (body, MatchField::Body, None);
        }
        for (i, comment) in issue.comments.iter().enumerate().rev() {
            let count = self.count_in(comment.body.as_str());
            if count > best.0 {
                best = (count, MatchField::Comment, Some(i));
            }
        }
        let (_, field, comment) = best;
        let snippet = match (field, comment) {
            (MatchField::Title, _) => mark(issue.title.as_str(), &self.terms, usize::MAX),
            (MatchField::Body, _) => mark(issue.body.as_str(), &self.terms, SNIPPET_CHARS),
            (MatchField::Comment, Some(i)) => {
                mark(issue.comments[i].body.as_str(), &self.terms, SNIPPET_CHARS)
            }
            (MatchField::Comment, None) => String::new(),
        };
        let comment = comment.map(|i| issue.comments[i].id.clone());
        SearchHit {
            issue,
            score,
            field,
            comment,
            snippet,
        }
    }
}

/// The distinct words of an issue, by field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IssueTerms {
    pub title: BTreeSet<String>,
    pub body: BTreeSet<String>,
    /// Of every comment together.
    pub comments: BTreeSet<String>,
}

impl IssueTerms {
    pub fn of(issue: &Issue) -> Self {
        Self {
            title: term_set(issue.title.as_str()),
            body: term_set(issue.body.as_str()),
            comments: issue
                .comments
                .iter()
                .flat_map(|c| tokens(c.body.as_str()))
                .collect(),
        }
    }
}

/// The excerpt of `text` around its first matching word, at most about
/// `max_chars` characters (the whole text when shorter), whitespace runs
/// shown as one space, matching words in `**`.
fn mark(text: &str, terms: &[Term], max_chars: usize) -> String {
    // Byte spans of the words, and whether each matches.
    let mut words: Vec<(usize, usize, bool)> = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices().chain([(text.len(), ' ')]) {
        match (c.is_alphanumeric() && i < text.len(), start) {
            (true, None) => start = Some(i),
            (false, Some(s)) => {
                let word = text[s..i].to_lowercase();
                words.push((s, i, terms.iter().any(|t| t.matches(&word))));
                start = None;
            }
            _ => {}
        }
    }
    let first = words.iter().find(|w| w.2).map_or(0, |w| w.0);
    // Start a few words before the first match, on a word's start.
    let lead = text[..first]
        .char_indices()
        .rev()
        .nth(SNIPPET_LEAD_CHARS)
        .map_or(0, |(i, _)| i);
    let from = if lead == 0 {
        0
    } else {
        words
            .iter()
            .find(|w| w.0 >= lead)
            .map_or(first, |w| w.0.min(first))
    };
    let mut to = text[from..]
        .char_indices()
        .nth(max_chars)
        .map_or(text.len(), |(i, _)| from + i);
    // Never cut a word in half.
    if let Some(w) = words.iter().find(|w| w.0 < to && to < w.1) {
        to = w.1;
    }
    let mut out = String::new();
    if from > 0 {
        out.push('…');
    }
    let mut at = from;
    for &(s, e, hit) in words.iter().filter(|w| w.0 >= from && w.1 <= to) {
        push_spaced(&mut out, &text[at..s]);
        if hit {
            out.push_str("**");
            out.push_str(&text[s..e]);
            out.push_str("**");
        } else {
            out.push_str(&text[s..e]);
        }
        at = e;
    }
    push_spaced(&mut out, &text[at..to]);
    let trimmed_end = out.trim_end().len();
    out.truncate(trimmed_end);
    if to < text.len() {
        out.push('…');
    }
    out
}

/// Appends `gap` with every whitespace run as one space.
fn push_spaced(out: &mut String, gap: &str) {
    let mut space = false;
    for c in gap.chars() {
        if c.is_whitespace() {
            space = true;
        } else {
            if space && !out.is_empty() && !out.ends_with(' ') {
                out.push(' ');
            }
            space = false;
            out.push(c);
        }
    }
    if space && !out.is_empty() && !out.ends_with(' ') && !out.ends_with('…') {
        out.push(' ');
    }
}

/// Which field of an issue a hit's snippet comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatchField {
    Title,
    Body,
    Comment,
}

/// One search result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    pub issue: Issue,
    /// Higher is better; comparable only within one answer.
    pub score: f64,
    pub field: MatchField,
    /// The comment the snippet comes from, when `field` is `comment`.
    pub comment: Option<CommentId>,
    pub snippet: String,
}

/// A search request: the text, and the list filters it combines with.
///
/// Of `filter`, every filter applies (`text` too, as the title substring
/// filter); its `limit` and `cursor` do not: a search pages by `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchQuery {
    pub text: SearchText,
    pub filter: ListQuery,
    pub limit: u32,
    pub offset: u32,
}

impl SearchQuery {
    pub fn new(text: SearchText) -> Self {
        Self {
            text,
            filter: ListQuery::default(),
            limit: limits::SEARCH_LIMIT_DEFAULT,
            offset: 0,
        }
    }

    pub fn validate(&self) -> Result<(), ValidationError> {
        if self.limit == 0 || self.limit > limits::SEARCH_LIMIT_MAX {
            return Err(ValidationError::new(
                "limit",
                format!("must be between 1 and {}", limits::SEARCH_LIMIT_MAX),
            ));
        }
        if self.offset.saturating_add(self.limit) > limits::SEARCH_DEPTH_MAX {
            return Err(ValidationError::new(
                "offset",
                format!(
                    "offset + limit must be at most {}: search ranks at most that many \
                     hits; narrow the query or add filters instead of paging deeper",
                    limits::SEARCH_DEPTH_MAX
                ),
            ));
        }
        if self.filter.cursor.is_some() {
            return Err(ValidationError::new(
                "cursor",
                "search pages by offset (next_offset), not by cursor",
            ));
        }
        self.filter.validate()
    }

    /// Whether `issue` passes the filters and matches the text.
    pub fn matches(&self, issue: &Issue) -> bool {
        self.filter.matches(issue) && self.text.matches(issue)
    }
}

/// One page of ranked hits.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchPage {
    pub hits: Vec<SearchHit>,
    /// Pass back as `offset` for the next page; absent on the last page.
    pub next_offset: Option<u32>,
    /// True when more issues matched than the store ranks (MongoDB ranks
    /// the newest [`MONGO_CANDIDATES_MAX`] matches, see its store): older
    /// matches may be missing; narrow the query.
    pub partial: bool,
}

/// Most matching issues a store that ranks outside the database fetches
/// per search (the newest ones), so a common word cannot make a query
/// unbounded. Equal to the deepest page a search may ask for.
pub const MONGO_CANDIDATES_MAX: u32 = limits::SEARCH_DEPTH_MAX;

/// The ranking order: higher score first, then most recently updated, then
/// newest id.
pub fn rank_order(a: (f64, Timestamp, &IssueId), b: (f64, Timestamp, &IssueId)) -> Ordering {
    b.0.total_cmp(&a.0)
        .then_with(|| b.1.cmp(&a.1))
        .then_with(|| b.2.cmp(a.2))
}

/// Whether work in `state` is still open (not done, not closed).
pub fn is_open(state: IssueState) -> bool {
    !matches!(state, IssueState::Done | IssueState::Closed)
}

/// The Jaccard index of the two titles' word sets, in 0..=1 (0 when either
/// has no words).
pub fn title_similarity(a: &str, b: &str) -> f64 {
    let (a, b) = (term_set(a), term_set(b));
    let union = a.union(&b).count();
    if union == 0 {
        return 0.0;
    }
    a.intersection(&b).count() as f64 / union as f64
}

/// An open issue like a given title.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SimilarIssue {
    pub id: IssueId,
    pub title: Title,
    pub state: IssueState,
    pub updated_at: Timestamp,
    /// [`title_similarity`], in 0..=1.
    pub score: f64,
    /// The issue's level: a run whose floor it is below is not shown it.
    #[serde(skip)]
    pub integrity: crate::Integrity,
}

impl SimilarIssue {
    /// At or above [`NEAR_MATCH`].
    pub fn is_near(&self) -> bool {
        self.score >= NEAR_MATCH
    }
}

/// The reference choice of similar issues among `candidates` (id, title,
/// state, updated_at, integrity): open ones sharing a word with `title`, most similar
/// first (then most recently updated), at most `limit`. Stores find the
/// candidates; this decides (through [`SimilarRanking`]).
pub fn rank_similar(
    title: &str,
    candidates: impl IntoIterator<Item = (IssueId, Title, IssueState, Timestamp, crate::Integrity)>,
    limit: u32,
) -> Vec<SimilarIssue> {
    let mut ranking = SimilarRanking::new(title);
    for (id, candidate, state, updated_at, integrity) in candidates {
        ranking.offer(id, candidate, state, updated_at, integrity);
    }
    ranking.finish(limit)
}

/// [`rank_similar`] fed one candidate at a time, for stores that read
/// their candidates in steps: each candidate's words are cut once and
/// serve the containment check, [`SimilarRanking::settled`] and the score.
///
/// Only the best [`limits::SIMILAR_LIMIT_MAX`] candidates are kept (an
/// answer is never longer), and how many scored above the near-match line
/// is counted: a look-up scores up to a few hundred candidates, and
/// copying each one's id and title was most of its allocations.
#[derive(Debug)]
pub struct SimilarRanking {
    words: BTreeSet<String>,
    seen: BTreeSet<IssueId>,
    /// The best so far, best first, at most `SIMILAR_LIMIT_MAX`.
    best: Vec<SimilarIssue>,
    /// Candidates scored above what a title missing one word can score.
    above: usize,
}

/// A score's two counts, kept so the settle rule compares in integers.
#[derive(Debug, Clone, Copy)]
struct ScoreParts {
    shared: usize,
    union: usize,
}

impl SimilarRanking {
    pub fn new(title: &str) -> Self {
        Self {
            words: term_set(title),
            seen: BTreeSet::new(),
            best: Vec::new(),
            above: 0,
        }
    }

    /// The title's word set ([`term_set`]).
    pub fn words(&self) -> &BTreeSet<String> {
        &self.words
    }

    /// Offers one candidate: closed ones, repeats and ones sharing no word
    /// are left out. Answers whether the candidate's title holds every
    /// word of the title (whether or not it was new).
    pub fn offer(
        &mut self,
        id: IssueId,
        title: Title,
        state: IssueState,
        updated_at: Timestamp,
        integrity: crate::Integrity,
    ) -> bool {
        let words = term_set(title.as_str());
        let parts = self.parts(words.iter().map(String::as_str));
        if parts.shared > 0 && is_open(state) && !self.seen.contains(&id) {
            self.rank(&id, &title, parts, state, updated_at, integrity);
            self.seen.insert(id);
        }
        parts.shared == self.words.len()
    }

    /// [`Self::offer`] for a caller that offers each candidate once and
    /// has counted itself how many of the title's words the candidate's
    /// title holds (`shared`, of its `theirs` distinct words): no copy of
    /// the id to tell repeats, no comparison of words as strings. The id
    /// and title are copied only when the candidate is kept.
    #[allow(clippy::too_many_arguments)]
    pub fn offer_counted(
        &mut self,
        id: &IssueId,
        title: &Title,
        shared: usize,
        theirs: usize,
        state: IssueState,
        updated_at: Timestamp,
        integrity: crate::Integrity,
    ) -> bool {
        if shared > 0 && is_open(state) {
            let parts = self.counted(shared, theirs);
            self.rank(id, title, parts, state, updated_at, integrity);
        }
        shared == self.words.len()
    }

    /// Ranks a new open candidate sharing `parts.shared` words.
    fn rank(
        &mut self,
        id: &IssueId,
        title: &Title,
        parts: ScoreParts,
        state: IssueState,
        updated_at: Timestamp,
        integrity: crate::Integrity,
    ) {
        let n = self.words.len();
        // shared / union > (n - 1) / n, in integers.
        if n * parts.shared > (n - 1) * parts.union {
            self.above += 1;
        }
        let score = parts.shared as f64 / parts.union as f64;
        let kept = limits::SIMILAR_LIMIT_MAX as usize;
        // Where it ranks among the best so far; past them, it is out.
        let at = self.best.partition_point(|held| {
            rank_order(
                (held.score, held.updated_at, &held.id),
                (score, updated_at, id),
            ) == Ordering::Less
        });
        if at < kept {
            self.best.truncate(kept - 1);
            self.best.insert(
                at,
                SimilarIssue {
                    score,
                    id: id.clone(),
                    title: title.clone(),
                    state,
                    updated_at,
                    integrity,
                },
            );
        }
    }

    /// The words shared with a candidate's and their union: one merge of
    /// two sorted lists of distinct words.
    fn parts<'w>(&self, candidate: impl IntoIterator<Item = &'w str>) -> ScoreParts {
        let mut ours = self.words.iter().map(String::as_str).peekable();
        let (mut shared, mut theirs) = (0, 0);
        for word in candidate {
            theirs += 1;
            while ours.next_if(|&w| w < word).is_some() {}
            if ours.next_if_eq(&word).is_some() {
                shared += 1;
            }
        }
        self.counted(shared, theirs)
    }

    /// A candidate's parts from its count of shared words and of its own
    /// (distinct) words.
    fn counted(&self, shared: usize, theirs: usize) -> ScoreParts {
        ScoreParts {
            shared,
            union: self.words.len() + theirs - shared,
        }
    }

    /// Whether the answer of `limit` is already decided: at least `limit`
    /// candidates score above what any title missing one of the words can
    /// score (`(n - 1) / n` for `n` words), so no candidate sharing only
    /// some words can enter it and a store need not read those. Saves the
    /// second candidate scan when a title is filed again and again, the
    /// case the look-up exists for.
    pub fn settled(&self, limit: u32) -> bool {
        self.words.is_empty() || self.above >= limit as usize
    }

    /// The most similar, best first, at most `limit` (at most
    /// [`limits::SIMILAR_LIMIT_MAX`]: no more are kept).
    pub fn finish(mut self, limit: u32) -> Vec<SimilarIssue> {
        self.best.truncate(limit as usize);
        self.best
    }
}

/// The answer to `create_issue_unless_similar`.
// Returned once per create and taken apart at once: boxing the common
// variant would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum CreateOutcome {
    /// Created (or an idempotent replay of an earlier create).
    Created(Created),
    /// Nothing was created: these open issues are near matches (best first).
    Refused(Vec<SimilarIssue>),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Integrity;
    use crate::ids::{RunId, TenantId};
    use crate::issue::{Author, Body, Comment, CommentBody, NewIssue};

    fn candidate(
        title: &str,
        state: IssueState,
    ) -> (IssueId, Title, IssueState, Timestamp, Integrity) {
        (
            IssueId::generate(),
            Title::parse(title).unwrap(),
            state,
            Timestamp::from_millis(1),
            Integrity::Agent,
        )
    }

    /// Offering counted words ranks exactly as offering the title: the
    /// same scores, answers and closed ones skipped; a counting caller
    /// leaves repeats out itself.
    #[test]
    fn offering_counted_words_ranks_as_offering_the_title() {
        let titles = [
            "Login fails on Safari",
            "login fails on safari when the cache is cold",
            "fails",
            "Safari: login, login and LOGIN",
            "nothing in common",
            "a b c login z",
            "",
            "on on on",
        ];
        for query in ["login fails on safari", "on", "zebra", "a z login"] {
            let mut whole = SimilarRanking::new(query);
            let mut counted = SimilarRanking::new(query);
            let ours = term_set(query);
            let candidates: Vec<_> = titles
                .iter()
                .filter_map(|t| Title::parse(*t).ok())
                .enumerate()
                .map(|(i, title)| {
                    let state = if i == 2 {
                        IssueState::Done
                    } else {
                        IssueState::Todo
                    };
                    (IssueId::generate(), title, state)
                })
                .collect();
            // Every candidate twice: the second offer is a repeat.
            let mut offered = BTreeSet::new();
            for (id, title, state) in candidates.iter().chain(&candidates) {
                let at = Timestamp::from_millis(7);
                let words = term_set(title.as_str());
                let shared = words.intersection(&ours).count();
                let by_title = whole.offer(id.clone(), title.clone(), *state, at, Integrity::Agent);
                assert_eq!(
                    by_title,
                    shared == ours.len(),
                    "{query:?} offered {title:?}"
                );
                if offered.insert(id.clone()) {
                    let by_count = counted.offer_counted(
                        id,
                        title,
                        shared,
                        words.len(),
                        *state,
                        at,
                        Integrity::Agent,
                    );
                    assert_eq!(by_title, by_count, "{query:?} offered {title:?}");
                }
            }
            assert_eq!(whole.settled(2), counted.settled(2), "{query:?}");
            assert_eq!(whole.finish(10), counted.finish(10), "{query:?}");
        }
    }

    #[test]
    fn a_ranking_keeps_the_best_of_many_candidates_in_any_order() {
        let words = ["login", "fails", "on", "safari", "cache", "cold", "save"];
        // 60 candidates: titles of one to four words, times with ties,
        // some closed; each order below must give the same best ten.
        let candidates: Vec<_> = (0..60usize)
            .map(|i| {
                let title: Vec<&str> = (0..=i % 4).map(|k| words[(i * 3 + k * 5) % 7]).collect();
                let state = if i % 9 == 4 {
                    IssueState::Closed
                } else {
                    IssueState::Todo
                };
                (
                    IssueId::generate(),
                    Title::parse(title.join(" ")).unwrap(),
                    state,
                    Timestamp::from_millis((i % 13) as i64),
                    Integrity::Agent,
                )
            })
            .collect();
        let query = "login fails on safari";
        // The reference: every candidate scored, sorted, cut.
        let mut expected: Vec<SimilarIssue> = candidates
            .iter()
            .filter(|(_, title, state, ..)| {
                is_open(*state) && title_similarity(query, title.as_str()) > 0.0
            })
            .map(|(id, title, state, at, level)| SimilarIssue {
                score: title_similarity(query, title.as_str()),
                id: id.clone(),
                title: title.clone(),
                state: *state,
                updated_at: *at,
                integrity: *level,
            })
            .collect();
        expected.sort_by(|a, b| {
            rank_order(
                (a.score, a.updated_at, &a.id),
                (b.score, b.updated_at, &b.id),
            )
        });
        assert!(expected.len() > 20, "{}", expected.len());
        let limit = limits::SIMILAR_LIMIT_MAX;
        expected.truncate(limit as usize);
        for order in [1usize, 7, 11, 59] {
            let shuffled = (0..60).map(|i| candidates[(i * order) % 60].clone());
            assert_eq!(
                rank_similar(query, shuffled, limit),
                expected,
                "order {order}"
            );
        }
        let reversed = candidates.iter().rev().cloned();
        assert_eq!(rank_similar(query, reversed, 3), expected[..3]);
    }

    #[test]
    fn a_ranking_is_settled_only_when_no_partial_match_can_enter() {
        let settled = |candidates: &[(IssueId, Title, IssueState, Timestamp, Integrity)], limit| {
            let mut ranking = SimilarRanking::new("login fails on safari");
            for (id, title, state, at, level) in candidates.iter().cloned() {
                ranking.offer(id, title, state, at, level);
            }
            ranking.settled(limit)
        };
        let exact: Vec<_> = (0..3)
            .map(|_| candidate("Login fails on Safari", IssueState::Todo))
            .collect();
        assert!(settled(&exact, 3));
        assert!(!settled(&exact, 4), "too few");
        // Holding every word among many others scores 4/8, below what a
        // title missing one word can score (3/4): not settled, and indeed
        // a partial match outranks it.
        let long = vec![candidate(
            "login fails on safari when the cache is cold",
            IssueState::Todo,
        )];
        assert!(!settled(&long, 1));
        let partial = candidate("login fails on", IssueState::Todo);
        let mut ranking = SimilarRanking::new("login fails on safari");
        let (id, title, state, at, level) = partial.clone();
        assert!(!ranking.offer(id, title, state, at, level), "misses a word");
        let (id, title, state, at, level) = long[0].clone();
        assert!(
            ranking.offer(id, title, state, at, level),
            "holds every word"
        );
        let ranked = rank_similar(
            "login fails on safari",
            [long[0].clone(), partial.clone()],
            1,
        );
        assert_eq!(ranked[0].id, partial.0);
        // Closed candidates never count.
        let closed = vec![candidate("Login fails on Safari", IssueState::Done)];
        assert!(!settled(&closed, 1));
        // When settled, adding candidates that miss a word changes nothing.
        let extra = [
            candidate("login fails on", IssueState::Todo),
            candidate("safari fails", IssueState::Todo),
        ];
        let alone = rank_similar("login fails on safari", exact.clone(), 3);
        let with = rank_similar(
            "login fails on safari",
            exact.iter().cloned().chain(extra),
            3,
        );
        assert_eq!(alone, with);
    }

    fn issue(title: &str, body: &str, comments: &[&str]) -> Issue {
        let mut new = NewIssue::new(Title::parse(title).unwrap());
        new.body = Body::parse(body).unwrap();
        let author = Author {
            kind: crate::AuthorKind::Run,
            run: RunId::parse("r").unwrap(),
            grant: None,
            integrity: crate::Integrity::Agent,
        };
        let mut issue = new.into_issue(
            TenantId::parse("t").unwrap(),
            author.clone(),
            Timestamp::from_millis(1),
        );
        for c in comments {
            issue.comments.push(Comment {
                id: CommentId::generate(),
                body: CommentBody::parse(*c).unwrap(),
                author: author.clone(),
                created_at: Timestamp::from_millis(2),
            });
        }
        issue
    }

    #[test]
    fn words_are_lowercased_alphanumeric_runs() {
        assert_eq!(
            tokens("Login-page: CRASHES (Ünïcode_ok) v2.1").collect::<Vec<_>>(),
            ["login", "page", "crashes", "ünïcode", "ok", "v2", "1"]
        );
        assert_eq!(normalized("  A, b\n\tC "), "a b c");
    }

    #[test]
    fn queries_parse_terms_prefixes_and_limits() {
        let q = SearchText::parse("Timeo* login login").unwrap();
        assert_eq!(
            q.terms(),
            [
                Term {
                    word: "login".into(),
                    prefix: false
                },
                Term {
                    word: "timeo".into(),
                    prefix: true
                }
            ]
        );
        for bad in ["", "  ,, ", "a*", &"x".repeat(201)] {
            let err = SearchText::parse(bad).unwrap_err();
            assert_eq!(err.field, "query", "{bad:?}");
        }
        let many: Vec<String> = (0..17).map(|i| format!("w{i}")).collect();
        assert!(SearchText::parse(many.join(" ")).is_err());
        assert!(SearchText::parse(many[..16].join(" ")).is_ok());
    }

    #[test]
    fn every_term_must_match_somewhere_and_fields_rank() {
        let i = issue("Login fails", "The session times out", &["seen on safari"]);
        let q = |s: &str| SearchText::parse(s).unwrap();
        assert!(q("login").matches(&i));
        assert!(
            q("login safari").matches(&i),
            "terms may match in different fields"
        );
        assert!(!q("login chrome").matches(&i));
        assert!(q("tim*").matches(&i));
        assert!(!q("tim").matches(&i), "whole words only without *");
        let words = IssueTerms::of(&i);
        assert_eq!(q("login").score(&words), Some(1.0));
        assert_eq!(q("session").score(&words), Some(2.0 / 3.0));
        assert_eq!(q("safari").score(&words), Some(1.0 / 3.0));
    }

    #[test]
    fn hits_show_the_best_field_with_marked_words() {
        let i = issue(
            "Build is red",
            &format!(
                "{} the flaky test xyzzy fails {}",
                "lorem ".repeat(30),
                "ipsum ".repeat(40)
            ),
            &["unrelated", "also xyzzy here"],
        );
        let hit = SearchText::parse("xyzzy flaky")
            .unwrap()
            .hit(i.clone(), 0.5);
        assert_eq!(hit.field, MatchField::Body);
        assert!(
            hit.snippet.contains("**flaky** test **xyzzy** fails"),
            "{}",
            hit.snippet
        );
        assert!(
            hit.snippet.starts_with('…') && hit.snippet.ends_with('…'),
            "{}",
            hit.snippet
        );
        assert!(
            hit.snippet.chars().count() <= SNIPPET_CHARS + 20,
            "{}",
            hit.snippet
        );
        let hit = SearchText::parse("here").unwrap().hit(i.clone(), 0.1);
        assert_eq!(hit.field, MatchField::Comment);
        assert_eq!(hit.comment.as_ref(), Some(&i.comments[1].id));
        assert_eq!(hit.snippet, "also xyzzy **here**");
        let hit = SearchText::parse("red").unwrap().hit(i, 1.0);
        assert_eq!(
            (hit.field, hit.snippet.as_str()),
            (MatchField::Title, "Build is **red**")
        );
    }

    #[test]
    fn search_queries_bound_limit_depth_and_refuse_cursors() {
        let mut q = SearchQuery::new(SearchText::parse("x").unwrap());
        q.validate().unwrap();
        q.limit = 51;
        assert_eq!(q.validate().unwrap_err().field, "limit");
        q.limit = 50;
        q.offset = 951;
        assert_eq!(q.validate().unwrap_err().field, "offset");
        q.offset = 950;
        q.validate().unwrap();
        q.filter.cursor = Some(IssueId::generate());
        assert_eq!(q.validate().unwrap_err().field, "cursor");
    }

    #[test]
    fn similarity_is_the_jaccard_index_of_title_words() {
        assert_eq!(title_similarity("Login fails", "login FAILS!"), 1.0);
        assert_eq!(
            title_similarity(
                "Login page crashes on Safari",
                "Login page crashes on Safari 17"
            ),
            5.0 / 6.0
        );
        assert!(title_similarity("Fix the login bug", "Fix the signup bug") < NEAR_MATCH);
        assert_eq!(title_similarity("a", "b"), 0.0);
        let open = |s: &str, state| {
            (
                IssueId::generate(),
                Title::parse(s).unwrap(),
                state,
                Timestamp::from_millis(1),
                Integrity::Agent,
            )
        };
        let ranked = rank_similar(
            "login fails",
            [
                open("login fails", IssueState::Closed),
                open("login fails badly", IssueState::Todo),
                open("login fails", IssueState::Inbox),
                open("unrelated", IssueState::Inbox),
            ],
            5,
        );
        let titles: Vec<&str> = ranked.iter().map(|s| s.title.as_str()).collect();
        assert_eq!(titles, ["login fails", "login fails badly"]);
        assert!(ranked[0].is_near());
    }
}
