#!/usr/bin/env node
// Drives a corkboard MCP endpoint with the TypeScript SDK v1
// (@modelcontextprotocol/sdk 1.x, 2025 protocol era only, `initialize` sessions).
// See common.mjs for the options, the scenario and the output contract.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { main, parseOptions } from './common.mjs';

const options = parseOptions('ts-sdk-v1.mjs', { modes: ['legacy'], defaultMode: 'legacy' });

await main('ts-sdk-v1', options, async (recorder) => {
    const transport = new StreamableHTTPClientTransport(new URL(options.url), {
        requestInit: { headers: { Authorization: `Bearer ${options.token}` } },
        fetch: recorder.fetch,
    });
    const client = new Client({ name: 'corkboard-interop-ts-sdk-v1', version: '1.0.0' }, { capabilities: {} });
    await client.connect(transport);
    return {
        client,
        info: {
            protocolVersion: transport.protocolVersion,
            era: 'legacy',
            serverInfo: client.getServerVersion(),
        },
        close: () => client.close(),
    };
});
