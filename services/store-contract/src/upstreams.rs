//! A tenant's upstream MCP servers: put (replace whole), list by name,
//! delete, tenant isolation, the per-tenant limit, sealed bytes kept
//! exactly, and grants carrying upstream patterns.

use crate::fixtures::*;
use corkboard_board::{
    BoardStore, Capabilities, HeaderName, SealedCredential, StoreError, TenantId, Timestamp,
    UPSTREAMS_PER_TENANT_MAX, Upstream, UpstreamName, UpstreamUrl,
};
use std::sync::Arc;

fn upstream(tenant: &TenantId, name: &str, sealed: &[u8]) -> Upstream {
    Upstream {
        tenant: tenant.clone(),
        name: UpstreamName::parse(name).expect("valid name"),
        url: UpstreamUrl::parse(&format!("http://127.0.0.1:9/{name}/mcp")).expect("valid url"),
        header: HeaderName::parse("X-Api-Key").expect("valid header"),
        credential: SealedCredential::from_bytes(sealed.to_vec()),
        created_at: Timestamp::from_millis(Timestamp::now().as_millis()),
        created_by: "admin".into(),
    }
}

pub async fn case_upstreams_put_list_replace_delete<S: BoardStore>(store: Arc<S>) {
    let t = tenant("upstreams");
    let other = tenant("upstreams-other");
    assert!(store.list_upstreams(&t).await.expect("list").is_empty());
    // Every byte value, so no store mangles the sealed credential.
    let sealed: Vec<u8> = (0..=255u8).collect();
    let github = upstream(&t, "github", &sealed);
    let jira = upstream(&t, "jira", b"\x00sealed\xff");
    store.put_upstream(&jira).await.expect("put jira");
    store.put_upstream(&github).await.expect("put github");
    store
        .put_upstream(&upstream(&other, "github", b"other"))
        .await
        .expect("put the other tenant's");
    assert_eq!(
        store.list_upstreams(&t).await.expect("list"),
        vec![github.clone(), jira.clone()],
        "a tenant's upstreams read back exactly, by name, and only its own"
    );
    let mut moved = upstream(&t, "github", b"new credential");
    moved.url = UpstreamUrl::parse("https://mcp.example.com/v2").unwrap();
    store.put_upstream(&moved).await.expect("replace");
    assert_eq!(
        store.list_upstreams(&t).await.expect("list"),
        vec![moved, jira.clone()],
        "putting the same name replaces the whole record"
    );
    store
        .delete_upstream(&t, &github.name)
        .await
        .expect("delete");
    assert_eq!(store.list_upstreams(&t).await.expect("list"), vec![jira]);
    assert_not_found(
        store.delete_upstream(&t, &github.name).await,
        "a deleted upstream",
    );
    assert_eq!(
        store.list_upstreams(&other).await.expect("list").len(),
        1,
        "deleting one tenant's upstream leaves the other tenant's"
    );
}

pub async fn case_upstreams_per_tenant_limit<S: BoardStore>(store: Arc<S>) {
    let t = tenant("upstream-limit");
    for i in 0..UPSTREAMS_PER_TENANT_MAX {
        store
            .put_upstream(&upstream(&t, &format!("u{i}"), b"x"))
            .await
            .expect("under the limit");
    }
    let over = store.put_upstream(&upstream(&t, "one-more", b"x")).await;
    assert!(
        matches!(&over, Err(StoreError::Invalid(e)) if e.reason.contains("limit")),
        "one upstream over the limit is refused naming it, got {over:?}"
    );
    store
        .put_upstream(&upstream(&t, "u0", b"replaced"))
        .await
        .expect("replacing one at the limit is fine");
    assert_eq!(
        store.list_upstreams(&t).await.expect("list").len(),
        UPSTREAMS_PER_TENANT_MAX
    );
}

pub async fn case_grants_keep_upstream_patterns<S: BoardStore>(store: Arc<S>) {
    let t = tenant("grant-upstream");
    let mut g = grant(&t, "run-1", Timestamp::now(), 3_600_000);
    g.capabilities =
        Capabilities::parse_csv("issues:read,upstream:github:*,upstream:jira:get_*").unwrap();
    let hash = token_hash();
    store.record_grant(&g, &hash).await.expect("record");
    assert_eq!(
        store.grant(&g.id).await.expect("get").grant.capabilities,
        g.capabilities,
        "upstream patterns are kept with the board capabilities"
    );
}
