//! Renders the records of a suite run as markdown (`docs/numbers.md`):
//! the machine and the date, the targets with what was measured against
//! them, every figure with its ratio to the ceiling, what could not be
//! measured and why, and the exact commands.

use crate::error::{BenchError, Result};
use crate::record::{self, Record};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

/// Writes the report for the records in `input` to `output`.
pub fn write(
    input: &Path,
    output: &Path,
    note: Option<&str>,
    suite_command: &str,
    findings: Option<&str>,
) -> Result<()> {
    let records = record::read(input)?;
    let mut text = render(&records, &Machine::probe(), note, suite_command);
    if let Some(findings) = findings {
        text.push_str(findings.trim_end());
        text.push('\n');
    }
    if let Some(parent) = output.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent)
            .map_err(BenchError::io(format!("create {}", parent.display())))?;
    }
    std::fs::write(output, text).map_err(BenchError::io(format!("write {}", output.display())))
}

/// What the figures were measured on.
#[derive(Debug, Clone, Default)]
pub struct Machine {
    pub cpus: usize,
    pub model: String,
    pub memory_mib: u64,
    pub kernel: String,
}

impl Machine {
    pub fn probe() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let cpuinfo = read("/proc/cpuinfo");
        let model = cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|r| r.split_once(':'))
            .map(|(_, m)| m.trim().to_owned())
            .unwrap_or_else(|| "unknown".into());
        let memory_mib = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|r| r.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map_or(0, |kib| kib / 1024);
        Self {
            cpus: std::thread::available_parallelism().map_or(0, usize::from),
            model,
            memory_mib,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_owned(),
        }
    }
}

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.2}"))
}

fn label<'a>(r: &'a Record, key: &str) -> &'a str {
    r.labels.get(key).map_or("", String::as_str)
}

/// A point's tool, with the titles of a create load that did not file one
/// title throughout (`mcp --titles distinct`): its figures are another
/// board's, not the suite's usual create point's.
fn tool(r: &Record) -> String {
    match label(r, "titles") {
        "" => label(r, "tool").to_owned(),
        titles => format!("{} ({titles} titles)", label(r, "tool")),
    }
}

fn value(r: &Record, key: &str) -> Option<f64> {
    r.values.get(key).copied()
}

/// One target: what it asks, and every record that measures it.
struct Target {
    text: &'static str,
    rows: Vec<(String, String, Option<bool>)>,
}

fn targets(records: &[Record]) -> Vec<Target> {
    let mcp: Vec<&Record> = records.iter().filter(|r| r.kind == "mcp").collect();
    let mut out = Vec::new();

    let rows = mcp
        .iter()
        .filter(|r| {
            label(r, "endpoint") == "gateway"
                && label(r, "registry") == "redis"
                && label(r, "tool") == "get_issue"
                && r.concurrency == Some(64)
        })
        .map(|r| {
            let ratio = r.ratio.unwrap_or(0.0);
            (
                format!("{} store, {}", label(r, "store"), label(r, "era")),
                format!(
                    "{:.1}% ({:.0} of {:.0} req/s)",
                    ratio * 100.0,
                    r.rps.unwrap_or(0.0),
                    r.ceiling_rps.unwrap_or(0.0)
                ),
                Some(ratio >= 0.5 && r.errors == 0),
            )
        })
        .collect();
    out.push(Target {
        text: "`get_issue` through a per-run gateway with the Redis registry ≥ 50% of the ceiling's req/s at concurrency 64",
        rows,
    });

    let rows = mcp
        .iter()
        .filter(|r| {
            label(r, "store") == "sqlite"
                && label(r, "tool") == "create_issue"
                && r.concurrency == Some(64)
        })
        .map(|r| {
            let p99 = r.p99_ms.unwrap_or(f64::INFINITY);
            let disk = records
                .iter()
                .find(|d| d.kind == "disk" && d.command == r.command)
                .map_or_else(String::new, |d| {
                    format!(
                        " (disk fsync in the same run: p50 {} ms, p99 {} ms)",
                        ms(d.p50_ms),
                        ms(d.p99_ms)
                    )
                });
            (
                format!(
                    "{} endpoint, {} registry, {}",
                    label(r, "endpoint"),
                    label(r, "registry"),
                    match label(r, "titles") {
                        "" => label(r, "era").to_owned(),
                        titles => format!("{}, {titles} titles", label(r, "era")),
                    }
                ),
                format!("p99 {p99:.2} ms{disk}"),
                Some(p99 <= 5.0 && r.errors == 0),
            )
        })
        .collect();
    out.push(Target {
        text: "`create_issue` p99 ≤ 5 ms on the embedded store at concurrency 64",
        rows,
    });

    let rows = records
        .iter()
        .filter(|r| r.kind == "revocation")
        .map(|r| {
            let p99 = r.p99_ms.unwrap_or(f64::INFINITY);
            (
                format!("{} trials", r.count.unwrap_or(0)),
                format!(
                    "p50 {} ms, p99 {} ms, max {} ms",
                    ms(r.p50_ms),
                    ms(r.p99_ms),
                    ms(r.max_ms)
                ),
                Some(p99 <= 100.0 && r.errors == 0),
            )
        })
        .collect();
    out.push(Target {
        text: "revocation propagation p99 ≤ 100 ms",
        rows,
    });

    let rows = records
        .iter()
        .filter(|r| r.kind == "register")
        .map(|r| {
            let p99 = r.p99_ms.unwrap_or(f64::INFINITY);
            (
                format!(
                    "{} mode, {} registry",
                    label(r, "mode"),
                    label(r, "registry")
                ),
                format!("p50 {} ms, p99 {} ms", ms(r.p50_ms), ms(r.p99_ms)),
                Some(p99 <= 5.0 && r.errors == 0),
            )
        })
        .collect();
    out.push(Target {
        text: "run register → first answered request ≤ 5 ms (judged on p99)",
        rows,
    });

    let rows = records
        .iter()
        .filter(|r| r.kind == "idle_runs")
        .map(|r| {
            let per = value(r, "per_run_kib").unwrap_or(f64::INFINITY);
            let runs = value(r, "runs").unwrap_or(0.0);
            (
                format!("{} mode", label(r, "mode")),
                format!("{per:.1} KiB per run, {runs:.0} runs alive"),
                Some(per <= 64.0 && runs >= 10_000.0 && r.errors == 0),
            )
        })
        .collect();
    out.push(Target {
        text: "≤ 64 KiB per idle run, 10,000 concurrent runs in one process",
        rows,
    });

    let rows = records
        .iter()
        .filter(|r| r.kind == "idle_rss")
        .map(|r| {
            let ready = value(r, "ready_kib").unwrap_or(f64::INFINITY);
            (
                "corkboard serve".to_owned(),
                format!(
                    "{:.1} MiB once ready; {:.1} MiB after use",
                    ready / 1024.0,
                    value(r, "after_use_kib").unwrap_or(0.0) / 1024.0
                ),
                Some(ready <= 30.0 * 1024.0),
            )
        })
        .collect();
    out.push(Target {
        text: "idle RSS of `corkboard serve` ≤ 30 MiB (judged once ready)",
        rows,
    });

    let rows = records
        .iter()
        .filter(|r| r.kind == "cold_start")
        .map(|r| {
            let p50 = r.p50_ms.unwrap_or(f64::INFINITY);
            (
                label(r, "start").to_owned(),
                format!("p50 {} ms, max {} ms", ms(r.p50_ms), ms(r.max_ms)),
                Some(p50 <= 100.0),
            )
        })
        .collect();
    out.push(Target {
        text: "cold start of `corkboard serve` to ready ≤ 100 ms (judged on the median)",
        rows,
    });
    out
}

