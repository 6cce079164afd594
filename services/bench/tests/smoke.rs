//! CI smoke of every benchmark scenario: each runs for about a second in
//! debug at tiny concurrency against the real binaries, and must complete
//! with zero protocol errors. No thresholds: this keeps the suite from
//! rotting, it does not measure anything.
//!
//! Needs `redis-server` and `secantusd-rs` on PATH (`scripts/setup-test-deps`);
//! a missing program fails the test with the bench's message naming it.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn bench_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_corkboard-bench"))
}

/// The `corkboard` binary of this build profile. `scripts/test` (and
/// `cargo nextest run --workspace`) build it next to the bench binary
/// before any test runs, so it is used as found; only when it is missing
/// (this package's tests alone on a fresh target dir) is it built here.
/// Building it from inside a test on every run thrashed artifacts with the
/// test build (a different feature set, the binary relinked each time)
/// and, on a loaded 2-core CI machine, outlasted the test's time bound.
fn corkboard_bin() -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT
        .get_or_init(|| {
            let bin = bench_bin().with_file_name("corkboard");
            if bin.is_file() {
                return bin;
            }
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let status = Command::new(cargo)
                .current_dir(repo_root())
                .args(["build", "--quiet", "--locked", "-p", "corkboard-cli"])
                .status()
                .expect("run cargo to build corkboard-cli");
            assert!(status.success(), "cargo build -p corkboard-cli failed");
            assert!(
                bin.is_file(),
                "{} missing after building corkboard-cli",
                bin.display()
            );
            bin
        })
        .clone()
}

