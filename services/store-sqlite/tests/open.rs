//! Opening the file: creation, reopening, and every way it can fail (each
//! a clear error naming the file, never a panic or a hang).

use corkboard_board::{
    AuditEntry, AuditLog, AuditQuery, Author, CommentBody, GrantLedger, IssueStore, ListQuery,
    NewComment, NewIssue, RunId, SearchQuery, SearchText, StoreError, StoreHealth, TenantId, Title,
};
use corkboard_store_sqlite::{AUDIT_FILE_NAME, FILE_NAME, SqliteError, SqliteOptions, SqliteStore};
use rusqlite::Connection;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

fn tenant() -> TenantId {
    TenantId::parse("acme").unwrap()
}

fn author() -> Author {
    Author {
        kind: corkboard_board::AuthorKind::Run,
        run: RunId::parse("run-1").unwrap(),
        grant: None,
        integrity: corkboard_board::Integrity::Agent,
    }
}

fn new_issue(text: &str) -> NewIssue {
    NewIssue::new(Title::parse(text).unwrap())
}

fn quick_options() -> SqliteOptions {
    SqliteOptions {
        busy_timeout: Duration::from_millis(100),
        busy_attempts: 2,
        ..SqliteOptions::default()
    }
}

#[track_caller]
fn assert_names(err: &SqliteError, path: &Path) {
    let text = err.to_string();
    assert!(
        text.contains(&path.display().to_string()),
        "the error names the file: {text}"
    );
}

/// `PRAGMA data_version` as `conn` sees it: it moves whenever another
/// connection commits to the file.
fn data_version(conn: &Connection) -> i64 {
    conn.query_row("PRAGMA data_version", [], |r| r.get(0))
        .unwrap()
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn audit_records_live_in_their_own_file_and_never_change_the_board_file() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_in_dir(dir.path()).unwrap();
    assert_eq!(store.audit_path(), dir.path().join(AUDIT_FILE_NAME));
    let board = Connection::open(store.path()).unwrap();
    let audit = Connection::open(store.audit_path()).unwrap();
    let (board_before, audit_before) = (data_version(&board), data_version(&audit));
    let entries: Vec<AuditEntry> = (0..3)
        .map(|i| {
            AuditEntry::new(corkboard_store_contract::fixtures::audit_record(
                &tenant(),
                "run-1",
                1_000 + i,
                None,
            ))
        })
        .collect();
    store.append_audit_entries(&entries).await.unwrap();
    assert_eq!(
        data_version(&board),
        board_before,
        "the board file stood still"
    );
    assert_ne!(
        data_version(&audit),
        audit_before,
        "the audit file took them"
    );
    let in_audit: i64 = audit
        .query_row("SELECT count(*) FROM audit", [], |r| r.get(0))
        .unwrap();
    assert_eq!(in_audit, 3);
    let tables: i64 = board
        .query_row(
            "SELECT count(*) FROM sqlite_schema WHERE name = 'audit'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 0, "the board file has no audit table");

    // A board write moves the board file, and the records are listed
    // after a reopen.
    store
        .create_issue(&tenant(), &author(), new_issue("moves the board"), None)
        .await
        .unwrap();
    assert_ne!(data_version(&board), board_before);
    drop(store);
    let reopened = SqliteStore::open_in_dir(dir.path()).unwrap();
    let listed = reopened
        .list_audit(&tenant(), &AuditQuery::default())
        .await
        .unwrap();
    assert_eq!(listed.len(), 3);
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn creates_its_directory_and_keeps_data_across_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("nested/data");
    let id = {
        let store = SqliteStore::open_in_dir(&data_dir).unwrap();
        assert_eq!(store.path(), data_dir.join(FILE_NAME));
        store
            .create_issue(&tenant(), &author(), new_issue("Survives"), None)
            .await
            .unwrap()
            .issue
            .id
    };
    let mode: String = Connection::open(data_dir.join(FILE_NAME))
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");

    let reopened = SqliteStore::open_in_dir(&data_dir).unwrap();
    let issue = reopened.get_issue(&tenant(), &id).await.unwrap();
    assert_eq!(issue.title.as_str(), "Survives");
    reopened.check().await.unwrap();
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn two_stores_in_one_process_share_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let a = SqliteStore::open_in_dir(dir.path()).unwrap();
    let b = SqliteStore::open_in_dir(dir.path()).unwrap();
    let created = a
        .create_issue(&tenant(), &author(), new_issue("Written by a"), None)
        .await
        .unwrap()
        .issue;
    let updated = b
        .update_issue(
            &tenant(),
            &created.id,
            corkboard_board::IssuePatch {
                title: Some(Title::parse("Updated by b").unwrap()),
                ..Default::default()
            },
            Some(1),
        )
        .await
        .unwrap();
    assert_eq!(updated.version, 2);
    assert_eq!(a.get_issue(&tenant(), &created.id).await.unwrap(), updated);
}

/// Index rows pending in the file (written with their issues, moved into
/// the full-text index later) are found by a search from any store on the
/// file, survive the stores that wrote them, and make only their own
/// tenant's searches wait.
#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_search_finds_its_tenants_pending_index_rows_from_any_store_and_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    // Writers that would move pending rows only once an hour.
    let options = SqliteOptions {
        search_index_every: Duration::from_secs(3600),
        ..quick_options()
    };
    let pending = || -> i64 {
        Connection::open(&path)
            .unwrap()
            .query_row("SELECT count(*) FROM search_pending", [], |r| r.get(0))
            .unwrap()
    };
    let zebras = |store: SqliteStore| async move {
        let query = SearchQuery::new(SearchText::parse("zebra").unwrap());
        let page = store.search_issues(&tenant(), &query).await.unwrap();
        let mut titles: Vec<String> = page
            .hits
            .iter()
            .map(|hit| hit.issue.title.as_str().to_owned())
            .collect();
        titles.sort();
        titles
    };
    let a = SqliteStore::open_with(&path, options.clone()).unwrap();
    a.create_issue(&tenant(), &author(), new_issue("Zebra crossing"), None)
        .await
        .unwrap();
    assert_eq!(pending(), 1, "the index row waits");
    let b = SqliteStore::open_with(&path, options.clone()).unwrap();
    assert_eq!(zebras(b.clone()).await, ["Zebra crossing"]);
    assert_eq!(pending(), 0, "the search had them moved");

    a.create_issue(&tenant(), &author(), new_issue("Zebra stripes"), None)
        .await
        .unwrap();
    drop((a, b));
    assert_eq!(pending(), 1);
    let reopened = SqliteStore::open_with(&path, options).unwrap();
    assert_eq!(
        zebras(reopened.clone()).await,
        ["Zebra crossing", "Zebra stripes"]
    );
    assert_eq!(pending(), 0);

    // Another tenant's pending rows are not this tenant's wait: its search
    // leaves them, the other tenant's own search moves them.
    let other = TenantId::parse("other").unwrap();
    reopened
        .create_issue(&other, &author(), new_issue("Zebra elsewhere"), None)
        .await
        .unwrap();
    assert_eq!(zebras(reopened.clone()).await.len(), 2);
    assert_eq!(pending(), 1, "acme's search did not wait for other's write");
    let query = SearchQuery::new(SearchText::parse("zebra").unwrap());
    let theirs = reopened.search_issues(&other, &query).await.unwrap();
    assert_eq!(theirs.hits.len(), 1);
    assert_eq!(pending(), 0);

    // A comment's words are the commenting tenant's pending row too.
    let crossing = reopened
        .list_issues(&tenant(), &ListQuery::default())
        .await
        .unwrap()
        .issues
        .into_iter()
        .find(|issue| issue.title.as_str() == "Zebra crossing")
        .unwrap();
    reopened
        .add_comment(
            &tenant(),
            &author(),
            NewComment {
                issue: crossing.id.clone(),
                body: CommentBody::parse("an okapi was seen here").unwrap(),
            },
            None,
        )
        .await
        .unwrap();
    assert_eq!(pending(), 1);
    let okapi = SearchQuery::new(SearchText::parse("okapi").unwrap());
    let found = reopened.search_issues(&tenant(), &okapi).await.unwrap();
    assert_eq!(found.hits.len(), 1);
    assert_eq!(found.hits[0].issue.id, crossing.id);
    assert_eq!(pending(), 0);
}

