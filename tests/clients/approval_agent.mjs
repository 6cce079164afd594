#!/usr/bin/env node
// One tool call through the TypeScript SDK, as an agent whose call may need
// a person's approval: `--sdk v2` (@modelcontextprotocol/client 2.x, `--mode
// legacy|2026-07-28`) or `--sdk v1` (@modelcontextprotocol/sdk 1.x, 2025
// only). Prints one JSON line: {"ok":true,"is_error":...,"text":...,
// "structured":...,"protocol":...}; exit 1 on a failure to call at all.
// The tool's arguments come as JSON in APPROVAL_ARGS, the token in
// CORKBOARD_TOKEN (never on the command line). `--progress` (1.x SDK) asks
// for progress notifications (a progressToken) and reports how many came
// in "progress"; the call's own timeout is `--timeout-ms` (default 120000).
//
//   CORKBOARD_TOKEN=cbr_... APPROVAL_ARGS='{"id":"iss_..."}' \
//   node approval_agent.mjs --url http://127.0.0.1:4891/mcp --sdk v2 --mode legacy --tool update_issue

import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    sdk: { type: 'string', default: 'v2' },
    mode: { type: 'string', default: 'legacy' },
    tool: { type: 'string' },
    progress: { type: 'boolean', default: false },
    'timeout-ms': { type: 'string', default: '120000' },
  },
  strict: true,
});
const token = process.env.CORKBOARD_TOKEN;
const args = JSON.parse(process.env.APPROVAL_ARGS ?? '{}');
const out = (body) => process.stdout.write(`${JSON.stringify(body)}\n`);

async function connect() {
  const headers = { Authorization: `Bearer ${token}` };
  if (values.sdk === 'v1') {
    const { Client } = await import('@modelcontextprotocol/sdk/client/index.js');
    const { StreamableHTTPClientTransport } = await import('@modelcontextprotocol/sdk/client/streamableHttp.js');
    const client = new Client({ name: 'corkboard-approval-agent-v1', version: '1.0.0' }, { capabilities: {} });
    await client.connect(new StreamableHTTPClientTransport(new URL(values.url), { requestInit: { headers } }));
    return { client, protocol: 'legacy' };
  }
  const { Client, StreamableHTTPClientTransport } = await import('@modelcontextprotocol/client');
  const negotiation = values.mode === 'legacy' ? { mode: 'legacy' } : { mode: { pin: values.mode } };
  const client = new Client({ name: 'corkboard-approval-agent-v2', version: '2.0.0' }, { capabilities: {}, versionNegotiation: negotiation });
  await client.connect(new StreamableHTTPClientTransport(new URL(values.url), { requestInit: { headers } }));
  return { client, protocol: client.getNegotiatedProtocolVersion() };
}

try {
  const { client, protocol } = await connect();
  let progress = 0;
  const options = { timeout: Number(values['timeout-ms']) };
  if (values.progress) options.onprogress = () => { progress += 1; };
  const result = values.sdk === 'v1'
    ? await client.callTool({ name: values.tool, arguments: args }, undefined, options)
    : await client.callTool({ name: values.tool, arguments: args });
  const text = (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  out({ ok: true, is_error: Boolean(result.isError), text, structured: result.structuredContent ?? null, protocol, progress });
  await client.close().catch(() => {});
  process.exit(0);
} catch (err) {
  out({ ok: false, error: String(err?.stack ?? err) });
  process.exit(1);
}
