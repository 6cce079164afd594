#!/usr/bin/env python3
"""A minimal agent for `corkboard run` tests (PyPI `mcp` 2.x).

Reads the endpoint and token from CORKBOARD_MCP_URL and CORKBOARD_TOKEN
(what `corkboard run` exports), lists the tools, calls `create_issue` once
with --title, and prints one JSON line:

  {"ok": true, "tools": [...], "create": {"is_error": false, "text": "...", "structured": {...}}}

or {"ok": false, "error": "..."} (exit status 1). Used where the full
interop scenario of py_client.py does not apply (a run without a board).
The token is never printed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation


def text_of(result) -> str:
    return "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")


async def probe(url: str, token: str, title: str, mode: str) -> dict:
    http = httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"},
        timeout=httpx2.Timeout(30.0, read=120.0),
    )
    async with http:
        client = Client(
            streamable_http_client(url, http_client=http),
            mode=mode,
            client_info=Implementation(name="corkboard-agent-probe", version="1.0.0"),
        )
        async with client:
            tools = [t.name for t in (await client.list_tools()).tools]
            result = await client.call_tool("create_issue", {"title": title})
            return {
                "tools": tools,
                "create": {
                    "is_error": bool(result.is_error),
                    "text": text_of(result),
                    "structured": result.structured_content,
                },
            }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--title", default="probe issue")
    parser.add_argument("--mode", default="auto")
    parser.add_argument("--timeout-ms", type=int, default=60000)
    options = parser.parse_args()
    url = os.environ.get("CORKBOARD_MCP_URL")
    token = os.environ.get("CORKBOARD_TOKEN")
    if not url or not token:
        print(json.dumps({"ok": False, "error": "CORKBOARD_MCP_URL and CORKBOARD_TOKEN must be set"}), flush=True)
        return 2

    async def run() -> dict:
        with anyio.fail_after(options.timeout_ms / 1000):
            return await probe(url, token, options.title, options.mode)

    try:
        body = anyio.run(run)
    except BaseException as err:  # noqa: BLE001 - report anything, exit non-zero
        if isinstance(err, (KeyboardInterrupt, SystemExit)):
            raise
        print(json.dumps({"ok": False, "error": f"{type(err).__name__}: {err}"}), flush=True)
        return 1
    print(json.dumps({"ok": True, **body}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
