#!/usr/bin/env node
// A person approves one call and denies another on the web board, in a real
// headless Chromium (playwright-core, /usr/bin/chromium), while a real MCP
// client (@modelcontextprotocol/sdk) is the agent whose calls wait.
//
// The tenant's policies (set by the Rust test) make add_comment and
// update_issue wait for a person. The agent's first call of each answers
// "awaits approval" with a handle; the approver (signed in with an approver
// JWT) sees both on #/approvals with their arguments, approves the comment
// and denies the update with a reason; the agent's same calls again then
// run (the comment) and answer the reason (the update). A viewer sees the
// items but no decision buttons, and the API refuses its decision.
//
// Usage (secrets through the environment):
//   WEB_TEST_RUN_TOKEN=cbr_... WEB_TEST_APPROVER_JWT=... WEB_TEST_VIEWER_JWT=... \
//   node web/approvals.spec.mjs --url http://127.0.0.1:4891 --mcp-url http://127.0.0.1:4891/mcp --tenant acme
// Output: one JSON line on stdout ({"ok":true,"checks":{...}} or {"ok":false,"error":...}).

import { parseArgs } from 'node:util';
import { randomUUID } from 'node:crypto';
import { chromium } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

class Failure extends Error {}
const fail = (message) => {
  throw new Failure(message);
};
const check = (condition, message) => {
  if (!condition) fail(message);
};
const log = (message) => process.stderr.write(`approvals: ${message}\n`);

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    'mcp-url': { type: 'string' },
    tenant: { type: 'string', default: 'acme' },
  },
  strict: true,
});
const base = values.url.replace(/\/$/, '');
const mcpUrl = values['mcp-url'];
const { tenant } = values;
const runToken = process.env.WEB_TEST_RUN_TOKEN;
const approverJwt = process.env.WEB_TEST_APPROVER_JWT;
const viewerJwt = process.env.WEB_TEST_VIEWER_JWT;
const checks = {};
let browser;

function finish(ok, body) {
  if (!ok) log(`FAILED: ${body.error}`);
  process.stdout.write(`${JSON.stringify({ ok, ...body, checks })}\n`);
  const exit = () => process.exit(ok ? 0 : 1);
  if (browser) browser.close().then(exit, exit);
  else exit();
  setTimeout(exit, 5000).unref();
}
setTimeout(() => finish(false, { error: 'no result within 180 s' }), 180000).unref();

