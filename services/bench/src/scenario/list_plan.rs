//! Where the MongoDB default `list_issues` time goes as one tenant's board
//! grows (issue 33 item 5): at each size, on one board bulk-seeded with the
//! search corpus (the documents `create_issue` writes), the store's call,
//! the same query through the bare driver (full documents, then `_id`
//! only), and the query's `explain` (`executionStats`: keys and documents
//! examined, the server's own time). Keys and documents examined do not
//! depend on load; the times do, so they are read side by side, in one run.
//!
//! How to read it: examined counts that stay at the page size (51) while
//! the store's time grows say the query shape is index-bound and the
//! growth is not the store's; the bare driver's full-document find growing
//! like the store's puts it in the server (or the documents); the `_id`-only
//! find staying flat while full documents grow puts it in reading the
//! documents (size, cache), not in the plan.

use crate::error::{BenchError, Result};
use crate::record::{Record, Sink};
use crate::scenario::curves::load_average;
use crate::scenario::deploy::Store;
use crate::scenario::search::{self, Board, BulkPath, store_error};
use corkboard_board::{IssueStore, ListQuery, TenantId, limits};
use corkboard_store_mongo::schema;
use mongodb::bson::{Bson, Document, doc};
use std::time::Instant;

const NOTE: &str = "MongoDB store, one tenant's board bulk-seeded with the search corpus (6-word \
titles, 40-word bodies, a comment on every third issue); at each size, one call at a time: \
the store's default list_issues (first page), the same find through the bare driver \
({} sorted by _id descending, limit 51, full documents), the same with only _id returned, each \
--calls times; keys_examined, docs_examined, returned and server_ms are the find's explain \
(executionStats) at that size; avg_doc_bytes is the BSON size of the page's documents";

/// What to measure.
#[derive(Debug, Clone)]
pub struct ListPlanSpec {
    /// Board sizes, in increasing order on one growing board.
    pub sizes: Vec<usize>,
    /// Calls per side and size.
    pub calls: usize,
}

fn number(doc: &Document, key: &str) -> f64 {
    match doc.get(key) {
        Some(Bson::Int32(n)) => f64::from(*n),
        Some(Bson::Int64(n)) => *n as f64,
        Some(Bson::Double(n)) => *n,
        _ => -1.0,
    }
}

fn execution_stats(doc: &Document) -> Option<Document> {
    if let Ok(stats) = doc.get_document("executionStats") {
        return Some(stats.clone());
    }
    doc.values().find_map(|v| match v {
        Bson::Document(d) => execution_stats(d),
        _ => None,
    })
}

pub async fn run(spec: &ListPlanSpec, sink: &mut Sink) -> Result<()> {
    let board = Board::open(Store::Mongodb, "bench_list_plan").await?;
    let (Some(store), Some(server)) = (&board.mongodb, &board.mongo) else {
        return Err(BenchError::Usage("the list plan needs MongoDB".into()));
    };
    let tenant = TenantId::parse("bench").map_err(|e| BenchError::Usage(e.to_string()))?;
    let client = mongodb::Client::with_uri_str(server.uri())
        .await
        .map_err(|e| BenchError::process("driver", e.to_string()))?;
    let issues = client
        .database(store.database_name())
        .collection::<Document>(&schema::issues(&tenant));
    let page = i64::from(limits::PAGE_DEFAULT) + 1;
    let mut sizes = spec.sizes.clone();
    sizes.sort_unstable();
    sizes.dedup();
    let mut seeded = 0;
    for size in sizes {
        let more = search::bulk_seed(BulkPath::Mongodb(store), &tenant, seeded, size).await?;
        seeded += more.len();
        let explain = client
            .database(store.database_name())
            .run_command(doc! {
                "explain": {
                    "find": schema::issues(&tenant), "filter": {}, "sort": { "_id": -1 },
                    "limit": page,
                },
                "verbosity": "executionStats",
            })
            .await
            .map_err(|e| BenchError::process("explain", e.to_string()))?;
        let stats = execution_stats(&explain).unwrap_or_default();
        let mut doc_bytes = 0usize;
        for side in ["driver find", "driver find _id only", "store list_issues"] {
            let mut samples = Vec::with_capacity(spec.calls);
            for _ in 0..spec.calls {
                let started = Instant::now();
                match side {
                    "store list_issues" => {
                        store
                            .list_issues(&tenant, &ListQuery::default())
                            .await
                            .map_err(store_error("list_issues"))?;
                    }
                    _ => {
                        let mut find = issues.find(doc! {}).sort(doc! { "_id": -1 }).limit(page);
                        if side.ends_with("_id only") {
                            find = find.projection(doc! { "_id": 1 });
                        }
                        let mut cursor = find
                            .await
                            .map_err(|e| BenchError::process("driver find", e.to_string()))?;
                        let mut bytes = 0;
                        while cursor
                            .advance()
                            .await
                            .map_err(|e| BenchError::process("driver find", e.to_string()))?
                        {
                            bytes += cursor.current().as_bytes().len();
                        }
                        if side == "driver find" {
                            doc_bytes = bytes / page as usize;
                        }
                    }
                }
                samples.push(started.elapsed().as_secs_f64() * 1000.0);
            }
            let mut record = Record::new("list_plan")
                .label("mode", format!("{seeded} issues"))
                .label("tool", side)
                .with_samples(&samples)
                .value("issues", seeded as f64)
                .value("returned", number(&stats, "nReturned"))
                .value("keys_examined", number(&stats, "totalKeysExamined"))
                .value("docs_examined", number(&stats, "totalDocsExamined"))
                .value("server_ms", number(&stats, "executionTimeMillis"))
                .value("avg_doc_bytes", doc_bytes as f64)
                .value("load", load_average());
            record.note = Some(NOTE.to_owned());
            sink.emit(record)?;
        }
    }
    Ok(())
}
