#!/usr/bin/env python3
"""A minimal orchestrator: hands each agent run its own board grant, lets the
run work through MCP, then cuts it off.

What a real orchestrator does around an agent (Claude Code, Codex, an agent
framework), with the agent's part played here by the official MCP Python SDK
so the example runs anywhere:

  1. `corkboard grant create --json` for the run: a token pinned to one tenant
     and a set of capabilities, and the MCP URL to use.
  2. The run connects to that URL with the token and files issues.
  3. `corkboard grant revoke` when the run ends: the token stops working
     within a second, on every replica.

Run it next to a running `corkboard serve` (the first README command):

    pip install 'mcp==2.3.0'
    python3 examples/orchestrator.py --runs 2

`--corkboard` names the binary (default: `corkboard` on PATH, else the
release build under target/), `--data-dir` the server's data dir when it is
not the default one. Prints one line per step; exits 0 when every
step did what it should, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

CAPS = "issues:read,issues:create,issues:update,comments:write"


def corkboard(binary: str, data_dir: str | None, *args: str) -> dict:
    """Runs one `corkboard` command with `--json` and returns its answer."""
    where = ["--data-dir", data_dir] if data_dir else []
    out = subprocess.run([binary, *args, *where, "--json"], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"corkboard {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return json.loads(out.stdout)


async def agent_run(url: str, token: str, run: str) -> str:
    """What the agent does with its board: file an issue, read the board."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http:
        client = Client(
            streamable_http_client(url, http_client=http),
            client_info=Implementation(name="example-orchestrator", version="1.0.0"),
        )
        async with client:
            created = await client.call_tool(
                "create_issue",
                {"title": f"Flaky login test seen by {run}", "body": "Fails one run in ten.", "labels": ["bug"]},
            )
            if created.is_error:
                raise SystemExit(f"{run}: create_issue refused: {created.content[0].text}")
            issue = created.structured_content["id"]
            listed = await client.call_tool("list_issues", {"labels": ["bug"]})
            ids = [i["id"] for i in listed.structured_content["issues"]]
            if issue not in ids:
                raise SystemExit(f"{run}: the new issue {issue} is not on the board")
            return issue


async def refused_after_revoke(url: str, token: str) -> bool:
    """A revoked token is refused outright (HTTP 403), never half-served.
    The design's bound is one second on every replica (a local `corkboard
    grant revoke` reaches a running `serve` within 250 ms; one through the
    server's admin API at once), so this asks for up to two seconds."""
    async with httpx2.AsyncClient() as http:
        for _ in range(20):
            if await token_refused(http, url, token):
                return True
            await anyio.sleep(0.1)
        return False


async def token_refused(http: httpx2.AsyncClient, url: str, token: str) -> bool:
    """One request with `token`: was it refused with 403?"""
    answer = await http.post(
        url,
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": "2025-06-18",
        },
        content=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    return answer.status_code == 403


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corkboard", help="the corkboard binary")
    parser.add_argument("--data-dir", help="the running server's data dir, if not the one found by default")
    parser.add_argument("--tenant", default="example")
    parser.add_argument("--runs", type=int, default=2)
    options = parser.parse_args()
    binary = options.corkboard or shutil.which("corkboard") or os.path.join(
        os.path.dirname(__file__), "..", "target", "release", "corkboard"
    )

    for n in range(1, options.runs + 1):
        run = f"example-run-{n}"
        granted = corkboard(binary, options.data_dir, "grant", "create", "--tenant", options.tenant, "--run", run, "--caps", CAPS, "--ttl", "15m")
        url, token = granted["mcp_url"], granted["token"]
        print(f"{run}: granted {granted['grant']['id']} for {url}")
        issue = await agent_run(url, token, run)
        print(f"{run}: filed {issue}")
        corkboard(binary, options.data_dir, "grant", "revoke", "--tenant", options.tenant, "--run", run)
        if not await refused_after_revoke(url, token):
            print(f"{run}: the revoked token still works", file=sys.stderr)
            return 1
        print(f"{run}: revoked; its token is refused")
    return 0


if __name__ == "__main__":
    sys.exit(anyio.run(main))