/// Runs one scenario and returns its records; fails on a non-zero exit, a
/// `failed` record, or any record with errors.
fn scenario(args: &[&str]) -> Vec<Value> {
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("results.jsonl");
    let logs = dir.path().join("logs");
    let output = Command::new(bench_bin())
        .args(args)
        .arg("--out")
        .arg(&out)
        .arg("--logs")
        .arg(&logs)
        .arg("--corkboard")
        .arg(corkboard_bin())
        .output()
        .expect("run corkboard-bench");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let logs_text = std::fs::read_dir(&logs)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| {
            let text = std::fs::read_to_string(e.path()).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(10).collect();
            format!(
                "--- {}:\n{}",
                e.path().display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        output.status.success(),
        "corkboard-bench {args:?} failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}\nlogs:\n{logs_text}",
        output.status
    );
    let records: Vec<Value> = std::fs::read_to_string(&out)
        .expect("results file")
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert!(!records.is_empty(), "no records from {args:?}:\n{stdout}");
    for record in &records {
        assert_ne!(record["kind"], "failed", "{record}");
        assert_eq!(
            record["errors"], 0,
            "errors in {args:?}: {record}\nlogs:\n{logs_text}"
        );
    }
    records
}

fn kinds(records: &[Value], kind: &str) -> usize {
    records.iter().filter(|r| r["kind"] == kind).count()
}

/// A short load: two connections for a second, no warm-up.
const LOAD: &[&str] = &["--concurrency", "2", "--duration", "1s", "--warmup", "0s"];

fn mcp(endpoint: &str, store: &str, registry: &str) {
    let mut args = vec![
        "mcp",
        "--endpoint",
        endpoint,
        "--store",
        store,
        "--registry",
        registry,
    ];
    args.extend_from_slice(LOAD);
    args.extend_from_slice(&["--eras", "stateless,legacy"]);
    let records = scenario(&args);
    assert_eq!(kinds(&records, "ceiling"), 1);
    // Three tools (get_issue, list_issues, create_issue) in two eras,
    // every one answered.
    assert_eq!(kinds(&records, "mcp"), 6);
    for r in records.iter().filter(|r| r["kind"] == "mcp") {
        assert!(r["count"].as_u64().unwrap_or(0) > 0, "{r}");
        assert!(r["ratio"].as_f64().unwrap_or(0.0) > 0.0, "{r}");
        // The list's rows also compare with a ceiling answering as much.
        let sized = r["values"]["ratio_sized"].as_f64();
        if r["labels"]["tool"] == "list_issues" {
            assert!(sized.unwrap_or(0.0) > 0.0, "{r}");
        } else {
            assert_eq!(sized, None, "{r}");
        }
    }
    // Each create point says the board it started from: the seeded one,
    // then one grown by the point before.
    let boards: Vec<f64> = records
        .iter()
        .filter(|r| r["kind"] == "mcp" && r["labels"]["tool"] == "create_issue")
        .map(|r| r["values"]["board_open_issues"].as_f64().unwrap_or(-1.0))
        .collect();
    assert_eq!(boards.len(), 2, "{boards:?}");
    assert!(boards[0] >= 1.0 && boards[1] > boards[0], "{boards:?}");
    let sized: Vec<&Value> = records
        .iter()
        .filter(|r| r["kind"] == "ceiling_sized")
        .collect();
    assert_eq!(sized.len(), 1);
    // A page of 50 issues is tens of kilobytes.
    assert!(
        sized[0]["values"]["answer_bytes"].as_f64().unwrap_or(0.0) > 10_000.0,
        "{}",
        sized[0]
    );
}

#[test]
fn studio_sqlite_memory() {
    mcp("studio", "sqlite", "memory");
}

#[test]
fn studio_sqlite_redis() {
    mcp("studio", "sqlite", "redis");
}

#[test]
fn studio_mongodb_memory() {
    mcp("studio", "mongodb", "memory");
}

#[test]
fn gateway_sqlite_redis() {
    mcp("gateway", "sqlite", "redis");
}

#[test]
fn shared_sqlite_memory() {
    mcp("shared", "sqlite", "memory");
}

/// A create load of distinct titles runs, is labelled so, and its issues
/// are filed (the records count them, and none is an error).
#[test]
fn create_load_of_distinct_titles() {
    let mut args = vec![
        "mcp",
        "--endpoint",
        "studio",
        "--store",
        "sqlite",
        "--registry",
        "memory",
        "--tools",
        "create_issue",
        "--titles",
        "distinct",
        "--eras",
        "stateless",
    ];
    args.extend_from_slice(LOAD);
    let records = scenario(&args);
    let creates: Vec<&Value> = records.iter().filter(|r| r["kind"] == "mcp").collect();
    assert_eq!(creates.len(), 1, "{records:?}");
    assert_eq!(creates[0]["labels"]["titles"], "distinct", "{}", creates[0]);
    assert!(
        creates[0]["count"].as_u64().unwrap_or(0) > 0,
        "{}",
        creates[0]
    );
}

/// The endpoint's floor: a no-tool load in both eras through a run's
/// gateway (`server/discover`, and `ping` in 2025 sessions), every request
/// answered with a result.
#[test]
fn no_tool_load_through_a_gateway() {
    let mut args = vec![
        "mcp",
        "--endpoint",
        "gateway",
        "--store",
        "sqlite",
        "--registry",
        "memory",
        "--tools",
        "no_tool",
        "--eras",
        "stateless,legacy",
    ];
    args.extend_from_slice(LOAD);
    let records = scenario(&args);
    let floors: Vec<&Value> = records.iter().filter(|r| r["kind"] == "mcp").collect();
    assert_eq!(floors.len(), 2, "{records:?}");
    for r in floors {
        assert_eq!(r["labels"]["tool"], "no_tool", "{r}");
        assert!(r["count"].as_u64().unwrap_or(0) > 0, "{r}");
        assert_eq!(r["errors"], 0, "{r}");
    }
}

#[test]
fn revocation() {
    let records = scenario(&["revocation", "--trials", "5"]);
    assert_eq!(records[0]["count"], 5);
}

#[test]
fn queue() {
    let records = scenario(&[
        "queue",
        "--issues",
        "120",
        "--claimants",
        "4",
        "--reads",
        "2",
    ]);
    // The whole-board reads on the seeded board, then the drain.
    assert_eq!(records[0]["kind"], "queue_ready_list");
    assert_eq!(records[1]["kind"], "queue_board_stats");
    assert_eq!(records[1]["count"], 2);
    let drain = &records[2];
    assert_eq!(drain["kind"], "queue_claim_next");
    assert_eq!(drain["errors"], 0, "{drain}");
    // 120 issues in 3 batches: two blocked, 118 ready, each claimed once.
    assert_eq!(drain["values"]["ready"], 118.0);

    // No claimants: the reads alone.
    let reads = scenario(&[
        "queue",
        "--issues",
        "60",
        "--claimants",
        "0",
        "--reads",
        "1",
    ]);
    let kinds: Vec<&Value> = reads.iter().map(|r| &r["kind"]).collect();
    assert_eq!(kinds, ["queue_ready_list", "queue_board_stats"]);
    assert!(
        reads.iter().all(|r| r["errors"] == 0),
        "the reads agree with the board: {reads:?}"
    );
}

#[test]
fn queue_on_mongodb() {
    let records = scenario(&[
        "queue",
        "--store",
        "mongodb",
        "--issues",
        "120",
        "--claimants",
        "8",
        "--reads",
        "2",
    ]);
    assert_eq!(records[0]["kind"], "queue_ready_list");
    assert_eq!(records[0]["errors"], 0, "{}", records[0]);
    assert_eq!(records[1]["kind"], "queue_board_stats");
    assert_eq!(records[1]["errors"], 0, "{}", records[1]);
    assert_eq!(records[1]["labels"]["at_least"], "", "{}", records[1]);
    let drain = &records[2];
    assert_eq!(drain["kind"], "queue_claim_next");
    assert_eq!(drain["errors"], 0, "{drain}");
    assert_eq!(drain["values"]["ready"], 118.0);
}

#[test]
fn register_latency() {
    for mode in ["gateway", "shared"] {
        let records = scenario(&["register-latency", "--mode", mode, "--trials", "5"]);
        assert_eq!(records[0]["count"], 5);
    }
}

#[test]
fn idle_runs() {
    let records = scenario(&[
        "idle-runs",
        "--mode",
        "shared",
        "--runs",
        "20",
        "--parallel",
        "4",
    ]);
    assert_eq!(records[0]["values"]["runs"], 20.0);
}

#[test]
fn cold_start() {
    let records = scenario(&["cold-start", "--trials", "1"]);
    assert_eq!(kinds(&records, "cold_start"), 2);
    assert_eq!(kinds(&records, "idle_rss"), 1);
}

#[test]
fn answer_size() {
    let records = scenario(&["answer-size"]);
    assert_eq!(kinds(&records, "answer_size"), 7);
    for record in &records {
        let bytes = record["values"]["bytes"].as_f64().unwrap();
        let shape = record["labels"]["shape"].as_str().unwrap();
        if shape.contains("today") {
            assert!(bytes <= 32_000.0, "within the default budget: {record}");
        }
        if shape.contains("before") && record["values"]["items"].as_f64() > Some(3.0) {
            assert!(bytes > 100_000.0, "whole issues were far larger: {record}");
        }
    }
}

#[test]
fn load_refuses_other_machines() {
    let output = Command::new(bench_bin())
        .args([
            "load",
            "--url",
            "http://192.0.2.1:80/mcp",
            "--token",
            "cbr_x",
            "--issue-id",
            "iss_x",
        ])
        .output()
        .expect("run corkboard-bench");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("not a loopback address"), "{stderr}");
}

