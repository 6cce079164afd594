//! Connection set-up and the schema, versioned with `PRAGMA user_version`.
//!
//! Migrations run inside `BEGIN IMMEDIATE` and re-read the version under that
//! lock, so several processes opening a fresh file at once migrate it exactly
//! once.

use crate::error::{SqliteError, is_busy};
use crate::options::SqliteOptions;
use rusqlite::{Connection, OpenFlags};
use std::path::Path;
use std::thread;
use std::time::Duration;

/// Schema steps; step `i` takes the file from version `i` to `i + 1`.
/// Append only: a released step never changes.
const MIGRATIONS: &[&str] = &[
    // 1: issues, labels, comments, idempotency keys, grants, audit.
    r#"
    CREATE TABLE issues (
        tenant       TEXT    NOT NULL,
        id           TEXT    NOT NULL,
        title        TEXT    NOT NULL,
        -- Rust's Unicode lower-casing of the title, so the text filter is
        -- a plain instr() that agrees with ListQuery::matches.
        title_lower  TEXT    NOT NULL,
        body         TEXT    NOT NULL,
        state        TEXT    NOT NULL,
        priority     TEXT    NOT NULL,
        -- Sorted labels joined by ','; issue_labels is what filters use.
        labels       TEXT    NOT NULL,
        author_run   TEXT    NOT NULL,
        author_grant TEXT,
        created_at   INTEGER NOT NULL,
        updated_at   INTEGER NOT NULL,
        version      INTEGER NOT NULL CHECK (version >= 1),
        PRIMARY KEY (tenant, id)
    ) WITHOUT ROWID;
    CREATE INDEX issues_by_state ON issues (tenant, state, id);
    CREATE INDEX issues_by_author ON issues (tenant, author_run, id);

    CREATE TABLE issue_labels (
        tenant   TEXT NOT NULL,
        issue_id TEXT NOT NULL,
        label    TEXT NOT NULL,
        PRIMARY KEY (tenant, issue_id, label),
        FOREIGN KEY (tenant, issue_id) REFERENCES issues (tenant, id) ON DELETE CASCADE
    ) WITHOUT ROWID;
    CREATE INDEX issue_labels_by_label ON issue_labels (tenant, label, issue_id);

    CREATE TABLE comments (
        seq          INTEGER PRIMARY KEY,
        tenant       TEXT    NOT NULL,
        issue_id     TEXT    NOT NULL,
        id           TEXT    NOT NULL,
        body         TEXT    NOT NULL,
        author_run   TEXT    NOT NULL,
        author_grant TEXT,
        created_at   INTEGER NOT NULL,
        UNIQUE (tenant, id),
        FOREIGN KEY (tenant, issue_id) REFERENCES issues (tenant, id) ON DELETE CASCADE
    );
    CREATE INDEX comments_by_issue ON comments (tenant, issue_id, seq);

    CREATE TABLE idempotency_keys (
        tenant      TEXT    NOT NULL,
        run         TEXT    NOT NULL,
        key         TEXT    NOT NULL,
        kind        TEXT    NOT NULL CHECK (kind IN ('issue', 'comment')),
        fingerprint TEXT    NOT NULL,
        issue_id    TEXT    NOT NULL,
        comment_id  TEXT,
        created_at  INTEGER NOT NULL,
        UNIQUE (tenant, run, key, kind),
        FOREIGN KEY (tenant, issue_id) REFERENCES issues (tenant, id) ON DELETE CASCADE
    );

    CREATE TABLE grants (
        id           TEXT    NOT NULL PRIMARY KEY,
        tenant       TEXT    NOT NULL,
        run          TEXT    NOT NULL,
        capabilities TEXT    NOT NULL,
        created_at   INTEGER NOT NULL,
        expires_at   INTEGER NOT NULL,
        created_by   TEXT    NOT NULL,
        token_hash   TEXT    NOT NULL UNIQUE,
        revoked_at   INTEGER,
        revoked_by   TEXT
    ) WITHOUT ROWID;
    CREATE INDEX grants_by_tenant ON grants (tenant, id);
    CREATE INDEX grants_by_run ON grants (tenant, run, id);
    CREATE INDEX grants_active ON grants (expires_at) WHERE revoked_at IS NULL;

    CREATE TABLE audit (
        seq            INTEGER PRIMARY KEY,
        at             INTEGER NOT NULL,
        tenant         TEXT    NOT NULL,
        run            TEXT    NOT NULL,
        grant_id       TEXT    NOT NULL,
        tool           TEXT    NOT NULL,
        outcome        TEXT    NOT NULL,
        latency_micros INTEGER NOT NULL,
        arguments_hash TEXT    NOT NULL,
        issue_id       TEXT
    );
    CREATE INDEX audit_by_tenant ON audit (tenant, at);
    CREATE INDEX audit_by_run ON audit (tenant, run, at);
    CREATE INDEX audit_by_issue ON audit (tenant, issue_id, at) WHERE issue_id IS NOT NULL;
    "#,
    // 2: relations, close reasons, claims.
    r#"
    ALTER TABLE issues ADD COLUMN parent TEXT;
    ALTER TABLE issues ADD COLUMN duplicate_of TEXT;
    -- Sorted blocker ids joined by ','; issue_blocked_by is what the
    -- inverse relation ("blocks") reads.
    ALTER TABLE issues ADD COLUMN blocked_by TEXT NOT NULL DEFAULT '';
    ALTER TABLE issues ADD COLUMN close_reason TEXT;
    ALTER TABLE issues ADD COLUMN claim_run TEXT;
    ALTER TABLE issues ADD COLUMN claim_grant TEXT;
    ALTER TABLE issues ADD COLUMN claimed_at INTEGER;
    ALTER TABLE issues ADD COLUMN claim_expires_at INTEGER;
    -- Every finished issue has a reason; the ones closed before reasons
    -- existed were completed as far as anyone said.
    UPDATE issues SET close_reason = 'completed' WHERE state IN ('done', 'closed');
    CREATE INDEX issues_by_parent ON issues (tenant, parent, id) WHERE parent IS NOT NULL;
    CREATE INDEX issues_by_claim ON issues (tenant, claim_run, id) WHERE claim_run IS NOT NULL;
    -- Revoking a grant ends its claims: found by grant, whatever the tenant.
    CREATE INDEX issues_by_claim_grant ON issues (claim_grant) WHERE claim_grant IS NOT NULL;

    CREATE TABLE issue_blocked_by (
        tenant     TEXT NOT NULL,
        issue_id   TEXT NOT NULL,
        blocker_id TEXT NOT NULL,
        PRIMARY KEY (tenant, issue_id, blocker_id),
        FOREIGN KEY (tenant, issue_id) REFERENCES issues (tenant, id) ON DELETE CASCADE
    ) WITHOUT ROWID;
    CREATE INDEX issue_blocked_by_blocker ON issue_blocked_by (tenant, blocker_id, issue_id);
    "#,
    // 3: audit records keep the id the audit writer gave them, so a batch
    // written again after an unknown outcome (its writer answered too late)
    // stores each record once. Older records have none (NULLs are distinct).
    r#"
    ALTER TABLE audit ADD COLUMN record_id TEXT;
    CREATE UNIQUE INDEX audit_by_record_id ON audit (record_id);
    "#,
    // 4: tenants' own grant settings (renewal limits; JSON, see ops/policy.rs).
    r#"
    CREATE TABLE tenant_settings (
        tenant       TEXT NOT NULL PRIMARY KEY,
        grant_policy TEXT NOT NULL
    ) WITHOUT ROWID;
    "#,
    // 5: webhook endpoints and the outbox of their undelivered deliveries
    // (ops/webhooks.rs).
    r#"
    CREATE TABLE webhooks (
        id              TEXT    NOT NULL PRIMARY KEY,
        tenant          TEXT    NOT NULL,
        url             TEXT    NOT NULL,
        events          TEXT    NOT NULL,
        secret          TEXT    NOT NULL,
        created_at      INTEGER NOT NULL,
        delivered       INTEGER NOT NULL DEFAULT 0,
        dead            INTEGER NOT NULL DEFAULT 0,
        dropped         INTEGER NOT NULL DEFAULT 0,
        last_attempt_at INTEGER,
        last_status     INTEGER,
        last_error      TEXT
    ) WITHOUT ROWID;
    CREATE INDEX webhooks_by_tenant ON webhooks (tenant, id);
    CREATE TABLE webhook_outbox (
        id              TEXT    NOT NULL PRIMARY KEY,
        tenant          TEXT    NOT NULL,
        webhook         TEXT    NOT NULL,
        event           TEXT    NOT NULL,
        body            TEXT    NOT NULL,
        created_at      INTEGER NOT NULL,
        attempts        INTEGER NOT NULL,
        next_attempt_at INTEGER NOT NULL,
        lease_until     INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE INDEX webhook_outbox_due ON webhook_outbox (next_attempt_at, id);
    CREATE INDEX webhook_outbox_by_webhook ON webhook_outbox (webhook);
    CREATE INDEX webhook_outbox_by_tenant ON webhook_outbox (tenant);
    "#,
    // 6: full-text search over titles, bodies and comments.
    //
    // One FTS5 row per issue, holding the issue's words as the domain cuts
    // them (`corkboard_board::normalized`: lower-cased alphanumeric runs
    // joined by spaces), so the `ascii` tokenizer only splits on spaces and
    // never disagrees with the domain about what a word is. `tenant` is an
    // indexed column holding the tenant id as one token (`-` is a token
    // character), so every MATCH pins its tenant. `issues.search_rowid`
    // is the issue's row here: every write that changes a title, a body or
    // the comments updates it in the same transaction. The backfill uses
    // `corkboard_words`, the domain's normalisation registered on the
    // migrating connection.
    r#"
    ALTER TABLE issues ADD COLUMN search_rowid INTEGER;
    CREATE VIRTUAL TABLE issue_search USING fts5(
        tenant, issue_id UNINDEXED, title, body, comments,
        tokenize = "ascii tokenchars '-'",
        prefix = '2 3'
    );
    UPDATE issues SET search_rowid = n.rn
        FROM (SELECT tenant, id, row_number() OVER (ORDER BY tenant, id) AS rn FROM issues) AS n
        WHERE issues.tenant = n.tenant AND issues.id = n.id;
    INSERT INTO issue_search (rowid, tenant, issue_id, title, body, comments)
        SELECT i.search_rowid, i.tenant, i.id, corkboard_words(i.title), corkboard_words(i.body),
               coalesce((SELECT group_concat(corkboard_words(c.body), ' ') FROM comments c
                         WHERE c.tenant = i.tenant AND c.issue_id = i.id), '')
        FROM issues i;
    "#,
    // 7: a tenant's upstream MCP servers; `credential` is sealed bytes.
    r#"
    CREATE TABLE upstreams (
        tenant     TEXT    NOT NULL,
        name       TEXT    NOT NULL,
        url        TEXT    NOT NULL,
        header     TEXT    NOT NULL,
        credential BLOB    NOT NULL,
        created_at INTEGER NOT NULL,
        created_by TEXT    NOT NULL,
        PRIMARY KEY (tenant, name)
    ) WITHOUT ROWID;
    "#,
    // 8: per-run write budgets: the limits with the grant (JSON, empty for
    // none; older grants have none), and what each grant has taken so far,
    // one row per grant and kind, changed only by one conditional upsert
    // (ops/ledger.rs: `reserve_budget`).
    r#"
    ALTER TABLE grants ADD COLUMN budgets TEXT NOT NULL DEFAULT '{}';
    CREATE TABLE grant_budget_use (
        grant_id TEXT    NOT NULL,
        kind     TEXT    NOT NULL,
        used     INTEGER NOT NULL CHECK (used >= 0),
        PRIMARY KEY (grant_id, kind)
    ) WITHOUT ROWID;
    "#,
    // 9: the words of open issues' titles, for the similar-issue look-up
    // every create makes (ops/search.rs: `similar_open_issues`). A B-tree per
    // (tenant, word), newest issue last, so "the newest n open issues
    // holding this word" is one bounded range read, and a count per word,
    // so the look-up starts from the title's rarest word. FTS5 cannot do
    // either cheaply: newest-first there walks every segment's doclist
    // backwards, loading each from its start, and the tenant's token is in
    // every row of the tenant (28% of a create's CPU at c=64). Kept in the
    // same transaction as every write that changes a title or whether an
    // issue is open (`index_open_title`). The backfill splits
    // `corkboard_words` (words are alphanumeric runs: no quote or
    // backslash can break the JSON array).
    r#"
    CREATE TABLE open_title_words (
        tenant   TEXT NOT NULL,
        word     TEXT NOT NULL,
        issue_id TEXT NOT NULL,
        PRIMARY KEY (tenant, word, issue_id)
    ) WITHOUT ROWID;
    CREATE TABLE open_title_word_counts (
        tenant      TEXT    NOT NULL,
        word        TEXT    NOT NULL,
        open_titles INTEGER NOT NULL CHECK (open_titles > 0),
        PRIMARY KEY (tenant, word)
    ) WITHOUT ROWID;
    INSERT INTO open_title_words (tenant, word, issue_id)
        SELECT DISTINCT i.tenant, w.value, i.id
        FROM issues i,
             json_each('["' || replace(corkboard_words(i.title), ' ', '","') || '"]') w
        WHERE i.state NOT IN ('done', 'closed') AND w.value <> '';
    INSERT INTO open_title_word_counts (tenant, word, open_titles)
        SELECT tenant, word, count(*) FROM open_title_words GROUP BY tenant, word;
    "#,
    // 10: webhook claims shared fairly (ops/webhooks.rs: `claim_deliveries`):
    // an endpoint's failures in a row and the pause they give it; an
    // endpoint's due deliveries oldest first as one bounded range read; the
    // live leases (what is in flight) without reading the rest.
    r#"
    ALTER TABLE webhooks ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE webhooks ADD COLUMN paused_until INTEGER NOT NULL DEFAULT 0;
    DROP INDEX webhook_outbox_by_webhook;
    CREATE INDEX webhook_outbox_by_webhook ON webhook_outbox (webhook, next_attempt_at, id);
    CREATE INDEX webhook_outbox_leased ON webhook_outbox (lease_until, webhook);
    "#,
    // 11: values used once (the relay's sealed values), shared by every
    // process on this file; a row counts until `expires_at` (Unix ms)
    // and is then replaced or swept (ops/ledger.rs: `record_first_use`).
    r#"
    CREATE TABLE used_once (
        kind       TEXT    NOT NULL,
        id         TEXT    NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (kind, id)
    ) WITHOUT ROWID;
    CREATE INDEX used_once_by_expiry ON used_once (expires_at);
    "#,
    // 12: pinned upstream tool definitions (ops/upstreams.rs: `observe_tools`,
    // `approve_tool`): per tenant, upstream and tool, the definition last
    // seen and the one approved (canonical JSON, hex SHA-256); whether an
    // upstream's first listing is trusted (upstreams registered before pins
    // existed were trusted as they were, so they keep working); and the
    // definition in force with each upstream call's audit record.
    r#"
    ALTER TABLE upstreams ADD COLUMN trust_first_listing INTEGER NOT NULL DEFAULT 1;
    ALTER TABLE audit ADD COLUMN definition_hash TEXT;
    CREATE TABLE tool_pins (
        tenant              TEXT    NOT NULL,
        upstream            TEXT    NOT NULL,
        tool                TEXT    NOT NULL,
        seen_hash           TEXT    NOT NULL,
        seen_definition     TEXT    NOT NULL,
        seen_at             INTEGER NOT NULL,
        approved_hash       TEXT,
        approved_definition TEXT,
        approved_by         TEXT,
        approved_at         INTEGER,
        PRIMARY KEY (tenant, upstream, tool)
    ) WITHOUT ROWID;
    "#,
    // 13: what kind of principal wrote an issue or a comment (run, person,
    // admin): rows from before were runs.
    r#"
    ALTER TABLE issues ADD COLUMN author_kind TEXT NOT NULL DEFAULT 'run';
    ALTER TABLE comments ADD COLUMN author_kind TEXT NOT NULL DEFAULT 'run';
    "#,
    // 14: calls waiting for a person's approval (ops/approvals.rs): the
    // item as JSON, and the columns its reads filter on.
    r#"
    CREATE TABLE approvals (
        tenant     TEXT    NOT NULL,
        id         TEXT    NOT NULL,
        run        TEXT    NOT NULL,
        tool       TEXT    NOT NULL,
        digest     TEXT    NOT NULL,
        status     TEXT    NOT NULL,
        expires_at INTEGER NOT NULL,
        item       TEXT    NOT NULL,
        PRIMARY KEY (tenant, id)
    ) WITHOUT ROWID;
    CREATE INDEX approvals_by_status ON approvals (tenant, status, id);
    CREATE INDEX approvals_by_call ON approvals (tenant, run, digest, id);
    "#,
    // 15: the work queue (query.rs: ready work, ops/claims.rs: `claim_next`).
    // `urgency` is `Priority::urgency` (0 urgent .. 4 none), computed from
    // the priority so no write has to keep it; the ready index holds the
    // open issues of a tenant most urgent, then oldest first, so "the best
    // ready issue" is the first row of a range read that skips the claimed
    // and blocked ones. Stale claims are found through `issues_by_claim`.
    r#"
    ALTER TABLE issues ADD COLUMN urgency INTEGER GENERATED ALWAYS AS (
        CASE priority WHEN 'urgent' THEN 0 WHEN 'high' THEN 1 WHEN 'medium' THEN 2
                      WHEN 'low' THEN 3 ELSE 4 END) VIRTUAL;
    CREATE INDEX issues_ready ON issues (tenant, urgency, created_at, id)
        WHERE state NOT IN ('done', 'closed');
    -- Claims by their end, of every tenant: what `expire_claims` sweeps.
    CREATE INDEX issues_claim_expiry ON issues (claim_expires_at) WHERE claim_run IS NOT NULL;
    "#,
    // 16: issue history (ops/history.rs): one row per change, written in
    // the change's own transaction; `by_author` is the whole `Author` as
    // JSON (so new kinds of author flow through), `by_run` its run for the
    // per-run view; `fields` the `FieldChange` list as JSON.
    r#"
    CREATE TABLE issue_history (
        seq       INTEGER PRIMARY KEY,
        tenant    TEXT    NOT NULL,
        issue_id  TEXT    NOT NULL,
        version   INTEGER NOT NULL,
        at        INTEGER NOT NULL,
        by_run    TEXT    NOT NULL,
        by_author TEXT    NOT NULL,
        kind      TEXT    NOT NULL,
        fields    TEXT    NOT NULL,
        FOREIGN KEY (tenant, issue_id) REFERENCES issues (tenant, id) ON DELETE CASCADE
    );
    CREATE INDEX issue_history_by_issue ON issue_history (tenant, issue_id, version);
    CREATE INDEX issue_history_by_run ON issue_history (tenant, by_run, at, seq);
    "#,
    // 17: provenance (`corkboard_board::Integrity`, as its rank: 0
    // external, 1 agent, 2 person). `author_integrity` is the writer's
    // level when it wrote (NULL: written before levels, read by the
    // author's kind); an issue's `integrity` is the lowest of its author's
    // and every editor's since, what a grant's floor compares. Existing
    // rows get the level their author's kind implies: a run's is unknown,
    // so the lowest. The grant's floor is `min_integrity` (NULL: none).
    r#"
    ALTER TABLE issues ADD COLUMN author_integrity INTEGER;
    ALTER TABLE issues ADD COLUMN integrity INTEGER NOT NULL DEFAULT 0;
    UPDATE issues SET integrity = 2 WHERE author_kind <> 'run';
    ALTER TABLE comments ADD COLUMN author_integrity INTEGER;
    ALTER TABLE grants ADD COLUMN min_integrity TEXT;
    "#,
    // 18: the board's counts (`board_stats`, ops/claims.rs): issues per
    // state, and open issues per priority and per label, kept exact by
    // triggers in the transaction of every write to `issues` or
    // `issue_labels`, so reading them costs the number of states,
    // priorities and labels, not of issues. Each trigger reads the other
    // table as it is at that moment, so an issue and its labels are counted
    // once whichever a write changes first; the counts of the board as it
    // was are filled here.
    r#"
    CREATE TABLE board_counts (
        tenant TEXT    NOT NULL,
        kind   TEXT    NOT NULL CHECK (kind IN ('state', 'priority', 'label')),
        key    TEXT    NOT NULL,
        n      INTEGER NOT NULL,
        PRIMARY KEY (tenant, kind, key)
    ) WITHOUT ROWID;
    INSERT INTO board_counts (tenant, kind, key, n)
        SELECT tenant, 'state', state, count(*) FROM issues GROUP BY tenant, state;
    INSERT INTO board_counts (tenant, kind, key, n)
        SELECT tenant, 'priority', priority, count(*) FROM issues
        WHERE state NOT IN ('done', 'closed') GROUP BY tenant, priority;
    INSERT INTO board_counts (tenant, kind, key, n)
        SELECT l.tenant, 'label', l.label, count(*) FROM issue_labels l
        JOIN issues i ON i.tenant = l.tenant AND i.id = l.issue_id
        WHERE i.state NOT IN ('done', 'closed') GROUP BY l.tenant, l.label;
    CREATE TRIGGER board_counts_issue_insert AFTER INSERT ON issues BEGIN
        INSERT INTO board_counts (tenant, kind, key, n)
            VALUES (NEW.tenant, 'state', NEW.state, 1)
            ON CONFLICT (tenant, kind, key) DO UPDATE SET n = n + excluded.n;
        INSERT INTO board_counts (tenant, kind, key, n)
            SELECT NEW.tenant, 'priority', NEW.priority, 1
            WHERE NEW.state NOT IN ('done', 'closed')
            ON CONFLICT (tenant, kind, key) DO UPDATE SET n = n + excluded.n;
        INSERT INTO board_counts (tenant, kind, key, n)
            SELECT NEW.tenant, 'label', l.label, 1 FROM issue_labels l
            WHERE l.tenant = NEW.tenant AND l.issue_id = NEW.id
              AND NEW.state NOT IN ('done', 'closed')
            ON CONFLICT (tenant, kind, key) DO UPDATE SET n = n + excluded.n;
    END;
    CREATE TRIGGER board_counts_issue_update AFTER UPDATE OF state, priority ON issues
    WHEN OLD.state IS NOT NEW.state OR OLD.priority IS NOT NEW.priority BEGIN
        INSERT INTO board_counts (tenant, kind, key, n)
            VALUES (OLD.tenant, 'state', OLD.state, -1)
            ON CONFLICT (tenant, kind, key) DO UPDATE SET n = n + excluded.n;
        INSERT INTO board_counts (tenant, kind, key, n)
            VALUES (NEW.tenant, 'state', NEW.state, 1)
            ON CONFLICT (tenant, kind, key) DO UPDATE SET n = n + excluded.n;
        INSERT INTO board_counts (tenant, kind, key, n)
            SELECT OLD.tenant, 'priority', OLD.priority, -1
            WHERE OLD.state NOT IN ('done', 'closed')
            ON CONFLICT (tenant, kind, key) DO UPDATE SET n = n + excluded.n;
        INSERT INTO board_counts (tenant, kind, key, n)
            SELECT NEW.tenant, 'priority', NEW.priority, 1
            WHERE NEW.state NOT IN ('done', 'closed')
            ON CONFLICT (tenant, kind, key) DO UPDATE SET n = n + excluded.n;
        INSERT INTO board_counts (tenant, kind, key, n)
            SELECT l.tenant, 'label', l.label,
                   (NEW.state NOT IN ('done', 'closed')) - (OLD.state NOT IN ('done', 'closed'))
            FROM issue_labels l
            WHERE l.tenant = NEW.tenant AND l.issue_id = NEW.id
              AND (OLD.state NOT IN ('done', 'closed')) <> (NEW.state NOT IN ('done', 'closed'))
            ON CONFLICT (tenant, kind, key) DO UPDATE SET n = n + excluded.n;
    END;
    CREATE TRIGGER board_counts_issue_delete BEFORE DELETE ON issues BEGIN
        INSERT INTO board_counts (tenant, kind, key, n)
            VALUES (OLD.tenant, 'state', OLD.state, -1)
            ON CONFLICT (tenant, kind, key) DO UPDATE SET n = n + excluded.n;
        INSERT INTO board_counts (tenant, kind, key, n)
            SELECT OLD.tenant, 'priority', OLD.priority, -1
            WHERE OLD.state NOT IN ('done', 'closed')
            ON CONFLICT (tenant, kind, key) DO UPDATE SET n = n + excluded.n;
        -- Its labels go with it (by the foreign key, or by the writer):
        -- taken out here, while the issue row still says it is open.
        INSERT INTO board_counts (tenant, kind, key, n)
            SELECT l.tenant, 'label', l.label, -1 FROM issue_labels l
            WHERE l.tenant = OLD.tenant AND l.issue_id = OLD.id
              AND OLD.state NOT IN ('done', 'closed')
            ON CONFLICT (tenant, kind, key) DO UPDATE SET n = n + excluded.n;
    END;
    CREATE TRIGGER board_counts_label_insert AFTER INSERT ON issue_labels BEGIN
        INSERT INTO board_counts (tenant, kind, key, n)
            SELECT NEW.tenant, 'label', NEW.label, 1 FROM issues i
            WHERE i.tenant = NEW.tenant AND i.id = NEW.issue_id
              AND i.state NOT IN ('done', 'closed')
            ON CONFLICT (tenant, kind, key) DO UPDATE SET n = n + excluded.n;
    END;
    CREATE TRIGGER board_counts_label_delete AFTER DELETE ON issue_labels BEGIN
        INSERT INTO board_counts (tenant, kind, key, n)
            SELECT OLD.tenant, 'label', OLD.label, -1 FROM issues i
            WHERE i.tenant = OLD.tenant AND i.id = OLD.issue_id
              AND i.state NOT IN ('done', 'closed')
            ON CONFLICT (tenant, kind, key) DO UPDATE SET n = n + excluded.n;
    END;
    "#,
    // 19: ready work without a claim (`claim_next`, ops/claims.rs). The
    // ready index keeps claimed issues, so a claim_next skipped every live
    // claim before the best unclaimed issue: its cost grew with the claims
    // held (a drain of 10,000 issues by 64 runs: 1.8 ms a claim at the
    // end). Unclaimed issues come from this one instead, claims that lapsed
    // but were not swept yet from `issues_claim_expiry`.
    r#"
    CREATE INDEX issues_ready_unclaimed ON issues (tenant, urgency, created_at, id)
        WHERE state NOT IN ('done', 'closed') AND claim_run IS NULL;
    "#,
    // 20: how many transactions have changed issues, one added by each
    // writer's group that did (open_titles.rs): a process whose writer finds
    // it moved by another knows its in-memory open titles are behind.
    r#"
    CREATE TABLE issue_epoch (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        n  INTEGER NOT NULL
    );
    INSERT INTO issue_epoch (id, n) VALUES (1, 0);
    "#,
    // 21: how many transactions have changed anything but audit records,
    // one added by each writer's group that ran any other op (writer.rs):
    // a reader that finds it where it was when it read an issue knows
    // nothing it read has changed since, whichever process wrote (the
    // answers `get_issue` keeps, `IssueStore::get_issue_view_since`).
    // Replaced by the tenant's epoch in 22.
    r#"
    CREATE TABLE board_epoch (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        n  INTEGER NOT NULL
    );
    INSERT INTO board_epoch (id, n) VALUES (1, 0);
    "#,
    // 22: the epoch per tenant instead of one for the whole file, so a
    // write in one tenant leaves the answers kept for the others standing.
    // Triggers move it, in the writing transaction, on every change of a
    // row an answer shows (an issue, with its claim and relations; a
    // comment): no write op, migration or process can change one without
    // it, whatever it runs. `board_epoch` goes with it.
    r#"
    CREATE TABLE tenant_epoch (
        tenant TEXT PRIMARY KEY,
        n      INTEGER NOT NULL
    ) WITHOUT ROWID;
    CREATE TRIGGER tenant_epoch_issue_insert AFTER INSERT ON issues BEGIN
        INSERT INTO tenant_epoch (tenant, n) VALUES (NEW.tenant, 1)
            ON CONFLICT (tenant) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER tenant_epoch_issue_update AFTER UPDATE ON issues BEGIN
        INSERT INTO tenant_epoch (tenant, n) VALUES (NEW.tenant, 1)
            ON CONFLICT (tenant) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER tenant_epoch_issue_delete AFTER DELETE ON issues BEGIN
        INSERT INTO tenant_epoch (tenant, n) VALUES (OLD.tenant, 1)
            ON CONFLICT (tenant) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER tenant_epoch_comment_insert AFTER INSERT ON comments BEGIN
        INSERT INTO tenant_epoch (tenant, n) VALUES (NEW.tenant, 1)
            ON CONFLICT (tenant) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER tenant_epoch_comment_update AFTER UPDATE ON comments BEGIN
        INSERT INTO tenant_epoch (tenant, n) VALUES (NEW.tenant, 1)
            ON CONFLICT (tenant) DO UPDATE SET n = n + 1;
    END;
    CREATE TRIGGER tenant_epoch_comment_delete AFTER DELETE ON comments BEGIN
        INSERT INTO tenant_epoch (tenant, n) VALUES (OLD.tenant, 1)
            ON CONFLICT (tenant) DO UPDATE SET n = n + 1;
    END;
    DROP TABLE board_epoch;
    "#,
    // 23: audit records move to a file of their own (`AUDIT_STEPS`, attached
    // as `audit_file` while this step runs; store.rs), written by a writer
    // of their own, so the board file changes only when the board does.
    // Each record keeps its `seq`, so a copy that committed in the audit
    // file while this step's drop did not (a transaction over two WAL files
    // is atomic per file) is skipped when the step runs again.
    r#"
    INSERT INTO audit_file.audit (seq, at, tenant, run, grant_id, tool, outcome,
        latency_micros, arguments_hash, issue_id, record_id, definition_hash)
        SELECT seq, at, tenant, run, grant_id, tool, outcome, latency_micros,
               arguments_hash, issue_id, record_id, definition_hash
        FROM main.audit WHERE true
        ON CONFLICT DO NOTHING;
    DROP TABLE main.audit;
    "#,
    // 24: the full-text index's pending rows (search_writes.rs): what ops
    // change of the index is written here, in their own transaction, and
    // goes into `issue_search` about every `search_index_every` and
    // before any search of the tenant. Before, a temporary table held it
    // until the end of each group.
    r#"
    CREATE TABLE search_pending (
        rowid    INTEGER PRIMARY KEY,
        new      INTEGER NOT NULL,
        tenant   TEXT,
        issue_id TEXT,
        title    TEXT,
        body     TEXT,
        comments TEXT
    );
    CREATE INDEX search_pending_by_tenant ON search_pending (tenant);
    "#,
    // 25: the board's counts (18) checked by comparisons instead of
    // `kind IN ('state', 'priority', 'label')`: SQLite codes that CHECK as
    // a temporary index of the three values, built at every insert or
    // upsert into the table (a B-tree and its page cache opened, filled and
    // closed), four times per create (services/bench/FINDINGS.md,
    // 2026-12-07). A CHECK cannot be altered, so the table is copied. The
    // rename leaves the triggers' text alone (`legacy_alter_table`): they
    // name `board_counts`, which is the new table once renamed.
    r#"
    PRAGMA legacy_alter_table = ON;
    CREATE TABLE board_counts_next (
        tenant TEXT    NOT NULL,
        kind   TEXT    NOT NULL CHECK (kind = 'state' OR kind = 'priority' OR kind = 'label'),
        key    TEXT    NOT NULL,
        n      INTEGER NOT NULL,
        PRIMARY KEY (tenant, kind, key)
    ) WITHOUT ROWID;
    INSERT INTO board_counts_next (tenant, kind, key, n)
        SELECT tenant, kind, key, n FROM board_counts;
    DROP TABLE board_counts;
    ALTER TABLE board_counts_next RENAME TO board_counts;
    PRAGMA legacy_alter_table = OFF;
    "#,
    // 26: a tenant's claims by when they end, in place of every tenant's
    // (`issues_claim_expiry`, 15). A `claim_next` took its tenant's lapsed
    // claims from that one and so read every other tenant's lapsed claims
    // before them: another tenant's 20,000 claims lapsed and not yet swept
    // (the sweep ends 100 a second) took a claim_next from 0.7 to 9.5 ms,
    // on the one writer every tenant shares. The counts of a tenant's live
    // and stale claims (`board_stats`, an empty `claim_next`) read only its
    // claims here too. The sweep finds the tenants with claims one seek at
    // a time (ops/claims.rs, `DUE_CLAIMS`); keeping both indexes cost every
    // claim a tenth more (services/bench/FINDINGS.md, 2026-12-07).
    r#"
    CREATE INDEX issues_claim_end_by_tenant ON issues (tenant, claim_expires_at)
        WHERE claim_run IS NOT NULL;
    DROP INDEX issues_claim_expiry;
    "#,
    // 27: each comment's author kind and level in the index a page finds
    // its issues' comments by, so a page that counts them
    // (`PageComments::Counted`, ops/issues.rs `count_comments`) reads no
    // comment row: the two columns were added after the body (8, 21) and
    // sit behind it, and behind its overflow pages when it is long. The
    // same index, in the same order, two columns wider.
    r#"
    DROP INDEX comments_by_issue;
    CREATE INDEX comments_by_issue
        ON comments (tenant, issue_id, seq, author_kind, author_integrity);
    "#,
];

/// The board step that moves audit records out (its index in `MIGRATIONS`
/// plus one): a board file below it needs the audit file attached.
const AUDIT_MOVED_OUT: i64 = 23;

/// The audit file's schema steps (see `MIGRATIONS`): the `audit` table as
/// the board file last had it (migrations 1, 3 and 12).
const AUDIT_STEPS: &[&str] = &[
    // 1: one row per tool call, listed newest first by tenant, run or issue.
    r#"
    CREATE TABLE audit (
        seq             INTEGER PRIMARY KEY,
        at              INTEGER NOT NULL,
        tenant          TEXT    NOT NULL,
        run             TEXT    NOT NULL,
        grant_id        TEXT    NOT NULL,
        tool            TEXT    NOT NULL,
        outcome         TEXT    NOT NULL,
        latency_micros  INTEGER NOT NULL,
        arguments_hash  TEXT    NOT NULL,
        issue_id        TEXT,
        record_id       TEXT,
        definition_hash TEXT
    );
    CREATE INDEX audit_by_tenant ON audit (tenant, at);
    CREATE INDEX audit_by_run ON audit (tenant, run, at);
    CREATE INDEX audit_by_issue ON audit (tenant, issue_id, at) WHERE issue_id IS NOT NULL;
    CREATE UNIQUE INDEX audit_by_record_id ON audit (record_id);
    "#,
];

/// One file's schema: its steps, and the name its log lines and errors use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Schema {
    what: &'static str,
    steps: &'static [&'static str],
}

