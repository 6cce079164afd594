#!/usr/bin/env node
// An agent for tests/upstream.rs: the official TypeScript SDK client
// (@modelcontextprotocol/sdk 1.x, a 2025 `initialize` session) against a
// run's gateway. Lists the tools, then makes each call given as
// NAME=JSON_ARGUMENTS, and prints one JSON line:
// {"tools": [names], "calls": [{"name", "isError", "text", "structured", "content"} | {"name", "error"}]}.
// Usage: agent.mjs URL TOKEN [NAME=ARGS ...]

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const [url, token, ...calls] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const client = new Client({ name: 'corkboard-upstream-agent', version: '1.0.0' }, { capabilities: {} });
await client.connect(transport);
const listed = await client.listTools();
const out = { tools: listed.tools.map((t) => t.name), calls: [] };
for (const spec of calls) {
    const at = spec.indexOf('=');
    const name = spec.slice(0, at);
    const args = JSON.parse(spec.slice(at + 1));
    try {
        const result = await client.callTool({ name, arguments: args });
        out.calls.push({
            name,
            isError: result.isError === true,
            text: (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n'),
            structured: result.structuredContent ?? null,
            content: result.content ?? [],
        });
    } catch (err) {
        out.calls.push({ name, error: String(err?.message ?? err) });
    }
}
console.log(JSON.stringify(out));
await client.close();
