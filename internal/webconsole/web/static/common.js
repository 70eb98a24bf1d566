// Strata console: what the region and global consoles share. Plain ES
// modules, no dependencies: the REST client with the bearer token, the
// login, DOM building, formatting, dialogs and toasts.

// ---- where things are ----

// The console lives at <prefix>/console/ next to the REST API at
// <prefix>/v1/, so a reverse proxy may put both under a prefix.
export const prefix = (() => {
  const p = location.pathname;
  const i = p.indexOf('/console/');
  return i >= 0 ? p.slice(0, i) : '';
})();

export const $ = (sel, el = document) => el.querySelector(sel);
export const $$ = (sel, el = document) => Array.from(el.querySelectorAll(sel));
export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- the token ----

const TOKEN_KEY = 'strata.console.token';
let authRequired = false;
let unauthenticatedHandler = null;

export const auth = {
  get token() {
    try { return sessionStorage.getItem(TOKEN_KEY) || ''; } catch { return ''; }
  },
  set(t) { try { sessionStorage.setItem(TOKEN_KEY, t); } catch { /* private mode */ } },
  clear() { try { sessionStorage.removeItem(TOKEN_KEY); } catch { /* private mode */ } },
  get required() { return authRequired; },
};

// ---- the REST client ----

// ApiError is a failed call, with the API's {"error": {code, message,
// field}} when there was one.
export class ApiError extends Error {
  constructor(status, code, message, field) {
    super(message);
    this.status = status;
    this.code = code;
    this.field = field || '';
  }
}

// api calls the REST API (path starts with /v1/ or /console/) and returns
// the decoded body (null for 204). A 401 asks for a login.
export async function api(path, { method = 'GET', body, signal, token, anonymous = false } = {}) {
  const headers = { Accept: 'application/json' };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const t = anonymous ? '' : (token ?? auth.token);
  if (t) headers.Authorization = 'Bearer ' + t;
  let resp;
  try {
    resp = await fetch(prefix + path, {
      method, headers, signal, cache: 'no-store', credentials: 'same-origin',
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, 'Unreachable', 'The server did not answer (' + e.message + ').');
  }
  if (resp.status === 204) return null;
  const text = await resp.text();
  let data = null;
  if (text) {
    try { data = JSON.parse(text); } catch { /* not JSON: shown as text below */ }
  }
  if (!resp.ok) {
    const e = (data && data.error) || {};
    const err = new ApiError(resp.status, e.code || 'HTTP ' + resp.status,
      e.message || text.trim().slice(0, 300) || resp.statusText, e.field);
    if (resp.status === 401 && !anonymous && token === undefined && unauthenticatedHandler) {
      unauthenticatedHandler(err);
    }
    throw err;
  }
  return data;
}

// apiAll lists every item of a paged list (path takes limit and
// continue), following its pages to the end: {items}.
export async function apiAll(path, opts) {
  const items = [];
  const sep = path.includes('?') ? '&' : '?';
  let cont = '';
  for (;;) {
    const body = await api(`${path}${sep}limit=1000${cont ? '&continue=' + encodeURIComponent(cont) : ''}`, opts);
    items.push(...((body && body.items) || []));
    cont = body && body.continue;
    if (!cont) return { items };
  }
}

// describeError is one line for an error: "NotFound: node "x" not found".
export function describeError(e) {
  if (e instanceof ApiError) {
    const field = e.field && !e.message.startsWith(e.field) ? ` (${e.field})` : '';
    return `${e.code}: ${e.message}${field}`;
  }
  return String(e && e.message ? e.message : e);
}

// ---- DOM ----

// h builds an element: h('div', {class: 'x', onclick: f, dataset: {a: 1}}, child...).
// Text is always text (never parsed as HTML).
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  if (props) {
    for (const [k, v] of Object.entries(props)) {
      if (v === null || v === undefined || v === false) continue;
      if (k === 'class') el.className = v;
      else if (k === 'dataset') for (const [dk, dv] of Object.entries(v)) { if (dv !== undefined && dv !== null) el.dataset[dk] = String(dv); }
      else if (k === 'style') Object.assign(el.style, v);
      else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
      else if (k === 'text') el.textContent = v;
      else el.setAttribute(k, v === true ? '' : String(v));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) append(el, c);
    else if (c instanceof Node) el.appendChild(c);
    else el.appendChild(document.createTextNode(String(c)));
  }
}

