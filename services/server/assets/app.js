// Corkboard web board: a plain ES module, no dependencies, no build step.
//
// The page is a client of the JSON API under /v1/ and holds no privileges
// of its own: the session cookie authenticates it, and every state-changing
// request repeats the session's CSRF token in X-CSRF-Token.
//
// Every piece of data reaches the DOM as a text node or an attribute value
// (see `el`), never as HTML: that is what keeps a title such as
// `<img src=x onerror=alert(1)>` inert. The Content-Security-Policy forbids
// inline scripts and styles, so there are none.

// The board's vocabulary comes from the server (GET /v1/vocabulary, derived
// from the domain types and the tool table) once at start-up; these stay
// empty until then.
let STATES = [];
let PRIORITIES = [];
let ALL_CAPS = '';
// Display text only; a state without an entry shows its name.
const STATE_LABELS = {
  inbox: 'Inbox', triage: 'Triage', todo: 'To do', in_progress: 'In progress',
  blocked: 'Blocked', done: 'Done', closed: 'Closed',
};
const TENANT_RE = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/;
const RECENT_KEY = 'corkboard.recentTenants';
// Cards per column page (GET …/board pages each column on its own; the
// server's maximum is 100).
const COLUMN_PAGE = 25;
// Wider than this the filters start unfolded; narrower (a phone) they
// fold behind their summary so the cards come first.
const WIDE = '(min-width: 701px)';
// Search hits per request (the API's maximum is 50).
const SEARCH_PAGE = 50;
// The grants API reads one row past the page to find the cursor; 100 keeps
// that within the store's page limit.
const GRANT_PAGE = 100;

const app = {
  session: null,
  tenant: null,
  view: null,          // 'board' | 'issue' | 'grants' | ...
  board: null,         // { columns: Map(state -> column), filters } or search { hits, next }
  issue: null,         // { issue, dirty }
  grants: null,        // { grants, next, showAll }
  events: null,
  eventsOpened: false,
  refetchTimer: null,
  fresh: new Set(),
  moving: new Map(),   // issue id -> state a move is heading to
  retryTimer: null,
};

// ---------------------------------------------------------------- DOM helpers

/** Creates an element; strings among `children` become text nodes. */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key === 'dataset') Object.assign(node.dataset, value);
    else if (key.startsWith('on') && typeof value === 'function') node.addEventListener(key.slice(2), value);
    else if (value === true) node.setAttribute(key, '');
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// Markdown arrives from the server already rendered and sanitised
// (GET …/issues/{id}?render=html; see services/server/src/markdown.rs).
// It is still never assigned as HTML: DOMParser builds an inert document
// (no script runs, nothing loads), and `markdownNode` copies only these
// elements and attributes into the page, through `el`.
const MARKDOWN_TAGS = new Set(['a', 'blockquote', 'br', 'code', 'del', 'em', 'h1', 'h2', 'h3', 'h4', 'h5', 'h6',
  'hr', 'input', 'li', 'ol', 'p', 'pre', 'strong', 'table', 'tbody', 'td', 'th', 'thead', 'tr', 'ul']);
const MARKDOWN_ATTRS = { a: ['href', 'rel'], ol: ['start'], input: ['type', 'checked', 'disabled'], code: ['class'] };
const SAFE_URL = /^(https?:|mailto:)/i;

/** A `div.markdown` holding the copy of sanitised `html`. */
function markdownNode(html, attrs = {}) {
  const doc = new DOMParser().parseFromString(`<body>${html}</body>`, 'text/html');
  const copy = (node) => {
    if (node.nodeType === Node.TEXT_NODE) return document.createTextNode(node.data);
    if (node.nodeType !== Node.ELEMENT_NODE) return null;
    const tag = node.localName;
    const children = [...node.childNodes].map(copy);
    // An element outside the list keeps its text, not its markup.
    if (!MARKDOWN_TAGS.has(tag)) return children;
    const keep = {};
    for (const name of MARKDOWN_ATTRS[tag] ?? []) {
      if (!node.hasAttribute(name)) continue;
      const value = node.getAttribute(name);
      if (name === 'href' && !SAFE_URL.test(value)) continue;
      keep[name] = name === 'checked' || name === 'disabled' ? true : value;
    }
    if (tag === 'input') {
      if (keep.type !== 'checkbox') return null;
      keep.disabled = true;
    }
    return el(tag, keep, children);
  };
  return el('div', { class: 'markdown', ...attrs }, [...doc.body.childNodes].map(copy));
}

const $ = (id) => document.getElementById(id);
const mainEl = () => $('main');

function setMain(...children) {
  const main = mainEl();
  main.replaceChildren(...children);
}

/** Keeps keyboard focus on the same control across a re-render. */
function preservingFocus(render) {
  const key = document.activeElement?.dataset?.focusKey;
  render();
  if (key) {
    const again = document.querySelector(`[data-focus-key="${CSS.escape(key)}"]`);
    if (again) again.focus();
  }
}

function announce(message, kind = 'info') {
  const banner = $('banner');
  banner.classList.toggle('error', kind === 'error');
  banner.replaceChildren(document.createTextNode(message));
  banner.hidden = false;
}

function clearBanner() {
  const banner = $('banner');
  banner.hidden = true;
  banner.replaceChildren();
}

function formatTime(iso) {
  const t = new Date(iso);
  return Number.isNaN(t.getTime()) ? String(iso) : t.toLocaleString();
}

/** "5m ago" / "in 3h" relative to now. */
function relative(iso) {
  const t = new Date(iso).getTime();
  if (Number.isNaN(t)) return String(iso);
  const diff = t - Date.now();
  const abs = Math.abs(diff) / 1000;
  let text;
  if (abs < 45) text = diff <= 0 ? 'just now' : 'in a moment';
  else {
    const [n, unit] = abs < 3600 ? [Math.round(abs / 60), 'm'] : abs < 86400 ? [Math.round(abs / 3600), 'h'] : [Math.round(abs / 86400), 'd'];
    text = diff <= 0 ? `${n}${unit} ago` : `in ${n}${unit}`;
  }
  return text;
}

function timeEl(iso, text = relative(iso)) {
  return el('time', { datetime: iso, title: formatTime(iso) }, text);
}

// ---------------------------------------------------------------- API

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function api(method, path, body) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  if (method !== 'GET' && app.session) headers['X-CSRF-Token'] = app.session.csrf_token;
  let resp;
  try {
    resp = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      credentials: 'same-origin',
      cache: 'no-store',
    });
  } catch {
    throw new ApiError(0, 'network', 'The server cannot be reached. Check that it is running, then try again.');
  }
  if (resp.status === 204) return null;
  let json = null;
  try {
    json = await resp.json();
  } catch {
    json = null;
  }
  if (!resp.ok) {
    const err = json?.error ?? {};
    const error = new ApiError(resp.status, err.code ?? `http_${resp.status}`, err.message ?? `HTTP ${resp.status}`);
    if (resp.status === 401 && app.session) sessionLost();
    throw error;
  }
  return json;
}

const tenantPath = (rest) => `/v1/tenants/${encodeURIComponent(app.tenant)}${rest}`;

function sessionLost() {
  app.session = null;
  disconnectEvents();
  showSignin('Your session has ended. Sign in again.');
}

// ---------------------------------------------------------------- start-up

async function start() {
  $('logout').addEventListener('click', logout);
  // Turning a tablet or resizing the window folds or unfolds the filters
  // as a fresh load at that width would.
  matchMedia(WIDE).addEventListener('change', (e) => {
    const fold = $('filters-fold');
    if (fold) fold.open = e.matches;
  });
  $('tenant-form').addEventListener('submit', (e) => {
    e.preventDefault();
    switchTenant($('tenant-input').value.trim());
  });
  // Both at once: the vocabulary does not depend on who is signed in.
  const vocabulary = api('GET', '/v1/vocabulary');
  vocabulary.catch(() => {}); // handled below; not an unhandled rejection meanwhile
  try {
    app.session = await api('GET', '/web/session');
  } catch (e) {
    if (e.status === 401) return showSignin();
    return showFailure('Cannot load the board', e);
  }
  try {
    useVocabulary(await vocabulary);
  } catch (e) {
    return showFailure('Cannot load the board', e);
  }
  const params = new URLSearchParams(location.search);
  const requested = params.get('tenant');
  const recent = recentTenants();
  app.tenant = requested ?? app.session.tenant ?? recent[0] ?? null;
  renderHeader();
  window.addEventListener('hashchange', route);
  route();
}

function useVocabulary(v) {
  STATES = v.states;
  PRIORITIES = v.priorities;
  ALL_CAPS = v.capabilities.join(',');
}

function stateLabel(s) {
  return STATE_LABELS[s] ?? s;
}

function renderHeader() {
  const s = app.session;
  $('whoami').textContent = `${s.subject} · ${s.role}`;
  $('who').hidden = false;
  $('main-nav').hidden = !app.tenant;
  if (s.all_tenants) {
    $('tenant-form').hidden = false;
    $('tenant-input').value = app.tenant ?? '';
    fillTenantList();
  } else {
    $('tenant-fixed').hidden = false;
    $('tenant-fixed').textContent = `Tenant: ${s.tenant}`;
  }
}

async function fillTenantList() {
  const list = $('tenant-list');
  const known = new Set(recentTenants());
  try {
    const body = await api('GET', '/web/tenants');
    for (const t of body.tenants) known.add(t);
  } catch {
    // The switcher still takes any typed tenant.
  }
  list.replaceChildren(...[...known].sort().map((t) => el('option', { value: t })));
  app.knownTenants = [...known].sort();
}

function recentTenants() {
  try {
    const list = JSON.parse(localStorage.getItem(RECENT_KEY) ?? '[]');
    return Array.isArray(list) ? list.filter((t) => typeof t === 'string' && TENANT_RE.test(t)) : [];
  } catch {
    return [];
  }
}

function rememberTenant(tenant) {
  try {
    const list = [tenant, ...recentTenants().filter((t) => t !== tenant)].slice(0, 8);
    localStorage.setItem(RECENT_KEY, JSON.stringify(list));
  } catch {
    // Storage may be disabled; the switcher works without it.
  }
}

