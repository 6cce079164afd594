//! Runs the harness under callgrind, reads its dumps, and compares the
//! counts with the baseline (or rewrites it).

use super::{Baseline, CALLS, Comparison, compare};
use crate::error::{BenchError, Result};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

/// How `check` runs.
#[derive(Debug, Clone)]
pub struct CheckOptions {
    /// The baseline file (`services/bench/callgrind-baseline.json`).
    pub baseline: PathBuf,
    /// Write the measured counts as the new baseline instead of comparing.
    pub update: bool,
    /// The valgrind program.
    pub valgrind: PathBuf,
    /// Calls measured per operation.
    pub calls: u32,
}

impl CheckOptions {
    pub fn new(baseline: PathBuf) -> Self {
        Self {
            baseline,
            update: false,
            valgrind: PathBuf::from("valgrind"),
            calls: CALLS,
        }
    }
}

/// Measures, then compares with (or rewrites) the baseline; prints the
/// table. An error when an operation grew past the tolerance.
pub fn check(options: &CheckOptions) -> Result<()> {
    let measured = measure(options)?;
    let mut out = std::io::stdout().lock();
    if options.update {
        let previous = read_baseline(&options.baseline).ok();
        let baseline = Baseline {
            about: Baseline::ABOUT.to_owned(),
            tolerance_percent: previous
                .as_ref()
                .map_or(Baseline::TOLERANCE_PERCENT, |b| b.tolerance_percent),
            calls: options.calls,
            instructions_per_call: measured.clone(),
        };
        let mut text = serde_json::to_string_pretty(&baseline)?;
        text.push('\n');
        std::fs::write(&options.baseline, text)
            .map_err(BenchError::io(options.baseline.display().to_string()))?;
        if let Some(previous) = previous {
            print_table(&mut out, &compare(&previous, &measured), f64::INFINITY)?;
        }
        writeln!(out, "wrote {}", options.baseline.display()).map_err(BenchError::io("stdout"))?;
        return Ok(());
    }
    let baseline = read_baseline(&options.baseline)?;
    let rows = compare(&baseline, &measured);
    print_table(&mut out, &rows, baseline.tolerance_percent)?;
    let failed: Vec<&str> = rows
        .iter()
        .filter(|r| r.fails(baseline.tolerance_percent))
        .map(|r| r.operation.as_str())
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(BenchError::Usage(format!(
        "instruction counts of {} grew more than {}% over {} (or are missing): find what made them \
         costlier, or, if the cost is accepted, run `cargo run -p corkboard-bench --bin \
         corkboard-instructions -- check --update` and commit the baseline with the change, \
         saying why",
        failed.join(", "),
        baseline.tolerance_percent,
        options.baseline.display()
    )))
}

fn read_baseline(path: &Path) -> Result<Baseline> {
    let text = std::fs::read_to_string(path).map_err(BenchError::io(path.display().to_string()))?;
    Ok(serde_json::from_str(&text)?)
}

/// Runs the harness (this program's `measure`) under callgrind and
/// returns instructions per call by operation.
pub fn measure(options: &CheckOptions) -> Result<BTreeMap<String, u64>> {
    let exe = std::env::current_exe().map_err(BenchError::io("this program's path"))?;
    let dir = tempfile::tempdir().map_err(BenchError::io("temporary directory"))?;
    let out_file = dir.path().join("callgrind.out");
    let output = Command::new(&options.valgrind)
        .arg("--tool=callgrind")
        .arg("--instr-atstart=no")
        .arg(format!("--callgrind-out-file={}", out_file.display()))
        .arg(&exe)
        .arg("measure")
        .arg("--calls")
        .arg(options.calls.to_string())
        .output()
        .map_err(|e| BenchError::Program {
            program: options.valgrind.display().to_string(),
            reason: format!("{e} (scripts/setup-test-deps installs valgrind)"),
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(30).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        return Err(BenchError::process(
            "the harness under callgrind",
            format!("{}\n{}", output.status, tail.join("\n")),
        ));
    }
    let mut totals = BTreeMap::new();
    let entries = std::fs::read_dir(dir.path()).map_err(BenchError::io("callgrind dumps"))?;
    for entry in entries {
        let path = entry.map_err(BenchError::io("callgrind dumps"))?.path();
        let text =
            std::fs::read_to_string(&path).map_err(BenchError::io(path.display().to_string()))?;
        if let Some((reason, total)) = parse_dump(&text) {
            totals.insert(reason, total);
        }
    }
    if totals.is_empty() {
        return Err(BenchError::process(
            "the harness under callgrind",
            "wrote no dump of a measured operation (was it built with valgrind's headers?)",
        ));
    }
    let calls = u64::from(options.calls.max(1));
    Ok(totals
        .into_iter()
        .map(|(op, total)| (op, (total + calls / 2) / calls))
        .collect())
}

/// The reason and total instructions of one callgrind dump made by a
/// client request (`dump_stats(reason)`); `None` for other dumps (the
/// one at program exit).
pub fn parse_dump(text: &str) -> Option<(String, u64)> {
    let mut reason = None;
    let mut total = None;
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("desc: Trigger: Client Request: ") {
            reason = Some(rest.trim().to_owned());
        } else if let Some(rest) = line
            .strip_prefix("totals:")
            .or_else(|| line.strip_prefix("summary:"))
        {
            // The first event is Ir (the only one without cache simulation).
            total = rest.split_whitespace().next()?.parse().ok();
        }
    }
    Some((reason?, total?))
}

fn print_table(out: &mut impl Write, rows: &[Comparison], tolerance: f64) -> Result<()> {
    use std::fmt::Write as _;
    let mut text = String::from("operation       baseline Ir/call  measured Ir/call  change\n");
    for row in rows {
        let num = |n: Option<u64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
        let change = row
            .change_percent()
            .map_or_else(|| "-".to_owned(), |c| format!("{c:+.2}%"));
        let verdict = if row.fails(tolerance) { "  FAIL" } else { "" };
        let _ = writeln!(
            text,
            "{:<15} {:>17} {:>17}  {change}{verdict}",
            row.operation,
            num(row.baseline),
            num(row.measured)
        );
    }
    out.write_all(text.as_bytes())
        .map_err(BenchError::io("stdout"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dumps_of_client_requests_give_their_reason_and_total() {
        let dump = "# callgrind format\nversion: 1\ncreator: callgrind-3.19.0\npid: 42\n\
                    cmd:  x measure\npart: 2\n\ndesc: I1 cache: \n\
                    desc: Timerange: Basic block 1 - 2\n\
                    desc: Trigger: Client Request: get_issue\n\npositions: line\n\
                    events: Ir\nsummary: 123456\n\nfl=(1) a.rs\nfn=(1) f\n1 5\n\ntotals: 123456\n";
        assert_eq!(parse_dump(dump), Some(("get_issue".to_owned(), 123_456)));
        let at_exit = dump.replace(
            "desc: Trigger: Client Request: get_issue",
            "desc: Trigger: Program termination",
        );
        assert_eq!(parse_dump(&at_exit), None);
    }
}