#[test]
fn report_renders_a_run() {
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("r.jsonl");
    let records = scenario(&[
        "mcp",
        "--concurrency",
        "1",
        "--duration",
        "1s",
        "--warmup",
        "0s",
        "--tools",
        "create_issue",
    ]);
    let lines: Vec<String> = records.iter().map(Value::to_string).collect();
    std::fs::write(&input, lines.join("\n")).expect("write records");
    let output = dir.path().join("numbers.md");
    let status = Command::new(bench_bin())
        .args(["report", "--input"])
        .arg(&input)
        .arg("--output")
        .arg(&output)
        .status()
        .expect("run report");
    assert!(status.success());
    let text = std::fs::read_to_string(&output).expect("numbers.md");
    assert!(
        text.contains("### studio endpoint · sqlite store · memory registry"),
        "{text}"
    );
    assert!(
        text.contains("| create_issue | stateless | 1 | 1 |"),
        "{text}"
    );
}

#[test]
fn curves_on_both_stores_render_and_plot() {
    let mut records = scenario(&[
        "curves", "--store", "sqlite", "--issues", "30,10", "--calls", "5",
    ]);
    records.extend(scenario(&[
        "curves", "--store", "mongodb", "--issues", "10", "--calls", "3",
    ]));
    let bulk = scenario(&[
        "curves", "--store", "sqlite", "--issues", "12", "--calls", "3", "--bulk",
    ]);
    assert!(
        bulk.iter().all(|r| r["labels"]["seed_path"] == "bulk"),
        "{bulk:?}"
    );
    records.extend(bulk);
    // Four operations at each size, sizes in increasing order.
    assert_eq!(kinds(&records, "curve"), 16);
    let sizes: Vec<f64> = records
        .iter()
        .filter(|r| r["labels"]["store"] == "sqlite" && r["labels"]["seed_path"] == "create")
        .map(|r| r["values"]["issues"].as_f64().unwrap())
        .collect();
    assert_eq!(sizes, [10.0, 10.0, 10.0, 10.0, 30.0, 30.0, 30.0, 30.0]);
    for r in &records {
        assert!(r["count"].as_u64().unwrap() > 0, "{r}");
        assert!(r["values"]["store_bytes"].as_f64().unwrap() > 0.0, "{r}");
        assert!(r["values"]["rss_kib"].as_f64().unwrap() > 0.0, "{r}");
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("r.jsonl");
    let lines: Vec<String> = records.iter().map(Value::to_string).collect();
    std::fs::write(&input, lines.join("\n")).expect("write records");
    let plots = dir.path().join("curves");
    let output = Command::new(bench_bin())
        .args(["plot", "--input"])
        .arg(&input)
        .arg("--output")
        .arg(&plots)
        .output()
        .expect("run plot");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for file in ["curves-p50.png", "curves-p99.png"] {
        let png = std::fs::read(plots.join(file)).expect("a plot");
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "{file} is no PNG");
        assert!(png.len() > 10_000, "{file}: {} bytes", png.len());
    }
    let md = dir.path().join("numbers.md");
    let status = Command::new(bench_bin())
        .args(["report", "--input"])
        .arg(&input)
        .arg("--output")
        .arg(&md)
        .status()
        .expect("run report");
    assert!(status.success());
    let text = std::fs::read_to_string(&md).expect("numbers.md");
    assert!(text.contains("## Cost curves"), "{text}");
    assert!(
        text.contains("| sqlite search_issues 30 issues |"),
        "{text}"
    );
    assert!(
        text.contains("![curves-p99.png](curves/curves-p99.png)"),
        "{text}"
    );
}

