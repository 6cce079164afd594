//! Several real OS processes writing one SQLite file at once.
//!
//! The test re-runs its own binary (`current_exe() <path> --exact`) with an
//! environment variable selecting the writer-child role. Each child creates
//! and updates issues from several tasks and prints one line per
//! acknowledged write; the parent then checks that every acknowledged write
//! is in the file, with consistent versions, and that the file is intact.

use corkboard_board::{
    Author, IdempotencyKey, IssueId, IssuePatch, IssueStore, ListQuery, NewIssue, RunId,
    StoreError, TenantId, Title,
};
use corkboard_store_sqlite::{SqliteOptions, SqliteStore};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The test's path in the harness (`multiprocess::many_processes_write_one_file`):
/// its module path without the crate name, then the function.
fn test_path() -> String {
    let module = module_path!()
        .split_once("::")
        .map_or("", |(_crate, module)| module);
    format!("{module}::many_processes_write_one_file")
}
const ROLE_ENV: &str = "CORKBOARD_SQLITE_MP_ROLE";
const DB_ENV: &str = "CORKBOARD_SQLITE_MP_DB";
const HOT_ENV: &str = "CORKBOARD_SQLITE_MP_HOT";
const CHILD_ENV: &str = "CORKBOARD_SQLITE_MP_CHILD";

const CHILDREN: usize = 4;
const TASKS_PER_CHILD: usize = 4;
/// Creates per task; each is followed by an update, and every fourth by two
/// updates of the issue all processes share.
const ROUNDS_PER_TASK: usize = 75;
/// Generous, only so a wedged child fails the test instead of hanging it.
const DEADLINE: Duration = Duration::from_secs(600);

fn tenant() -> TenantId {
    TenantId::parse("multiprocess").unwrap()
}

fn options() -> SqliteOptions {
    // Four processes contend for one lock; waiting is fine, failing is not.
    SqliteOptions {
        busy_timeout: Duration::from_secs(30),
        operation_timeout: Duration::from_secs(120),
        ..SqliteOptions::default()
    }
}

#[test]
fn many_processes_write_one_file() {
    if std::env::var_os(ROLE_ENV).is_some() {
        child();
    } else {
        parent();
    }
}

// ---------------------------------------------------------------- child

/// One acknowledged write, as a line on stdout.
fn ack(line: &str) {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ACK {line}").unwrap();
    out.flush().unwrap();
}

fn child() {
    let path = PathBuf::from(std::env::var_os(DB_ENV).expect("database path"));
    let hot = IssueId::parse(std::env::var(HOT_ENV).expect("hot issue id")).unwrap();
    let me: usize = std::env::var(CHILD_ENV).unwrap().parse().unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let store = Arc::new(SqliteStore::open_with(&path, options()).unwrap());
        let mut tasks = tokio::task::JoinSet::new();
        for task in 0..TASKS_PER_CHILD {
            let (store, hot) = (Arc::clone(&store), hot.clone());
            tasks.spawn(async move { child_task(&store, me, task, &hot).await });
        }
        while let Some(done) = tasks.join_next().await {
            done.expect("a writer task failed");
        }
    });
}

