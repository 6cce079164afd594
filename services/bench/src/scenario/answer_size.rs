//! Answer size: bytes and estimated tokens of the default `list_issues`
//! and `get_issue` answers on the board of the budget issue (60 issues
//! with 2 KB bodies and 3 comments each, plus one issue with 500
//! comments), through the studio endpoint of `corkboard serve`, stateless
//! era. Not a timed figure: the size of what an agent's context receives.
//!
//! "bytes" is the whole `result` of the JSON-RPC response (both content
//! blocks and the envelope), as the server wrote it; "tokens" is bytes / 4,
//! the usual estimate for English text and JSON (Claude Code's limits are
//! in tokens: it warns above 10,000 and cuts at 25,000). The "whole
//! issues" rows rebuild the answer the board gave before the budget (every
//! issue complete with every comment, the JSON as structured content and
//! again as the text block) from the same board, read whole through the
//! cursors, so both shapes are measured on the same data.

use crate::client::{Connection, Target};
use crate::error::{BenchError, Result};
use crate::mcp;
use crate::procs::Binaries;
use crate::record::{Record, Sink};
use crate::scenario::deploy::{DeploySpec, Deployment, Endpoint, Registry, Store};
use hyper::Method;
use serde_json::{Map, Value, json};
use std::path::Path;

const CAPS: [&str; 4] = [
    "issues:read",
    "issues:create",
    "issues:update",
    "comments:write",
];

/// Prose of about `bytes` bytes, as agents write it.
fn prose(seed: usize, bytes: usize) -> String {
    let words = [
        "the", "build", "fails", "when", "cache", "is", "cold", "and", "retry", "works",
    ];
    let mut out = String::new();
    let mut i = seed;
    while out.len() < bytes {
        out.push_str(words[i % words.len()]);
        out.push(if i % 13 == 12 { '\n' } else { ' ' });
        i += 7;
    }
    out
}

struct Board {
    connection: Connection,
    target: Target,
    token: String,
}

impl Board {
    /// One tool call; returns the JSON-RPC `result`, checked to be a success.
    async fn call(&mut self, tool: &str, arguments: Value) -> Result<Value> {
        let call = mcp::stateless_named_call(&self.token, tool, &arguments)?;
        let reply = self
            .connection
            .send(Method::POST, &self.target.path, &call.headers, call.body)
            .await?;
        let body = reply.json()?;
        if body["result"]["isError"] != false {
            return Err(BenchError::protocol(
                tool,
                format!("HTTP {}: {}", reply.status, reply.text()),
            ));
        }
        Ok(body["result"].clone())
    }

    /// An issue complete with every comment, as the board answered before
    /// the budget: read through the comment cursor and put back together.
    async fn whole(&mut self, id: &Value) -> Result<Value> {
        let mut arguments = json!({ "id": id, "comments_limit": 500 });
        let mut comments: Vec<Value> = Vec::new();
        loop {
            let result = self.call("get_issue", arguments.clone()).await?;
            let mut issue = result["structuredContent"].clone();
            let page = issue["comments"].as_array().cloned().unwrap_or_default();
            comments.splice(0..0, page);
            match issue["comments_cursor"].as_str() {
                Some(cursor) => arguments["comments_before"] = json!(cursor),
                None => {
                    if let Value::Object(map) = &mut issue {
                        for extra in [
                            "comment_count",
                            "older_comments",
                            "comments_cursor",
                            "truncated",
                        ] {
                            map.remove(extra);
                        }
                        map.insert("comments".into(), Value::Array(comments));
                    }
                    return Ok(issue);
                }
            }
        }
    }
}

/// Bytes of a `result` object as compact JSON.
fn bytes(result: &Value) -> usize {
    serde_json::to_vec(result).map_or(0, |b| b.len())
}

/// The `result` the board sent before the budget for `structured`: the
/// JSON once as the text block and once as `structuredContent`, with the
/// envelope of `like` (an answer of today, same revision).
fn old_result(structured: Value, like: &Value) -> Value {
    let mut result = Map::new();
    result.insert(
        "content".into(),
        json!([{ "type": "text", "text": structured.to_string() }]),
    );
    result.insert("structuredContent".into(), structured);
    for key in ["isError", "resultType", "_meta"] {
        if let Some(value) = like.get(key) {
            result.insert(key.into(), value.clone());
        }
    }
    Value::Object(result)
}

