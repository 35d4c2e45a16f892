// The QueueBox console (docs/console.md): reads /admin/api/ with the admin bearer token and
// renders with textContent only, never HTML from data. Views: #view=overview|dead|message&id=|inbox|
// inbox-message&id=|inbox-lookup&source=&idempotencyKey=.
'use strict';

const TOKEN_KEY = 'queuebox-admin-token';
const view = () => document.getElementById('view');

function el(tag, text, attrs) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  return e;
}

function hashParams() { return new URLSearchParams(location.hash.slice(1)); }

// A token in the fragment is kept in sessionStorage, then removed from the address bar.
function takeTokenFromHash() {
  const p = hashParams();
  if (!p.has('token')) return;
  sessionStorage.setItem(TOKEN_KEY, p.get('token'));
  p.delete('token');
  history.replaceState(null, '', location.pathname + location.search + '#' + p.toString());
}

function showError(text, kind) {
  const e = document.getElementById('error');
  e.textContent = text;
  e.hidden = !text;
  e.setAttribute('data-error', kind || '');
}

async function api(path, body) {
  const token = sessionStorage.getItem(TOKEN_KEY) || '';
  const init = { headers: { Authorization: 'Bearer ' + token }, cache: 'no-store' };
  if (body !== undefined) {
    init.method = 'POST';
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const res = await fetch('/admin/api/' + path, init);
  const data = await res.json().catch(() => ({}));
  if (res.status === 401) {
    showError('The token was refused: ' + (data.error || 'unauthorized'), 'auth');
    throw new Error('unauthorized');
  }
  if (!res.ok) {
    showError(data.error || ('HTTP ' + res.status), 'request');
    const error = new Error(data.error || String(res.status));
    error.status = res.status;
    throw error;
  }
  showError('');
  return data;
}

function table(headers, rows) {
  const t = el('table');
  const head = el('tr');
  headers.forEach(h => head.appendChild(el('th', h)));
  t.appendChild(head);
  rows.forEach(r => t.appendChild(r));
  return t;
}

function cells(values, attrs) {
  const tr = el('tr', null, attrs);
  values.forEach(v => tr.appendChild(v instanceof Node ? wrap(v) : el('td', v)));
  return tr;
}

function wrap(node) { const td = el('td'); td.appendChild(node); return td; }

// Rows per state of a table, each count an element with `attr` = its state.
function countsOf(root, title, c, attr) {
  root.appendChild(el('h2', title));
  const counts = el('p', null, { class: 'counts' });
  for (const [state, n] of Object.entries(c.rows)) {
    const s = el('span');
    s.appendChild(el('b', state + ': '));
    s.appendChild(el('span', n, { [attr]: state }));
    counts.appendChild(s);
  }
  root.appendChild(counts);
  root.appendChild(el('p', 'Oldest pending: ' + c.oldestPendingAgeSeconds.toFixed(1) + ' s' +
                            (c.estimated.length ? ' (estimated: ' + c.estimated.join(', ') + ')' : '')));
}

async function renderOverview(root) {
  const o = await api('overview');
  countsOf(root, 'Outbox', o.outbox, 'data-count');
  if (o.inbox) countsOf(root, 'Inbox', o.inbox, 'data-inbox-count');
  root.appendChild(el('h2', o.perMinuteScope === 'replica' ? 'Sent and dead per minute (this replica)'
                                                          : 'Sent and dead per minute (all replicas)'));
  root.appendChild(table(['Minute', 'Sent', 'Dead'],
                         o.perMinute.map(m => cells([m.minute.slice(11, 16), m.sent, m.dead]))));
  root.appendChild(el('h2', 'Destinations'));
  root.appendChild(table(['Name', 'Type', 'Circuit'],
                         o.destinations.map(d => cells([d.name, d.type, d.circuit]))));
  root.appendChild(el('h2', 'Replicas'));
  root.appendChild(table(['Name', 'Heartbeat age (s)', 'Started'],
                         o.replicas.map(r => cells([r.name, r.heartbeatAgeSeconds, r.startedAt]))));
  root.appendChild(el('p', 'Change capture: ' + (o.capture ? (o.capture.streaming ? 'streaming' : 'not streaming') +
                                                  ', slot retains ' + o.capture.slotRetainedBytes + ' bytes' : 'off')));
}

const DEAD_FILTERS = ['topic', 'destination', 'error', 'createdAfter', 'createdBefore'];
const INBOX_FILTERS = ['source', 'state', 'error', 'createdAfter', 'createdBefore'];
const INBOX_STATES = ['', 'pending', 'processing', 'processed', 'dead'];

function filterOf(p, names) {
  const f = {};
  names.forEach(k => { if (p.get(k)) f[k] = p.get(k); });
  return f;
}

// Replay or discard: the API counts the rows first, the operator confirms that count, then the
// same body with "confirm": true acts. `body` names the rows (ids or filter) and the table.
async function act(action, body) {
  const count = await api(action, body);
  const which = body.filter ? (body.filter.state || 'dead') + ' ' : '';
  const question = action === 'replay' ? 'Replay ' + count.matching + ' ' + which + 'message(s)?'
                                        : 'Delete ' + count.matching + ' dead message(s) for good?';
  if (!confirm(question)) return false;
  await api(action, Object.assign({}, body, { confirm: true }));
  return true;
}

function replay(body) { return act('replay', body); }

function filterInput(k) {
  if (k !== 'state') return el('input', null, { name: k, 'data-filter': k });
  const select = el('select', null, { name: k, 'data-filter': k });
  INBOX_STATES.forEach(s => select.appendChild(el('option', s || 'any', { value: s })));
  return select;
}

function filterForm(p, viewName, names) {
  const form = el('form', null, { class: 'filters' });
  names.forEach(k => {
    const label = el('label', k + ' ');
    const input = filterInput(k);
    input.value = p.get(k) || '';
    label.appendChild(input);
    form.appendChild(label);
  });
  form.appendChild(el('button', 'Filter', { type: 'submit' }));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const next = new URLSearchParams({ view: viewName });
    names.forEach(k => { const v = form.elements[k].value.trim(); if (v) next.set(k, v); });
    location.hash = next.toString();
  });
  return form;
}