impl Schema {
    /// The version this build writes.
    pub(crate) const fn version(&self) -> i64 {
        self.steps.len() as i64
    }
}

/// The board file's schema.
pub(crate) const BOARD: Schema = Schema {
    what: "board",
    steps: MIGRATIONS,
};

/// The audit file's schema.
pub(crate) const AUDIT: Schema = Schema {
    what: "audit",
    steps: AUDIT_STEPS,
};

/// The audit file that goes with the board file at `board`:
/// `board.sqlite3` → `board.audit.sqlite3`.
pub(crate) fn audit_path(board: &Path) -> std::path::PathBuf {
    board.with_extension("audit.sqlite3")
}

/// How many prepared statements each connection keeps (least recently used
/// go first). A reader needs 2,304 list-query shapes (one per combination
/// of filters, ready work included), 8 of grants and audit lists, the point
/// reads and inverse relations, and `BEGIN`, `COMMIT`, `ROLLBACK`: about
/// 2,330, so no list
/// shape is ever evicted and re-parsed (a connection caches only the
/// shapes it has used). Searches (one shape per filter combination too)
/// share the rest: the shapes in use stay, a rare one is parsed again. The
/// writer needs about three dozen.
pub(crate) const STATEMENT_CACHE: usize = 2_400;

/// How often `PRAGMA journal_mode=WAL` is retried when another process is
/// switching the same fresh file at the same moment.
const WAL_ATTEMPTS: u32 = 5;

