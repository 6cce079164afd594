#!/usr/bin/env bash
# One board tool call by hand, with curl: what every MCP client sends for a
# stateless (2026-07-28) `tools/call`. Needs a run's MCP URL and token, as
# `corkboard grant create --json` prints them:
#
#   grant=$(corkboard grant create --tenant acme --run run-1 --caps issues:read,issues:create --json)
#   export CORKBOARD_MCP_URL=$(echo "$grant" | python3 -c 'import json,sys; print(json.load(sys.stdin)["mcp_url"])')
#   export CORKBOARD_TOKEN=$(echo "$grant" | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
#   examples/first-call.sh "The login page times out"
#
# Prints the JSON-RPC answer. The headers are not optional: without
# `Accept: application/json, text/event-stream` the server answers 406, and
# the `Mcp-Method`/`Mcp-Name` headers must repeat the body's method and tool.
set -euo pipefail
: "${CORKBOARD_MCP_URL:?set CORKBOARD_MCP_URL (the grant's mcp_url)}"
: "${CORKBOARD_TOKEN:?set CORKBOARD_TOKEN (the grant's token)}"
title=${1:-"An issue filed with curl"}
# JSON string escaping of the title: backslashes and quotes.
title=${title//\\/\\\\}
title=${title//\"/\\\"}
meta='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
curl --silent --show-error --fail-with-body "$CORKBOARD_MCP_URL" \
  -H "Authorization: Bearer $CORKBOARD_TOKEN" \
  -H 'Content-Type: application/json' \
  -H 'Accept: application/json, text/event-stream' \
  -H 'MCP-Protocol-Version: 2026-07-28' \
  -H 'Mcp-Method: tools/call' \
  -H 'Mcp-Name: create_issue' \
  --data "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"create_issue\",\"arguments\":{\"title\":\"$title\"},$meta}}"
echo