// ---- formatting ----

// time parses an API timestamp; null for absent or zero ones.
export function time(s) {
  if (!s) return null;
  const d = new Date(s);
  if (Number.isNaN(d.getTime()) || d.getUTCFullYear() < 1971) return null;
  return d;
}

export function ago(d, now = Date.now()) {
  if (!d) return '—';
  const s = Math.round((now - d.getTime()) / 1000);
  const future = s < 0;
  const a = Math.abs(s);
  let t;
  if (a < 5) return future ? 'in a moment' : 'just now';
  if (a < 60) t = a + 's';
  else if (a < 3600) t = Math.floor(a / 60) + 'm';
  else if (a < 86400) t = Math.floor(a / 3600) + 'h ' + (Math.floor(a / 60) % 60) + 'm';
  else t = Math.floor(a / 86400) + 'd';
  return future ? 'in ' + t : t + ' ago';
}

export function clock(d) {
  return d ? d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false }) : '—';
}

export function absolute(d) {
  return d ? d.toLocaleString([], { dateStyle: 'medium', timeStyle: 'medium' }) : '';
}

// relTime is a <time> that keeps saying "3m ago" (see tickRelativeTimes).
export function relTime(s, { cls, prefix: pre = '' } = {}) {
  const d = time(s);
  if (!d) return h('span', { class: cls }, '—');
  return h('time', { datetime: d.toISOString(), title: absolute(d), class: cls, dataset: { rel: '1', pre } }, pre + ago(d));
}

setInterval(() => {
  const now = Date.now();
  for (const el of $$('time[data-rel]')) el.textContent = (el.dataset.pre || '') + ago(new Date(el.dateTime), now);
}, 10000);

export function cpu(milli) {
  const v = (milli || 0) / 1000;
  return v.toFixed(v >= 10 || Number.isInteger(v) ? 0 : 2).replace(/\.?0+$/, '') || '0';
}

export function mem(mib) {
  mib = mib || 0;
  if (mib >= 1024) {
    const g = mib / 1024;
    return (Number.isInteger(g) || g >= 100 ? g.toFixed(0) : g.toFixed(1).replace(/\.0$/, '')) + ' GiB';
  }
  return mib + ' MiB';
}

export function memValue(mib) { return mem(mib).replace(/ [GM]iB$/, ''); }
export function memUnit(mib) { return (mib || 0) >= 1024 ? 'GiB' : 'MiB'; }

export function pct(part, whole) {
  if (!whole) return 0;
  return Math.max(0, Math.min(100, (100 * part) / whole));
}

export function plural(n, one, many) { return `${n} ${n === 1 ? one : (many || one + 's')}`; }

export function shortID(id) {
  if (!id) return '';
  return id.length > 14 ? id.slice(0, 12) + '…' : id;
}

// ---- status vocabulary ----

export const healthTone = { Up: 'ok', Suspect: 'warn', Down: 'err', Unknown: 'neutral' };
export const conditionTone = { Ready: 'ok', Warning: 'warn', Error: 'err' };
export const phaseTone = { ready: 'ok', provision: 'info', created: 'info', destroy: 'neutral', destroyed: 'neutral', error: 'err' };
export const drainTone = { running: 'info', succeeded: 'ok', failed: 'err', cancelled: 'neutral' };

export function pill(text, tone = 'neutral', props = {}) {
  return h('span', { ...props, class: `pill pill-${tone}${props.class ? ' ' + props.class : ''}` }, h('span', { class: 'dot', 'aria-hidden': 'true' }), text);
}

export function bar(percent, tone) {
  const t = tone || (percent >= 95 ? 'err' : percent >= 80 ? 'warn' : '');
  return h('div', { class: 'bar', role: 'presentation' },
    h('div', { class: 'bar-fill' + (t ? ' tone-' + t : ''), style: { width: percent.toFixed(1) + '%' } }));
}

// ---- alerts and toasts ----

