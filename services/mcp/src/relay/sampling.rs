//! `sampling/createMessage`: the request an upstream sends and the result
//! the agent answers, checked in both revisions.
//!
//! Guarantees, by the `client/sampling` pages and `schema.ts` of each
//! revision:
//!
//! - `messages` is a non-empty array; each message has `role` `user` or
//!   `assistant` and `content`: one block before 2025-11-25, one block or
//!   an array of blocks from 2025-11-25 (both sides must allow it).
//! - Blocks: `text` (string `text`), `image`/`audio` (string `data` and
//!   `mimeType`), and from 2025-11-25 `tool_use` (string `id`, `name`,
//!   object `input`; assistant messages only) and `tool_result` (string
//!   `toolUseId`, array `content`; user messages only).
//! - A user message carrying `tool_result` holds only `tool_result`
//!   blocks; each pairs with a `tool_use` of the preceding assistant
//!   message, once; every `tool_use` is answered in the next message
//!   (2025-11-25 client/sampling, "tool use and result balance").
//! - `tools`/`toolChoice` only from 2025-11-25 and only to an agent that
//!   declared `sampling.tools`; `maxTokens` present and an integer;
//!   `includeContext` other than `none` only to an agent that declared
//!   `sampling.context`; no empty `content` array.
//! - The result carries `role` `assistant`, a non-empty string `model` and
//!   era-legal, non-empty `content`;
//!   `tool_use` content or `stopReason: "toolUse"` only if the request
//!   carried `tools`; a `model` other than the request's hints passes
//!   (hints are advisory), and a `tool_result` in a result pairs with no
//!   `tool_use` (the last request message never has an unanswered one).

use std::collections::HashSet;

use serde_json::{Map, Value};

use super::{AgentCapabilities, Ctx, Expectation, RelayRefusal, RelayRule, as_object, join};
use crate::revision::Revision;

/// The kind of one checked content block.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Block {
    Plain,
    ToolUse(String),
    ToolResult(String),
}

pub(super) fn request(
    ctx: Ctx,
    agent: &AgentCapabilities,
    params: Option<&Value>,
) -> Result<Expectation, RelayRefusal> {
    if !agent.sampling {
        return Err(ctx.refuse(
            RelayRule::Undeclared,
            "the agent did not declare the `sampling` capability",
        ));
    }
    let Some(params) = params else {
        return Err(ctx.malformed("params", "is required"));
    };
    let params = as_object(ctx, params, "params")?;
    let tools = params.contains_key("tools");
    for key in ["tools", "toolChoice"] {
        if params.contains_key(key) {
            ctx.needs(
                Revision::has_sampling_tools,
                &format!("`params.{key}` is sampling with tools"),
            )?;
            if !agent.sampling_tools {
                return Err(ctx.refuse(
                    RelayRule::Undeclared,
                    format!("`params.{key}` needs the agent's `sampling.tools` capability, which it did not declare"),
                ));
            }
        }
    }
    if let Some(list) = params.get("tools") {
        let Some(list) = list.as_array() else {
            return Err(ctx.malformed("params.tools", "must be an array"));
        };
        for (i, tool) in list.iter().enumerate() {
            let path = format!("params.tools[{i}]");
            let tool = as_object(ctx, tool, &path)?;
            if !tool.get("name").is_some_and(Value::is_string) {
                return Err(ctx.malformed(&join(&path, "name"), "must be a string"));
            }
            if !tool.get("inputSchema").is_some_and(Value::is_object) {
                return Err(ctx.malformed(&join(&path, "inputSchema"), "must be an object"));
            }
        }
    }
    if let Some(choice) = params.get("toolChoice") {
        let choice = as_object(ctx, choice, "params.toolChoice")?;
        if let Some(mode) = ctx.opt_str(choice, "mode", "params.toolChoice")?
            && !matches!(mode, "auto" | "required" | "none")
        {
            return Err(ctx.malformed("params.toolChoice.mode", "must be auto, required or none"));
        }
    }
    // An integer count of tokens: 1.5 (or 1.0) is no such count.
    if !params
        .get("maxTokens")
        .is_some_and(|n| n.is_u64() || n.is_i64())
    {
        return Err(ctx.refuse(
            RelayRule::MaxTokens,
            "`params.maxTokens` is required and must be an integer",
        ));
    }
    ctx.opt_str(params, "systemPrompt", "params")?;
    ctx.opt_object(params, "metadata", "params")?;
    ctx.opt_object(params, "modelPreferences", "params")?;
    ctx.opt_object(params, "_meta", "params")?;
    if let Some(context) = ctx.opt_str(params, "includeContext", "params")? {
        if !matches!(context, "none" | "thisServer" | "allServers") {
            return Err(ctx.malformed(
                "params.includeContext",
                "must be none, thisServer or allServers",
            ));
        }
        // Context from the agent's sessions (other servers' included) goes
        // to the upstream only when the agent said it gives it.
        if context != "none" && !agent.sampling_context {
            return Err(ctx.refuse(
                RelayRule::Undeclared,
                format!("`params.includeContext` is {context}, which needs the agent's `sampling.context` capability, which it did not declare"),
            ));
        }
    }
    if params.get("temperature").is_some_and(|t| !t.is_number()) {
        return Err(ctx.malformed("params.temperature", "must be a number"));
    }
    if let Some(stops) = params.get("stopSequences")
        && !stops
            .as_array()
            .is_some_and(|s| s.iter().all(Value::is_string))
    {
        return Err(ctx.malformed("params.stopSequences", "must be an array of strings"));
    }
    messages(ctx, params.get("messages"))?;
    Ok(Expectation::CreateMessage { tools })
}