/// A board's two writing connections.
pub(crate) struct Writers {
    pub board: Connection,
    pub audit: Connection,
}

/// Opens the writing connections of the board file at `path` and of its
/// audit file ([`audit_path`]): creates both, switches them to WAL, and
/// migrates them, the audit file first, so that a board whose audit
/// records are still to move there moves them as it migrates (step 23).
/// Any failure names the file.
pub(crate) fn open_writers(path: &Path, options: &SqliteOptions) -> Result<Writers, SqliteError> {
    let audit_file = audit_path(path);
    let audit = open_audit_writer(&audit_file, options)?;
    let board = open_writing(path, options, WRITER_CACHE_KIB)?;
    if version(&board, path)? < AUDIT_MOVED_OUT {
        with_audit_attached(&board, path, &audit_file, |conn| {
            migrate(conn, path, &BOARD)
        })?;
    } else {
        migrate(&board, path, &BOARD)?;
    }
    // The issues each group touches, for the open titles (open_titles.rs).
    board
        .execute_batch(crate::open_titles::CREATE_TOUCHED)
        .map_err(|e| open_error(path, e))?;
    Ok(Writers { board, audit })
}

/// The board file's writing connection of [`open_writers`] (its audit
/// file set up too), for tests that write the board by hand.
#[cfg(test)]
pub(crate) fn open_writer(path: &Path, options: &SqliteOptions) -> Result<Connection, SqliteError> {
    open_writers(path, options).map(|writers| writers.board)
}

