//! The documentation holds together: the book's `SUMMARY.md` lists every
//! page under `docs/`, every relative link in the repository's Markdown
//! (README, ARCHITECTURE, CHANGELOG, `docs/`, `examples/`, the chart's
//! README) points at a file that exists, and every `#anchor` at a heading
//! of its page (anchors as mdBook and GitHub make them). The generated
//! reference pages are kept current here too: the CLI's from the binary's
//! own help (`docs/reference/cli.md`), the admin API's from `openapi.json`
//! (`docs/reference/admin-api-endpoints.md`), and the findings that end
//! `docs/numbers.md` from `services/bench/FINDINGS.md`. `scripts/test` also builds
//! the book with `mdbook`, which fails on a page `SUMMARY.md` names but
//! that does not exist.

use crate::support::corkboard_bin;
use pulldown_cmark::{Event, LinkType, Parser, Tag, TagEnd};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Every Markdown file the documentation is made of.
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "CHANGELOG.md"]
        .iter()
        .map(|f| root.join(f))
        .filter(|p| p.exists())
        .collect();
    for dir in ["docs", "examples", "helm/corkboard"] {
        walk(&root.join(dir), &mut files);
    }
    files.sort();
    files
}

fn walk(dir: &Path, into: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path
                .file_name()
                .is_some_and(|n| n == "node_modules" || n == "book")
            {
                continue;
            }
            walk(&path, into);
        } else if path.extension().is_some_and(|e| e == "md") {
            into.push(path);
        }
    }
}

/// A page's anchors, as mdBook (and GitHub) derive them from its headings:
/// lower case, spaces to `-`, other punctuation dropped, repeats numbered.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen: BTreeMap<String, usize> = BTreeMap::new();
    let mut out = BTreeSet::new();
    let mut heading: Option<String> = None;
    for event in Parser::new(text) {
        match event {
            Event::Start(Tag::Heading { id, .. }) => {
                if let Some(id) = id {
                    out.insert(id.to_string());
                }
                heading = Some(String::new());
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some(h) = heading.as_mut() {
                    h.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                let title = heading.take().unwrap_or_default();
                let slug: String = title
                    .trim()
                    .chars()
                    .filter_map(|c| {
                        if c.is_alphanumeric() || c == '_' || c == '-' {
                            Some(c.to_lowercase().next().unwrap_or(c))
                        } else if c.is_whitespace() {
                            Some('-')
                        } else {
                            None
                        }
                    })
                    .collect();
                let n = seen.entry(slug.clone()).or_insert(0);
                out.insert(if *n == 0 {
                    slug.clone()
                } else {
                    format!("{slug}-{n}")
                });
                *n += 1;
            }
            _ => {}
        }
    }
    out
}

/// The relative links of a page (not `http:`, `mailto:` and the like).
fn links(text: &str) -> Vec<String> {
    Parser::new(text)
        .filter_map(|event| match event {
            Event::Start(Tag::Link {
                link_type: LinkType::Inline | LinkType::Reference | LinkType::Shortcut,
                dest_url,
                ..
            })
            | Event::Start(Tag::Image { dest_url, .. }) => Some(dest_url.to_string()),
            _ => None,
        })
        .filter(|url| !url.contains("://") && !url.starts_with("mailto:"))
        .collect()
}

