//! Shared set-up of the MongoDB store tests: a real `secantusd-rs` per
//! test, a database no other test uses, dropped at the end.

#![allow(dead_code)] // each test file uses its own part of this module

use corkboard_board::ExpensiveReads;
use corkboard_store_mongo::{CommandObserver, MongoOptions, MongoStore};
use corkboard_testkit::{MongoServer, unique_database};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Options for tests: short timeouts, so outages show quickly, but long
/// enough for a busy two-core machine to answer every healthy call.
pub fn test_options() -> MongoOptions {
    MongoOptions {
        server_selection_timeout: Duration::from_secs(2),
        connect_timeout: Duration::from_secs(2),
        // Above the default 10 s: the contract's races put hundreds of
        // writes on one document (508 writers for the last comment places,
        // 64 claim_next claimants on 1,000 issues), which the stand-in
        // server, on a 2-core machine running other tests, answers one
        // after another for longer than that. Those cases check outcomes
        // (exactly the limit, one winner), not latency; the bound itself
        // is tested with shorter timeouts of their own (outage.rs,
        // crash.rs), and latency under contention by the bench.
        operation_timeout: Duration::from_secs(30),
        // The same for expensive reads (above the default 2 s): a debug
        // build's `board_stats` over 10,000 documents, while other tests
        // load both cores, took longer. The deadline itself is tested by
        // the contract's expensive-read cases, with bounds of their own. So
        // is the time share (`corkboard_board::reads`): here one no case
        // reaches, the contract's 64 claimants reading the ready list
        // between claims would use it up in a debug build.
        expensive: ExpensiveReads::new(Duration::from_secs(30), ExpensiveReads::DEFAULT_PER_TENANT)
            .with_time_share(1_000_000),
        ..MongoOptions::default()
    }
}

/// What a store sent: each command's name and the command, as BSON.
pub type Sent = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// `options` with an observer that records every command the store sends
/// into the log returned beside them.
pub fn observing(options: MongoOptions) -> (MongoOptions, Sent) {
    let sent: Sent = Arc::default();
    let log = Arc::clone(&sent);
    let options = MongoOptions {
        command_observer: Some(CommandObserver::new(move |name, bytes| {
            log.lock().unwrap().push((name.to_owned(), bytes.to_vec()));
        })),
        ..options
    };
    (options, sent)
}

pub async fn connect(uri: &str, database: &str, options: MongoOptions) -> MongoStore {
    MongoStore::connect(uri, database, options)
        .await
        .unwrap_or_else(|e| panic!("connect to {uri}, database {database}: {e}"))
}

/// A raw driver client, to look at what the store wrote.
pub async fn raw_client(uri: &str) -> mongodb::Client {
    mongodb::Client::with_uri_str(uri)
        .await
        .unwrap_or_else(|e| panic!("raw client for {uri}: {e}"))
}

/// A server, a database name of its own, and a store on it. Dropping it
/// drops the database, then stops the server.
pub struct TestBoard {
    pub server: MongoServer,
    pub database: String,
    pub store: Arc<MongoStore>,
}

impl TestBoard {
    pub async fn start(test: &str) -> Self {
        Self::start_with(test, test_options()).await
    }

    pub async fn start_with(test: &str, options: MongoOptions) -> Self {
        let server = MongoServer::start();
        let database = unique_database(test);
        let store = Arc::new(connect(&server.uri(), &database, options).await);
        Self {
            server,
            database,
            store,
        }
    }

    pub fn uri(&self) -> String {
        self.server.uri()
    }

    /// Another store on the same database, with its own client and pool,
    /// as another process would have.
    pub async fn another_store(&self, options: MongoOptions) -> MongoStore {
        connect(&self.uri(), &self.database, options).await
    }

    pub async fn raw_database(&self) -> mongodb::Database {
        raw_client(&self.uri()).await.database(&self.database)
    }
}

impl Drop for TestBoard {
    fn drop(&mut self) {
        if !self.server.is_running() || std::thread::panicking() {
            return;
        }
        let (uri, database) = (self.uri(), self.database.clone());
        // Drop runs outside async code, so the driver gets a small runtime
        // of its own on a helper thread.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let drop = async { raw_client(&uri).await.database(&database).drop().await };
                match tokio::time::timeout(Duration::from_secs(30), drop).await {
                    Ok(result) => result.map_err(|e| e.to_string()),
                    Err(_) => Err("timed out".to_owned()),
                }
            })
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("dropping test database {}: {e}", self.database),
            Err(_) => panic!("dropping test database {} panicked", self.database),
        }
    }
}
