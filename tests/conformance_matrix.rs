//! The conformance matrix (`docs/conformance.md`) cannot drift from the
//! tests: every row must name, for each transport it applies to, tests that
//! exist (a function with a test attribute in the named file) or say `GAP`
//! with a reason. Gap rows are printed (`--nocapture` shows them).
//!
//! Format of a test reference: `path/from/repo/root.rs::test_fn`, or
//! `crate-dir::test_fn` for a test anywhere under `services/<crate-dir>/`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MATRIX: &str = "docs/conformance.md";
const HEADER: [&str; 5] = ["id", "rule", "source", "transports", "tests"];
const TRANSPORTS: [&str; 2] = ["http", "stdio"];

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct TestRef {
    /// A `.rs` file from the repository root, or a crate directory name.
    location: String,
    function: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Coverage {
    Tests(Vec<TestRef>),
    Gap(String),
    NotApplicable(String),
}

#[derive(Debug, Clone)]
struct Row {
    line: usize,
    id: String,
    transports: Vec<String>,
    coverage: BTreeMap<String, Coverage>,
}

impl Row {
    fn gaps(&self) -> impl Iterator<Item = (&String, &String)> {
        self.coverage.iter().filter_map(|(t, c)| match c {
            Coverage::Gap(why) => Some((t, why)),
            _ => None,
        })
    }
}

fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_owned()).collect()
}

/// Parses every matrix table (the main matrix and each section's, such as
/// "Relay validation"); every malformed row is reported, and ids are
/// unique across all of them.
fn parse(markdown: &str) -> (Vec<Row>, Vec<String>) {
    let mut problems = Vec::new();
    let lines: Vec<&str> = markdown.lines().collect();
    let starts: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| l.trim().starts_with('|') && cells(l) == HEADER)
        .map(|(i, _)| i)
        .collect();
    if starts.is_empty() {
        return (
            Vec::new(),
            vec![format!(
                "no table with the header | {} |",
                HEADER.join(" | ")
            )],
        );
    }
    let mut rows = Vec::new();
    let mut ids = BTreeSet::new();
    for start in starts {
        parse_table(&lines, start, &mut rows, &mut ids, &mut problems);
    }
    (rows, problems)
}

/// Parses the table whose header is at line index `start`.
fn parse_table(
    lines: &[&str],
    start: usize,
    rows: &mut Vec<Row>,
    ids: &mut BTreeSet<String>,
    problems: &mut Vec<String>,
) {
    let separator_ok = lines.get(start + 1).is_some_and(|l| {
        let c = cells(l);
        c.len() == HEADER.len()
            && c.iter()
                .all(|c| !c.is_empty() && c.chars().all(|ch| ch == '-' || ch == ':'))
    });
    if !separator_ok {
        problems.push(format!(
            "line {}: the header is not followed by a separator row",
            start + 2
        ));
    }
    for (index, line) in lines.iter().enumerate().skip(start + 2) {
        if !line.trim().starts_with('|') {
            break;
        }
        let number = index + 1;
        let c = cells(line);
        if c.len() != HEADER.len() {
            problems.push(format!(
                "line {number}: {} cells, expected {} (a `|` inside a cell?)",
                c.len(),
                HEADER.len()
            ));
            continue;
        }
        let id = c[0].clone();
        let well_formed_id = id.split_once('-').is_some_and(|(a, b)| {
            !a.is_empty()
                && a.chars().all(|ch| ch.is_ascii_uppercase())
                && !b.is_empty()
                && b.chars().all(|ch| ch.is_ascii_digit())
        });
        if !well_formed_id {
            problems.push(format!("line {number}: id {id:?} is not like ABC-1"));
        }
        if !ids.insert(id.clone()) {
            problems.push(format!("line {number}: id {id} is used twice"));
        }
        for (name, value) in [("rule", &c[1]), ("source", &c[2])] {
            if value.is_empty() {
                problems.push(format!("{id} (line {number}): empty {name}"));
            }
        }
        let mut transports = Vec::new();
        for t in c[3].split(',').map(str::trim).filter(|t| !t.is_empty()) {
            if !TRANSPORTS.contains(&t) {
                problems.push(format!(
                    "{id}: unknown transport {t:?} (known: {TRANSPORTS:?})"
                ));
            } else if transports.iter().any(|x| x == t) {
                problems.push(format!("{id}: transport {t} listed twice"));
            } else {
                transports.push(t.to_owned());
            }
        }
        if transports.is_empty() {
            problems.push(format!("{id}: no transport"));
        }
        let mut coverage = BTreeMap::new();
        for segment in c[4].split(';').map(str::trim).filter(|s| !s.is_empty()) {
            let Some((transport, content)) = segment.split_once(':') else {
                problems.push(format!(
                    "{id}: segment {segment:?} is not `transport: tests`"
                ));
                continue;
            };
            let (transport, content) = (transport.trim().to_owned(), content.trim());
            if !TRANSPORTS.contains(&transport.as_str()) {
                problems.push(format!("{id}: segment for unknown transport {transport:?}"));
                continue;
            }
            let parsed = if let Some(why) = content.strip_prefix("GAP") {
                Coverage::Gap(why.trim().to_owned())
            } else if let Some(why) = content.strip_prefix("n/a") {
                Coverage::NotApplicable(why.trim().to_owned())
            } else {
                let mut refs = Vec::new();
                for item in content.split(',').map(str::trim) {
                    match item.rsplit_once("::") {
                        Some((location, function))
                            if !location.is_empty() && !function.is_empty() =>
                        {
                            refs.push(TestRef {
                                location: location.to_owned(),
                                function: function.to_owned(),
                            });
                        }
                        _ => problems.push(format!(
                            "{id}: {transport}: {item:?} is not `path.rs::test_fn`"
                        )),
                    }
                }
                Coverage::Tests(refs)
            };
            if coverage.insert(transport.clone(), parsed).is_some() {
                problems.push(format!("{id}: two segments for {transport}"));
            }
        }
        rows.push(Row {
            line: number,
            id,
            transports,
            coverage,
        });
    }
}