/// The whole document.
pub fn render(
    records: &[Record],
    machine: &Machine,
    note: Option<&str>,
    suite_command: &str,
) -> String {
    let (budgeted, rest): (Vec<Record>, Vec<Record>) = records
        .iter()
        .cloned()
        .partition(|r| in_budget_comparison(r, records));
    let records = &rest[..];
    let mut s = String::new();
    let first = records
        .iter()
        .chain(&budgeted)
        .map(|r| r.at.as_str())
        .min()
        .unwrap_or("");
    let last = records
        .iter()
        .chain(&budgeted)
        .map(|r| r.at.as_str())
        .max()
        .unwrap_or("");
    let _ = writeln!(s, "# Numbers\n");
    let _ = writeln!(
        s,
        "Generated by `{suite_command}` from the records in `target/bench/results.jsonl`; do not edit by hand.\n"
    );
    let minute = |at: &str| at.get(..16).unwrap_or(at).replace('T', " ");
    let _ = writeln!(s, "- **Date**: {} to {} UTC", minute(first), minute(last));
    let _ = writeln!(
        s,
        "- **Machine**: {} CPUs ({}), {} MiB RAM, Linux {}",
        machine.cpus, machine.model, machine.memory_mib, machine.kernel
    );
    let _ = writeln!(
        s,
        "- **Build**: `cargo build --release -p corkboard-cli -p corkboard-bench` (workspace release profile: thin LTO)"
    );
    if let Some(note) = note {
        let _ = writeln!(s, "- **Conditions**: {note}");
    }
    let _ = writeln!(
        s,
        "\nThe load generator runs on the same cores as the server (one runtime thread, one keep-alive \
         connection per unit of concurrency, closed loop: each connection sends its next request when \
         the previous one is answered). Latencies are per request, send to last byte, from an HDR \
         histogram. The **ceiling** is an actix-web server with the same worker settings answering a \
         fixed JSON-RPC result; it is measured at the same concurrency right before each target. \
         Absolute figures drift with the machine's other load; the ratio to the ceiling is the figure \
         that holds.\n"
    );

    let _ = writeln!(s, "## Targets\n");
    let _ = writeln!(
        s,
        "| target | where | measured | met |\n| --- | --- | --- | --- |"
    );
    for target in targets(records) {
        if target.rows.is_empty() {
            let _ = writeln!(s, "| {} | - | not measured (see below) | - |", target.text);
        }
        for (where_, measured, met) in target.rows {
            let met = match met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "-",
            };
            let _ = writeln!(s, "| {} | {where_} | {measured} | {met} |", target.text);
        }
    }

    let mcp: Vec<&Record> = records.iter().filter(|r| r.kind == "mcp").collect();
    if !mcp.is_empty() {
        let _ = writeln!(s, "\n## MCP throughput and latency\n");
        let _ = writeln!(
            s,
            "Ratio = the target's req/s ÷ the ceiling's req/s at the same concurrency, measured right before. \
             Latencies in ms. At concurrency 1 throughput is pure round-trip latency and the ceiling itself \
             swings by a factor of three between runs on this machine (see \"The ceiling across the run\"), \
             so ratios at concurrency 1 are the least reliable. A list page is tens of kilobytes: \
             its row also gives the ratio to a second ceiling answering as many bytes (\"same bytes\"), \
             what sending and reading them leaves to any server. Creates grow the board from point to point, \
             and a create costs more on a larger board: \"board\" is how many open issues a create point \
             started from (≥: the store's count stopped at its cap).\n"
        );
        let mut groups: BTreeMap<(usize, usize, usize), Vec<&Record>> = BTreeMap::new();
        for r in &mcp {
            groups.entry(group_key(r)).or_default().push(r);
        }
        for rows in groups.into_values() {
            let (endpoint, store, registry) = (
                label(rows[0], "endpoint"),
                label(rows[0], "store"),
                label(rows[0], "registry"),
            );
            let _ = writeln!(
                s,
                "### {endpoint} endpoint · {store} store · {registry} registry\n"
            );
            let _ = writeln!(
                s,
                "| tool | era | conc. | board | req/s | ceiling req/s | ratio | ratio, same bytes | p50 | p90 | p99 | max | errors |\n\
                 | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
            );
            for r in &rows {
                let _ = writeln!(
                    s,
                    "| {} | {} | {} | {} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} | {} |",
                    tool(r),
                    label(r, "era"),
                    r.concurrency.unwrap_or(0),
                    board_size(r),
                    r.rps.unwrap_or(0.0),
                    r.ceiling_rps.unwrap_or(0.0),
                    r.ratio
                        .map_or_else(|| "-".into(), |x| format!("{:.1}%", x * 100.0)),
                    r.values
                        .get("ratio_sized")
                        .map_or_else(|| "-".into(), |x| format!("{:.1}%", x * 100.0)),
                    ms(r.p50_ms),
                    ms(r.p90_ms),
                    ms(r.p99_ms),
                    ms(r.max_ms),
                    errors(r)
                );
            }
            let _ = writeln!(s);
            for command in distinct(rows.iter().map(|r| r.command.as_str())) {
                let _ = writeln!(s, "Command: `{command}`\n");
            }
        }
    }

    let ceilings: Vec<&Record> = records.iter().filter(|r| r.kind == "ceiling").collect();
    if !ceilings.is_empty() {
        let mut by_c: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
        for r in &ceilings {
            by_c.entry(r.concurrency.unwrap_or(0))
                .or_default()
                .push(r.rps.unwrap_or(0.0));
        }
        let _ = writeln!(s, "## The ceiling across the run\n");
        let _ = writeln!(
            s,
            "How much the machine's capacity moved while the suite ran (each scenario measures its own ceiling).\n"
        );
        let _ = writeln!(
            s,
            "| conc. | samples | min req/s | median req/s | max req/s |\n| ---: | ---: | ---: | ---: | ---: |"
        );
        for (c, mut v) in by_c {
            v.sort_by(f64::total_cmp);
            let _ = writeln!(
                s,
                "| {c} | {} | {:.0} | {:.0} | {:.0} |",
                v.len(),
                v.first().copied().unwrap_or(0.0),
                record::quantile(&v, 0.5),
                v.last().copied().unwrap_or(0.0)
            );
        }
        let _ = writeln!(s);
    }

    let sections: &[(&str, &str)] = &[
        (
            "disk",
            "Disk: fsync latency where the SQLite board lives (ms)",
        ),
        (
            "revocation",
            "Revocation propagation (two servers sharing Redis)",
        ),
        ("register", "Run register → first answered request"),
        (
            "claims",
            "claim_issue with many runs claiming one issue at once (ms)",
        ),
        (
            "queue_claim_next",
            "claim_next: many runs draining a board with blockers (ms)",
        ),
        (
            "queue_ready_list",
            "list_issues with ready: true, one page (ms)",
        ),
        ("queue_board_stats", "board_stats (ms)"),
        ("idle_runs", "Memory per idle run"),
        ("cold_start", "Cold start of `corkboard serve` to ready"),
        ("idle_rss", "Idle RSS of `corkboard serve`"),
        (
            "hardening_memory",
            "Hardening: server memory under attack (RSS in KiB)",
        ),
        (
            "hardening_revocation",
            "Hardening: revocation convergence after Redis returns",
        ),
        (
            "search",
            "Search latency (`search_issues` store calls, one tenant, one at a time)",
        ),
        (
            "upstream",
            "Upstream tool calls, directly and through a run's gateway (latency ms, CPU µs per call)",
        ),
        (
            "upstream_added",
            "What a run's gateway adds to an upstream tool call",
        ),
        (
            "curve",
            "Cost curves: reads, memory and disk as one tenant's board grows (store calls, ms)",
        ),
        (
            "list_plan",
            "MongoDB: the default list_issues as the board grows, its plan (explain) and the bare driver (ms)",
        ),
        (
            "legacy_sessions",
            "Memory per 1,000 live legacy sessions on one run's gateway",
        ),
        (
            "driver_overhead",
            "MongoDB: the store vs the bare driver, same operations, same server (ms)",
        ),
        (
            "profile",
            "Per-request profile: server CPU and context switches (gateway, SQLite, Redis registry)",
        ),
    ];
    for &(kind, title) in sections {
        let rows: Vec<&Record> = records.iter().filter(|r| r.kind == kind).collect();
        if rows.is_empty() {
            continue;
        }
        let _ = writeln!(s, "## {title}\n");
        let _ = writeln!(
            s,
            "| what | n | p50 | p90 | p99 | max | other figures | errors |\n| --- | ---: | ---: | ---: | ---: | ---: | --- | --- |"
        );
        for r in &rows {
            let others: Vec<String> = r
                .values
                .iter()
                .map(|(k, v)| format!("{k} {v:.1}"))
                .collect();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                what(r, records),
                r.count.map_or_else(|| "-".into(), |n| n.to_string()),
                ms(r.p50_ms),
                ms(r.p90_ms),
                ms(r.p99_ms),
                ms(r.max_ms),
                others.join(", "),
                errors(r)
            );
        }
        for note in distinct(rows.iter().filter_map(|r| r.note.as_deref())) {
            let _ = writeln!(s, "\nNote: {note}.");
        }
        if kind != "disk" {
            for c in distinct(rows.iter().map(|r| r.command.as_str())) {
                let _ = writeln!(s, "\nCommand: `{c}`");
            }
        }
        if kind == "curve" {
            // Drawn by `corkboard-bench plot` into docs/curves next to this file.
            let _ = writeln!(
                s,
                "\nPlots (`corkboard-bench plot --input target/bench/results.jsonl --output docs/curves`):"
            );
            for file in crate::plot::FILES {
                let _ = writeln!(s, "\n![{file}](curves/{file})");
            }
        }
        let _ = writeln!(s);
    }

    budget_cost(&mut s, &budgeted);
    answer_sizes(&mut s, records);
    tenants(&mut s, records);
    profile_breakdown(&mut s, records);
    noisy_neighbour(&mut s, records);

    let failed: Vec<&Record> = records.iter().filter(|r| r.kind == "failed").collect();
    if !failed.is_empty() {
        let _ = writeln!(s, "## Not measured\n");
        for r in failed {
            let _ = writeln!(
                s,
                "- `{}`: {}",
                r.command,
                r.note
                    .as_deref()
                    .unwrap_or("failed")
                    .lines()
                    .next()
                    .unwrap_or("failed")
            );
        }
        let _ = writeln!(s);
    }
    s
}