async function call(agent, name, args) {
  const result = await agent.callTool({ name, arguments: args });
  const text = (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  return { isError: Boolean(result.isError), text, structured: result.structuredContent };
}

const handleOf = (text) => text.match(/apr_[0-9A-Z]{26}/)?.[0];

async function signIn(jwt, role) {
  const context = await browser.newContext({ baseURL: base, viewport: { width: 1280, height: 900 } });
  context.setDefaultTimeout(20000);
  const exchange = await context.request.post('/web/session', { data: { token: jwt } });
  check(exchange.ok(), `exchanging the ${role} JWT answered ${exchange.status()}`);
  const page = await context.newPage();
  page.on('pageerror', (err) => log(`${role}: page error: ${err.message}`));
  return { context, page };
}

async function scenario() {
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] });
  const tag = randomUUID().slice(0, 8);
  const agent = new Client({ name: 'corkboard-approvals-test', version: '1.0.0' }, { capabilities: {} });
  await agent.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${runToken}` } } }));
  const created = await call(agent, 'create_issue', { title: `Needs people ${tag}` });
  check(!created.isError, `create_issue (no policy covers it) failed: ${created.text}`);
  const issue = created.structured;

  const commentArgs = { issue_id: issue.id, body: `Approved comment ${tag}` };
  const firstComment = await call(agent, 'add_comment', commentArgs);
  check(firstComment.isError && /awaits a person's approval/.test(firstComment.text), `the covered comment did not wait: ${firstComment.text}`);
  const commentHandle = handleOf(firstComment.text);
  check(commentHandle, `no handle in the pending answer: ${firstComment.text}`);
  const updateArgs = { id: issue.id, state: 'closed', close_reason: 'not_planned', expected_version: issue.version };
  const firstUpdate = await call(agent, 'update_issue', updateArgs);
  check(firstUpdate.isError && /awaits a person's approval/.test(firstUpdate.text), `the covered update did not wait: ${firstUpdate.text}`);
  const updateHandle = handleOf(firstUpdate.text);
  checks.pending = { comment: commentHandle, update: updateHandle };

  // A viewer sees the waiting calls but cannot decide.
  const viewer = await signIn(viewerJwt, 'viewer');
  await viewer.page.goto(`/?tenant=${tenant}#/approvals`);
  await viewer.page.locator(`li.approval[data-approval-id="${commentHandle}"]`).waitFor();
  check(await viewer.page.locator('button.approve, button.deny').count() === 0, 'a viewer is shown decision buttons');
  const viewerCsrf = await viewer.page.evaluate(async () => (await (await fetch('/web/session')).json()).csrf_token);
  const forged = await viewer.page.evaluate(async ({ path, csrf }) => (await fetch(path, {
    method: 'POST', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf }, body: JSON.stringify({ approve: true }),
  })).status, { path: `/v1/tenants/${tenant}/approvals/${commentHandle}/decision`, csrf: viewerCsrf });
  check(forged === 403, `a viewer's decision answered ${forged}`);
  await viewer.context.close();

  // The approver approves the comment and denies the update.
  const approver = await signIn(approverJwt, 'approver');
  const page = approver.page;
  await page.goto(`/?tenant=${tenant}#/approvals`);
  const commentCard = page.locator(`li.approval[data-approval-id="${commentHandle}"]`);
  await commentCard.waitFor();
  const shown = await commentCard.locator('.approval-arguments').textContent();
  check(shown.includes(`Approved comment ${tag}`), `the card does not show the arguments: ${shown}`);
  await commentCard.locator('button.approve').click();
  await page.locator(`#approvals-done tr[data-approval-id="${commentHandle}"][data-status="approved"]`).waitFor();
  const updateCard = page.locator(`li.approval[data-approval-id="${updateHandle}"]`);
  // A call that comes to wait while the approver types the reason: the live
  // refresh shows its card without taking the focus or the typed text from
  // the reason input.
  const reasonInput = updateCard.locator('input.approval-reason');
  await reasonInput.click();
  await page.keyboard.type('not closing ');
  const later = await call(agent, 'add_comment', { issue_id: issue.id, body: `Later comment ${tag}` });
  const laterHandle = handleOf(later.text);
  check(later.isError && laterHandle, `the later comment did not wait: ${later.text}`);
  await page.locator(`li.approval[data-approval-id="${laterHandle}"]`).waitFor();
  check(await reasonInput.evaluate((input) => input === document.activeElement), 'the live refresh took the focus from the reason being typed');
  await page.keyboard.type(`this one ${tag}`);
  await updateCard.locator('button.deny').click();
  await page.locator(`#approvals-done tr[data-approval-id="${updateHandle}"][data-status="denied"]`).waitFor();
  checks.decided = true;

  // The agent's same calls again: the approved one runs, once; the denied one gets the reason.
  const secondComment = await call(agent, 'add_comment', commentArgs);
  check(!secondComment.isError, `the approved comment did not run: ${secondComment.text}`);
  const secondUpdate = await call(agent, 'update_issue', updateArgs);
  check(secondUpdate.isError && secondUpdate.text.includes(`not closing this one ${tag}`), `the denial does not carry the reason: ${secondUpdate.text}`);
  const replay = await call(agent, 'add_comment', commentArgs);
  check(replay.isError && /awaits a person's approval/.test(replay.text) && handleOf(replay.text) !== commentHandle,
    `a replay of the approved call was not refused: ${replay.text}`);
  const after = await call(agent, 'get_issue', { id: issue.id });
  const bodies = after.structured.comments.map((c) => c.body);
  check(bodies.filter((b) => b === `Approved comment ${tag}`).length === 1, `the approved comment ran ${bodies.length} times`);
  check(after.structured.state !== 'closed', 'the denied update ran');
  checks.results = { comment_ran: true, denied_reason: true, replay_refused: true };
  await approver.context.close();
  await agent.close().catch(() => {});
  return {};
}

try {
  finish(true, await scenario());
} catch (err) {
  finish(false, { error: err instanceof Failure ? err.message : `unexpected error: ${err?.stack ?? err}` });
}
