// Shared driver for the Node MCP interop clients (ts-sdk-v1.mjs, ts-client-v2.mjs).
//
// Each client script only knows how to connect its SDK; everything it then does
// against the board, and how it reports, lives here so that both SDKs run the
// exact same scenario. Output contract (the black-box harness parses it):
//   stdout: exactly one JSON line, {"ok":true,...} or {"ok":false,"error":"..."}
//   stderr: human-readable progress and the failure reason
//   exit status: 0 on success, 1 on any failure, 2 on bad usage.
// The run token is never printed.

import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';

// vocabulary.json is generated from the Rust tool table (what GET
// /v1/vocabulary serves); `cargo test -p corkboard-tools --test integration
// vocabulary::` checks it and rewrites it when the table changed.
const VOCABULARY = JSON.parse(readFileSync(new URL('./vocabulary.json', import.meta.url), 'utf8'));
export const BOARD_TOOLS = VOCABULARY.tools.map((tool) => tool.name);
const ISSUE_ID = /^iss_[0-9A-HJKMNP-TV-Z]{26}$/;
const COMMENT_ID = /^cmt_[0-9A-HJKMNP-TV-Z]{26}$/;
const UNKNOWN_ISSUE = 'iss_00000000000000000000000000';

class Failure extends Error {}

function fail(message) {
    throw new Failure(message);
}

function check(condition, message) {
    if (!condition) fail(message);
}

const USAGE = `options:
  --url URL               MCP endpoint (default: $CORKBOARD_MCP_URL)
  --token TOKEN           run token (default: $CORKBOARD_TOKEN; prefer the env var,
                          command lines are visible to other users)
  --mode MODE             protocol mode (client-specific, see --help of each script)
  --expect-auth-failure   expect connecting to fail with 401/403; print the client's error
  --expect-message TEXT   with --expect-auth-failure: the error must contain TEXT
  --caps-check LIST       assert tools/list equals LIST (comma-separated tool names,
                          any order) and that calling a hidden tool fails
  --expect-era ERA        assert the negotiated era (modern | legacy)
  --budget-check BYTES    call list_issues with no arguments on a board of more than one
                          page: the whole result (JSON of content and structuredContent)
                          must be at most BYTES and say how to get the rest; then page
                          to the end and report every issue seen
  --timeout-ms N          overall deadline (default 60000)`;

/** Parses the common command line; exits with status 2 on bad usage. */
export function parseOptions(scriptName, { modes, defaultMode }) {
    let values;
    try {
        ({ values } = parseArgs({
            options: {
                url: { type: 'string' },
                token: { type: 'string' },
                mode: { type: 'string', default: defaultMode },
                'expect-auth-failure': { type: 'boolean', default: false },
                'expect-message': { type: 'string' },
                'caps-check': { type: 'string' },
                'expect-era': { type: 'string' },
                'budget-check': { type: 'string' },
                'timeout-ms': { type: 'string', default: '60000' },
                help: { type: 'boolean', default: false },
            },
            strict: true,
        }));
    } catch (err) {
        usage(scriptName, modes, err.message);
    }
    if (values.help) {
        process.stderr.write(`usage: node ${scriptName} [options]\n${USAGE}\nmodes: ${modes.join(', ')}\n`);
        process.exit(0);
    }
    const url = values.url ?? process.env.CORKBOARD_MCP_URL;
    if (!url) usage(scriptName, modes, 'missing --url (or CORKBOARD_MCP_URL)');
    try {
        new URL(url);
    } catch {
        usage(scriptName, modes, `--url is not a URL: ${url}`);
    }
    let token = values.token ?? process.env.CORKBOARD_TOKEN;
    if (!token) {
        if (!values['expect-auth-failure']) usage(scriptName, modes, 'missing --token (or CORKBOARD_TOKEN)');
        // Well-formed but never issued: the server must refuse it.
        token = 'cbr_' + 'A'.repeat(43);
    }
    if (!modes.includes(values.mode)) usage(scriptName, modes, `unsupported --mode ${values.mode}`);
    const timeoutMs = Number(values['timeout-ms']);
    if (!Number.isInteger(timeoutMs) || timeoutMs <= 0) usage(scriptName, modes, '--timeout-ms must be a positive integer');
    const era = values['expect-era'];
    if (era !== undefined && era !== 'modern' && era !== 'legacy') usage(scriptName, modes, '--expect-era must be modern or legacy');
    const capsCheck = values['caps-check'] === undefined
        ? undefined
        : values['caps-check'].split(',').map((s) => s.trim()).filter(Boolean);
    const budgetCheck = values['budget-check'] === undefined ? undefined : Number(values['budget-check']);
    if (budgetCheck !== undefined && !(Number.isInteger(budgetCheck) && budgetCheck > 0)) usage(scriptName, modes, '--budget-check must be a positive integer');
    return {
        url,
        token,
        budgetCheck,
        mode: values.mode,
        expectAuthFailure: values['expect-auth-failure'],
        expectMessage: values['expect-message'],
        capsCheck,
        expectEra: era,
        timeoutMs,
    };
}