/// A command without its `--create-budget N`: the unbudgeted twin of a
/// budgeted run has exactly this command.
fn without_budget(command: &str) -> String {
    let mut out = Vec::new();
    let mut words = command.split(' ');
    while let Some(word) = words.next() {
        if word == "--create-budget" {
            words.next();
        } else if !word.starts_with("--create-budget=") {
            out.push(word);
        }
    }
    out.join(" ")
}

/// Whether an MCP record belongs to a budgeted-vs-unbudgeted comparison:
/// a run with `--create-budget`, or the run of the same command without
/// it. Those get their own section, not the throughput tables or the
/// targets (a budget is not what the targets are about).
fn in_budget_comparison(r: &Record, records: &[Record]) -> bool {
    if r.kind != "mcp" {
        return false;
    }
    let budgeted = |r: &Record| !matches!(label(r, "budget"), "" | "none");
    if budgeted(r) {
        return true;
    }
    let bare = without_budget(&r.command);
    records
        .iter()
        .any(|b| b.kind == "mcp" && budgeted(b) && without_budget(&b.command) == bare)
}

/// The budget-cost section: `create_issue` with and without a write
/// budget, the same load side by side, one row per round.
fn budget_cost(s: &mut String, rows: &[Record]) {
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "## create_issue with and without a write budget (studio endpoint, SQLite store)\n"
    );
    let _ = writeln!(
        s,
        "The same load with the grant unbudgeted (`budget none`) and with a `create_issue` budget \
         too large to run out (`create_issue=1000000`), so every create takes one reservation \
         first: from the store's ledger with the memory (embedded) registry, from Redis with the \
         Redis registry. Rows compare with each other (same conditions, run back to back), not \
         with the throughput tables.\n"
    );
    let _ = writeln!(
        s,
        "| registry (counter) | budget | round | c | req/s | p50 ms | p90 ms | p99 ms | n | errors |\n\
         | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"
    );
    let mut sorted: Vec<&Record> = rows.iter().collect();
    // Stable: rounds stay in the order they ran.
    sorted.sort_by_key(|r| {
        (
            group_key(r).2,
            r.concurrency.unwrap_or(0),
            label(r, "budget") != "none",
        )
    });
    let mut rounds: BTreeMap<(String, String, u64), usize> = BTreeMap::new();
    for r in sorted {
        let registry = label(r, "registry");
        let counter = if registry == "redis" {
            "redis (Redis script)".to_owned()
        } else {
            format!("{registry} (ledger)")
        };
        let c = r.concurrency.unwrap_or(0);
        let round = rounds
            .entry((registry.to_owned(), label(r, "budget").to_owned(), c))
            .or_default();
        *round += 1;
        let _ = writeln!(
            s,
            "| {counter} | {} | {round} | {c} | {:.0} | {} | {} | {} | {} | {} |",
            label(r, "budget"),
            r.rps.unwrap_or(0.0),
            ms(r.p50_ms),
            ms(r.p90_ms),
            ms(r.p99_ms),
            r.count.unwrap_or(0),
            errors(r)
        );
    }
    for note in distinct(rows.iter().filter_map(|r| r.note.as_deref())) {
        let _ = writeln!(s, "\nNote: {note}.");
    }
    for c in distinct(rows.iter().map(|r| r.command.as_str())) {
        let _ = writeln!(s, "\nCommand: `{c}`");
    }
    let _ = writeln!(s);
}

