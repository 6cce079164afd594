#!/usr/bin/env python3
"""Drives a corkboard MCP endpoint with the Python SDK (PyPI `mcp` 2.x).

Modes (`--mode`):
  legacy      the 2025 `initialize` handshake
  auto        probe with `server/discover`, fall back to `initialize`
  2026-07-28  adopt the stateless 2026-07-28 revision directly (no probe)

Same scenario and output contract as the Node clients (see common.mjs):
stdout gets exactly one JSON line ({"ok":true,...} or {"ok":false,"error":...}),
stderr the progress and the failure reason; exit status 0 on success, 1 on any
failure, 2 on bad usage. The run token is never printed.

Set up: python3 -m venv target/venv && target/venv/bin/pip install -r tests/clients/requirements.txt
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import Implementation
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

# vocabulary.json is generated from the Rust tool table (what GET /v1/vocabulary
# serves); `cargo test -p corkboard-tools --test integration vocabulary::`
# checks it and rewrites it when the table changed.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "vocabulary.json")) as _f:
    BOARD_TOOLS = [tool["name"] for tool in json.load(_f)["tools"]]
ISSUE_ID = re.compile(r"^iss_[0-9A-HJKMNP-TV-Z]{26}$")
COMMENT_ID = re.compile(r"^cmt_[0-9A-HJKMNP-TV-Z]{26}$")
UNKNOWN_ISSUE = "iss_00000000000000000000000000"
MODES = ["legacy", "auto", *MODERN_PROTOCOL_VERSIONS]


class Failure(Exception):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise Failure(message)


def describe(err: BaseException) -> str:
    """The message of an error, unwrapping anyio's exception groups and causes."""
    if isinstance(err, BaseExceptionGroup):
        return "; ".join(describe(e) for e in err.exceptions)
    parts = [f"{type(err).__name__}: {err}"]
    if isinstance(err, MCPError):
        parts = [f"MCPError {err.error.code}: {err.error.message}"]
    cause = err.__cause__
    while cause is not None:
        part = f"{type(cause).__name__}: {cause}"
        if part != parts[-1].removeprefix("cause: "):
            parts.append(f"cause: {part}")
        cause = cause.__cause__
    return "; ".join(parts)


class Recorder:
    """Records every HTTP status, to tell a refused token from an unreachable server."""

    def __init__(self) -> None:
        self.statuses: list[int] = []
        self.requests = 0

    async def on_request(self, _request: httpx2.Request) -> None:
        self.requests += 1

    async def on_response(self, response: httpx2.Response) -> None:
        self.statuses.append(response.status_code)


