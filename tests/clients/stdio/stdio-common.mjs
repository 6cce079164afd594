// Shared driver for the Node MCP stdio clients (ts-client-v2-stdio.mjs,
// ts-sdk-v1-stdio.mjs): each SDK starts the MCP server as a child process and
// speaks newline-delimited JSON-RPC on its stdin/stdout.
//
// The scenario and the output contract are those of ../common.mjs (the HTTP
// clients): stdout gets exactly one JSON line ({"ok":true,...} or
// {"ok":false,"error":"..."}), stderr the progress and the failure reason;
// exit status 0 on success, 1 on any failure, 2 on bad usage.
//
// The server command follows `--`, e.g.
//   node ts-client-v2-stdio.mjs --mode auto -- corkboard mcp stdio --data-dir .corkboard
// The run token is never an argument: the child gets CORKBOARD_TOKEN (and every
// other CORKBOARD_* variable) from this process's environment.

import { parseArgs } from 'node:util';
import { main } from '../common.mjs';

const USAGE = `options:
  --mode MODE             protocol mode (client-specific)
  --expect-auth-failure   expect connecting (or listing tools) to fail
  --expect-message TEXT   with --expect-auth-failure: the error must contain TEXT
  --caps-check LIST       assert tools/list equals LIST (comma-separated) and that
                          calling a hidden tool fails
  --expect-era ERA        assert the negotiated era (modern | legacy)
  --timeout-ms N          overall deadline (default 60000)
  -- COMMAND [ARGS...]    the MCP server to start`;

function usage(scriptName, modes, message) {
    process.stderr.write(`${scriptName}: ${message}\nusage: node ${scriptName} [options] -- COMMAND [ARGS...]\n${USAGE}\nmodes: ${modes.join(', ')}\n`);
    process.exit(2);
}

/** Parses the command line; exits with status 2 on bad usage. */
export function parseStdioOptions(scriptName, { modes, defaultMode }) {
    let parsed;
    try {
        parsed = parseArgs({
            options: {
                mode: { type: 'string', default: defaultMode },
                'expect-auth-failure': { type: 'boolean', default: false },
                'expect-message': { type: 'string' },
                'caps-check': { type: 'string' },
                'expect-era': { type: 'string' },
                'timeout-ms': { type: 'string', default: '60000' },
            },
            allowPositionals: true,
            strict: true,
        });
    } catch (err) {
        usage(scriptName, modes, err.message);
    }
    const { values, positionals } = parsed;
    if (positionals.length === 0) usage(scriptName, modes, 'missing the server command after --');
    if (!modes.includes(values.mode)) usage(scriptName, modes, `unsupported --mode ${values.mode}`);
    const timeoutMs = Number(values['timeout-ms']);
    if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) usage(scriptName, modes, '--timeout-ms must be a positive integer');
    const era = values['expect-era'];
    if (era !== undefined && era !== 'modern' && era !== 'legacy') usage(scriptName, modes, '--expect-era must be modern or legacy');
    return {
        command: positionals[0],
        args: positionals.slice(1),
        mode: values.mode,
        expectAuthFailure: values['expect-auth-failure'],
        expectMessage: values['expect-message'],
        capsCheck: values['caps-check'] === undefined
            ? undefined
            : values['caps-check'].split(',').map((s) => s.trim()).filter(Boolean),
        expectEra: era,
        timeoutMs,
    };
}

/** The child's environment: the SDK's safe defaults plus every CORKBOARD_* variable. */
export function serverEnvironment(defaults) {
    const env = { ...defaults };
    for (const [key, value] of Object.entries(process.env)) {
        if (key.startsWith('CORKBOARD_') && value !== undefined) env[key] = value;
    }
    return env;
}

function describe(err) {
    if (err === null || err === undefined) return String(err);
    const parts = [err.message ?? String(err)];
    if (err.code !== undefined) parts.push(`code=${err.code}`);
    return parts.join('; ');
}

function report(label, ok, body) {
    if (!ok) process.stderr.write(`${label}: FAILED: ${body.error}\n`);
    process.stdout.write(JSON.stringify({ ok, ...body }) + '\n');
    // The child is closed already; never wait on a straggling handle.
    setTimeout(() => process.exit(ok ? 0 : 1), 100).unref();
    process.exitCode = ok ? 0 : 1;
}

/**
 * Runs the scenario the options ask for. `connect()` starts the server
 * through the SDK's stdio transport and resolves to
 * `{ client, info: { protocolVersion, era, serverInfo }, close }`.
 */
export async function runStdio(label, options, connect) {
    if (!options.expectAuthFailure) {
        // The HTTP scenario, unchanged: it never touches the transport itself.
        return main(label, options, async () => connect());
    }
    // Stdio has no HTTP status: a refused token must surface as a JSON-RPC
    // error on the first request (connect or tools/list), with its reason.
    const deadline = setTimeout(() => report(label, false, { error: `no result within ${options.timeoutMs} ms` }), options.timeoutMs);
    let session;
    try {
        session = await connect();
        await session.client.listTools();
    } catch (err) {
        clearTimeout(deadline);
        const message = describe(err);
        if (session) await session.close().catch(() => {});
        if (options.expectMessage !== undefined && !message.includes(options.expectMessage)) {
            return report(label, false, { error: `the client's error does not contain ${JSON.stringify(options.expectMessage)}: ${message}` });
        }
        process.stderr.write(`${label}: refused as expected: ${message}\n`);
        return report(label, true, { auth_failure: message });
    }
    clearTimeout(deadline);
    await session.close().catch(() => {});
    return report(label, false, { error: 'connected and listed tools with a token that should have been refused' });
}
