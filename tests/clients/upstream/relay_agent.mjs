#!/usr/bin/env node
// An agent for tests/relay.rs: the official TypeScript SDK client
// (@modelcontextprotocol/sdk 1.x, a 2025 `initialize` session; or, with
// AGENT_SDK=v2, @modelcontextprotocol/client 2.x in the negotiation mode
// AGENT_MODE: legacy or 2026-07-28) declaring sampling, elicitation and
// roots, with a handler for each that records what it was asked (2.x
// answers 2026-07-28 input_required results with the same handlers). Makes each call given as NAME=JSON_ARGUMENTS and
// prints one JSON line:
// {"tools": [names], "calls": [{"name", "isError", "text"} | {"name", "error"}],
//  "asked": [{"method", "params"}]}.
// SAMPLING_ANSWER picks the sampling answer: "good" (default), "other-model",
// "no-model", "no-role", "tool-use" (tool_use content, for a request without tools).
// Usage: relay_agent.mjs URL TOKEN [NAME=ARGS ...]

import * as v1 from '@modelcontextprotocol/sdk/client/index.js';
import * as v1http from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import * as v2 from '@modelcontextprotocol/client';
import {
    CreateMessageRequestSchema,
    ElicitRequestSchema,
    ListRootsRequestSchema,
} from '@modelcontextprotocol/sdk/types.js';

const sdk = process.env.AGENT_SDK ?? 'v1';
const agentMode = process.env.AGENT_MODE ?? 'legacy';

const [url, token, ...calls] = process.argv.slice(2);
const mode = process.env.SAMPLING_ANSWER ?? 'good';
const asked = [];
const Transport = sdk === 'v2' ? v2.StreamableHTTPClientTransport : v1http.StreamableHTTPClientTransport;
const transport = new Transport(new URL(url), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
});
const capabilities = { sampling: {}, elicitation: {}, roots: {} };
const client =
    sdk === 'v2'
        ? new v2.Client(
              { name: 'corkboard-relay-agent-v2', version: '2.0.0' },
              {
                  capabilities,
                  versionNegotiation: agentMode === 'legacy' ? { mode: 'legacy' } : { mode: { pin: agentMode } },
              },
          )
        : new v1.Client({ name: 'corkboard-relay-agent', version: '1.0.0' }, { capabilities });
// 1.x takes the request's schema, 2.x the method name.
const on = (schema, method, handler) => client.setRequestHandler(sdk === 'v2' ? method : schema, handler);
on(CreateMessageRequestSchema, 'sampling/createMessage', async (request) => {
    asked.push({ method: request.method, params: request.params });
    const text = { type: 'text', text: 'the agent samples: 42' };
    switch (mode) {
        case 'other-model':
            return { role: 'assistant', content: text, model: 'a-model-nobody-hinted' };
        case 'no-model':
            return { role: 'assistant', content: text };
        case 'no-role':
            return { content: text, model: 'agent-model' };
        case 'tool-use':
            return {
                role: 'assistant',
                content: { type: 'tool_use', id: 'call-1', name: 'lookup', input: {} },
                model: 'agent-model',
                stopReason: 'toolUse',
            };
        default:
            return { role: 'assistant', content: text, model: 'agent-model', stopReason: 'endTurn' };
    }
});
on(ElicitRequestSchema, 'elicitation/create', async (request) => {
    asked.push({ method: request.method, params: request.params });
    // Like a person filling in the form: only the fields it asks for.
    const offered = { name: 'Ada Lovelace', check: true };
    const fields = request.params?.requestedSchema?.properties ?? {};
    const content = Object.fromEntries(Object.entries(offered).filter(([field]) => field in fields));
    return { action: 'accept', content };
});
on(ListRootsRequestSchema, 'roots/list', async (request) => {
    asked.push({ method: request.method, params: request.params ?? null });
    return { roots: [{ uri: 'file:///srv/agent/project', name: 'project' }] };
});
await client.connect(transport);
const listed = await client.listTools();
const out = { tools: listed.tools.map((t) => t.name), calls: [], asked };
for (const spec of calls) {
    const at = spec.indexOf('=');
    const name = spec.slice(0, at);
    const args = JSON.parse(spec.slice(at + 1));
    try {
        const result = await client.callTool({ name, arguments: args }, undefined, { timeout: 30000 });
        out.calls.push({
            name,
            isError: result.isError === true,
            text: (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n'),
        });
    } catch (err) {
        out.calls.push({ name, error: String(err?.message ?? err) });
    }
}
console.log(JSON.stringify(out));
await client.close();
