#!/usr/bin/env node
// People acting on the web board in a real headless Chromium (playwright-core
// with /usr/bin/chromium) while a real MCP client (@modelcontextprotocol/sdk)
// is the agent that reads what they did.
//
// Scenario: a signed-in person files an issue, comments on the agent's issue
// (the agent's get_issue shows the comment as a person's, and a webhook
// receiver gets issue.commented with that author), edits its title, body and
// relations, releases the agent's claim, closes it with a reason and reopens
// it, hands its claim to another run; the history shows the person's
// actions; a write without the CSRF token and a viewer's write are refused.
//
// Usage (secrets through the environment, never the command line):
//   WEB_TEST_RUN_TOKEN=cbr_... WEB_TEST_VIEWER_JWT=... \
//   node web/people.spec.mjs --url http://127.0.0.1:4891 --signin 'http://.../signin?code=...' \
//     --mcp-url http://127.0.0.1:4891/mcp --run people-agent --second-run people-second
// Output: one JSON line on stdout ({"ok":true,"checks":{...}} or
// {"ok":false,"error":"...","checks":{...}}); progress on stderr.
// Exit status: 0 success, 1 failure, 2 bad usage.

import { parseArgs } from 'node:util';
import { createServer } from 'node:http';
import { randomUUID } from 'node:crypto';
import { chromium } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const CHROMIUM = '/usr/bin/chromium';

class Failure extends Error {}
const fail = (message) => {
  throw new Failure(message);
};
const check = (condition, message) => {
  if (!condition) fail(message);
};
const log = (message) => process.stderr.write(`people: ${message}\n`);

function usage(message) {
  process.stderr.write(`people.spec.mjs: ${message}\n`);
  process.exit(2);
}

let values;
try {
  ({ values } = parseArgs({
    options: {
      url: { type: 'string' },
      signin: { type: 'string' },
      'mcp-url': { type: 'string' },
      run: { type: 'string' },
      'second-run': { type: 'string' },
      tenant: { type: 'string', default: 'acme' },
      'timeout-ms': { type: 'string', default: '180000' },
    },
    strict: true,
  }));
} catch (err) {
  usage(err.message);
}
const base = (values.url ?? usage('missing --url')).replace(/\/$/, '');
const signinLink = values.signin ?? usage('missing --signin');
const mcpUrl = values['mcp-url'] ?? `${base}/mcp`;
const run = values.run ?? usage('missing --run');
const secondRun = values['second-run'] ?? usage('missing --second-run');
const env = (name) => process.env[name] ?? usage(`missing ${name} in the environment`);
const runToken = env('WEB_TEST_RUN_TOKEN');
const viewerJwt = env('WEB_TEST_VIEWER_JWT');
const { tenant } = values;

const checks = {};
let browser;
let receiver;
const deadline = setTimeout(() => finish(false, { error: `no result within ${values['timeout-ms']} ms` }), Number(values['timeout-ms']));

function finish(ok, body) {
  clearTimeout(deadline);
  if (!ok) log(`FAILED: ${body.error}`);
  process.stdout.write(JSON.stringify({ ok, ...body, checks }) + '\n');
  process.exitCode = ok ? 0 : 1;
  const exit = () => process.exit(ok ? 0 : 1);
  receiver?.close();
  if (browser) browser.close().then(exit, exit);
  else exit();
  setTimeout(exit, 5000).unref();
}

async function tool(agent, name, args) {
  const result = await agent.callTool({ name, arguments: args });
  const text = (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  check(!result.isError, `${name} failed: ${text}`);
  return result.structuredContent;
}

async function pageFetch(page, method, path, { csrf, body } = {}) {
  return page.evaluate(async ({ method, path, csrf, body }) => {
    const headers = { Accept: 'application/json' };
    if (csrf) headers['X-CSRF-Token'] = csrf;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    let json = null;
    try {
      json = await resp.json();
    } catch {
      json = null;
    }
    return { status: resp.status, body: json };
  }, { method, path, csrf, body });
}

const csrfOf = (page) => page.evaluate(async () => (await (await fetch('/web/session')).json()).csrf_token);

/** A webhook receiver: every delivery's event name and body. */
function startReceiver() {
  const received = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => { body += chunk; });
    req.on('end', () => {
      received.push({ event: req.headers['corkboard-event'], body });
      res.writeHead(200).end();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, received, port: server.address().port })));
}

