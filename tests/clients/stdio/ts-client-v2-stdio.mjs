#!/usr/bin/env node
// Starts an MCP server as a child process with the TypeScript client v2
// (@modelcontextprotocol/client 2.x, StdioClientTransport) and drives it in one
// of the client's version-negotiation modes:
//   legacy      plain 2025 `initialize` handshake
//   auto        probe with `server/discover` (on a short-lived sibling process,
//               as the SDK does on stdio), fall back to `initialize`
//   2026-07-28  pinned to the stateless revision, no fallback
// See stdio-common.mjs for the options and ../common.mjs for the scenario.

import { Client } from '@modelcontextprotocol/client';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/client/stdio';
import { parseStdioOptions, runStdio, serverEnvironment } from './stdio-common.mjs';

const options = parseStdioOptions('ts-client-v2-stdio.mjs', { modes: ['auto', '2026-07-28', 'legacy'], defaultMode: 'auto' });

function negotiation(mode) {
    if (mode === 'legacy' || mode === 'auto') return { mode };
    return { mode: { pin: mode } };
}

await runStdio(`ts-client-v2-stdio/${options.mode}`, options, async () => {
    const transport = new StdioClientTransport({
        command: options.command,
        args: options.args,
        env: serverEnvironment(getDefaultEnvironment()),
        stderr: 'inherit',
    });
    const client = new Client(
        { name: 'corkboard-interop-ts-client-v2-stdio', version: '2.0.0' },
        { capabilities: {}, versionNegotiation: negotiation(options.mode) },
    );
    await client.connect(transport);
    return {
        client,
        info: {
            protocolVersion: client.getNegotiatedProtocolVersion(),
            era: client.getProtocolEra(),
            serverInfo: client.getServerVersion(),
        },
        close: () => client.close(),
    };
});