function switchTenant(tenant) {
  if (!TENANT_RE.test(tenant)) {
    announce('A tenant is 1 to 63 lowercase letters, digits and dashes.', 'error');
    $('tenant-input').focus();
    return;
  }
  location.assign(`/?tenant=${encodeURIComponent(tenant)}#/board`);
}

async function logout() {
  try {
    await api('POST', '/web/logout');
  } catch {
    // Signing out must not get stuck: the page forgets the session anyway.
  }
  app.session = null;
  location.assign('/');
}

// ---------------------------------------------------------------- routing

function parseHash() {
  const raw = location.hash.replace(/^#/, '') || '/board';
  const [path, query = ''] = raw.split('?');
  return { parts: path.split('/').filter(Boolean), params: new URLSearchParams(query) };
}

function setNav(view) {
  for (const [id, name] of [['nav-board', 'board'], ['nav-grants', 'grants'], ['nav-approvals', 'approvals'], ['nav-tools', 'tools']]) {
    const link = $(id);
    if (view === name) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
    link.href = `#/${name}`;
  }
}

async function route() {
  clearBanner();
  if (!app.session) return;
  if (!app.tenant) return showTenantPicker();
  if (!TENANT_RE.test(app.tenant)) return showDenied(`“${app.tenant}” is not a tenant name.`);
  if (!app.session.all_tenants && app.session.tenant !== app.tenant) {
    // The API would refuse too; say so without asking it.
    return showDenied();
  }
  const { parts, params } = parseHash();
  const [view, arg] = parts;
  if (view === 'issue' && arg) await showIssue(arg, { focus: true });
  else if (view === 'run' && arg) await showRun(decodeURIComponent(arg));
  else if (view === 'grants') await showGrants({ focus: true });
  else if (view === 'approvals') await showApprovals({ focus: true });
  else if (view === 'tools') await showUpstreamTools({ focus: true });
  else await showBoard(params, { focus: true });
}

function focusMain() {
  mainEl().focus({ preventScroll: false });
}

function showDenied(reason) {
  app.view = 'denied';
  disconnectEvents();
  setNav(null);
  document.title = 'No access · Corkboard';
  const s = app.session;
  const own = s.tenant ? el('p', {}, el('a', { href: `/?tenant=${encodeURIComponent(s.tenant)}#/board` }, `Open the board of ${s.tenant}`)) : null;
  setMain(el('section', { class: 'denied', id: 'denied' },
    el('h1', {}, 'No access to this tenant'),
    el('p', {}, reason ?? `You are signed in as ${s.subject} (${s.role}${s.tenant ? ` of tenant ${s.tenant}` : ''}), which does not give access to tenant ${app.tenant}.`),
    own));
  focusMain();
}

function showTenantPicker() {
  app.view = 'picker';
  document.title = 'Choose a tenant · Corkboard';
  const list = el('ul', { id: 'tenant-choices' });
  const fill = () => list.replaceChildren(...(app.knownTenants ?? []).map((t) =>
    el('li', {}, el('a', { href: `/?tenant=${encodeURIComponent(t)}#/board` }, t))));
  fill();
  setMain(el('section', { class: 'empty-state' },
    el('h1', {}, 'Choose a tenant'),
    el('p', {}, 'Type a tenant in the box at the top, or pick one that has active grants:'),
    list));
  fillTenantList().then(fill);
  $('tenant-input').focus();
}

function showFailure(title, error) {
  setMain(el('section', { class: 'denied' }, el('h1', {}, title), el('p', { role: 'alert' }, error.message)));
}

// ---------------------------------------------------------------- sign-in

function showSignin(message) {
  app.view = 'signin';
  document.title = 'Sign in · Corkboard';
  $('main-nav').hidden = true;
  $('who').hidden = true;
  $('tenant-form').hidden = true;
  $('tenant-fixed').hidden = true;
  const error = el('p', { class: 'error', id: 'signin-error', role: 'alert' }, message ?? '');
  const token = el('textarea', { id: 'signin-token', name: 'token', autocomplete: 'off', spellcheck: 'false', required: true, 'aria-describedby': 'signin-help' });
  const form = el('form', { id: 'signin-form' },
    el('label', { for: 'signin-token' }, 'Admin token'),
    token,
    el('button', { type: 'submit' }, 'Sign in'),
    error);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    error.textContent = '';
    try {
      await api('POST', '/web/session', { token: token.value.trim() });
      location.reload();
    } catch (err) {
      error.textContent = err.message;
      token.focus();
    }
  });
  setMain(el('section', { class: 'signin', id: 'signin' },
    el('h1', {}, 'Sign in to Corkboard'),
    el('p', {}, 'Running ', el('code', {}, 'corkboard serve'), ' on this machine? Open the one-time sign-in link it printed when it started.'),
    el('p', { id: 'signin-help' }, 'Otherwise, paste an admin token: mint one with ',
      el('code', {}, 'corkboard admin token --role viewer --tenant <tenant>'), ' or get one from your organisation’s issuer.'),
    form));
}

// ---------------------------------------------------------------- board

function filtersFrom(params) {
  const f = {};
  for (const key of ['q', 'text', 'label', 'state', 'run', 'claimed_by']) {
    const v = (params.get(key) ?? '').trim();
    if (v) f[key] = v;
  }
  if (params.get('unclaimed') === 'true') f.unclaimed = 'true';
  return f;
}

function hasFilters(f) {
  return Object.keys(f).length > 0;
}

async function showBoard(params, { focus } = {}) {
  app.view = 'board';
  setNav('board');
  document.title = `${app.tenant} · Corkboard`;
  const filters = filtersFrom(params);
  app.board = { issues: [], columns: new Map(), filters, loaded: false };
  setMain(
    el('div', { class: 'board-head' },
      el('h1', { id: 'board-title' }, `Board · ${app.tenant}`),
      liveStatus()),
    filterForm(filters),
    app.session.can_manage ? newIssueForm() : null,
    el('div', { id: 'board-notice' }),
    el('div', { id: 'board-body' }, el('p', { class: 'loading' }, 'Loading issues…')));
  if (focus) focusMain();
  if (await loadBoard()) connectEvents();
}

/** Files an issue as the signed-in person (collapsed until opened). */
function newIssueForm() {
  const title = el('input', { id: 'new-title', name: 'title', required: true, maxlength: 200, autocomplete: 'off' });
  const body = el('textarea', { id: 'new-body', name: 'body', rows: 4 });
  const priority = el('select', { id: 'new-priority', name: 'priority' },
    PRIORITIES.map((p) => el('option', { value: p, selected: p === 'none' }, p)));
  const labels = el('input', { id: 'new-labels', name: 'labels', autocomplete: 'off', placeholder: 'comma-separated' });
  const error = el('p', { class: 'form-error', id: 'new-error', role: 'alert' });
  const form = el('form', { class: 'edit', id: 'new-issue-form', 'aria-label': 'File an issue' },
    el('div', { class: 'field wide' }, el('label', { for: 'new-title' }, 'Title'), title),
    el('div', { class: 'field wide' }, el('label', { for: 'new-body' }, 'Description (Markdown)'), body),
    el('div', { class: 'field' }, el('label', { for: 'new-priority' }, 'Priority'), priority),
    el('div', { class: 'field' }, el('label', { for: 'new-labels' }, 'Labels'), labels),
    el('button', { type: 'submit', id: 'new-save' }, 'File issue'),
    error);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    error.textContent = '';
    const request = { title: title.value.trim() };
    if (body.value.trim()) request.body = body.value;
    if (priority.value !== 'none') request.priority = priority.value;
    const list = splitList(labels.value);
    if (list.length) request.labels = list;
    try {
      const issue = await api('POST', tenantPath('/issues'), request);
      announce(`Filed “${issue.title}”.`);
      location.hash = `#/issue/${encodeURIComponent(issue.id)}`;
    } catch (err) {
      error.textContent = err.message;
    }
  });
  return el('details', { class: 'new-issue', id: 'new-issue' }, el('summary', { id: 'new-issue-open' }, 'File an issue'), form);
}

/** A comma-separated list as trimmed, distinct, sorted values. */
function splitList(text) {
  return [...new Set(text.split(',').map((v) => v.trim()).filter(Boolean))].sort();
}

/** What an integrity level means, for its chip's title. */
const INTEGRITY_TITLES = {
  external: 'written by a run that called upstream tools: may carry text from outside the board',
  agent: 'written by a run that used only the board',
  person: 'written by a person or the admin API',
};

/** An integrity level as a chip. */
function integrityEl(level) {
  return el('span', { class: `chip integrity integrity-${level}`, title: INTEGRITY_TITLES[level] ?? '', dataset: { integrity: level } }, level);
}

/** Who wrote something: a person, an admin caller or a run, by name, with the level it wrote at. */
function authorEl(author) {
  const kind = author.kind ?? 'run';
  const label = { run: 'run', person: 'person', admin: 'admin' }[kind] ?? kind;
  return el('span', { class: `author author-${kind}`, dataset: { authorKind: kind } },
    el('span', { class: 'chip' }, label), ' ', el('span', { class: 'mono' }, author.run),
    kind === 'run' && author.integrity ? [' ', integrityEl(author.integrity)] : null);
}

function liveStatus() {
  const state = app.events ? (app.events.readyState === EventSource.OPEN ? 'open' : 'connecting') : 'connecting';
  return el('p', { class: 'live', id: 'live-status', 'aria-live': 'polite', dataset: { state } }, liveText(state));
}

function liveText(state) {
  return { open: 'Live', connecting: 'Connecting to live updates…', closed: 'Live updates stopped; retrying…' }[state];
}

function setLive(state) {
  const node = $('live-status');
  if (!node) return;
  node.dataset.state = state;
  node.textContent = liveText(state);
}

