//! Results: one JSON line per measured figure (machine-readable, appended
//! to `--out`), and a human table on stdout.

use crate::error::{BenchError, Result};
use crate::load::LoadResult;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

/// One measured figure with everything needed to reproduce it.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Record {
    /// `ceiling`, `mcp`, `revocation`, `register`, `idle_runs`, `cold_start`.
    pub kind: String,
    /// Scenario dimensions: endpoint, store, registry, era, tool, mode...
    #[serde(default)]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_s: Option<f64>,
    /// Requests (load) or trials (latency scenarios).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    #[serde(default)]
    pub errors: u64,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub error_kinds: BTreeMap<String, u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rps: Option<f64>,
    /// The ceiling's requests/s at the same concurrency in the same run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceiling_rps: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p90_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_ms: Option<f64>,
    /// Scenario-specific figures (RSS in KiB, bytes per run, ...).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub values: BTreeMap<String, f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The command that produced it.
    pub command: String,
    /// RFC 3339 time of measurement.
    pub at: String,
}

impl Record {
    pub fn new(kind: &str) -> Self {
        Self {
            kind: kind.to_owned(),
            command: command_line(),
            at: now_rfc3339(),
            ..Self::default()
        }
    }

    pub fn label(mut self, key: &str, value: impl ToString) -> Self {
        self.labels.insert(key.to_owned(), value.to_string());
        self
    }

    pub fn value(mut self, key: &str, value: f64) -> Self {
        self.values.insert(key.to_owned(), value);
        self
    }

    /// Fills throughput, latency and errors from a load run.
    pub fn with_load(mut self, result: &LoadResult, concurrency: usize) -> Self {
        self.concurrency = Some(concurrency as u64);
        self.duration_s = Some(result.window.as_secs_f64());
        self.count = Some(result.requests);
        self.errors = result.errors;
        self.error_kinds = result.error_kinds.clone();
        self.rps = Some(result.rps());
        self.p50_ms = Some(result.quantile_ms(0.50));
        self.p90_ms = Some(result.quantile_ms(0.90));
        self.p99_ms = Some(result.quantile_ms(0.99));
        self.max_ms = Some(result.max_ms());
        self
    }

    /// Fills latency figures from samples in milliseconds.
    pub fn with_samples(mut self, samples: &[f64]) -> Self {
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        self.count = Some(sorted.len() as u64);
        self.p50_ms = Some(quantile(&sorted, 0.50));
        self.p90_ms = Some(quantile(&sorted, 0.90));
        self.p99_ms = Some(quantile(&sorted, 0.99));
        self.max_ms = sorted.last().copied();
        self
    }

    pub fn with_ceiling(mut self, ceiling_rps: f64) -> Self {
        self.ceiling_rps = Some(ceiling_rps);
        if let Some(rps) = self.rps
            && ceiling_rps > 0.0
        {
            self.ratio = Some(rps / ceiling_rps);
        }
        self
    }

    /// `endpoint/store/registry tool era` style name from the labels.
    pub fn name(&self) -> String {
        let order = [
            "endpoint", "store", "registry", "tool", "era", "mode", "start", "shape", "board",
        ];
        let mut parts: Vec<&str> = order
            .iter()
            .filter_map(|k| self.labels.get(*k).map(String::as_str))
            .collect();
        if parts.is_empty() {
            parts.push(&self.kind);
        }
        parts.join(" ")
    }
}

/// Nearest-rank quantile of sorted samples.
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn command_line() -> String {
    let mut args = std::env::args();
    let program = args
        .next()
        .map(|p| {
            // Repository-relative when run from the repository: the command
            // in docs/numbers.md must work on any checkout.
            std::env::current_dir()
                .ok()
                .and_then(|cwd| {
                    Path::new(&p)
                        .strip_prefix(cwd)
                        .ok()
                        .map(|r| r.display().to_string())
                })
                .unwrap_or(p)
        })
        .unwrap_or_default();
    redact(std::iter::once(program).chain(args).collect())
}

/// Joins a command line for display, hiding `--token` values: commands are
/// written into reports.
fn redact(args: Vec<String>) -> String {
    let mut out = Vec::with_capacity(args.len());
    let mut hide_next = false;
    for arg in args {
        if hide_next {
            out.push("$CORKBOARD_BENCH_TOKEN".to_owned());
            hide_next = false;
        } else if arg == "--token" {
            hide_next = true;
            out.push(arg);
        } else if arg.starts_with("--token=") {
            out.push("--token=$CORKBOARD_BENCH_TOKEN".to_owned());
        } else if arg.contains(' ') {
            out.push(format!("'{arg}'"));
        } else {
            out.push(arg);
        }
    }
    out.join(" ")
}