function usage(scriptName, modes, message) {
    process.stderr.write(`${scriptName}: ${message}\nusage: node ${scriptName} [options]\n${USAGE}\nmodes: ${modes.join(', ')}\n`);
    process.exit(2);
}

/**
 * A fetch that records every HTTP status the client saw, so that an expected
 * authentication failure can be told apart from an unreachable server.
 */
export function recordingFetch() {
    const statuses = [];
    let requests = 0;
    const fetchImpl = async (input, init) => {
        requests += 1;
        const response = await fetch(input, init);
        statuses.push(response.status);
        return response;
    };
    return {
        fetch: fetchImpl,
        statuses,
        get requests() {
            return requests;
        },
    };
}

function describe(err) {
    if (err === null || err === undefined) return String(err);
    const parts = [err.message ?? String(err)];
    if (err.code !== undefined) parts.push(`code=${err.code}`);
    // fetch() hides the socket error (ECONNREFUSED, ...) in `cause`.
    let cause = err.cause;
    while (cause) {
        parts.push(`cause: ${cause.message ?? cause}${cause.code ? ` (${cause.code})` : ''}`);
        cause = cause.cause;
    }
    return parts.join('; ');
}

function textOf(result) {
    return (result.content ?? [])
        .filter((c) => c.type === 'text')
        .map((c) => c.text)
        .join('\n');
}

async function callOk(client, name, args) {
    const result = await client.callTool({ name, arguments: args });
    check(!result.isError, `${name} returned a tool error: ${textOf(result)}`);
    const sc = result.structuredContent;
    check(sc !== undefined && sc !== null && typeof sc === 'object', `${name} returned no structuredContent`);
    check(textOf(result).length > 0, `${name} returned no text content`);
    return sc;
}

/** Calls a tool that must fail; returns how it failed. */
async function callFailing(client, name, args) {
    let result;
    try {
        result = await client.callTool({ name, arguments: args });
    } catch (err) {
        return { kind: 'protocol_error', message: describe(err) };
    }
    check(result.isError === true, `${name} was expected to fail but succeeded: ${textOf(result).slice(0, 300)}`);
    return { kind: 'tool_error', message: textOf(result) };
}

async function toolNames(client) {
    const { tools } = await client.listTools();
    for (const tool of tools) {
        check(tool.inputSchema?.type === 'object', `tool ${tool.name} has no object inputSchema`);
    }
    return tools.map((t) => t.name);
}

