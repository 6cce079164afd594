//! The text block of every successful answer: the same result as the
//! structured JSON, rendered as compact plain text for a model that reads
//! only `content` (clients before 2025-06-18 have nothing else; Claude
//! Code reads `structuredContent` when present, so the structured JSON
//! must say everything on its own too). Ids, cursors and versions are
//! quoted exactly as in the JSON, so a model can copy them into its next
//! call. Works on the answer's JSON by field name: a field the domain
//! gains later is shown as `name: value` with no code here.

use corkboard_board::StatsPart;
use serde_json::Value;
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Fields [`issue_block`] shows in its own way; every other field is shown
/// as `name: value`.
const SHOWN: [&str; 23] = [
    "id",
    "title",
    "state",
    "priority",
    "labels",
    "author_run",
    "author",
    "version",
    "comment_count",
    "updated_at",
    "created_at",
    "excerpt",
    "excerpt_cut",
    "body",
    "body_truncated",
    "body_offset",
    "comments",
    "older_comments",
    "comments_cursor",
    "truncated",
    "tenant",
    "comment",
    "replayed",
];

/// A `list_issues` page: its head ([`page_head`]), then each issue's
/// [`item`] after a newline. The answers are assembled from those parts
/// (`result_budget::page`); this whole-page form is what tests check them
/// against.
#[cfg(test)]
pub(crate) fn page(page: &Value) -> String {
    let issues = page["issues"].as_array().map_or(&[][..], Vec::as_slice);
    let mut out = page_head(
        issues.len(),
        page["next_cursor"].as_str(),
        &page["truncated"],
    );
    for issue in issues {
        out.push('\n');
        out.push_str(&item(issue));
    }
    out
}

/// The lines a `list_issues` page starts with: how many issues, where the
/// next page is, what was cut; ends with a newline.
pub(crate) fn page_head(count: usize, next_cursor: Option<&str>, truncated: &Value) -> String {
    let mut out = format!("{count} issues on this page, newest first.");
    match next_cursor {
        Some(cursor) => {
            let _ = write!(
                out,
                " More: call list_issues with the same arguments and cursor=\"{cursor}\"."
            );
        }
        None => out.push_str(" This is the last page."),
    }
    truncation(&mut out, truncated);
    out.push('\n');
    out
}

/// A count as the text shows it: `10000+` when it stopped at its cap (its
/// part is in `at_least`), else the number (`board_stats`, `claim_next`).
pub(crate) fn count(n: u64, part: StatsPart, at_least: &BTreeSet<StatsPart>) -> String {
    let more = if at_least.contains(&part) { "+" } else { "" };
    format!("{n}{more}")
}

/// A `search_issues` answer: the hits, best first, each with its snippet.
pub(crate) fn hits(answer: &Value) -> String {
    let hits = answer["hits"].as_array().map_or(&[][..], Vec::as_slice);
    let mut out = format!("{} matching issues, best first.", hits.len());
    match answer["next_offset"].as_u64() {
        Some(offset) => {
            let _ = write!(
                out,
                " More: call search_issues with the same arguments and offset={offset}."
            );
        }
        None => out.push_str(" No more matches."),
    }
    if answer["partial"].as_bool() == Some(true) {
        out.push_str(
            " More issues matched than were ranked (the newest 1000): add words or filters.",
        );
    }
    truncation(&mut out, &answer["truncated"]);
    out.push('\n');
    for hit in hits {
        let _ = write!(
            out,
            "\n- {} [{}] {} (matched in the {}{})\n  {}",
            hit["id"].as_str().unwrap_or_default(),
            hit["state"].as_str().unwrap_or_default(),
            hit["title"].as_str().unwrap_or_default(),
            hit["field"].as_str().unwrap_or_default(),
            hit["comment"]
                .as_str()
                .map(|c| format!(" {c}"))
                .unwrap_or_default(),
            hit["snippet"].as_str().unwrap_or_default(),
        );
    }
    out
}

/// One issue of a page, as [`page`] writes it.
pub(crate) fn item(issue: &Value) -> String {
    let mut out = String::from("- ");
    issue_block(&mut out, issue, true);
    out
}

/// An answer about one issue (get_issue and the writes), after `headline`.
pub(crate) fn issue(answer: &Value, headline: &str) -> String {
    let mut out = format!("{headline}\n");
    truncation(&mut out, &answer["truncated"]);
    if answer.get("truncated").is_some_and(|t| !t.is_null()) {
        out.push('\n');
    }
    issue_block(&mut out, answer, false);
    if let Some(comment) = answer.get("comment").filter(|c| c.is_object()) {
        out.push_str("this call's comment:\n");
        comment_line(&mut out, comment);
    }
    if let Some(replayed) = answer.get("replayed") {
        let _ = writeln!(out, "replayed: {replayed}");
    }
    out
}

