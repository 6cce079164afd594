//! The per-request profile in the suite (issue #18): the server in the
//! gateway configuration with the Redis registry (a run's dedicated port,
//! SQLite store), driven with `get_issue` and then `create_issue` at one
//! concurrency, and for each tool:
//!
//! 1. a window measured from `/proc` only: the server's CPU time
//!    (`utime + stime` of `/proc/<pid>/stat`, every thread, in clock
//!    ticks) and context switches (`voluntary_ctxt_switches` +
//!    `nonvoluntary_ctxt_switches` summed over `/proc/<pid>/task/*/status`)
//!    over the requests answered in the window;
//! 2. when `perf` is there and permitted, a second window under
//!    `perf record -F <freq> -g -p <pid>`, reported with
//!    `perf report --no-children --sort dso,symbol` and each symbol's self
//!    share put into one of a few categories by name patterns
//!    ([`category`]). When perf is missing or refused, the scenario records
//!    the `/proc` figures and says why there is no breakdown.
//!
//! The windows are separate so perf's own cost is not in the `/proc`
//! figures. The grouping is by the sampled (leaf) symbol only: memcpy
//! called by the JSON renderer is "other", malloc called by the audit
//! writer is "malloc/free". It is approximate by construction.

use super::deploy::{DeploySpec, Deployment, Endpoint, Registry, Store};
use crate::client::Target;
use crate::error::{BenchError, Result};
use crate::load::{self, LoadResult, LoadSpec};
use crate::mcp::{Era, Titles, Tool};
use crate::procs::Binaries;
use crate::record::{Record, Sink};
use crate::setup;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The categories, in report order.
pub const CATEGORIES: [&str; 10] = [
    "TCP/kernel network",
    "kernel, other",
    "SQLite",
    "serde_json/validation",
    "malloc/free",
    "tracing/logging",
    "audit",
    "Prometheus",
    "Redis",
    "other",
];

/// The patterns, documented with the figures (matched on the lower-cased
/// symbol, and on the shared object where it says so; first match wins).
pub const PATTERNS: &str = "kernel symbols ([k]): tcp, inet, ip_, ipv4, ipv6, sock, skb, \
net_, netif, napi, loopback, dev_queue, dev_hard, sendmsg, recvmsg, sendto, recvfrom, epoll, \
ep_poll → TCP/kernel network, any other kernel symbol → kernel, other; user space: malloc, \
free, realloc, calloc, memalign, _int_, tcache, __rust_alloc/dealloc/realloc, alloc::alloc, \
mi_/je_ prefixes → malloc/free; the prefixes of SQLite's C functions (sqlite3, yy_, fts5, pcache, pager, btree, vdbe, wal, \
unix), rusqlite, store_sqlite or \
a sqlite shared object → SQLite; redis → Redis; prometheus → Prometheus; audit → audit; \
tracing, telemetry, log::, sharded_slab (the span registry) → tracing/logging; serde, validate, \
jsonschema, ryu, itoa, render (the tool result renderer) → serde_json/validation; anything \
else (memcpy, the runtime, actix, hashing, unresolved addresses) → other";

/// What the profile drives.
#[derive(Debug, Clone)]
pub struct ProfileSpec {
    pub tools: Vec<Tool>,
    pub concurrency: usize,
    pub warmup: Duration,
    pub duration: Duration,
    /// `perf record -F`.
    pub frequency: u32,
    /// The titles `create_issue` files its issues under.
    pub titles: Titles,
}

/// The category of one sampled symbol.
pub fn category(dso: &str, symbol: &str, kernel: bool) -> &'static str {
    let s = symbol.to_lowercase();
    let d = dso.to_lowercase();
    let any = |patterns: &[&str]| patterns.iter().any(|p| s.contains(p));
    if kernel || d.contains("kernel") {
        return if any(&[
            "tcp",
            "inet",
            "ip_",
            "ipv4",
            "ipv6",
            "sock",
            "skb",
            "net_",
            "netif",
            "napi",
            "loopback",
            "dev_queue",
            "dev_hard",
            "sendmsg",
            "recvmsg",
            "sendto",
            "recvfrom",
            "epoll",
            "ep_poll",
        ]) {
            "TCP/kernel network"
        } else {
            "kernel, other"
        };
    }
    if any(&[
        "malloc",
        "free",
        "realloc",
        "calloc",
        "memalign",
        "_int_",
        "tcache",
        "__rust_alloc",
        "__rust_dealloc",
        "__rust_realloc",
        "alloc::alloc",
    ]) || s.starts_with("mi_")
        || s.starts_with("je_")
    {
        "malloc/free"
    } else if [
        "sqlite3", "yy_", "fts5", "pcache", "pager", "btree", "vdbe", "wal", "unix",
    ]
    .iter()
    .any(|p| s.starts_with(p))
        || any(&["rusqlite", "store_sqlite"])
        || d.contains("sqlite")
    {
        "SQLite"
    } else if any(&["redis"]) {
        "Redis"
    } else if any(&["prometheus"]) {
        "Prometheus"
    } else if any(&["audit"]) {
        "audit"
    } else if any(&["tracing", "telemetry", "log::", "sharded_slab"]) {
        "tracing/logging"
    } else if any(&["serde", "validate", "jsonschema", "ryu", "itoa", "render"]) {
        "serde_json/validation"
    } else {
        "other"
    }
}

