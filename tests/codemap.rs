//! ARCHITECTURE.md's codemap cannot drift from the manifests: each row's
//! "may depend on" column is the exact set of `corkboard-*` crates in that
//! crate's `[dependencies]` (and build/target dependencies), dev-dependencies
//! may add only the test crates ([`TEST_ONLY`]), every directory under
//! `services/` has a row and every row names one.
//!
//! The column is machine-readable: crate short names (directory names
//! under `services/`) separated by commas, `nothing of ours`, or
//! `everything` (only the binary composes everything).
//!
//! It also checks that every top-level `tests/*.rs` file is registered as
//! a `[[test]]` target of the cli crate (cargo finds test targets only in
//! a package's own `tests/` directory, so each one is listed by hand:
//! forgetting one would silently drop it from CI).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const CODEMAP: &str = "ARCHITECTURE.md";
const HEADER: [&str; 3] = ["crate", "what lives there", "may depend on"];
/// What a dev-dependency may add to a row: test infrastructure and the
/// embedded store as a fixture.
const TEST_ONLY: [&str; 3] = ["testkit", "store-contract", "store-sqlite"];
const NOTHING: &str = "nothing of ours";
const EVERYTHING: &str = "everything";
const PREFIX: &str = "corkboard-";

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What a row allows.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Allowed {
    Everything,
    Crates(BTreeSet<String>),
}

#[derive(Debug, Clone)]
struct Row {
    line: usize,
    name: String,
    allowed: Allowed,
    /// The column as written, for messages.
    text: String,
}

impl Row {
    fn describe(&self) -> String {
        format!(
            "codemap row `{}` ({CODEMAP} line {}, \"may depend on\": {})",
            self.name, self.line, self.text
        )
    }
}

/// One crate's manifest, reduced to what the check needs.
#[derive(Debug, Clone, Default)]
struct Manifest {
    package: String,
    /// `corkboard-*` package names of normal, build and target dependencies.
    normal: BTreeSet<String>,
    /// `corkboard-*` package names of dev-dependencies.
    dev: BTreeSet<String>,
}

fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_owned()).collect()
}

fn unquote(cell: &str) -> String {
    cell.trim().trim_matches('`').trim().to_owned()
}

/// Parses the codemap table; every malformed row is reported.
fn parse_codemap(markdown: &str) -> (Vec<Row>, Vec<String>) {
    let mut problems = Vec::new();
    let lines: Vec<&str> = markdown.lines().collect();
    let Some(start) = lines
        .iter()
        .position(|l| l.trim().starts_with('|') && cells(l) == HEADER)
    else {
        return (
            Vec::new(),
            vec![format!(
                "{CODEMAP}: no table with the header | {} |",
                HEADER.join(" | ")
            )],
        );
    };
    let mut rows = Vec::new();
    for (index, line) in lines.iter().enumerate().skip(start + 2) {
        if !line.trim().starts_with('|') {
            break;
        }
        let number = index + 1;
        let c = cells(line);
        if c.len() != HEADER.len() {
            problems.push(format!(
                "{CODEMAP} line {number}: a codemap row has {} cells, expected {}",
                c.len(),
                HEADER.len()
            ));
            continue;
        }
        let name = unquote(&c[0]);
        let text = c[2].clone();
        let column = unquote(&text);
        let allowed = if column == EVERYTHING {
            Allowed::Everything
        } else if column == NOTHING {
            Allowed::Crates(BTreeSet::new())
        } else {
            let mut crates = BTreeSet::new();
            for item in column.split(',') {
                let item = unquote(item);
                if item.is_empty()
                    || !item
                        .chars()
                        .all(|ch| ch.is_ascii_lowercase() || ch.is_ascii_digit() || ch == '-')
                {
                    problems.push(format!(
                        "{CODEMAP} line {number}: codemap row `{name}`: \"{item}\" is not a crate short name; write short names separated by commas, `{NOTHING}` or `{EVERYTHING}`"
                    ));
                    continue;
                }
                crates.insert(item);
            }
            Allowed::Crates(crates)
        };
        rows.push(Row {
            line: number,
            name,
            allowed,
            text,
        });
    }
    (rows, problems)
}

fn dependency_names(table: Option<&toml::Value>) -> BTreeSet<String> {
    let Some(table) = table.and_then(toml::Value::as_table) else {
        return BTreeSet::new();
    };
    table
        .iter()
        .map(|(key, spec)| {
            // A renamed dependency names its package explicitly.
            spec.get("package")
                .and_then(toml::Value::as_str)
                .unwrap_or(key)
                .to_owned()
        })
        .filter(|name| name.starts_with(PREFIX))
        .collect()
}