export function showAlert(box, err, what) {
  box.replaceChildren(
    h('span', { class: 'dot', 'aria-hidden': 'true', style: { marginTop: '7px' } }),
    h('div', { class: 'alert-text' }, h('strong', {}, what), ' — ', describeError(err),
      err instanceof ApiError && err.status === 0 ? ' Retrying…' : ''),
  );
  box.hidden = false;
}

export function clearAlert(box) {
  if (!box.hidden) { box.hidden = true; box.replaceChildren(); }
}

export function toast(message, tone = 'ok') {
  const box = $('#toasts');
  if (!box) return;
  const t = h('div', { class: 'toast', role: 'status' }, h('span', { class: 'dot tone-' + tone, 'aria-hidden': 'true' }), message);
  box.appendChild(t);
  while (box.children.length > 3) box.firstElementChild.remove();
  setTimeout(() => t.remove(), 3500);
}

// ---- dialogs ----

// confirmDialog opens the page's <dialog> and resolves true once onConfirm
// succeeded, false when cancelled. onConfirm gets the form's values; an
// error it throws is shown inside the dialog, which stays open.
export function confirmDialog({ title, body, confirmLabel = 'Confirm', danger = false, onConfirm }) {
  const dlg = $('#dialog');
  const form = $('form', dlg);
  const bodyEl = $('.dialog-body', dlg);
  const errEl = $('.dialog-error', dlg);
  const ok = $('button[value="confirm"]', dlg);
  const cancel = $('button[value="cancel"]', dlg);
  $('.dialog-title', dlg).textContent = title;
  bodyEl.replaceChildren(...[].concat(body || []));
  errEl.hidden = true;
  errEl.textContent = '';
  ok.textContent = confirmLabel;
  ok.className = 'btn ' + (danger ? 'btn-danger' : 'btn-primary');
  ok.disabled = false;
  return new Promise((resolve) => {
    let busy = false;
    const done = (v) => {
      form.removeEventListener('submit', onSubmit);
      cancel.removeEventListener('click', onCancel);
      dlg.removeEventListener('cancel', onEsc);
      if (dlg.open) dlg.close();
      resolve(v);
    };
    const onCancel = () => { if (!busy) done(false); };
    const onEsc = (e) => { if (busy) e.preventDefault(); else { e.preventDefault(); done(false); } };
    const onSubmit = async (e) => {
      e.preventDefault();
      if (busy) return;
      for (const el of $$('[aria-invalid]', bodyEl)) el.removeAttribute('aria-invalid');
      busy = true;
      ok.disabled = true;
      const label = ok.textContent;
      ok.replaceChildren(h('span', { class: 'spinner', 'aria-hidden': 'true' }), label);
      try {
        await onConfirm(Object.fromEntries(new FormData(form)));
        busy = false;
        done(true);
      } catch (err) {
        busy = false;
        ok.disabled = false;
        ok.textContent = label;
        errEl.textContent = describeError(err);
        errEl.hidden = false;
        const field = err && err.field ? $(`[name="${CSS.escape(err.field)}"]`, bodyEl) : null;
        if (field) { field.setAttribute('aria-invalid', 'true'); field.focus(); }
      }
    };
    form.addEventListener('submit', onSubmit);
    cancel.addEventListener('click', onCancel);
    dlg.addEventListener('cancel', onEsc);
    dlg.showModal();
    const first = $('input, select, textarea', bodyEl);
    (first || ok).focus();
  });
}

export function field({ label, name, type = 'text', value = '', hint, placeholder, attrs = {} }) {
  const id = 'f-' + name;
  return h('div', { class: 'field' },
    h('label', { class: 'field-label', for: id }, label),
    h('input', { id, name, type, value, placeholder, class: 'input', autocomplete: 'off', ...attrs }),
    hint ? h('span', { class: 'field-hint' }, hint) : null);
}

// ---- live indicator ----

const liveText = { idle: 'Offline', connecting: 'Connecting…', live: 'Live', reconnecting: 'Reconnecting…', polling: 'Polling', offline: 'Offline' };

export function setLive(state, title, text) {
  const el = $('#live');
  if (!el) return;
  el.dataset.state = state;
  $('.live-text', el).textContent = text || liveText[state] || state;
  el.title = title || {
    live: 'Following the region\'s events as they happen',
    polling: 'The event stream is unavailable; refreshing every few seconds',
    reconnecting: 'The event stream dropped; reconnecting',
  }[state] || '';
}