#[test]
fn every_relative_link_and_anchor_resolves() {
    let root = repo();
    let mut broken = Vec::new();
    for page in markdown_files(&root) {
        let text = std::fs::read_to_string(&page).unwrap();
        for link in links(&text) {
            let (file, anchor) = match link.split_once('#') {
                Some((file, anchor)) => (file, Some(anchor)),
                None => (link.as_str(), None),
            };
            let target = if file.is_empty() {
                page.clone()
            } else {
                page.parent().unwrap().join(file)
            };
            let shown = page.strip_prefix(&root).unwrap().display().to_string();
            if !target.exists() {
                broken.push(format!("{shown}: {link} (no such file)"));
                continue;
            }
            if let Some(anchor) = anchor
                && target.extension().is_some_and(|e| e == "md")
            {
                let have = anchors(&std::fs::read_to_string(&target).unwrap());
                if !have.contains(anchor) {
                    broken.push(format!("{shown}: {link} (no heading with that anchor)"));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_book_lists_every_page_under_docs() {
    let docs = repo().join("docs");
    let summary = std::fs::read_to_string(docs.join("SUMMARY.md")).unwrap();
    let listed: BTreeSet<PathBuf> = links(&summary)
        .into_iter()
        .map(|l| docs.join(l.split('#').next().unwrap()))
        .collect();
    let mut pages = Vec::new();
    walk(&docs, &mut pages);
    let missing: Vec<String> = pages
        .iter()
        .filter(|p| !p.ends_with("SUMMARY.md") && !listed.contains(*p))
        // Pages included into others (`{{#include ...}}`) are not pages.
        .filter(|p| !p.to_string_lossy().ends_with("-keys.md"))
        .map(|p| p.strip_prefix(&docs).unwrap().display().to_string())
        .collect();
    assert!(
        missing.is_empty(),
        "pages under docs/ that SUMMARY.md does not list: {missing:?}"
    );
}

/// The subcommands a `--help` text lists under `Commands:`.
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim_end() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

fn help_of(path: &[String]) -> String {
    let out = Command::new(corkboard_bin())
        .args(path)
        .arg("--help")
        .env_remove("CORKBOARD_DATA_DIR")
        // Defaults derived from the environment read the same everywhere.
        .env("XDG_DATA_HOME", "/home/you/.local/share")
        .env("HOME", "/home/you")
        .output()
        .unwrap();
    assert!(out.status.success(), "corkboard {path:?} --help failed");
    String::from_utf8(out.stdout).unwrap()
}

/// The CLI reference: every command's `--help`, from the binary itself.
#[test]
fn the_cli_reference_is_current() {
    let mut page = String::from(
        "# Command-line reference\n\n\
         Generated from the `corkboard` binary's own `--help` (`tests/docs.rs`\n\
         rewrites this page when it is stale). `corkboard help <command>` prints the\n\
         same.\n",
    );
    let mut queue = vec![Vec::<String>::new()];
    while let Some(path) = queue.pop() {
        let help = help_of(&path);
        let name = if path.is_empty() {
            "corkboard".to_owned()
        } else {
            format!("corkboard {}", path.join(" "))
        };
        page.push_str(&format!(
            "\n## `{name}`\n\n```text\n{}\n```\n",
            help.trim_end()
        ));
        for sub in subcommands(&help).into_iter().rev() {
            let mut next = path.clone();
            next.push(sub);
            queue.push(next);
        }
    }
    corkboard_testkit::ensure_file_contents(
        &repo().join("docs/reference/cli.md"),
        &page,
        "cargo nextest run -p corkboard-cli --test blackbox docs::",
    );
}

/// The admin API's endpoints, from the OpenAPI document the server serves.
#[test]
fn the_admin_api_reference_is_current() {
    let root = repo();
    let doc: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("services/server/openapi.json")).unwrap(),
    )
    .unwrap();
    let mut page = String::from(
        "# Admin API endpoints\n\n\
         Generated from `services/server/openapi.json`, the document the server\n\
         serves at `GET /v1/openapi.json` (`tests/docs.rs` rewrites this page when\n\
         it is stale). Every error is the JSON envelope described in\n\
         [the admin API](admin-api.md).\n\n\
         | method | path | what it does |\n| --- | --- | --- |\n",
    );
    let paths = doc["paths"].as_object().unwrap();
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            if !["get", "put", "post", "patch", "delete"].contains(&method.as_str()) {
                continue;
            }
            let what = op["summary"]
                .as_str()
                .or(op["description"].as_str())
                .unwrap_or("")
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            page.push_str(&format!(
                "| {} | `{path}` | {} |\n",
                method.to_uppercase(),
                what.replace('|', "\\|")
            ));
        }
    }
    corkboard_testkit::ensure_file_contents(
        &root.join("docs/reference/admin-api-endpoints.md"),
        &page,
        "cargo nextest run -p corkboard-cli --test blackbox docs::",
    );
}

/// `docs/numbers.md` ends with `services/bench/FINDINGS.md`, as the
/// benchmark's report renders it (`corkboard-bench report --findings`):
/// an analysis written into the page alone would be lost at the next run.
#[test]
fn the_numbers_page_ends_with_the_findings() {
    let root = repo();
    let numbers = std::fs::read_to_string(root.join("docs/numbers.md")).unwrap();
    let findings = std::fs::read_to_string(root.join("services/bench/FINDINGS.md")).unwrap();
    let heading = findings.lines().next().unwrap_or_default();
    let at = numbers
        .find(heading)
        .unwrap_or_else(|| panic!("docs/numbers.md has no section {heading:?}"));
    let page = format!("{}{}\n", &numbers[..at], findings.trim_end());
    corkboard_testkit::ensure_file_contents(
        &root.join("docs/numbers.md"),
        &page,
        "cargo nextest run -p corkboard-cli --test blackbox docs::, after editing \
         services/bench/FINDINGS.md",
    );
}

#[test]
fn anchors_follow_the_heading_rules() {
    let have = anchors("# Set up (fresh machine)\n## `grant create`\n## Limits\n## Limits\n");
    let want: BTreeSet<String> = ["set-up-fresh-machine", "grant-create", "limits", "limits-1"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(have, want);
    assert_eq!(
        subcommands("Usage: x\n\nCommands:\n  serve  Run it\n  help   Print\n\nOptions:\n"),
        vec!["serve"]
    );
}