async function until(what, probe, ms = 60000) {
  const end = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > end) fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function scenario() {
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
  });
  const tag = randomUUID().slice(0, 8);
  const context = await browser.newContext({ baseURL: base, viewport: { width: 1440, height: 900 } });
  context.setDefaultTimeout(20000);
  const page = await context.newPage();
  page.on('pageerror', (err) => log(`page error: ${err.message}`));
  const signedIn = await page.goto(signinLink);
  check(signedIn.ok(), `the sign-in link answered ${signedIn.status()}`);
  await page.locator('#whoami').filter({ hasText: 'platform-admin' }).waitFor();
  const person = (await pageFetch(page, 'GET', '/web/session')).body.subject;

  // A webhook endpoint of the tenant, registered by the person.
  const hook = await startReceiver();
  receiver = hook.server;
  const csrf = await csrfOf(page);
  const registered = await pageFetch(page, 'POST', `/v1/tenants/${tenant}/webhooks`, {
    csrf,
    body: { url: `http://127.0.0.1:${hook.port}/hook`, events: ['issue.commented'], secret: 'people-secret-0123456789' },
  });
  check(registered.status === 201, `registering the webhook answered ${registered.status}: ${JSON.stringify(registered.body)}`);

  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${runToken}` } } });
  const agent = new Client({ name: 'corkboard-people-test', version: '1.0.0' }, { capabilities: {} });
  await agent.connect(transport);
  const work = await tool(agent, 'create_issue', { title: `Agent work ${tag}`, body: 'the agent wrote this' });
  await tool(agent, 'claim_issue', { id: work.id });

  // --- A person files an issue from the board.
  await page.goto(`/?tenant=${tenant}#/board`);
  await page.locator('#new-issue-open').click();
  await page.locator('#new-title').fill(`Filed by a person ${tag}`);
  await page.locator('#new-body').fill('Written in the browser.');
  await page.locator('#new-priority').selectOption('high');
  await page.locator('#new-labels').fill('people, web');
  await page.locator('#new-save').click();
  await page.locator('#issue-title').filter({ hasText: `Filed by a person ${tag}` }).waitFor();
  const filedId = await page.locator('#issue').getAttribute('data-issue-id');
  const filed = await tool(agent, 'get_issue', { id: filedId });
  check(filed.author.kind === 'person' && filed.author.run === person && filed.author.grant === null,
    `the filed issue's author as the agent sees it: ${JSON.stringify(filed.author)}`);
  check(filed.priority === 'high' && JSON.stringify(filed.labels) === '["people","web"]', `filed issue fields: ${JSON.stringify(filed)}`);
  await page.locator('dd [data-author-kind="person"]').first().waitFor();
  checks.create = { author: filed.author };

  // --- A comment made in the browser reaches the agent's get_issue and a webhook.
  await page.goto(`/?tenant=${tenant}#/issue/${work.id}`);
  await page.locator('#comment-body').fill(`A person says hello ${tag}`);
  await page.locator('#comment-save').click();
  await page.locator('#comments li').filter({ hasText: `A person says hello ${tag}` }).waitFor();
  await page.locator('#comments li [data-author-kind="person"]').waitFor();
  const seen = await tool(agent, 'get_issue', { id: work.id });
  const comment = seen.comments.find((c) => c.body === `A person says hello ${tag}`);
  check(comment, `the agent does not see the person's comment: ${JSON.stringify(seen.comments)}`);
  check(comment.author.kind === 'person' && comment.author.run === person, `the comment's author as the agent sees it: ${JSON.stringify(comment.author)}`);
  const delivery = await until('the issue.commented webhook', () => hook.received.find((r) => r.event === 'issue.commented' && r.body.includes(work.id)));
  const payload = JSON.parse(delivery.body);
  const hookAuthor = JSON.stringify(payload).includes('"kind":"person"');
  check(hookAuthor, `the webhook does not say a person commented: ${delivery.body}`);
  checks.comment = { agent_sees: comment.author, webhook: delivery.event };

  // --- Title, body and a relation.
  await page.locator('#edit-text-open').click();
  await page.locator('#edit-title').fill(`Agent work, retitled ${tag}`);
  await page.locator('#edit-body').fill('the person rewrote this');
  await page.locator('#edit-parent').fill(filedId);
  await page.locator('#text-save').click();
  await page.locator('#issue-title').filter({ hasText: `Agent work, retitled ${tag}` }).waitFor();
  const edited = await tool(agent, 'get_issue', { id: work.id });
  check(edited.body === 'the person rewrote this' && edited.parent === filedId, `after the text edit: ${JSON.stringify(edited)}`);
  checks.edit = { parent: edited.parent };

  // --- Release the agent's claim.
  await page.locator('#claim-release').click();
  await until('the claim to go', async () => !(await tool(agent, 'get_issue', { id: work.id })).claim);
  await page.locator('#issue-claim').waitFor({ state: 'detached' });
  checks.release = true;

  // --- Close with a reason, then reopen.
  await page.locator('#edit-state').selectOption('closed');
  await page.locator('#edit-close-reason').selectOption('not_planned');
  await page.locator('#edit-save').click();
  await page.locator('#issue-close-reason').filter({ hasText: 'Not planned' }).waitFor();
  await page.locator('#edit-state').selectOption('todo');
  await page.locator('#edit-save').click();
  await page.locator('#issue-close-reason').waitFor({ state: 'detached' });
  const reopened = await tool(agent, 'get_issue', { id: work.id });
  check(reopened.state === 'todo' && !reopened.close_reason, `after reopening: ${reopened.state}/${reopened.close_reason}`);
  checks.reopen = { state: reopened.state };

  // --- Hand the issue to another run of the tenant.
  await page.locator('#handover-run').fill(secondRun);
  await page.locator('#handover-save').click();
  await page.locator('#issue-claim').filter({ hasText: secondRun }).waitFor();
  const handed = await tool(agent, 'get_issue', { id: work.id });
  check(handed.claim?.run === secondRun, `after the hand-over: ${JSON.stringify(handed.claim)}`);
  checks.handover = { run: handed.claim.run };

  // --- The history shows the person's changes under their own name.
  await page.reload();
  await page.locator('#history td', { hasText: '(person)' }).first().waitFor();
  // Audit records are gathered for 200 ms and written in batches
  // (docs/operations/operating.md): the hand-over's may land a moment
  // after its history row, so the trail is read until it holds every
  // action or 5 s have passed.
  const actions = ['add_comment', 'update_issue', 'release_issue', 'claim_issue'];
  const audited = (records) => actions.every((t) => records.some((r) => r.tool === t && r.outcome === 'ok'));
  let mine = [];
  for (const until = Date.now() + 5000; ;) {
    const audit = await pageFetch(page, 'GET', `/v1/tenants/${tenant}/audit?issue=${work.id}`);
    mine = audit.body.records.filter((r) => r.run === person);
    if (audited(mine) || Date.now() > until) break;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  check(audited(mine), `the audit trail lacks the person's actions: ${JSON.stringify(mine)}`);
  checks.audit = { records: mine.length };

  // --- CSRF and roles.
  const noCsrf = await pageFetch(page, 'POST', `/v1/tenants/${tenant}/issues/${work.id}/comments`, { body: { body: 'forged' } });
  check(noCsrf.status === 403, `a comment without X-CSRF-Token answered ${noCsrf.status}`);
  const viewerContext = await browser.newContext({ baseURL: base });
  const exchange = await viewerContext.request.post('/web/session', { data: { token: viewerJwt } });
  check(exchange.ok(), `exchanging the viewer JWT answered ${exchange.status()}`);
  const viewer = await viewerContext.newPage();
  await viewer.goto(`/?tenant=${tenant}#/issue/${work.id}`);
  await viewer.locator('#issue-title').waitFor();
  check(await viewer.locator('#comment-form, #text-form, #claim-form').count() === 0, 'a viewer is shown the people\'s forms');
  const viewerComment = await pageFetch(viewer, 'POST', `/v1/tenants/${tenant}/issues/${work.id}/comments`, { csrf: await csrfOf(viewer), body: { body: 'viewer' } });
  check(viewerComment.status === 403, `a viewer's comment answered ${viewerComment.status}`);
  const after = await tool(agent, 'get_issue', { id: work.id });
  check(!after.comments.some((c) => c.body === 'forged' || c.body === 'viewer'), 'a refused comment was written');
  checks.refused = { no_csrf: noCsrf.status, viewer: viewerComment.status };
  await viewerContext.close();
  await agent.close().catch(() => {});
  return {};
}

try {
  finish(true, await scenario());
} catch (err) {
  finish(false, { error: err instanceof Failure ? err.message : `unexpected error: ${err?.stack ?? err}` });
}