function replayButton(id, table) {
  const button = el('button', 'Replay', { 'data-action': 'replay', type: 'button' });
  button.addEventListener('click', async () => { await replay({ ids: [id], table }); route(); });
  return button;
}

function pick(id) { return el('input', null, { type: 'checkbox', 'data-select': id }); }

function reason(text) { return el('span', text || '', { class: 'error-text' }); }

function deadRow(r) {
  const link = el('a', r.id, { href: '#view=message&id=' + encodeURIComponent(r.id) });
  return cells([pick(r.id), link, r.topic, r.destination || '', reason(r.lastError),
                r.attempt, r.updatedAt, replayButton(r.id, 'outbox')], { 'data-message-id': r.id });
}

function selectedIds(root) {
  return [...root.querySelectorAll('input[data-select]:checked')].map(i => i.getAttribute('data-select'));
}

// Replay the selected, replay all matching the filter, discard the selected, the next page.
function actionBar(root, p, table, filter, next) {
  const actions = el('p');
  const selected = el('button', 'Replay selected', { 'data-action': 'replay-selected', type: 'button' });
  selected.addEventListener('click', async () => {
    const ids = selectedIds(root);
    if (ids.length) { await replay({ ids, table }); route(); }
  });
  const all = el('button', 'Replay all matching', { 'data-action': 'replay-all', type: 'button' });
  all.addEventListener('click', async () => { await replay({ filter, table }); route(); });
  const discard = el('button', 'Discard selected', { 'data-action': 'discard', type: 'button' });
  discard.addEventListener('click', async () => {
    const ids = selectedIds(root);
    if (ids.length) { await act('discard', { ids, table }); route(); }
  });
  [selected, all, discard].forEach(b => actions.appendChild(b));
  if (next) {
    const after = new URLSearchParams(p);
    after.set('cursor', next);
    actions.appendChild(el('a', 'Next page', { href: '#' + after.toString(), 'data-action': 'next-page' }));
  }
  return actions;
}

// An error-text filter searches a window of rows per page: say so when the window ran out first.
function searchedNote(page) {
  if (page.searched == null || !page.next) return null;
  return el('p', 'Searched ' + page.searched + ' rows for this page; ' + page.rows.length +
            ' matched. Next page searches older rows.', { 'data-field': 'searched' });
}

async function renderDead(root, p) {
  root.appendChild(el('h2', 'Dead letters'));
  root.appendChild(filterForm(p, 'dead', DEAD_FILTERS));
  const filter = filterOf(p, DEAD_FILTERS);
  const query = new URLSearchParams(Object.assign({ state: 'dead', limit: '50' }, filter));
  if (p.get('cursor')) query.set('cursor', p.get('cursor'));
  const page = await api('messages?' + query.toString());
  root.appendChild(table(['', 'Id', 'Topic', 'Destination', 'Reason', 'Attempt', 'Dead since', ''],
                         page.rows.map(deadRow)));
  const note = searchedNote(page);
  if (note) root.appendChild(note);
  root.appendChild(actionBar(root, p, 'outbox', filter, page.next));
}

