#!/usr/bin/env node
// Starts an MCP server as a child process with the TypeScript SDK v1
// (@modelcontextprotocol/sdk 1.x, StdioClientTransport; 2025 era only) and
// drives it through the `initialize` handshake.
// See stdio-common.mjs for the options and ../common.mjs for the scenario.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport, getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import { parseStdioOptions, runStdio, serverEnvironment } from './stdio-common.mjs';

const options = parseStdioOptions('ts-sdk-v1-stdio.mjs', { modes: ['legacy'], defaultMode: 'legacy' });

await runStdio('ts-sdk-v1-stdio', options, async () => {
    const transport = new StdioClientTransport({
        command: options.command,
        args: options.args,
        env: serverEnvironment(getDefaultEnvironment()),
        stderr: 'inherit',
    });
    // The stdio transport has no use for the negotiated version; the client
    // hands it to any transport that asks, which is how it is observed here.
    let negotiated;
    transport.setProtocolVersion = (version) => {
        negotiated = version;
    };
    const client = new Client({ name: 'corkboard-interop-ts-sdk-v1-stdio', version: '1.0.0' }, { capabilities: {} });
    await client.connect(transport);
    return {
        client,
        info: {
            protocolVersion: negotiated,
            era: 'legacy',
            serverInfo: client.getServerVersion(),
        },
        close: () => client.close(),
    };
});