async function fullScenario(client, label) {
    const tools = await toolNames(client);
    for (const name of BOARD_TOOLS) {
        check(tools.includes(name), `tools/list lacks ${name} (the full scenario needs a grant with every capability); got ${tools.join(',')}`);
    }
    const tag = `${label}-${Date.now().toString(36)}-${randomUUID().slice(0, 8)}`;
    const key = `interop-${tag}`;
    const createArgs = {
        title: `Interop ${tag}`,
        body: `Created by the ${label} interop client.`,
        labels: ['interop'],
        priority: 'low',
        idempotency_key: key,
    };
    const created = await callOk(client, 'create_issue', createArgs);
    check(ISSUE_ID.test(created.id), `create_issue returned a malformed id ${created.id}`);
    check(created.version === 1, `a new issue must be at version 1, got ${created.version}`);
    check(created.replayed === false, `first create_issue must have replayed=false, got ${created.replayed}`);
    check(created.state === 'inbox' && created.priority === 'low', 'create_issue did not keep state/priority');
    const id = created.id;

    const replay = await callOk(client, 'create_issue', createArgs);
    check(replay.id === id && replay.replayed === true, `replaying create_issue with the same key must return ${id} with replayed=true, got ${replay.id} replayed=${replay.replayed}`);
    check(created.created === true && Array.isArray(created.similar), `create_issue must say created=true and list similar issues: ${JSON.stringify(created).slice(0, 300)}`);

    // The same title again with if_similar "refuse": nothing created, the
    // original back, not an error, and a text block that says so first.
    const refusedResult = await client.callTool({ name: 'create_issue', arguments: { title: createArgs.title, if_similar: 'refuse' } });
    check(refusedResult.isError !== true, `a refused near duplicate is not a tool error: ${textOf(refusedResult).slice(0, 300)}`);
    const refused = refusedResult.structuredContent ?? {};
    check(refused.created === false && refused.id === id, `if_similar "refuse" must answer the near match ${id} with created=false, got ${refused.id} created=${refused.created}`);
    check(textOf(refusedResult).startsWith('NOT CREATED'), `the refusal's text must start with NOT CREATED: ${textOf(refusedResult).slice(0, 200)}`);

    const got = await callOk(client, 'get_issue', { id });
    check(got.id === id && got.title === createArgs.title, 'get_issue returned another issue');

    const page = await callOk(client, 'list_issues', { labels: ['interop'], text: tag, limit: 10 });
    check(Array.isArray(page.issues) && page.issues.some((i) => i.id === id), `list_issues did not find ${id}`);
    check(page.next_cursor === null, `a one-issue page must have next_cursor null, got ${page.next_cursor}`);

    const updated = await callOk(client, 'update_issue', { id, state: 'in_progress', expected_version: got.version });
    check(updated.state === 'in_progress' && updated.version === got.version + 1, `update_issue: expected state in_progress at version ${got.version + 1}, got ${updated.state} at ${updated.version}`);

    const word = `zq${randomUUID().replace(/-/g, '').slice(0, 12)}`;
    const commented = await callOk(client, 'add_comment', { issue_id: id, body: `Interop comment about ${word}.`, idempotency_key: `${key}-c` });
    check(COMMENT_ID.test(commented.comment?.id ?? ''), 'add_comment returned no comment id');
    check(commented.comments.length === 1 && commented.replayed === false, 'add_comment: expected one comment, replayed=false');

    // A word only in the comment is found at once, ranked first, with a snippet.
    const found = await callOk(client, 'search_issues', { query: word, states: ['in_progress'], limit: 5 });
    const hit = found.hits?.[0];
    check(hit?.id === id && hit.field === 'comment' && hit.snippet.includes(`**${word}**`), `search_issues must find ${id} by its comment word: ${JSON.stringify(found).slice(0, 400)}`);
    check(found.next_offset === null && found.partial === false, 'one search hit is one page');

    const stale = await callFailing(client, 'update_issue', { id, title: 'stale write', expected_version: got.version });
    check(stale.kind === 'tool_error', `a stale expected_version must be a tool error (isError), got ${stale.kind}: ${stale.message}`);
    check(stale.message.includes(`expected_version=${commented.version}`), `the conflict message must name the current version ${commented.version}: ${stale.message}`);

    const notFound = await callFailing(client, 'get_issue', { id: UNKNOWN_ISSUE });
    check(notFound.kind === 'tool_error' && notFound.message.includes('not found'), `get_issue of an unknown id: ${notFound.kind}: ${notFound.message}`);

    const tenant = await callFailing(client, 'list_issues', { tenant: 'someone-else' });

    const after = await callOk(client, 'get_issue', { id });
    check(after.title === createArgs.title && after.version === commented.version, 'the stale update must not have written anything');

    // Relations: a sub-issue shows up as a child of its parent.
    const child = await callOk(client, 'create_issue', { title: `Child ${tag}`, parent: id, blocked_by: [id] });
    check(child.parent === id && child.blocked_by.length === 1, `create_issue did not keep parent/blocked_by: ${JSON.stringify(child)}`);
    const parentView = await callOk(client, 'get_issue', { id });
    check(parentView.children.includes(child.id) && parentView.blocks.includes(child.id), `get_issue of the parent lacks children/blocks: ${JSON.stringify(parentView.children)}`);
    const cycle = await callFailing(client, 'update_issue', { id, parent: child.id });
    check(cycle.kind === 'tool_error' && cycle.message.includes('cycle'), `a parent cycle must be a tool error: ${cycle.kind}: ${cycle.message}`);

    // Claims: claim, claim again (no change), listed as claimed, release.
    const claimed = await callOk(client, 'claim_issue', { id: child.id });
    check(typeof claimed.claim?.run === 'string' && claimed.version === child.version + 1, `claim_issue: ${JSON.stringify(claimed.claim)} at version ${claimed.version}`);
    const again = await callOk(client, 'claim_issue', { id: child.id });
    check(again.version === claimed.version, 'claiming one\'s own claim again must change nothing');
    const free = await callOk(client, 'list_issues', { parent: id, unclaimed: true });
    check(!free.issues.some((i) => i.id === child.id), 'a claimed issue must not be listed as unclaimed');
    const released = await callOk(client, 'release_issue', { id: child.id, expected_version: claimed.version });
    check(released.claim === null && released.version === claimed.version + 1, `release_issue: claim ${JSON.stringify(released.claim)} at version ${released.version}`);
    const notClaimed = await callFailing(client, 'release_issue', { id: child.id });
    check(notClaimed.kind === 'tool_error' && notClaimed.message.includes('not claimed'), `a second release must be a tool error: ${notClaimed.message}`);
    const closed = await callOk(client, 'update_issue', { id: child.id, state: 'closed', close_reason: 'not_planned' });
    check(closed.close_reason === 'not_planned', `update_issue did not keep close_reason: ${closed.close_reason}`);

    // The work queue: a bulk create under the issue (answered item by
    // item), claim_next taking the most urgent ready one, board_stats.
    const bulk = await callOk(client, 'create_issues', { parent: id, issues: [
        { title: `Queue A ${tag}`, priority: 'urgent', idempotency_key: `${key}-qa` },
        { title: `Queue B ${tag}`, idempotency_key: `${key}-qb` },
    ] });
    check(bulk.created === 2 && bulk.results.every((r) => ISSUE_ID.test(r.id ?? '')), `create_issues: ${JSON.stringify(bulk).slice(0, 300)}`);
    const next = await callOk(client, 'claim_next', { parent: id, min_priority: 'urgent' });
    check(next.outcome === 'claimed' && next.id === bulk.results[0].id && typeof next.claim?.expires_at === 'string', `claim_next: ${JSON.stringify(next).slice(0, 300)}`);
    const none = await callOk(client, 'claim_next', { parent: id, min_priority: 'urgent' });
    check(none.outcome === 'no_ready_work' && none.claimed === 1 && none.blocked === 0, `claim_next with nothing ready: ${JSON.stringify(none)}`);
    const stats = await callOk(client, 'board_stats', {});
    check(stats.claimed >= 1 && stats.total >= 4 && typeof stats.by_state === 'object', `board_stats: ${JSON.stringify(stats).slice(0, 300)}`);

    return {
        tools,
        created: id,
        errors: { stale_version: stale, not_found: notFound, tenant_argument: tenant, parent_cycle: cycle, not_claimed: notClaimed },
    };
}