#[test]
fn mongodb_bulk_curve_and_tenants_render_and_plot() {
    let mut records = scenario(&[
        "curves", "--store", "mongodb", "--issues", "12", "--calls", "3", "--bulk",
    ]);
    assert_eq!(kinds(&records, "curve"), 4);
    for r in &records {
        assert_eq!(r["labels"]["seed_path"], "bulk", "{r}");
        assert_eq!(r["values"]["calls"].as_f64(), Some(3.0), "{r}");
    }
    let tenants = scenario(&[
        "tenants",
        "--tenants",
        "3,1",
        "--calls",
        "3",
        "--new-tenants",
        "2",
    ]);
    // Nine figures per count, counts in increasing order.
    assert_eq!(kinds(&tenants, "tenants"), 18);
    let counts: Vec<f64> = tenants
        .iter()
        .filter(|r| r["labels"]["tool"] == "footprint")
        .map(|r| r["values"]["tenants"].as_f64().unwrap())
        .collect();
    assert_eq!(counts, [1.0, 3.0]);
    for r in &tenants {
        let tool = r["labels"]["tool"].as_str().unwrap();
        if tool == "footprint" {
            assert!(r["values"]["server_rss_kib"].as_f64().unwrap() > 0.0, "{r}");
            assert!(r["values"]["store_bytes"].as_f64().unwrap() > 0.0, "{r}");
        } else {
            // `corkboard` is built next to the bench here, so serve ready
            // is measured too.
            assert!(r["count"].as_u64().unwrap() > 0, "{r}");
        }
    }
    records.extend(tenants);
    let dir = tempfile::tempdir().expect("temp dir");
    let input = dir.path().join("r.jsonl");
    let lines: Vec<String> = records.iter().map(Value::to_string).collect();
    std::fs::write(&input, lines.join("\n")).expect("write records");
    let plots = dir.path().join("curves");
    let output = Command::new(bench_bin())
        .args(["plot", "--input"])
        .arg(&input)
        .arg("--output")
        .arg(&plots)
        .output()
        .expect("run plot");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let png = std::fs::read(plots.join("tenants.png")).expect("the tenants plot");
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n"),
        "tenants.png is no PNG"
    );
    let md = dir.path().join("numbers.md");
    let status = Command::new(bench_bin())
        .args(["report", "--input"])
        .arg(&input)
        .arg("--output")
        .arg(&md)
        .status()
        .expect("run report");
    assert!(status.success());
    let text = std::fs::read_to_string(&md).expect("numbers.md");
    assert!(
        text.contains("## Tenants on one MongoDB database"),
        "{text}"
    );
    assert!(
        text.contains("| 3 tenants | list_issues random |"),
        "{text}"
    );
    assert!(text.contains("What the figures say: "), "{text}");
    assert!(
        text.contains("![tenants.png](curves/tenants.png)"),
        "{text}"
    );
}