function inboxRow(r) {
  const link = el('a', r.id, { href: '#view=inbox-message&id=' + encodeURIComponent(r.id) });
  const finished = r.state === 'dead' || r.state === 'processed';
  return cells([pick(r.id), link, r.source, r.idempotencyKey || '', r.eventType || '', r.state,
                reason(r.lastError), r.attempt, r.createdAt, finished ? replayButton(r.id, 'inbox') : ''],
               { 'data-message-id': r.id, 'data-state': r.state });
}

const INBOX_COLUMNS = ['', 'Id', 'Source', 'Idempotency key', 'Event type', 'State', 'Reason', 'Attempt',
                       'Received', ''];

// Source + idempotency key (the provider's event id): #view=inbox-lookup&source=&idempotencyKey=.
function lookupForm(p) {
  const form = el('form', null, { class: 'filters', 'data-form': 'lookup' });
  form.appendChild(el('b', 'Look up '));
  for (const k of ['source', 'idempotencyKey']) {
    const label = el('label', k + ' ');
    const input = el('input', null, { name: k, 'data-lookup': k });
    input.value = p.get(k) || '';
    label.appendChild(input);
    form.appendChild(label);
  }
  form.appendChild(el('button', 'Look up', { type: 'submit' }));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const next = new URLSearchParams({ view: 'inbox-lookup' });
    ['source', 'idempotencyKey'].forEach(k => next.set(k, form.elements[k].value.trim()));
    location.hash = next.toString();
  });
  return form;
}

async function renderInbox(root, p) {
  root.appendChild(el('h2', 'Inbox'));
  root.appendChild(lookupForm(new URLSearchParams()));
  root.appendChild(filterForm(p, 'inbox', INBOX_FILTERS));
  const filter = filterOf(p, INBOX_FILTERS);
  const query = new URLSearchParams(Object.assign({ table: 'inbox', limit: '50' }, filter));
  if (p.get('cursor')) query.set('cursor', p.get('cursor'));
  const page = await api('messages?' + query.toString());
  root.appendChild(table(INBOX_COLUMNS, page.rows.map(inboxRow)));
  const note = searchedNote(page);
  if (note) root.appendChild(note);
  root.appendChild(actionBar(root, p, 'inbox', filter, page.next));
}

// The outbox row an inbox row became, linked to its message view.
function forwardedTo(row) {
  const out = el('div', null, { 'data-field': 'forwarded-to' });
  if (!row) {
    out.appendChild(el('p', 'Not forwarded to the outbox (yet).'));
    return out;
  }
  const link = el('a', row.id, { href: '#view=message&id=' + encodeURIComponent(row.id),
                                 'data-forwarded-to': row.id });
  out.appendChild(el('p', 'It became this outbox row:'));
  out.appendChild(table(['Id', 'Topic', 'Destination', 'State', 'Reason', 'Updated'],
                        [cells([link, row.topic, row.destination || '', row.state, reason(row.lastError),
                                row.updatedAt], { 'data-message-id': row.id })]));
  return out;
}

async function renderLookup(root, p) {
  root.appendChild(el('h2', 'Inbox lookup'));
  root.appendChild(lookupForm(p));
  if (!p.get('source') || !p.get('idempotencyKey')) return;
  const query = new URLSearchParams({ source: p.get('source'), idempotencyKey: p.get('idempotencyKey') });
  let row;
  try {
    row = await api('inbox/lookup?' + query.toString());
  } catch (e) {
    if (e.status !== 404) throw e;
    showError('');
    root.appendChild(el('p', 'No inbox row has source ' + p.get('source') + ' and idempotency key ' +
                             p.get('idempotencyKey') + '.', { 'data-field': 'lookup-none' }));
    return;
  }
  root.appendChild(table(INBOX_COLUMNS, [inboxRow(row)]));
  root.appendChild(forwardedTo(row.forwardedTo));
}

function payloadAndHeaders(root, m) {
  root.appendChild(el('h3', 'Payload'));
  root.appendChild(el('pre', JSON.stringify(m.payload, null, 2), { 'data-field': 'payload' }));
  root.appendChild(el('h3', 'Headers'));
  root.appendChild(el('pre', JSON.stringify(m.headers, null, 2), { 'data-field': 'headers' }));
}