/// The answer-size section: bytes of one tool result, not a timing.
fn answer_sizes(s: &mut String, records: &[Record]) {
    let rows: Vec<&Record> = records.iter().filter(|r| r.kind == "answer_size").collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "## Answer size: one tool result on a large board
"
    );
    let _ = writeln!(
        s,
        "Bytes of the whole `result` of one `tools/call` (both content blocks and the envelope) \
         as the server wrote it, stateless era, studio endpoint; tokens estimated as bytes / 4. \
         The result budget is 32,000 bytes (`max_result_bytes`); Claude Code warns above 10,000 \
         tokens of MCP output and cuts at 25,000. \"before\" rows rebuild the answer the board \
         gave before the budget (every issue whole with every comment, its JSON twice) from the \
         same board.\n"
    );
    let _ = writeln!(
        s,
        "| tool | board | answer | bytes | tokens (est.) | structured JSON | text block | items |\n| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"
    );
    for r in &rows {
        let figure = |key: &str| value(r, key).map_or_else(|| "-".into(), |v| format!("{v:.0}"));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            label(r, "tool"),
            label(r, "board"),
            label(r, "shape"),
            figure("bytes"),
            figure("tokens_est"),
            figure("structured_bytes"),
            figure("text_bytes"),
            figure("items"),
        );
    }
    for c in distinct(rows.iter().map(|r| r.command.as_str())) {
        let _ = writeln!(s, "\nCommand: `{c}`");
    }
    let _ = writeln!(s);
}

/// A readiness probe's usual patience: a start-up longer than this makes an
/// orchestrator restart the server before it is ready.
const START_UP_REASONABLE_MS: f64 = 60_000.0;
/// A new tenant's first write slower than this stalls its first agent call.
const FIRST_WRITE_REASONABLE_MS: f64 = 1_000.0;

/// The tenants curve: a table per tenant count and what the figures say
/// (where one collection per tenant stops being reasonable).
fn tenants(s: &mut String, records: &[Record]) {
    let rows: Vec<&Record> = records.iter().filter(|r| r.kind == "tenants").collect();
    if rows.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "## Tenants on one MongoDB database (a collection per tenant; store calls, ms)\n"
    );
    let _ = writeln!(
        s,
        "| tenants | what | n | p50 | p99 | max | other figures |\n| --- | --- | ---: | ---: | ---: | ---: | --- |"
    );
    for r in &rows {
        let others: Vec<String> = r
            .values
            .iter()
            .filter(|(k, _)| !matches!(k.as_str(), "tenants" | "tenants_asked"))
            .map(|(k, v)| format!("{k} {v:.1}"))
            .collect();
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} |",
            label(r, "mode"),
            label(r, "tool"),
            r.count.map_or_else(|| "-".into(), |n| n.to_string()),
            ms(r.p50_ms),
            ms(r.p99_ms),
            ms(r.max_ms),
            others.join(", ")
        );
    }
    for note in distinct(rows.iter().filter_map(|r| r.note.as_deref())) {
        let _ = writeln!(s, "\nNote: {note}.");
    }
    for c in distinct(rows.iter().map(|r| r.command.as_str())) {
        let _ = writeln!(s, "\nCommand: `{c}`");
    }
    let _ = writeln!(
        s,
        "\nPlot (`corkboard-bench plot`): \n\n![{f}](curves/{f})",
        f = crate::plot::TENANT_FILE
    );
    let _ = writeln!(s, "\n{}\n", tenants_conclusion(&rows));
}