#[test]
fn legacy_sessions_with_their_control() {
    let records = scenario(&[
        "legacy-sessions",
        "--mode",
        "shared",
        "--sessions",
        "10,30",
        "--parallel",
        "4",
    ]);
    assert_eq!(kinds(&records, "legacy_sessions"), 3, "{records:?}");
    assert_eq!(records[1]["values"]["sessions"], 30.0);
    // Every session of the last count probed again (fewer than 100).
    assert_eq!(records[1]["values"]["probed_sessions"], 30.0);
    assert_eq!(records[2]["values"]["calls"], 30.0);
}

#[test]
fn driver_overhead_compares_both_sides() {
    let records = scenario(&[
        "driver-overhead",
        "--calls",
        "20",
        "--issues",
        "20",
        "--concurrency",
        "1,4",
    ]);
    // 3 operations x 2 concurrencies x 2 sides.
    assert_eq!(kinds(&records, "driver_overhead"), 12, "{records:?}");
    for record in &records {
        assert_eq!(record["count"], 20, "{record}");
        let store = record["labels"]["mode"] == "store";
        assert_eq!(
            record["values"].get("store_share_p50_pct").is_some(),
            store,
            "{record}"
        );
    }
}

#[test]
fn profile_per_request_and_breakdown() {
    let records = scenario(&[
        "profile",
        "--tools",
        "get_issue,create_issue",
        "--titles",
        "distinct",
        "--concurrency",
        "4",
        "--duration",
        "1s",
        "--warmup",
        "0.2s",
    ]);
    assert_eq!(kinds(&records, "profile"), 2, "{records:?}");
    for record in records.iter().filter(|r| r["kind"] == "profile") {
        let cpu = record["values"]["cpu_us_per_request"].as_f64().unwrap();
        assert!(cpu > 0.0, "{record}");
        // The titles option is for creates, and a create load says so.
        let titles = &record["labels"]["titles"];
        match record["labels"]["tool"].as_str() {
            Some("create_issue") => assert_eq!(titles, "distinct", "{record}"),
            _ => assert!(titles.is_null(), "{record}"),
        }
    }
    // With perf (installed and permitted here), the categories cover
    // every sample; without it, the /proc figures alone, saying so.
    let shares: Vec<f64> = records
        .iter()
        .filter(|r| r["kind"] == "profile_category")
        .map(|r| r["values"]["share_pct"].as_f64().unwrap())
        .collect();
    if shares.is_empty() {
        let note = records[0]["note"].as_str().unwrap_or_default();
        assert!(note.contains("no perf breakdown"), "{note}");
    } else {
        // Each tool's categories sum to 100.
        let total: f64 = shares.iter().sum();
        assert!((199.8..=200.2).contains(&total), "shares sum to {total}");
    }
}