pub fn now_rfc3339() -> String {
    time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// Where records go: stdout table always, JSON lines to a file if asked.
#[derive(Debug)]
pub struct Sink {
    out: Option<std::fs::File>,
    json_stdout: bool,
    pub records: Vec<Record>,
}

impl Sink {
    pub fn new(out: Option<&Path>, json_stdout: bool) -> Result<Self> {
        let out = match out {
            Some(path) => {
                if let Some(parent) = path.parent()
                    && !parent.as_os_str().is_empty()
                {
                    std::fs::create_dir_all(parent)
                        .map_err(BenchError::io(format!("create {}", parent.display())))?;
                }
                Some(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                        .map_err(BenchError::io(format!("open {}", path.display())))?,
                )
            }
            None => None,
        };
        Ok(Self {
            out,
            json_stdout,
            records: Vec::new(),
        })
    }

    /// Emits one record: a JSON line to the file, a table row (or the JSON
    /// line with `--json`) on stdout.
    pub fn emit(&mut self, record: Record) -> Result<()> {
        let line = serde_json::to_string(&record)?;
        if let Some(file) = self.out.as_mut() {
            writeln!(file, "{line}").map_err(BenchError::io("write results"))?;
        }
        let mut stdout = std::io::stdout().lock();
        let text = if self.json_stdout { line } else { row(&record) };
        writeln!(stdout, "{text}").map_err(BenchError::io("stdout"))?;
        stdout.flush().map_err(BenchError::io("stdout"))?;
        self.records.push(record);
        Ok(())
    }
}

fn opt(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
}

/// One human-readable line.
pub fn row(r: &Record) -> String {
    let mut line = format!("{:<11} {:<44}", r.kind, r.name());
    if let Some(c) = r.concurrency {
        line.push_str(&format!(" c={c:<4}"));
    }
    if r.rps.is_some() {
        line.push_str(&format!(" {:>9} req/s", opt(r.rps, 0)));
    }
    if let Some(ratio) = r.ratio {
        line.push_str(&format!(" ({:>5.1}% of ceiling)", ratio * 100.0));
    }
    if r.p50_ms.is_some() {
        line.push_str(&format!(
            " p50 {} p90 {} p99 {} max {} ms",
            opt(r.p50_ms, 3),
            opt(r.p90_ms, 3),
            opt(r.p99_ms, 3),
            opt(r.max_ms, 3)
        ));
    }
    if let Some(n) = r.count {
        line.push_str(&format!(" n={n}"));
    }
    for (k, v) in &r.values {
        line.push_str(&format!(" {k}={v:.1}"));
    }
    line.push_str(&format!(" errors={}", r.errors));
    if !r.error_kinds.is_empty() {
        let kinds: Vec<String> = r
            .error_kinds
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect();
        line.push_str(&format!(" [{}]", kinds.join(", ")));
    }
    if let Some(note) = &r.note {
        line.push_str(&format!(" ({note})"));
    }
    line
}

/// Reads JSON lines written by [`Sink`].
pub fn read(path: &Path) -> Result<Vec<Record>> {
    let text = std::fs::read_to_string(path)
        .map_err(BenchError::io(format!("read {}", path.display())))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(BenchError::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_quantiles() {
        let s: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(quantile(&s, 0.5), 50.0);
        assert_eq!(quantile(&s, 0.99), 99.0);
        assert_eq!(quantile(&s, 1.0), 100.0);
        assert_eq!(quantile(&[3.0], 0.99), 3.0);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn tokens_never_reach_the_command_line() {
        let line = redact(
            [
                "bench",
                "load",
                "--token",
                "cbr_secret",
                "--token=cbr_other",
                "--note",
                "a b",
            ]
            .map(String::from)
            .to_vec(),
        );
        assert!(!line.contains("cbr_"), "{line}");
        assert!(line.ends_with("--note 'a b'"), "{line}");
    }

    #[test]
    fn records_round_trip() {
        let r = Record::new("mcp")
            .label("endpoint", "studio")
            .label("tool", "get_issue")
            .with_samples(&[1.0, 2.0, 3.0])
            .value("rss_kib", 10.0);
        let line = serde_json::to_string(&r).unwrap();
        let back: Record = serde_json::from_str(&line).unwrap();
        assert_eq!(back.name(), "studio get_issue");
        assert_eq!(back.p50_ms, Some(2.0));
        assert_eq!(back.values["rss_kib"], 10.0);
    }
}
