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
//! It also checks that every tests folder (the top-level `tests/`, whose
//! black-box tests are the cli crate's, and each `services/<crate>/tests/`)
//! is one test binary: a `[[test]]` target whose path is the folder's
//! `main.rs`, cargo's own discovery of `tests/*.rs` turned off
//! (`autotests = false`), and every `.rs` file and helper directory of the
//! folder declared as a module of `main.rs`: forgetting one would silently
//! drop its tests from CI.

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

/// One tests folder as the wiring check sees it.
#[derive(Debug, Clone, Default)]
struct TestsFolder {
    /// The folder, from the repository root, for messages (`tests`,
    /// `services/mcp/tests`).
    label: String,
    /// The folder's `main.rs` from the crate's directory, as a `[[test]]`
    /// path names it.
    main_path: String,
    /// Module names the folder holds: `.rs` files other than `main.rs`
    /// (by stem) and directories with a `mod.rs`.
    modules: BTreeSet<String>,
    /// The text of `main.rs`, if there is one.
    main_rs: Option<String>,
    /// Whether the folder is the crate's own `tests/` (where cargo would
    /// discover each file as a target of its own unless told not to).
    own_tests_dir: bool,
    /// The `[[test]]` paths of the manifest that name no file.
    missing_paths: Vec<String>,
}

/// The modules `main.rs` declares (`mod name;` or `pub mod name;`).
fn declared_modules(main_rs: &str) -> BTreeSet<String> {
    main_rs
        .lines()
        .filter_map(|line| {
            let line = line.trim();
            let rest = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("mod "))?;
            let name = rest.strip_suffix(';')?.trim();
            (!name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
                .then(|| name.to_owned())
        })
        .collect()
}

/// Every problem of one tests folder against its crate's manifest.
fn wiring_problems(folder: &TestsFolder, manifest: &toml::Table, crate_dir: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let label = &folder.label;
    let main = &folder.main_path;
    let targets: Vec<&toml::Value> = manifest
        .get("test")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let paths: Vec<&str> = targets
        .iter()
        .filter_map(|t| t.get("path").and_then(toml::Value::as_str))
        .collect();
    if !paths.contains(&main.as_str()) {
        problems.push(format!(
            "{label} is not one test binary: add to {crate_dir}/Cargo.toml\n\n[[test]]\nname = \"...\"\npath = \"{main}\"\n"
        ));
    }
    if paths.len() != targets.len() {
        problems.push(format!("{crate_dir}/Cargo.toml: a [[test]] without a path"));
    }
    for path in &folder.missing_paths {
        problems.push(format!(
            "{crate_dir}/Cargo.toml: [[test]] path {path} does not exist"
        ));
    }
    let autotests = manifest
        .get("package")
        .and_then(|p| p.get("autotests"))
        .and_then(toml::Value::as_bool);
    if folder.own_tests_dir && autotests != Some(false) {
        problems.push(format!(
            "{crate_dir}/Cargo.toml: set `autotests = false` in [package]: otherwise cargo also builds every {label}/*.rs as a binary of its own"
        ));
    }
    let Some(main_rs) = &folder.main_rs else {
        problems.push(format!("{label}/main.rs does not exist"));
        return problems;
    };
    let declared = declared_modules(main_rs);
    for module in folder.modules.difference(&declared) {
        problems.push(format!(
            "{label}: `{module}` is not a module of {label}/main.rs, so its tests never run: add `mod {module};` there"
        ));
    }
    problems
}