fn truncation(out: &mut String, truncated: &Value) {
    if let Some(how) = truncated.get("how").and_then(Value::as_str) {
        let reason = truncated["reason"].as_str().unwrap_or("result budget");
        let _ = write!(
            out,
            "\nCUT: {} {} left out ({reason}). {how}.",
            truncated["omitted_count"],
            truncated["omitted"].as_str().unwrap_or("items")
        );
    }
}

/// `item`: a list entry (its own cut is noted beside it; an answer about
/// one issue says so in its headline).
fn issue_block(out: &mut String, v: &Value, item: bool) {
    let Some(map) = v.as_object() else {
        out.push_str(&v.to_string());
        out.push('\n');
        return;
    };
    let text = |name: &str| map.get(name).and_then(Value::as_str).unwrap_or_default();
    // Written straight into `out`, no parts collected and joined: this
    // runs for every issue of every answer.
    out.push_str(text("id"));
    let mut tags = [text("state"), text("priority")]
        .into_iter()
        .filter(|t| !t.is_empty())
        .peekable();
    if tags.peek().is_some() {
        out.push_str(" [");
        list(out, tags, ", ");
        out.push(']');
    }
    if map.contains_key("title") {
        out.push(' ');
        out.push_str(text("title"));
    }
    out.push('\n');
    let mut facts = Facts::new(out);
    if let Some(labels) = map.get("labels").and_then(Value::as_array)
        && !labels.is_empty()
    {
        let out = facts.next("labels: ");
        list(out, labels.iter().filter_map(Value::as_str), ", ");
    }
    let run = map
        .get("author_run")
        .or_else(|| map.get("author").and_then(|a| a.get("run")))
        .and_then(Value::as_str);
    if let Some(run) = run {
        facts.next("by ").push_str(run);
    }
    if let Some(version) = map.get("version") {
        json(facts.next("version "), version);
    }
    if let Some(count) = map.get("comment_count") {
        let out = facts.next("");
        json(out, count);
        out.push_str(" comments");
    }
    for (name, label) in [("created_at", "created "), ("updated_at", "updated ")] {
        if map.contains_key(name) {
            facts.next(label).push_str(text(name));
        }
    }
    facts.end();
    for (name, value) in map {
        if !SHOWN.contains(&name.as_str()) {
            out.push_str("  ");
            out.push_str(name);
            out.push_str(": ");
            match value.as_str() {
                Some(shown) => out.push_str(shown),
                None => json(out, value),
            }
            out.push('\n');
        }
    }
    if map.contains_key("excerpt") {
        let cut = if map.contains_key("excerpt_cut") {
            " (excerpt; the whole body: include_body=true or get_issue)"
        } else {
            ""
        };
        let _ = writeln!(out, "  {}{cut}", text("excerpt"));
    }
    if map.contains_key("body") {
        match map.get("body_truncated").filter(|t| t.is_object()) {
            Some(cut) => {
                let _ = writeln!(
                    out,
                    "  body (CUT: bytes {}..{} of {}; {}):",
                    cut["offset"],
                    cut["next_offset"],
                    cut["total_bytes"],
                    cut["how"].as_str().unwrap_or_default()
                );
            }
            None => match map.get("body_offset") {
                Some(offset) => {
                    let _ = writeln!(out, "  body from byte {offset} to its end:");
                }
                None => out.push_str("  body:\n"),
            },
        }
        indented(out, text("body"), "    ");
    }
    if let Some(comments) = map.get("comments").and_then(Value::as_array) {
        let older = map
            .get("older_comments")
            .and_then(Value::as_u64)
            .unwrap_or(0);
        let _ = write!(out, "  comments shown: {}", comments.len());
        if older > 0 {
            let _ = write!(
                out,
                "; {older} older: get_issue with id=\"{}\" and comments_before={}",
                text("id"),
                map.get("comments_cursor").unwrap_or(&Value::Null)
            );
        }
        out.push('\n');
        for comment in comments {
            comment_line(out, comment);
        }
    }
    if item && let Some(truncated) = map.get("truncated") {
        // An item of a list cut to fit: say so beside it.
        let mut note = String::new();
        truncation(&mut note, truncated);
        if !note.is_empty() {
            let _ = writeln!(out, "  {}", note.trim());
        }
    }
}