fn record(tool: &str, shape: &str, what: &str, result: &Value, items: usize) -> Record {
    let size = bytes(result);
    let text = &result["content"][0]["text"];
    Record::new("answer_size")
        .label("tool", tool)
        .label("shape", shape)
        .label("board", what)
        .value("bytes", size as f64)
        .value("tokens_est", (size / 4) as f64)
        .value(
            "structured_bytes",
            bytes(&result["structuredContent"]) as f64,
        )
        .value("text_bytes", bytes(text) as f64)
        .value("items", items as f64)
}

pub async fn run(bins: &Binaries, logs: &Path, sink: &mut Sink) -> Result<()> {
    let spec = DeploySpec {
        endpoint: Endpoint::Studio,
        store: Store::Sqlite,
        registry: Registry::Memory,
        log: None,
        env: Vec::new(),
    };
    let deployment = Deployment::start(bins, spec, logs).await?;
    let granted = deployment.grant("bench", "answer-size", &CAPS).await?;
    let target = Target::parse(&granted.mcp_url)?;
    let mut board = Board {
        connection: Connection::open(&target).await?,
        target,
        token: granted.token.clone(),
    };
    let mut ids = Vec::new();
    for i in 0..60 {
        let created = board
            .call(
                "create_issue",
                json!({
                    "title": format!("Flaky integration test number {i} on the CI runners"),
                    "body": prose(i, 2_048),
                    "labels": ["bug", "area:ci"],
                    "priority": "high",
                }),
            )
            .await?;
        let id = created["structuredContent"]["id"].clone();
        for c in 0..3 {
            board
                .call(
                    "add_comment",
                    json!({ "issue_id": id, "body": prose(c, 400) }),
                )
                .await?;
        }
        ids.push(id);
    }
    let sixty = "60 issues, 2 KB bodies, 3 comments each";

    let list = board.call("list_issues", json!({})).await?;
    let shown = list["structuredContent"]["issues"]
        .as_array()
        .map_or(0, Vec::len);
    sink.emit(record(
        "list_issues",
        "summaries (today)",
        sixty,
        &list,
        shown,
    ))?;
    let newest = ids.last().cloned().unwrap_or(Value::Null);
    let get = board.call("get_issue", json!({ "id": newest })).await?;
    sink.emit(record(
        "get_issue",
        "latest comments (today)",
        sixty,
        &get,
        3,
    ))?;

    // Before: the first page of 50 complete issues, the JSON twice.
    let mut whole = Vec::new();
    for id in ids.iter().rev().take(50) {
        whole.push(board.whole(id).await?);
    }
    let old_page = json!({ "issues": whole, "next_cursor": ids[10] });
    sink.emit(record(
        "list_issues",
        "whole issues (before)",
        sixty,
        &old_result(old_page, &list),
        50,
    ))?;
    let old_get = board.whole(&newest).await?;
    sink.emit(record(
        "get_issue",
        "whole issue (before)",
        sixty,
        &old_result(old_get, &get),
        3,
    ))?;

    // One issue with 500 comments of 300 bytes.
    let created = board
        .call(
            "create_issue",
            json!({ "title": "A long thread", "body": prose(7, 2_048) }),
        )
        .await?;
    let thread = created["structuredContent"]["id"].clone();
    for c in 0..500 {
        board
            .call(
                "add_comment",
                json!({ "issue_id": thread, "body": prose(c, 300) }),
            )
            .await?;
    }
    let long = "one issue, 500 comments of 300 bytes";
    let get = board.call("get_issue", json!({ "id": thread })).await?;
    sink.emit(record(
        "get_issue",
        "latest comments (today)",
        long,
        &get,
        10,
    ))?;
    let most = board
        .call("get_issue", json!({ "id": thread, "comments_limit": 500 }))
        .await?;
    let kept = most["structuredContent"]["comments"]
        .as_array()
        .map_or(0, Vec::len);
    sink.emit(record(
        "get_issue",
        "comments_limit=500, cut by the budget (today)",
        long,
        &most,
        kept,
    ))?;
    let old_thread = board.whole(&thread).await?;
    sink.emit(record(
        "get_issue",
        "whole issue (before)",
        long,
        &old_result(old_thread, &get),
        500,
    ))?;
    Ok(())
}