fn messages(ctx: Ctx, messages: Option<&Value>) -> Result<(), RelayRefusal> {
    let Some(messages) = messages.and_then(Value::as_array) else {
        return Err(ctx.malformed("params.messages", "is required and must be an array"));
    };
    if messages.is_empty() {
        return Err(ctx.refuse(RelayRule::EmptyMessages, "`params.messages` is empty"));
    }
    let mut checked = Vec::with_capacity(messages.len());
    for (i, message) in messages.iter().enumerate() {
        checked.push(message_blocks(
            ctx,
            message,
            &format!("params.messages[{i}]"),
        )?);
    }
    // Pairing first: an unpaired result is the more specific defect than
    // the unanswered use it also leaves behind.
    for (i, (_, blocks)) in checked.iter().enumerate() {
        let results = tool_results(blocks);
        if !results.is_empty() {
            let previous_uses = i
                .checked_sub(1)
                .map(|p| tool_uses(&checked[p].1))
                .unwrap_or_default();
            pair_results(
                ctx,
                &format!("params.messages[{i}]"),
                &results,
                &previous_uses,
            )?;
        }
    }
    for (i, (_, blocks)) in checked.iter().enumerate() {
        let uses = tool_uses(blocks);
        if uses.is_empty() {
            continue;
        }
        let answered: HashSet<&str> = checked
            .get(i + 1)
            .map(|(_, next)| tool_results(next).into_iter().collect())
            .unwrap_or_default();
        if let Some(unanswered) = uses.iter().position(|id| !answered.contains(id)) {
            return Err(ctx.refuse(
                RelayRule::UnansweredToolUse,
                format!(
                    "`params.messages[{i}]`: tool_use {} is not answered by a tool_result in the next message",
                    unanswered + 1
                ),
            ));
        }
    }
    Ok(())
}

/// The `tool_result` ids of a message, in order.
fn tool_results(blocks: &[Block]) -> Vec<&str> {
    blocks
        .iter()
        .filter_map(|b| match b {
            Block::ToolResult(id) => Some(id.as_str()),
            _ => None,
        })
        .collect()
}

/// The `tool_use` ids of a message, in order.
fn tool_uses(blocks: &[Block]) -> Vec<&str> {
    blocks
        .iter()
        .filter_map(|b| match b {
            Block::ToolUse(id) => Some(id.as_str()),
            _ => None,
        })
        .collect()
}

/// A user message's `tool_result` ids against the preceding assistant
/// message's `tool_use` ids: each pairs, once.
fn pair_results(ctx: Ctx, path: &str, results: &[&str], uses: &[&str]) -> Result<(), RelayRefusal> {
    let mut seen = HashSet::with_capacity(results.len());
    for (j, id) in results.iter().enumerate() {
        if !uses.contains(id) {
            return Err(ctx.refuse(
                RelayRule::UnpairedToolResult,
                format!(
                    "`{path}`: tool_result {} names no tool_use of the preceding assistant message",
                    j + 1
                ),
            ));
        }
        if !seen.insert(*id) {
            return Err(ctx.refuse(
                RelayRule::UnpairedToolResult,
                format!("`{path}`: tool_result {} answers a tool_use that an earlier tool_result already answered", j + 1),
            ));
        }
    }
    Ok(())
}