#[actix_rt::test]
async fn works_on_a_current_thread_runtime() {
    // actix-web workers run current-thread runtimes.
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_in_dir(dir.path()).unwrap();
    store
        .create_issue(&tenant(), &author(), new_issue("Single thread"), None)
        .await
        .unwrap();
    let page = store
        .list_issues(&tenant(), &ListQuery::default())
        .await
        .unwrap();
    assert_eq!(page.issues.len(), 1);
}

#[test]
fn a_directory_under_a_regular_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"x").unwrap();
    let target = file.join("data");
    let err = SqliteStore::open_in_dir(&target).unwrap_err();
    assert!(matches!(err, SqliteError::CreateDir { .. }), "{err}");
    assert_names(&err, &target);
}

#[test]
fn a_directory_in_place_of_the_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let err = SqliteStore::open(dir.path()).unwrap_err();
    assert!(matches!(err, SqliteError::Open { .. }), "{err}");
    assert_names(&err, dir.path());
}

#[test]
fn a_file_that_is_not_a_database_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    std::fs::write(&path, "this is not a database file\n".repeat(200)).unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(matches!(err, SqliteError::Open { .. }), "{err}");
    assert_names(&err, &path);
}

#[test]
fn a_file_locked_by_another_process_is_a_clear_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    // A rollback-journal writer mid-transaction holds the file exclusively:
    // nobody can even switch it to WAL.
    let holder = Connection::open(&path).unwrap();
    holder
        .execute_batch("BEGIN EXCLUSIVE; CREATE TABLE squatter (x);")
        .unwrap();
    let err = SqliteStore::open_with(&path, quick_options()).unwrap_err();
    assert!(matches!(err, SqliteError::Open { .. }), "{err}");
    assert_names(&err, &path);
    assert!(err.to_string().contains("locked"), "{err}");
    holder.execute_batch("ROLLBACK").unwrap();
    SqliteStore::open_with(&path, quick_options()).expect("opens once the lock is gone");
}

