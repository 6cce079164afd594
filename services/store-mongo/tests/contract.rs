//! The store contract suite, unchanged, against a real MongoDB-protocol
//! server: one `secantusd-rs` and one fresh database per case.

use crate::common;

use common::TestBoard;
use corkboard_store_mongo::MongoStore;
use std::sync::Arc;

async fn fresh_store() -> (Arc<MongoStore>, TestBoard) {
    let board = TestBoard::start("contract").await;
    (Arc::clone(&board.store), board)
}

corkboard_store_contract::store_contract_tests!(fresh_store());

/// A fresh server and database per case, its expensive reads bounded by
/// `reads` (sent as `maxTimeMS`).
async fn fresh_store_with(reads: corkboard_board::ExpensiveReads) -> (Arc<MongoStore>, TestBoard) {
    let options = corkboard_store_mongo::MongoOptions {
        expensive: reads,
        ..common::test_options()
    };
    let board = TestBoard::start_with("contract", options).await;
    (Arc::clone(&board.store), board)
}

corkboard_store_contract::store_expensive_read_tests!(fresh_store_with);
