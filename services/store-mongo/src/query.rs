//! The list query as a MongoDB filter: every filter runs on the server, in
//! a shape the `(state|labels|author.run, _id)` indexes serve.

use crate::codec::{date, field};
use corkboard_board::{
    ClaimFilter, IssueState, LabelFilter, ListQuery, SearchQuery, Term, Timestamp, is_open,
};
use mongodb::bson::{Bson, Document, doc};
use std::collections::BTreeSet;

/// The filter of one list page, or `None` when no issue can match (then
/// the store answers an empty page without asking the server).
///
/// Agrees with [`ListQuery::matches`] in its corners: an empty `All` label
/// list matches every issue (MongoDB's `$all: []` would match none), an
/// empty `Any` list matches none, and a text filter with a control
/// character matches none (titles cannot contain one).
pub(crate) fn list_filter(query: &ListQuery) -> Option<Document> {
    list_filter_at(query, Timestamp::now())
}

/// [`list_filter`] with claims judged live or ended as of `now`.
pub(crate) fn list_filter_at(query: &ListQuery, now: Timestamp) -> Option<Document> {
    filter_at(query, now, true)
}

/// The filter of ready work when the tenant has no lapsed claim stored
/// (`MongoStore::any_lapsed_claim`): then "no live claim" is "no claim",
/// an equality the ready index `(state, claim.run, open_blockers, urgency,
/// created_at, _id)` answers with point intervals, so claimed issues at the top of the
/// ready order are never walked over. [`list_filter_at`]'s `$or` with
/// lapsed claims cannot use that key: the server would walk every claimed
/// candidate before the first unclaimed one, on every call.
pub(crate) fn ready_filter_without_lapsed_claims(
    query: &ListQuery,
    now: Timestamp,
) -> Option<Document> {
    debug_assert!(query.ready);
    filter_at(query, now, false)
}

fn filter_at(query: &ListQuery, now: Timestamp, lapsed_claims: bool) -> Option<Document> {
    let mut filter = Document::new();
    if let Some(parent) = &query.parent {
        filter.insert(field::PARENT, parent.as_str());
    }
    match &query.claim {
        ClaimFilter::Any => {}
        // An ended claim (its grant expired) is no claim.
        ClaimFilter::Unclaimed => {
            filter.insert(
                "$or",
                vec![
                    doc! { field::CLAIM: Bson::Null },
                    doc! { field::CLAIM_EXPIRES_AT: { "$lte": date(now) } },
                ],
            );
        }
        ClaimFilter::ClaimedBy(run) => {
            filter.insert(field::CLAIM_RUN, run.as_str());
            filter.insert(field::CLAIM_EXPIRES_AT, doc! { "$gt": date(now) });
        }
        // The stored claim, ended or not: a lapsed claim stays in the
        // document until another claim, a release, a close or the
        // revocation of its grant clears it.
        ClaimFilter::Stale { until } => {
            filter.insert(field::CLAIM_EXPIRES_AT, doc! { "$lte": date(*until) });
            filter.insert(field::STATE, doc! { "$nin": TERMINAL });
        }
    }
    let mut and = Vec::new();
    if query.ready {
        // Open, without a live claim and without an open blocker.
        // `$in` of the open states (and of the asked ones among them), not
        // `$nin`: point intervals on the ready index's first key, which
        // the server merges in the index's order (no blocking sort).
        let open: BTreeSet<&str> = IssueState::ALL
            .into_iter()
            .filter(|s| !s.is_terminal())
            .filter(|s| query.states.is_empty() || query.states.contains(s))
            .map(|s| s.as_str())
            .collect();
        and.push(doc! { field::STATE: { "$in": strings(open) } });
        // No open blocker, as last counted (`blockers.rs`).
        filter.insert(field::OPEN_BLOCKERS, 0_i64);
        if lapsed_claims {
            and.push(doc! { "$or": [
                { field::CLAIM: Bson::Null },
                { field::CLAIM_EXPIRES_AT: { "$lte": date(now) } },
            ] });
        } else {
            // Matches a null or absent claim (so no `claim.run`).
            and.push(doc! { field::CLAIM_RUN: Bson::Null });
        }
    }
    // A ready page's cursor is resolved by the store (`ready_after`).
    if let Some(cursor) = &query.cursor
        && !query.ready
    {
        filter.insert(field::ID, doc! { "$lt": cursor.as_str() });
    }
    if !query.states.is_empty() && !query.ready {
        let states: BTreeSet<&str> = query.states.iter().map(|s| s.as_str()).collect();
        if let ClaimFilter::Stale { .. } = query.claim {
            // Beside the stale filter's `$nin` of the terminal states.
            and.push(doc! { field::STATE: { "$in": strings(states) } });
        } else {
            filter.insert(field::STATE, doc! { "$in": strings(states) });
        }
    }
    if !and.is_empty() {
        filter.insert("$and", and);
    }
    if let Some(run) = &query.author_run {
        filter.insert(field::AUTHOR_RUN, run.as_str());
    }
    if !query.priorities.is_empty() {
        let priorities: BTreeSet<&str> = query.priorities.iter().map(|p| p.as_str()).collect();
        filter.insert(field::PRIORITY, doc! { "$in": strings(priorities) });
    }
    if let Some(since) = query.updated_since {
        filter.insert(field::UPDATED_AT, doc! { "$gte": date(since) });
    }
    // Only with a floor: lists without one keep their index-bound shapes.
    if let Some(floor) = query.min_integrity {
        filter.insert(field::INTEGRITY, doc! { "$gte": floor.rank() });
    }
    if let Some(text) = &query.text {
        if text.chars().any(char::is_control) {
            return None;
        }
        if !text.is_empty() {
            // A case-sensitive match on the stored lower-cased title, not the
            // `i` option: the server's case folding and Rust's lower-casing
            // disagree outside ASCII, and the domain's reference is Rust's.
            filter.insert(
                field::TITLE_LOWER,
                doc! { "$regex": escape_regex(&text.to_lowercase()) },
            );
        }
    }
    match &query.labels {
        LabelFilter::None => {}
        LabelFilter::All(wanted) if wanted.is_empty() => {}
        LabelFilter::All(wanted) => {
            let wanted: BTreeSet<&str> = wanted.iter().map(|l| l.as_str()).collect();
            filter.insert(field::LABELS, doc! { "$all": strings(wanted) });
        }
        LabelFilter::Any(wanted) if wanted.is_empty() => return None,
        LabelFilter::Any(wanted) => {
            let wanted: BTreeSet<&str> = wanted.iter().map(|l| l.as_str()).collect();
            filter.insert(field::LABELS, doc! { "$in": strings(wanted) });
        }
    }
    Some(filter)
}

