#!/usr/bin/env node
// Drives the web board in a real headless Chromium (playwright-core with the
// system /usr/bin/chromium) while a real MCP client (@modelcontextprotocol/sdk)
// writes to the board as an agent would.
//
// Scenarios: one-time sign-in link (and its refusal on second use); the
// empty state; an issue created through MCP appears without a reload; moving
// it persists; a stale edit is shown as a conflict and overwrites nothing; a
// hostile title renders as text; relations are links with the related
// issue's title; a viewer sees no revoke control and the API refuses its
// forged revoke; a missing CSRF token is refused; a cross-tenant URL shows
// nothing of the other tenant; a long column shows its true total and pages
// on its own; at 1400x900 no card title is taller than three lines; on a
// phone (390x844) the page scrolls once and the filters are folded; revoking
// the run from the page makes its token refused on the MCP endpoint.
//
// Usage (secrets through the environment, never the command line):
//   WEB_TEST_RUN_TOKEN=cbr_... WEB_TEST_OTHER_TOKEN=cbr_... \
//   WEB_TEST_VIEWER_JWT=... WEB_TEST_TENANT_ADMIN_JWT=... \
//   node web/board.spec.mjs --url http://127.0.0.1:4891 --signin 'http://.../signin?code=...' \
//     --mcp-url http://127.0.0.1:4891/mcp --run web-agent --artifacts ../../target/web-artifacts
// Output: one JSON line on stdout ({"ok":true,"checks":{...}} or
// {"ok":false,"error":"...","checks":{...}}); progress on stderr.
// Exit status: 0 success, 1 failure, 2 bad usage.