function filterForm(filters) {
  const field = (id, label, input) => el('div', { class: 'field' }, el('label', { for: id }, label), input);
  const search = el('input', { id: 'filter-q', name: 'q', type: 'search', value: filters.q ?? '', maxlength: 200, placeholder: 'words in title, body or comments' });
  const text = el('input', { id: 'filter-text', name: 'text', type: 'search', value: filters.text ?? '', maxlength: 200 });
  const label = el('input', { id: 'filter-label', name: 'label', value: filters.label ?? '', placeholder: 'bug,api', autocomplete: 'off' });
  const state = el('select', { id: 'filter-state', name: 'state' },
    el('option', { value: '' }, 'Any state'),
    STATES.map((s) => el('option', { value: s, selected: filters.state === s }, stateLabel(s))));
  const run = el('input', { id: 'filter-run', name: 'run', value: filters.run ?? '', autocomplete: 'off' });
  const unclaimed = el('input', { id: 'filter-unclaimed', name: 'unclaimed', type: 'checkbox', value: 'true', checked: filters.unclaimed === 'true' });
  const form = el('form', { class: 'filters', id: 'filters', role: 'search', 'aria-label': 'Filter issues' },
    field('filter-q', 'Search', search),
    field('filter-text', 'Title contains', text),
    field('filter-label', 'Labels (all of)', label),
    field('filter-state', 'State', state),
    field('filter-run', 'Author run', run),
    el('div', { class: 'field check' }, el('label', { for: 'filter-unclaimed' }, unclaimed, ' Unclaimed only')),
    el('div', { class: 'actions' },
      el('button', { type: 'submit' }, 'Apply'),
      el('button', { type: 'button', class: 'secondary', id: 'filter-clear' }, 'Clear')));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const q = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (String(v).trim()) q.set(k, String(v).trim());
    const query = q.toString();
    location.hash = query ? `#/board?${query}` : '#/board';
  });
  form.querySelector('#filter-clear').addEventListener('click', () => {
    location.hash = '#/board';
  });
  // Folded behind one control on a phone (the cards come first), open on a
  // wide screen; the summary says how many filters are in effect.
  const active = Object.keys(filters).length;
  const fold = el('details', { class: 'filters-fold', id: 'filters-fold', open: matchMedia(WIDE).matches },
    el('summary', { id: 'filters-toggle' }, 'Filters', active ? ` (${active} active)` : null),
    form);
  return fold;
}

/**
 * A board request (GET …/board): the filters, a page of every column, or
 * with `state` and `cursor` the next page of that column alone. A `state`
 * filter keeps only that column.
 */
function boardQuery(filters, { state, cursor, limit = COLUMN_PAGE } = {}) {
  const q = new URLSearchParams({ limit: String(limit) });
  for (const [k, v] of Object.entries(filters)) if (k !== 'q') q.set(k, v);
  if (state) q.set('state', state);
  if (cursor) q.set('cursor', cursor);
  return q;
}

/** The columns shown: every state, or the one the state filter names. */
function shownStates(board) {
  return board.filters.state ? STATES.filter((s) => s === board.filters.state) : STATES;
}

/** Every card loaded, across the columns. */
function loadedIssues(board) {
  return [...board.columns.values()].flatMap((c) => c.issues);
}

/** A search (GET …/issues/search): ranked hits, paged by offset. */
function searchQuery(filters, offset) {
  const q = new URLSearchParams({ limit: String(SEARCH_PAGE) });
  for (const [k, v] of Object.entries(filters)) q.set(k, v);
  if (offset) q.set('offset', String(offset));
  return q;
}

/**
 * Starts a load of what `holder` shows and returns whether a newer load of
 * it has started since. Only the newest load renders: a live event during
 * a load starts another, and the older answer (read before the event) must
 * not replace what the newer one shows.
 */
function startLoad(holder) {
  const seq = (holder.seq = (holder.seq ?? 0) + 1);
  return () => holder.seq !== seq;
}

/** The loads of the views that keep no state object of their own. */
const viewLoads = { approvals: {}, tools: {} };

/** Fetches the board, or the search hits when there is a query; false when the tenant is out of reach. */
async function loadBoard() {
  const board = app.board;
  const newer = startLoad(board);
  const superseded = () => app.board !== board || newer();
  try {
    if (board.filters.q) {
      const page = await api('GET', tenantPath(`/issues/search?${searchQuery(board.filters)}`));
      if (superseded()) return false;
      board.hits = page.hits;
      board.next = page.next_offset ?? null;
      board.partial = page.partial;
      board.issues = page.hits.map((h) => h.issue);
      board.loaded = true;
      preservingFocus(renderBoard);
      return true;
    }
    const page = await api('GET', tenantPath(`/board?${boardQuery(board.filters)}`));
    if (superseded()) return false;
    // A refresh (a live event) keeps as many cards of each column as the
    // person had loaded: those columns read on from their new first page.
    const before = board.columns;
    const columns = new Map(page.columns.map((c) => [c.state, columnFrom(c)]));
    for (const [state, column] of columns) {
      const had = before.get(state)?.issues.length ?? 0;
      while (column.next && column.issues.length < had) {
        const more = await api('GET', tenantPath(`/board?${boardQuery(board.filters, { state, cursor: column.next })}`));
        if (superseded()) return false;
        appendPage(column, more.columns[0]);
      }
    }
    board.hits = null;
    board.columns = columns;
    board.issues = loadedIssues(board);
    board.loaded = true;
    preservingFocus(renderBoard);
    return true;
  } catch (e) {
    if (superseded()) return false;
    return handleLoadError(e);
  }
}

function handleLoadError(e) {
  if (e.status === 403) {
    showDenied();
    return false;
  }
  if (e.status === 401) return false;
  const target = $('board-body') ?? mainEl();
  target.replaceChildren(el('p', { class: 'notice', role: 'alert' }, `Cannot load: ${e.message}`));
  return e.status !== 404 && e.status !== 422;
}

/** The next ranked search hits. */
async function loadMoreHits() {
  const board = app.board;
  try {
    const page = await api('GET', tenantPath(`/issues/search?${searchQuery(board.filters, board.next)}`));
    if (app.board !== board) return;
    const seen = new Set(board.hits.map((h) => h.issue.id));
    board.hits.push(...page.hits.filter((h) => !seen.has(h.issue.id)));
    board.issues = board.hits.map((h) => h.issue);
    board.next = page.next_offset ?? null;
    board.partial = page.partial;
    preservingFocus(renderBoard);
  } catch (e) {
    announce(`Cannot load more issues: ${e.message}`, 'error');
  }
}

/** A column of the board's answer as the page keeps it. */
function columnFrom(c) {
  return { state: c.state, issues: c.issues, next: c.next_cursor ?? null, total: c.total, exact: c.total_exact, loading: false };
}

/** Adds the next page of a column (an issue already shown is not repeated). */
function appendPage(column, page) {
  const seen = new Set(column.issues.map((i) => i.id));
  column.issues.push(...page.issues.filter((i) => !seen.has(i.id)));
  column.next = page.next_cursor ?? null;
  column.total = page.total;
  column.exact = page.total_exact;
}

/**
 * Loads the next page of one column and re-renders that column alone: the
 * other columns (their cards, their scroll, a select in use) stay as they are.
 */
async function loadMoreColumn(state) {
  const board = app.board;
  const column = board?.columns.get(state);
  if (!column?.next || column.loading) return;
  column.loading = true;
  const had = column.issues.length;
  try {
    const page = await api('GET', tenantPath(`/board?${boardQuery(board.filters, { state, cursor: column.next })}`));
    if (app.board !== board || board.columns.get(state) !== column) return;
    appendPage(column, page.columns[0]);
    board.issues = loadedIssues(board);
  } catch (e) {
    announce(`Cannot load more of ${stateLabel(state)}: ${e.message}`, 'error');
  } finally {
    column.loading = false;
  }
  if (app.board !== board || board.columns.get(state) !== column) return;
  preservingFocus(() => renderColumn(state));
  // The last page took the button away: the keyboard goes on at the first new card.
  const first = column.issues[had];
  if (!column.next && first && (!document.activeElement || document.activeElement === document.body)) {
    document.querySelector(`[data-focus-key="${CSS.escape(`open-${first.id}`)}"]`)?.focus();
  }
}

/** Replaces one column's section in place. */
function renderColumn(state) {
  const section = document.querySelector(`#columns section.column[data-state="${CSS.escape(state)}"]`);
  const column = app.board?.columns.get(state);
  if (!section || !column) return;
  const top = section.querySelector('.cards')?.scrollTop ?? 0;
  const next = columnSection(column);
  section.replaceWith(next);
  const cards = next.querySelector('.cards');
  if (cards) cards.scrollTop = top;
}

/** "60", or "1000+" when the server stopped counting. */
function totalText(column) {
  return column.exact ? String(column.total) : `${column.total}+`;
}

function columnSection(column) {
  const s = column.state;
  const { issues } = column;
  const headingId = `col-${s}`;
  const shown = issues.length < column.total || !column.exact
    ? el('p', { class: 'column-shown muted', id: `shown-${s}` }, `${issues.length} of ${totalText(column)} shown`)
    : null;
  const more = column.next
    ? el('button', {
      type: 'button', class: 'secondary column-more', id: `more-${s}`,
      dataset: { state: s, focusKey: `more-${s}` }, onclick: () => loadMoreColumn(s),
    }, `Load more ${stateLabel(s)}`)
    : null;
  return el('section', { class: 'column', 'aria-labelledby': headingId, dataset: { state: s } },
    el('h2', { id: headingId }, stateLabel(s), ' ',
      el('span', { class: 'count', dataset: { total: String(column.total), exact: String(column.exact) }, 'aria-label': `${totalText(column)} issues` }, `(${totalText(column)})`)),
    issues.length
      // On a wide screen a column scrolls on its own (see .cards in
      // app.css), so it is a focusable region: keyboard users scroll it too.
      ? el('ul', { class: 'cards', tabindex: 0, 'aria-label': `${stateLabel(s)} issues` }, issues.map(card))
      : el('p', { class: 'empty-column' }, 'Nothing here'),
    shown,
    more);
}

function renderBoard() {
  const body = $('board-body');
  if (!body) return;
  const board = app.board;
  if (board.hits) {
    if (board.hits.length === 0 && !hasFilters(board.filters)) body.replaceChildren(emptyState());
    else body.replaceChildren(...searchResults(board));
    app.fresh.clear();
    return;
  }
  const columns = shownStates(board).map((s) => board.columns.get(s)).filter(Boolean);
  const total = columns.reduce((n, c) => n + c.total, 0);
  if (total === 0 && !hasFilters(board.filters)) {
    body.replaceChildren(emptyState());
    return;
  }
  // A re-render (a live event) keeps where the person had scrolled: the
  // board sideways and each column within itself.
  const scrolled = scrollPositions();
  const parts = [];
  if (total === 0) parts.push(el('p', { class: 'notice', id: 'no-match' }, 'No issue matches these filters.'));
  parts.push(el('div', { class: 'columns', id: 'columns' }, columns.map(columnSection)));
  body.replaceChildren(...parts);
  restoreScroll(scrolled);
  app.fresh.clear();
}