/// Opens the audit file's writing connection at `path`: made private
/// ([`crate::files::private_db`]) before SQLite opens it, and migrated.
pub(crate) fn open_audit_writer(
    path: &Path,
    options: &SqliteOptions,
) -> Result<Connection, SqliteError> {
    crate::files::private_db(path)?;
    let conn = open_writing(path, options, AUDIT_WRITER_CACHE_KIB)?;
    migrate(&conn, path, &AUDIT)?;
    Ok(conn)
}

/// Runs `migrate` with the audit file at `audit` attached as `audit_file`
/// (outside any transaction: SQLite attaches only there), detached after.
fn with_audit_attached(
    conn: &Connection,
    path: &Path,
    audit: &Path,
    migrate: impl FnOnce(&Connection) -> Result<(), SqliteError>,
) -> Result<(), SqliteError> {
    let name = audit.to_str().ok_or_else(|| SqliteError::Open {
        path: audit.to_path_buf(),
        source: rusqlite::Error::InvalidPath(audit.to_path_buf()),
    })?;
    conn.execute("ATTACH DATABASE ?1 AS audit_file", [name])
        .map_err(|e| open_error(audit, e))?;
    let migrated = migrate(conn);
    let detached = conn
        .execute_batch("DETACH DATABASE audit_file")
        .map_err(|e| open_error(path, e));
    migrated.and(detached)
}