def text_of(result: Any) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def call_ok(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    check(not result.is_error, f"{name} returned a tool error: {text_of(result)}")
    sc = result.structured_content
    check(isinstance(sc, dict), f"{name} returned no structuredContent object")
    check(len(text_of(result)) > 0, f"{name} returned no text content")
    return sc


async def call_failing(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    try:
        result = await client.call_tool(name, args)
    except Exception as err:  # noqa: BLE001 - any refusal counts, and is reported
        return {"kind": "protocol_error", "message": describe(err)}
    check(result.is_error, f"{name} was expected to fail but succeeded: {text_of(result)[:300]}")
    return {"kind": "tool_error", "message": text_of(result)}


async def tool_names(client: Client) -> list[str]:
    listed = await client.list_tools()
    for tool in listed.tools:
        check(tool.input_schema.get("type") == "object", f"tool {tool.name} has no object inputSchema")
    return [t.name for t in listed.tools]


async def full_scenario(client: Client, label: str) -> dict[str, Any]:
    tools = await tool_names(client)
    for name in BOARD_TOOLS:
        check(name in tools, f"tools/list lacks {name} (the full scenario needs every capability); got {tools}")
    tag = f"{label.replace('/', '-')}-{int(time.time() * 1000):x}-{uuid.uuid4().hex[:8]}"
    key = f"interop-{tag}"
    create_args = {
        "title": f"Interop {tag}",
        "body": f"Created by the {label} interop client.",
        "labels": ["interop"],
        "priority": "low",
        "idempotency_key": key,
    }
    created = await call_ok(client, "create_issue", create_args)
    check(bool(ISSUE_ID.match(created.get("id", ""))), f"create_issue returned a malformed id {created.get('id')}")
    check(created.get("version") == 1, f"a new issue must be at version 1, got {created.get('version')}")
    check(created.get("replayed") is False, "first create_issue must have replayed=false")
    issue_id = created["id"]

    replay = await call_ok(client, "create_issue", create_args)
    check(
        replay.get("id") == issue_id and replay.get("replayed") is True,
        f"replaying create_issue must return {issue_id} with replayed=true, got {replay.get('id')} {replay.get('replayed')}",
    )

    check(
        created.get("created") is True and isinstance(created.get("similar"), list),
        f"create_issue must say created=true and list similar issues: {str(created)[:300]}",
    )
    # The same title again with if_similar "refuse": nothing created, the
    # original back, not an error, and a text block that says so first.
    refused_result = await client.call_tool("create_issue", {"title": create_args["title"], "if_similar": "refuse"})
    check(not refused_result.is_error, f"a refused near duplicate is not a tool error: {text_of(refused_result)[:300]}")
    refused = refused_result.structured_content or {}
    check(
        refused.get("created") is False and refused.get("id") == issue_id,
        f"if_similar refuse must answer {issue_id} with created=false, got {refused.get('id')} {refused.get('created')}",
    )
    check(text_of(refused_result).startswith("NOT CREATED"), f"refusal text: {text_of(refused_result)[:200]}")

    got = await call_ok(client, "get_issue", {"id": issue_id})
    check(got.get("id") == issue_id and got.get("title") == create_args["title"], "get_issue returned another issue")

    page = await call_ok(client, "list_issues", {"labels": ["interop"], "text": tag, "limit": 10})
    check(any(i.get("id") == issue_id for i in page.get("issues", [])), f"list_issues did not find {issue_id}")
    check(page.get("next_cursor", "missing") is None, f"one-issue page must have next_cursor null: {page.get('next_cursor')}")

    updated = await call_ok(
        client, "update_issue", {"id": issue_id, "state": "in_progress", "expected_version": got["version"]}
    )
    check(
        updated.get("state") == "in_progress" and updated.get("version") == got["version"] + 1,
        f"update_issue: got state {updated.get('state')} at version {updated.get('version')}",
    )

    word = f"zq{uuid.uuid4().hex[:12]}"
    commented = await call_ok(
        client,
        "add_comment",
        {"issue_id": issue_id, "body": f"Interop comment about {word}.", "idempotency_key": f"{key}-c"},
    )
    check(bool(COMMENT_ID.match((commented.get("comment") or {}).get("id", ""))), "add_comment returned no comment id")
    check(len(commented.get("comments", [])) == 1 and commented.get("replayed") is False, "add_comment: one comment")

    # A word only in the comment is found at once, ranked first, with a snippet.
    found = await call_ok(client, "search_issues", {"query": word, "states": ["in_progress"], "limit": 5})
    hits = found.get("hits") or [{}]
    check(
        hits[0].get("id") == issue_id and hits[0].get("field") == "comment" and f"**{word}**" in hits[0].get("snippet", ""),
        f"search_issues must find {issue_id} by its comment word: {str(found)[:400]}",
    )
    check(found.get("next_offset", "missing") is None and found.get("partial") is False, "one search hit is one page")

    stale = await call_failing(
        client, "update_issue", {"id": issue_id, "title": "stale write", "expected_version": got["version"]}
    )
    check(stale["kind"] == "tool_error", f"a stale expected_version must be a tool error, got {stale}")
    check(
        f"expected_version={commented['version']}" in stale["message"],
        f"the conflict message must name the current version {commented['version']}: {stale['message']}",
    )

    not_found = await call_failing(client, "get_issue", {"id": UNKNOWN_ISSUE})
    check(
        not_found["kind"] == "tool_error" and "not found" in not_found["message"],
        f"get_issue of an unknown id: {not_found}",
    )

    tenant = await call_failing(client, "list_issues", {"tenant": "someone-else"})

    after = await call_ok(client, "get_issue", {"id": issue_id})
    check(
        after.get("title") == create_args["title"] and after.get("version") == commented["version"],
        "the stale update must not have written anything",
    )

    # Relations: a sub-issue shows up as a child of its parent.
    child = await call_ok(client, "create_issue", {"title": f"Child {tag}", "parent": issue_id, "blocked_by": [issue_id]})
    check(child.get("parent") == issue_id and len(child.get("blocked_by", [])) == 1, f"create_issue lost relations: {child}")
    parent_view = await call_ok(client, "get_issue", {"id": issue_id})
    check(
        child["id"] in parent_view.get("children", []) and child["id"] in parent_view.get("blocks", []),
        f"get_issue of the parent lacks children/blocks: {parent_view.get('children')}",
    )
    cycle = await call_failing(client, "update_issue", {"id": issue_id, "parent": child["id"]})
    check(cycle["kind"] == "tool_error" and "cycle" in cycle["message"], f"a parent cycle must be a tool error: {cycle}")

    # Claims: claim, claim again (no change), listed as claimed, release.
    claimed = await call_ok(client, "claim_issue", {"id": child["id"]})
    check(
        isinstance((claimed.get("claim") or {}).get("run"), str) and claimed.get("version") == child["version"] + 1,
        f"claim_issue: {claimed.get('claim')} at version {claimed.get('version')}",
    )
    again = await call_ok(client, "claim_issue", {"id": child["id"]})
    check(again.get("version") == claimed["version"], "claiming one's own claim again must change nothing")
    free = await call_ok(client, "list_issues", {"parent": issue_id, "unclaimed": True})
    check(all(i.get("id") != child["id"] for i in free.get("issues", [])), "a claimed issue is listed as unclaimed")
    released = await call_ok(client, "release_issue", {"id": child["id"], "expected_version": claimed["version"]})
    check(
        released.get("claim", "missing") is None and released.get("version") == claimed["version"] + 1,
        f"release_issue: claim {released.get('claim')} at version {released.get('version')}",
    )
    not_claimed = await call_failing(client, "release_issue", {"id": child["id"]})
    check(
        not_claimed["kind"] == "tool_error" and "not claimed" in not_claimed["message"],
        f"a second release must be a tool error: {not_claimed}",
    )
    closed = await call_ok(client, "update_issue", {"id": child["id"], "state": "closed", "close_reason": "not_planned"})
    check(closed.get("close_reason") == "not_planned", f"update_issue lost close_reason: {closed.get('close_reason')}")

    # The work queue: a bulk create under the issue, claim_next taking the
    # most urgent ready one, board_stats counting.
    bulk = await call_ok(
        client,
        "create_issues",
        {
            "parent": issue_id,
            "issues": [
                {"title": f"Queue A {tag}", "priority": "urgent", "idempotency_key": f"{key}-qa"},
                {"title": f"Queue B {tag}", "idempotency_key": f"{key}-qb"},
            ],
        },
    )
    check(bulk.get("created") == 2, f"create_issues: {bulk}")
    nxt = await call_ok(client, "claim_next", {"parent": issue_id, "min_priority": "urgent"})
    check(
        nxt.get("outcome") == "claimed" and nxt.get("id") == bulk["results"][0]["id"],
        f"claim_next: {str(nxt)[:300]}",
    )
    none = await call_ok(client, "claim_next", {"parent": issue_id, "min_priority": "urgent"})
    check(none.get("outcome") == "no_ready_work" and none.get("claimed") == 1, f"claim_next with nothing ready: {none}")
    stats = await call_ok(client, "board_stats", {})
    check(stats.get("claimed", 0) >= 1 and stats.get("total", 0) >= 4, f"board_stats: {str(stats)[:300]}")
    return {
        "tools": tools,
        "created": issue_id,
        "errors": {
            "stale_version": stale,
            "not_found": not_found,
            "tenant_argument": tenant,
            "parent_cycle": cycle,
            "not_claimed": not_claimed,
        },
    }


def arguments_for(tool: str) -> dict[str, Any]:
    return {
        "list_issues": {},
        "get_issue": {"id": UNKNOWN_ISSUE},
        "create_issue": {"title": "must not be created"},
        "update_issue": {"id": UNKNOWN_ISSUE, "title": "must not be written"},
        "add_comment": {"issue_id": UNKNOWN_ISSUE, "body": "must not be written"},
        "claim_issue": {"id": UNKNOWN_ISSUE},
        "release_issue": {"id": UNKNOWN_ISSUE},
        "search_issues": {"query": "anything"},
        "create_issues": {"issues": [{"title": "must not be created"}]},
    }.get(tool, {})


async def caps_scenario(client: Client, expected: list[str], recorder: Recorder) -> dict[str, Any]:
    tools = await tool_names(client)
    check(sorted(tools) == sorted(expected), f"tools/list is {tools}, expected {expected}")
    hidden = next((t for t in BOARD_TOOLS if t not in tools), None)
    if hidden is None:
        return {"tools": tools, "hidden_call": None}
    before = recorder.requests
    outcome = await call_failing(client, hidden, arguments_for(hidden))
    return {"tools": tools, "hidden_call": {"tool": hidden, **outcome, "reached_server": recorder.requests > before}}


async def budget_scenario(client: Client, budget: int) -> dict[str, Any]:
    """The default list_issues on a board larger than one answer, as in common.mjs."""
    seen: list[str] = []
    cursor = None
    first: dict[str, Any] | None = None
    pages = 0
    while True:
        result = await client.call_tool("list_issues", {} if cursor is None else {"cursor": cursor})
        check(not result.is_error, f"list_issues returned a tool error: {text_of(result)}")
        wire = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        size = len(json.dumps(wire, ensure_ascii=False, separators=(",", ":")).encode())
        check(size <= budget, f"a list_issues result is {size} bytes, over the {budget}-byte budget")
        sc = result.structured_content
        check(isinstance(sc, dict) and isinstance(sc.get("issues"), list), "no structuredContent.issues")
        text = text_of(result)
        for issue in sc["issues"]:
            check(issue["id"] in text, f"the text block does not name {issue['id']}")
            seen.append(issue["id"])
        if first is None:
            check(isinstance(sc.get("next_cursor"), str), "the first page must give a next_cursor")
            check(sc["next_cursor"] in text, "the text block does not give the next cursor")
            first = {
                "bytes": size,
                "shown": len(sc["issues"]),
                "next_cursor": sc["next_cursor"],
                "truncated": sc.get("truncated"),
            }
        cursor = sc.get("next_cursor")
        pages += 1
        check(pages <= 100, "more than 100 pages: the cursor does not advance")
        if cursor is None:
            break
    return {"budget_check": {**first, "pages": pages, "seen": len(seen), "unique": len(set(seen))}}


def parse_options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=os.environ.get("CORKBOARD_MCP_URL"), help="MCP endpoint ($CORKBOARD_MCP_URL)")
    parser.add_argument("--token", default=os.environ.get("CORKBOARD_TOKEN"), help="run token ($CORKBOARD_TOKEN)")
    parser.add_argument("--mode", default="auto", choices=MODES)
    parser.add_argument("--expect-auth-failure", action="store_true", help="expect 401/403 on connect")
    parser.add_argument("--expect-message", help="with --expect-auth-failure: the error must contain this")
    parser.add_argument("--caps-check", help="comma-separated tool names tools/list must equal")
    parser.add_argument("--expect-era", choices=["modern", "legacy"])
    parser.add_argument(
        "--budget-check",
        type=int,
        help="the default list_issues result must be at most this many bytes and say how to get the rest",
    )
    parser.add_argument("--timeout-ms", type=int, default=60000)
    options = parser.parse_args()
    if not options.url:
        parser.error("missing --url (or CORKBOARD_MCP_URL)")
    if not options.token:
        if not options.expect_auth_failure:
            parser.error("missing --token (or CORKBOARD_TOKEN)")
        # Well-formed but never issued: the server must refuse it.
        options.token = "cbr_" + "A" * 43
    if options.timeout_ms <= 0:
        parser.error("--timeout-ms must be positive")
    return options


async def run(options: argparse.Namespace, label: str) -> dict[str, Any]:
    recorder = Recorder()
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {options.token}"},
        timeout=httpx2.Timeout(30.0, read=300.0),
        event_hooks={"request": [recorder.on_request], "response": [recorder.on_response]},
    )
    async with http:
        client = Client(
            streamable_http_client(options.url, http_client=http),
            mode=options.mode,
            client_info=Implementation(name="corkboard-interop-py", version="2.0.0"),
        )
        if options.expect_auth_failure:
            try:
                async with client:
                    await client.list_tools()
            except Exception as err:  # noqa: BLE001 - the failure is the point
                message = describe(err)
                refused = any(s in (401, 403) for s in recorder.statuses)
                check(
                    refused,
                    f"expected the server to refuse the token with 401/403, got statuses {recorder.statuses}: {message}",
                )
                if options.expect_message is not None:
                    check(options.expect_message in message, f"the error lacks {options.expect_message!r}: {message}")
                print(f"{label}: refused as expected: {message}", file=sys.stderr)
                return {"auth_failure": message, "statuses": recorder.statuses}
            raise Failure("connected and listed tools with a token that should have been refused")

        try:
            await client.__aenter__()
        except Exception as err:  # noqa: BLE001
            raise Failure(f"connect failed (statuses {recorder.statuses}): {describe(err)}") from err
        try:
            return await exercise(client, options, label, recorder)
        finally:
            await client.__aexit__(None, None, None)