/// Whether the lines above `fn_line` (attributes, comments) carry a test
/// attribute such as `#[test]`, `#[actix_rt::test]`, `#[actix_rt::test]`.
fn has_test_attribute(lines: &[&str], fn_line: usize) -> bool {
    for line in lines[..fn_line].iter().rev() {
        let t = line.trim();
        if t.starts_with("#[") {
            let path = t
                .trim_start_matches("#[")
                .split(['(', ']'])
                .next()
                .unwrap_or_default()
                .trim();
            if path == "test" || path.ends_with("::test") {
                return true;
            }
            continue;
        }
        if t.starts_with("//") || t.is_empty() {
            continue;
        }
        return false;
    }
    false
}

/// Whether `source` defines a test function `name`.
fn defines_test(source: &str, name: &str) -> bool {
    let lines: Vec<&str> = source.lines().collect();
    lines.iter().enumerate().any(|(i, line)| {
        let Some(at) = line.find(&format!("fn {name}")) else {
            return false;
        };
        let rest = &line[at + 3 + name.len()..];
        let boundary = rest.starts_with('(') || rest.starts_with('<');
        let before = &line[..at];
        let is_item = before
            .split_whitespace()
            .all(|w| matches!(w, "pub" | "async" | "pub(crate)" | "unsafe" | "const"));
        boundary && is_item && has_test_attribute(&lines, i)
    })
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Problems with one test reference, if any.
fn resolve(root: &Path, test: &TestRef) -> Option<String> {
    let files = if test.location.ends_with(".rs") {
        let path = root.join(&test.location);
        if !path.is_file() {
            return Some(format!("{}: no such file", test.location));
        }
        vec![path]
    } else {
        let dir = root.join("services").join(&test.location);
        if !dir.is_dir() {
            return Some(format!(
                "{}: no such crate directory under services/",
                test.location
            ));
        }
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        files
    };
    let found = files.iter().any(|file| {
        std::fs::read_to_string(file).is_ok_and(|source| defines_test(&source, &test.function))
    });
    (!found).then(|| {
        format!(
            "{}::{}: no test function of that name (a fn with #[test] or #[..::test])",
            test.location, test.function
        )
    })
}

/// Every problem with the parsed rows: missing coverage, unknown tests.
fn check(rows: &[Row], root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    for row in rows {
        let id = &row.id;
        for transport in TRANSPORTS {
            let applies = row.transports.iter().any(|t| t == transport);
            match (applies, row.coverage.get(transport)) {
                (true, None) => problems.push(format!("{id}: no tests for {transport} (name tests, or GAP and why)")),
                (true, Some(Coverage::Tests(refs))) if refs.is_empty() => {
                    problems.push(format!("{id}: no tests for {transport}"));
                }
                (true, Some(Coverage::Gap(why))) if why.is_empty() => {
                    problems.push(format!("{id}: GAP for {transport} without a reason"));
                }
                (true, Some(Coverage::NotApplicable(_))) => problems.push(format!(
                    "{id}: {transport} is listed as a transport but marked n/a"
                )),
                (false, Some(Coverage::Tests(_) | Coverage::Gap(_))) => problems.push(format!(
                    "{id}: tests for {transport}, which is not one of its transports (mark it n/a or add it)"
                )),
                (false, Some(Coverage::NotApplicable(why))) if why.is_empty() => {
                    problems.push(format!("{id}: n/a for {transport} without a reason"));
                }
                _ => {}
            }
        }
        for coverage in row.coverage.values() {
            if let Coverage::Tests(refs) = coverage {
                problems.extend(
                    refs.iter()
                        .filter_map(|r| resolve(root, r))
                        .map(|p| format!("{id} (line {}): {p}", row.line)),
                );
            }
        }
    }
    problems
}

fn load() -> Vec<Row> {
    let path = repo_root().join(MATRIX);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{MATRIX}: {e}"));
    let (rows, problems) = parse(&text);
    assert!(
        problems.is_empty(),
        "{MATRIX} is malformed:\n{}",
        problems.join("\n")
    );
    rows
}

#[test]
fn every_rule_names_existing_tests_or_is_listed_as_a_gap() {
    let rows = load();
    let problems = check(&rows, &repo_root());
    let gaps: Vec<String> = rows
        .iter()
        .flat_map(|row| {
            row.gaps()
                .map(move |(t, why)| format!("  {} [{t}]: {why}", row.id))
        })
        .collect();
    eprintln!(
        "{MATRIX}: {} rules, {} gaps{}",
        rows.len(),
        gaps.len(),
        if gaps.is_empty() {
            String::new()
        } else {
            format!(":\n{}", gaps.join("\n"))
        }
    );
    assert!(
        problems.is_empty(),
        "{MATRIX} drifted from the tests:\n{}",
        problems.join("\n")
    );
    // The matrix covers both transports, not just one.
    for transport in TRANSPORTS {
        let covered = rows
            .iter()
            .filter(|r| matches!(r.coverage.get(transport), Some(Coverage::Tests(_))))
            .count();
        assert!(covered >= 20, "only {covered} rules proven on {transport}");
    }
}

#[test]
fn every_stdio_black_box_test_is_in_the_matrix() {
    // The other direction of drift: a stdio test nobody maps to a rule is
    // either a missing row or a test without a purpose.
    let rows = load();
    let named: BTreeSet<(String, String)> = rows
        .iter()
        .flat_map(|r| r.coverage.values())
        .filter_map(|c| match c {
            Coverage::Tests(refs) => Some(refs),
            _ => None,
        })
        .flatten()
        .map(|r| (r.location.clone(), r.function.clone()))
        .collect();
    let file = "tests/stdio.rs";
    let source =
        std::fs::read_to_string(repo_root().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let lines: Vec<&str> = source.lines().collect();
    let tests: Vec<String> = lines
        .iter()
        .enumerate()
        .filter(|(i, _)| has_test_attribute(&lines, *i))
        .filter_map(|(_, line)| {
            let rest = line.trim().strip_prefix("fn ")?;
            Some(rest.split(['(', '<']).next()?.to_owned())
        })
        .collect();
    assert!(
        tests.len() >= 10,
        "found only {} tests in {file}",
        tests.len()
    );
    let missing: Vec<&String> = tests
        .iter()
        .filter(|t| !named.contains(&(file.to_owned(), (*t).clone())))
        .collect();
    assert!(
        missing.is_empty(),
        "tests in {file} that no row of {MATRIX} names: {missing:?}"
    );
}

#[test]
fn the_checker_catches_what_it_must() {
    let dir = tempfile::tempdir().expect("temp dir");
    let root = dir.path();
    std::fs::create_dir_all(root.join("tests")).expect("mkdir");
    std::fs::write(
        root.join("tests/a.rs"),
        "#[test]\nfn real() {}\n\nfn helper() {}\n\n#[tokio::test(flavor = \"multi_thread\")]\n// why\nasync fn real_async() {}\n\n#[test]\nfn real_with_suffix_x() {}\n",
    )
    .expect("write");
    let table = "\
| id | rule | source | transports | tests |
| --- | --- | --- | --- | --- |
| OK-1 | r | s | http, stdio | http: tests/a.rs::real; stdio: tests/a.rs::real_async |
| GAP-1 | r | s | http, stdio | http: tests/a.rs::real; stdio: GAP not yet |
| NA-1 | r | s | http | http: tests/a.rs::real; stdio: n/a no headers |
| MISSING-1 | r | s | http, stdio | http: tests/a.rs::real |
| HELPER-1 | r | s | http | http: tests/a.rs::helper |
| PREFIX-1 | r | s | http | http: tests/a.rs::real_with |
| FILE-1 | r | s | http | http: tests/nope.rs::real |
| EMPTY-1 | r | s | http | http: GAP |
| EXTRA-1 | r | s | http | http: tests/a.rs::real; stdio: tests/a.rs::real |
";
    let (rows, problems) = parse(table);
    assert!(problems.is_empty(), "{problems:?}");
    let problems = check(&rows, root);
    let about = |id: &str| {
        problems
            .iter()
            .filter(|p| p.starts_with(&format!("{id}:")) || p.starts_with(&format!("{id} ")))
            .count()
    };
    for clean in ["OK-1", "GAP-1", "NA-1"] {
        assert_eq!(about(clean), 0, "{clean}: {problems:?}");
    }
    for broken in [
        "MISSING-1",
        "HELPER-1",
        "PREFIX-1",
        "FILE-1",
        "EMPTY-1",
        "EXTRA-1",
    ] {
        assert_eq!(about(broken), 1, "{broken}: {problems:?}");
    }
    let gaps: Vec<&str> = rows
        .iter()
        .filter(|r| r.gaps().next().is_some())
        .map(|r| r.id.as_str())
        .collect();
    assert_eq!(gaps, vec!["GAP-1", "EMPTY-1"]);

    let (_, problems) = parse(
        "| id | rule | source | transports | tests |\n| --- | --- | --- | --- | --- |\n| bad | r | | smoke | x |\n| A-1 | r | s | http | http: a | b |\n",
    );
    assert_eq!(problems.len(), 6, "{problems:?}");
}
