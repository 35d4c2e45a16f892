// The QueueBox console (docs/console.md): reads /admin/api/ with the admin bearer token and
// renders with textContent only, never HTML from data. Views: #view=overview|dead|message&id=.
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
    throw new Error(data.error || String(res.status));
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

async function renderOverview(root) {
  const o = await api('overview');
  root.appendChild(el('h2', 'Outbox'));
  const counts = el('p', null, { class: 'counts' });
  for (const [state, n] of Object.entries(o.outbox.rows)) {
    const s = el('span');
    s.appendChild(el('b', state + ': '));
    s.appendChild(el('span', n, { 'data-count': state }));
    counts.appendChild(s);
  }
  root.appendChild(counts);
  root.appendChild(el('p', 'Oldest pending: ' + o.outbox.oldestPendingAgeSeconds.toFixed(1) + ' s' +
                            (o.outbox.estimated.length ? ' (estimated: ' + o.outbox.estimated.join(', ') + ')' : '')));
  root.appendChild(el('h2', 'Sent and dead per minute (this replica)'));
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

const FILTERS = ['topic', 'destination', 'error', 'createdAfter', 'createdBefore'];

function filterOf(p) {
  const f = {};
  FILTERS.forEach(k => { if (p.get(k)) f[k] = p.get(k); });
  return f;
}

async function replay(body) {
  const count = await api('replay', body);
  if (!confirm('Replay ' + count.matching + ' message(s)?')) return;
  const done = await api('replay', Object.assign({}, body, { confirm: true }));
  showError('');
  return done;
}

function filterForm(p) {
  const form = el('form', null, { class: 'filters' });
  FILTERS.forEach(k => {
    const label = el('label', k + ' ');
    const input = el('input', null, { name: k, 'data-filter': k });
    input.value = p.get(k) || '';
    label.appendChild(input);
    form.appendChild(label);
  });
  form.appendChild(el('button', 'Filter', { type: 'submit' }));
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    const next = new URLSearchParams({ view: 'dead' });
    FILTERS.forEach(k => { const v = form.elements[k].value.trim(); if (v) next.set(k, v); });
    location.hash = next.toString();
  });
  return form;
}

function deadRow(r) {
  const link = el('a', r.id, { href: '#view=message&id=' + encodeURIComponent(r.id) });
  const pick = el('input', null, { type: 'checkbox', 'data-select': r.id });
  const button = el('button', 'Replay', { 'data-action': 'replay', type: 'button' });
  button.addEventListener('click', async () => { await replay({ ids: [r.id] }); route(); });
  return cells([pick, link, r.topic, r.destination || '', el('span', r.lastError || '', { class: 'error-text' }),
                r.attempt, r.updatedAt, button], { 'data-message-id': r.id });
}

async function renderDead(root, p) {
  root.appendChild(el('h2', 'Dead letters'));
  root.appendChild(filterForm(p));
  const query = new URLSearchParams(Object.assign({ state: 'dead', limit: '50' }, filterOf(p)));
  if (p.get('cursor')) query.set('cursor', p.get('cursor'));
  const page = await api('messages?' + query.toString());
  root.appendChild(table(['', 'Id', 'Topic', 'Destination', 'Reason', 'Attempt', 'Dead since', ''],
                         page.rows.map(deadRow)));
  const actions = el('p');
  const selected = el('button', 'Replay selected', { 'data-action': 'replay-selected', type: 'button' });
  selected.addEventListener('click', async () => {
    const ids = [...root.querySelectorAll('input[data-select]:checked')].map(i => i.getAttribute('data-select'));
    if (ids.length) { await replay({ ids }); route(); }
  });
  const all = el('button', 'Replay all matching', { 'data-action': 'replay-all', type: 'button' });
  all.addEventListener('click', async () => { await replay({ filter: filterOf(p) }); route(); });
  const discard = el('button', 'Discard selected', { 'data-action': 'discard', type: 'button' });
  discard.addEventListener('click', async () => {
    const ids = [...root.querySelectorAll('input[data-select]:checked')].map(i => i.getAttribute('data-select'));
    if (!ids.length || !confirm('Delete ' + ids.length + ' dead message(s) for good?')) return;
    await api('discard', { ids, confirm: true });
    route();
  });
  [selected, all, discard].forEach(b => actions.appendChild(b));
  if (page.next) {
    const next = new URLSearchParams(p);
    next.set('cursor', page.next);
    actions.appendChild(el('a', 'Next page', { href: '#' + next.toString() }));
  }
  root.appendChild(actions);
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
  if (m.lastError) head.appendChild(el('p', 'Last error: ' + m.lastError, { class: 'error-text' }));
  if (m.state === 'dead' || m.state === 'sent') {
    const b = el('button', 'Replay', { 'data-action': 'replay', type: 'button' });
    b.addEventListener('click', async () => { await replay({ ids: [m.id] }); route(); });
    head.appendChild(b);
  }
  root.appendChild(head);
  root.appendChild(el('h3', 'Payload'));
  root.appendChild(el('pre', JSON.stringify(m.payload, null, 2), { 'data-field': 'payload' }));
  root.appendChild(el('h3', 'Headers'));
  root.appendChild(el('pre', JSON.stringify(m.headers, null, 2), { 'data-field': 'headers' }));
  root.appendChild(el('h3', 'Attempts'));
  root.appendChild(table(['#', 'Outcome', 'Destination', 'ms', 'Answer', 'Error', 'At'],
                         m.attempts.map(a => cells([a.attempt, a.outcome, a.destination || '', a.durationMs,
                                                    a.answer || '', a.error || '', a.recordedAt],
                                                   { 'data-attempt': a.outcome }))));
}

async function route() {
  takeTokenFromHash();
  const p = hashParams();
  const root = el('section', null, { 'data-view': p.get('view') || 'overview' });
  view().replaceChildren(root);
  if (!sessionStorage.getItem(TOKEN_KEY)) {
    root.appendChild(el('p', 'Type the admin token above.'));
    return;
  }
  try {
    if (p.get('view') === 'dead') await renderDead(root, p);
    else if (p.get('view') === 'message') await renderMessage(root, p);
    else await renderOverview(root);
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
