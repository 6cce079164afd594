"""An agent for tests/relay.rs: the official Python SDK client (`mcp`) in a
2025 `initialize` session (mode="legacy", the default) or stateless
2026-07-28 (AGENT_MODE=2026-07-28, where the SDK answers `input_required`
results itself with these callbacks and retries), declaring sampling,
elicitation and roots through its callbacks, which record what they were
asked. Same arguments and output as relay_agent.mjs:
URL TOKEN [NAME=JSON_ARGUMENTS ...]
"""

import json
import os
import sys

import anyio
import httpx2
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

asked = []


async def sampling(context, params):
    asked.append({"method": "sampling/createMessage", "params": params.model_dump(mode="json", by_alias=True, exclude_none=True)})
    return types.CreateMessageResult(
        role="assistant",
        content=types.TextContent(type="text", text="the python agent samples: 7"),
        model="py-agent-model",
        stop_reason="endTurn",
    )


async def elicitation(context, params):
    asked.append({"method": "elicitation/create", "params": params.model_dump(mode="json", by_alias=True, exclude_none=True)})
    return types.ElicitResult(action="accept", content={"name": "Grace Hopper"})


async def roots(context):
    asked.append({"method": "roots/list", "params": None})
    return types.ListRootsResult(roots=[types.Root(uri="file:///srv/agent/py", name="py")])


async def main() -> None:
    url, token, *calls = sys.argv[1:]
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60.0)
    async with http:
        client = Client(
            streamable_http_client(url, http_client=http),
            mode=os.environ.get("AGENT_MODE", "legacy"),
            client_info=Implementation(name="corkboard-relay-agent-py", version="1.0.0"),
            sampling_callback=sampling,
            elicitation_callback=elicitation,
            list_roots_callback=roots,
        )
        async with client:
            listed = await client.list_tools()
            out = {"tools": [t.name for t in listed.tools], "calls": [], "asked": asked}
            for spec in calls:
                name, _, args = spec.partition("=")
                try:
                    result = await client.call_tool(name, json.loads(args))
                    out["calls"].append(
                        {
                            "name": name,
                            "isError": bool(result.is_error),
                            "text": "\n".join(c.text for c in result.content if c.type == "text"),
                        }
                    )
                except Exception as err:  # noqa: BLE001 - reported to the test
                    out["calls"].append({"name": name, "error": str(err)})
    print(json.dumps(out))


anyio.run(main)