/// A writing connection on `path`, set up as both files' writers need it,
/// with a page cache of at most `cache_kib` (negative, as `cache_size`).
fn open_writing(
    path: &Path,
    options: &SqliteOptions,
    cache_kib: i64,
) -> Result<Connection, SqliteError> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_CREATE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| open_error(path, e))?;
    configure(&conn, options).map_err(|e| open_error(path, e))?;
    // SQLite quietly falls back to read-only when it may not write the
    // file; find out now rather than on the first write.
    if conn
        .is_readonly(rusqlite::MAIN_DB)
        .map_err(|e| open_error(path, e))?
    {
        return Err(SqliteError::ReadOnly {
            path: path.to_path_buf(),
        });
    }
    enable_wal(&conn, path)?;
    // FULL: in WAL mode, NORMAL may lose the last commits on power loss,
    // and an acknowledged write must survive that.
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(|e| open_error(path, e))?;
    // Statement transactions (and each op's savepoint when a group runs
    // again after a failure) keep undo copies of the pages they touch in
    // a statement journal: in memory, not a temp file written (a system
    // call per page) on every insert.
    conn.pragma_update(None, "temp_store", "MEMORY")
        .map_err(|e| open_error(path, e))?;
    // Room for a whole group's pages (and the indexes' hot pages between
    // groups), so a large group never spills to the log before COMMIT.
    // Pages are allocated as used; this is a ceiling, not a reservation.
    conn.pragma_update(None, "cache_size", cache_kib)
        .map_err(|e| open_error(path, e))?;
    Ok(conn)
}