async fn child_task(store: &SqliteStore, me: usize, task: usize, hot: &IssueId) {
    let t = tenant();
    let run = RunId::parse(format!("proc-{me}-task-{task}")).unwrap();
    let author = Author {
        kind: corkboard_board::AuthorKind::Run,
        run: run.clone(),
        grant: None,
        integrity: corkboard_board::Integrity::Agent,
    };
    let mut mine: Vec<IssueId> = Vec::new();
    for round in 0..ROUNDS_PER_TASK {
        let new = NewIssue::new(Title::parse(format!("p{me} t{task} r{round}")).unwrap());
        let key = IdempotencyKey::parse(format!("create-{round}")).unwrap();
        let keyed = round % 2 == 0;
        let created = store
            .create_issue(&t, &author, new.clone(), keyed.then_some(&key))
            .await
            .expect("create");
        assert!(!created.replayed);
        ack(&format!("CREATED {}", created.issue.id));
        if keyed {
            let replay = store
                .create_issue(&t, &author, new, Some(&key))
                .await
                .expect("replay");
            assert!(replay.replayed, "a replay across the group commit");
            assert_eq!(replay.issue.id, created.issue.id);
        }
        mine.push(created.issue.id.clone());

        // Update one of our own issues without a version.
        let target = &mine[(round * 7) % mine.len()];
        let patch = IssuePatch {
            title: Some(Title::parse(format!("p{me} t{task} updated in r{round}")).unwrap()),
            ..IssuePatch::default()
        };
        let updated = store
            .update_issue(&t, target, patch, None)
            .await
            .expect("update");
        ack(&format!("UPDATED {} {}", target, updated.version));

        if round % 4 == 0 {
            // The shared issue: once optimistically, once last-writer-wins.
            let current = store.get_issue(&t, hot).await.expect("get hot");
            let patch = IssuePatch {
                title: Some(Title::parse(format!("hot by p{me} t{task} r{round}")).unwrap()),
                ..IssuePatch::default()
            };
            match store
                .update_issue(&t, hot, patch.clone(), Some(current.version))
                .await
            {
                Ok(issue) => ack(&format!("HOT {}", issue.version)),
                Err(StoreError::VersionConflict { .. }) => ack("HOTCONFLICT"),
                Err(other) => panic!("optimistic update of the shared issue: {other}"),
            }
            let issue = store
                .update_issue(&t, hot, patch, None)
                .await
                .expect("update the shared issue");
            ack(&format!("HOT {}", issue.version));
        }
    }
}

// ---------------------------------------------------------------- parent

struct Running {
    child: Child,
    stdout: std::thread::JoinHandle<String>,
    stderr: std::thread::JoinHandle<String>,
}

fn drain(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = pipe.read_to_string(&mut text);
        text
    })
}

