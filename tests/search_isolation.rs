//! Tenants do not slow each other down through search (issue 28 item 5):
//! one tenant's runs keep eight costly searches in flight over MCP, and
//! another tenant's `get_issue` and `list_issues` still answer without
//! waiting behind them, while the searching tenant gets only answers it
//! can act on (hits, "too many searches for this tenant", "search took too
//! long", its runs' request rate limit).

use crate::support::*;
use corkboard_board::{Author, Body, NewIssue, RunId, TenantId, Title};
use corkboard_store_sqlite::{FILE_NAME, SqliteStore};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The noisy tenant's board: big enough that one search of
/// [`COSTLY_QUERY`] ranks every issue and takes hundreds of milliseconds.
const NOISY_ISSUES: usize = 20_000;
/// Issues per seeding transaction.
const SEED_BATCH: usize = 2_000;
/// Two prefix terms matched by every issue, one of them expanding to a
/// different word in each: every issue is matched, expanded and ranked.
const COSTLY_QUERY: &str = "common* zebr*";
/// The noisy tenant's searches in flight at once (two per run).
const STORM: usize = 8;
const NOISY_RUNS: usize = 4;
/// Rounds of the quiet tenant's reads (a `get_issue` and a `list_issues`
/// each) during the storm, a little apart so they sample all of it.
const ROUNDS: usize = 10;
const BETWEEN_ROUNDS: Duration = Duration::from_millis(200);

/// Writes the noisy tenant's board straight into the server's SQLite file
/// (the store is safe for several processes on one file): twenty thousand
/// MCP creates would take minutes.
fn seed_noisy_board(serve: &Serve, tenant: &str) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a runtime to seed with");
    runtime.block_on(async {
        let store = SqliteStore::open(&serve.data_dir.path().join(FILE_NAME))
            .expect("open the server's board file");
        let tenant = TenantId::parse(tenant).expect("tenant");
        let author = Author {
            kind: corkboard_board::AuthorKind::Run,
            run: RunId::parse("seed").expect("run"),
            grant: None,
            integrity: corkboard_board::Integrity::Agent,
        };
        for start in (0..NOISY_ISSUES).step_by(SEED_BATCH) {
            let items = (start..(start + SEED_BATCH).min(NOISY_ISSUES))
                .map(|k| {
                    let title = Title::parse(format!("common words zebra{k}x title {k}"));
                    let mut new = NewIssue::new(title.expect("title"));
                    let body: String = (0..40)
                        .map(|j| format!("zebra{}y common{} ", k * 40 + j, j % 7))
                        .collect();
                    new.body = Body::parse(body).expect("body");
                    (new, None)
                })
                .collect();
            store
                .seed_issues(&tenant, &author, items)
                .await
                .expect("seed the noisy tenant's board");
        }
    });
}

/// What one of the noisy tenant's searches got.
fn outcome(status: u16, reply: &Value) -> &'static str {
    let text = reply["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default();
    match (status, reply["result"]["isError"].as_bool()) {
        (200, Some(false)) => "hits",
        (200, Some(true)) if text.starts_with("too many searches for this tenant") => "tenant busy",
        (200, Some(true)) if text.starts_with("search took too long") => "too slow",
        // Refused at once past its time share, the storm reaches its runs'
        // request rate limit: a typed refusal too.
        (429, _) if reply["error"]["code"].as_i64() == Some(-32052) => "rate limited",
        _ => "unexpected",
    }
}