/// Shares per category (percent of the samples) from the output of
/// `perf report --no-children --sort dso,symbol --stdio -t '\t'`.
pub fn categorize(report: &str) -> BTreeMap<&'static str, f64> {
    let mut shares = BTreeMap::new();
    for line in report.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut fields = line.split('\t').map(str::trim);
        let (Some(percent), Some(dso), Some(symbol)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let Ok(percent) = percent.trim_end_matches('%').trim().parse::<f64>() else {
            continue;
        };
        let kernel = symbol.starts_with("[k]");
        let symbol = symbol
            .trim_start_matches("[k]")
            .trim_start_matches("[.]")
            .trim();
        *shares.entry(category(dso, symbol, kernel)).or_default() += percent;
    }
    shares
}

/// The server's CPU ticks and context switches so far.
#[derive(Debug, Clone, Copy, Default)]
struct Usage {
    ticks: u64,
    voluntary: u64,
    involuntary: u64,
    threads: u64,
}

fn usage(pid: u32) -> Result<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(BenchError::io(format!("read /proc/{pid}/stat")))?;
    // Fields after the command name (which may hold spaces), from field 3.
    let rest = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest)
        .ok_or_else(|| BenchError::process(format!("pid {pid}"), "unreadable /proc stat"))?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| -> u64 { fields.get(n - 3).and_then(|v| v.parse().ok()).unwrap_or(0) };
    let mut out = Usage {
        ticks: field(14) + field(15),
        threads: field(20),
        ..Usage::default()
    };
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map_err(BenchError::io(format!("read /proc/{pid}/task")))?;
    for task in tasks.filter_map(std::result::Result::ok) {
        // A thread may end between the listing and the read.
        let Ok(status) = std::fs::read_to_string(task.path().join("status")) else {
            continue;
        };
        for line in status.lines() {
            let number = |prefix: &str| {
                line.strip_prefix(prefix)
                    .and_then(|v| v.trim().parse::<u64>().ok())
            };
            if let Some(n) = number("voluntary_ctxt_switches:") {
                out.voluntary += n;
            } else if let Some(n) = number("nonvoluntary_ctxt_switches:") {
                out.involuntary += n;
            }
        }
    }
    Ok(out)
}

/// Load `spec` while `during` runs from the end of the warm-up for the
/// measured window.
async fn load_with<T>(
    spec: &LoadSpec,
    during: impl std::future::Future<Output = Result<T>>,
) -> Result<(LoadResult, T)> {
    let warmup = spec.warmup;
    let (result, observed) = tokio::join!(load::run(spec), async move {
        tokio::time::sleep(warmup).await;
        during.await
    });
    Ok((result?, observed?))
}

/// Runs `perf record` on `pid` for `window` into `data`; the reason when
/// perf is missing, refused or recorded nothing.
async fn perf_record(
    pid: u32,
    frequency: u32,
    window: Duration,
    data: &Path,
    log: &Path,
) -> Result<Option<String>> {
    let stderr =
        std::fs::File::create(log).map_err(BenchError::io(format!("create {}", log.display())))?;
    let spawned = Command::new("perf")
        .args(["record", "-F", &frequency.to_string(), "-g", "-p"])
        .arg(pid.to_string())
        .arg("-o")
        .arg(data)
        .args(["--", "sleep"])
        .arg(format!("{:.3}", window.as_secs_f64()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::from(stderr))
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) => return Ok(Some(format!("perf could not be started: {e}"))),
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => return Ok(Some(format!("perf record: {e}"))),
        }
    };
    let recorded = std::fs::metadata(data).map(|m| m.len()).unwrap_or(0);
    if !status.success() || recorded == 0 {
        let reason = std::fs::read_to_string(log).unwrap_or_default();
        let reason = reason.lines().last().unwrap_or("no output").to_owned();
        return Ok(Some(format!("perf record failed ({status}): {reason}")));
    }
    Ok(None)
}