/**
 * The default list_issues on a board larger than one answer: the whole
 * result as the SDK hands it over (content and structuredContent) within
 * `budget` bytes, saying how to get the rest, its text naming every issue;
 * then every page to the end.
 */
async function budgetScenario(client, budget) {
    const seen = [];
    let cursor = null;
    let first = null;
    let pages = 0;
    do {
        const result = await client.callTool({ name: 'list_issues', arguments: cursor === null ? {} : { cursor } });
        check(!result.isError, `list_issues returned a tool error: ${textOf(result)}`);
        const bytes = Buffer.byteLength(JSON.stringify(result), 'utf8');
        check(bytes <= budget, `a list_issues result is ${bytes} bytes, over the ${budget}-byte budget`);
        const sc = result.structuredContent;
        check(sc && Array.isArray(sc.issues), 'list_issues returned no structuredContent.issues');
        const text = textOf(result);
        for (const issue of sc.issues) {
            check(text.includes(issue.id), `the text block does not name ${issue.id}`);
            seen.push(issue.id);
        }
        if (first === null) {
            check(typeof sc.next_cursor === 'string', 'the first page of a board larger than one answer must give a next_cursor');
            check(text.includes(sc.next_cursor), 'the text block does not give the next cursor');
            first = { bytes, shown: sc.issues.length, next_cursor: sc.next_cursor, truncated: sc.truncated ?? null };
        }
        cursor = sc.next_cursor;
        pages += 1;
        check(pages <= 100, 'more than 100 pages: the cursor does not advance');
    } while (cursor !== null);
    return { budget_check: { ...first, pages, seen: seen.length, unique: new Set(seen).size } };
}

