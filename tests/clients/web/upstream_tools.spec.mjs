#!/usr/bin/env node
// A tenant admin approves a changed upstream tool on the web board, in a
// real headless Chromium (playwright-core, /usr/bin/chromium).
//
// The Rust test (tests/web.rs) registered a Python SDK upstream whose tool
// changed its description after its first listing was approved, so the
// tool is pending. Here a viewer sees it on #/tools with what changed but
// no approve button, and the API refuses a decision forged from its page;
// a write without the session's CSRF token is refused too; the tenant
// admin sees the card ("Changed: description", the approved definition
// beside the new one), approves it, and it moves to the approved table.
//
// Usage (secrets through the environment):
//   WEB_TEST_TENANT_ADMIN_JWT=... WEB_TEST_VIEWER_JWT=... \
//   node web/upstream_tools.spec.mjs --url http://127.0.0.1:4891 --tenant acme --upstream py --tool forecast
// Output: one JSON line on stdout ({"ok":true,"checks":{...}} or {"ok":false,"error":...}).

import { parseArgs } from 'node:util';
import { chromium } from 'playwright-core';

class Failure extends Error {}
const fail = (message) => {
  throw new Failure(message);
};
const check = (condition, message) => {
  if (!condition) fail(message);
};
const log = (message) => process.stderr.write(`upstream tools: ${message}\n`);

const { values } = parseArgs({
  options: {
    url: { type: 'string' },
    tenant: { type: 'string', default: 'acme' },
    upstream: { type: 'string' },
    tool: { type: 'string' },
    artifacts: { type: 'string' },
  },
  strict: true,
});
const base = values.url.replace(/\/$/, '');
const { tenant, upstream, tool } = values;
const tenantAdminJwt = process.env.WEB_TEST_TENANT_ADMIN_JWT;
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
setTimeout(() => finish(false, { error: 'no result within 120 s' }), 120000).unref();

async function signIn(jwt, role) {
  const context = await browser.newContext({ baseURL: base, viewport: { width: 1280, height: 900 } });
  context.setDefaultTimeout(20000);
  const exchange = await context.request.post('/web/session', { data: { token: jwt } });
  check(exchange.ok(), `exchanging the ${role} JWT answered ${exchange.status()}`);
  const session = await (await context.request.get('/web/session')).json();
  const page = await context.newPage();
  page.on('pageerror', (err) => log(`${role}: page error: ${err.message}`));
  return { context, page, session };
}

const card = (page) => page.locator(`li.pending-tool[data-upstream="${upstream}"][data-tool="${tool}"]`);
const approvePath = `/v1/tenants/${tenant}/upstreams/${upstream}/tools/${tool}/approve`;

async function scenario() {
  browser = await chromium.launch({ executablePath: '/usr/bin/chromium', headless: true, args: ['--no-sandbox', '--disable-gpu'] });

  // A viewer sees the pending tool and what changed, and cannot approve it.
  const viewer = await signIn(viewerJwt, 'viewer');
  await viewer.page.goto(`/?tenant=${tenant}#/tools`);
  await card(viewer.page).waitFor();
  const viewerChanges = await card(viewer.page).locator('.tool-changes').innerText();
  check(viewerChanges.includes('Changed: description'), `the viewer's card says what changed: ${viewerChanges}`);
  check(await card(viewer.page).locator('button.approve').count() === 0, 'a viewer gets no approve button');
  const listed = await (await viewer.context.request.get(`/v1/tenants/${tenant}/upstreams/${upstream}/tools`)).json();
  const { hash } = listed.tools.find((t) => t.tool === tool);
  const forged = await viewer.page.evaluate(async ({ path, hash: h, csrf }) => {
    const r = await fetch(path, { method: 'POST', headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf }, body: JSON.stringify({ hash: h }), credentials: 'same-origin' });
    return r.status;
  }, { path: approvePath, hash, csrf: viewer.session.csrf_token });
  check(forged === 403, `a viewer's forged approval answered ${forged}`);
  checks.viewer = { forged_status: forged, changes: viewerChanges };

  // The tenant admin: a write without the session's CSRF token is refused.
  const admin = await signIn(tenantAdminJwt, 'tenant admin');
  const noCsrf = await admin.context.request.post(approvePath, { data: { hash } });
  check(noCsrf.status() === 403, `an approval without the CSRF token answered ${noCsrf.status()}`);
  checks.csrf = { status: noCsrf.status() };

  // ... and approves on the page, after seeing both definitions.
  await admin.page.goto(`/?tenant=${tenant}#/tools`);
  const pending = card(admin.page);
  await pending.waitFor();
  const newDefinition = await pending.locator('pre.tool-definition').innerText();
  check(newDefinition.includes('id_rsa'), 'the new definition shows the changed description');
  await pending.locator('details.approved-definition summary').click();
  const oldDefinition = await pending.locator('details.approved-definition pre').innerText();
  check(!oldDefinition.includes('id_rsa') && oldDefinition.includes('"description"'), 'the approved definition is shown beside it');
  if (values.artifacts) await admin.page.screenshot({ path: `${values.artifacts}/upstream-tools.png`, fullPage: true });
  await pending.locator('button.approve').click();
  await admin.page.locator(`#tools-approved tr[data-upstream="${upstream}"][data-tool="${tool}"]`).waitFor();
  check(await card(admin.page).count() === 0, 'the approved tool leaves the pending list');
  checks.approved = { hash, subject: admin.session.subject };
  finish(true, {});
}

scenario().catch((err) => finish(false, { error: err instanceof Failure ? err.message : String(err?.stack ?? err) }));
