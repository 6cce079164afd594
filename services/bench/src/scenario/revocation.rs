//! Revocation propagation between two `corkboard server` replicas sharing
//! one Redis registry (and one board): per trial, a grant is created on A,
//! used on B until B has it cached, revoked on A, and B is polled on a
//! keep-alive connection until it refuses the token. The figure is the
//! time from sending the revocation to B's first refusal.

use crate::client::{Connection, Target};
use crate::error::{BenchError, Result};
use crate::mcp;
use crate::procs::{self, Binaries, Process};
use crate::record::{Record, Sink};
use crate::setup;
use hyper::Method;
use std::path::Path;
use std::time::{Duration, Instant};

/// Longest B may keep accepting a revoked token before the trial counts as
/// a failure (the contract says one second; this only bounds the wait).
const PROPAGATION_DEADLINE: Duration = Duration::from_secs(10);
/// Requests B must answer with 200 before the revocation, so the grant is
/// in B's local cache and the trial measures invalidation, not a miss.
const WARM_REQUESTS: usize = 3;

pub async fn run(bins: &Binaries, trials: usize, logs: &Path, sink: &mut Sink) -> Result<()> {
    let redis = procs::redis()?;
    let dir = tempfile::Builder::new()
        .prefix("corkboard-bench-revocation-")
        .tempdir()
        .map_err(BenchError::io("create a temporary directory"))?;
    let mut env = procs::cluster_secrets(dir.path())?;
    env.extend([
        ("CORKBOARD_REGISTRY".to_owned(), "redis".to_owned()),
        ("CORKBOARD_REDIS_URL".to_owned(), redis.url()),
        (
            "CORKBOARD_DATA_DIR".to_owned(),
            dir.path().join("data").display().to_string(),
        ),
    ]);
    let start = |name: &str| -> Result<Process> {
        let mut cmd = bins.corkboard();
        cmd.args(["server", "--listen", "127.0.0.1:0"])
            .envs(env.iter().cloned());
        Process::spawn(name, cmd, &logs.join(format!("{name}.log")))
    };
    let mut a = start("replica-a")?;
    a.ready().await?;
    let mut b = start("replica-b")?;
    b.ready().await?;
    let admin = setup::admin_token(bins, &env, None)?;

    let mut samples = Vec::with_capacity(trials);
    let mut acks = Vec::with_capacity(trials);
    let mut failures = 0u64;
    let b_target = Target::parse(&format!("{}/mcp", b.url))?;
    let mut b_conn = Connection::open(&b_target).await?;
    for trial in 0..trials {
        let run = format!("rev-{trial}");
        let granted = setup::create_grant(&a.url, &admin, "bench", &run, &["issues:read"]).await?;
        let poll = mcp::stateless_request(&granted.token, "tools/list")?;
        let mut warm = 0;
        let warm_deadline = Instant::now() + PROPAGATION_DEADLINE;
        while warm < WARM_REQUESTS {
            if !b_conn.is_open() {
                b_conn = Connection::open(&b_target).await?;
            }
            let reply = b_conn
                .send(
                    Method::POST,
                    &b_target.path,
                    &poll.headers,
                    poll.body.clone(),
                )
                .await?;
            if reply.status.as_u16() == 200 {
                warm += 1;
            } else if Instant::now() > warm_deadline {
                return Err(BenchError::protocol(
                    "replica B",
                    format!(
                        "a new grant is still refused after {PROPAGATION_DEADLINE:?}: HTTP {}",
                        reply.status
                    ),
                ));
            }
        }
        let sent = Instant::now();
        setup::revoke_grant(&a.url, &admin, "bench", &granted.grant_id).await?;
        acks.push(sent.elapsed().as_secs_f64() * 1000.0);
        loop {
            if !b_conn.is_open() {
                b_conn = Connection::open(&b_target).await?;
            }
            let reply = b_conn
                .send(
                    Method::POST,
                    &b_target.path,
                    &poll.headers,
                    poll.body.clone(),
                )
                .await?;
            let status = reply.status.as_u16();
            if status == 403 {
                samples.push(sent.elapsed().as_secs_f64() * 1000.0);
                break;
            }
            if status != 200 || sent.elapsed() > PROPAGATION_DEADLINE {
                failures += 1;
                break;
            }
        }
    }
    a.check_alive()?;
    b.check_alive()?;
    let mut record = Record::new("revocation")
        .label("mode", "two servers, shared Redis")
        .with_samples(&samples);
    record.errors = failures;
    let mut sorted_acks = acks.clone();
    sorted_acks.sort_by(f64::total_cmp);
    record = record
        .value(
            "revoke_call_p50_ms",
            crate::record::quantile(&sorted_acks, 0.5),
        )
        .value(
            "revoke_call_p99_ms",
            crate::record::quantile(&sorted_acks, 0.99),
        );
    record.note =
        Some("from sending DELETE to A until B's first 403; includes the revoke call".into());
    sink.emit(record)?;
    Ok(())
}