import { parseArgs } from 'node:util';
import { existsSync, mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { randomUUID } from 'node:crypto';
import { chromium } from 'playwright-core';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

const CHROMIUM = '/usr/bin/chromium';
const XSS_TITLE = '<img src=x onerror=alert(1)>';
// Markdown is rendered; raw HTML in it is shown as text; a javascript:
// link loses its target.
const XSS_BODY = '<script>alert(2)</script>\n\n**bold** <img src=x onerror=alert(3)> [click](javascript:alert(4))';
// More than three pages of one column (the page asks for 25 cards a column).
const MANY_CARDS = 80;
const COLUMN_PAGE = 25;
// The longest title an issue may have: at 1400 px it must still take at most three lines.
const LONG_TITLE = `A very long title that would wrap to many lines in a narrow column: ${'words and more words '.repeat(7)}`.slice(0, 200);

class Failure extends Error {}
const fail = (message) => {
  throw new Failure(message);
};
const check = (condition, message) => {
  if (!condition) fail(message);
};
const log = (message) => process.stderr.write(`web: ${message}\n`);

function usage(message) {
  process.stderr.write(`board.spec.mjs: ${message}\n`);
  process.exit(2);
}

let values;
try {
  ({ values } = parseArgs({
    options: {
      url: { type: 'string' },
      signin: { type: 'string' },
      'mcp-url': { type: 'string' },
      run: { type: 'string', default: 'web-agent' },
      tenant: { type: 'string', default: 'acme' },
      'other-tenant': { type: 'string', default: 'globex' },
      artifacts: { type: 'string', default: '../../target/web-artifacts' },
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
const env = (name) => process.env[name] ?? usage(`missing ${name} in the environment`);
const runToken = env('WEB_TEST_RUN_TOKEN');
const otherToken = env('WEB_TEST_OTHER_TOKEN');
const viewerJwt = env('WEB_TEST_VIEWER_JWT');
const tenantAdminJwt = env('WEB_TEST_TENANT_ADMIN_JWT');
const { run, tenant, artifacts } = values;
const otherTenant = values['other-tenant'];
const timeoutMs = Number(values['timeout-ms']);

const checks = {};
const screenshots = [];
const dialogs = [];
let browser;

const deadline = setTimeout(() => finish(false, { error: `no result within ${timeoutMs} ms` }), timeoutMs);

function finish(ok, body) {
  clearTimeout(deadline);
  if (!ok) log(`FAILED: ${body.error}`);
  process.stdout.write(JSON.stringify({ ok, ...body, checks, screenshots }) + '\n');
  process.exitCode = ok ? 0 : 1;
  const exit = () => process.exit(ok ? 0 : 1);
  if (browser) browser.close().then(exit, exit);
  else exit();
  setTimeout(exit, 5000).unref();
}

// ------------------------------------------------------------------ MCP

/** A fetch that records the HTTP statuses the MCP client saw. */
function recordingFetch() {
  const statuses = [];
  return {
    statuses,
    fetch: async (input, init) => {
      const response = await fetch(input, init);
      statuses.push(response.status);
      return response;
    },
  };
}

async function mcpClient(token, name) {
  const recorder = recordingFetch();
  const transport = new StreamableHTTPClientTransport(new URL(mcpUrl), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
    fetch: recorder.fetch,
  });
  const client = new Client({ name: `corkboard-web-test-${name}`, version: '1.0.0' }, { capabilities: {} });
  await client.connect(transport);
  return { client, recorder };
}

async function tool(agent, name, args) {
  const result = await agent.client.callTool({ name, arguments: args });
  const text = (result.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');
  check(!result.isError, `${name} failed: ${text}`);
  check(result.structuredContent, `${name} returned no structuredContent`);
  return result.structuredContent;
}

// ------------------------------------------------------------------ browser helpers

async function shot(page, name) {
  const path = join(artifacts, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  screenshots.push(path);
}

const openPages = [];

function watch(page, label) {
  openPages.push({ page, label });
  page.on('console', (msg) => {
    if (msg.type() === 'error') log(`${label}: console: ${msg.text()}`);
  });
  page.on('dialog', async (dialog) => {
    dialogs.push({ page: label, type: dialog.type(), message: dialog.message() });
    if (dialog.type() === 'confirm') await dialog.accept();
    else await dialog.dismiss();
  });
  page.on('pageerror', (err) => log(`${label}: page error: ${err.message}`));
}

async function newContext() {
  const context = await browser.newContext({ baseURL: base, viewport: { width: 1440, height: 900 } });
  context.setDefaultTimeout(20000);
  return context;
}

/** The page's own CSRF token (what the page's scripts send). */
async function csrfOf(page) {
  return page.evaluate(async () => (await (await fetch('/web/session')).json()).csrf_token);
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

const cardSelector = (id) => `li.card[data-issue-id="${id}"]`;
const inColumn = (state, id) => `section.column[data-state="${state}"] ${cardSelector(id)}`;

// ------------------------------------------------------------------ scenario

async function scenario() {
  check(existsSync(CHROMIUM), `${CHROMIUM} is missing: install Debian chromium (scripts/setup-test-deps does)`);
  mkdirSync(resolve(artifacts), { recursive: true });
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--no-first-run', '--disable-sync'],
  });
  const tag = randomUUID().slice(0, 8);

  // --- Sign-in with the one-time link.
  const admin = await newContext();
  const page = await admin.newPage();
  watch(page, 'admin');
  const first = await page.goto('/');
  const csp = first.headers()['content-security-policy'] ?? '';
  check(csp.includes("script-src 'self'") && csp.includes("default-src 'none'") && csp.includes("frame-ancestors 'none'"), `weak or missing CSP on /: ${csp}`);
  check(first.headers()['x-content-type-options'] === 'nosniff', 'missing X-Content-Type-Options: nosniff');
  await page.locator('#signin').waitFor();
  await shot(page, 'signin');
  const signedIn = await page.goto(signinLink);
  check(signedIn.ok(), `the sign-in link answered ${signedIn.status()}`);
  check(new URL(page.url()).pathname === '/', `the sign-in link did not lead to the board: ${page.url()}`);
  await page.locator('#whoami').filter({ hasText: 'platform-admin' }).waitFor();
  const cookie = (await admin.cookies()).find((c) => c.name === 'corkboard_session');
  check(cookie, 'no session cookie after the sign-in link');
  check(cookie.httpOnly && cookie.sameSite === 'Strict' && cookie.path === '/', `weak session cookie: ${JSON.stringify({ ...cookie, value: '<redacted>' })}`);
  check(!(await page.evaluate(() => document.cookie)).includes('corkboard_session'), 'the session cookie is readable from scripts');
  checks.signin = { cookie: { httpOnly: cookie.httpOnly, sameSite: cookie.sameSite, secure: cookie.secure } };
  log('signed in with the one-time link');

  const stranger = await newContext();
  const again = await (await stranger.newPage()).goto(signinLink);
  check(again.status() === 410, `a second use of the sign-in link answered ${again.status()}, expected 410`);
  const strangerCookies = await stranger.cookies();
  check(!strangerCookies.some((c) => c.name === 'corkboard_session'), 'a used sign-in link still set a session cookie');
  check((await again.text()).includes('already been used'), 'the second use does not say the link was already used');
  await stranger.close();
  checks.signin_link_single_use = true;

  // --- The empty board tells a new user how to connect an agent.
  await page.goto(`/?tenant=${tenant}#/board`);
  await page.locator('#empty-state').waitFor();
  const grantCmd = await page.locator('#grant-command').textContent();
  check(grantCmd.includes(`--tenant ${tenant}`), `the empty state's grant command does not name the tenant: ${grantCmd}`);
  const mcpConfig = JSON.parse(await page.locator('#mcp-config').textContent());
  const server = mcpConfig.mcpServers?.corkboard;
  check(server?.type === 'http' && server.url === mcpUrl && server.headers?.Authorization?.startsWith('Bearer ') && server.alwaysLoad === true,
    `the empty state's MCP configuration is not usable: ${JSON.stringify(mcpConfig)}`);
  await shot(page, 'empty-state');
  checks.empty_state = true;

  // --- An issue created through MCP appears on the open board, without a reload.
  await page.locator('#live-status[data-state="open"]').waitFor();
  await page.evaluate(() => {
    window.__corkboardNoReload = 'still the same page';
  });
  const agent = await mcpClient(runToken, 'agent');
  const startedAt = Date.now();
  const created = await tool(agent, 'create_issue', {
    title: `Live from MCP ${tag}`,
    body: 'Created by the web board test through a real MCP client.',
    labels: ['web'],
    priority: 'high',
  });
  await page.locator(inColumn('inbox', created.id)).waitFor();
  const appearMs = Date.now() - startedAt;
  check(await page.evaluate(() => window.__corkboardNoReload === 'still the same page'), 'the page reloaded to show the new issue');
  const cardTitle = await page.locator(`${cardSelector(created.id)} .card-title`).textContent();
  check(cardTitle === `Live from MCP ${tag}`, `card title ${JSON.stringify(cardTitle)}`);
  checks.live_create = { appeared_after_ms: appearMs };
  log(`an MCP-created issue appeared after ${appearMs} ms`);

  // --- Moving it from the page persists.
  await page.locator(`#move-${created.id}`).selectOption('in_progress');
  await page.locator(inColumn('in_progress', created.id)).waitFor();
  const stored = await tool(agent, 'get_issue', { id: created.id });
  check(stored.state === 'in_progress' && stored.version === 2, `after the move the store has ${stored.state} v${stored.version}`);
  await page.reload();
  await page.locator(inColumn('in_progress', created.id)).waitFor();
  checks.move_persists = { version: stored.version };

  // --- An agent's update shows live too.
  await page.locator('#live-status[data-state="open"]').waitFor();
  const updateStarted = Date.now();
  await tool(agent, 'update_issue', { id: created.id, state: 'blocked', expected_version: stored.version });
  await page.locator(inColumn('blocked', created.id)).waitFor();
  checks.live_update = { appeared_after_ms: Date.now() - updateStarted };
  await tool(agent, 'add_comment', { issue_id: created.id, body: 'A comment from the agent.\n<b>not bold</b>' });
  await shot(page, 'board');

  // --- A stale edit is a conflict, not an overwrite.
  await page.goto(`/?tenant=${tenant}#/issue/${created.id}`);
  await page.locator('#issue-title').waitFor();
  // Provenance: a run with board tools only wrote it, at level agent.
  await page.locator('.issue-meta dd > [data-integrity="agent"]').waitFor();
  await page.locator('#comments li').first().waitFor();
  await page.locator('#history tbody tr').first().waitFor();
  await shot(page, 'issue');
  const before = await tool(agent, 'get_issue', { id: created.id });
  await page.locator('#edit-labels').fill('web, triaged');
  await tool(agent, 'update_issue', { id: created.id, priority: 'urgent', expected_version: before.version });
  await page.locator('#changed-elsewhere').waitFor();
  await page.locator('#edit-save').click();
  const conflict = page.locator('#conflict');
  await conflict.waitFor();
  const conflictText = await conflict.textContent();
  check(conflictText.includes('changed since you loaded it') && conflictText.includes(`version ${before.version + 1}`),
    `conflict notice: ${conflictText}`);
  const after = await tool(agent, 'get_issue', { id: created.id });
  check(JSON.stringify(after.labels) === '["web"]' && after.priority === 'urgent', `the stale edit overwrote the issue: ${JSON.stringify(after)}`);
  await shot(page, 'conflict');
  await conflict.locator('button').click();
  await page.locator(`#issue[data-version="${after.version}"]`).waitFor();
  await page.locator('#edit-labels').fill('web, triaged');
  await page.locator('#edit-save').click();
  await page.locator(`#issue[data-version="${after.version + 1}"]`).waitFor();
  const saved = await tool(agent, 'get_issue', { id: created.id });
  check(JSON.stringify(saved.labels) === '["triaged","web"]', `labels after a fresh save: ${JSON.stringify(saved.labels)}`);
  checks.conflict = { stale_version: before.version, current_version: after.version };

  // --- A hostile title and body render as text.
  await page.goto(`/?tenant=${tenant}#/board`);
  await page.locator('#live-status[data-state="open"]').waitFor();
  const hostile = await tool(agent, 'create_issue', { title: XSS_TITLE, body: XSS_BODY });
  await page.locator(cardSelector(hostile.id)).waitFor();
  const hostileText = await page.locator(`${cardSelector(hostile.id)} .card-title`).textContent();
  check(hostileText === XSS_TITLE, `the hostile title rendered as ${JSON.stringify(hostileText)}`);
  check(await page.locator('#main img').count() === 0, 'the hostile title created an <img>');
  await page.goto(`/?tenant=${tenant}#/issue/${hostile.id}`);
  check(await page.locator('#issue-title').textContent() === XSS_TITLE, 'the issue view did not show the hostile title as text');
  const bodyText = await page.locator('#issue-body').textContent();
  check(bodyText.includes('<script>alert(2)</script>') && bodyText.includes('<img src=x onerror=alert(3)>'),
    `raw HTML in the body was not shown as text: ${JSON.stringify(bodyText)}`);
  check(await page.locator('#issue-body strong').textContent() === 'bold', 'the body\'s Markdown was not rendered');
  check(await page.locator('#issue-body a').count() === 1, 'the Markdown link is missing');
  check(await page.locator('#issue-body a[href]').count() === 0, 'a javascript: link kept its target');
  check(await page.locator('#main img, #main script, #main b').count() === 0, 'user text became markup');
  await page.waitForTimeout(300);
  check(!dialogs.some((d) => d.type === 'alert'), `a script ran: ${JSON.stringify(dialogs)}`);
  checks.xss = true;

  // --- Search finds a word that only a comment holds, ranked first, with its snippet.
  const word = `zephyrine${tag.replace(/[^a-z0-9]/gi, '').toLowerCase()}`;
  const decoy = await tool(agent, 'create_issue', { title: `Decoy ${tag}`, body: 'nothing to see here' });
  const needle = await tool(agent, 'create_issue', { title: `Needle ${tag}`, body: 'an ordinary body' });
  await tool(agent, 'add_comment', { issue_id: needle.id, body: `the cause is the ${word} cache` });
  await page.goto(`/?tenant=${tenant}#/board`);
  await page.locator('#filter-q').fill(word);
  await page.locator('#filters button[type="submit"]').click();
  await page.locator('#search-results li.hit').first().waitFor();
  const hits = await page.locator('#search-results li.hit').evaluateAll((items) => items.map((li) => ({
    id: li.dataset.issueId, field: li.dataset.field, mark: li.querySelector('mark')?.textContent ?? null,
  })));
  check(hits.length >= 1 && hits[0].id === needle.id, `search for a comment-only word: ${JSON.stringify(hits)}`);
  check(hits[0].field === 'comment' && hits[0].mark?.toLowerCase() === word, `the hit's snippet does not mark the word: ${JSON.stringify(hits[0])}`);
  check(!hits.some((h) => h.id === decoy.id), 'search returned an issue without the word');
  await shot(page, 'search');
  checks.search = { hits: hits.length, field: hits[0].field };

  // --- Claims, relations and close reasons as the agents set them.
  const parent = await tool(agent, 'create_issue', { title: `Parent ${tag}` });
  const blocker = await tool(agent, 'create_issue', { title: `Blocker ${tag}`, state: 'in_progress' });
  const child = await tool(agent, 'create_issue', { title: `Child ${tag}`, parent: parent.id, blocked_by: [blocker.id] });
  await tool(agent, 'claim_issue', { id: child.id });
  await page.goto(`/?tenant=${tenant}#/board`);
  await page.locator(`${cardSelector(child.id)} .claim[data-claimed-by="${run}"]`).waitFor();
  // Relations are links that show the related issue's title and open it.
  await page.goto(`/?tenant=${tenant}#/issue/${parent.id}`);
  const childLink = page.locator(`#issue-children a[href="#/issue/${encodeURIComponent(child.id)}"]`);
  await childLink.waitFor();
  check(await childLink.textContent() === `Child ${tag}`, `the sub-issue link shows ${JSON.stringify(await childLink.textContent())}, not the child's title`);
  await childLink.click();
  await page.locator('#issue-title').filter({ hasText: `Child ${tag}` }).waitFor();
  check(new URL(page.url()).hash === `#/issue/${child.id}`, `the sub-issue link led to ${page.url()}`);
  check((await page.locator('#issue-claim').textContent()).includes(run), 'the issue view does not show the claim');
  const blockerLink = page.locator(`#issue-blocked-by a[href="#/issue/${encodeURIComponent(blocker.id)}"]`);
  check(await blockerLink.textContent() === `Blocker ${tag}`, `the blocked-by link shows ${JSON.stringify(await blockerLink.textContent())}`);
  check((await page.locator('#issue-blocked-by').textContent()).includes('In progress'), 'the blocked-by link does not show the blocker\'s state');
  await shot(page, 'relations-links');
  const parentLink = page.locator(`#issue-parent a[href="#/issue/${encodeURIComponent(parent.id)}"]`);
  check(await parentLink.textContent() === `Parent ${tag}`, `the parent link shows ${JSON.stringify(await parentLink.textContent())}`);
  await parentLink.click();
  await page.locator('#issue-title').filter({ hasText: `Parent ${tag}` }).waitFor();
  await page.goto(`/?tenant=${tenant}#/issue/${blocker.id}`);
  const blocksLink = page.locator(`#issue-blocks a[href="#/issue/${encodeURIComponent(child.id)}"]`);
  check(await blocksLink.textContent() === `Child ${tag}`, `the blocks link shows ${JSON.stringify(await blocksLink.textContent())}`);
  await blocksLink.click();
  await page.locator('#issue-title').filter({ hasText: `Child ${tag}` }).waitFor();
  checks.relations = { parent: true, children: true, blocked_by: true, blocks: true };
  // Unclaimed-only hides the claimed card.
  await page.goto(`/?tenant=${tenant}#/board?unclaimed=true`);
  await page.locator(cardSelector(parent.id)).waitFor();
  check(await page.locator(cardSelector(child.id)).count() === 0, 'the unclaimed filter shows a claimed issue');
  // Closing from the page with a reason ends the claim.
  await page.goto(`/?tenant=${tenant}#/issue/${child.id}`);
  await page.locator('#edit-state').selectOption('closed');
  await page.locator('#edit-close-reason').selectOption('not_planned');
  await page.locator('#edit-save').click();
  await page.locator('#issue-close-reason').filter({ hasText: 'Not planned' }).waitFor();
  const closedChild = await tool(agent, 'get_issue', { id: child.id });
  check(closedChild.state === 'closed' && closedChild.close_reason === 'not_planned', `closed from the page: ${closedChild.state}/${closedChild.close_reason}`);
  check(!closedChild.claim, 'closing did not end the claim');
  await shot(page, 'relations');
  checks.work = { claimed: true, close_reason: closedChild.close_reason };

  // --- The other tenant's issue, and the platform admin's view of it (the control).
  const other = await mcpClient(otherToken, 'other');
  const secret = await tool(other, 'create_issue', { title: `Globex secret ${tag}` });
  await page.goto(`/?tenant=${otherTenant}#/issue/${secret.id}`);
  await page.locator('#issue-title').filter({ hasText: `Globex secret ${tag}` }).waitFor();
  await page.goto(`/?tenant=${tenant}#/grants`);
  await page.locator(`section.run[data-run="${run}"] button.revoke-run`).waitFor();
  await shot(page, 'grants');

  // --- CSRF: the session cookie alone cannot change anything.
  const noToken = await pageFetch(page, 'POST', `/v1/tenants/${tenant}/runs/csrf-probe/revoke`);
  check(noToken.status === 403 && /CSRF/.test(noToken.body?.error?.message ?? ''), `a revoke without X-CSRF-Token answered ${noToken.status}: ${JSON.stringify(noToken.body)}`);
  const wrongToken = await pageFetch(page, 'POST', `/v1/tenants/${tenant}/runs/csrf-probe/revoke`, { csrf: 'forged' });
  check(wrongToken.status === 403, `a revoke with a wrong X-CSRF-Token answered ${wrongToken.status}`);
  checks.csrf = true;

  // --- A viewer: signs in with an admin JWT, sees grants but no revoke control.
  const viewerContext = await newContext();
  const viewer = await viewerContext.newPage();
  watch(viewer, 'viewer');
  await viewer.goto('/');
  await viewer.locator('#signin-token').fill(viewerJwt);
  await viewer.locator('#signin-form button[type="submit"]').click();
  await viewer.locator('#whoami').filter({ hasText: 'viewer' }).waitFor();
  await viewer.goto(`/?tenant=${tenant}#/grants`);
  await viewer.locator(`section.run[data-run="${run}"]`).waitFor();
  check(await viewer.locator('button.revoke-run, button.revoke-grant').count() === 0, 'a viewer is shown revoke controls');
  await viewer.locator('#read-only').waitFor();
  await shot(viewer, 'grants-viewer');
  await viewer.goto(`/?tenant=${tenant}#/board`);
  await viewer.locator(cardSelector(created.id)).waitFor();
  check(await viewer.locator(`#move-${created.id}`).count() === 0, 'a viewer is shown a state control');
  const viewerCsrf = await csrfOf(viewer);
  const forged = await pageFetch(viewer, 'POST', `/v1/tenants/${tenant}/runs/${run}/revoke`, { csrf: viewerCsrf });
  check(forged.status === 403, `the API accepted a viewer's revoke: ${forged.status} ${JSON.stringify(forged.body)}`);
  const grants = await pageFetch(viewer, 'GET', `/v1/tenants/${tenant}/grants?run=${run}`);
  check(grants.status === 200 && grants.body.grants.some((g) => g.status === 'active'), 'the viewer revoke changed something');
  const forgedGrant = await pageFetch(viewer, 'DELETE', `/v1/tenants/${tenant}/grants/${grants.body.grants[0].id}`, { csrf: viewerCsrf });
  check(forgedGrant.status === 403, `the API accepted a viewer's grant revoke: ${forgedGrant.status}`);
  const forgedMove = await pageFetch(viewer, 'PATCH', `/v1/tenants/${tenant}/issues/${created.id}`, {
    csrf: viewerCsrf,
    body: { expected_version: saved.version, state: 'done' },
  });
  check(forgedMove.status === 403, `the API accepted a viewer's edit: ${forgedMove.status}`);
  checks.viewer = { forged_revoke_status: forged.status, forged_grant_revoke_status: forgedGrant.status };
  await viewerContext.close();

  // --- A tenant admin of acme: a globex URL shows nothing of globex.
  const scopedContext = await newContext();
  const exchange = await scopedContext.request.post('/web/session', { data: { token: tenantAdminJwt } });
  check(exchange.ok(), `exchanging the tenant-admin JWT answered ${exchange.status()}`);
  const scoped = await scopedContext.newPage();
  watch(scoped, 'tenant-admin');
  const probes = [`/?tenant=${otherTenant}#/board`, `/?tenant=${otherTenant}#/issue/${secret.id}`, `/?tenant=${otherTenant}#/grants`];
  for (const url of probes) {
    await scoped.goto(url);
    await scoped.locator('#denied').waitFor();
    const text = await scoped.locator('body').textContent();
    check(!text.includes(`Globex secret ${tag}`) && !text.includes('globex-agent') && !text.includes(secret.id.slice(4)),
      `${url} showed something of ${otherTenant}`);
  }
  await shot(scoped, 'cross-tenant');
  for (const path of [`/v1/tenants/${otherTenant}/issues/${secret.id}`, `/v1/tenants/${otherTenant}/issues`, `/v1/tenants/${otherTenant}/grants`, `/v1/tenants/${otherTenant}/events`]) {
    const resp = await pageFetch(scoped, 'GET', path);
    check(resp.status === 403, `${path} answered ${resp.status} to a tenant admin of ${tenant}`);
    check(!JSON.stringify(resp.body ?? {}).includes('Globex secret'), `${path} leaked the other tenant's issue`);
  }
  await scoped.goto(`/?tenant=${tenant}#/board`);
  await scoped.locator(cardSelector(created.id)).waitFor();
  checks.cross_tenant = { probes: probes.length };
  await scopedContext.close();

  // --- Keyboard.
  await page.setViewportSize({ width: 1440, height: 900 });
  await page.goto(`/?tenant=${tenant}#/board`);
  await page.locator(cardSelector(created.id)).waitFor();
  let reached = false;
  for (let i = 0; i < 40 && !reached; i += 1) {
    await page.keyboard.press('Tab');
    reached = await page.evaluate((id) => document.activeElement?.id === `move-${id}`, created.id);
  }
  check(reached, 'the state control of a card cannot be reached with the keyboard');
  // Two steps down (blocked -> done -> closed): two changes in a row, each
  // of which must build on the version the previous one produced.
  await page.keyboard.press('ArrowDown');
  await page.keyboard.press('ArrowDown');
  await page.locator(inColumn('closed', created.id)).waitFor();
  await page.waitForTimeout(300);
  check(await page.locator('#conflict').count() === 0, 'stepping through states with the keyboard raised a conflict');
  const closed = await tool(agent, 'get_issue', { id: created.id });
  check(closed.state === 'closed', `after the keyboard moves the store has ${closed.state}`);
  checks.usable = { keyboard_move: true };

  // --- A column with many cards scrolls inside itself; the page does not stretch.
  const many = [];
  for (let i = 0; i < MANY_CARDS; i += 1) {
    many.push(await tool(agent, 'create_issue', { title: `Queued work ${i} ${tag}`, state: 'todo' }));
  }
  const long = await tool(agent, 'create_issue', { title: LONG_TITLE, labels: ['layout'], priority: 'urgent' });
  await page.setViewportSize({ width: 1400, height: 900 });
  await page.goto(`/?tenant=${tenant}#/board`);
  await page.locator(inColumn('todo', many[MANY_CARDS - 1].id)).waitFor();
  await page.locator(inColumn('inbox', long.id)).waitFor();
  const layout = await page.evaluate(() => {
    const cards = document.querySelector('section.column[data-state="todo"] .cards');
    return {
      page: document.documentElement.scrollHeight,
      viewport: innerHeight,
      column_scroll: cards.scrollHeight,
      column_client: cards.clientHeight,
    };
  });
  check(layout.column_scroll > layout.column_client, `the to-do column does not scroll: ${JSON.stringify(layout)}`);
  check(layout.page < layout.viewport * 1.5, `${MANY_CARDS} cards stretched the page: ${JSON.stringify(layout)}`);
  await shot(page, 'long-column');
  checks.long_column = layout;

  // --- At 1400x900: readable columns that scroll sideways, no title taller than three lines.
  const wide = await page.evaluate(() => {
    const columns = document.querySelector('#columns');
    const titles = [...document.querySelectorAll('li.card .card-title')].map((a) => {
      const height = a.getBoundingClientRect().height;
      const lineHeight = parseFloat(getComputedStyle(a).lineHeight);
      return { id: a.closest('li.card').dataset.issueId, lines: Math.round(height / lineHeight), full: a.title === a.textContent };
    });
    const clipped = [...document.querySelectorAll('li.card .move select')].filter((s) => {
      const card = s.closest('li.card').getBoundingClientRect();
      const box = s.getBoundingClientRect();
      return box.right > card.right + 0.5 || box.left < card.left - 0.5;
    }).length;
    return {
      column_widths: [...document.querySelectorAll('section.column')].map((c) => Math.round(c.getBoundingClientRect().width)),
      scrolls_sideways: columns.scrollWidth > columns.clientWidth,
      page_sideways: document.documentElement.scrollWidth - innerWidth,
      titles: titles.length,
      max_lines: Math.max(...titles.map((t) => t.lines)),
      without_full_title: titles.filter((t) => !t.full).map((t) => t.id),
      clipped_selects: clipped,
    };
  });
  check(wide.max_lines <= 3, `a card title is ${wide.max_lines} lines tall at 1400 px: ${JSON.stringify(wide)}`);
  check(wide.titles > COLUMN_PAGE && wide.without_full_title.length === 0, `card titles without their full text as a tooltip: ${JSON.stringify(wide)}`);
  check(Math.min(...wide.column_widths) >= 270, `columns are squeezed at 1400 px: ${JSON.stringify(wide.column_widths)}`);
  check(wide.scrolls_sideways && wide.page_sideways <= 1, `the columns do not scroll sideways on their own: ${JSON.stringify(wide)}`);
  check(wide.clipped_selects === 0, `"Move to" selects clipped at 1400 px: ${JSON.stringify(wide)}`);
  const longLines = await page.locator(`${cardSelector(long.id)} .card-title`).evaluate((a) =>
    Math.round(a.getBoundingClientRect().height / parseFloat(getComputedStyle(a).lineHeight)));
  check(longLines === 3, `the ${LONG_TITLE.length}-character title takes ${longLines} lines, expected it clamped to 3`);
  await page.evaluate(() => { document.querySelector('#columns').scrollLeft = 0; scrollTo(0, 0); });
  await shot(page, 'board-1400');
  await page.locator(`${cardSelector(long.id)} .card-title`).click();
  check(await page.locator('#issue-title').textContent() === LONG_TITLE, 'the issue view does not show the full long title');
  checks.layout_wide = { ...wide, long_title_lines: longLines };

  // --- A column holding more than a page shows its true total and pages on its own.
  await page.goto(`/?tenant=${tenant}#/board`);
  const todo = page.locator('section.column[data-state="todo"]');
  await todo.locator(cardSelector(many[MANY_CARDS - 1].id)).waitFor();
  await page.waitForTimeout(500); // the creations' live events have settled
  const columnState = () => page.evaluate(() => Object.fromEntries([...document.querySelectorAll('section.column')].map((c) => [c.dataset.state, {
    cards: c.querySelectorAll('li.card').length,
    total: c.querySelector('.count').dataset.total,
    count_text: c.querySelector('.count').textContent,
    marked: c.__untouched === true,
  }])));
  const firstPage = await columnState();
  check(firstPage.todo.cards === COLUMN_PAGE && firstPage.todo.total === String(MANY_CARDS) && firstPage.todo.count_text === `(${MANY_CARDS})`,
    `the to-do column does not show its true total over its first page: ${JSON.stringify(firstPage.todo)}`);
  check(await todo.locator(cardSelector(many[0].id)).count() === 0, 'the oldest card was loaded with the first page');
  // Mark every other column: loading more of one must not re-render them.
  await page.evaluate(() => {
    for (const c of document.querySelectorAll('section.column:not([data-state="todo"])')) c.__untouched = true;
  });
  const boardRequests = [];
  const onRequest = (request) => {
    if (request.url().includes(`/v1/tenants/${tenant}/board`)) boardRequests.push(new URL(request.url()).searchParams);
  };
  page.on('request', onRequest);
  await page.locator('#more-todo').click();
  await page.waitForFunction((n) => document.querySelectorAll('section.column[data-state="todo"] li.card').length === n, COLUMN_PAGE * 2);
  const second = await columnState();
  page.off('request', onRequest);
  check(boardRequests.length === 1 && boardRequests[0].get('state') === 'todo' && boardRequests[0].get('cursor')
    && Number(boardRequests[0].get('limit')) === COLUMN_PAGE,
  `loading more of one column asked for ${JSON.stringify(boardRequests.map((q) => q.toString()))}`);
  for (const [state, column] of Object.entries(second)) {
    if (state === 'todo') continue;
    check(column.marked && column.cards === firstPage[state].cards, `loading more to-do cards touched the ${state} column: ${JSON.stringify(column)}`);
  }
  check(second.todo.total === String(MANY_CARDS), `the total changed with the page: ${JSON.stringify(second.todo)}`);
  // A live write keeps what the person loaded and where they had scrolled
  // (the board sideways, the column within itself), and the total follows.
  const scrolledTo = await page.evaluate(() => {
    const board = document.querySelector('#columns');
    board.scrollLeft = 200;
    const cards = document.querySelector('section.column[data-state="todo"] .cards');
    cards.scrollTop = 400;
    return { left: board.scrollLeft, top: cards.scrollTop };
  });
  const extra = await tool(agent, 'create_issue', { title: `Queued work extra ${tag}`, state: 'todo' });
  await todo.locator(cardSelector(extra.id)).waitFor();
  await page.locator(`section.column[data-state="todo"] .count[data-total="${MANY_CARDS + 1}"]`).waitFor();
  const afterLive = await columnState();
  check(afterLive.todo.cards >= COLUMN_PAGE * 2, `a live update dropped the loaded cards: ${JSON.stringify(afterLive.todo)}`);
  const scrolledAfter = await page.evaluate(() => ({
    left: document.querySelector('#columns').scrollLeft,
    top: document.querySelector('section.column[data-state="todo"] .cards').scrollTop,
  }));
  check(scrolledTo.left > 0 && Math.abs(scrolledAfter.left - scrolledTo.left) <= 1 && Math.abs(scrolledAfter.top - scrolledTo.top) <= 1,
    `a live update moved the board's scroll from ${JSON.stringify(scrolledTo)} to ${JSON.stringify(scrolledAfter)}`);
  // Paging on to the end reaches the oldest card.
  while (await page.locator('#more-todo').count()) {
    await page.locator('#more-todo').click();
    await page.waitForTimeout(200);
  }
  const oldest = todo.locator(cardSelector(many[0].id));
  await oldest.waitFor();
  await oldest.scrollIntoViewIfNeeded();
  check(await oldest.isVisible(), 'the oldest card of a long column cannot be scrolled into view');
  const end = await columnState();
  check(end.todo.cards === MANY_CARDS + 1, `after the last page the to-do column holds ${end.todo.cards} cards`);
  checks.column_paging = { first: firstPage.todo, second: second.todo, end: end.todo, requests: boardRequests.length };

  // --- Phone width (390x844): one scroll, the filters folded, no sideways scroll, labels.
  await page.setViewportSize({ width: 390, height: 844 });
  // Narrowing the window folds the filters; a phone's fresh load starts folded.
  await page.locator('#filters-fold:not([open])').waitFor({ state: 'attached' });
  await page.reload();
  await page.locator(inColumn('todo', many[MANY_CARDS - 1].id)).waitFor();
  const phone = await page.evaluate(() => {
    const scrollers = [...document.querySelectorAll('body *')].filter((e) => {
      const style = getComputedStyle(e);
      return /(auto|scroll)/.test(style.overflowY) && e.scrollHeight > e.clientHeight + 1;
    }).map((e) => e.id || e.className || e.tagName);
    return {
      scrollers,
      page_scrolls: document.documentElement.scrollHeight > innerHeight,
      sideways: document.documentElement.scrollWidth - innerWidth,
      filters_open: document.querySelector('#filters-fold').open,
      filters_visible: document.querySelector('#filters').checkVisibility(),
      toggle_visible: document.querySelector('#filters-toggle').checkVisibility(),
      first_card_top: Math.round(document.querySelector('li.card').getBoundingClientRect().top),
    };
  });
  check(phone.scrollers.length === 0, `elements scrolling on their own at phone width: ${JSON.stringify(phone.scrollers)}`);
  check(phone.page_scrolls, `the phone page does not scroll at all: ${JSON.stringify(phone)}`);
  check(phone.sideways <= 1, `the board scrolls sideways at phone width (${phone.sideways}px)`);
  check(!phone.filters_open && !phone.filters_visible && phone.toggle_visible, `the filters are not folded on a phone: ${JSON.stringify(phone)}`);
  check(phone.first_card_top < 844, `the first card is below the first screen: ${JSON.stringify(phone)}`);
  await shot(page, 'board-phone');
  await page.locator('#filters-toggle').click();
  await page.locator('#filter-q').waitFor();
  const unlabelled = await page.evaluate(() => [...document.querySelectorAll('input, select, textarea, button')]
    .filter((e) => !e.closest('[hidden]'))
    .filter((e) => !(e.labels?.length || e.getAttribute('aria-label') || (e.tagName === 'BUTTON' && e.textContent.trim())))
    .map((e) => e.id || e.outerHTML.slice(0, 80)));
  check(unlabelled.length === 0, `controls without a label: ${unlabelled.join(', ')}`);
  checks.layout_phone = phone;
  await page.setViewportSize({ width: 1440, height: 900 });

  // --- Revoking the run from the page: its token is refused on the MCP endpoint.
  await page.goto(`/?tenant=${tenant}#/grants`);
  await page.locator(`section.run[data-run="${run}"] button.revoke-run`).click();
  await page.locator(`section.run[data-run="${run}"]`).waitFor({ state: 'detached' });
  check(dialogs.some((d) => d.type === 'confirm' && d.message.includes(run)), 'revoking a run did not ask for confirmation');
  const statusesBefore = agent.recorder.statuses.length;
  let refused = null;
  try {
    await agent.client.callTool({ name: 'list_issues', arguments: {} });
  } catch (err) {
    refused = err;
  }
  const seen = agent.recorder.statuses.slice(statusesBefore);
  check(refused && seen.some((s) => s === 401 || s === 403), `the revoked token still works (statuses ${JSON.stringify(seen)})`);
  let reconnect = null;
  try {
    await mcpClient(runToken, 'revoked');
  } catch (err) {
    reconnect = err;
  }
  check(reconnect, 'a new MCP session with the revoked token was accepted');
  await page.locator('#show-all-grants').check();
  await page.locator(`section.run[data-run="${run}"] tr[data-status="revoked"]`).first().waitFor();
  await shot(page, 'grants-revoked');
  checks.revoke_run = { refused_statuses: seen };

  await agent.client.close().catch(() => {});
  await other.client.close().catch(() => {});
  return { dialogs: dialogs.map((d) => d.type) };
}

try {
  const summary = await scenario();
  finish(true, summary);
} catch (err) {
  const message = err instanceof Failure ? err.message : `unexpected error: ${err?.stack ?? err}`;
  // What each page showed when it failed, for whoever reads the artifacts.
  for (const { page, label } of openPages) {
    if (!page.isClosed()) await shot(page, `failure-${label}`).catch(() => {});
  }
  finish(false, { error: message });
}