// ---- login and start ----

function showLogin(probe, message) {
  const main = $('#main');
  const login = $('#login');
  const form = $('#login-form');
  const input = $('#token');
  const err = $('#login-error');
  const submit = $('#login-submit');
  main.hidden = true;
  login.hidden = false;
  $('#signout').hidden = true;
  document.body.dataset.auth = 'login';
  err.hidden = !message;
  err.textContent = message || '';
  input.value = '';
  input.removeAttribute('aria-invalid');
  input.focus();
  return new Promise((resolve) => {
    const onSubmit = async (e) => {
      e.preventDefault();
      const token = input.value.trim();
      if (!token) {
        err.textContent = 'Enter a token.';
        err.hidden = false;
        input.setAttribute('aria-invalid', 'true');
        input.focus();
        return;
      }
      submit.disabled = true;
      submit.replaceChildren(h('span', { class: 'spinner', 'aria-hidden': 'true' }), 'Signing in…');
      try {
        await api(probe, { token });
        auth.set(token);
        form.removeEventListener('submit', onSubmit);
        login.hidden = true;
        resolve();
      } catch (ex) {
        err.textContent = ex.status === 401 ? 'This token was not accepted. Check it and try again.' : describeError(ex);
        err.hidden = false;
        input.setAttribute('aria-invalid', 'true');
        input.select();
      } finally {
        submit.disabled = false;
        submit.textContent = 'Sign in';
      }
    };
    form.addEventListener('submit', onSubmit);
  });
}

function showMain() {
  const main = $('#main');
  $('#login').hidden = true;
  main.hidden = false;
  $('#signout').hidden = !(authRequired && auth.token);
  document.body.dataset.auth = authRequired ? 'token' : 'open';
}

// start signs in if the API wants a token (an anonymous probe answered
// 401) and then runs the page. A later 401 (a revoked token) brings the
// login back; the page goes on once signed in again.
export async function start(run) {
  const probe = document.body.dataset.probe || '/v1/status';
  let relogin = null;
  unauthenticatedHandler = () => {
    if (relogin) return;
    authRequired = true;
    const had = auth.token;
    auth.clear();
    relogin = showLogin(probe, had ? 'Your token is no longer accepted. Sign in again.' : '').then(() => {
      relogin = null;
      showMain();
      window.dispatchEvent(new Event('strata:signedin'));
    });
  };
  $('#signout').addEventListener('click', () => {
    auth.clear();
    unauthenticatedHandler();
  });

  try {
    await api(probe, { anonymous: true });
    authRequired = false;
  } catch (e) {
    // Only a 401 says a token is needed; anything else (an unreachable
    // server, a region still loading) is left to the page, which shows it
    // inline and retries.
    authRequired = e.status === 401;
  }
  if (authRequired) {
    let message = '';
    if (auth.token) {
      try {
        await api(probe, { token: auth.token });
      } catch (e) {
        if (e.status === 401) {
          auth.clear();
          message = 'Your saved token is no longer accepted. Sign in again.';
        }
      }
    }
    if (!auth.token) await showLogin(probe, message);
  }
  showMain();
  run();
}

// ---- refreshing ----

// refresher runs load now, on demand (soon: coalesced over a short
// window, so a burst of events costs one call) and every interval() ms as
// a fallback; it never runs two loads at once and rests while the tab is
// hidden. stop() ends it and resolves once a load under way is done (an
// action that makes the page's object go stops it first, so that no load
// asks for what is gone); resume() starts it again.
export function refresher(load, interval) {
  let running = null; // the load under way
  let again = false;
  let stopped = false;
  let timer = 0;
  let soonTimer = 0;
  const schedule = () => {
    clearTimeout(timer);
    if (!stopped) timer = setTimeout(run, interval());
  };
  async function run() {
    clearTimeout(soonTimer);
    soonTimer = 0;
    if (stopped) return;
    if (running) { again = true; return; }
    if (document.hidden) { schedule(); return; }
    running = (async () => { try { await load(); } catch (e) { console.error(e); } })();
    await running;
    running = null;
    if (again) { again = false; run(); return; }
    schedule();
  }
  document.addEventListener('visibilitychange', () => { if (!document.hidden) run(); });
  window.addEventListener('strata:signedin', () => run());
  return {
    now: run,
    soon(ms = 250) { if (!soonTimer && !stopped) soonTimer = setTimeout(run, ms); },
    async stop() {
      stopped = true;
      again = false;
      clearTimeout(timer);
      clearTimeout(soonTimer);
      soonTimer = 0;
      if (running) await running;
    },
    resume() { stopped = false; run(); },
  };
}