#[test]
fn a_newer_schema_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(FILE_NAME);
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", 999)
        .unwrap();
    let err = SqliteStore::open(&path).unwrap_err();
    assert!(
        matches!(err, SqliteError::SchemaTooNew { found: 999, .. }),
        "{err}"
    );
    assert_names(&err, &path);
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_write_lock_held_elsewhere_is_unavailable_then_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_with(&dir.path().join(FILE_NAME), quick_options()).unwrap();
    let holder = Connection::open(store.path()).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();

    let blocked = store
        .create_issue(&tenant(), &author(), new_issue("Blocked"), None)
        .await;
    assert!(
        matches!(&blocked, Err(StoreError::Unavailable { .. })),
        "{blocked:?}"
    );
    assert!(blocked.unwrap_err().is_retryable());
    // Reads do not need the write lock.
    store.check().await.unwrap();
    assert!(
        store
            .list_issues(&tenant(), &ListQuery::default())
            .await
            .unwrap()
            .issues
            .is_empty(),
        "the refused write left nothing behind"
    );

    holder.execute_batch("ROLLBACK").unwrap();
    store
        .create_issue(&tenant(), &author(), new_issue("After"), None)
        .await
        .expect("writes work again once the lock is released");
    assert!(
        store
            .active_grants(corkboard_board::Timestamp::now())
            .await
            .unwrap()
            .is_empty()
    );
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn write_stats_count_every_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open_in_dir(dir.path()).unwrap());
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..64 {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            store
                .create_issue(&tenant(), &author(), new_issue(&format!("n{i}")), None)
                .await
                .unwrap();
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.unwrap();
    }
    let stats = store.write_stats();
    assert_eq!(stats.writes, 64);
    assert!(stats.groups >= 1 && stats.groups <= 64, "{stats:?}");
}

fn mode_of(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

/// The database and its WAL companions.
/// The database and its WAL companions, and the audit file's.
fn board_files(db: &Path) -> Vec<std::path::PathBuf> {
    let audit = db.with_file_name(AUDIT_FILE_NAME);
    [db.to_path_buf(), audit]
        .into_iter()
        .flat_map(|file| {
            ["", "-wal", "-shm"].map(|companion| {
                let mut name = file.clone().into_os_string();
                name.push(companion);
                std::path::PathBuf::from(name)
            })
        })
        .collect()
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn a_new_board_and_its_directory_are_private_to_the_owner() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("data/nested");
    let store = SqliteStore::open_in_dir(&dir).unwrap();
    store
        .create_issue(&tenant(), &author(), new_issue("private"), None)
        .await
        .unwrap();
    assert_eq!(mode_of(&dir), 0o700);
    assert_eq!(mode_of(&tmp.path().join("data")), 0o700);
    for file in board_files(&dir.join(FILE_NAME)) {
        assert_eq!(mode_of(&file), 0o600, "{}", file.display());
    }
}

#[actix_rt::test(system = "corkboard_testkit::MultiThread")]
async fn board_files_an_older_version_left_readable_are_tightened_on_open() {
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join(FILE_NAME);
    // Keep one connection open so the WAL and SHM stay on disk.
    let first = SqliteStore::open(&db).unwrap();
    first
        .create_issue(&tenant(), &author(), new_issue("first"), None)
        .await
        .unwrap();
    for file in board_files(&db) {
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    let second = SqliteStore::open(&db).unwrap();
    second
        .create_issue(&tenant(), &author(), new_issue("second"), None)
        .await
        .unwrap();
    for file in board_files(&db) {
        assert_eq!(mode_of(&file), 0o600, "{}", file.display());
    }
    drop(first);
}

/// An operator looking at the threads (`top -H`, `ps -L`, which show a
/// thread's first 15 bytes) tells the board file's writer from the audit
/// file's: both once showed as `sqlite-writer:b`.
#[test]
fn the_board_and_audit_writers_are_told_apart_among_the_threads() {
    let dir = tempfile::tempdir().unwrap();
    let _store = SqliteStore::open(&dir.path().join(FILE_NAME)).unwrap();
    let names = || -> Vec<String> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .map(|name| name.trim().to_owned())
            .collect()
    };
    let count = |names: &[String], writer: &str| names.iter().filter(|n| *n == writer).count();
    // A new thread carries its creator's name until it has started and
    // named itself: wait for that (bounded only so a broken build fails).
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let names = names();
        let found = ["sqlite-board", "sqlite-audit"].map(|writer| count(&names, writer));
        if found == [1, 1] {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "one sqlite-board and one sqlite-audit among {names:?}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
