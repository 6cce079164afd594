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