/// One message (or a result, which has the message's shape): its role
/// and its checked blocks, with the per-message rules applied.
fn message_blocks(
    ctx: Ctx,
    message: &Value,
    path: &str,
) -> Result<(String, Vec<Block>), RelayRefusal> {
    let message = as_object(ctx, message, path)?;
    let role = match message.get("role") {
        Some(Value::String(role)) if matches!(role.as_str(), "user" | "assistant") => role.clone(),
        Some(_) => {
            return Err(ctx.refuse(
                RelayRule::Role,
                format!("`{path}.role` must be user or assistant"),
            ));
        }
        None => {
            return Err(ctx.refuse(RelayRule::Role, format!("`{path}.role` is required")));
        }
    };
    let blocks = content(ctx, message, path)?;
    let results = blocks
        .iter()
        .filter(|b| matches!(b, Block::ToolResult(_)))
        .count();
    if results > 0 && results < blocks.len() {
        return Err(ctx.refuse(
            RelayRule::MixedToolResults,
            format!("`{path}` carries tool_result blocks and other content; a tool-result message holds only tool_result blocks"),
        ));
    }
    for block in &blocks {
        match block {
            Block::ToolUse(_) if role != "assistant" => {
                return Err(ctx.refuse(RelayRule::Role, format!("`{path}` has a tool_use block but role {role}; tool_use belongs to assistant messages")));
            }
            Block::ToolResult(_) if role != "user" => {
                return Err(ctx.refuse(RelayRule::Role, format!("`{path}` has a tool_result block but role {role}; tool_result belongs to user messages")));
            }
            _ => {}
        }
    }
    let uses = tool_uses(&blocks);
    let distinct: HashSet<&str> = uses.iter().copied().collect();
    if distinct.len() != uses.len() {
        return Err(ctx.refuse(
            RelayRule::Content,
            format!("`{path}` repeats a tool_use id"),
        ));
    }
    Ok((role, blocks))
}

/// `content`: one block, or (2025-11-25 on both sides) an array of them.
fn content(ctx: Ctx, message: &Map<String, Value>, path: &str) -> Result<Vec<Block>, RelayRefusal> {
    let path = join(path, "content");
    match message.get("content") {
        None => Err(ctx.refuse(RelayRule::Content, format!("`{path}` is required"))),
        Some(Value::Array(blocks)) => {
            ctx.needs(
                Revision::has_sampling_tools,
                &format!("`{path}` is an array of blocks"),
            )?;
            if blocks.is_empty() {
                return Err(ctx.refuse(
                    RelayRule::Content,
                    format!("`{path}` is an empty array; a message holds at least one block"),
                ));
            }
            blocks
                .iter()
                .enumerate()
                .map(|(i, b)| block(ctx, b, &format!("{path}[{i}]")))
                .collect()
        }
        Some(one) => Ok(vec![block(ctx, one, &path)?]),
    }
}