async def exercise(client: Any, options: argparse.Namespace, label: str, recorder: Recorder) -> dict[str, Any]:
    """The scenario on a connected client, whatever its transport."""
    version = client.protocol_version
    era = "modern" if version in MODERN_PROTOCOL_VERSIONS else "legacy"
    info = client.server_info
    # Required from `initialize`; only a SHOULD in the stateless era.
    if era == "legacy" or info is not None:
        check(info is not None and bool(info.name) and bool(info.version), f"serverInfo lacks name/version: {info}")
    if options.expect_era is not None:
        check(era == options.expect_era, f"expected the {options.expect_era} era, negotiated {era} ({version})")
    try:
        if options.caps_check is not None:
            expected = [s.strip() for s in options.caps_check.split(",") if s.strip()]
            summary = await caps_scenario(client, expected, recorder)
        elif getattr(options, "budget_check", None) is not None:
            summary = await budget_scenario(client, options.budget_check)
        else:
            summary = await full_scenario(client, label)
    except Failure:
        raise
    except Exception as err:  # noqa: BLE001
        raise Failure(f"request failed (statuses {recorder.statuses}): {describe(err)}") from err
    print(f"{label}: ok ({era} {version})", file=sys.stderr)
    return {
        "client": label,
        "mode": options.mode,
        "protocol_version": version,
        "era": era,
        "server": info.model_dump(mode="json", exclude_none=True) if info is not None else None,
        **summary,
    }