/// Where one collection per tenant stops being reasonable, from the
/// figures measured (start-up and first writes against their bounds, the
/// cost per tenant), and what an operator should do then.
fn tenants_conclusion(rows: &[&Record]) -> String {
    let of = |tool: &str| -> Vec<&Record> {
        let mut v: Vec<&Record> = rows
            .iter()
            .copied()
            .filter(|r| label(r, "tool") == tool)
            .collect();
        v.sort_by(|a, b| {
            let t = |r: &Record| r.values.get("tenants").copied().unwrap_or(0.0);
            t(a).total_cmp(&t(b))
        });
        v
    };
    let value = |r: &Record, k: &str| r.values.get(k).copied().unwrap_or(0.0);
    let mut out = String::from("What the figures say: ");
    let startups = of("store start-up");
    if let Some(last) = startups.last() {
        let (n, ms) = (value(last, "tenants"), last.p50_ms.unwrap_or(0.0));
        let per_k = ms / n.max(1.0) * 1000.0;
        let minute_at = START_UP_REASONABLE_MS / per_k.max(1e-9) * 1000.0;
        let _ = write!(
            out,
            "a store's start-up re-creates every tenant's indexes, {:.1} s at {n:.0} tenants \
             (about {:.1} s per 1,000), so every restart of every process costs the database \
             a minute of index work near {minute_at:.0} tenants. ",
            ms / 1000.0,
            per_k / 1000.0,
        );
    }
    if let Some(last) = of("serve ready").into_iter().rfind(|r| r.p50_ms.is_some()) {
        let _ = write!(
            out,
            "`corkboard server` still answers /readyz in {:.0} ms at {:.0} tenants: it connects \
             lazily and runs that set-up behind its first requests (each write sets up its own \
             tenant first). ",
            last.p50_ms.unwrap_or(0.0),
            value(last, "tenants")
        );
    }
    let creates = of("first writes");
    if let (Some(first), Some(last)) = (creates.first(), creates.last())
        && creates.len() > 1
    {
        let _ = write!(
            out,
            "Creating tenants went from {:.1}/s (up to {:.0} tenants) to {:.1}/s (up to {:.0}), \
             first-write p99 {:.0} ms then {:.0} ms. ",
            value(first, "tenants_per_s"),
            value(first, "tenants"),
            value(last, "tenants_per_s"),
            value(last, "tenants"),
            first.p99_ms.unwrap_or(0.0),
            last.p99_ms.unwrap_or(0.0)
        );
    }
    if let Some(last) = of("first write new tenant").last() {
        let p99 = last.p99_ms.unwrap_or(0.0);
        let _ = write!(
            out,
            "A brand-new tenant's first write (3 collections and 15 indexes besides the _id \
             ones) takes {:.0} ms p50 and {p99:.0} ms p99 at {:.0} tenants{}. ",
            last.p50_ms.unwrap_or(0.0),
            value(last, "tenants"),
            if p99 > FIRST_WRITE_REASONABLE_MS {
                ", past the second a first agent call should take"
            } else {
                ""
            }
        );
    }
    if let Some(last) = of("footprint").last() {
        let n = value(last, "tenants_total").max(1.0);
        let (disk, rss) = (
            value(last, "store_growth_mib_per_1k_tenants"),
            value(last, "server_rss_growth_mib_per_1k_tenants"),
        );
        let _ = write!(
            out,
            "Each 1,000 tenants add about {disk:.0} MiB of storage and {rss:.0} MiB of the \
             server's RSS ({n:.0} tenants: {:.0} MiB on disk, {:.0} MiB RSS; 100,000 tenants \
             would be about {:.1} GiB and {:.1} GiB at that rate). ",
            value(last, "store_bytes") / 1_048_576.0,
            value(last, "server_rss_kib") / 1024.0,
            disk * 100.0 / 1024.0,
            rss * 100.0 / 1024.0,
        );
    }
    if let Some(stopped) = of("first writes")
        .into_iter()
        .find(|r| value(r, "stopped") > 0.0)
    {
        let _ = write!(
            out,
            "Creating tenants hit the time bound at {:.0} of {:.0} tenants ({:.1} tenants/s), \
             so larger counts were not measured. ",
            value(stopped, "tenants"),
            value(stopped, "tenants_asked"),
            value(stopped, "tenants_per_s")
        );
    }
    for tool in ["create_issue random", "list_issues random"] {
        let series = of(tool);
        if let (Some(first), Some(last)) = (series.first(), series.last())
            && series.len() > 1
        {
            let _ = write!(
                out,
                "{tool} p50 goes from {:.2} ms at {:.0} tenants to {:.2} ms at {:.0} ({:.1}x). ",
                first.p50_ms.unwrap_or(0.0),
                value(first, "tenants"),
                last.p50_ms.unwrap_or(0.0),
                value(last, "tenants"),
                last.p50_ms.unwrap_or(0.0) / first.p50_ms.unwrap_or(0.0).max(1e-9)
            );
        }
    }
    out.push_str(
        "On mongod each collection and index is a WiredTiger file of its own (21 per tenant \
         here); the stand-in keeps every collection and index in a few shared tables, so these \
         figures do not show that cost, which grows with the count on mongod. An operator nearing the count where start-up \
         costs a minute, or mongod's file and memory limits, should not keep adding tenants \
         to one database: split them across deployments with their own database \
         (`CORKBOARD_MONGODB_DATABASE`) or cluster, each below that count; the lasting fix \
         is a shared collection keyed by tenant (one set of indexes led by the tenant id, no \
         per-tenant set-up), which this store does not offer yet.",
    );
    out
}

fn errors(r: &Record) -> String {
    if r.errors == 0 {
        return "0".into();
    }
    let kinds: Vec<String> = r
        .error_kinds
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect();
    format!("**{}** ({})", r.errors, kinds.join(", "))
}

/// Sort key of an MCP group: endpoint, store, registry in the order the
/// issue lists them.
fn group_key(r: &Record) -> (usize, usize, usize) {
    let rank = |value: &str, order: &[&str]| {
        order
            .iter()
            .position(|o| *o == value)
            .unwrap_or(order.len())
    };
    (
        rank(label(r, "endpoint"), &["studio", "gateway", "shared"]),
        rank(label(r, "store"), &["sqlite", "mongodb"]),
        rank(label(r, "registry"), &["memory", "redis"]),
    )
}

/// The profile's perf breakdown: category → share of the server's CPU,
/// one column per tool.
fn profile_breakdown(s: &mut String, records: &[Record]) {
    let rows: Vec<&Record> = records
        .iter()
        .filter(|r| r.kind == "profile_category")
        .collect();
    if rows.is_empty() {
        return;
    }
    let columns: Vec<String> = rows.iter().map(|r| tool(r)).collect();
    let tools = distinct(columns.iter().map(String::as_str));
    let _ = writeln!(
        s,
        "## Per-request profile: where the server's CPU goes (perf, gateway, c=64)\n"
    );
    let header: Vec<String> = tools.iter().map(|t| format!("{t} share")).collect();
    let _ = writeln!(
        s,
        "| category | {} |\n| --- |{}",
        header.join(" | "),
        " ---: |".repeat(tools.len())
    );
    for category in crate::scenario::profile::CATEGORIES {
        let cells: Vec<String> = tools
            .iter()
            .map(|column| {
                rows.iter()
                    .find(|r| label(r, "mode") == category && tool(r) == *column)
                    .and_then(|r| value(r, "share_pct"))
                    .map_or_else(|| "-".into(), |v| format!("{v:.1}%"))
            })
            .collect();
        let _ = writeln!(s, "| {category} | {} |", cells.join(" | "));
    }
    let per_request: Vec<String> = records
        .iter()
        .filter(|r| r.kind == "profile")
        .map(|r| {
            format!(
                "{} ({} build): {:.1} µs CPU and {:.2} context switches per request",
                tool(r),
                label(r, "build"),
                value(r, "cpu_us_per_request").unwrap_or(0.0),
                value(r, "ctx_switches_per_request").unwrap_or(0.0)
            )
        })
        .collect();
    if !per_request.is_empty() {
        let _ = writeln!(
            s,
            "\nPer request (the /proc window): {}.",
            per_request.join("; ")
        );
    }
    for note in distinct(rows.iter().filter_map(|r| r.note.as_deref())) {
        let _ = writeln!(s, "\nNote: {note}.");
    }
    let _ = writeln!(
        s,
        "\nThe hand-made profile in the findings below (release build, get_issue) had TCP ~20%, \
         the SQLite point read 12–16%, serde_json/validation ~14%, malloc ~12%, tracing ~10%, \
         audit ~7%, Prometheus ~2%; a debug build's shares are not comparable with it."
    );
    for c in distinct(rows.iter().map(|r| r.command.as_str())) {
        let _ = writeln!(s, "\nCommand: `{c}`");
    }
    let _ = writeln!(s);
}

