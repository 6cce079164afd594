"""An agent for tests/upstream.rs: the official Python SDK client (`mcp`)
pinned to the stateless 2026-07-28 revision against a run's gateway.
Same arguments and output as agent.mjs: URL TOKEN [NAME=JSON_ARGUMENTS ...]
"""

import json
import sys

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation


async def main() -> None:
    url, token, *calls = sys.argv[1:]
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60.0)
    async with http:
        client = Client(
            streamable_http_client(url, http_client=http),
            mode="2026-07-28",
            client_info=Implementation(name="corkboard-upstream-agent-py", version="1.0.0"),
        )
        async with client:
            listed = await client.list_tools()
            out = {"tools": [t.name for t in listed.tools], "calls": []}
            for spec in calls:
                name, _, args = spec.partition("=")
                try:
                    result = await client.call_tool(name, json.loads(args))
                    out["calls"].append(
                        {
                            "name": name,
                            "isError": bool(result.is_error),
                            "text": "\n".join(c.text for c in result.content if c.type == "text"),
                            "structured": result.structured_content,
                            "content": [c.model_dump(mode="json", by_alias=True, exclude_none=True) for c in result.content],
                        }
                    )
                except Exception as err:  # noqa: BLE001 - reported to the test
                    out["calls"].append({"name": name, "error": str(err)})
    print(json.dumps(out))


anyio.run(main)