async def run_reporting(options: argparse.Namespace, label: str, run_fn: Any) -> int:
    """Runs `run_fn(options, label)` within the deadline and prints the one
    JSON summary line, whatever happens."""
    try:
        with anyio.fail_after(options.timeout_ms / 1000):
            body = await run_fn(options, label)
    except Failure as err:
        return finish(label, False, {"error": str(err)})
    except BaseExceptionGroup as group:
        # The SDK's task groups may wrap our own Failure.
        failure = first_failure(group)
        if failure is None:
            return finish(label, False, {"error": f"MCP connection failed: {describe(group)}"})
        return finish(label, False, {"error": str(failure)})
    except TimeoutError:
        return finish(label, False, {"error": f"no result within {options.timeout_ms} ms"})
    except BaseException as err:  # noqa: BLE001 - report anything, exit non-zero
        if isinstance(err, (KeyboardInterrupt, SystemExit)):
            raise
        return finish(label, False, {"error": f"unexpected error: {describe(err)}"})
    return finish(label, True, body)


async def main() -> int:
    options = parse_options()
    return await run_reporting(options, f"py-mcp/{options.mode}", run)


def first_failure(err: BaseException) -> Failure | None:
    if isinstance(err, Failure):
        return err
    if isinstance(err, BaseExceptionGroup):
        for inner in err.exceptions:
            found = first_failure(inner)
            if found is not None:
                return found
    return None


def finish(label: str, ok: bool, body: dict[str, Any]) -> int:
    if not ok:
        print(f"{label}: FAILED: {body['error']}", file=sys.stderr)
    print(json.dumps({"ok": ok, **body}), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(anyio.run(main))