/// The goal of the noisy-neighbour benchmark: B's p99 under an attack at
/// most this many times B's p99 alone (issue #28).
const NOISY_GOAL: f64 = 2.0;

/// The noisy-neighbour section: tenant B's reads alone and under each of
/// tenant A's attacks, judged against [`NOISY_GOAL`].
fn noisy_neighbour(s: &mut String, records: &[Record]) {
    use crate::scenario::noisy::{ALONE, ALONE_AGAIN};
    let reads: Vec<&Record> = records
        .iter()
        .filter(|r| r.kind == "noisy_neighbour")
        .collect();
    let attacks: Vec<&Record> = records
        .iter()
        .filter(|r| r.kind == "noisy_attack")
        .collect();
    if reads.is_empty() && attacks.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "## Noisy neighbour: tenant B's reads while tenant A attacks\n"
    );
    let first = reads.iter().chain(&attacks).map(|r| r.at.as_str()).min();
    let loads: Vec<f64> = attacks.iter().filter_map(|r| value(r, "load_1m")).collect();
    let _ = writeln!(
        s,
        "Tenant B's `get_issue` and `list_issues` (p50 / p99, ms) alone, then while tenant A, \
         within its own limits, runs one attack at a time; the goal is B's p99 within \
         {NOISY_GOAL}× of alone under every attack, with none of B's calls failing. ×: B's p99 \
         under the attack ÷ B's p99 alone, get_issue / list_issues, where alone is the lower of \
         B's two alone phases (before the attacks and after them: on a shared machine one alone \
         phase may catch another process's spike, and the lower one is the stricter reference). \
         Measured {} UTC, 1-minute load average {} during the phases.\n",
        first.map_or_else(String::new, |at| at
            .get(..16)
            .unwrap_or(at)
            .replace('T', " ")),
        match (
            loads.iter().copied().reduce(f64::min),
            loads.iter().copied().reduce(f64::max)
        ) {
            (Some(low), Some(high)) => format!("{low:.1} to {high:.1}"),
            _ => "unknown".into(),
        }
    );
    let _ = writeln!(
        s,
        "| attack | get_issue p50 / p99 | list_issues p50 / p99 | p99 vs alone (×) | goal met (≤{NOISY_GOAL}×) |\n\
         | --- | --- | --- | --- | --- |"
    );
    let find = |mode: &str, tool: &str| {
        reads
            .iter()
            .copied()
            .find(|r| label(r, "mode") == mode && label(r, "tool") == tool)
    };
    // The stricter reference: the lower p99 of B's two alone phases.
    let alone = |tool: &str| {
        [ALONE, ALONE_AGAIN]
            .iter()
            .filter_map(|mode| find(mode, tool).and_then(|r| r.p99_ms))
            .reduce(f64::min)
    };
    let cell = |r: Option<&Record>| match r {
        Some(r) if r.p50_ms.is_some() => format!("{} / {}", ms(r.p50_ms), ms(r.p99_ms)),
        _ => "-".into(),
    };
    let tools = ["get_issue", "list_issues"];
    let modes = distinct(reads.iter().chain(&attacks).map(|r| label(r, "mode")));
    for mode in modes {
        let (get, list) = (find(mode, tools[0]), find(mode, tools[1]));
        if get.is_none() && list.is_none() {
            let why = attacks
                .iter()
                .find(|r| label(r, "mode") == mode)
                .and_then(|r| r.note.as_deref())
                .unwrap_or("not measured");
            let _ = writeln!(s, "| {mode} | - | - | - | {why} |");
            continue;
        }
        let ratios: Vec<Option<f64>> = [(get, tools[0]), (list, tools[1])]
            .iter()
            .map(|(r, tool)| Some(r.and_then(|r| r.p99_ms)? / alone(tool).filter(|a| *a > 0.0)?))
            .collect();
        let ratio_cell = ratios
            .iter()
            .map(|x| x.map_or_else(|| "-".into(), |x| format!("{x:.1}")))
            .collect::<Vec<_>>()
            .join(" / ");
        let mut why = Vec::new();
        for (r, tool) in [(get, tools[0]), (list, tools[1])] {
            if let Some(r) = r
                && r.errors > 0
            {
                let kinds: Vec<String> = r
                    .error_kinds
                    .iter()
                    .map(|(k, v)| format!("{k} {v}"))
                    .collect();
                why.push(format!(
                    "{} of {} {tool} calls failed: {}",
                    r.errors,
                    value(r, "calls").unwrap_or(0.0),
                    kinds.join(", ")
                ));
            }
        }
        let met = if mode == ALONE || mode == ALONE_AGAIN {
            if why.is_empty() {
                "-".to_owned()
            } else {
                format!("- ({})", why.join("; "))
            }
        } else {
            for (ratio, tool) in ratios.iter().zip(tools) {
                match ratio {
                    Some(x) if *x > NOISY_GOAL => why.insert(0, format!("{tool} p99 {x:.1}×")),
                    None => why.push(format!("{tool}: no p99 to compare")),
                    _ => {}
                }
            }
            if why.is_empty() {
                "yes".to_owned()
            } else {
                format!("**no** ({})", why.join("; "))
            }
        };
        let _ = writeln!(
            s,
            "| {mode} | {} | {} | {ratio_cell} | {met} |",
            cell(get),
            cell(list)
        );
    }
    if let Some(r) = attacks.iter().find(|r| {
        label(r, "mode") == crate::scenario::noisy::Attack::OversizedAnswer.title()
            && label(r, "outcome") == "measured"
    }) {
        let mib =
            |key: &str| value(r, key).map_or_else(|| "-".into(), |v| format!("{:.1}", v / 1024.0));
        let _ = writeln!(
            s,
            "\nServer memory during the oversized-answer attack: peak RSS {} MiB (sampled every 50 ms; \
             {} MiB before the attack); the process's all-time peak (VmHWM) {} MiB before it, {} MiB after.",
            mib("rss_peak_kib"),
            mib("rss_before_kib"),
            mib("hwm_before_kib"),
            mib("hwm_after_kib"),
        );
    }
    let _ = writeln!(
        s,
        "\nWhat tenant A did in each phase, what it got, and what else B saw:\n"
    );
    for r in attacks.iter().filter(|r| label(r, "outcome") == "measured") {
        let peak = value(r, "rss_peak_kib").unwrap_or(0.0) / 1024.0;
        let _ = writeln!(
            s,
            "- **{}**: {}; server peak RSS {peak:.1} MiB.",
            label(r, "mode"),
            r.note.as_deref().unwrap_or("")
        );
    }
    for note in distinct(reads.iter().filter_map(|r| r.note.as_deref())) {
        let _ = writeln!(s, "\nNote: {note}.");
    }
    for c in distinct(reads.iter().chain(&attacks).map(|r| r.command.as_str())) {
        let _ = writeln!(s, "\nCommand: `{c}`");
    }
    let _ = writeln!(s);
}