fn block(ctx: Ctx, block: &Value, path: &str) -> Result<Block, RelayRefusal> {
    let Some(obj) = block.as_object() else {
        return Err(ctx.refuse(
            RelayRule::Content,
            format!("`{path}` must be a content block (an object)"),
        ));
    };
    let need_str = |key: &str| -> Result<String, RelayRefusal> {
        match obj.get(key) {
            Some(Value::String(s)) => Ok(s.clone()),
            _ => Err(ctx.refuse(
                RelayRule::Content,
                format!("`{}` must be a string", join(path, key)),
            )),
        }
    };
    ctx.opt_object(obj, "annotations", path)?;
    ctx.opt_object(obj, "_meta", path)?;
    match obj.get("type").and_then(Value::as_str) {
        Some("text") => need_str("text").map(|_| Block::Plain),
        Some("image" | "audio") => {
            need_str("data")?;
            need_str("mimeType")?;
            Ok(Block::Plain)
        }
        Some("tool_use") => {
            ctx.needs(
                Revision::has_sampling_tools,
                &format!("`{path}` is a tool_use block"),
            )?;
            let id = need_str("id")?;
            need_str("name")?;
            if !obj.get("input").is_some_and(Value::is_object) {
                return Err(ctx.refuse(
                    RelayRule::Content,
                    format!("`{path}.input` must be an object"),
                ));
            }
            Ok(Block::ToolUse(id))
        }
        Some("tool_result") => {
            ctx.needs(
                Revision::has_sampling_tools,
                &format!("`{path}` is a tool_result block"),
            )?;
            let id = need_str("toolUseId")?;
            let Some(inner) = obj.get("content").and_then(Value::as_array) else {
                return Err(ctx.refuse(
                    RelayRule::Content,
                    format!("`{path}.content` must be an array of content blocks"),
                ));
            };
            for (i, item) in inner.iter().enumerate() {
                let ok = item.get("type").and_then(Value::as_str).is_some_and(|t| {
                    matches!(t, "text" | "image" | "audio" | "resource_link" | "resource")
                });
                if !ok {
                    return Err(ctx.refuse(
                        RelayRule::Content,
                        format!("`{path}.content[{i}]` must be a text, image, audio, resource_link or resource block"),
                    ));
                }
            }
            if obj.get("isError").is_some_and(|e| !e.is_boolean()) {
                return Err(ctx.malformed(&join(path, "isError"), "must be a boolean"));
            }
            Ok(Block::ToolResult(id))
        }
        _ => Err(ctx.refuse(
            RelayRule::Content,
            format!(
                "`{path}.type` must be {}",
                if ctx.eras.agent.has_sampling_tools() && ctx.eras.upstream.has_sampling_tools() {
                    "text, image, audio, tool_use or tool_result"
                } else {
                    "text, image or audio"
                }
            ),
        )),
    }
}

/// The agent's result for a request that carried `tools` or not.
pub(super) fn result(ctx: Ctx, tools: bool, value: &Value, path: &str) -> Result<(), RelayRefusal> {
    let obj = as_object(ctx, value, path)?;
    if !obj.contains_key("role") {
        return Err(ctx.refuse(
            RelayRule::ResultRole,
            format!("`{path}.role` is required (the relay fills nothing in)"),
        ));
    }
    if !obj.get("model").is_some_and(Value::is_string) {
        return Err(ctx.refuse(
            RelayRule::ResultModel,
            format!("`{path}.model` is required and must be a string (the relay fills nothing in)"),
        ));
    }
    if obj.get("model").and_then(Value::as_str) == Some("") {
        return Err(ctx.refuse(
            RelayRule::ResultModel,
            format!("`{path}.model` must name the model that sampled (it is empty)"),
        ));
    }
    let (_, blocks) = message_blocks(ctx, value, path)?;
    if !tools && blocks.iter().any(|b| matches!(b, Block::ToolUse(_))) {
        return Err(ctx.refuse(
            RelayRule::ToolUseUnrequested,
            format!("`{path}.content` has tool_use, but the request carried no tools"),
        ));
    }
    if blocks.iter().any(|b| matches!(b, Block::ToolResult(_))) {
        return Err(ctx.refuse(
            RelayRule::UnpairedToolResult,
            format!("`{path}.content` has tool_result, which pairs with no tool_use (a request's last message never leaves one unanswered)"),
        ));
    }
    // The sampled message is the model's: a `user` result is no answer
    // (checked after the block rules, whose refusals say more).
    if obj.get("role").and_then(Value::as_str) == Some("user") {
        return Err(ctx.refuse(
            RelayRule::ResultRole,
            format!("`{path}.role` must be assistant: a sampling result is the model's message"),
        ));
    }
    match obj.get("stopReason") {
        None => {}
        Some(Value::String(reason)) if reason == "toolUse" && !tools => {
            return Err(ctx.refuse(
                RelayRule::ToolUseUnrequested,
                format!("`{path}.stopReason` is toolUse, but the request carried no tools"),
            ));
        }
        Some(Value::String(_)) => {}
        Some(_) => return Err(ctx.malformed(&join(path, "stopReason"), "must be a string")),
    }
    ctx.opt_object(obj, "_meta", path)?;
    Ok(())
}