function attempts(root, m) {
  root.appendChild(el('h3', 'Attempts'));
  root.appendChild(table(['#', 'Outcome', 'Destination', 'ms', 'Answer', 'Error', 'At'],
                         m.attempts.map(a => cells([a.attempt, a.outcome, a.destination || '', a.durationMs,
                                                    a.answer || '', a.error || '', a.recordedAt],
                                                   { 'data-attempt': a.outcome }))));
}

async function renderInboxMessage(root, p) {
  const m = await api('messages/' + encodeURIComponent(p.get('id') || '') + '?table=inbox');
  const head = el('div', null, { 'data-message-id': m.id });
  head.appendChild(el('h2', 'Inbox message ' + m.id));
  head.appendChild(el('p', 'State: ' + m.state + ' | source: ' + m.source + ' | idempotency key: ' +
                           (m.idempotencyKey || '-') + ' | event type: ' + (m.eventType || '-') +
                           ' | aggregate: ' + (m.aggregateId || '-') + ' | attempt ' + m.attempt +
                           ' | received ' + m.createdAt, { 'data-field': 'summary' }));
  if (m.lastError) head.appendChild(el('p', 'Last error: ' + m.lastError, { class: 'error-text' }));
  if (m.state === 'dead' || m.state === 'processed') head.appendChild(replayButton(m.id, 'inbox'));
  if (m.state === 'dead') {
    const b = el('button', 'Discard', { 'data-action': 'discard', type: 'button' });
    b.addEventListener('click', async () => {
      if (await act('discard', { ids: [m.id], table: 'inbox' })) location.hash = 'view=inbox';
    });
    head.appendChild(b);
  }
  root.appendChild(head);
  root.appendChild(forwardedTo(m.forwardedTo));
  payloadAndHeaders(root, m);
  attempts(root, m);
}

async function renderMessage(root, p) {
  const id = p.get('id') || '';
  const m = await api('messages/' + encodeURIComponent(id));
  const head = el('div', null, { 'data-message-id': m.id });
  head.appendChild(el('h2', 'Message ' + m.id));
  head.appendChild(el('p', 'State: ' + m.state + ' | topic: ' + m.topic + ' | destination: ' + (m.destination || '-') +
                           ' | key: ' + (m.key || '-') + ' | sequence: ' + m.sequence +
                           ' | attempt ' + m.attempt + ' of ' + m.maxAttempts, { 'data-field': 'summary' }));
  head.appendChild(el('p', 'Rows of its key waiting behind it: ' + m.waitingBehind));
  const inboxId = m.headers && typeof m.headers === 'object' ? m.headers['x-inbox-id'] : undefined;
  if (typeof inboxId === 'string') {
    const from = el('p', 'Forwarded from inbox row ');
    from.appendChild(el('a', inboxId, { href: '#view=inbox-message&id=' + encodeURIComponent(inboxId),
                                        'data-field': 'inbox-row' }));
    head.appendChild(from);
  }
  if (m.lastError) head.appendChild(el('p', 'Last error: ' + m.lastError, { class: 'error-text' }));
  if (m.state === 'dead' || m.state === 'sent') head.appendChild(replayButton(m.id, 'outbox'));
  root.appendChild(head);
  payloadAndHeaders(root, m);
  attempts(root, m);
}

const VIEWS = {
  overview: renderOverview,
  dead: renderDead,
  message: renderMessage,
  inbox: renderInbox,
  'inbox-message': renderInboxMessage,
  'inbox-lookup': renderLookup,
};

async function route() {
  takeTokenFromHash();
  const p = hashParams();
  const name = Object.hasOwn(VIEWS, p.get('view')) ? p.get('view') : 'overview';
  const root = el('section', null, { 'data-view': name });
  view().replaceChildren(root);
  if (!sessionStorage.getItem(TOKEN_KEY)) {
    root.appendChild(el('p', 'Type the admin token above.'));
    return;
  }
  try {
    await VIEWS[name](root, p);
  } catch (e) {
    root.appendChild(el('p', 'Could not load this view.'));
  }
}

document.addEventListener('DOMContentLoaded', () => {
  document.getElementById('token-form').addEventListener('submit', ev => {
    ev.preventDefault();
    const field = document.querySelector('[data-field="token"]');
    sessionStorage.setItem(TOKEN_KEY, field.value);
    field.value = '';
    route();
  });
  window.addEventListener('hashchange', route);
  route();
});
