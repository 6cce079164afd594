//! The byte budget of every tool result, and the one cutter that keeps an
//! answer within it. This is the size of one answer (`max_result_bytes`),
//! not a run's write budgets (`BoardTools::budgeted`, the grant's
//! `budgets`), which count writes.
//!
//! What counts: the structured JSON plus the text block as they go on the
//! wire (the text JSON-escaped), plus [`ENVELOPE_BYTES`] for what the MCP
//! renderer wraps around them (`content`, `isError`, `resultType`,
//! `_meta`). That is the whole `result` of the `tools/call` response in
//! every revision, the larger of what a client reads (`structuredContent`
//! or `content`) and what it receives.
//!
//! An answer over budget is cut at an item boundary, never in the middle
//! of a JSON value, and says so where it was cut: a list page ends early
//! (its `next_cursor` then continues after the last issue shown) with a
//! page-level `truncated`; an issue drops its oldest comments (keeping the
//! newest, `comments_cursor` reaching the rest) with an issue-level
//! `truncated`; a body too long for any answer is shortened and carries
//! `body_truncated` with the offset to read on from.

use crate::render;
use crate::view;
use corkboard_mcp::{StructuredContent, TextContent};
use serde_json::{Map, Value, json};

/// Bytes of one tool result when the operator does not choose:
/// about 8,000 tokens at 4 bytes a token, under the 10,000 tokens at which
/// Claude Code warns about an MCP result.
pub const DEFAULT_RESULT_BUDGET: usize = 32_000;

/// The smallest budget that holds any one issue summary whole (a title of
/// 200 characters, 20 labels of 50, escaped, twice) with room to spare.
pub const MIN_RESULT_BUDGET: usize = 16_384;

/// What the MCP renderer adds around the structured JSON and the text (the
/// `content` array, `isError`, and from 2026-07-28 `resultType` and the
/// server's `_meta`), rounded up.
pub const ENVELOPE_BYTES: usize = 512;

/// A successful answer: its structured result and its text block. The
/// structured JSON is serialised once, here when the answer is measured,
/// and the renderer sends that same string; the text is escaped once, by
/// the renderer, and a kept answer keeps it so.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub structured: StructuredContent,
    pub text: TextContent,
}

impl Answer {
    pub fn new(structured: Value, text: String) -> Self {
        Self {
            structured: structured.into(),
            text: text.into(),
        }
    }

    /// The bytes this answer costs against the budget.
    pub fn size(&self) -> usize {
        self.structured.json().len() + string_len(&self.text) + ENVELOPE_BYTES
    }
}