/// One comment: its id, author and time, then its body, indented.
pub(crate) fn comment_line(out: &mut String, comment: &Value) {
    let field = |name: &str| {
        comment
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let run = comment
        .get("author")
        .and_then(|a| a.get("run"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    let _ = write!(
        out,
        "  - {} by {run} at {}",
        field("id"),
        field("created_at")
    );
    if let Some(cut) = comment.get("body_truncated").filter(|t| t.is_object()) {
        let _ = write!(
            out,
            " (CUT to {} of {} bytes; {})",
            cut["kept_bytes"],
            cut["total_bytes"],
            cut["how"].as_str().unwrap_or_default()
        );
    }
    out.push_str(":\n");
    indented(out, field("body"), "    ");
}

/// The facts line of an issue block: `  a · b · c` and its newline, or
/// nothing when there is no fact.
struct Facts<'o> {
    out: &'o mut String,
    any: bool,
}

impl<'o> Facts<'o> {
    fn new(out: &'o mut String) -> Self {
        Self { out, any: false }
    }

    /// Starts the next fact with `lead` and gives the line to finish it.
    fn next(&mut self, lead: &str) -> &mut String {
        self.out.push_str(if self.any { " · " } else { "  " });
        self.any = true;
        self.out.push_str(lead);
        self.out
    }

    fn end(self) {
        if self.any {
            self.out.push('\n');
        }
    }
}

/// `items` separated by `separator`.
fn list<'i>(out: &mut String, items: impl Iterator<Item = &'i str>, separator: &str) {
    for (i, item) in items.enumerate() {
        if i > 0 {
            out.push_str(separator);
        }
        out.push_str(item);
    }
}

/// `value` as compact JSON (what its `Display` writes, without the
/// formatter's detour).
fn json(out: &mut String, value: &Value) {
    match serde_json::to_string(value) {
        Ok(json) => out.push_str(&json),
        Err(_) => out.push_str("null"),
    }
}

fn indented(out: &mut String, text: &str, prefix: &str) {
    for line in text.lines() {
        out.push_str(prefix);
        out.push_str(line);
        out.push('\n');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Map, json};

    fn keys(map: &Map<String, Value>) -> Vec<&str> {
        map.keys().map(String::as_str).collect()
    }

    #[test]
    fn a_count_that_stopped_at_its_cap_shows_a_plus() {
        let at_least = BTreeSet::from([StatsPart::Claimed]);
        assert_eq!(count(10_000, StatsPart::Claimed, &at_least), "10000+");
        assert_eq!(count(7, StatsPart::Blocked, &at_least), "7");
    }

    #[test]
    fn a_page_names_every_id_and_how_to_go_on() {
        let page_json = json!({
            "issues": [
                { "id": "iss_A", "title": "First", "state": "todo", "priority": "high",
                  "labels": ["bug", "ci"], "author_run": "run-1", "version": 3,
                  "comment_count": 2, "updated_at": "2026-11-30T00:00:00Z",
                  "excerpt": "Steps to…", "excerpt_cut": true,
                  "claim": { "run": "run-9" } },
                { "id": "iss_B", "title": "Second", "state": "inbox", "priority": "none",
                  "labels": [], "author_run": "run-2", "version": 1, "comment_count": 0,
                  "updated_at": "2026-11-30T00:00:00Z", "excerpt": "" },
            ],
            "next_cursor": "iss_B",
            "truncated": { "reason": "results are limited to 32000 bytes", "omitted_count": 3,
                           "omitted": "issues", "how": "call list_issues with cursor=\"iss_B\"" },
        });
        let text = page(&page_json);
        assert!(text.starts_with("2 issues on this page"), "{text}");
        assert!(text.contains("cursor=\"iss_B\""), "{text}");
        assert!(text.contains("CUT: 3 issues left out"), "{text}");
        assert!(text.contains("- iss_A [todo, high] First\n"), "{text}");
        assert!(
            text.contains("labels: bug, ci · by run-1 · version 3 · 2 comments"),
            "{text}"
        );
        assert!(text.contains("claim: {\"run\":\"run-9\"}"), "{text}");
        assert!(text.contains("include_body=true"), "{text}");
        assert!(text.contains("- iss_B [inbox, none] Second\n"), "{text}");
        assert_eq!(
            keys(page_json.as_object().unwrap()),
            ["issues", "next_cursor", "truncated"]
        );
    }

    #[test]
    fn an_issue_shows_its_body_and_the_way_to_older_comments() {
        let answer = json!({
            "id": "iss_A", "title": "T", "state": "todo", "priority": "low", "labels": [],
            "author": { "run": "run-1", "grant": null }, "version": 9, "comment_count": 12,
            "created_at": "c", "updated_at": "u", "tenant": "acme",
            "body": "line one\nline two",
            "comments": [{ "id": "cmt_1", "body": "hello\nthere", "author": { "run": "run-3" },
                           "created_at": "t" }],
            "older_comments": 11, "comments_cursor": "cmt_1",
        });
        let text = issue(&answer, "get_issue: iss_A");
        assert!(
            text.starts_with("get_issue: iss_A\niss_A [todo, low] T\n"),
            "{text}"
        );
        assert!(text.contains("    line one\n    line two\n"), "{text}");
        assert!(
            text.contains("11 older: get_issue with id=\"iss_A\" and comments_before=\"cmt_1\""),
            "{text}"
        );
        assert!(
            text.contains("  - cmt_1 by run-3 at t:\n    hello\n    there\n"),
            "{text}"
        );
    }
}
