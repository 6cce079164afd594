//! Black-box: a grant that may not read issues is answered only with what
//! its own calls wrote, also when it replays a create with the same
//! idempotency key after others changed the issue (issue #28 item 12).

use crate::support;

use serde_json::json;
use support::*;

#[test]
fn a_create_only_replay_does_not_read_the_issue_as_it_is_now() {
    let serve = Serve::start();
    let writer = serve.grant("acme", "run-writer", "issues:create");
    let editor = serve.grant(
        "acme",
        "run-editor",
        "issues:read,issues:update,comments:write",
    );
    let create = |title: &str, body: &str| {
        let (status, answer) = mcp_call(
            &writer.mcp_url,
            &writer.token,
            "create_issue",
            json!({ "title": title, "body": body, "idempotency_key": "k-1" }),
        );
        assert_eq!(status, 200, "{answer}");
        assert_eq!(answer["result"]["isError"], false, "{answer}");
        answer["result"]["structuredContent"].clone()
    };
    let first = create("Flaky deploy", "what the writer wrote");
    let id = first["id"].as_str().unwrap().to_owned();
    assert_eq!(first["body"], "what the writer wrote", "{first}");
    assert!(first.get("similar").is_none(), "similar is a read: {first}");

    // Another run rewrites the body and comments.
    let (_, updated) = mcp_call(
        &editor.mcp_url,
        &editor.token,
        "update_issue",
        json!({ "id": id, "body": "SECRET rewritten by the editor" }),
    );
    assert_eq!(updated["result"]["isError"], false, "{updated}");
    let (_, commented) = mcp_call(
        &editor.mcp_url,
        &editor.token,
        "add_comment",
        json!({ "issue_id": id, "body": "SECRET comment" }),
    );
    assert_eq!(commented["result"]["isError"], false, "{commented}");

    let replay = create("Flaky deploy", "what the writer wrote");
    assert_eq!(replay["replayed"], true, "{replay}");
    assert_eq!(replay["id"], json!(id));
    assert_eq!(replay["body"], "what the writer wrote", "{replay}");
    let text = replay.to_string();
    assert!(
        !text.contains("SECRET"),
        "the replay showed what others wrote: {replay}"
    );
    for field in ["comments", "version", "updated_at", "comment_count"] {
        assert!(replay.get(field).is_none(), "{field} shown: {replay}");
    }
}