/// Items in first-seen order, each once.
fn distinct<'a>(items: impl Iterator<Item = &'a str>) -> Vec<&'a str> {
    let mut seen = Vec::new();
    for item in items {
        if !seen.contains(&item) {
            seen.push(item);
        }
    }
    seen
}

/// A row's name; records without their own scenario labels (the disk
/// probe) take them from the MCP records of the same command.
fn what(r: &Record, records: &[Record]) -> String {
    if r.kind != "disk" || r.labels.contains_key("endpoint") {
        return r.name();
    }
    records
        .iter()
        .find(|m| m.kind == "mcp" && m.command == r.command)
        .map_or_else(
            || r.name(),
            |m| {
                format!(
                    "{} run ({} endpoint, {} registry)",
                    label(m, "store"),
                    label(m, "endpoint"),
                    label(m, "registry")
                )
            },
        )
}

/// The open issues a create point started from (`scenario::mcp`), `≥`
/// before a lower bound; `-` for other points.
fn board_size(r: &Record) -> String {
    if let Some(open) = r.values.get("board_open_issues") {
        format!("{open:.0}")
    } else if let Some(open) = r.values.get("board_open_issues_at_least") {
        format!("≥{open:.0}")
    } else {
        "-".into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_breakdown_is_a_category_table_per_tool() {
        let share = |tool: &str, category: &str, pct: f64| {
            Record::new("profile_category")
                .label("tool", tool)
                .label("mode", category)
                .value("share_pct", pct)
        };
        let per_request = Record::new("profile")
            .label("tool", "get_issue")
            .label("build", "release")
            .value("cpu_us_per_request", 41.5)
            .value("ctx_switches_per_request", 0.75);
        let records = [
            share("get_issue", "SQLite", 14.3),
            share("create_issue", "SQLite", 30.0),
            share("create_issue", "SQLite", 21.0).label("titles", "distinct"),
            share("get_issue", "Redis", 1.0),
            per_request,
        ];
        let text = render(&records, &Machine::default(), None, "scripts/bench");
        // A create load of distinct titles is a column of its own.
        assert!(
            text.contains(
                "| category | get_issue share | create_issue share | \
                 create_issue (distinct titles) share |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| SQLite | 14.3% | 30.0% | 21.0% |"),
            "{text}"
        );
        assert!(text.contains("| Redis | 1.0% | - | - |"), "{text}");
        assert!(
            text.contains("get_issue (release build): 41.5 µs CPU and 0.75 context switches"),
            "{text}"
        );
    }

    #[test]
    fn a_create_point_says_the_board_it_started_from() {
        let point = |tool: &str, board: Option<(&str, f64)>| {
            let mut r = Record::new("mcp")
                .label("endpoint", "gateway")
                .label("store", "sqlite")
                .label("registry", "redis")
                .label("tool", tool)
                .label("era", "stateless");
            r.concurrency = Some(64);
            r.rps = Some(9000.0);
            if let Some((name, open)) = board {
                r = r.value(name, open);
            }
            r
        };
        let records = [
            point("get_issue", None),
            point("create_issue", Some(("board_open_issues", 36_512.0))),
            point(
                "create_issue",
                Some(("board_open_issues_at_least", 10_000.0)),
            ),
            point("create_issue", Some(("board_open_issues", 20_000.0)))
                .label("titles", "distinct"),
        ];
        let text = render(&records, &Machine::default(), None, "scripts/bench");
        assert!(
            text.contains("| get_issue | stateless | 64 | - | 9000 |"),
            "{text}"
        );
        assert!(
            text.contains("| create_issue | stateless | 64 | 36512 | 9000 |"),
            "{text}"
        );
        assert!(
            text.contains("| create_issue | stateless | 64 | ≥10000 | 9000 |"),
            "{text}"
        );
        // A load of distinct titles says so, in the table and the targets.
        assert!(
            text.contains("| create_issue (distinct titles) | stateless | 64 | 20000 | 9000 |"),
            "{text}"
        );
        assert!(
            text.contains("| gateway endpoint, redis registry, stateless, distinct titles |"),
            "{text}"
        );
    }

    #[test]
    fn the_noisy_neighbour_is_judged_against_b_alone() {
        use crate::scenario::noisy::{ALONE, Attack};
        let reads = |mode: &str, tool: &str, samples: &[f64]| {
            Record::new("noisy_neighbour")
                .label("mode", mode)
                .label("tool", tool)
                .with_samples(samples)
                .value("calls", samples.len() as f64)
        };
        let storm = Attack::SearchStorm.title();
        let slow = Attack::SlowConnections.title();
        let huge = Attack::OversizedAnswer.title();
        let mut refused = reads(slow, "list_issues", &[1.0, 2.0]);
        refused.errors = 3;
        refused.error_kinds.insert("http_503".into(), 3);
        refused.values.insert("calls".into(), 5.0);
        let mut not_set_up = Record::new("noisy_attack")
            .label("mode", Attack::HeldCalls.title())
            .label("outcome", "not measured");
        not_set_up.note = Some("not measured: register upstream slow: HTTP 500".into());
        let records = [
            reads(ALONE, "get_issue", &[1.0, 2.0]),
            reads(ALONE, "list_issues", &[1.0, 4.0]),
            reads(storm, "get_issue", &[1.0, 3.0]),
            reads(storm, "list_issues", &[1.0, 900.0]),
            reads(slow, "get_issue", &[1.0, 2.0]),
            refused,
            reads(huge, "get_issue", &[1.0, 4.0]),
            reads(huge, "list_issues", &[1.0, 8.0]),
            Record::new("noisy_attack")
                .label("mode", huge)
                .label("outcome", "measured")
                .value("rss_peak_kib", 40_960.0)
                .value("rss_before_kib", 20_480.0),
            not_set_up,
        ];
        let text = render(&records, &Machine::default(), None, "scripts/bench");
        assert!(
            text.contains("## Noisy neighbour: tenant B's reads while tenant A attacks"),
            "{text}"
        );
        assert!(
            text.contains("| none (alone) | 1.00 / 2.00 | 1.00 / 4.00 | 1.0 / 1.0 | - |"),
            "{text}"
        );
        assert!(
            text.contains(
                "| search storm | 1.00 / 3.00 | 1.00 / 900.00 | 1.5 / 225.0 | **no** (list_issues p99 225.0×) |"
            ),
            "{text}"
        );
        assert!(
            text.contains("| 1.0 / 0.5 | **no** (3 of 5 list_issues calls failed: http_503 3) |"),
            "{text}"
        );
        // Exactly 2× meets the goal.
        assert!(text.contains("| 2.0 / 2.0 | yes |"), "{text}");
        assert!(
            text.contains(
                "| held calls | - | - | - | not measured: register upstream slow: HTTP 500 |"
            ),
            "{text}"
        );
        assert!(
            text.contains("oversized-answer attack: peak RSS 40.0 MiB (sampled every 50 ms; 20.0 MiB before the attack)"),
            "{text}"
        );
    }

    #[test]
    fn answer_sizes_are_a_table_of_their_own() {
        let row = Record::new("answer_size")
            .label("tool", "list_issues")
            .label("board", "60 issues")
            .label("shape", "summaries (today)")
            .value("bytes", 30_836.0)
            .value("tokens_est", 7_709.0)
            .value("items", 34.0);
        let text = render(&[row], &Machine::default(), None, "scripts/bench");
        assert!(text.contains("## Answer size"), "{text}");
        assert!(
            text.contains(
                "| list_issues | 60 issues | summaries (today) | 30836 | 7709 | - | - | 34 |"
            ),
            "{text}"
        );
    }

    #[test]
    fn the_tenants_conclusion_comes_from_the_figures() {
        let at = |tool: &str, tenants: f64| {
            Record::new("tenants")
                .label("store", "mongodb")
                .label("mode", format!("{tenants} tenants"))
                .label("tool", tool)
                .value("tenants", tenants)
                .value("tenants_asked", 10_000.0)
        };
        let rows = vec![
            at("store start-up", 100.0).with_samples(&[500.0]),
            at("store start-up", 4_000.0).with_samples(&[20_000.0]),
            at("first writes", 4_000.0)
                .with_samples(&[30.0])
                .value("stopped", 1.0)
                .value("tenants_per_s", 4.4),
            at("list_issues random", 100.0).with_samples(&[1.0]),
            at("list_issues random", 4_000.0).with_samples(&[3.0]),
            at("footprint", 4_000.0)
                .value("tenants_total", 4_040.0)
                .value("store_growth_mib_per_1k_tenants", 250.0)
                .value("server_rss_growth_mib_per_1k_tenants", 40.0),
        ];
        let text = render(&rows, &Machine::default(), None, "scripts/bench");
        assert!(
            text.contains("## Tenants on one MongoDB database"),
            "{text}"
        );
        // 20 s at 4,000 tenants: 5 s per 1,000, a minute near 12,000.
        assert!(text.contains("20.0 s at 4000 tenants"), "{text}");
        assert!(text.contains("about 5.0 s per 1,000"), "{text}");
        assert!(text.contains("near 12000 tenants"), "{text}");
        assert!(
            text.contains("hit the time bound at 4000 of 10000"),
            "{text}"
        );
        assert!(
            text.contains("from 1.00 ms at 100 tenants to 3.00 ms at 4000 (3.0x)"),
            "{text}"
        );
        assert!(
            text.contains("about 250 MiB of storage and 40 MiB"),
            "{text}"
        );
    }

    fn create(registry: &str, budget: Option<u32>, c: u64, rps: f64) -> Record {
        let base = format!(
            "corkboard-bench mcp --endpoint studio --store sqlite --registry {registry} --tools create_issue --concurrency 1,16"
        );
        let mut r = Record::new("mcp")
            .label("endpoint", "studio")
            .label("store", "sqlite")
            .label("registry", registry)
            .label("tool", "create_issue")
            .label("era", "stateless")
            .label(
                "budget",
                budget.map_or_else(|| "none".to_owned(), |n| format!("create_issue={n}")),
            );
        r.command = match budget {
            Some(n) => format!("{base} --create-budget {n} --out x"),
            None => format!("{base} --out x"),
        };
        r.concurrency = Some(c);
        r.rps = Some(rps);
        r.count = Some(rps as u64 * 5);
        r
    }

    #[test]
    fn budget_comparisons_are_a_section_of_their_own() {
        let mut main = create("memory", None, 64, 900.0);
        main.command = "corkboard-bench mcp --endpoint studio --out x".into();
        let records = vec![
            main,
            create("memory", None, 1, 159.0),
            create("memory", Some(1_000_000), 1, 120.0),
            create("memory", None, 1, 138.0),
            create("redis", Some(1_000_000), 16, 171.0),
            create("redis", None, 16, 152.0),
        ];
        let text = render(&records, &Machine::default(), None, "scripts/bench");
        let (tables, section) = text
            .split_once("## create_issue with and without a write budget")
            .expect("the budget section");
        assert!(
            section.contains("| memory (ledger) | none | 1 | 1 | 159 |"),
            "{section}"
        );
        assert!(
            section.contains("| memory (ledger) | none | 2 | 1 | 138 |"),
            "{section}"
        );
        assert!(
            section.contains("| memory (ledger) | create_issue=1000000 | 1 | 1 | 120 |"),
            "{section}"
        );
        assert!(
            section.contains("| redis (Redis script) | none | 1 | 16 | 152 |"),
            "{section}"
        );
        // Unbudgeted rows come before budgeted ones at the same c.
        let none = section.find("| redis (Redis script) | none").unwrap();
        let budgeted = section
            .find("| redis (Redis script) | create_issue")
            .unwrap();
        assert!(none < budgeted, "{section}");
        // The compared runs stay out of the throughput tables; the main
        // suite's run with its own command stays in them.
        assert!(
            tables.contains("| create_issue | stateless | 64 | - | 900 |"),
            "{tables}"
        );
        assert!(!tables.contains("| 159 |"), "{tables}");
        assert!(!tables.contains("| 120 |"), "{tables}");
    }

    #[test]
    fn targets_are_judged_from_records() {
        let mut gateway = Record::new("mcp")
            .label("endpoint", "gateway")
            .label("store", "sqlite")
            .label("registry", "redis")
            .label("tool", "get_issue")
            .label("era", "stateless");
        gateway.concurrency = Some(64);
        gateway.rps = Some(600.0);
        gateway = gateway.with_ceiling(1000.0);
        let mut slow = Record::new("revocation").with_samples(&[10.0, 20.0, 500.0]);
        slow.errors = 0;
        let failed = {
            let mut f = Record::new("failed");
            f.note = Some("secantusd-rs: not installed".into());
            f
        };
        let text = render(
            &[gateway, slow, failed],
            &Machine::default(),
            Some("busy"),
            "scripts/bench",
        );
        assert!(
            text.contains("| 60.0% (600 of 1000 req/s) | yes |"),
            "{text}"
        );
        assert!(
            text.contains("p99 500.00 ms, max 500.00 ms | **no** |"),
            "{text}"
        );
        assert!(text.contains("not measured (see below)"), "{text}");
        assert!(text.contains("secantusd-rs: not installed"), "{text}");
        assert!(text.contains("**Conditions**: busy"), "{text}");
    }
}
