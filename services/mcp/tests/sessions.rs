//! Legacy sessions: self-contained ids any replica sharing the key accepts,
//! refused (404) when tampered, expired, foreign or ended.

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use actix_web::http::Method;
use common::*;
use corkboard_mcp::{McpEndpoint, MemorySessionEnds, SessionEnds, code};
use serde_json::json;

fn list() -> Req {
    Req::json(&request(json!(1), "tools/list", json!({})))
}

#[actix_rt::test]
async fn a_replica_sharing_the_key_continues_the_session() {
    let toy = Toy::new();
    let first = McpEndpoint::new(toy.clone(), settings(1));
    let replica = McpEndpoint::new(toy.clone(), settings(1));
    let session = open_session(&first, "2025-06-18", "token-a").await;
    let reply = call(&replica, &list().session(&session, "2025-06-18")).await;
    assert_eq!(reply.status, 200, "{}", reply.json);
    assert!(reply.json["result"]["tools"].is_array());
}

#[actix_rt::test]
async fn another_key_refuses() {
    let toy = Toy::new();
    let first = McpEndpoint::new(toy.clone(), settings(1));
    let stranger = McpEndpoint::new(toy, settings(2));
    let session = open_session(&first, "2025-06-18", "token-a").await;
    let reply = call(&stranger, &list().session(&session, "2025-06-18")).await;
    assert_eq!(
        (reply.status, reply.code()),
        (404, Some(code::INVALID_REQUEST))
    );
}

#[actix_rt::test]
async fn tampered_ids_are_refused() {
    let ep = endpoint(Toy::new());
    let session = open_session(&ep, "2025-06-18", "token-a").await;
    for position in [0, 3, session.len() / 2, session.len() - 1] {
        let mut bytes = session.clone().into_bytes();
        bytes[position] = if bytes[position] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).unwrap_or_default();
        let reply = call(&ep, &list().session(&tampered, "2025-06-18")).await;
        assert_eq!(reply.status, 404, "tampered at {position}");
    }
    let reply = call(&ep, &list().session(&format!("{session}A"), "2025-06-18")).await;
    assert_eq!(reply.status, 404);
}

#[actix_rt::test]
async fn expired_ids_are_refused() {
    let toy = Toy::new();
    let mut short = settings(1);
    short.session_ttl = Duration::ZERO;
    let ep = McpEndpoint::new(toy.clone(), short);
    let session = open_session(&ep, "2025-06-18", "token-a").await;
    let reply = call(&ep, &list().session(&session, "2025-06-18")).await;
    assert_eq!(reply.status, 404);
    assert!(
        reply.json["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("expired"))
    );
    // The same key with a normal lifetime still refuses: expiry is in the id.
    let replica = McpEndpoint::new(toy, settings(1));
    assert_eq!(
        call(&replica, &list().session(&session, "2025-06-18"))
            .await
            .status,
        404
    );
}

#[actix_rt::test]
async fn another_principal_is_refused() {
    let ep = endpoint(Toy::new());
    let session = open_session(&ep, "2025-06-18", "token-a").await;
    let reply = call(
        &ep,
        &list()
            .session(&session, "2025-06-18")
            .header("authorization", "Bearer token-b"),
    )
    .await;
    assert_eq!(reply.status, 404);
    // And the rightful owner still gets through.
    assert_eq!(
        call(&ep, &list().session(&session, "2025-06-18"))
            .await
            .status,
        200
    );
}

#[actix_rt::test]
async fn delete_ends_the_session_on_every_replica_sharing_the_store() {
    let toy = Toy::new();
    let ends: Arc<dyn SessionEnds> = Arc::new(MemorySessionEnds::default());
    let first = McpEndpoint::with_session_ends(toy.clone(), settings(1), Arc::clone(&ends));
    let replica = McpEndpoint::with_session_ends(toy, settings(1), ends);
    let session = open_session(&first, "2025-11-25", "token-a").await;
    let delete = Req::post("")
        .method(Method::DELETE)
        .session(&session, "2025-11-25");

    // Only the owner may end it.
    let foreign = call(
        &first,
        &delete.clone().header("authorization", "Bearer token-b"),
    )
    .await;
    assert_eq!(foreign.status, 404);
    let unauthenticated = call(&first, &delete.clone().without("authorization")).await;
    assert_eq!(unauthenticated.status, 401);

    assert_eq!(call(&first, &delete).await.status, 200);
    let reply = call(&replica, &list().session(&session, "2025-11-25")).await;
    assert_eq!(
        (reply.status, reply.code()),
        (404, Some(code::INVALID_REQUEST))
    );
    assert!(
        reply.json["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("ended"))
    );
    assert_eq!(
        call(&first, &delete).await.status,
        404,
        "a second DELETE finds nothing"
    );
    let notification = Req::json(&json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    assert_eq!(
        call(&first, &notification.session(&session, "2025-11-25"))
            .await
            .status,
        404
    );

    // A new initialize starts afresh.
    let again = open_session(&first, "2025-11-25", "token-a").await;
    assert_ne!(again, session);
    assert_eq!(
        call(&replica, &list().session(&again, "2025-11-25"))
            .await
            .status,
        200
    );
}

#[actix_rt::test]
async fn delete_without_a_session_id() {
    let ep = endpoint(Toy::new());
    let reply = call(&ep, &Req::post("").method(Method::DELETE)).await;
    assert_eq!(
        (reply.status, reply.code()),
        (400, Some(code::INVALID_REQUEST))
    );
}

#[actix_rt::test]
async fn memory_session_ends_stays_bounded() {
    let ends = MemorySessionEnds::new(4);
    let far = u64::MAX;
    for i in 0..10u8 {
        let nonce = corkboard_mcp::SessionNonce([i; 16]);
        ends.end(nonce, far - u64::from(i))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(ends.is_ended(&nonce).await.unwrap_or(false));
    }
    assert_eq!(ends.len(), 4);
}