function scrollPositions() {
  const board = $('columns');
  if (!board) return null;
  return {
    left: board.scrollLeft,
    columns: new Map([...board.querySelectorAll('section.column')].map((c) => [c.dataset.state, c.querySelector('.cards')?.scrollTop ?? 0])),
  };
}

function restoreScroll(scrolled) {
  const board = $('columns');
  if (!board || !scrolled) return;
  board.scrollLeft = scrolled.left;
  for (const section of board.querySelectorAll('section.column')) {
    const cards = section.querySelector('.cards');
    const top = scrolled.columns.get(section.dataset.state);
    if (cards && top) cards.scrollTop = top;
  }
}

/** Ranked search hits with the snippet that matched. */
function searchResults(board) {
  const parts = [];
  if (board.hits.length === 0) {
    parts.push(el('p', { class: 'notice', id: 'no-match' }, `No issue matches “${board.filters.q}”.`));
    return parts;
  }
  parts.push(el('ol', { class: 'hits', id: 'search-results', 'aria-label': `Issues matching “${board.filters.q}”, best first` },
    board.hits.map((hit) => el('li', { class: 'hit', dataset: { issueId: hit.issue.id, field: hit.field } },
      el('a', { class: 'card-title', href: `#/issue/${encodeURIComponent(hit.issue.id)}` }, hit.issue.title),
      el('div', { class: 'meta' },
        el('span', { class: 'chip' }, stateLabel(hit.issue.state)),
        el('span', {}, `matched in the ${hit.field}`),
        el('span', {}, 'by ', authorEl(hit.issue.author)),
        timeEl(hit.issue.updated_at)),
      el('p', { class: 'snippet-text' }, marked(hit.snippet))))));
  if (board.partial) {
    parts.push(el('p', { class: 'notice', id: 'search-partial' },
      'More issues match than the search ranks; the oldest matches may be missing. Add words or filters to narrow it.'));
  }
  if (board.next) {
    parts.push(el('p', { class: 'more' },
      el('button', { type: 'button', class: 'secondary', id: 'load-more', onclick: loadMoreHits, dataset: { focusKey: 'load-more' } }, 'More results')));
  }
  return parts;
}

/** A snippet's `**match**` spans as <mark>, the rest as text. */
function marked(snippet) {
  return snippet.split('**').map((part, i) => (i % 2 === 1 ? el('mark', {}, part) : part));
}

function card(issue) {
  const canManage = app.session.can_manage;
  const item = el('li', {
    class: app.fresh.has(issue.id) ? 'card fresh' : 'card',
    dataset: { issueId: issue.id, state: issue.state, version: String(issue.version) },
  },
  // At most three lines (app.css); the full title is the link's title and the issue's heading.
  el('a', { class: 'card-title', href: `#/issue/${encodeURIComponent(issue.id)}`, title: issue.title, dataset: { focusKey: `open-${issue.id}` } }, issue.title),
  issue.labels.length ? el('ul', { class: 'chips', 'aria-label': 'Labels' }, issue.labels.map((l) => el('li', { class: 'chip' }, l))) : null,
  el('div', { class: 'meta' },
    issue.priority !== 'none' ? el('span', { class: `priority priority-${issue.priority}` }, issue.priority) : null,
    el('span', {}, 'by ', authorEl(issue.author)),
    timeEl(issue.created_at)),
  issue.claim ? el('p', { class: 'claim', dataset: { claimedBy: issue.claim.run } }, 'Claimed by ', el('span', { class: 'mono' }, issue.claim.run)) : null,
  issue.close_reason && issue.close_reason !== 'completed'
    ? el('p', { class: 'close-reason', dataset: { reason: issue.close_reason } }, closeReasonText(issue)) : null);
  if (canManage) {
    const id = `move-${issue.id}`;
    const shown = app.moving.get(issue.id) ?? issue.state;
    const select = el('select', { id, dataset: { focusKey: id } },
      STATES.map((s) => el('option', { value: s, selected: s === shown }, stateLabel(s))));
    select.setAttribute('aria-label', `State of “${issue.title}”`);
    select.addEventListener('change', () => moveIssue(issue.id, select.value));
    item.append(el('div', { class: 'move' }, el('label', { for: id, 'aria-hidden': 'true' }, 'Move to'), select));
  }
  return item;
}

/**
 * Moves an issue, one request at a time per issue: a keyboard user stepping
 * through the options fires a change per step, and each request must carry
 * the version the previous one produced, or it would conflict with itself.
 */
async function moveIssue(id, state) {
  const inFlight = app.moving.has(id);
  app.moving.set(id, state);
  if (inFlight) return;
  try {
    for (;;) {
      const desired = app.moving.get(id);
      const issue = app.board?.issues.find((x) => x.id === id);
      if (!issue || issue.state === desired) break;
      try {
        const updated = await api('PATCH', tenantPath(`/issues/${encodeURIComponent(id)}`), {
          expected_version: issue.version,
          state: desired,
        });
        placeIssue(updated);
        if (app.moving.get(id) === updated.state) announce(`Moved “${updated.title}” to ${stateLabel(updated.state)}.`);
      } catch (e) {
        if (e.status === 409) await showBoardConflict(issue);
        else announce(`Could not move “${issue.title}”: ${e.message}`, 'error');
        break;
      }
    }
  } finally {
    app.moving.delete(id);
    preservingFocus(renderBoard);
  }
}

/**
 * Shows a changed issue where it now belongs (its column, newest first),
 * moving its count along; the live event that follows re-reads the board.
 */
function placeIssue(updated) {
  const board = app.board;
  if (!board?.columns) return;
  let old = null;
  for (const column of board.columns.values()) {
    const i = column.issues.findIndex((x) => x.id === updated.id);
    if (i < 0) continue;
    old = column.issues[i];
    if (old.version >= updated.version) return;
    column.issues.splice(i, 1);
    if (column.state !== updated.state) column.total = Math.max(0, column.total - 1);
    else {
      column.issues.splice(i, 0, updated);
      board.issues = loadedIssues(board);
      return;
    }
  }
  const target = board.columns.get(updated.state);
  if (target) {
    // Ids sort by creation: the column's order (newest first) is theirs.
    const at = target.issues.findIndex((x) => x.id < updated.id);
    if (at < 0 && target.next) {
      // Older than every loaded card: it comes with a later page.
    } else {
      target.issues.splice(at < 0 ? target.issues.length : at, 0, updated);
    }
    if (old) target.total += 1;
  }
  board.issues = loadedIssues(board);
}

async function currentVersion(id) {
  try {
    return (await api('GET', tenantPath(`/issues/${encodeURIComponent(id)}`))).version;
  } catch {
    return null;
  }
}

async function showBoardConflict(issue) {
  const now = await currentVersion(issue.id);
  const notice = conflictNotice(issue, now, () => {
    $('board-notice')?.replaceChildren();
    loadBoard();
  });
  $('board-notice')?.replaceChildren(notice);
  notice.querySelector('button')?.focus();
}

function conflictNotice(issue, now, reload) {
  return el('div', { class: 'notice conflict', role: 'alert', id: 'conflict' },
    el('p', {}, el('strong', {}, 'This issue changed since you loaded it. '),
      `“${issue.title}” is now at version ${now ?? 'unknown'} (you had version ${issue.version}); your change was not applied, so nothing was overwritten.`),
    el('p', {}, el('button', { type: 'button', onclick: reload }, 'Reload the latest version')));
}

function emptyState() {
  const t = app.tenant;
  const mcpUrl = app.session.mcp_url;
  const grantCmd = `corkboard grant create --tenant ${t} --run my-agent --caps ${ALL_CAPS}`;
  const config = JSON.stringify({
    mcpServers: {
      corkboard: {
        type: 'http',
        url: mcpUrl.replace('<run>', 'my-agent'),
        headers: { Authorization: 'Bearer <token printed by grant create>' },
        alwaysLoad: true,
      },
    },
  }, null, 2);
  const runCmd = `corkboard run --tenant ${t} --caps ${ALL_CAPS} -- <your agent command>`;
  return el('section', { class: 'empty-state', id: 'empty-state', 'aria-labelledby': 'empty-title' },
    el('h2', { id: 'empty-title' }, `No issues on ${t} yet`),
    el('p', {}, 'Agents write to this board through MCP. To connect one:'),
    el('ol', {},
      el('li', {}, 'Create a grant for the agent’s run. It prints the run token once:', snippet('grant-command', grantCmd)),
      el('li', {}, 'Give the agent this MCP configuration (for Claude Code, save it to a file and pass ',
        el('code', {}, '--mcp-config FILE'), '), with the token from step 1:', snippet('mcp-config', config))),
    el('p', {}, 'Or let ', el('code', {}, 'corkboard run'), ' do both and revoke the grant when the agent exits:', snippet('run-command', runCmd)),
    el('p', {}, 'Issues appear here as soon as the agent creates them.'));
}

function snippet(id, text) {
  const pre = el('pre', { id }, el('code', {}, text));
  const button = el('button', { type: 'button', class: 'secondary', 'aria-label': `Copy ${id.replace('-', ' ')}` }, 'Copy');
  button.addEventListener('click', async () => {
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = 'Copied';
    } catch {
      const range = document.createRange();
      range.selectNodeContents(pre);
      const sel = getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      button.textContent = 'Press Ctrl+C';
    }
    setTimeout(() => { button.textContent = 'Copy'; }, 2000);
  });
  return el('div', { class: 'snippet' }, pre, button);
}

// ---------------------------------------------------------------- issue view

async function showIssue(id, { focus } = {}) {
  app.view = 'issue';
  setNav(null);
  app.issue = { id, issue: null, dirty: false };
  setMain(el('p', { class: 'loading' }, 'Loading issue…'));
  if (focus) focusMain();
  await loadIssue();
  connectEvents();
}