/// `perf report` of `data`, grouped into categories.
fn perf_report(data: &Path) -> Result<std::result::Result<BTreeMap<&'static str, f64>, String>> {
    let out = Command::new("perf")
        .arg("report")
        .arg("-i")
        .arg(data)
        .args([
            "--no-children",
            "--sort",
            "dso,symbol",
            "--stdio",
            "-g",
            "none",
            "--percent-limit",
            "0",
            "-t",
            "\t",
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(BenchError::io("run perf report"))?;
    if !out.status.success() {
        return Ok(Err(format!(
            "perf report failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    let shares = categorize(&String::from_utf8_lossy(&out.stdout));
    if shares.is_empty() {
        return Ok(Err("perf report listed no samples".into()));
    }
    Ok(Ok(shares))
}

/// `release`, `debug` or the binary's path: the profile of a debug build
/// is not the product's.
fn build_of(bins: &Binaries) -> String {
    let path = bins.corkboard.display().to_string();
    if path.contains("/release/") {
        "release".into()
    } else if path.contains("/debug/") {
        "debug".into()
    } else {
        path
    }
}

pub async fn run(bins: &Binaries, spec: &ProfileSpec, logs: &Path, sink: &mut Sink) -> Result<()> {
    let deploy = DeploySpec {
        endpoint: Endpoint::Gateway,
        store: Store::Sqlite,
        registry: Registry::Redis,
        log: None,
        env: Vec::new(),
    };
    let mut deployment = Deployment::start(bins, deploy, logs).await?;
    let granted = deployment
        .grant("bench", "bench-profile", &["issues:read", "issues:create"])
        .await?;
    let issue = setup::seed_board(&granted.mcp_url, &granted.token, &spec.tools).await?;
    let target = Target::parse(&granted.mcp_url)?;
    let pid = deployment
        .process
        .pid()
        .ok_or_else(|| BenchError::process("corkboard runner", "not running"))?;
    let ticks_per_s = rustix::param::clock_ticks_per_second().max(1) as f64;
    let build = build_of(bins);
    for &tool in &spec.tools {
        let titles = spec.titles.for_tool(tool);
        let load_spec = LoadSpec {
            target: target.clone(),
            token: granted.token.clone(),
            era: Era::Stateless,
            tool,
            issue: Some(issue.clone()),
            concurrency: spec.concurrency,
            warmup: spec.warmup,
            duration: spec.duration,
            titles,
        };
        let window = spec.duration;
        let (result, (before, after)) = load_with(&load_spec, async {
            let before = usage(pid)?;
            tokio::time::sleep(window).await;
            Ok((before, usage(pid)?))
        })
        .await?;
        deployment.process.check_alive()?;
        let requests = result.requests.max(1) as f64;
        let cpu_s = after.ticks.saturating_sub(before.ticks) as f64 / ticks_per_s;
        let voluntary = after.voluntary.saturating_sub(before.voluntary) as f64;
        let involuntary = after.involuntary.saturating_sub(before.involuntary) as f64;
        let labels = |record: Record| {
            titles.label(
                record
                    .label("endpoint", "gateway")
                    .label("store", "sqlite")
                    .label("registry", "redis")
                    .label("tool", tool)
                    .label("build", &build),
            )
        };
        let mut record = labels(Record::new("profile"))
            .with_load(&result, spec.concurrency)
            .value("cpu_us_per_request", cpu_s * 1e6 / requests)
            .value(
                "ctx_switches_per_request",
                (voluntary + involuntary) / requests,
            )
            .value("voluntary_per_request", voluntary / requests)
            .value("involuntary_per_request", involuntary / requests)
            .value(
                "server_cpu_cores",
                cpu_s / window.as_secs_f64().max(f64::EPSILON),
            )
            .value("server_threads", after.threads as f64);
        if let Ok(rss) = deployment.process.rss_kib() {
            record = record.value("server_rss_kib", rss as f64);
        }

        // The perf window, separate so perf's cost is not in the figures
        // above.
        let run_name = match titles {
            Titles::One => tool.name().to_owned(),
            titles => format!("{}-{titles}", tool.name()),
        };
        let data: PathBuf = logs.join(format!("perf-{run_name}.data"));
        let perf_log = logs.join(format!("perf-{run_name}.log"));
        let (perf_result, refused) = load_with(
            &load_spec,
            perf_record(pid, spec.frequency, window, &data, &perf_log),
        )
        .await?;
        let breakdown = match refused {
            Some(reason) => Err(reason),
            None => perf_report(&data)?,
        };
        match breakdown {
            Ok(shares) => {
                record.note = Some(format!(
                    "{build} build; CPU and context switches from /proc over the requests of a \
                     {window:?} window; the breakdown from a second window under perf record \
                     -F {} -g ({} requests/s there)",
                    spec.frequency,
                    perf_result.rps().round()
                ));
                sink.emit(record)?;
                // perf rounds each symbol's share to two decimals, and
                // hundreds of symbols can sum to 101%: the categories are
                // shares of what was parsed, so they sum to 100.
                let parsed: f64 = shares.values().sum();
                for name in CATEGORIES {
                    let raw = shares.get(name).copied().unwrap_or(0.0);
                    let share = if parsed > 0.0 {
                        raw * 100.0 / parsed
                    } else {
                        0.0
                    };
                    let mut row = labels(Record::new("profile_category"))
                        .label("mode", name)
                        .value("share_pct", share);
                    row.note = Some(format!(
                        "share of the server's sampled CPU (perf report --no-children --sort \
                         dso,symbol: each sample's own symbol), grouped by name patterns, \
                         approximate: {PATTERNS}"
                    ));
                    sink.emit(row)?;
                }
            }
            Err(reason) => {
                record.note = Some(format!(
                    "{build} build; CPU and context switches from /proc over the requests of a \
                     {window:?} window; no perf breakdown: {reason}"
                ));
                sink.emit(record)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn symbols_fall_into_their_categories() {
        let cases = [
            (
                "[kernel.kallsyms]",
                "tcp_sendmsg_locked",
                true,
                "TCP/kernel network",
            ),
            (
                "[kernel.kallsyms]",
                "ep_poll_callback",
                true,
                "TCP/kernel network",
            ),
            ("[kernel.kallsyms]", "futex_wake", true, "kernel, other"),
            ("libc.so.6", "_int_malloc", false, "malloc/free"),
            ("libc.so.6", "cfree@GLIBC_2.2.5", false, "malloc/free"),
            ("corkboard", "sqlite3VdbeExec", false, "SQLite"),
            ("corkboard", "fts5SegIterNext", false, "SQLite"),
            (
                "corkboard",
                "alloc::collections::btree::map::BTreeMap<K,V>::get",
                false,
                "other",
            ),
            (
                "corkboard",
                "rusqlite::statement::Statement::query_row",
                false,
                "SQLite",
            ),
            (
                "corkboard",
                "serde_json::de::Deserializer<R>::parse_str",
                false,
                "serde_json/validation",
            ),
            (
                "corkboard",
                "corkboard_mcp::validate::schema::check",
                false,
                "serde_json/validation",
            ),
            (
                "corkboard",
                "tracing_subscriber::fmt::format::Format::format_event",
                false,
                "tracing/logging",
            ),
            (
                "corkboard",
                "corkboard_server::audit::AuditWriter::record",
                false,
                "audit",
            ),
            (
                "corkboard",
                "prometheus::histogram::Histogram::observe",
                false,
                "Prometheus",
            ),
            ("corkboard", "redis::cmd::Cmd::query_async", false, "Redis"),
            ("libc.so.6", "__memmove_avx_unaligned_erms", false, "other"),
            ("[unknown]", "0x00007f12", false, "other"),
        ];
        for (dso, symbol, kernel, want) in cases {
            assert_eq!(category(dso, symbol, kernel), want, "{symbol}");
        }
    }

    #[test]
    fn a_report_sums_into_categories() {
        let report = "# Overhead\tShared Object\tSymbol\n#\n\
            12.50%\t[kernel.kallsyms]\t[k] tcp_sendmsg\n\
            2.50%\t[kernel.kallsyms]\t[k] tcp_recvmsg\n\
            10.00%\tcorkboard\t[.] sqlite3VdbeExec\n\
            5.00%\tlibc.so.6\t[.] malloc\n\
            not a row\n";
        let shares = categorize(report);
        assert_eq!(shares["TCP/kernel network"], 15.0);
        assert_eq!(shares["SQLite"], 10.0);
        assert_eq!(shares["malloc/free"], 5.0);
        assert_eq!(shares.len(), 3);
    }
}