/// The filter of a search's candidates: the list filters, and every term
/// in one of the three word arrays (a prefix term as an anchored regex,
/// which a server answers from the array's index as a range of words).
/// `None` when no issue can match.
pub(crate) fn search_filter(query: &SearchQuery) -> Option<Document> {
    let mut filter = list_filter(&query.filter)?;
    let terms: Vec<Bson> = query
        .text
        .terms()
        .iter()
        .map(|term| {
            let any: Vec<Bson> = field::TERMS
                .iter()
                .map(|name| Bson::Document(doc! { *name: term_condition(term) }))
                .collect();
            Bson::Document(doc! { "$or": any })
        })
        .collect();
    // After the list filters' own `$and` conditions, if any.
    let mut and = match filter.remove("$and") {
        Some(Bson::Array(and)) => and,
        _ => Vec::new(),
    };
    and.extend(terms);
    filter.insert("$and", and);
    Some(filter)
}

/// The terminal states (`done`, `closed`), as a filter's `$nin` list.
pub(crate) const TERMINAL: [&str; 2] = ["done", "closed"];

/// The order of ready work (`corkboard_board::ready_order`): most urgent,
/// then oldest, then by id; the ready index's order.
pub(crate) fn ready_sort() -> Document {
    doc! { field::URGENCY: 1, field::CREATED_AT: 1, field::ID: 1 }
}

/// Ready work after the issue a cursor names, in [`ready_sort`]'s order.
pub(crate) fn ready_after(urgency: i64, created_at: Timestamp, id: &str) -> Document {
    let at = date(created_at);
    doc! { "$or": [
        { field::URGENCY: { "$gt": urgency } },
        { field::URGENCY: urgency, field::CREATED_AT: { "$gt": at } },
        { field::URGENCY: urgency, field::CREATED_AT: at, field::ID: { "$gt": id } },
    ] }
}

fn term_condition(term: &Term) -> Bson {
    if term.prefix {
        Bson::Document(doc! { "$regex": format!("^{}", escape_regex(&term.word)) })
    } else {
        Bson::String(term.word.clone())
    }
}

/// The filter of similar-title candidates: open issues whose title has
/// every word of `words` (`all`) or any of them.
pub(crate) fn similar_filter(words: &[String], all: bool) -> Document {
    let closed: Vec<Bson> = IssueState::ALL
        .into_iter()
        .filter(|s| !is_open(*s))
        .map(|s| Bson::from(s.as_str()))
        .collect();
    let words: Vec<Bson> = words.iter().map(|w| Bson::from(w.as_str())).collect();
    let op = if all { "$all" } else { "$in" };
    doc! {
        field::TERMS_TITLE: { op: words },
        field::STATE: { "$nin": closed },
    }
}

fn strings<'a>(values: impl IntoIterator<Item = &'a str>) -> Vec<Bson> {
    values.into_iter().map(Bson::from).collect()
}