/**
 * Loads and renders the open issue. A load the page started by itself (a
 * live event) does not replace forms the person has typed into meanwhile
 * (`dirty`): it says the issue changed instead. `force`: the person asked
 * (their own write just landed, or they pressed Reload).
 */
async function loadIssue(force = false) {
  const state = app.issue;
  const id = state.id;
  const newer = startLoad(state);
  try {
    const [issue, history] = await Promise.all([
      api('GET', tenantPath(`/issues/${encodeURIComponent(id)}?render=html&related=true`)),
      api('GET', tenantPath(`/issues/${encodeURIComponent(id)}/history?limit=100`)).catch((e) => ({ error: e })),
    ]);
    if (app.issue !== state || newer()) return;
    if (state.dirty && !force) {
      changedElsewhere(issue.version);
      return;
    }
    state.issue = issue;
    state.dirty = false;
    renderIssue(issue, history);
  } catch (e) {
    if (app.issue !== state || newer()) return;
    if (e.status === 403) return showDenied();
    if (e.status === 401) return;
    const message = e.status === 404 || e.status === 422 ? 'There is no such issue on this tenant.' : e.message;
    setMain(el('section', { class: 'denied', id: 'issue-missing' },
      el('h1', {}, 'Issue not available'),
      el('p', { role: 'alert' }, message),
      el('p', {}, el('a', { href: '#/board' }, 'Back to the board'))));
  }
}

function renderIssue(issue, history) {
  document.title = `${issue.title} · Corkboard`;
  const dl = el('dl', { class: 'issue-meta' }, [
    ['State', stateLabel(issue.state)],
    ['Priority', issue.priority],
    ['Labels', issue.labels.length ? issue.labels.join(', ') : 'none'],
    ['Author', authorEl(issue.author)],
    ['Integrity', issue.integrity ? integrityEl(issue.integrity) : 'unknown'],
    ['Created', timeEl(issue.created_at, formatTime(issue.created_at))],
    ['Updated', timeEl(issue.updated_at, formatTime(issue.updated_at))],
    ['Version', String(issue.version)],
    ['Id', el('span', { class: 'mono' }, issue.id)],
    ...relationRows(issue),
  ].flatMap(([k, v]) => [el('dt', {}, k), el('dd', {}, v)]));
  const rendered = issue.rendered ?? { body: '', comments: {} };
  const body = issue.body
    ? markdownNode(rendered.body, { class: 'markdown issue-body', id: 'issue-body' })
    : el('p', { class: 'issue-body empty', id: 'issue-body' }, 'No description.');
  const comments = issue.comments.length
    ? el('ol', { class: 'comments', id: 'comments' }, issue.comments.map((c) => el('li', { dataset: { commentId: c.id } },
      el('div', { class: 'meta' }, authorEl(c.author), timeEl(c.created_at)),
      markdownNode(rendered.comments[c.id] ?? '', { class: 'markdown comment-body' }))))
    : el('p', { class: 'empty-column' }, 'No comments yet.');
  setMain(el('article', { class: 'issue', id: 'issue', dataset: { issueId: issue.id, version: String(issue.version) } },
    el('p', {}, el('a', { href: '#/board' }, '← Back to the board')),
    el('h1', { id: 'issue-title' }, issue.title),
    el('div', { id: 'issue-notice' }),
    dl,
    app.session.can_manage ? editForm(issue) : null,
    app.session.can_manage ? claimForm(issue) : null,
    el('section', { class: 'block', 'aria-labelledby': 'h-description' }, el('h2', { id: 'h-description' }, 'Description'), body),
    app.session.can_manage ? textForm(issue) : null,
    el('section', { class: 'block', 'aria-labelledby': 'h-comments' }, el('h2', { id: 'h-comments' }, `Comments (${issue.comments.length})`), comments,
      app.session.can_manage ? commentForm(issue) : null),
    el('section', { class: 'block', 'aria-labelledby': 'h-history' }, el('h2', { id: 'h-history' }, 'History'), historyTable(history))));
}

const CLOSE_REASONS = { completed: 'Completed', not_planned: 'Not planned', duplicate: 'Duplicate' };

function closeReasonText(issue) {
  const text = CLOSE_REASONS[issue.close_reason] ?? issue.close_reason;
  return issue.close_reason === 'duplicate' && issue.duplicate_of ? `${text} of ${issue.duplicate_of}` : text;
}

/**
 * A link to another issue of this tenant: its title and state when the
 * read named them (`related`), its id otherwise (an issue that no longer
 * reads). The id stays in the link's title.
 */
function issueLink(id, related) {
  const known = related?.[id];
  const href = `#/issue/${encodeURIComponent(id)}`;
  if (!known) return el('a', { class: 'relation mono', href, dataset: { issueId: id } }, id);
  return el('span', { class: 'relation-item' },
    el('a', { class: 'relation', href, title: id, dataset: { issueId: id } }, known.title),
    ' ', el('span', { class: 'chip', dataset: { state: known.state } }, stateLabel(known.state)));
}

function issueLinks(ids, related, more) {
  return el('ul', { class: 'links' }, ids.map((id) => el('li', {}, issueLink(id, related))), more ? el('li', { class: 'muted' }, 'and more') : null);
}

/** The issue view's rows for claims, close reasons and relations (only those that are set). */
function relationRows(issue) {
  const rows = [];
  const related = issue.related ?? {};
  if (issue.claim) {
    rows.push(['Claimed by', el('span', { id: 'issue-claim' }, el('span', { class: 'mono' }, issue.claim.run), ' since ', timeEl(issue.claim.claimed_at))]);
  }
  if (issue.close_reason) {
    rows.push(['Close reason', el('span', { id: 'issue-close-reason' },
      CLOSE_REASONS[issue.close_reason] ?? issue.close_reason,
      issue.duplicate_of && issue.close_reason === 'duplicate' ? [' of ', issueLink(issue.duplicate_of, related)] : null)]);
  }
  if (issue.parent) rows.push(['Parent', el('span', { id: 'issue-parent' }, issueLink(issue.parent, related))]);
  if (issue.children?.length) rows.push(['Sub-issues', el('div', { id: 'issue-children' }, issueLinks(issue.children, related, issue.more_children))]);
  if (issue.duplicate_of && issue.close_reason !== 'duplicate') rows.push(['Duplicate of', el('span', { id: 'issue-duplicate-of' }, issueLink(issue.duplicate_of, related))]);
  if (issue.blocked_by?.length) rows.push(['Blocked by', el('div', { id: 'issue-blocked-by' }, issueLinks(issue.blocked_by, related))]);
  if (issue.blocks?.length) rows.push(['Blocks', el('div', { id: 'issue-blocks' }, issueLinks(issue.blocks, related, issue.more_blocks))]);
  return rows;
}

function editForm(issue) {
  const state = el('select', { id: 'edit-state', name: 'state' },
    STATES.map((s) => el('option', { value: s, selected: s === issue.state }, stateLabel(s))));
  const priority = el('select', { id: 'edit-priority', name: 'priority' },
    PRIORITIES.map((p) => el('option', { value: p, selected: p === issue.priority }, p)));
  const labels = el('input', { id: 'edit-labels', name: 'labels', value: issue.labels.join(', '), autocomplete: 'off', 'aria-describedby': 'labels-help' });
  // A done or closed issue carries a reason; `duplicate` needs the original,
  // which agents set (duplicate_of), so the page offers it only when it is set.
  const reasons = Object.keys(CLOSE_REASONS).filter((r) => r !== 'duplicate' || issue.duplicate_of);
  const reason = el('select', { id: 'edit-close-reason', name: 'close_reason' },
    reasons.map((r) => el('option', { value: r, selected: r === (issue.close_reason ?? 'completed') }, CLOSE_REASONS[r])));
  const reasonField = el('div', { class: 'field', id: 'close-reason-field' }, el('label', { for: 'edit-close-reason' }, 'Close reason'), reason);
  const finished = (s) => s === 'done' || s === 'closed';
  reasonField.hidden = !finished(issue.state);
  state.addEventListener('change', () => { reasonField.hidden = !finished(state.value); });
  const error = el('p', { class: 'form-error', id: 'edit-error', role: 'alert' });
  const form = el('form', { class: 'edit', id: 'edit-form', 'aria-label': 'Change this issue' },
    el('div', { class: 'field' }, el('label', { for: 'edit-state' }, 'State'), state),
    el('div', { class: 'field' }, el('label', { for: 'edit-priority' }, 'Priority'), priority),
    reasonField,
    el('div', { class: 'field wide' }, el('label', { for: 'edit-labels' }, 'Labels'), labels,
      el('span', { id: 'labels-help' }, 'Comma-separated: lowercase letters, digits, - _ . : /')),
    el('button', { type: 'submit', id: 'edit-save' }, 'Save changes'),
    error);
  const markDirty = () => { if (app.issue) app.issue.dirty = true; };
  form.addEventListener('input', markDirty);
  form.addEventListener('change', markDirty);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    error.textContent = '';
    const patch = { expected_version: issue.version };
    if (state.value !== issue.state) patch.state = state.value;
    if (priority.value !== issue.priority) patch.priority = priority.value;
    if (finished(state.value) && reason.value !== (issue.close_reason ?? 'completed')) patch.close_reason = reason.value;
    const newLabels = labels.value.split(',').map((l) => l.trim()).filter(Boolean);
    const sorted = [...new Set(newLabels)].sort();
    if (JSON.stringify(sorted) !== JSON.stringify(issue.labels)) patch.labels = sorted;
    if (Object.keys(patch).length === 1) {
      error.textContent = 'Nothing to save: change the state, close reason, priority or labels first.';
      return;
    }
    try {
      await api('PATCH', tenantPath(`/issues/${encodeURIComponent(issue.id)}`), patch);
      await loadIssue(true);
      announce('Saved.');
      $('issue-title')?.focus?.();
    } catch (err) {
      if (err.status === 409) {
        const now = await currentVersion(issue.id);
        const notice = conflictNotice(issue, now, () => loadIssue(true));
        $('issue-notice')?.replaceChildren(notice);
        notice.querySelector('button')?.focus();
      } else {
        error.textContent = err.message;
      }
    }
  });
  return form;
}