/// Bytes of `value` as compact JSON.
pub(crate) fn json_len(value: &Value) -> usize {
    let mut counter = Counter(0);
    // Writing into a counter cannot fail.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}

/// Bytes of `text` as a JSON string, quotes and escapes included, as
/// serde_json writes it (the renderer's writer): `"` and `\` take two
/// bytes, control characters two (`\b \t \n \f \r`) or six (`\u00XX`),
/// every other byte one. Counted without writing: the text block is
/// written once, by the renderer.
fn string_len(text: &str) -> usize {
    2 + text
        .bytes()
        .map(|byte| match byte {
            b'"' | b'\\' | 0x08 | b'\t' | b'\n' | 0x0C | b'\r' => 2,
            0x00..=0x1F => 6,
            _ => 1,
        })
        .sum::<usize>()
}

struct Counter(usize);

impl std::io::Write for Counter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn reason(budget: usize) -> String {
    format!(
        "one result is limited to {budget} bytes, about {} tokens (max_result_bytes)",
        budget / 4
    )
}

/// A `list_issues` page of `items` (summaries), `next_cursor` as the
/// store gave it, within `budget`.
///
/// Each item's text is rendered once ([`render::item`]) and serves the
/// whole page and any cut of it. A page over budget (common: a default
/// page of 50 issues with excerpts is larger than the default budget) is
/// cut at the most issues that fit, found from each issue's exact bytes
/// ([`PageCost`]) rather than by rendering and measuring candidate pages.
pub(crate) fn page(mut items: Vec<Value>, next_cursor: Option<String>, budget: usize) -> Answer {
    let texts: Vec<String> = items.iter().map(render::item).collect();
    let cost = PageCost::new(&items, &texts);
    let total = items.len();
    let first = |shown: usize| cost.first(&items, shown, &next_cursor, budget);
    // The most issues that fit: all of them, or the first few, found by
    // halving. `first` grows with `shown`: each issue adds its own JSON
    // and text (tens of bytes at the least), while what else changes (the
    // note's count of those left out, the head's count, the cursor, an id
    // like the issue's own) changes by a few bytes at most.
    let fit = if first(total) <= budget {
        total
    } else {
        // `fits` fits (none always does), `over` does not.
        let (mut fits, mut over) = (0, total);
        while over - fits > 1 {
            let mid = fits + (over - fits) / 2;
            if first(mid) <= budget {
                fits = mid;
            } else {
                over = mid;
            }
        }
        fits
    };
    if fit == 0 && total > 0 {
        // The first issue alone is over: shrink it (comments, then its
        // body).
        let mut first = items.swap_remove(0);
        if let Value::Object(map) = &mut first {
            shrink(map, budget, &|map: &Map<String, Value>| {
                cut_page(&[Value::Object(map.clone())], total, &next_cursor, budget).size()
            });
        }
        return cut_page(&[first], total, &next_cursor, budget);
    }
    let predicted = first(fit);
    let (cursor, note) = ending(&items[..fit], total, &next_cursor, budget);
    items.truncate(fit);
    let answer = assemble(items, &texts[..fit], cursor, note);
    debug_assert_eq!(
        answer.size(),
        predicted,
        "a page's size is the sum of its parts"
    );
    answer
}

/// The bytes each issue of a page adds to its answer, so the size of the
/// answer showing the first `n` is a sum: the JSON of an empty page with
/// the same cursor and note, plus each issue's JSON and a comma between
/// them; the text's head as a JSON string, plus each issue's text after
/// its newline (escaping is byte by byte, so the escaped parts add up);
/// plus [`ENVELOPE_BYTES`].
struct PageCost {
    /// Per issue: its compact JSON plus the comma before the next, and its
    /// text with the newline before it, as escaped in the JSON string.
    per_item: Vec<usize>,
}

impl PageCost {
    fn new(items: &[Value], texts: &[String]) -> Self {
        let per_item = items
            .iter()
            .zip(texts)
            // `string_len` counts two quotes; the newline before the
            // item escapes to two bytes in their place.
            .map(|(item, text)| json_len(item) + 1 + string_len(text))
            .collect();
        Self { per_item }
    }

    /// The size of the answer showing the first `shown` of `items`, with
    /// the cursor and note of a page ending there ([`ending`]).
    fn first(
        &self,
        items: &[Value],
        shown: usize,
        next_cursor: &Option<String>,
        budget: usize,
    ) -> usize {
        let (cursor, note) = ending(&items[..shown], items.len(), next_cursor, budget);
        let head = render::page_head(shown, cursor.as_deref(), &note);
        let empty = json!({ "issues": [], "next_cursor": cursor, "truncated": note });
        // `shown` issues have `shown - 1` commas between them.
        let items = self.per_item[..shown]
            .iter()
            .sum::<usize>()
            .saturating_sub(1);
        ENVELOPE_BYTES + json_len(&empty) + string_len(&head) + items
    }
}

/// The cursor and note of a page showing `shown` of `total` issues: when
/// it ends early, its cursor continues after the last issue shown and a
/// note says so; otherwise the store's cursor and no note.
fn ending(
    shown: &[Value],
    total: usize,
    next_cursor: &Option<String>,
    budget: usize,
) -> (Option<String>, Value) {
    match shown.last().and_then(id_of) {
        Some(last) if total > shown.len() => {
            let note = page_note(budget, total - shown.len(), &last);
            (Some(last), note)
        }
        _ => (next_cursor.clone(), Value::Null),
    }
}

/// A page answer from its items and their rendered texts ([`render::item`]
/// each, after the page's head).
fn assemble(
    items: Vec<Value>,
    texts: &[String],
    next_cursor: Option<String>,
    truncated: Value,
) -> Answer {
    let mut text = render::page_head(texts.len(), next_cursor.as_deref(), &truncated);
    text.reserve(texts.iter().map(|t| t.len() + 1).sum());
    for item in texts {
        text.push('\n');
        text.push_str(item);
    }
    let structured = object([
        ("issues", Value::Array(items)),
        (
            "next_cursor",
            next_cursor.map_or(Value::Null, Value::String),
        ),
        ("truncated", truncated),
    ]);
    Answer::new(structured, text)
}

/// An object of `members`, moved in. `json!` would serialise each member
/// into a copy of itself (it takes them by reference): for a page, every
/// issue's JSON a second time.
fn object<const N: usize>(members: [(&str, Value); N]) -> Value {
    Value::Object(
        members
            .into_iter()
            .map(|(name, value)| (name.to_owned(), value))
            .collect(),
    )
}

/// The first `shown` of a page of `total` issues, rendered whole (the
/// shrinking of one issue too large for any page measures with it).
fn cut_page(shown: &[Value], total: usize, next_cursor: &Option<String>, budget: usize) -> Answer {
    let (cursor, note) = ending(shown, total, next_cursor, budget);
    let texts: Vec<String> = shown.iter().map(render::item).collect();
    assemble(shown.to_vec(), &texts, cursor, note)
}

fn page_note(budget: usize, omitted: usize, cursor: &str) -> Value {
    json!({
        "reason": reason(budget),
        "omitted_count": omitted,
        "omitted": "issues",
        "how": format!(
            "call list_issues again with the same arguments and cursor=\"{cursor}\" for them \
             (and the pages after), or ask for fewer fields"
        ),
    })
}

fn id_of(item: &Value) -> Option<String> {
    item.get("id").and_then(Value::as_str).map(str::to_owned)
}

/// A `search_issues` answer within `budget`: hits are dropped from the
/// end (the lowest ranked) until it fits, and then `next_offset` continues
/// right after the last hit shown and `truncated` says how many were left.
pub(crate) fn hits(
    mut hits: Vec<Value>,
    offset: u32,
    next_offset: Option<u32>,
    partial: bool,
    budget: usize,
) -> Answer {
    let total = hits.len();
    loop {
        let shown = hits.len();
        let omitted = total - shown;
        let (next, note) = if omitted > 0 {
            let next = offset.saturating_add(u32::try_from(shown).unwrap_or(u32::MAX));
            let note = json!({
                "reason": reason(budget),
                "omitted_count": omitted,
                "omitted": "issues",
                "how": format!(
                    "call search_issues again with the same arguments and offset={next} for them"
                ),
            });
            (Some(next), note)
        } else {
            (next_offset, Value::Null)
        };
        let structured = object([
            ("hits", Value::Array(hits)),
            ("next_offset", next.map_or(Value::Null, Value::from)),
            ("partial", Value::Bool(partial)),
            ("truncated", note),
        ]);
        let text = render::hits(&structured);
        let answer = Answer::new(structured, text);
        // Every hit is small (a summary and a snippet), so one always fits.
        if answer.size() <= budget || shown <= 1 {
            return answer;
        }
        // The hits back from the answer (an array, built above), less the
        // lowest ranked.
        hits = match answer.structured.into_value()["hits"].take() {
            Value::Array(hits) => hits,
            _ => Vec::new(),
        };
        hits.truncate(shown - 1);
    }
}

/// An answer about one issue (`value`: its JSON as `view::issue` shaped
/// it, perhaps with more members), within `budget`; `headline` starts its
/// text.
pub(crate) fn issue(value: Value, headline: &str, budget: usize) -> Answer {
    let build = |structured: Value| {
        let text = render::issue(&structured, headline);
        Answer::new(structured, text)
    };
    let answer = build(value);
    if answer.size() <= budget {
        return answer;
    }
    let Answer { structured, text } = answer;
    let mut map = match structured.into_value() {
        Value::Object(map) => map,
        other => return Answer::new(other, text.into_string()),
    };
    shrink(&mut map, budget, &|map: &Map<String, Value>| {
        build(Value::Object(map.clone())).size()
    });
    build(Value::Object(map))
}

/// Makes an issue-like object cost at most `budget` as `measure` counts
/// it: first its oldest comments go (the newest stays), then its body is
/// shortened, then the kept comment's body. Each cut is recorded on the
/// object itself.
fn shrink(
    map: &mut Map<String, Value>,
    budget: usize,
    measure: &dyn Fn(&Map<String, Value>) -> usize,
) {
    let id = map
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let over = measure(map).saturating_sub(budget);
    if over == 0 {
        return;
    }
    // 1. The oldest comments, estimated from each one's own cost.
    if let Some(Value::Array(comments)) = map.get("comments")
        && comments.len() > 1
    {
        let mut dropped = 0;
        let mut freed = 0;
        for comment in &comments[..comments.len() - 1] {
            if freed >= over {
                break;
            }
            let mut text = String::new();
            render::comment_line(&mut text, comment);
            freed += json_len(comment) + 1 + text.len();
            dropped += 1;
        }
        drop_comments(map, dropped, budget, &id);
        // Step back while the estimate was short.
        loop {
            let shown = map
                .get("comments")
                .and_then(Value::as_array)
                .map_or(0, Vec::len);
            if measure(map) <= budget || shown <= 1 {
                break;
            }
            drop_comments(map, 1, budget, &id);
        }
    }
    // 2. The body.
    if measure(map) > budget {
        cut_body(map, budget, measure, &id);
    }
    // 3. The body of the one comment kept.
    if measure(map) > budget {
        let kept = map
            .get("comments")
            .and_then(Value::as_array)
            .is_some_and(|c| !c.is_empty());
        if kept {
            cut_comment_body(map, budget, measure, &id);
        }
    }
}

/// Drops the `n` oldest comments shown and says so.
fn drop_comments(map: &mut Map<String, Value>, n: usize, budget: usize, id: &str) {
    if n == 0 {
        return;
    }
    if let Some(Value::Array(comments)) = map.get_mut("comments") {
        comments.drain(..n.min(comments.len()));
    }
    let older = map
        .get("older_comments")
        .and_then(Value::as_u64)
        .unwrap_or(0) as usize;
    view::set_older(map, older + n);
    note_omitted(map, n, budget, id);
}

/// Says in an issue answer (`value`, as `view::windowed_issue` shaped it)
/// that the store left out `n` comments its window's limit would have
/// shown, because their bodies exceed `budget` (its byte bound): the same
/// `truncated` note as when the budget cuts them here, so an answer reads
/// alike whichever of the two cut (they are counted in `older_comments`
/// already).
pub(crate) fn comments_cut(value: &mut Value, n: usize, budget: usize) {
    let Value::Object(map) = value else {
        return;
    };
    let id = map
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    note_omitted(map, n, budget, &id);
}

/// Records in `truncated` that `n` more comments were left out.
fn note_omitted(map: &mut Map<String, Value>, n: usize, budget: usize, id: &str) {
    let omitted = map
        .get("truncated")
        .and_then(|t| t.get("omitted_count"))
        .and_then(Value::as_u64)
        .unwrap_or(0) as usize
        + n;
    let cursor = map.get("comments_cursor").cloned().unwrap_or(Value::Null);
    map.insert(
        "truncated".to_owned(),
        json!({
            "reason": reason(budget),
            "omitted_count": omitted,
            "omitted": "comments",
            "how": format!(
                "call get_issue with id=\"{id}\" and comments_before={cursor} for the older \
                 comments (comments_limit sets how many per answer)"
            ),
        }),
    );
}

/// The longest prefix of `text` (at a char boundary) for which `fits`
/// holds, by binary search over its length.
fn longest_prefix(text: &str, fits: &dyn Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, text.len());
    while lo < hi {
        let mid = floor_boundary(text, lo + (hi - lo).div_ceil(2));
        if mid <= lo {
            // No boundary between lo and hi other than lo: try hi itself.
            if fits(hi) && text.is_char_boundary(hi) {
                lo = hi;
            }
            break;
        }
        if fits(mid) {
            lo = mid;
        } else {
            hi = floor_boundary(text, mid - 1);
        }
    }
    lo
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn cut_body(
    map: &mut Map<String, Value>,
    budget: usize,
    measure: &dyn Fn(&Map<String, Value>) -> usize,
    id: &str,
) {
    let Some(Value::String(body)) = map.get("body").cloned() else {
        return;
    };
    // The body may already start at an offset (get_issue's body_offset).
    let offset = map.get("body_offset").and_then(Value::as_u64).unwrap_or(0) as usize;
    let total = offset + body.len();
    let with = |kept: usize| {
        let mut map = map.clone();
        map.insert("body".to_owned(), Value::String(body[..kept].to_owned()));
        map.insert(
            "body_truncated".to_owned(),
            json!({
                "reason": reason(budget),
                "offset": offset,
                "kept_bytes": kept,
                "next_offset": offset + kept,
                "total_bytes": total,
                "how": format!(
                    "call get_issue with id=\"{id}\" and body_offset={} for the rest of the body",
                    offset + kept
                ),
            }),
        );
        map
    };
    let kept = longest_prefix(&body, &|kept| measure(&with(kept)) <= budget);
    *map = with(kept);
}

fn cut_comment_body(
    map: &mut Map<String, Value>,
    budget: usize,
    measure: &dyn Fn(&Map<String, Value>) -> usize,
    id: &str,
) {
    let Some(Value::Array(comments)) = map.get("comments") else {
        return;
    };
    let Some(body) = comments[0]
        .get("body")
        .and_then(Value::as_str)
        .map(str::to_owned)
    else {
        return;
    };
    let tenant_note = format!(
        "a comment this long does not fit in one result: read it whole on the web board or \
         through the admin API (GET /v1/tenants/{{tenant}}/issues/{id})"
    );
    let with = |kept: usize| {
        let mut map = map.clone();
        if let Some(Value::Array(comments)) = map.get_mut("comments")
            && let Some(Value::Object(comment)) = comments.get_mut(0)
        {
            comment.insert("body".to_owned(), Value::String(body[..kept].to_owned()));
            comment.insert(
                "body_truncated".to_owned(),
                json!({
                    "reason": reason(budget),
                    "kept_bytes": kept,
                    "total_bytes": body.len(),
                    "how": tenant_note,
                }),
            );
        }
        map
    };
    let kept = longest_prefix(&body, &|kept| measure(&with(kept)) <= budget);
    *map = with(kept);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary(i: usize, excerpt_len: usize) -> Value {
        json!({
            "id": format!("iss_{i:026}"),
            "title": format!("Issue number {i}"),
            "state": "todo",
            "labels": ["bug"],
            "priority": "low",
            "author_run": "run-1",
            "updated_at": "2026-11-30T00:00:00Z",
            "version": 4,
            "comment_count": 3,
            "excerpt": "x".repeat(excerpt_len),
        })
    }

    fn comment(i: usize, len: usize) -> Value {
        json!({
            "id": format!("cmt_{i:026}"),
            "body": "c".repeat(len),
            "author": { "run": "run-2", "grant": null },
            "created_at": "2026-11-30T00:00:00Z",
        })
    }

    #[test]
    fn a_page_that_fits_is_untouched() {
        let items: Vec<Value> = (0..3).map(|i| summary(i, 50)).collect();
        let answer = page(items.clone(), Some("iss_x".into()), DEFAULT_RESULT_BUDGET);
        assert_eq!(answer.structured["issues"], json!(items));
        assert_eq!(answer.structured["next_cursor"], "iss_x");
        assert_eq!(answer.structured["truncated"], Value::Null);
    }

    #[test]
    fn a_page_over_budget_ends_early_and_says_where_to_go_on() {
        let items: Vec<Value> = (0..200).map(|i| summary(i, 150)).collect();
        let budget = 20_000;
        let answer = page(items.clone(), None, budget);
        assert!(answer.size() <= budget, "{}", answer.size());
        let shown = answer.structured["issues"].as_array().unwrap();
        assert!(shown.len() > 10 && shown.len() < 200, "{}", shown.len());
        assert_eq!(shown[..], items[..shown.len()]);
        let last = shown.last().unwrap()["id"].clone();
        assert_eq!(answer.structured["next_cursor"], last);
        let cut = &answer.structured["truncated"];
        assert_eq!(cut["omitted_count"], 200 - shown.len());
        assert_eq!(cut["omitted"], "issues");
        assert!(
            cut["how"]
                .as_str()
                .unwrap()
                .contains(last.as_str().unwrap())
        );
        assert!(answer.text.contains(last.as_str().unwrap()));
        // Filled close to the budget, not cut far short of it.
        assert!(answer.size() > budget - 2_000, "{}", answer.size());
    }

    #[test]
    fn a_cut_page_holds_the_most_issues_that_fit_and_its_text_is_the_renderers() {
        // Texts that escape (quotes, backslashes, newlines, control and
        // multi-byte characters) and issues of different sizes.
        let items: Vec<Value> = (0..60)
            .map(|i| {
                let mut item = summary(i, 40 + (i * 37) % 300);
                item["title"] = json!(format!(
                    "\"Quoted\" \\ {i}\n\u{1}\u{7f} é ✓ {}",
                    "t".repeat(i % 7)
                ));
                item["excerpt"] = json!(format!("line one\nline\ttwo {}", "x".repeat(i * 3)));
                item
            })
            .collect();
        for budget in [MIN_RESULT_BUDGET, 20_000, DEFAULT_RESULT_BUDGET] {
            let answer = page(items.clone(), Some("iss_next".into()), budget);
            let shown = answer.structured["issues"].as_array().unwrap().len();
            assert!(answer.size() <= budget, "{budget}: {}", answer.size());
            assert!(
                shown < items.len(),
                "{budget}: the page is over every budget"
            );
            assert_eq!(answer.text, render::page(&answer.structured), "{budget}");
            // One more issue would not fit.
            let more = cut_page(&items[..=shown], items.len(), &None, budget);
            assert!(
                more.size() > budget,
                "{budget}: {shown} could have been {}",
                shown + 1
            );
        }
        // A page that fits is whole, with the store's cursor.
        let answer = page(items[..3].to_vec(), Some("iss_next".into()), 40_000);
        assert_eq!(answer.structured["issues"], json!(items[..3]));
        assert_eq!(answer.structured["next_cursor"], "iss_next");
        assert_eq!(answer.text, render::page(&answer.structured));
    }

    #[test]
    fn search_hits_over_budget_drop_the_lowest_ranked_and_say_where_to_go_on() {
        let hit = |i: usize| {
            let mut hit = summary(i, 200);
            hit["snippet"] = json!(format!("snippet {i}"));
            hit
        };
        let all: Vec<Value> = (0..100).map(hit).collect();
        // Fits: every hit, the store's next offset, no note.
        let few = hits(
            all[..3].to_vec(),
            40,
            Some(43),
            false,
            DEFAULT_RESULT_BUDGET,
        );
        assert_eq!(few.structured["hits"], json!(all[..3]));
        assert_eq!(few.structured["next_offset"], 43);
        assert_eq!(few.structured["truncated"], Value::Null);
        assert_eq!(few.text, render::hits(&few.structured));
        // Over: the best first, up to the most that fit.
        let budget = 20_000;
        let cut = hits(all.clone(), 40, Some(140), true, budget);
        assert!(cut.size() <= budget, "{}", cut.size());
        let shown = cut.structured["hits"].as_array().unwrap().len();
        assert!(shown > 10 && shown < 100, "{shown}");
        assert_eq!(cut.structured["hits"], json!(all[..shown]));
        assert_eq!(cut.structured["next_offset"], 40 + shown);
        assert_eq!(cut.structured["partial"], true);
        let note = &cut.structured["truncated"];
        assert_eq!(note["omitted_count"], 100 - shown);
        assert!(
            note["how"]
                .as_str()
                .unwrap()
                .contains(&format!("offset={}", 40 + shown))
        );
        assert_eq!(cut.text, render::hits(&cut.structured));
        // Filled: less than two hits' room is left.
        let room = budget - cut.size();
        assert!(
            room < 2 * (json_len(&all[0]) + all[0].to_string().len()),
            "{room}"
        );
    }

    #[test]
    fn an_issue_over_budget_keeps_its_newest_comments_and_says_how_to_get_the_rest() {
        let comments: Vec<Value> = (0..40).map(|i| comment(i, 1_000)).collect();
        let mut value = json!({
            "id": "iss_A", "title": "T", "body": "b", "version": 2,
            "comments": comments, "comment_count": 45,
        });
        view::set_older(value.as_object_mut().unwrap(), 5);
        let budget = DEFAULT_RESULT_BUDGET;
        let answer = issue(value, "get_issue: iss_A", budget);
        assert!(answer.size() <= budget, "{}", answer.size());
        let shown = answer.structured["comments"].as_array().unwrap();
        assert!(shown.len() > 5 && shown.len() < 40, "{}", shown.len());
        assert_eq!(shown.last().unwrap()["id"], comment(39, 0)["id"]);
        let older = 45 - shown.len();
        assert_eq!(answer.structured["older_comments"], older);
        assert_eq!(answer.structured["comments_cursor"], shown[0]["id"]);
        let cut = &answer.structured["truncated"];
        assert_eq!(cut["omitted_count"], 40 - shown.len());
        assert!(cut["how"].as_str().unwrap().contains("comments_before="));
        assert!(answer.text.contains("CUT:"), "{}", answer.text);
    }

    #[test]
    fn a_body_longer_than_the_budget_is_cut_at_a_char_boundary_with_its_offset() {
        let body = "é".repeat(30_000);
        let value = json!({ "id": "iss_A", "title": "T", "body": body, "comments": [] });
        let budget = MIN_RESULT_BUDGET;
        let answer = issue(value, "get_issue: iss_A", budget);
        assert!(answer.size() <= budget, "{}", answer.size());
        let cut = &answer.structured["body_truncated"];
        let kept = cut["kept_bytes"].as_u64().unwrap() as usize;
        assert_eq!(answer.structured["body"].as_str().unwrap().len(), kept);
        assert!(kept > 1_000 && kept.is_multiple_of(2), "{kept}");
        assert_eq!(cut["next_offset"], kept);
        assert_eq!(cut["total_bytes"], body.len());
        assert!(
            cut["how"]
                .as_str()
                .unwrap()
                .contains(&format!("body_offset={kept}"))
        );
        // Close to the budget: the search found the longest prefix.
        assert!(answer.size() > budget - 64, "{}", answer.size());
    }

    #[test]
    fn one_huge_issue_on_a_page_is_shrunk_not_dropped() {
        let mut big = summary(0, 10);
        big["comments"] = json!((0..20).map(|i| comment(i, 5_000)).collect::<Vec<_>>());
        view::set_older(big.as_object_mut().unwrap(), 0);
        let items = vec![big, summary(1, 10)];
        let budget = 20_000;
        let answer = page(items, None, budget);
        assert!(answer.size() <= budget, "{}", answer.size());
        let shown = answer.structured["issues"].as_array().unwrap();
        assert_eq!(shown.len(), 1);
        assert_eq!(answer.structured["next_cursor"], shown[0]["id"]);
        assert_eq!(answer.structured["truncated"]["omitted_count"], 1);
        assert_eq!(shown[0]["truncated"]["omitted"], "comments");
        assert!(shown[0]["comments_cursor"].is_string());
    }

    #[test]
    fn sizes_count_both_blocks_and_the_envelope() {
        let answer = Answer::new(json!({ "a": "\"" }), "x\n".into());
        assert_eq!(
            answer.size(),
            r#"{"a":"\""}"#.len() + r#""x\n""#.len() + ENVELOPE_BYTES
        );
    }

    #[test]
    fn a_text_is_counted_as_serde_json_writes_it() {
        let mut every_ascii: String = (0u8..=0x7F).map(char::from).collect();
        every_ascii.push_str("é€😀\u{2028}");
        for text in [
            every_ascii.as_str(),
            "",
            "plain",
            "\"quoted\" \\ back",
            "line\nbreak\ttab\r\u{0}\u{1f}",
        ] {
            let written = serde_json::to_string(text).unwrap().len();
            assert_eq!(string_len(text), written, "{text:?}");
        }
    }

    #[test]
    fn the_answer_is_serialised_once_and_kept() {
        let answer = Answer::new(json!({ "id": "iss_x", "n": 1 }), "t".into());
        let counted = answer.structured.json().as_ptr();
        assert_eq!(
            answer.structured.json().as_ptr(),
            counted,
            "serialised once"
        );
        assert_eq!(answer.structured.json(), r#"{"id":"iss_x","n":1}"#);
    }
}
