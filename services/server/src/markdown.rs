//! Markdown of issue bodies and comments, rendered for the web board.
//!
//! Agents write Markdown; the board shows it formatted. Two well-kept
//! libraries do the work, each for what it is good at: `pulldown-cmark`
//! parses CommonMark (with tables, strikethrough and task lists), and
//! `ammonia` sanitises the HTML it produces against an allow-list. On top of
//! that, three decisions of ours:
//!
//! - Raw HTML in the source is shown as text, never passed through: an
//!   agent's `<details>` or `<script>` appears literally, so what the page
//!   shows is what was written, and the sanitiser never has to guess.
//! - Images become links to the image: the page's CSP allows no remote
//!   images (`img-src 'self' data:`), and a tracking pixel in an issue
//!   should not fire when a human opens it.
//! - Links keep only `http`, `https` and `mailto` targets, and open with
//!   `rel="noopener noreferrer nofollow"`.
//!
//! The browser then copies the sanitised tree node by node into the page
//! (see `markdownNode` in `assets/app.js`), so the CSP, the sanitiser and
//! the copier each stand on their own.

use pulldown_cmark::{CowStr, Event, LinkType, Options, Parser, Tag, TagEnd, html};
use std::collections::HashSet;
use std::sync::LazyLock;

/// Elements the rendered HTML may contain: what CommonMark and the enabled
/// extensions produce, minus images.
const ALLOWED_TAGS: &[&str] = &[
    "a",
    "blockquote",
    "br",
    "code",
    "del",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "input",
    "li",
    "ol",
    "p",
    "pre",
    "strong",
    "table",
    "tbody",
    "td",
    "th",
    "thead",
    "tr",
    "ul",
];

static SANITIZER: LazyLock<ammonia::Builder<'static>> = LazyLock::new(|| {
    let mut builder = ammonia::Builder::empty();
    builder
        .tags(ALLOWED_TAGS.iter().copied().collect::<HashSet<_>>())
        .add_tag_attributes("a", ["href"])
        .add_tag_attributes("ol", ["start"])
        // Task-list checkboxes: shown, never editable from the page.
        .add_tag_attributes("input", ["type", "checked", "disabled"])
        .add_tag_attributes("code", ["class"])
        .url_schemes(["http", "https", "mailto"].into_iter().collect())
        .link_rel(Some("noopener noreferrer nofollow"))
        .strip_comments(true);
    builder
});

/// Renders `markdown` to sanitised HTML.
pub fn render(markdown: &str) -> String {
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let events = Parser::new_ext(markdown, options).map(defuse);
    let mut unsafe_html = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut unsafe_html, events);
    SANITIZER.clean(&unsafe_html).to_string()
}

/// Turns raw HTML into text and images into links (see the module docs).
fn defuse(event: Event<'_>) -> Event<'_> {
    match event {
        Event::Html(raw) | Event::InlineHtml(raw) => Event::Text(raw),
        Event::Start(Tag::Image {
            dest_url, title, ..
        }) => Event::Start(Tag::Link {
            link_type: LinkType::Inline,
            dest_url,
            title,
            id: CowStr::Borrowed(""),
        }),
        Event::End(TagEnd::Image) => Event::End(TagEnd::Link),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::render;

    #[test]
    fn formats_common_markdown() {
        let html = render("# Title\n\nSome **bold** and `code`.\n\n- one\n- two\n");
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(html.contains("<strong>bold</strong>"), "{html}");
        assert!(html.contains("<code>code</code>"), "{html}");
        assert!(html.contains("<li>one</li>"), "{html}");
    }

    #[test]
    fn raw_html_is_shown_as_text() {
        let html = render("<script>alert(1)</script>\n\nhi <img src=x onerror=alert(1)>");
        assert!(!html.contains("<script"), "{html}");
        assert!(!html.contains("<img"), "{html}");
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(
            html.contains("&lt;img src=x onerror=alert(1)&gt;"),
            "{html}"
        );
    }

    #[test]
    fn links_keep_only_safe_schemes() {
        let html =
            render("[a](javascript:alert(1)) [b](https://example.com) [c](data:text/html,x)");
        assert!(!html.contains("javascript:"), "{html}");
        assert!(!html.contains("data:"), "{html}");
        assert!(
            html.contains(
                r#"<a href="https://example.com" rel="noopener noreferrer nofollow">b</a>"#
            ),
            "{html}"
        );
    }

    #[test]
    fn images_become_links() {
        let html = render("![pixel](https://tracker.example/p.gif)");
        assert!(!html.contains("<img"), "{html}");
        assert!(
            html.contains(r#"href="https://tracker.example/p.gif""#),
            "{html}"
        );
        assert!(html.contains(">pixel</a>"), "{html}");
    }

    #[test]
    fn task_lists_and_tables_render() {
        let html = render("- [x] done\n- [ ] open\n\n| a | b |\n|---|---|\n| 1 | 2 |\n");
        assert!(html.contains("checked"), "{html}");
        assert!(html.contains("<table>"), "{html}");
        assert!(html.contains("<td>1</td>"), "{html}");
    }
}