#[test]
fn noisy_neighbour_measures_b_alone_and_under_each_attack() {
    // Small attacks: the slow connections stay below the connection cap,
    // so B's calls must all be answered here; what the full-size attacks
    // do to B is what the benchmark itself reports.
    let records = scenario(&[
        "noisy-neighbour",
        "--a-issues",
        "500",
        "--b-issues",
        "20",
        "--calls",
        "10",
        "--slow-connections",
        "50",
        "--attacks",
        "search-storm,slow-connections,oversized-answer,held-calls",
    ]);
    let phases = [
        "none (alone)",
        "search storm",
        "slow connections from one address",
        "oversized upstream answer",
        "held calls",
        "none (alone again, after the attacks)",
    ];
    for phase in phases {
        for tool in ["get_issue", "list_issues"] {
            let read = records
                .iter()
                .find(|r| {
                    r["kind"] == "noisy_neighbour"
                        && r["labels"]["mode"] == phase
                        && r["labels"]["tool"] == tool
                })
                .unwrap_or_else(|| panic!("no {tool} record for {phase}: {records:#?}"));
            assert_eq!(read["count"], 10, "{read}");
            assert!(read["p99_ms"].as_f64().unwrap_or(0.0) > 0.0, "{read}");
        }
    }
    let attack = |phase: &str| {
        records
            .iter()
            .find(|r| r["kind"] == "noisy_attack" && r["labels"]["mode"] == phase)
            .unwrap_or_else(|| panic!("no attack record for {phase}: {records:#?}"))
    };
    // B's probes work against the real binary: its own held upstream call
    // is held, its own webhook delivered.
    let alone = attack("none (alone)");
    assert_eq!(alone["values"]["b_held_call_admitted"], 1.0, "{alone}");
    assert!(
        alone["values"]["b_webhook_delivery_ms"].is_number(),
        "{alone}"
    );
    // Each attack really ran against the server.
    for (phase, outcome) in [
        ("search storm", "ok "),
        ("slow connections from one address", "ended 408"),
        (
            "oversized upstream answer",
            "listed, upstreams refused as too large",
        ),
        ("held calls", "held (input_required)"),
    ] {
        let r = attack(phase);
        assert_eq!(r["labels"]["outcome"], "measured", "{r}");
        let note = r["note"].as_str().unwrap_or("");
        assert!(note.contains(outcome), "{phase}: {note}");
    }
    assert!(
        attack("oversized upstream answer")["values"]["rss_peak_kib"]
            .as_f64()
            .unwrap_or(0.0)
            > 0.0
    );
}