/** One field's change as text: `state: todo → done`, `labels: +a −b`. */
function fieldChangeText(f) {
  const show = (v) => (v === null || v === undefined ? '—' : typeof v === 'object' ? (v.run ?? JSON.stringify(v)) : String(v));
  if (f.added || f.removed) {
    const parts = [...(f.added ?? []).map((x) => `+${x}`), ...(f.removed ?? []).map((x) => `−${x}`)];
    return `${f.field}: ${parts.join(' ')}`;
  }
  if (f.field === 'body') return 'body edited';
  return `${f.field}: ${show(f.before)} → ${show(f.after)}`;
}

/** Who made a change: a run links to what it did across the board; a person or an admin is named as such. */
function authorCell(by) {
  if (by.kind && by.kind !== 'run') return el('span', { class: 'mono' }, `${by.run} (${by.kind})`);
  return el('a', { class: 'mono', href: `#/run/${encodeURIComponent(by.run)}` }, by.run);
}

/** The changes of an issue (`withIssue`: of a run, naming each issue), newest first. */
function historyTable(history, { withIssue = false } = {}) {
  if (history?.error) return el('p', { class: 'notice' }, `History unavailable: ${history.error.message}`);
  const changes = history?.changes ?? [];
  if (!changes.length) return el('p', { class: 'empty-column' }, 'No changes recorded yet.');
  const head = ['When', ...(withIssue ? ['Issue'] : []), 'Change', 'What changed', 'By', 'Version'];
  return el('div', { class: 'table-wrap' }, el('table', { id: 'history' },
    el('caption', { class: 'visually-hidden' }, 'What changed, newest first'),
    el('thead', {}, el('tr', {}, head.map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, changes.map((c) => el('tr', {},
      el('td', {}, timeEl(c.at, formatTime(c.at))),
      withIssue ? el('td', {}, issueLink(c.issue)) : null,
      el('td', {}, el('code', {}, c.kind)),
      el('td', {}, c.fields.map(fieldChangeText).join('; ')),
      el('td', {}, authorCell(c.by)),
      el('td', {}, String(c.version)))))));
}

/** Sends one change of the open issue, then reloads it (a 409 shows the conflict notice). */
async function issueAction(issue, method, path, request, done, error) {
  error.textContent = '';
  try {
    await api(method, tenantPath(`/issues/${encodeURIComponent(issue.id)}${path}`), request);
    await loadIssue(true);
    announce(done);
  } catch (err) {
    if (err.status === 409) {
      const now = await currentVersion(issue.id);
      const notice = conflictNotice(issue, now, () => loadIssue(true));
      $('issue-notice')?.replaceChildren(notice);
      notice.querySelector('button')?.focus();
    } else {
      error.textContent = err.message;
    }
  }
}

/** Adds a comment as the signed-in person. */
function commentForm(issue) {
  const body = el('textarea', { id: 'comment-body', name: 'body', rows: 3, required: true });
  const error = el('p', { class: 'form-error', id: 'comment-error', role: 'alert' });
  const form = el('form', { class: 'edit', id: 'comment-form', 'aria-label': 'Add a comment' },
    el('div', { class: 'field wide' }, el('label', { for: 'comment-body' }, 'Your comment (Markdown)'), body),
    el('button', { type: 'submit', id: 'comment-save' }, 'Comment'),
    error);
  // A half-written comment is not replaced by a live update.
  form.addEventListener('input', () => { if (app.issue) app.issue.dirty = true; });
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    issueAction(issue, 'POST', '/comments', { body: body.value }, 'Comment added.', error);
  });
  return form;
}

/** Edits the title, the description and the relations. */
function textForm(issue) {
  const title = el('input', { id: 'edit-title', name: 'title', value: issue.title, maxlength: 200, required: true });
  const body = el('textarea', { id: 'edit-body', name: 'body', rows: 5 }, issue.body);
  const parent = el('input', { id: 'edit-parent', name: 'parent', value: issue.parent ?? '', autocomplete: 'off', placeholder: 'iss_…' });
  const blocked = el('input', { id: 'edit-blocked-by', name: 'blocked_by', value: (issue.blocked_by ?? []).join(', '), autocomplete: 'off', placeholder: 'iss_…, iss_…' });
  const duplicate = el('input', { id: 'edit-duplicate-of', name: 'duplicate_of', value: issue.duplicate_of ?? '', autocomplete: 'off', placeholder: 'iss_…' });
  const error = el('p', { class: 'form-error', id: 'text-error', role: 'alert' });
  const form = el('form', { class: 'edit', id: 'text-form', 'aria-label': 'Edit the text and relations' },
    el('div', { class: 'field wide' }, el('label', { for: 'edit-title' }, 'Title'), title),
    el('div', { class: 'field wide' }, el('label', { for: 'edit-body' }, 'Description (Markdown)'), body),
    el('div', { class: 'field' }, el('label', { for: 'edit-parent' }, 'Parent'), parent),
    el('div', { class: 'field' }, el('label', { for: 'edit-blocked-by' }, 'Blocked by'), blocked),
    el('div', { class: 'field' }, el('label', { for: 'edit-duplicate-of' }, 'Duplicate of'), duplicate),
    el('button', { type: 'submit', id: 'text-save' }, 'Save text and relations'),
    error);
  form.addEventListener('input', () => { if (app.issue) app.issue.dirty = true; });
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const patch = { expected_version: issue.version };
    if (title.value.trim() !== issue.title) patch.title = title.value.trim();
    if (body.value !== issue.body) patch.body = body.value;
    const orNull = (v) => (v.trim() ? v.trim() : null);
    if (orNull(parent.value) !== (issue.parent ?? null)) patch.parent = orNull(parent.value);
    if (orNull(duplicate.value) !== (issue.duplicate_of ?? null)) patch.duplicate_of = orNull(duplicate.value);
    const list = splitList(blocked.value);
    if (JSON.stringify(list) !== JSON.stringify([...(issue.blocked_by ?? [])].sort())) patch.blocked_by = list;
    if (Object.keys(patch).length === 1) {
      error.textContent = 'Nothing to save: change the title, description or a relation first.';
      return;
    }
    issueAction(issue, 'PATCH', '', patch, 'Saved.', error);
  });
  // A re-render (an agent's write arriving on the live feed) keeps the form
  // open if the person had opened it: the page must not fold a form away
  // under the person's cursor.
  const wasOpen = document.getElementById('edit-text')?.open ?? false;
  const details = el('details', { class: 'edit-text', id: 'edit-text' }, el('summary', { id: 'edit-text-open' }, 'Edit title, description and relations'), form);
  details.open = wasOpen;
  return details;
}

/** Frees the claim a (stuck) run holds, or hands the issue to another run. */
function claimForm(issue) {
  const error = el('p', { class: 'form-error', id: 'claim-error', role: 'alert' });
  const run = el('input', { id: 'handover-run', name: 'run', autocomplete: 'off', placeholder: 'run id' });
  const release = issue.claim
    ? el('button', { type: 'button', id: 'claim-release', class: 'secondary' }, `Release ${issue.claim.run}'s claim`)
    : null;
  release?.addEventListener('click', () => issueAction(issue, 'POST', '/release', { expected_version: issue.version }, 'Claim released.', error));
  const form = el('form', { class: 'edit', id: 'claim-form', 'aria-label': 'Claim' },
    release,
    el('div', { class: 'field' }, el('label', { for: 'handover-run' }, 'Hand over to run'), run),
    el('button', { type: 'submit', id: 'handover-save', class: 'secondary' }, 'Hand over'),
    error);
  // Typing a run marks the page dirty like the other forms: a live update
  // arriving meanwhile must not re-render the form and drop the run typed.
  form.addEventListener('input', () => { if (app.issue) app.issue.dirty = true; });
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    issueAction(issue, 'POST', '/handover', { run: run.value.trim(), expected_version: issue.version }, `Handed over to ${run.value.trim()}.`, error);
  });
  return form;
}

// ---------------------------------------------------------------- run view

/** What one run changed across the board (the admin API's run history). */
async function showRun(run) {
  app.view = 'run';
  disconnectEvents();
  setNav(null);
  document.title = `Run ${run} · ${app.tenant} · Corkboard`;
  const history = await api('GET', tenantPath(`/runs/${encodeURIComponent(run)}/history?limit=100`)).catch((e) => ({ error: e }));
  setMain(el('section', { class: 'run', id: 'run', dataset: { run } },
    el('p', {}, el('a', { href: '#/board' }, '← Back to the board')),
    el('h1', {}, 'Run ', el('span', { class: 'mono' }, run)),
    el('section', { class: 'block', 'aria-labelledby': 'h-run-history' },
      el('h2', { id: 'h-run-history' }, 'What this run changed'),
      historyTable(history, { withIssue: true }))));
}

// ---------------------------------------------------------------- approvals view

async function showApprovals({ focus } = {}) {
  app.view = 'approvals';
  setNav('approvals');
  document.title = `Approvals · ${app.tenant} · Corkboard`;
  setMain(
    el('div', { class: 'board-head' }, el('h1', { id: 'approvals-title' }, `Approvals · ${app.tenant}`), liveStatus()),
    el('p', {}, 'Calls of agent runs that a policy says need a person. An approved call runs once, when its run sends it again; a denied one gets your reason.'),
    el('div', { id: 'approvals-body' }, el('p', { class: 'loading' }, 'Loading approvals…')));
  if (focus) focusMain();
  await loadApprovals();
  connectEvents();
}