fn spawn_child(path: &Path, hot: &IssueId, index: usize) -> Running {
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut child = Command::new(exe)
        .args([&test_path(), "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE_ENV, "writer")
        .env(DB_ENV, path)
        .env(HOT_ENV, hot.as_str())
        .env(CHILD_ENV, index.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a writer process");
    let stdout = drain(child.stdout.take().unwrap());
    let stderr = drain(child.stderr.take().unwrap());
    Running {
        child,
        stdout,
        stderr,
    }
}

/// Waits for every child, killing the ones still running at the deadline.
fn wait_all(mut running: Vec<Running>) -> Vec<(bool, String, String)> {
    let start = Instant::now();
    let mut statuses: Vec<Option<bool>> = vec![None; running.len()];
    while statuses.iter().any(Option::is_none) {
        for (i, run) in running.iter_mut().enumerate() {
            if statuses[i].is_none()
                && let Some(status) = run.child.try_wait().expect("poll a writer process")
            {
                statuses[i] = Some(status.success());
            }
        }
        if start.elapsed() > DEADLINE {
            for (i, run) in running.iter_mut().enumerate() {
                if statuses[i].is_none() {
                    let _ = run.child.kill();
                    let _ = run.child.wait();
                    statuses[i] = Some(false);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    running
        .into_iter()
        .zip(statuses)
        .map(|(run, ok)| {
            (
                ok.unwrap_or(false),
                run.stdout.join().unwrap_or_default(),
                run.stderr.join().unwrap_or_default(),
            )
        })
        .collect()
}

fn parent() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.sqlite3");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();

    let hot = runtime.block_on(async {
        let store = SqliteStore::open_with(&path, options()).unwrap();
        let author = Author {
            kind: corkboard_board::AuthorKind::Run,
            run: RunId::parse("parent").unwrap(),
            grant: None,
            integrity: corkboard_board::Integrity::Agent,
        };
        store
            .create_issue(
                &tenant(),
                &author,
                NewIssue::new(Title::parse("Shared by every process").unwrap()),
                None,
            )
            .await
            .unwrap()
            .issue
            .id
    });

    let running: Vec<Running> = (0..CHILDREN).map(|i| spawn_child(&path, &hot, i)).collect();
    let results = wait_all(running);

    let mut created: Vec<IssueId> = Vec::new();
    let mut updates: HashMap<IssueId, Vec<u64>> = HashMap::new();
    let mut hot_versions: Vec<u64> = Vec::new();
    let mut hot_conflicts = 0usize;
    for (i, (ok, stdout, stderr)) in results.iter().enumerate() {
        assert!(
            *ok,
            "writer process {i} failed or hung.\n--- stdout ---\n{stdout}\n--- stderr ---\n{stderr}"
        );
        // libtest's "test <name> ... " has no newline before the first ACK.
        let acks = stdout
            .lines()
            .filter_map(|l| l.find("ACK ").map(|at| &l[at + 4..]));
        for line in acks {
            let parts: Vec<&str> = line.split(' ').collect();
            match parts.as_slice() {
                ["CREATED", id] => created.push(IssueId::parse(*id).unwrap()),
                ["UPDATED", id, version] => updates
                    .entry(IssueId::parse(*id).unwrap())
                    .or_default()
                    .push(version.parse().unwrap()),
                ["HOT", version] => hot_versions.push(version.parse().unwrap()),
                ["HOTCONFLICT"] => hot_conflicts += 1,
                other => panic!("unexpected acknowledgement {other:?}"),
            }
        }
    }
    let expected_creates = CHILDREN * TASKS_PER_CHILD * ROUNDS_PER_TASK;
    assert_eq!(
        created.len(),
        expected_creates,
        "every create was acknowledged"
    );
    let unique: HashSet<&IssueId> = created.iter().collect();
    assert_eq!(unique.len(), created.len(), "no id was handed out twice");

    runtime.block_on(async {
        let store = SqliteStore::open_with(&path, options()).unwrap();
        let t = tenant();
        for id in &created {
            let issue = store
                .get_issue(&t, id)
                .await
                .unwrap_or_else(|e| panic!("acknowledged issue {id} is missing: {e}"));
            let acked = updates.get(id).map(Vec::as_slice).unwrap_or_default();
            assert_eq!(
                issue.version,
                1 + acked.len() as u64,
                "issue {id}: one version per acknowledged update"
            );
            let distinct: BTreeSet<u64> = acked.iter().copied().collect();
            assert_eq!(
                distinct.len(),
                acked.len(),
                "issue {id}: a version was given twice"
            );
            if let Some(max) = distinct.last() {
                assert_eq!(
                    *max, issue.version,
                    "issue {id}: the last acknowledged version is stored"
                );
            }
        }

        let shared = store.get_issue(&t, &hot).await.unwrap();
        assert_eq!(
            shared.version,
            1 + hot_versions.len() as u64,
            "the shared issue has one version per acknowledged update ({hot_conflicts} conflicts)"
        );
        let distinct: BTreeSet<u64> = hot_versions.iter().copied().collect();
        assert_eq!(
            distinct.len(),
            hot_versions.len(),
            "a shared version was given twice"
        );

        let mut listed = 0;
        let mut query = ListQuery {
            limit: 200,
            ..ListQuery::default()
        };
        loop {
            let page = store.list_issues(&t, &query).await.unwrap();
            listed += page.issues.len();
            match page.next_cursor {
                Some(cursor) => query.cursor = Some(cursor),
                None => break,
            }
        }
        assert_eq!(listed, expected_creates + 1, "no extra or missing issue");
    });

    let conn = rusqlite::Connection::open(&path).unwrap();
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .unwrap();
    assert_eq!(integrity, "ok");
    let dangling: i64 = conn
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(dangling, 0, "no row points at a missing issue");
    let issues: i64 = conn
        .query_row("SELECT count(*) FROM issues", [], |r| r.get(0))
        .unwrap();
    assert_eq!(issues as usize, expected_creates + 1);
    let keys: i64 = conn
        .query_row("SELECT count(*) FROM idempotency_keys", [], |r| r.get(0))
        .unwrap();
    let keyed_per_task = (0..ROUNDS_PER_TASK).filter(|r| r % 2 == 0).count();
    assert_eq!(
        keys as usize,
        keyed_per_task * CHILDREN * TASKS_PER_CHILD,
        "one key per keyed create, replays add none"
    );
}