/// The board writer's page cache ceiling (a negative `cache_size` is in
/// KiB).
const WRITER_CACHE_KIB: i64 = -16 * 1024;

/// The audit writer's: its groups append at the right edge of the table
/// and its four indexes, a few dozen pages each, so the pages it keeps
/// between groups are of no use to it (with the board's ceiling, a load
/// of creates grew the server by about 20 MiB of audit pages).
const AUDIT_WRITER_CACHE_KIB: i64 = -2 * 1024;

/// Opens a reading connection on a file the writer has already set up.
pub(crate) fn open_reader(
    path: &Path,
    options: &SqliteOptions,
) -> Result<Connection, rusqlite::Error> {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    configure(&conn, options)?;
    // Readers share the file's WAL; query_only guards against a write
    // slipping onto a connection that is not the group-committing writer.
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

fn configure(conn: &Connection, options: &SqliteOptions) -> Result<(), rusqlite::Error> {
    conn.busy_timeout(options.busy_timeout)?;
    // The query planner stability guarantee: without it SQLite plans
    // around the values bound to some parameters (`LIMIT ?`, `LIKE ?`) and
    // marks those statements expired whenever such a parameter is bound
    // again, so every execution of a cached statement with `LIMIT ?` was
    // parsed and planned anew (24% of the server's CPU on `get_issue`,
    // whose view reads relations and comments under `LIMIT ?`). Our plans
    // never depend on those values.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    conn.pragma_update(None, "foreign_keys", true)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(())
}

fn enable_wal(conn: &Connection, path: &Path) -> Result<(), SqliteError> {
    let mut attempt = 0;
    loop {
        attempt += 1;
        match conn
            .pragma_update_and_check(None, "journal_mode", "WAL", |row| row.get::<_, String>(0))
        {
            Ok(mode) if mode.eq_ignore_ascii_case("wal") => return Ok(()),
            Ok(mode) => {
                return Err(SqliteError::NoWal {
                    path: path.to_path_buf(),
                    mode,
                });
            }
            Err(err) if is_busy(&err) && attempt < WAL_ATTEMPTS => {
                thread::sleep(Duration::from_millis(20 * u64::from(attempt)));
            }
            Err(err) => return Err(open_error(path, err)),
        }
    }
}

/// The file's schema version (`PRAGMA user_version`).
fn version(conn: &Connection, path: &Path) -> Result<i64, SqliteError> {
    conn.pragma_query_value(None, "user_version", |row| row.get(0))
        .map_err(|e| open_error(path, e))
}

fn migrate(conn: &Connection, path: &Path, schema: &Schema) -> Result<(), SqliteError> {
    let fail = |e| open_error(path, e);
    if version(conn, path)? == schema.version() {
        return Ok(());
    }
    conn.execute_batch("BEGIN IMMEDIATE").map_err(fail)?;
    let result = migrate_locked(conn, path, schema);
    match result {
        Ok(()) => conn.execute_batch("COMMIT").map_err(fail),
        Err(err) => {
            if !conn.is_autocommit() {
                let _ = conn.execute_batch("ROLLBACK");
            }
            Err(err)
        }
    }
}

fn migrate_locked(conn: &Connection, path: &Path, schema: &Schema) -> Result<(), SqliteError> {
    let fail = |e| open_error(path, e);
    // Read again under the lock: another process may have migrated meanwhile.
    let current = version(conn, path)?;
    if current > schema.version() {
        return Err(SqliteError::SchemaTooNew {
            path: path.to_path_buf(),
            found: current,
            supported: schema.version(),
        });
    }
    register_words(conn).map_err(fail)?;
    let start = usize::try_from(current).unwrap_or(0);
    for (index, step) in schema.steps.iter().enumerate().skip(start) {
        conn.execute_batch(step).map_err(fail)?;
        conn.pragma_update(None, "user_version", index as i64 + 1)
            .map_err(fail)?;
        tracing::info!(
            path = %path.display(),
            version = index + 1,
            "migrated the SQLite {}",
            schema.what
        );
    }
    Ok(())
}

/// Registers `corkboard_words(text)`: the domain's normalisation of text
/// into words, for migrations that fill the search table from SQL.
fn register_words(conn: &Connection) -> Result<(), rusqlite::Error> {
    use rusqlite::functions::FunctionFlags;
    conn.create_scalar_function(
        "corkboard_words",
        1,
        FunctionFlags::SQLITE_UTF8 | FunctionFlags::SQLITE_DETERMINISTIC,
        |ctx| {
            let text: Option<String> = ctx.get(0)?;
            Ok(corkboard_board::normalized(text.as_deref().unwrap_or("")))
        },
    )
}

fn open_error(path: &Path, source: rusqlite::Error) -> SqliteError {
    SqliteError::Open {
        path: path.to_path_buf(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Migrates the board on `conn` (in memory) to this build's version,
    /// with an audit file of its own attached for the steps that need it.
    fn migrate_board(conn: &Connection) {
        let dir = tempfile::tempdir().unwrap();
        let audit = dir.path().join("audit.sqlite3");
        drop(open_audit_writer(&audit, &SqliteOptions::default()).unwrap());
        let path = Path::new(":memory:");
        with_audit_attached(conn, path, &audit, |conn| migrate(conn, path, &BOARD)).unwrap();
    }

    #[test]
    fn migrations_apply_on_a_fresh_database_and_are_idempotent() {
        let conn = Connection::open_in_memory().unwrap();
        migrate_board(&conn);
        migrate(&conn, Path::new(":memory:"), &BOARD).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |row| row.get(0))
            .unwrap();
        assert_eq!(version, BOARD.version());
    }

    fn pragma(conn: &Connection, name: &str) -> String {
        conn.pragma_query_value(None, name, |row| row.get::<_, rusqlite::types::Value>(0))
            .map(|v| match v {
                rusqlite::types::Value::Integer(i) => i.to_string(),
                rusqlite::types::Value::Text(t) => t,
                other => format!("{other:?}"),
            })
            .unwrap()
    }

    #[test]
    fn the_writer_is_durable_wal_with_foreign_keys() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open_writer(&dir.path().join("p.sqlite3"), &SqliteOptions::default()).unwrap();
        assert_eq!(pragma(&conn, "journal_mode"), "wal");
        assert_eq!(pragma(&conn, "synchronous"), "2", "FULL");
        assert_eq!(pragma(&conn, "temp_store"), "2", "MEMORY");
        assert_eq!(pragma(&conn, "foreign_keys"), "1");
        assert_eq!(pragma(&conn, "busy_timeout"), "5000");
        assert_eq!(pragma(&conn, "cache_size"), WRITER_CACHE_KIB.to_string());
        // The audit file's writer: the same, with a page cache of its size.
        let audit =
            open_audit_writer(&dir.path().join("a.sqlite3"), &SqliteOptions::default()).unwrap();
        assert_eq!(pragma(&audit, "journal_mode"), "wal");
        assert_eq!(pragma(&audit, "synchronous"), "2", "FULL until a group");
        assert_eq!(
            pragma(&audit, "cache_size"),
            AUDIT_WRITER_CACHE_KIB.to_string()
        );
        let reader = open_reader(&dir.path().join("p.sqlite3"), &SqliteOptions::default()).unwrap();
        let refused = reader.execute("DELETE FROM issues", []);
        assert!(refused.is_err(), "readers are query-only");
    }

    #[test]
    fn the_search_step_backfills_issues_and_comments_written_before_it() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute_batch(
            "INSERT INTO issues (tenant, id, title, title_lower, body, state, priority, labels, \
             author_run, created_at, updated_at, version) VALUES \
             ('acme', 'iss_1', 'Old Login-Bug', 'old login-bug', 'Body WORDS', 'todo', 'none', \
              '', 'r', 1, 1, 1), \
             ('acme-2', 'iss_2', 'Other', 'other', '', 'todo', 'none', '', 'r', 1, 1, 1);
             INSERT INTO comments (tenant, issue_id, id, body, author_run, created_at) VALUES \
             ('acme', 'iss_1', 'cmt_1', 'first Comment', 'r', 2), \
             ('acme', 'iss_1', 'cmt_2', 'second one', 'r', 3);",
        )
        .unwrap();
        migrate_board(&conn);
        let found = |expr: &str| -> Vec<String> {
            let mut stmt = conn
                .prepare(
                    "SELECT i.id FROM issue_search s JOIN issues i \
                     ON i.tenant = 'acme' AND i.id = s.issue_id AND i.search_rowid = s.rowid \
                     WHERE issue_search MATCH ?1",
                )
                .unwrap();
            stmt.query_map([expr], |row| row.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        assert_eq!(found(r#"tenant : "acme" AND "login" AND "bug""#), ["iss_1"]);
        assert_eq!(found(r#"tenant : "acme" AND "words""#), ["iss_1"]);
        assert_eq!(
            found(r#"tenant : "acme" AND "comment" AND "second""#),
            ["iss_1"]
        );
        assert!(found(r#"tenant : "acme" AND "other""#).is_empty());
        let rows: i64 = conn
            .query_row("SELECT count(*) FROM issue_search", [], |row| row.get(0))
            .unwrap();
        assert_eq!(rows, 2);
    }

    #[test]
    fn the_open_title_step_backfills_the_words_of_open_titles_only() {
        let conn = Connection::open_in_memory().unwrap();
        register_words(&conn).unwrap();
        for step in &MIGRATIONS[..8] {
            conn.execute_batch(step).unwrap();
        }
        conn.pragma_update(None, "user_version", 8).unwrap();
        conn.execute_batch(
            "INSERT INTO issues (tenant, id, title, title_lower, body, state, priority, labels, \
             author_run, created_at, updated_at, version) VALUES \
             ('acme', 'iss_1', 'Login fails, LOGIN!', '', '', 'todo', 'none', '', 'r', 1, 1, 1), \
             ('acme', 'iss_2', 'Login page', '', '', 'in_progress', 'none', '', 'r', 1, 1, 1), \
             ('acme', 'iss_3', 'Login closed', '', '', 'done', 'none', '', 'r', 1, 1, 1), \
             ('acme', 'iss_4', '!!', '', '', 'todo', 'none', '', 'r', 1, 1, 1), \
             ('beta', 'iss_5', 'Élan vital', '', '', 'closed', 'none', '', 'r', 1, 1, 1), \
             ('beta', 'iss_6', 'Élan fails', '', '', 'triage', 'none', '', 'r', 1, 1, 1);",
        )
        .unwrap();
        migrate_board(&conn);
        let (expected, actual) = crate::ops::search::tests::open_title_index(&conn);
        assert_eq!(actual, expected);
        assert_eq!(actual.0.len(), 6, "{actual:?}");
        assert!(
            actual.1.contains(&("acme".into(), "login".into(), 2)),
            "{actual:?}"
        );
        assert!(
            actual.1.contains(&("beta".into(), "élan".into(), 1)),
            "{actual:?}"
        );
    }

    /// Rows of `board_counts`: tenant, kind, key, count.
    type Counts = Vec<(String, String, String, i64)>;

    /// The board's counts as kept, and as recounted from the rows.
    fn board_counts(conn: &Connection) -> (Counts, Counts) {
        let rows = |sql: &str| {
            let mut statement = conn.prepare(sql).unwrap();
            statement
                .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .unwrap()
                .collect::<Result<Vec<_>, _>>()
                .unwrap()
        };
        let kept =
            rows("SELECT tenant, kind, key, n FROM board_counts WHERE n <> 0 ORDER BY 1, 2, 3");
        let recounted = rows(
            "SELECT tenant, 'state', state, count(*) FROM issues GROUP BY 1, 2, 3 \
             UNION ALL SELECT tenant, 'priority', priority, count(*) FROM issues \
             WHERE state NOT IN ('done', 'closed') GROUP BY 1, 2, 3 \
             UNION ALL SELECT l.tenant, 'label', l.label, count(*) FROM issue_labels l \
             JOIN issues i ON i.tenant = l.tenant AND i.id = l.issue_id \
             WHERE i.state NOT IN ('done', 'closed') GROUP BY 1, 2, 3 ORDER BY 1, 2, 3",
        );
        (kept, recounted)
    }

    #[test]
    fn the_count_step_backfills_the_counts_and_its_triggers_keep_them() {
        let conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        register_words(&conn).unwrap();
        // Found by what it creates, wherever later steps put it.
        let step = MIGRATIONS
            .iter()
            .position(|m| m.contains("CREATE TABLE board_counts"))
            .unwrap();
        for migration in &MIGRATIONS[..step] {
            conn.execute_batch(migration).unwrap();
        }
        conn.pragma_update(None, "user_version", step as i64)
            .unwrap();
        let issue = |tenant: &str, id: &str, state: &str, priority: &str| {
            format!(
                "INSERT INTO issues (tenant, id, title, title_lower, body, state, priority, \
                 labels, author_run, created_at, updated_at, version) VALUES \
                 ('{tenant}', '{id}', 't', 't', '', '{state}', '{priority}', '', 'r', 1, 1, 1);"
            )
        };
        let label = |tenant: &str, id: &str, label: &str| {
            format!(
                "INSERT INTO issue_labels (tenant, issue_id, label) VALUES ('{tenant}', '{id}', '{label}');"
            )
        };
        let before = [
            issue("acme", "iss_1", "todo", "high"),
            issue("acme", "iss_2", "done", "high"),
            issue("acme", "iss_3", "inbox", "low"),
            issue("beta", "iss_4", "todo", "high"),
            label("acme", "iss_1", "api"),
            label("acme", "iss_2", "api"),
            label("acme", "iss_3", "ui"),
            label("beta", "iss_4", "api"),
        ];
        conn.execute_batch(&before.concat()).unwrap();
        migrate_board(&conn);
        let (kept, recounted) = board_counts(&conn);
        assert_eq!(kept, recounted, "backfilled");
        assert!(
            kept.contains(&("acme".into(), "label".into(), "api".into(), 1)),
            "{kept:?}"
        );
        let writes = [
            issue("acme", "iss_5", "triage", "urgent") + &label("acme", "iss_5", "api"),
            "UPDATE issues SET state = 'done', priority = priority WHERE id = 'iss_1';".into(),
            "UPDATE issues SET state = 'todo' WHERE id = 'iss_2';".into(),
            "UPDATE issues SET priority = 'none', title = 'x' WHERE id = 'iss_3';".into(),
            "UPDATE issues SET title = 'only the title' WHERE id = 'iss_3';".into(),
            "DELETE FROM issue_labels WHERE issue_id = 'iss_3';".to_string()
                + &label("acme", "iss_3", "docs"),
            label("acme", "iss_1", "late"),
            "DELETE FROM issues WHERE id = 'iss_5';".into(),
            "DELETE FROM issues WHERE id = 'iss_1';".into(),
        ];
        for write in writes {
            conn.execute_batch(&write).unwrap();
            let (kept, recounted) = board_counts(&conn);
            assert_eq!(kept, recounted, "after {write}");
        }
    }

    /// The writes a create and an update make to `issues` and
    /// `issue_labels`, with every trigger they fire (EXPLAIN lists the
    /// triggers' programs after the statement's own), build no temporary
    /// table: SQLite builds one at every run of an opcode `OpenEphemeral`,
    /// about 9% of a create's instructions (release build) while the
    /// board's counts were checked with `IN (...)` (step 25). (A delete of
    /// several rows of a table with triggers gathers their keys in one.)
    #[test]
    fn a_create_and_an_update_build_no_temporary_table() {
        let conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "foreign_keys", true).unwrap();
        migrate_board(&conn);
        // The writer's own notes of what its group touched (open_titles.rs).
        conn.execute_batch(crate::open_titles::CREATE_TOUCHED)
            .unwrap();
        let writes = [
            "INSERT INTO issues (tenant, id, title, title_lower, body, state, priority, labels, \
             author_run, created_at, updated_at, version) \
             VALUES ('acme', 'iss_1', 't', 't', '', 'todo', 'none', '', 'r', 1, 1, 1)",
            "INSERT INTO issue_labels (tenant, issue_id, label) VALUES ('acme', 'iss_1', 'api')",
            "UPDATE issues SET state = 'done', priority = 'high' WHERE tenant = 'acme' AND id = 'iss_1'",
        ];
        for write in writes {
            let opcodes = crate::query::opcodes(&conn, write, []);
            assert!(
                opcodes.iter().any(|op| op == "Program"),
                "the triggers are listed: {write}"
            );
            assert!(
                !opcodes.iter().any(|op| op == "OpenEphemeral"),
                "a temporary table in {write}"
            );
        }
    }

    /// A board file at the version before audit records moved out, with
    /// two records in it (one from before record ids).
    fn board_with_audit_inside(path: &Path) {
        let conn = Connection::open(path).unwrap();
        register_words(&conn).unwrap();
        for step in &MIGRATIONS[..AUDIT_MOVED_OUT as usize - 1] {
            conn.execute_batch(step).unwrap();
        }
        conn.pragma_update(None, "user_version", AUDIT_MOVED_OUT - 1)
            .unwrap();
        conn.execute_batch(
            "INSERT INTO audit (seq, at, tenant, run, grant_id, tool, outcome, latency_micros, \
             arguments_hash, issue_id, record_id, definition_hash) VALUES \
             (7, 1000, 'acme', 'r1', 'g1', 'get_issue', 'ok', 12, 'h1', 'iss_1', NULL, NULL), \
             (9, 2000, 'acme', 'r1', 'g1', 'create_issue', 'ok', 34, 'h2', NULL, 'aud_9', 'd9');",
        )
        .unwrap();
    }

    fn audit_rows(path: &Path) -> Vec<(i64, String, Option<String>)> {
        let conn = Connection::open(path).unwrap();
        let mut stmt = conn
            .prepare("SELECT seq, tool, record_id FROM audit ORDER BY seq")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    #[test]
    fn audit_records_move_to_their_own_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let board = dir.path().join("board.sqlite3");
        let audit = audit_path(&board);
        assert_eq!(audit, dir.path().join("board.audit.sqlite3"));
        board_with_audit_inside(&board);
        let moved = vec![
            (7, "get_issue".to_owned(), None),
            (9, "create_issue".to_owned(), Some("aud_9".to_owned())),
        ];

        // A copy that committed while the board's drop did not (the two
        // files commit apart): the step runs again and copies nothing twice.
        let conn = Connection::open(&board).unwrap();
        drop(open_audit_writer(&audit, &SqliteOptions::default()).unwrap());
        with_audit_attached(&conn, &board, &audit, |conn| {
            conn.execute_batch(
                &MIGRATIONS[AUDIT_MOVED_OUT as usize - 1].replace("DROP TABLE main.audit;", ""),
            )
            .map_err(|e| open_error(&board, e))
        })
        .unwrap();
        drop(conn);
        assert_eq!(audit_rows(&audit), moved);

        let conn = open_writer(&board, &SqliteOptions::default()).unwrap();
        assert_eq!(version(&conn, &board).unwrap(), BOARD.version());
        let left: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_schema WHERE name = 'audit'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(left, 0, "the board file keeps no audit table");
        let attached: i64 = conn
            .query_row(
                "SELECT count(*) FROM pragma_database_list WHERE name = 'audit_file'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(attached, 0, "the audit file is detached after the step");
        assert_eq!(audit_rows(&audit), moved);
        let audit_version: i64 = Connection::open(&audit)
            .unwrap()
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(audit_version, AUDIT.version());
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let conn = Connection::open_in_memory().unwrap();
        conn.pragma_update(None, "user_version", BOARD.version() + 1)
            .unwrap();
        let err = migrate(&conn, Path::new("x.sqlite3"), &BOARD).unwrap_err();
        assert!(
            matches!(err, SqliteError::SchemaTooNew { found, .. } if found == BOARD.version() + 1),
            "{err}"
        );
    }

    #[test]
    fn cached_statements_with_bound_limits_are_not_prepared_again() {
        use rusqlite::StatementStatus;
        use rusqlite::config::DbConfig;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qpsg.sqlite3");
        let conn = open_writer(&path, &SqliteOptions::default()).unwrap();
        conn.execute_batch(
            "CREATE TABLE t (k INTEGER PRIMARY KEY); INSERT INTO t VALUES (1), (2);",
        )
        .unwrap();
        let reprepares = |conn: &Connection| -> i32 {
            let sql = "SELECT k FROM t ORDER BY k LIMIT ?1";
            for limit in [1i64, 2, 1, 2] {
                let mut stmt = conn.prepare_cached(sql).unwrap();
                let rows: Vec<i64> = stmt
                    .query_map([limit], |row| row.get(0))
                    .unwrap()
                    .collect::<Result<_, _>>()
                    .unwrap();
                assert_eq!(rows.len() as i64, limit);
            }
            let stmt = conn.prepare_cached(sql).unwrap();
            let n = stmt.get_status(StatementStatus::RePrepare);
            drop(stmt);
            conn.flush_prepared_statement_cache();
            n
        };
        assert_eq!(
            reprepares(&conn),
            0,
            "a bound LIMIT made SQLite prepare again"
        );
        // What the setting prevents: the same statements without it.
        conn.set_db_config(DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG, false)
            .unwrap();
        assert!(
            reprepares(&conn) > 0,
            "SQLite no longer re-prepares on a bound LIMIT"
        );
    }
}