fn parse_manifest(text: &str) -> Result<Manifest, String> {
    let doc: toml::Table = toml::from_str(text).map_err(|e| e.to_string())?;
    let package = doc
        .get("package")
        .and_then(|p| p.get("name"))
        .and_then(toml::Value::as_str)
        .ok_or("no [package] name")?
        .to_owned();
    let mut manifest = Manifest {
        package,
        ..Manifest::default()
    };
    let mut collect = |table: &toml::Table| {
        manifest
            .normal
            .extend(dependency_names(table.get("dependencies")));
        manifest
            .normal
            .extend(dependency_names(table.get("build-dependencies")));
        manifest
            .dev
            .extend(dependency_names(table.get("dev-dependencies")));
    };
    collect(&doc);
    if let Some(targets) = doc.get("target").and_then(toml::Value::as_table) {
        for target in targets.values().filter_map(toml::Value::as_table) {
            collect(target);
        }
    }
    Ok(manifest)
}

/// Every problem of `rows` against `manifests` (crate directory → manifest).
fn check(rows: &[Row], manifests: &BTreeMap<String, Manifest>) -> Vec<String> {
    let mut problems = Vec::new();
    let short_of: BTreeMap<&str, &str> = manifests
        .iter()
        .map(|(dir, m)| (m.package.as_str(), dir.as_str()))
        .collect();
    let mut seen = BTreeSet::new();
    for row in rows {
        if !seen.insert(row.name.as_str()) {
            problems.push(format!("{} repeats a crate", row.describe()));
        }
        let Some(manifest) = manifests.get(&row.name) else {
            problems.push(format!(
                "{} names no crate: there is no services/{}/Cargo.toml",
                row.describe(),
                row.name
            ));
            continue;
        };
        let Allowed::Crates(allowed) = &row.allowed else {
            if row.name != "cli" {
                problems.push(format!(
                    "{} says `{EVERYTHING}`, which only the binary (`cli`) may",
                    row.describe()
                ));
            }
            continue;
        };
        for name in allowed {
            if !manifests.contains_key(name) {
                problems.push(format!(
                    "{} allows `{name}`, which is not a crate under services/",
                    row.describe()
                ));
            }
        }
        let short =
            |package: &str| -> Option<String> { short_of.get(package).map(|s| (*s).to_owned()) };
        let mut depends = BTreeSet::new();
        for package in &manifest.normal {
            match short(package) {
                Some(dep) => {
                    if !allowed.contains(&dep) {
                        problems.push(format!(
                            "crate `{}`: services/{}/Cargo.toml depends on `{package}`, which {} does not allow: add `{dep}` to the row (and say why) or remove the dependency",
                            row.name,
                            row.name,
                            row.describe()
                        ));
                    }
                    depends.insert(dep);
                }
                None => problems.push(format!(
                    "crate `{}`: services/{}/Cargo.toml depends on `{package}`, which is no crate under services/",
                    row.name, row.name
                )),
            }
        }
        for stale in allowed.difference(&depends) {
            if manifests.contains_key(stale) {
                problems.push(format!(
                    "{} allows `{stale}`, but services/{}/Cargo.toml does not depend on `{PREFIX}{stale}`: remove it from the row",
                    row.describe(),
                    row.name
                ));
            }
        }
        for package in &manifest.dev {
            let Some(dep) = short(package) else {
                problems.push(format!(
                    "crate `{}`: services/{}/Cargo.toml dev-depends on `{package}`, which is no crate under services/",
                    row.name, row.name
                ));
                continue;
            };
            if !allowed.contains(&dep) && !TEST_ONLY.contains(&dep.as_str()) && dep != row.name {
                problems.push(format!(
                    "crate `{}`: services/{}/Cargo.toml dev-depends on `{package}`, which {} does not allow (dev-dependencies may add only {})",
                    row.name,
                    row.name,
                    row.describe(),
                    TEST_ONLY.join(", ")
                ));
            }
        }
    }
    for dir in manifests.keys() {
        if !rows.iter().any(|r| &r.name == dir) {
            problems.push(format!(
                "services/{dir} has no row in the {CODEMAP} codemap: add one saying what lives there and what it may depend on"
            ));
        }
    }
    problems
}

fn workspace_manifests() -> BTreeMap<String, Manifest> {
    let services = repo_root().join("services");
    let mut manifests = BTreeMap::new();
    for entry in std::fs::read_dir(&services).expect("services/") {
        let dir = entry.expect("a services/ entry").path();
        let path = dir.join("Cargo.toml");
        if !path.is_file() {
            continue;
        }
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a UTF-8 crate directory")
            .to_owned();
        let text = std::fs::read_to_string(&path).expect("a readable manifest");
        let manifest =
            parse_manifest(&text).unwrap_or_else(|e| panic!("services/{name}/Cargo.toml: {e}"));
        manifests.insert(name, manifest);
    }
    manifests
}

#[test]
fn the_codemap_matches_the_manifests() {
    let markdown =
        std::fs::read_to_string(repo_root().join(CODEMAP)).expect("ARCHITECTURE.md exists");
    let (rows, mut problems) = parse_codemap(&markdown);
    problems.extend(check(&rows, &workspace_manifests()));
    assert!(
        problems.is_empty(),
        "the codemap and the manifests disagree:\n  {}",
        problems.join("\n  ")
    );
}