#[test]
fn a_tenants_search_storm_does_not_hold_up_another_tenants_reads() {
    let serve = Serve::start();
    seed_noisy_board(&serve, "noisy");
    let quiet = serve.grant("quiet", "quiet-run", "issues:read,issues:create");
    let (_, created) = mcp_call(
        &quiet.mcp_url,
        &quiet.token,
        "create_issue",
        json!({"title": "The quiet tenant's issue"}),
    );
    let quiet_issue = created["result"]["structuredContent"]["id"]
        .as_str()
        .unwrap_or_else(|| panic!("created: {created}"))
        .to_owned();
    let quiet_reads = [
        ("get_issue", json!({"id": quiet_issue})),
        ("list_issues", json!({})),
    ];
    // The quiet tenant's latencies alone, for the measurement printed at
    // the end (not asserted: timings on a shared machine vary).
    let mut alone = Vec::new();
    for _ in 0..ROUNDS {
        let started = Instant::now();
        let (status, reply) = mcp_call(&quiet.mcp_url, &quiet.token, "list_issues", json!({}));
        alone.push(started.elapsed());
        assert_eq!(status, 200, "{reply}");
    }
    let noisy: Vec<Granted> = (0..NOISY_RUNS)
        .map(|i| serve.grant("noisy", &format!("noisy-{i}"), "issues:read"))
        .collect();

    let stop = Arc::new(AtomicBool::new(false));
    let in_flight = Arc::new(AtomicUsize::new(0));
    let answered = Arc::new(AtomicUsize::new(0));
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let storm: Vec<_> = (0..STORM)
        .map(|i| {
            let run = noisy[i % NOISY_RUNS].clone();
            let (stop, in_flight, answered, outcomes) = (
                Arc::clone(&stop),
                Arc::clone(&in_flight),
                Arc::clone(&answered),
                Arc::clone(&outcomes),
            );
            thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    in_flight.fetch_add(1, Ordering::SeqCst);
                    let (status, reply) = mcp_call(
                        &run.mcp_url,
                        &run.token,
                        "search_issues",
                        json!({"query": COSTLY_QUERY}),
                    );
                    in_flight.fetch_sub(1, Ordering::SeqCst);
                    let seen = outcome(status, &reply);
                    // Searches that ran in the store (a refusal holds no
                    // reader, and comes back in microseconds).
                    if seen == "hits" || seen == "too slow" {
                        answered.fetch_add(1, Ordering::SeqCst);
                    }
                    let mut all = outcomes.lock().expect("outcomes");
                    all.push(if seen == "unexpected" {
                        format!("{status} {reply}")
                    } else {
                        seen.to_owned()
                    });
                }
            })
        })
        .collect();
    // The storm is on: every search sent, and given time to reach the store.
    while in_flight.load(Ordering::SeqCst) < STORM {
        thread::sleep(Duration::from_millis(10));
    }
    thread::sleep(Duration::from_millis(500));

    // For each of the quiet tenant's reads: how many of the noisy tenant's
    // searches were answered while it waited. A read queued behind the
    // storm waits for several of them (every reader busy, more searches
    // queued ahead of it); one that does not wait sees at most a stray one.
    let mut answered_meanwhile = Vec::new();
    let mut during = Vec::new();
    for _ in 0..ROUNDS {
        thread::sleep(BETWEEN_ROUNDS);
        for (tool, args) in quiet_reads.iter().cloned() {
            assert!(
                in_flight.load(Ordering::SeqCst) > 0,
                "the storm is still on"
            );
            let before = answered.load(Ordering::SeqCst);
            let started = Instant::now();
            let (status, reply) = mcp_call(&quiet.mcp_url, &quiet.token, tool, args);
            if tool == "list_issues" {
                during.push(started.elapsed());
            }
            answered_meanwhile.push(answered.load(Ordering::SeqCst) - before);
            assert_eq!(status, 200, "{tool}: {reply}");
            assert_eq!(reply["result"]["isError"], false, "{tool}: {reply}");
            assert!(
                reply.to_string().contains(&quiet_issue),
                "{tool} answers the quiet tenant's issue: {reply}"
            );
        }
    }
    stop.store(true, Ordering::SeqCst);
    for searcher in storm {
        searcher.join().expect("a searching thread");
    }

    let outcomes = outcomes.lock().expect("outcomes");
    // The measurement (issue 28 item 5 asks for it), printed, not asserted.
    let tally = |kind: &str| outcomes.iter().filter(|o| o.as_str() == kind).count();
    eprintln!(
        "quiet tenant's list_issues: alone {}; during the storm {}; noisy searches \
         answered during each quiet read {answered_meanwhile:?}; noisy outcomes: {} hits, \
         {} tenant busy, {} too slow, {} rate limited, {} other",
        summary(&mut alone),
        summary(&mut during),
        tally("hits"),
        tally("tenant busy"),
        tally("too slow"),
        tally("rate limited"),
        outcomes.len()
            - tally("hits")
            - tally("tenant busy")
            - tally("too slow")
            - tally("rate limited"),
    );
    let unexpected: Vec<&String> = outcomes
        .iter()
        .filter(|o| !["hits", "tenant busy", "too slow", "rate limited"].contains(&o.as_str()))
        .collect();
    assert!(
        unexpected.is_empty(),
        "the noisy tenant gets hits or a typed refusal, nothing else: {unexpected:?}"
    );
    // Ran in the store: answered, or stopped there at the search deadline
    // (on a loaded machine every one of them may run that long; both held
    // a reader, which is what the storm is for).
    assert!(
        outcomes.iter().any(|o| o == "hits" || o == "too slow"),
        "the noisy tenant's searches ran: {outcomes:?}"
    );
    let total: usize = answered_meanwhile.iter().sum();
    assert!(
        total <= answered_meanwhile.len(),
        "the quiet tenant's reads waited behind the noisy tenant's searches: searches \
         answered during each read: {answered_meanwhile:?}"
    );
}

/// Median and maximum of `times`, in ms.
fn summary(times: &mut [Duration]) -> String {
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    match (times.get(times.len() / 2), times.last()) {
        (Some(&median), Some(&max)) => {
            format!("median {:.1} ms, max {:.1} ms", ms(median), ms(max))
        }
        _ => "no samples".to_owned(),
    }
}
