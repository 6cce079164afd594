#!/usr/bin/env python3
"""One tool call through the Python SDK (PyPI `mcp` 2.x), as an agent whose call
may need a person's approval. `--mode legacy|2026-07-28`. Prints one JSON line:
{"ok":true,"is_error":...,"text":...,"structured":...}; exit 1 when the call
could not be made at all. Arguments as JSON in APPROVAL_ARGS, the token in
CORKBOARD_TOKEN (never on the command line).
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


async def call(url: str, mode: str, tool: str, args: dict) -> dict:
    headers = {"Authorization": f"Bearer {os.environ['CORKBOARD_TOKEN']}"}
    async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, mode=mode) as client:
            result = await client.call_tool(tool, args)
            text = "\n".join(c.text for c in result.content if getattr(c, "type", None) == "text")
            return {"ok": True, "is_error": bool(result.is_error), "text": text, "structured": result.structured_content}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--mode", default="legacy")
    parser.add_argument("--tool", required=True)
    options = parser.parse_args()
    args = json.loads(os.environ.get("APPROVAL_ARGS", "{}"))
    try:
        out = anyio.run(call, options.url, options.mode, options.tool, args)
    except BaseException as err:  # noqa: BLE001 - reported, never swallowed
        print(json.dumps({"ok": False, "error": repr(err)}))
        return 1
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