/// The check itself: a wrong, a stale, a missing and an unknown row are
/// each reported, naming the crate, the dependency and the row.
#[test]
fn a_wrong_codemap_row_is_reported() {
    let table = "\
| crate | what lives there | may depend on |
| --- | --- | --- |
| `board` | the domain | nothing of ours |
| `mcp` | protocol | nothing of ours |
| `tools` | tools | board, mcp |
| `ghost` | nothing | board |
| `cli` | binary | everything |
";
    let manifest = |package: &str, normal: &[&str], dev: &[&str]| Manifest {
        package: package.to_owned(),
        normal: normal.iter().map(|s| (*s).to_owned()).collect(),
        dev: dev.iter().map(|s| (*s).to_owned()).collect(),
    };
    let manifests: BTreeMap<String, Manifest> = [
        ("board", manifest("corkboard-board", &[], &[])),
        (
            "mcp",
            manifest("corkboard-mcp", &["corkboard-telemetry"], &[]),
        ),
        (
            "tools",
            manifest(
                "corkboard-tools",
                &["corkboard-board"],
                &["corkboard-store-sqlite", "corkboard-cli"],
            ),
        ),
        ("telemetry", manifest("corkboard-telemetry", &[], &[])),
        ("store-sqlite", manifest("corkboard-store-sqlite", &[], &[])),
        ("cli", manifest("corkboard-cli", &["corkboard-mcp"], &[])),
    ]
    .into_iter()
    .map(|(dir, m)| (dir.to_owned(), m))
    .collect();
    let (rows, parse_problems) = parse_codemap(table);
    assert!(parse_problems.is_empty(), "{parse_problems:?}");
    let problems = check(&rows, &manifests);
    let has = |needles: &[&str]| {
        problems
            .iter()
            .any(|p| needles.iter().all(|n| p.contains(n)))
    };
    assert!(
        has(&[
            "crate `mcp`",
            "`corkboard-telemetry`",
            "codemap row `mcp`",
            "line 4"
        ]),
        "{problems:#?}"
    );
    assert!(
        has(&["codemap row `tools`", "allows `mcp`", "does not depend"]),
        "{problems:#?}"
    );
    assert!(
        has(&["crate `tools`", "dev-depends on `corkboard-cli`"]),
        "{problems:#?}"
    );
    assert!(
        has(&["codemap row `ghost`", "names no crate"]),
        "{problems:#?}"
    );
    assert!(has(&["services/telemetry has no row"]), "{problems:#?}");
    assert!(has(&["services/store-sqlite has no row"]), "{problems:#?}");
    assert_eq!(problems.len(), 6, "{problems:#?}");
    let (_, bad) = parse_codemap(
        "| crate | what lives there | may depend on |\n| --- | --- | --- |\n| `x` | y | board (mostly) |\n",
    );
    assert!(bad.iter().any(|p| p.contains("board (mostly)")), "{bad:?}");
}

/// Every top-level `tests/*.rs` is a `[[test]]` of the cli crate, named by
/// its file stem, and every registered path exists.
#[test]
fn every_top_level_test_file_is_a_registered_test_target() {
    let root = repo_root();
    let manifest_path = root.join("services/cli/Cargo.toml");
    let text = std::fs::read_to_string(&manifest_path).expect("services/cli/Cargo.toml");
    let doc: toml::Table = toml::from_str(&text).expect("a valid manifest");
    let mut registered = BTreeMap::new();
    let mut problems = Vec::new();
    for target in doc
        .get("test")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
    {
        let name = target.get("name").and_then(toml::Value::as_str);
        let path = target.get("path").and_then(toml::Value::as_str);
        let (Some(name), Some(path)) = (name, path) else {
            problems.push(format!("a [[test]] without name or path: {target}"));
            continue;
        };
        registered.insert(path.to_owned(), name.to_owned());
        if !root.join("services/cli").join(path).is_file() {
            problems.push(format!("[[test]] `{name}`: {path} does not exist"));
        }
    }
    let mut files: Vec<String> = std::fs::read_dir(root.join("tests"))
        .expect("tests/")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|f| f.ends_with(".rs"))
        .collect();
    files.sort();
    for file in files {
        let stem = file.trim_end_matches(".rs");
        let path = format!("../../tests/{file}");
        match registered.get(&path) {
            None => problems.push(format!(
                "tests/{file} is not a test target: add to services/cli/Cargo.toml\n\n[[test]]\nname = \"{stem}\"\npath = \"{path}\"\n"
            )),
            Some(name) if name != stem => problems.push(format!(
                "[[test]] for tests/{file} is named `{name}`: name it `{stem}` (its file stem), as nextest filters use it"
            )),
            Some(_) => {}
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