// ---- pods and probes: what both consoles show of a replica's containers ----

export const containerTone = { running: 'ok', waiting: 'warn', terminated: 'neutral' };

// probeLine is a probe as stratactl describe prints it, in kubectl's
// words, with the defaults filled in: "http-get http://:8080/ready
// delay=0s timeout=1s period=10s #success=1 #failure=3".
export function probeLine(p) {
  let handler = '';
  if (p.httpGet) handler = `http-get ${(p.httpGet.scheme || 'http').toLowerCase()}://${p.httpGet.host || ''}:${p.httpGet.port}${p.httpGet.path || '/'}`;
  else if (p.tcpSocket) handler = `tcp-socket :${p.tcpSocket.port}`;
  else if (p.grpc) handler = `grpc :${p.grpc.port}${p.grpc.service ? ' ' + p.grpc.service : ''}`;
  else if (p.exec) handler = `exec [${(p.exec.command || []).join(' ')}]`;
  else if (p.guestAgent) handler = 'guest-agent ping';
  return `${handler} delay=${p.initialDelaySeconds || 0}s timeout=${p.timeoutSeconds ?? 1}s period=${p.periodSeconds ?? 10}s #success=${p.successThreshold ?? 1} #failure=${p.failureThreshold ?? 3}`;
}

export const probeKinds = [['startupProbe', 'Startup'], ['readinessProbe', 'Readiness'], ['livenessProbe', 'Liveness']];

// podContainers are a compute spec's containers in the order they start:
// the init containers, the main one (the spec's own fields), the others.
export function podContainers(c) {
  return [
    ...(c.initContainers || []).map((x) => ({ ...x, init: true })),
    { name: 'main', image: c.image, startupProbe: c.startupProbe, readinessProbe: c.readinessProbe, livenessProbe: c.livenessProbe },
    ...(c.containers || []),
  ];
}

// hasPod says whether a compute spec is worth showing container by
// container: a pod, or a container with probes.
export function hasPod(c) {
  return !!c && !!((c.initContainers || []).length || (c.containers || []).length || probeKinds.some(([k]) => c[k]));
}

// containerMessage is a container's message, with how long until a
// container waiting out its back-off starts again, counted from its
// nextStartAt now rather than when its node wrote the status.
export function containerMessage(c) {
  const msg = c.message || '';
  if (!c.nextStartAt) return msg;
  const left = Math.max(0, Math.round((Date.parse(c.nextStartAt) - Date.now()) / 1000));
  return msg + (left > 0 ? `, next start in ${left}s` : ', starting');
}

// containersReady is a replica's ready containers out of those that run,
// its init containers apart ("1/2", as kubectl get pods).
export function containersReady(rep) {
  const cs = (rep.status && rep.status.containers) || [];
  const init = new Set(((rep.spec && rep.spec.compute && rep.spec.compute.initContainers) || []).map((c) => c.name));
  const run = cs.filter((c) => !init.has(c.name));
  return `${run.filter((c) => c.ready).length}/${run.length}`;
}

// containerRestarts is the sum of a replica's containers' restarts, or its
// own count when it reports no containers.
export function containerRestarts(rep) {
  const st = rep.status || {};
  const cs = st.containers || [];
  return cs.length ? cs.reduce((n, c) => n + (c.restarts || 0), 0) : (st.restarts || 0);
}

// ---- DNS names: what both consoles show of a resource's names ----

// dnsForms are the name forms a page carries in el's data attributes
// (webconsole.Names: package dns's spelling, with {tenant}, {resource},
// {region}, {replica}, {port} and {proto} for the labels), or null.
export function dnsForms(el) {
  return el && el.dataset.service ? { ...el.dataset } : null;
}