function argumentsFor(tool) {
    switch (tool) {
        case 'list_issues':
            return {};
        case 'get_issue':
            return { id: UNKNOWN_ISSUE };
        case 'create_issue':
            return { title: 'must not be created' };
        case 'update_issue':
            return { id: UNKNOWN_ISSUE, title: 'must not be written' };
        case 'add_comment':
            return { issue_id: UNKNOWN_ISSUE, body: 'must not be written' };
        case 'claim_issue':
        case 'release_issue':
            return { id: UNKNOWN_ISSUE };
        case 'search_issues':
            return { query: 'anything' };
        case 'create_issues':
            return { issues: [{ title: 'must not be created' }] };
        default:
            return {};
    }
}

async function capsScenario(client, expected, recorder) {
    const tools = await toolNames(client);
    const sorted = (xs) => [...xs].sort();
    check(JSON.stringify(sorted(tools)) === JSON.stringify(sorted(expected)), `tools/list is [${tools}], expected [${expected}]`);
    const hidden = BOARD_TOOLS.find((t) => !tools.includes(t));
    if (hidden === undefined) return { tools, hidden_call: null };
    const before = recorder.requests;
    const outcome = await callFailing(client, hidden, argumentsFor(hidden));
    // A client may refuse an unlisted tool itself; say so rather than claim
    // the server refused it.
    const reachedServer = recorder.requests > before;
    return { tools, hidden_call: { tool: hidden, ...outcome, reached_server: reachedServer } };
}

/**
 * Runs the scenario the options ask for. `connect(recorder)` connects the
 * SDK's client and resolves to `{ client, info: { protocolVersion, era, serverInfo }, close }`.
 */
export async function main(label, options, connect) {
    const deadline = setTimeout(() => {
        finish(false, { error: `no result within ${options.timeoutMs} ms` });
    }, options.timeoutMs);
    const recorder = recordingFetch();
    let session;
    try {
        if (options.expectAuthFailure) {
            try {
                session = await connect(recorder);
                await session.client.listTools();
            } catch (err) {
                const message = describe(err);
                const refused = recorder.statuses.some((s) => s === 401 || s === 403);
                check(refused, `expected the server to refuse the token with 401/403, but got statuses [${recorder.statuses}]: ${message}`);
                if (options.expectMessage !== undefined) {
                    check(message.includes(options.expectMessage), `the client's error does not contain ${JSON.stringify(options.expectMessage)}: ${message}`);
                }
                process.stderr.write(`${label}: refused as expected: ${message}\n`);
                return finish(true, { auth_failure: message, statuses: recorder.statuses });
            }
            fail('connected and listed tools with a token that should have been refused');
        }
        try {
            session = await connect(recorder);
        } catch (err) {
            fail(`connect failed (statuses [${recorder.statuses}]): ${describe(err)}`);
        }
        const { client, info } = session;
        // `initialize` must carry serverInfo with name and version; in the
        // stateless era it is only a SHOULD (in result `_meta`), so it is
        // checked when present.
        if (info.era !== 'modern' || info.serverInfo !== undefined) {
            check(typeof info.serverInfo?.name === 'string' && typeof info.serverInfo?.version === 'string', `serverInfo lacks name/version: ${JSON.stringify(info.serverInfo)}`);
        }
        if (options.expectEra !== undefined) {
            check(info.era === options.expectEra, `expected the ${options.expectEra} era, negotiated ${info.era} (${info.protocolVersion})`);
        }
        const summary = options.capsCheck !== undefined
            ? await capsScenario(client, options.capsCheck, recorder)
            : options.budgetCheck !== undefined
                ? await budgetScenario(client, options.budgetCheck)
                : await fullScenario(client, label);
        process.stderr.write(`${label}: ok (${info.era ?? 'legacy'} ${info.protocolVersion})\n`);
        return finish(true, {
            client: label,
            mode: options.mode,
            protocol_version: info.protocolVersion ?? null,
            era: info.era ?? null,
            server: info.serverInfo ?? null,
            ...summary,
        });
    } catch (err) {
        const message = err instanceof Failure ? err.message : `unexpected error: ${describe(err)}`;
        return finish(false, { error: message });
    } finally {
        clearTimeout(deadline);
        if (session) await session.close().catch(() => {});
    }

    function finish(ok, body) {
        if (!ok) process.stderr.write(`${label}: FAILED: ${body.error}\n`);
        process.stdout.write(JSON.stringify({ ok, ...body }) + '\n');
        process.exitCode = ok ? 0 : 1;
        if (!ok) {
            // Nothing useful can still happen; do not wait for open sockets.
            setImmediate(() => process.exit(1));
        } else {
            // Give close() a moment, but never hang on a keep-alive socket.
            setTimeout(() => process.exit(0), 2000).unref();
        }
    }
}