async function loadApprovals() {
  const body = $('approvals-body');
  if (!body) return;
  const newer = startLoad(viewLoads.approvals);
  let list;
  try {
    list = (await api('GET', tenantPath('/approvals?limit=100'))).approvals;
  } catch (e) {
    if (newer()) return;
    if (e.status === 403) return showDenied();
    body.replaceChildren(el('p', { role: 'alert' }, `Cannot load approvals: ${e.message}`));
    return;
  }
  const details = await Promise.all(list.filter((a) => a.status === 'pending' && !a.expired)
    .map((a) => api('GET', tenantPath(`/approvals/${encodeURIComponent(a.id)}`)).catch(() => a)));
  if (newer()) return;
  const decided = list.filter((a) => a.status !== 'pending' || a.expired);
  const done = el('table', { id: 'approvals-done' },
    el('thead', {}, el('tr', {}, ['Call', 'Run', 'Status', 'By', 'Reason'].map((h) => el('th', { scope: 'col' }, h)))),
    el('tbody', {}, decided.map((a) => {
      const status = a.expired && a.status === 'pending' ? 'expired' : a.status;
      return el('tr', { dataset: { approvalId: a.id, status } },
        el('td', {}, el('code', {}, a.tool)),
        el('td', { class: 'mono' }, a.run),
        el('td', {}, status),
        el('td', {}, a.decision?.by ?? ''),
        el('td', {}, a.decision?.reason ?? ''));
    })));
  const shownList = $('approvals-pending');
  if (details.length && shownList) {
    // A live refresh updates the waiting cards in place: a card still
    // waiting is kept as it is (never removed and re-inserted), so a reason
    // input the person is typing into keeps its focus and its text.
    keepCards(shownList, details);
    $('approvals-waiting').textContent = `Waiting (${details.length})`;
    $('approvals-done-wrap').replaceChildren(done);
    return;
  }
  body.replaceChildren(
    el('h2', { id: 'approvals-waiting' }, `Waiting (${details.length})`),
    details.length ? el('ul', { class: 'cards approvals', id: 'approvals-pending' }, details.map(approvalCard)) : el('p', { class: 'empty-column', id: 'no-approvals' }, 'No call is waiting for a person.'),
    el('h2', {}, 'Decided or expired'),
    el('div', { class: 'table-wrap', id: 'approvals-done-wrap' }, done));
}

/**
 * Makes `list`'s cards those of `items`, in their order: cards no longer
 * waiting go, new ones are built, and a card still waiting stays the same
 * node where it is (new cards are inserted around it).
 */
function keepCards(list, items) {
  const wanted = new Set(items.map((item) => item.id));
  const shown = new Map();
  for (const card of [...list.children]) {
    if (wanted.has(card.dataset.approvalId)) shown.set(card.dataset.approvalId, card);
    else card.remove();
  }
  let next = list.firstElementChild;
  for (const item of items) {
    const kept = shown.get(item.id);
    if (kept === next) {
      next = next.nextElementSibling;
    } else if (!kept) {
      list.insertBefore(approvalCard(item), next);
    }
    // A kept card out of order stays where it is: moving it would take
    // the focus from its input.
  }
}

/** One waiting call: what it would do, who asks, what that run did recently, and the decision. */
function approvalCard(item) {
  let args = item.arguments;
  try {
    args = JSON.stringify(JSON.parse(item.arguments), null, 2);
  } catch {
    // Cut arguments are shown as kept.
  }
  const canDecide = app.session.can_decide;
  const reasonId = `reason-${item.id}`;
  // A live refresh keeps a waiting card as it is (`keepCards`); what the
  // person typed also outlives leaving the page and coming back.
  app.reasons ??= new Map();
  const reason = el('input', { id: reasonId, class: 'approval-reason', autocomplete: 'off', maxlength: 2000, value: app.reasons.get(item.id) ?? '' });
  reason.addEventListener('input', () => app.reasons.set(item.id, reason.value));
  const error = el('p', { class: 'form-error', role: 'alert' });
  const decide = async (approve) => {
    error.textContent = '';
    try {
      await api('POST', tenantPath(`/approvals/${encodeURIComponent(item.id)}/decision`), { approve, reason: reason.value });
      announce(approve ? 'Approved: the call runs when its run sends it again.' : 'Denied.');
      await loadApprovals();
    } catch (e) {
      error.textContent = e.message;
    }
  };
  const recent = item.recent ?? [];
  return el('li', { class: 'card approval', dataset: { approvalId: item.id } },
    el('p', { class: 'card-title' }, el('code', {}, item.tool), ' by run ', el('span', { class: 'mono' }, item.run)),
    el('p', { class: 'meta' }, `policy ${item.policy} v${item.policy_version} · expires `, timeEl(item.expires_at)),
    el('pre', { class: 'approval-arguments' }, args),
    recent.length ? el('details', {}, el('summary', {}, `What this run did recently (${recent.length})`),
      el('ul', {}, recent.map((r) => el('li', {}, timeEl(r.at), ' ', el('code', {}, r.tool), ` ${r.outcome}`)))) : null,
    canDecide ? el('div', { class: 'field' }, el('label', { for: reasonId }, 'Reason (shown to the agent when denied)'), reason) : null,
    canDecide ? el('p', {},
      el('button', { type: 'button', class: 'approve', onclick: () => decide(true) }, 'Approve'), ' ',
      el('button', { type: 'button', class: 'secondary deny', onclick: () => decide(false) }, 'Deny')) : el('p', { class: 'muted' }, 'Read-only: your role cannot decide.'),
    error);
}

// ---------------------------------------------------------------- upstream tools view

/**
 * The tenant's upstream MCP servers and their tools' pins: a new or changed
 * tool is pending (runs neither see nor call it) until a tenant admin
 * approves the definition shown, which names what changed and the approved
 * definition beside the new one. Approving sends the hash that was shown,
 * so a definition that changed again meanwhile is refused.
 */
async function showUpstreamTools({ focus } = {}) {
  app.view = 'tools';
  setNav('tools');
  document.title = `Upstream tools · ${app.tenant} · Corkboard`;
  setMain(
    el('div', { class: 'board-head' }, el('h1', { id: 'tools-title' }, `Upstream tools · ${app.tenant}`), liveStatus()),
    el('p', {}, 'Tools of this tenant\'s upstream MCP servers. A new or changed tool is hidden from runs until a tenant admin approves exactly the definition shown.'),
    el('div', { id: 'tools-body' }, el('p', { class: 'loading' }, 'Loading upstream tools…')));
  if (focus) focusMain();
  await loadUpstreamTools();
  connectEvents();
}

