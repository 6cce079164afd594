#!/usr/bin/env node
// Drives a corkboard MCP endpoint with the TypeScript client v2
// (@modelcontextprotocol/client 2.x), in one of its version-negotiation modes:
//   legacy      plain 2025 `initialize` handshake
//   auto        probe with `server/discover`, fall back to `initialize`
//   2026-07-28  pinned to the stateless 2026-07-28 revision, no fallback
// See common.mjs for the options, the scenario and the output contract.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { main, parseOptions } from './common.mjs';

const options = parseOptions('ts-client-v2.mjs', { modes: ['auto', '2026-07-28', 'legacy'], defaultMode: 'auto' });

function negotiation(mode) {
    if (mode === 'legacy' || mode === 'auto') return { mode };
    return { mode: { pin: mode } };
}

await main(`ts-client-v2/${options.mode}`, options, async (recorder) => {
    const transport = new StreamableHTTPClientTransport(new URL(options.url), {
        requestInit: { headers: { Authorization: `Bearer ${options.token}` } },
        fetch: recorder.fetch,
    });
    const client = new Client(
        { name: 'corkboard-interop-ts-client-v2', version: '2.0.0' },
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
