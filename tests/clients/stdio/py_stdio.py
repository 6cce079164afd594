#!/usr/bin/env python3
"""Starts an MCP server as a child process with the Python SDK (PyPI `mcp` 2.x,
`StdioServerParameters` / `stdio_client`) and drives it.

Modes (`--mode`):
  legacy      the 2025 `initialize` handshake
  auto        probe with `server/discover`, fall back to `initialize`
  2026-07-28  adopt the stateless 2026-07-28 revision directly (no probe)

The server command follows `--`, e.g.
  py_stdio.py --mode auto -- corkboard mcp stdio --data-dir .corkboard
The run token is never an argument: the child gets CORKBOARD_TOKEN (and every
other CORKBOARD_* variable) from this process's environment.

Scenario and output contract as ../py_client.py: stdout gets exactly one JSON
line ({"ok":true,...} or {"ok":false,"error":...}), stderr the progress and the
failure reason; exit status 0 on success, 1 on any failure, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.types import Implementation  # noqa: E402
from mcp_types.version import MODERN_PROTOCOL_VERSIONS  # noqa: E402
from py_client import (  # noqa: E402
    Failure,
    Recorder,
    check,
    describe,
    exercise,
    run_reporting,
)

MODES = ["legacy", "auto", *MODERN_PROTOCOL_VERSIONS]


def parse_options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", default="auto", choices=MODES)
    parser.add_argument("--expect-auth-failure", action="store_true", help="expect the first request to be refused")
    parser.add_argument("--expect-message", help="with --expect-auth-failure: the error must contain this")
    parser.add_argument("--caps-check", help="comma-separated tool names tools/list must equal")
    parser.add_argument("--expect-era", choices=["modern", "legacy"])
    parser.add_argument("--timeout-ms", type=int, default=60000)
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    options = parser.parse_args()
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    if not command:
        parser.error("missing the server command after --")
    options.command = command
    if options.timeout_ms <= 0:
        parser.error("--timeout-ms must be positive")
    return options


def server_parameters(options: argparse.Namespace) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith("CORKBOARD_")}
    return StdioServerParameters(command=options.command[0], args=options.command[1:], env=env)


async def run(options: argparse.Namespace, label: str) -> dict[str, Any]:
    client = Client(
        server_parameters(options),
        mode=options.mode,
        client_info=Implementation(name="corkboard-interop-py-stdio", version="2.0.0"),
    )
    if options.expect_auth_failure:
        try:
            async with client:
                await client.list_tools()
        except Exception as err:  # noqa: BLE001 - the failure is the point
            message = describe(err)
            if options.expect_message is not None:
                check(options.expect_message in message, f"the error lacks {options.expect_message!r}: {message}")
            print(f"{label}: refused as expected: {message}", file=sys.stderr)
            return {"auth_failure": message}
        raise Failure("connected and listed tools with a token that should have been refused")

    try:
        await client.__aenter__()
    except Exception as err:  # noqa: BLE001
        raise Failure(f"connect failed: {describe(err)}") from err
    try:
        return await exercise(client, options, label, Recorder())
    finally:
        await client.__aexit__(None, None, None)


async def main() -> int:
    options = parse_options()
    return await run_reporting(options, f"py-mcp-stdio/{options.mode}", run)


if __name__ == "__main__":
    sys.exit(anyio.run(main))