async function loadUpstreamTools() {
  const body = $('tools-body');
  if (!body) return;
  const newer = startLoad(viewLoads.tools);
  let upstreams;
  try {
    upstreams = (await api('GET', tenantPath('/upstreams'))).upstreams;
    upstreams = await Promise.all(upstreams.map(async (u) => ({
      ...u,
      tools: (await api('GET', tenantPath(`/upstreams/${encodeURIComponent(u.name)}/tools`))).tools,
    })));
  } catch (e) {
    if (newer()) return;
    if (e.status === 403) return showDenied();
    body.replaceChildren(el('p', { role: 'alert' }, `Cannot load upstream tools: ${e.message}`));
    return;
  }
  if (newer()) return;
  const pending = upstreams.flatMap((u) => u.tools.filter((t) => t.status === 'pending').map((t) => pendingToolCard(u.name, t)));
  body.replaceChildren(
    el('h2', {}, `Pending approval (${pending.length})`),
    pending.length ? el('ul', { class: 'cards approvals', id: 'tools-pending' }, pending) : el('p', { class: 'empty-column', id: 'no-pending-tools' }, 'No upstream tool is waiting for approval.'),
    el('h2', {}, 'Approved'),
    el('div', { class: 'table-wrap' }, el('table', { id: 'tools-approved' },
      el('thead', {}, el('tr', {}, ['Upstream', 'Tool', 'Approved by', 'Hash'].map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, upstreams.flatMap((u) => u.tools.filter((t) => t.status === 'approved').map((t) => el('tr', { dataset: { upstream: u.name, tool: t.tool } },
        el('td', {}, u.name),
        el('td', {}, el('code', {}, t.tool)),
        el('td', {}, t.approved?.by ?? ''),
        el('td', { class: 'mono' }, t.hash.slice(0, 12)))))))));
}

/** One pending tool: what changed, the approved and the new definition, and the approval. */
function pendingToolCard(upstream, pin) {
  const pretty = (definition) => JSON.stringify(definition, null, 2);
  const error = el('p', { class: 'form-error', role: 'alert' });
  const approve = async () => {
    error.textContent = '';
    try {
      await api('POST', tenantPath(`/upstreams/${encodeURIComponent(upstream)}/tools/${encodeURIComponent(pin.tool)}/approve`), { hash: pin.hash });
      announce(`Approved ${upstream}/${pin.tool}: runs see it within seconds.`);
      await loadUpstreamTools();
    } catch (e) {
      error.textContent = e.message;
    }
  };
  const changes = pin.changes ?? [];
  return el('li', { class: 'card approval pending-tool', dataset: { upstream, tool: pin.tool } },
    el('p', { class: 'card-title' }, el('code', {}, pin.tool), ' of upstream ', el('span', { class: 'mono' }, upstream)),
    el('p', { class: 'meta tool-changes' }, changes.includes('new tool') ? 'New tool' : `Changed: ${changes.join(', ')}`, ' · seen ', timeEl(pin.seen_at)),
    pin.approved ? el('details', { class: 'approved-definition' }, el('summary', {}, `Approved definition (by ${pin.approved.by})`),
      el('pre', {}, pretty(pin.approved.definition))) : null,
    el('p', {}, pin.approved ? 'New definition:' : 'Definition:'),
    el('pre', { class: 'approval-arguments tool-definition' }, pretty(pin.definition)),
    app.session.can_manage
      ? el('p', {}, el('button', { type: 'button', class: 'approve', onclick: approve }, 'Approve this definition'))
      : el('p', { class: 'muted' }, 'Read-only: only a tenant admin can approve upstream tools.'),
    error);
}

// ---------------------------------------------------------------- grants view

async function showGrants({ focus } = {}) {
  app.view = 'grants';
  setNav('grants');
  document.title = `Runs & grants · ${app.tenant} · Corkboard`;
  const showAll = app.grants?.showAll ?? false;
  app.grants = { grants: [], next: null, showAll };
  const toggle = el('input', { type: 'checkbox', id: 'show-all-grants', checked: showAll });
  toggle.addEventListener('change', () => {
    app.grants.showAll = toggle.checked;
    preservingFocus(renderGrants);
  });
  setMain(
    el('div', { class: 'board-head' }, el('h1', {}, `Runs & grants · ${app.tenant}`), liveStatus()),
    el('div', { class: 'toolbar' },
      el('label', {}, toggle, ' Show revoked and expired grants'),
      app.session.can_manage ? null : el('span', { class: 'muted', id: 'read-only' }, 'Read-only: your role cannot revoke.')),
    el('div', { id: 'grants-body' }, el('p', { class: 'loading' }, 'Loading grants…')),
    el('section', { id: 'webhooks', 'aria-labelledby': 'webhooks-heading' },
      el('h2', { id: 'webhooks-heading' }, 'Webhooks'),
      el('div', { id: 'webhooks-body' }, el('p', { class: 'loading' }, 'Loading webhooks…'))));
  if (focus) focusMain();
  if (await loadGrants()) connectEvents();
}

async function loadGrants() {
  const state = app.grants;
  const newer = startLoad(state);
  try {
    const page = await api('GET', tenantPath(`/grants?limit=${GRANT_PAGE}`));
    if (app.grants !== state || newer()) return false;
    state.grants = page.grants;
    state.next = page.next_cursor;
    preservingFocus(renderGrants);
    loadWebhooks();
    return true;
  } catch (e) {
    if (app.grants !== state || newer()) return false;
    if (e.status === 403) {
      showDenied();
      return false;
    }
    $('grants-body')?.replaceChildren(el('p', { class: 'notice', role: 'alert' }, `Cannot load grants: ${e.message}`));
    return e.status !== 401;
  }
}

async function loadMoreGrants() {
  const state = app.grants;
  try {
    const page = await api('GET', tenantPath(`/grants?limit=${GRANT_PAGE}&cursor=${encodeURIComponent(state.next)}`));
    state.grants.push(...page.grants);
    state.next = page.next_cursor;
    preservingFocus(renderGrants);
  } catch (e) {
    announce(`Cannot load more grants: ${e.message}`, 'error');
  }
}

function renderGrants() {
  const body = $('grants-body');
  if (!body) return;
  const { grants, showAll, next } = app.grants;
  const visible = grants.filter((g) => showAll || g.status === 'active');
  if (!visible.length) {
    body.replaceChildren(el('p', { class: 'empty-column', id: 'no-grants' },
      grants.length ? 'No active grants. Tick “Show revoked and expired grants” to see the others.' : 'No grants on this tenant yet.'));
    return;
  }
  const runs = new Map();
  for (const g of visible) {
    if (!runs.has(g.run)) runs.set(g.run, []);
    runs.get(g.run).push(g);
  }
  const canManage = app.session.can_manage;
  const sections = [...runs.entries()].map(([run, list]) => {
    const active = list.filter((g) => g.status === 'active');
    const headingId = `run-${run}`;
    return el('section', { class: 'run', 'aria-labelledby': headingId, dataset: { run } },
      el('div', { class: 'run-head' },
        el('h2', { id: headingId }, 'Run ', el('span', { class: 'mono' }, run)),
        el('span', { class: 'muted' }, `${active.length} active of ${list.length}`),
        canManage && active.length
          ? el('button', { type: 'button', class: 'danger revoke-run', dataset: { run, focusKey: `revoke-run-${run}` }, onclick: () => revokeRun(run) }, `Revoke run ${run}`)
          : null),
      el('div', { class: 'table-wrap' }, el('table', {},
        el('caption', { class: 'visually-hidden' }, `Grants of run ${run}`),
        el('thead', {}, el('tr', {}, ['Grant', 'Capabilities', 'Status', 'Created', 'Expires', 'Created by', canManage ? 'Action' : null]
          .filter(Boolean).map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, list.map((g) => el('tr', { dataset: { grantId: g.id, status: g.status } },
          el('td', { class: 'mono' }, g.id),
          el('td', {}, g.capabilities.join(', ')),
          el('td', { class: `status-${g.status}` }, g.status, g.revoked_at ? el('span', { class: 'muted' }, ` by ${g.revoked_by ?? '?'}`) : null,
            g.revocation === 'pending' ? el('strong', { class: 'revocation-pending' }, ' (pending: the token still works until the registry confirms; retried automatically)') : null),
          el('td', {}, timeEl(g.created_at)),
          el('td', {}, timeEl(g.expires_at)),
          el('td', {}, g.created_by),
          canManage
            ? el('td', {}, g.status === 'active' || g.revocation === 'pending'
              ? el('button', { type: 'button', class: 'secondary revoke-grant', dataset: { grantId: g.id, focusKey: `revoke-${g.id}` }, 'aria-label': `Revoke grant ${g.id}`, onclick: () => revokeGrant(g) }, 'Revoke')
              : '')
            : null))))));
  });
  const parts = [...sections];
  if (next) parts.push(el('p', { class: 'more' }, el('button', { type: 'button', class: 'secondary', onclick: loadMoreGrants }, 'Load more grants')));
  body.replaceChildren(...parts);
}

// The tenant's webhook endpoints and how their deliveries are going
// (registered through the admin API or `corkboard webhook`).
async function loadWebhooks() {
  const body = $('webhooks-body');
  if (!body) return;
  try {
    const { webhooks } = await api('GET', tenantPath('/webhooks'));
    if (!webhooks.length) {
      body.replaceChildren(el('p', { class: 'empty-column', id: 'no-webhooks' }, 'No webhook endpoints on this tenant.'));
      return;
    }
    body.replaceChildren(el('div', { class: 'table-wrap' }, el('table', {},
      el('caption', { class: 'visually-hidden' }, 'Webhook endpoints and their last delivery'),
      el('thead', {}, el('tr', {}, ['Endpoint', 'Events', 'Pending', 'Delivered', 'Given up', 'Dropped', 'Last attempt', 'Last status', 'Last error']
        .map((h) => el('th', { scope: 'col' }, h)))),
      el('tbody', {}, webhooks.map((w) => el('tr', { dataset: { webhookId: w.id } },
        el('td', { class: 'mono' }, w.url),
        el('td', {}, w.events.join(', ')),
        el('td', {}, String(w.status.pending)),
        el('td', {}, String(w.status.delivered)),
        el('td', { class: w.status.dead ? 'status-revoked' : '' }, String(w.status.dead)),
        el('td', {}, String(w.status.dropped)),
        el('td', {}, w.status.last_attempt_at ? timeEl(w.status.last_attempt_at) : '—'),
        el('td', {}, w.status.last_status == null ? '—' : String(w.status.last_status)),
        el('td', {}, w.status.last_error ?? '')))))));
  } catch (e) {
    body.replaceChildren(el('p', { class: 'notice', role: 'alert' }, `Cannot load webhooks: ${e.message}`));
  }
}

async function revokeGrant(grant) {
  if (!confirm(`Revoke grant ${grant.id} of run ${grant.run}? Its token stops working at once.`)) return;
  try {
    await api('DELETE', tenantPath(`/grants/${encodeURIComponent(grant.id)}`));
    announce(`Revoked grant ${grant.id}.`);
  } catch (e) {
    announce(`Could not revoke grant ${grant.id}: ${e.message}`, 'error');
  }
  await loadGrants();
}

async function revokeRun(run) {
  if (!confirm(`Revoke every grant of run ${run}? Its tokens stop working at once.`)) return;
  try {
    const result = await api('POST', tenantPath(`/runs/${encodeURIComponent(run)}/revoke`));
    announce(`Revoked run ${run} (${result.revoked.length} grant${result.revoked.length === 1 ? '' : 's'}).`);
  } catch (e) {
    announce(`Could not revoke run ${run}: ${e.message}`, 'error');
  }
  await loadGrants();
}

// ---------------------------------------------------------------- live updates

function connectEvents() {
  if (app.events || !app.tenant || !app.session) return;
  clearTimeout(app.retryTimer);
  const source = new EventSource(tenantPath('/events'));
  app.events = source;
  source.addEventListener('open', () => {
    setLive('open');
    // Whatever happened while the stream was down (or before it opened)
    // is read again rather than guessed.
    if (app.eventsOpened) refetchSoon();
    app.eventsOpened = true;
  });
  source.addEventListener('issue', (e) => onIssueEvent(parseEvent(e)));
  source.addEventListener('grants', () => {
    if (app.view === 'grants') refetchSoon();
  });
  source.addEventListener('approval', () => {
    if (app.view === 'approvals') refetchSoon();
  });
  source.addEventListener('upstream_tool', () => {
    if (app.view === 'tools') refetchSoon();
  });
  source.addEventListener('resync', () => refetchSoon());
  source.addEventListener('error', () => {
    if (source.readyState === EventSource.CLOSED) {
      // The server refused (signed out, no access) or is gone: check which.
      disconnectEvents();
      setLive('closed');
      app.retryTimer = setTimeout(recheckAndReconnect, 3000);
    } else {
      setLive('connecting');
    }
  });
}

async function recheckAndReconnect() {
  try {
    await api('GET', '/web/session');
  } catch (e) {
    if (e.status === 401) return;
  }
  if (app.session) {
    app.eventsOpened = true;
    connectEvents();
  }
}

function disconnectEvents() {
  if (app.events) {
    app.events.close();
    app.events = null;
  }
}

function parseEvent(e) {
  try {
    return JSON.parse(e.data);
  } catch {
    return {};
  }
}

function onIssueEvent(event) {
  if (app.view === 'board') {
    if (event.id) app.fresh.add(event.id);
    refetchSoon();
  } else if (app.view === 'issue' && app.issue && event.id === app.issue.id) {
    if (app.issue.dirty) {
      changedElsewhere(event.version);
    } else {
      refetchSoon();
    }
  }
}

/** Tells a person editing the issue that it changed meanwhile. */
function changedElsewhere(version) {
  const notice = el('div', { class: 'notice', role: 'status', id: 'changed-elsewhere' },
    el('p', {}, `This issue was just changed elsewhere${version ? ` (now version ${version})` : ''}. Saving your edit will be refused as a conflict; reload to start from the latest version.`),
    el('p', {}, el('button', { type: 'button', class: 'secondary', onclick: () => loadIssue(true) }, 'Reload')));
  $('issue-notice')?.replaceChildren(notice);
}

function refetchSoon() {
  clearTimeout(app.refetchTimer);
  app.refetchTimer = setTimeout(() => {
    // A board still loading loads again: its first answer may predate
    // the event.
    if (app.view === 'board' && app.board) loadBoard();
    else if (app.view === 'issue' && app.issue && !app.issue.dirty) loadIssue();
    else if (app.view === 'grants') loadGrants();
    else if (app.view === 'approvals') loadApprovals();
    else if (app.view === 'tools') loadUpstreamTools();
  }, 100);
}

start();