// dnsName fills a form's labels in, lowercased as the name server
// answers them.
export function dnsName(form, labels) {
  return form.replace(/\{(\w+)\}/g, (_, k) => String(labels[k] ?? '').toLowerCase());
}

// onNetwork says whether a replica is a container with an address on a
// region network: what the nodes' name servers hold.
export function onNetwork(rep) {
  return rep.provider === 'container' && !!(rep.network && rep.network.address);
}

// addrKey orders addresses as answers are: IPv4 by number, before IPv6.
function addrKey(a) {
  const v4 = /^(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(a);
  return v4 ? '4' + v4.slice(1).map((n) => n.padStart(3, '0')).join('.') : '6' + a;
}

// namedPorts are a compute spec's ports that have SRV names (ComputeSpec.AllPorts
// with a name): the main container's, then the others', protocol lowercase.
function namedPorts(c) {
  return [...(c.ports || []), ...(c.containers || []).flatMap((x) => x.ports || [])]
    .filter((p) => p.name && p.containerPort > 0 && p.containerPort <= 65535)
    .map((p) => ({ name: p.name, port: p.containerPort, proto: (p.protocol || 'tcp').toLowerCase() }));
}

// resourceNames are a resource's names as stratactl describe lists them:
// the region-less name and its SRV names, then per region (regions, else
// those it is scheduled to or has replicas in, by name) its name, SRV
// names and the ready replicas it answers, each with its own name; null
// unless it is a Compute resource whose container replicas are on a
// region network. answered marks, per replica id, whether a name answers it.
export function resourceNames(forms, res, reps, regions) {
  const c = res.spec && res.spec.compute;
  if (!forms || res.kind !== 'Compute' || !c || !reps.some(onNetwork)) return null;
  const labels = { tenant: res.tenant, resource: res.name };
  const ports = namedPorts(c);
  const srv = (form, region) => ports.map((p) => ({ name: dnsName(form, { ...labels, region, port: p.name, proto: p.proto }), port: p.port, proto: p.proto }));
  regions = regions || [...new Set([...((res.schedule && res.schedule.regions) || []).map((t) => t.name), ...reps.map((x) => x.region)])].filter(Boolean).sort();
  const answered = {};
  const replicaName = (x) => dnsName(forms.replica, { ...labels, region: x.region, replica: x.id });
  for (const x of reps) if (onNetwork(x)) answered[x.id] = { name: replicaName(x), ready: x.phase === 'ready' };
  return {
    zone: forms.zone, name: dnsName(forms.service, labels), srv: srv(forms.srv, ''), answered,
    regions: regions.map((region) => ({
      region, name: dnsName(forms.regional, { ...labels, region }), srv: srv(forms.regionalSrv, region),
      endpoints: reps.filter((x) => x.region === region && x.phase === 'ready' && onNetwork(x))
        .map((x) => ({ replica: x.id, name: replicaName(x), address: x.network.address }))
        .sort((a, b) => addrKey(a.address).localeCompare(addrKey(b.address)) || a.replica.localeCompare(b.replica)),
    })),
  };
}

// namesEntries are a names list's entries ({name, role, answers: the
// Answers column's children}), in describe's order: the region-less name,
// its SRV names, then each region's.
export function namesEntries(n) {
  const entry = (name, role, ...answers) => ({ name, role, answers });
  const srv = (s) => entry(s.name, 'srv', `SRV: port ${s.port}/${s.proto} of each ready replica`);
  const endpoints = (eps) => (eps.length
    ? eps.flatMap((e, i) => [i ? ', ' : '', h('span', { class: 'mono', title: e.name }, e.replica), ' ', h('span', { class: 'mono' }, e.address)])
    : [h('span', { class: 'muted' }, 'no ready replica')]);
  return [
    entry(n.name, 'any-region', "the asking node's region, else the first by name with a ready replica"),
    ...n.srv.map(srv),
    ...n.regions.flatMap((r) => [entry(r.name, 'region', ...endpoints(r.endpoints)), ...r.srv.map(srv)]),
  ];
}

// namesRows are namesEntries as table rows (Name, Answers).
export function namesRows(n) {
  return namesEntries(n).map((e) => h('tr', { dataset: { name: e.name, role: e.role } }, h('td', { class: 'mono' }, e.name), h('td', {}, ...e.answers)));
}
