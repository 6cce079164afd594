//! `roots/list`: the upstream asks which roots the agent exposes.
//!
//! Guarantees (`client/roots`, `schema.ts` of every served revision): the
//! request needs the agent's `roots` capability and has no params beyond
//! an optional `_meta`; the result has a `roots` array whose every entry
//! has a string `uri` starting with `file://` (the spec's "for now"
//! restriction, unchanged through 2026-07-28), an optional string `name`
//! and an optional object `_meta`.

use serde_json::Value;

use super::{AgentCapabilities, Ctx, Expectation, RelayRefusal, RelayRule, as_object};

pub(super) fn request(
    ctx: Ctx,
    agent: &AgentCapabilities,
    params: Option<&Value>,
) -> Result<Expectation, RelayRefusal> {
    if !agent.roots {
        return Err(ctx.refuse(
            RelayRule::Undeclared,
            "the agent did not declare the `roots` capability",
        ));
    }
    if let Some(params) = params {
        let params = as_object(ctx, params, "params")?;
        ctx.opt_object(params, "_meta", "params")?;
    }
    Ok(Expectation::ListRoots)
}

pub(super) fn result(ctx: Ctx, value: &Value, path: &str) -> Result<(), RelayRefusal> {
    let obj = as_object(ctx, value, path)?;
    ctx.opt_object(obj, "_meta", path)?;
    let Some(roots) = obj.get("roots").and_then(Value::as_array) else {
        return Err(ctx.refuse(
            RelayRule::Roots,
            format!("`{path}.roots` is required and must be an array"),
        ));
    };
    for (i, root) in roots.iter().enumerate() {
        let at = format!("{path}.roots[{i}]");
        let root = as_object(ctx, root, &at)?;
        if !root
            .get("uri")
            .and_then(Value::as_str)
            .is_some_and(|uri| uri.starts_with("file://"))
        {
            return Err(ctx.refuse(
                RelayRule::Roots,
                format!("`{at}.uri` must be a string starting with file://"),
            ));
        }
        ctx.opt_str(root, "name", &at)?;
        ctx.opt_object(root, "_meta", &at)?;
    }
    Ok(())
}