/// `text` as a regular expression matching itself literally.
///
/// Only the metacharacters are escaped: every regex engine a
/// MongoDB-compatible server may use reads `\` before them as the literal
/// character, while `\` before other characters means different things in
/// different engines (PCRE's `\<` is `<`, other engines' is a word boundary).
pub(crate) fn escape_regex(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    for c in text.chars() {
        if "\\^$.|?*+()[]{}".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use corkboard_board::{IssueId, IssueState, Label, Priority, RunId, SearchText, Timestamp};

    #[test]
    fn no_filters_is_an_empty_filter() {
        assert_eq!(list_filter(&ListQuery::default()), Some(Document::new()));
    }

    #[test]
    fn every_filter_becomes_a_server_side_condition() {
        let cursor = IssueId::generate();
        let query = ListQuery {
            states: vec![IssueState::Todo, IssueState::Done, IssueState::Todo],
            labels: LabelFilter::All(vec![
                Label::parse("ui").unwrap(),
                Label::parse("bug").unwrap(),
            ]),
            text: Some("FlAky (x)".into()),
            author_run: Some(RunId::parse("r1").unwrap()),
            priorities: vec![Priority::Urgent, Priority::Low],
            updated_since: Some(Timestamp::from_millis(1234)),
            limit: 10,
            cursor: Some(cursor.clone()),
            ..ListQuery::default()
        };
        let filter = list_filter(&query).unwrap();
        assert_eq!(
            filter,
            doc! {
                "_id": { "$lt": cursor.as_str() },
                "state": { "$in": ["done", "todo"] },
                "author.run": "r1",
                "priority": { "$in": ["low", "urgent"] },
                "updated_at": { "$gte": mongodb::bson::DateTime::from_millis(1234) },
                "title_lower": { "$regex": "flaky \\(x\\)" },
                "labels": { "$all": ["bug", "ui"] },
            }
        );
    }

    #[test]
    fn parent_and_claim_filters_run_on_the_server() {
        let parent = IssueId::generate();
        let now = Timestamp::from_millis(5);
        let query = ListQuery {
            parent: Some(parent.clone()),
            claim: ClaimFilter::Unclaimed,
            ..ListQuery::default()
        };
        assert_eq!(
            list_filter_at(&query, now),
            Some(doc! {
                "parent": parent.as_str(),
                "$or": [{ "claim": Bson::Null }, { "claim.expires_at": { "$lte": date(now) } }],
            })
        );
        let mine = ListQuery {
            claim: ClaimFilter::ClaimedBy(RunId::parse("r1").unwrap()),
            ..ListQuery::default()
        };
        assert_eq!(
            list_filter_at(&mine, now),
            Some(doc! { "claim.run": "r1", "claim.expires_at": { "$gt": date(now) } })
        );
    }

    #[test]
    fn label_corners_agree_with_the_domain() {
        let all_none = ListQuery {
            labels: LabelFilter::All(Vec::new()),
            ..ListQuery::default()
        };
        assert_eq!(list_filter(&all_none), Some(Document::new()));
        let any_none = ListQuery {
            labels: LabelFilter::Any(Vec::new()),
            ..ListQuery::default()
        };
        assert_eq!(list_filter(&any_none), None);
        let any = ListQuery {
            labels: LabelFilter::Any(vec![Label::parse("ci").unwrap()]),
            ..ListQuery::default()
        };
        assert_eq!(
            list_filter(&any),
            Some(doc! { "labels": { "$in": ["ci"] } })
        );
    }

    #[test]
    fn text_with_control_characters_matches_nothing_and_empty_text_everything() {
        let control = ListQuery {
            text: Some("a\u{0}b".into()),
            ..ListQuery::default()
        };
        assert_eq!(list_filter(&control), None);
        let empty = ListQuery {
            text: Some(String::new()),
            ..ListQuery::default()
        };
        assert_eq!(list_filter(&empty), Some(Document::new()));
    }

    #[test]
    fn search_adds_one_condition_per_term_over_the_three_word_arrays() {
        let mut query = SearchQuery::new(SearchText::parse("Login ab.cd*").unwrap());
        query.filter.states = vec![IssueState::Todo];
        let filter = search_filter(&query).unwrap();
        let any = |cond: Bson| {
            doc! { "$or": [
                { "terms_title": cond.clone() },
                { "terms_body": cond.clone() },
                { "terms_comments": cond },
            ] }
        };
        // "ab.cd*" is the word "ab" and the prefix "cd".
        assert_eq!(
            filter,
            doc! {
                "state": { "$in": ["todo"] },
                "$and": [
                    any(Bson::from("ab")),
                    any(Bson::Document(doc! { "$regex": "^cd" })),
                    any(Bson::from("login")),
                ],
            }
        );
        let nothing = SearchQuery {
            filter: ListQuery {
                labels: LabelFilter::Any(Vec::new()),
                ..ListQuery::default()
            },
            ..query
        };
        assert_eq!(search_filter(&nothing), None);
    }

    #[test]
    fn regex_metacharacters_are_escaped_and_nothing_else() {
        assert_eq!(escape_regex(r"a.b*c\d"), r"a\.b\*c\\d");
        assert_eq!(escape_regex("[x]{2}^$|+?()"), r"\[x\]\{2\}\^\$\|\+\?\(\)");
        assert_eq!(escape_regex("<é> -#&~"), "<é> -#&~");
    }
}