/// The tests folder at `dir` (under the repository root), whose crate
/// lives in `crate_dir`.
fn tests_folder(root: &Path, dir: &str, crate_dir: &str) -> (TestsFolder, toml::Table) {
    let manifest_path = root.join(crate_dir).join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest_path)
        .unwrap_or_else(|e| panic!("{}: {e}", manifest_path.display()));
    let manifest: toml::Table =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", manifest_path.display()));
    let folder_path = root.join(dir);
    let mut modules = BTreeSet::new();
    for entry in std::fs::read_dir(&folder_path).expect("a tests folder") {
        let path = entry.expect("a tests folder entry").path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a UTF-8 file name")
            .to_owned();
        if path.is_dir() {
            if path.join("mod.rs").is_file() {
                modules.insert(name);
            }
        } else if let Some(stem) = name.strip_suffix(".rs")
            && stem != "main"
        {
            modules.insert(stem.to_owned());
        }
    }
    let crate_path = root.join(crate_dir);
    let missing_paths = manifest
        .get("test")
        .and_then(toml::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|t| t.get("path").and_then(toml::Value::as_str))
        .filter(|path| !crate_path.join(path).is_file())
        .map(str::to_owned)
        .collect();
    let own_tests_dir = Path::new(dir) == Path::new(crate_dir).join("tests");
    let main_path = if own_tests_dir {
        "tests/main.rs".to_owned()
    } else {
        format!("../../{dir}/main.rs")
    };
    let folder = TestsFolder {
        label: dir.to_owned(),
        main_path,
        modules,
        main_rs: std::fs::read_to_string(folder_path.join("main.rs")).ok(),
        own_tests_dir,
        missing_paths,
    };
    (folder, manifest)
}

/// Every tests folder is one test binary that runs every file in it: the
/// top-level `tests/` (the cli crate's black-box tests) and each
/// `services/<crate>/tests/`.
#[test]
fn every_tests_folder_is_one_binary_with_every_file_wired_in() {
    let root = repo_root();
    let mut folders = vec![("tests".to_owned(), "services/cli".to_owned())];
    for name in workspace_manifests().keys() {
        let dir = format!("services/{name}/tests");
        if root.join(&dir).is_dir() {
            folders.push((dir, format!("services/{name}")));
        }
    }
    assert!(
        folders.len() > 5,
        "too few tests folders found: {folders:?}"
    );
    let mut problems = Vec::new();
    for (dir, crate_dir) in &folders {
        let (folder, manifest) = tests_folder(&root, dir, crate_dir);
        problems.extend(wiring_problems(&folder, &manifest, crate_dir));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The wiring check itself: a file not declared in `main.rs`, a missing
/// `main.rs`, a folder without its `[[test]]` and cargo's discovery left on
/// are each reported.
#[test]
fn a_test_file_not_wired_in_is_reported() {
    let folder = TestsFolder {
        label: "services/x/tests".into(),
        main_path: "tests/main.rs".into(),
        modules: ["common", "one", "two"].map(str::to_owned).into(),
        main_rs: Some("//! x\n\nmod common;\n\nmod one;\n// mod two;\n".into()),
        own_tests_dir: true,
        missing_paths: Vec::new(),
    };
    let wired: toml::Table = toml::from_str(
        "[package]\nname = \"x\"\nautotests = false\n\n[[test]]\nname = \"integration\"\npath = \"tests/main.rs\"\n",
    )
    .unwrap();
    let problems = wiring_problems(&folder, &wired, "services/x");
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(
        problems[0].contains("`two` is not a module of services/x/tests/main.rs"),
        "{problems:#?}"
    );

    let complete = TestsFolder {
        main_rs: Some("mod common;\nmod one;\npub mod two;\n".into()),
        ..folder.clone()
    };
    assert!(wiring_problems(&complete, &wired, "services/x").is_empty());

    let unwired: toml::Table = toml::from_str("[package]\nname = \"x\"\n").unwrap();
    let problems = wiring_problems(&complete, &unwired, "services/x");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("is not one test binary")),
        "{problems:#?}"
    );
    assert!(
        problems.iter().any(|p| p.contains("autotests = false")),
        "{problems:#?}"
    );

    let no_main = TestsFolder {
        main_rs: None,
        missing_paths: vec!["tests/main.rs".into()],
        ..folder
    };
    let problems = wiring_problems(&no_main, &wired, "services/x");
    assert!(
        problems
            .iter()
            .any(|p| p.contains("main.rs does not exist")),
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| p.contains("tests/main.rs does not exist")),
        "{problems:#?}"
    );
}
