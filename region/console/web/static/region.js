// Strata region console: the nodes, resources and events pages.
import {
  $, $$, h, api, apiAll, auth, ApiError, start, refresher, setLive, sleep, toast,
  confirmDialog, field, showAlert, clearAlert, describeError,
  pill, bar, pct, cpu, mem, memValue, memUnit, plural, shortID, time, ago, clock, absolute, relTime,
  healthTone, conditionTone, phaseTone, drainTone,
  containerTone, probeLine, probeKinds, podContainers, hasPod, containersReady, containerRestarts, containerMessage,
  dnsForms, resourceNames, namesEntries,
} from './common.js';

const region = document.body.dataset.region;

// ---- pods and probes ----

// containerTable is the containers of replicas as their nodes report
// them: state, ready, restarts, the last exit code and reason, the
// message. It is a table of its own below the replicas, not rows among
// them, so that the replicas' rows stay one per replica.
function containerTable(reps) {
  const rows = reps.flatMap((rep) => ((rep.status && rep.status.containers) || []).map((c) => h('tr', { dataset: { containersOf: rep.id, container: c.name, state: c.state, ready: String(!!c.ready), restarts: String(c.restarts || 0), reason: c.reason || '' } },
    h('td', { class: 'mono', title: rep.id, style: { whiteSpace: 'nowrap' } }, shortID(rep.id)),
    h('td', { class: 'mono' }, c.name),
    h('td', {}, pill(c.state || 'unknown', containerTone[c.state] || 'neutral')),
    h('td', {}, c.ready ? pill('ready', 'ok') : pill('not ready', c.state === 'terminated' ? 'neutral' : 'warn')),
    h('td', { class: 'num' }, String(c.restarts || 0)),
    h('td', { class: 'num mono' }, c.exitCode === undefined || c.exitCode === null ? '—' : String(c.exitCode)),
    h('td', { class: 'reason-cell' }, c.reason ? h('b', { class: c.reason === 'Completed' ? '' : 'tone-err' }, c.reason) : h('span', { class: 'muted' }, '—'),
      c.message ? [': ', h('span', { dataset: { role: 'message' } }, containerMessage(c))] : null),
    h('td', { class: 'time-cell' }, c.startedAt ? relTime(c.startedAt) : '—'))));
  if (!rows.length) return null;
  return h('table', { class: 'table section-gap', dataset: { role: 'containers' }, 'aria-label': 'Containers' },
    h('thead', {}, h('tr', {}, ['Replica', 'Container', 'State', 'Ready', 'Restarts', 'Exit code', 'Reason', 'Started'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, rows));
}

// ---- live events ----

// liveEvents follows the region's events: server-sent events from the
// console's stream (after trading the token for a ticket), or, when the
// stream keeps failing, polling GET /v1/events. onEvent gets each event
// once, oldest first.
function liveEvents({ backlog = 0, onEvent, onConnected }) {
  let cursor = '';
  let es = null;
  let fails = 0;
  let polling = false;
  let started = false;

  const deliver = (ev) => {
    cursor = ev.id;
    try { onEvent(ev); } catch (e) { console.error(e); }
  };

  async function connect() {
    if (polling) return;
    setLive(fails ? 'reconnecting' : 'connecting');
    let ticket = '';
    try {
      const t = await api('/console/events/ticket', { method: 'POST' });
      ticket = (t && t.ticket) || '';
    } catch (e) {
      if (e.status === 401) {
        setLive('offline', 'Signed out');
        window.addEventListener('strata:signedin', connect, { once: true });
        return;
      }
      return failed();
    }
    const q = new URLSearchParams();
    if (ticket) q.set('ticket', ticket);
    if (cursor) q.set('after', cursor);
    else if (backlog && !started) q.set('backlog', String(backlog));
    es = new EventSource('events/stream?' + q);
    es.addEventListener('ready', (m) => {
      const first = !started;
      started = true;
      fails = 0;
      setLive('live');
      try {
        const d = JSON.parse(m.data);
        if (!cursor && d.cursor) cursor = d.cursor;
      } catch { /* ignore */ }
      if (onConnected) onConnected(first);
    });
    es.addEventListener('event', (m) => {
      let ev;
      try { ev = JSON.parse(m.data); } catch { return; }
      deliver(ev);
    });
    es.onerror = () => {
      es.close();
      es = null;
      failed();
    };
  }

  function failed() {
    fails++;
    if (fails >= 4) {
      // The stream is unavailable (a console without an event log, a proxy
      // that buffers): poll the REST API, and try the stream again later.
      polling = true;
      setLive('polling');
      poll();
      setTimeout(() => { polling = false; fails = 2; connect(); }, 60000);
      return;
    }
    setLive('reconnecting');
    setTimeout(connect, Math.min(500 * 2 ** fails, 8000));
  }

  async function poll() {
    while (polling) {
      try {
        const q = cursor ? `after=${encodeURIComponent(cursor)}&limit=500` : `limit=${backlog || 1}`;
        const body = await api('/v1/events?' + q);
        const items = (body && body.items) || [];
        if (!cursor && !backlog && !started) {
          if (items.length) cursor = items[items.length - 1].id;
        } else {
          items.forEach(deliver);
        }
        started = true;
      } catch (e) { /* the page shows API errors; keep polling */ }
      await sleep(3000);
    }
  }

  connect();
  return { get live() { return $('#live')?.dataset.state === 'live'; } };
}

function eventTone(ev) {
  if (ev.type === 'Warning') return 'warn';
  if (ev.reason === 'DrainFinished') return /^succeeded/.test(ev.message || '') ? 'ok' : 'err';
  if (/Fail|Error|Down|Lost/.test(ev.reason)) return 'err';
  if (/Ready|Succeeded|Registered|Up$|Moved|Uncordoned|Recovered/.test(ev.reason)) return 'ok';
  return 'info';
}

// ---- nodes ----

const conditionOrder = (t) => ({ CRI: 0, CNI: 1, CSI: 2 }[t] ?? (t.startsWith('provider/') ? 3 : 4));

function healthOf(n) { return (n.status && n.status.health) || 'Unknown'; }
function drainOf(n) { return (n.status && n.status.drain) || null; }
function draining(n) { const d = drainOf(n); return !!d && d.state === 'running'; }
function worstCondition(n) {
  const cs = (n.status && n.status.conditions) || [];
  if (cs.some((c) => c.status === 'Error')) return 'Error';
  if (cs.some((c) => c.status === 'Warning')) return 'Warning';
  return 'Ready';
}
function needsAttention(n) { return healthOf(n) !== 'Up' || worstCondition(n) !== 'Ready' || (drainOf(n) && drainOf(n).state === 'failed'); }

function nodesPage() {
  const grid = $('#nodes');
  const summary = $('#summary');
  const alertBox = $('#alert');
  const filter = $('#filter');
  const show = $('#show');
  const activity = $('#activity');
  const cards = new Map(); // name → {el, sig}
  let nodes = [];
  let loaded = false;

  const params = new URLSearchParams(location.search);
  if (params.get('q')) filter.value = params.get('q');
  if (params.get('show')) show.value = params.get('show');

  const r = refresher(load, () => (nodes.some(draining) ? 2000 : stream.live ? 6000 : 3000));

  async function load() {
    try {
      const body = await apiAll('/v1/nodes');
      nodes = ((body && body.items) || []).slice().sort((a, b) => a.name.localeCompare(b.name));
      loaded = true;
      clearAlert(alertBox);
      render();
    } catch (e) {
      if (e.status === 401) return;
      showAlert(alertBox, e, loaded ? 'Nodes could not be refreshed; showing the last known state' : 'Nodes could not be loaded');
      if (!loaded) renderGridMessage('Nodes could not be loaded.', describeError(e));
    }
  }

  function renderGridMessage(title, text, action) {
    cards.clear();
    grid.setAttribute('aria-busy', 'false');
    grid.replaceChildren(h('div', { class: 'card grid-empty' },
      h('div', { class: 'empty-title' }, title), h('div', {}, text), action ? h('div', { style: { marginTop: '14px' } }, action) : null));
  }

  function matches(n) {
    const q = filter.value.trim().toLowerCase();
    if (q) {
      const hay = [n.name, n.zone || '', healthOf(n), ...Object.entries(n.labels || {}).map(([k, v]) => `${k}=${v}`)].join(' ').toLowerCase();
      if (!q.split(/\s+/).every((w) => hay.includes(w))) return false;
    }
    switch (show.value) {
      case 'attention': return needsAttention(n);
      case 'cordoned': return !n.schedulable;
      case 'draining': return draining(n);
      default: return true;
    }
  }

  function render() {
    grid.setAttribute('aria-busy', 'false');
    renderSummary();
    if (!nodes.length) {
      renderGridMessage('No nodes yet',
        `No agent has registered with region ${region}. Nodes appear here as soon as an agent started with this region's endpoint connects.`);
      return;
    }
    const visible = nodes.filter(matches);
    if (!visible.length) {
      renderGridMessage('No nodes match', 'Nothing matches the current filter.',
        h('button', { type: 'button', class: 'btn', onclick: () => { filter.value = ''; show.value = 'all'; render(); filter.focus(); } }, 'Clear filter'));
      return;
    }
    // Keyed update: a card is rebuilt only when its node changed, and the
    // focused button keeps its focus.
    const focusedAction = document.activeElement && document.activeElement.closest && document.activeElement.closest('.node')
      ? { node: document.activeElement.closest('.node').dataset.node, action: document.activeElement.dataset.action } : null;
    const wanted = [];
    for (const n of visible) {
      const sig = JSON.stringify(n);
      let entry = cards.get(n.name);
      if (!entry || entry.sig !== sig) {
        const el = nodeCard(n);
        if (entry) el.classList.add('flash');
        if (entry && entry.el.isConnected) entry.el.replaceWith(el);
        entry = { el, sig };
        cards.set(n.name, entry);
      }
      wanted.push(entry.el);
    }
    const names = new Set(visible.map((n) => n.name));
    for (const k of cards.keys()) if (!names.has(k)) cards.delete(k);
    const current = Array.from(grid.children);
    if (current.length !== wanted.length || current.some((el, i) => el !== wanted[i])) grid.replaceChildren(...wanted);
    if (focusedAction && focusedAction.action) {
      const el = $(`.node[data-node="${CSS.escape(focusedAction.node)}"] [data-action="${focusedAction.action}"]`, grid);
      if (el && document.activeElement !== el && (document.activeElement === document.body || !document.activeElement)) el.focus();
    }
  }

  function renderSummary() {
    const total = nodes.length;
    const by = { Up: 0, Suspect: 0, Down: 0, Unknown: 0 };
    let cap = { c: 0, m: 0 };
    let alloc = { c: 0, m: 0 };
    let replicas = 0;
    let cordoned = 0;
    let drains = 0;
    for (const n of nodes) {
      by[healthOf(n)] = (by[healthOf(n)] || 0) + 1;
      cap.c += n.capacity.milliCPU || 0;
      cap.m += n.capacity.memoryMiB || 0;
      const a = (n.status && n.status.allocated) || {};
      alloc.c += a.milliCPU || 0;
      alloc.m += a.memoryMiB || 0;
      replicas += (n.status && n.status.replicas) || 0;
      if (!n.schedulable) cordoned++;
      if (draining(n)) drains++;
    }
    const stat = (label, value, note, extra) => h('div', { class: 'stat' },
      h('div', { class: 'stat-label' }, label), h('div', { class: 'stat-value' }, value), note ? h('div', { class: 'stat-note' }, note) : null, extra || null);
    const healthNote = [];
    for (const [k, tone] of [['Up', 'ok'], ['Suspect', 'warn'], ['Down', 'err']]) {
      healthNote.push(h('span', { class: 'tone-' + tone }, h('span', { class: 'dot' })), h('span', {}, `${by[k]} ${k.toLowerCase()}  `));
    }
    const cpuPct = pct(alloc.c, cap.c);
    const memPct = pct(alloc.m, cap.m);
    summary.replaceChildren(
      stat('Nodes up', [String(by.Up), h('small', {}, ` / ${total}`)], healthNote),
      stat('Schedulable', [String(total - cordoned), h('small', {}, ` / ${total}`)],
        drains ? `${plural(drains, 'drain')} running` : cordoned ? `${cordoned} cordoned` : 'none cordoned'),
      stat('Replicas', String(replicas), 'placed on these nodes'),
      stat('CPU allocated', [cpu(alloc.c), h('small', {}, ` / ${cpu(cap.c)} vCPU`)], null, bar(cpuPct)),
      stat('Memory allocated', [memValue(alloc.m), h('small', {}, ` ${memUnit(alloc.m)} / ${mem(cap.m)}`)], null, bar(memPct)),
    );
  }

  // ---- one node ----

  function nodeCard(n) {
    const health = healthOf(n);
    const st = n.status || {};
    const d = drainOf(n);
    const running = draining(n);
    const card = h('article', {
      class: 'card node',
      'aria-label': `Node ${n.name}`,
      dataset: {
        node: n.name, health, schedulable: String(!!n.schedulable), replicas: st.replicas || 0,
        drain: d ? d.state : '',
      },
    });

    const healthPill = pill(health, healthTone[health] || 'neutral', {
      class: 'tip', tabindex: '0', dataset: { role: 'health', tip: [st.reason, time(st.since) ? 'since ' + absolute(time(st.since)) : ''].filter(Boolean).join(' · ') || health },
    });
    const schedPill = n.schedulable
      ? pill('Schedulable', 'neutral', { dataset: { role: 'schedulable' } })
      : pill(running ? 'Draining' : 'Cordoned', running ? 'info' : 'warn', { dataset: { role: 'schedulable' } });

    card.append(h('header', { class: 'node-head' },
      h('div', { class: 'node-title' },
        h('h3', { title: n.name }, n.name),
        h('div', { class: 'node-sub' },
          n.zone ? h('span', {}, 'zone ' + n.zone) : null,
          n.agentVersion ? h('span', {}, '· agent ' + n.agentVersion) : null)),
      h('div', { class: 'node-pills' }, healthPill, schedPill)));

    if (health !== 'Up') {
      card.append(h('div', { class: 'note ' + (health === 'Down' ? 'note-err' : 'note-warn') },
        h('span', { class: 'dot', 'aria-hidden': 'true' }),
        h('span', { class: 'note-text' }, h('b', {}, health), ' ', relTime(st.since, { prefix: 'since ' }), st.reason ? ' — ' + st.reason : '')));
    }
    if (!n.schedulable) {
      card.append(h('div', { class: 'note note-warn', dataset: { role: 'cordon' } },
        h('span', { class: 'dot', 'aria-hidden': 'true' }),
        h('span', { class: 'note-text' },
          h('b', {}, 'Cordoned'), n.cordonedBy ? ` by ${n.cordonedBy}` : '', ' ', n.cordonedAt ? relTime(n.cordonedAt) : '',
          n.cordonReason ? [' — ', h('q', {}, n.cordonReason)] : ' — no new replicas are placed here')));
    }

    // Conditions.
    const conds = ((st.conditions) || []).slice().sort((a, b) => conditionOrder(a.type) - conditionOrder(b.type) || a.type.localeCompare(b.type));
    card.append(h('div', {},
      h('div', { class: 'section-label' }, 'Conditions'),
      h('div', { class: 'conds' }, conds.length ? conds.map(conditionBadge) : h('span', { class: 'muted', style: { fontSize: '0.85rem' } }, 'None reported yet'))));

    // Capacity and allocation.
    const a = st.allocated || {};
    card.append(h('div', { class: 'meters' },
      meter('CPU', a.milliCPU, n.capacity.milliCPU, (v) => cpu(v), 'vCPU'),
      meter('Memory', a.memoryMiB, n.capacity.memoryMiB, (v) => memValue(v), null, (used, total) => `${memValue(used)} ${memUnit(used)} / ${mem(total)}`)));

    card.append(h('dl', { class: 'facts' },
      h('div', {}, h('dt', {}, 'Replicas'), h('dd', { class: 'big', dataset: { role: 'replicas' } }, String(st.replicas || 0))),
      h('div', {}, h('dt', {}, health + ' since'), h('dd', {}, relTime(st.since))),
      h('div', {}, h('dt', {}, 'Registered'), h('dd', {}, relTime(n.registeredAt)))));

    const labels = Object.entries(n.labels || {}).sort(([x], [y]) => x.localeCompare(y));
    if (labels.length) {
      card.append(h('div', {}, h('div', { class: 'section-label' }, 'Labels'),
        h('div', { class: 'labels' }, labels.map(([k, v]) => h('span', { class: 'chip', title: `${k}=${v}` }, `${k}=${v}`)))));
    }

    if (d) card.append(drainPanel(d));

    // Actions.
    const actions = h('footer', { class: 'node-actions' });
    if (n.schedulable) {
      actions.append(h('button', { type: 'button', class: 'btn btn-sm', dataset: { action: 'cordon', node: n.name }, onclick: () => cordon(n) }, 'Cordon'));
    } else {
      actions.append(h('button', {
        type: 'button', class: 'btn btn-sm', dataset: { action: 'uncordon', node: n.name }, disabled: running,
        title: running ? 'The node stays cordoned until its drain finishes' : null, onclick: () => uncordon(n),
      }, 'Uncordon'));
    }
    actions.append(h('button', {
      type: 'button', class: 'btn btn-sm', dataset: { action: 'drain', node: n.name }, disabled: running,
      title: running ? 'A drain is running' : null, onclick: () => drain(n),
    }, d && d.state !== 'running' ? 'Drain again…' : 'Drain…'));
    actions.append(h('span', { class: 'spacer' }));
    actions.append(h('a', { class: 'btn btn-sm', href: 'resources?node=' + encodeURIComponent(n.name), title: 'Resources with replicas on this node' }, 'Replicas'));
    card.append(actions);
    return card;
  }

  function conditionBadge(c) {
    const tone = conditionTone[c.status] || 'neutral';
    const icon = { Ready: '✓', Warning: '!', Error: '✕' }[c.status] || '?';
    const tip = [`${c.type}: ${c.status}`, c.reason, c.message, time(c.since) ? 'since ' + absolute(time(c.since)) : ''].filter(Boolean).join(' — ');
    return h('span', {
      class: `badge pill-${tone} tip`, tabindex: '0', 'aria-label': tip,
      dataset: { tip, condition: c.type, status: c.status },
    }, h('span', { 'aria-hidden': 'true' }, icon), c.type);
  }

  function meter(name, used, total, fmt, unit, label) {
    const p = pct(used || 0, total || 0);
    const text = label ? label(used || 0, total || 0) : `${fmt(used || 0)} / ${fmt(total || 0)} ${unit}`;
    return h('div', { class: 'meter' },
      h('div', { class: 'meter-head' }, h('span', { class: 'meter-name' }, name), h('span', { class: 'meter-val' }, text, ` · ${Math.round(p)}%`)),
      h('div', { role: 'meter', 'aria-label': `${name} allocated`, 'aria-valuemin': '0', 'aria-valuemax': '100', 'aria-valuenow': p.toFixed(0), 'aria-valuetext': text },
        bar(p)));
  }

  function drainPanel(d) {
    const tone = drainTone[d.state] || 'neutral';
    const total = d.total || 0;
    const done = d.moved || 0;
    const p = total ? pct(done, total) : d.state === 'running' ? 0 : 100;
    const title = { running: 'Draining', succeeded: 'Drain succeeded', failed: 'Drain failed', cancelled: 'Drain cancelled' }[d.state] || 'Drain ' + d.state;
    const steps = (d.steps || []).slice().reverse();
    const stepTone = { moved: 'ok', moving: 'info', forced: 'warn', failed: 'err', stopped: 'warn' };
    const started = time(d.startedAt);
    const finished = time(d.finishedAt);
    const deadline = time(d.deadline);
    return h('section', { class: 'drain', dataset: { state: d.state, role: 'drain' }, 'aria-label': title, 'aria-live': 'polite' },
      h('div', { class: 'drain-head' },
        h('span', { class: 'drain-title' }, d.state === 'running' ? h('span', { class: 'spinner', 'aria-hidden': 'true' }) : null, title),
        pill(d.state, tone, { dataset: { role: 'drain-state' } })),
      h('div', { role: 'progressbar', 'aria-label': 'Drain progress', 'aria-valuemin': '0', 'aria-valuemax': String(total || 100), 'aria-valuenow': String(total ? done : p) },
        bar(p, d.state === 'failed' ? 'err' : d.state === 'succeeded' ? 'ok' : 'info')),
      h('div', { class: 'drain-counts' },
        h('span', {}, h('b', { dataset: { role: 'moved' } }, String(done)), ` of ${total} moved`),
        h('span', {}, h('b', {}, String(d.remaining || 0)), ' remaining'),
        h('span', { class: d.failed ? 'tone-err' : '' }, h('b', {}, String(d.failed || 0)), ' failed'),
        h('span', {}, 'max parallel ', h('b', {}, String(d.maxParallel || 1)))),
      h('div', { class: 'drain-meta' },
        started ? ['Started ', relTime(d.startedAt)] : null,
        finished ? [' · finished ', relTime(d.finishedAt)] : deadline && d.state === 'running' ? [' · deadline ', relTime(d.deadline)] : null,
        d.reason ? [' · ', h('q', {}, d.reason)] : null,
        // The controller's message repeats the counts while all is well.
        d.message && !/^\s*(succeeded: )?\d+ moved, \d+ remaining, \d+ failed\s*$/.test(d.message) ? h('div', {}, d.message) : null),
      steps.length ? h('ol', { class: 'drain-steps', 'aria-label': 'Drain steps' }, steps.map((s) => h('li', {},
        h('span', { class: 'step-state tone-' + (stepTone[s.state] || 'neutral') }, s.state),
        h('span', { class: 'step-what', title: `${s.replica} of ${s.resource}${s.to ? ' → ' + s.to : ''}${s.message ? ' — ' + s.message : ''}` },
          h('span', { class: 'mono' }, shortID(s.replica)), ` ${s.resource}`, s.to ? ` → ${s.to}` : '', s.message && !s.to ? ` — ${s.message}` : ''),
        h('time', { title: absolute(time(s.at)) }, clock(time(s.at)))))) : null);
  }

  // ---- actions ----

  const nodePath = (n) => '/v1/nodes/' + encodeURIComponent(n.name);

  async function cordon(n) {
    const ok = await confirmDialog({
      title: `Cordon ${n.name}?`,
      body: [
        h('p', {}, 'No new replicas will be placed on this node. Replicas already running stay where they are; drain the node to move them.'),
        field({ label: 'Reason (optional)', name: 'reason', placeholder: 'e.g. kernel upgrade', hint: 'Shown on the node and recorded in its events.' }),
      ],
      confirmLabel: 'Cordon node',
      onConfirm: (v) => api(nodePath(n) + '/cordon', { method: 'POST', body: v.reason ? { reason: v.reason } : {} }),
    });
    if (ok) { toast(`${n.name} cordoned`); r.now(); }
  }

  async function uncordon(n) {
    const ok = await confirmDialog({
      title: `Uncordon ${n.name}?`,
      body: h('p', {}, 'The scheduler may place new replicas on this node again.'),
      confirmLabel: 'Uncordon node',
      onConfirm: () => api(nodePath(n) + '/uncordon', { method: 'POST' }),
    });
    if (ok) { toast(`${n.name} is schedulable again`); r.now(); }
  }

  async function drain(n) {
    const reps = (n.status && n.status.replicas) || 0;
    const ok = await confirmDialog({
      title: `Drain ${n.name}?`,
      danger: true,
      body: [
        h('p', {}, `The node is cordoned and its ${plural(reps, 'replica')} ${reps === 1 ? 'is' : 'are'} moved to other nodes, each one stopped once its replacement is ready. `,
          'Past the deadline, the remaining replicas are stopped without waiting.'),
        h('div', { class: 'field-row' },
          field({ label: 'Deadline', name: 'deadline', value: '10m', hint: 'A duration: 90s, 10m, 1h', attrs: { required: true, pattern: '^[0-9]+(\\.[0-9]+)?(ms|s|m|h)([0-9]+(\\.[0-9]+)?(ms|s|m|h))*$', spellcheck: 'false' } }),
          field({ label: 'Max parallel', name: 'maxParallel', type: 'number', value: '1', hint: 'Replicas moved at once', attrs: { min: '1', max: '1000', step: '1', required: true } })),
        field({ label: 'Reason (optional)', name: 'reason', placeholder: 'e.g. hardware replacement' }),
      ],
      confirmLabel: 'Start drain',
      onConfirm: (v) => {
        const deadline = (v.deadline || '').trim();
        if (!/^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$/.test(deadline)) throw new ApiError(400, 'InvalidArgument', 'deadline: enter a duration such as 90s, 10m or 1h', 'deadline');
        const mp = Number(v.maxParallel);
        if (!Number.isInteger(mp) || mp < 1) throw new ApiError(400, 'InvalidArgument', 'maxParallel: enter a whole number of at least 1', 'maxParallel');
        const body = { deadline, maxParallel: mp };
        if (v.reason) body.reason = v.reason;
        return api(nodePath(n) + '/drain', { method: 'POST', body });
      },
    });
    if (ok) { toast(`Draining ${n.name}`, 'info'); r.now(); }
  }

  // ---- activity ----

  let activityCount = 0;
  function addActivity(ev, fresh) {
    if (!activityCount) activity.replaceChildren();
    activityCount++;
    const li = h('li', { class: fresh ? 'new' : '', dataset: { reason: ev.reason } },
      h('span', { class: 'dot tone-' + eventTone(ev), 'aria-hidden': 'true' }),
      h('div', {},
        h('div', { class: 'act-head' }, h('span', { class: 'act-reason' }, ev.reason), relTime(ev.time)),
        ev.message ? h('div', { class: 'act-msg' }, ev.message) : null,
        ev.object ? h('div', { class: 'act-obj' }, ev.object) : null));
    activity.prepend(li);
    while (activity.children.length > 30) activity.lastElementChild.remove();
  }

  filter.addEventListener('input', () => { if (loaded) render(); });
  show.addEventListener('change', () => { if (loaded) render(); });

  let connectedOnce = false;
  const stream = liveEvents({
    backlog: 15,
    onEvent: (ev) => {
      addActivity(ev, connectedOnce);
      if (connectedOnce) r.soon();
    },
    onConnected: () => {
      if (!activityCount) activity.replaceChildren(h('li', { class: 'empty-inline' }, 'No events yet.'));
      if (connectedOnce) r.soon();
      connectedOnce = true;
    },
  });
  r.now();
}

// ---- resources ----

function resourcesPage() {
  const tbody = $('#resources tbody');
  const summary = $('#summary');
  const alertBox = $('#alert');
  const filter = $('#filter');
  const params = new URLSearchParams(location.search);
  const nodeFilter = params.get('node') || '';
  if (params.get('q')) filter.value = params.get('q');
  const expanded = new Set((params.get('open') || '').split(',').filter(Boolean));
  const replicas = new Map(); // key → {items, error}
  let nodeKeys = null; // with ?node=: the resources with replicas there
  let items = [];
  let loaded = false;

  const r = refresher(load, () => (stream.live ? 8000 : 4000));

  async function load() {
    try {
      const body = await apiAll('/v1/resources');
      items = ((body && body.items) || []).slice().sort((a, b) => keyOf(a).localeCompare(keyOf(b)));
      if (nodeFilter) {
        const reps = await apiAll('/v1/replicas?node=' + encodeURIComponent(nodeFilter));
        nodeKeys = new Set(((reps && reps.items) || []).map((x) => `${x.tenant}/${x.resource}`));
      }
      loaded = true;
      clearAlert(alertBox);
      await Promise.all([...expanded].filter((k) => items.some((p) => keyOf(p) === k)).map(loadReplicas));
      render();
    } catch (e) {
      if (e.status === 401) return;
      showAlert(alertBox, e, loaded ? 'Resources could not be refreshed; showing the last known state' : 'Resources could not be loaded');
      if (!loaded) tbody.replaceChildren(h('tr', {}, h('td', { colspan: '7', class: 'detail-empty', style: { padding: '28px', textAlign: 'center' } }, describeError(e))));
    }
  }

  const keyOf = (p) => `${p.resource.tenant || ''}/${p.resource.name}`;

  async function loadReplicas(key) {
    const [tenant, name] = key.split('/');
    try {
      const body = await apiAll(`/v1/resources/${encodeURIComponent(tenant)}/${encodeURIComponent(name)}/replicas`);
      replicas.set(key, { items: (body && body.items) || [] });
    } catch (e) {
      if (e.status === 401) return;
      replicas.set(key, { error: e });
    }
  }

  function matches(p) {
    if (nodeKeys && !nodeKeys.has(keyOf(p))) return false;
    const q = filter.value.trim().toLowerCase();
    if (!q) return true;
    const res = p.resource;
    const hay = [res.tenant, res.name, res.kind, res.spec && res.spec.flavor, res.status && res.status.phase].join(' ').toLowerCase();
    return q.split(/\s+/).every((w) => hay.includes(w));
  }

  function render() {
    renderSummary();
    const visible = items.filter(matches);
    if (!items.length) {
      tbody.replaceChildren(h('tr', {}, h('td', { colspan: '7' }, h('div', { class: 'empty' },
        h('div', { class: 'empty-title' }, 'No resources in this region yet'),
        h('div', {}, 'Resources are created through the global API; they appear here once the master places a share of them in ', region, '.')))));
      return;
    }
    if (!visible.length) {
      tbody.replaceChildren(h('tr', {}, h('td', { colspan: '7' }, h('div', { class: 'empty' },
        h('div', { class: 'empty-title' }, 'No resources match'),
        nodeFilter ? h('div', {}, `No resource has replicas on ${nodeFilter}. `, h('a', { href: 'resources' }, 'Show all resources')) : h('div', {}, 'Nothing matches the current filter.')))));
      return;
    }
    const focused = document.activeElement && document.activeElement.dataset ? document.activeElement.dataset.toggle : null;
    const rows = [];
    for (const p of visible) {
      const key = keyOf(p);
      rows.push(resourceRow(p, key));
      if (expanded.has(key)) rows.push(detailRow(key));
    }
    tbody.replaceChildren(...rows);
    if (focused) { const el = $(`[data-toggle="${CSS.escape(focused)}"]`, tbody); if (el) el.focus(); }
  }

  function renderSummary() {
    let want = 0, ready = 0, notReady = 0, errors = 0;
    for (const p of items) {
      const s = p.resource.status || {};
      want += s.replicas || 0;
      ready += s.ready || 0;
      if (s.phase !== 'ready') notReady++;
      if (s.phase === 'error') errors++;
    }
    const stat = (label, value, note, extra) => h('div', { class: 'stat' },
      h('div', { class: 'stat-label' }, label), h('div', { class: 'stat-value' }, value), note ? h('div', { class: 'stat-note' }, note) : null, extra || null);
    summary.replaceChildren(
      stat('Resources', String(items.length), nodeFilter ? `filtered to node ${nodeFilter}` : 'placed in this region'),
      stat('Replicas ready', [String(ready), h('small', {}, ` / ${want}`)], null, bar(pct(ready, want), ready === want ? 'ok' : 'info')),
      stat('Not ready', String(notReady), notReady ? 'provisioning, updating or failing' : 'every resource is ready'),
      stat('In error', String(errors), errors ? h('span', { class: 'tone-err' }, 'needs attention') : 'none'),
    );
  }

  // unplacedOf counts the share's replicas that found no node (the
  // master may move them to a region with headroom).
  function unplacedOf(s) {
    return Object.values(s.regions || {}).reduce((n, sh) => n + (sh.unplaced || 0), 0);
  }

  function resourceRow(p, key) {
    const res = p.resource;
    const s = res.status || {};
    const phase = s.phase || 'created';
    const open = expanded.has(key);
    const detailId = 'rep-' + key.replace(/[^a-zA-Z0-9_-]/g, '_');
    const toggle = () => {
      if (expanded.has(key)) expanded.delete(key); else expanded.add(key);
      const u = new URL(location.href);
      if (expanded.size) u.searchParams.set('open', [...expanded].join(',')); else u.searchParams.delete('open');
      history.replaceState(null, '', u);
      if (expanded.has(key) && !replicas.has(key)) {
        render();
        loadReplicas(key).then(render);
      } else render();
    };
    return h('tr', { class: 'res-row', 'aria-expanded': String(open), dataset: { resource: key, phase } },
      h('td', { class: 'col-toggle' }, h('button', {
        type: 'button', class: 'btn btn-icon', 'aria-expanded': String(open), 'aria-controls': detailId,
        'aria-label': `${open ? 'Hide' : 'Show'} replicas of ${key}`, dataset: { toggle: key }, onclick: toggle,
      }, h('span', { class: 'chev', 'aria-hidden': 'true' }, '▶'))),
      h('td', {},
        h('div', { class: 'res-name' }, res.tenant ? h('span', { class: 'res-tenant' }, res.tenant + ' / ') : null, res.name),
        h('div', { class: 'res-sub' }, h('span', {}, res.kind), res.spec && res.spec.flavor ? h('span', {}, '· ' + res.spec.flavor) : null,
          p.failoverFrom ? h('span', { class: 'tone-warn' }, '· failover from ' + p.failoverFrom) : null,
          unplacedOf(s) ? h('span', { class: 'tone-warn', dataset: { role: 'unplaced' } }, `· ${unplacedOf(s)} unplaced`) : null,
          res.deletionRequestedAt ? h('span', { class: 'tone-warn' }, '· being deleted') : null)),
      h('td', {}, pill(phase, phaseTone[phase] || 'neutral')),
      h('td', { class: 'ready-cell' }, h('div', { class: 'ready-num' }, `${s.ready || 0} / ${s.replicas ?? res.replicas ?? 0}`),
        bar(pct(s.ready || 0, s.replicas || 0), (s.ready || 0) >= (s.replicas || 0) && s.replicas ? 'ok' : 'info')),
      h('td', { class: 'num' }, s.revision || res.revision ? 'r' + (s.revision || res.revision) : '—'),
      h('td', { class: 'reason-cell' }, s.reason || h('span', { class: 'muted' }, '—')),
      h('td', { class: 'time-cell' }, relTime(s.updatedAt || p.updatedAt)));
  }

  function detailRow(key) {
    const detailId = 'rep-' + key.replace(/[^a-zA-Z0-9_-]/g, '_');
    const data = replicas.get(key);
    const res = (items.find((p) => keyOf(p) === key) || {}).resource;
    // This region's replicas (the region API may leave their region out).
    const names = data && data.items && res ? resourceNames(dnsForms($('#names-forms')), res, data.items.map((x) => ({ ...x, region: x.region || region })), [region]) : null;
    let content;
    if (!data) content = h('div', { class: 'detail-empty' }, h('span', { class: 'spinner', 'aria-hidden': 'true' }), 'Loading replicas…');
    else if (data.error) content = h('div', { class: 'detail-empty tone-err' }, 'Replicas could not be loaded — ', describeError(data.error));
    else if (!data.items.length) content = h('div', { class: 'detail-empty' }, 'No replicas in this region yet.');
    else {
      // With container statuses, READY is ready/running containers, and
      // the containers follow in a table of their own.
      const pods = data.items.some((x) => ((x.status && x.status.containers) || []).length);
      const cols = ['Replica', 'Node', 'Phase', ...(pods ? ['Ready'] : []), 'Address', 'Restarts', 'Reason', 'Since'];
      content = h('table', { class: 'subtable', 'aria-label': `Replicas of ${key}` },
        h('thead', {}, h('tr', {}, cols.map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, data.items.map((x) => {
          const st = x.status || {};
          const phase = x.phase || st.phase || 'created';
          const leaving = x.desired === 'destroyed' && phase !== 'destroyed';
          const cs = st.containers || [];
          return h('tr', { dataset: { replica: x.id, node: x.node || '' } },
            h('td', { class: 'mono', title: x.id }, shortID(x.id)),
            h('td', {}, x.node ? h('a', { href: './?q=' + encodeURIComponent(x.node), class: 'mono' }, x.node) : h('span', { class: 'muted' }, 'unscheduled')),
            h('td', {}, pill(phase, phaseTone[phase] || 'neutral'), leaving ? [' ', pill('stopping', 'neutral')] : null),
            pods ? h('td', { class: 'num', dataset: { role: 'ready' } }, cs.length ? containersReady(x) : '—') : null,
            h('td', { class: 'mono' }, st.address || (x.network && x.network.address) || h('span', { class: 'muted' }, '—'), replicaName(names, x.id)),
            h('td', { class: 'num', dataset: { role: 'restarts' } }, String(containerRestarts(x))),
            h('td', { class: 'reason-cell' }, st.reason || x.reason || h('span', { class: 'muted' }, '—')),
            h('td', { class: 'time-cell' }, relTime(st.since || x.scheduledAt || x.createdAt)));
        })));
      content = [content, containerTable(data.items)];
    }
    return h('tr', { class: 'detail-row', id: detailId }, h('td', { colspan: '7' }, probesList(res), namesList(names), content));
  }

  // namesList is a container resource's DNS names in this region, as
  // stratactl describe lists them: region-less, this region's with the
  // ready replicas it answers, SRV of named ports.
  function namesList(n) {
    if (!n) return null;
    return h('div', { dataset: { role: 'names' }, style: { marginBottom: '12px' } },
      h('div', { class: 'muted' }, `Names, under ${n.zone} (the agents' default zone); only ready replicas are answered:`),
      namesEntries(n).map((e) => h('div', { dataset: { name: e.name, role: e.role }, style: { paddingLeft: '1.5em' } },
        h('b', { class: 'mono' }, e.name), ' — ', ...e.answers)));
  }

  // replicaName is a replica's own name beside its address, and whether
  // it is answered (ready); nothing off the region network.
  function replicaName(n, id) {
    const a = n && n.answered[id];
    if (!a) return null;
    return h('div', { dataset: { role: 'replica-name', answered: String(a.ready) } },
      h('span', { class: 'muted' }, a.name), ' ', pill(a.ready ? 'answered' : 'not answered', a.ready ? 'ok' : 'neutral'));
  }

  // probesList is a pod's containers with their probes, as stratactl
  // describe prints them; nothing for a plain container.
  function probesList(res) {
    const c = res && res.spec && res.spec.compute;
    if (!hasPod(c)) return null;
    return h('div', { dataset: { role: 'probes' }, style: { marginBottom: '12px' } }, podContainers(c).map((x) => h('div', { dataset: { container: x.name, init: String(!!x.init) } },
      h('b', { class: 'mono' }, x.name), x.init ? [' ', pill('init', 'neutral')] : null, ' ', h('span', { class: 'mono muted' }, x.image || ''),
      probeKinds.filter(([k]) => x[k]).map(([k, label]) => h('div', { dataset: { probe: k }, style: { paddingLeft: '1.5em' } }, label + ': ', h('span', { class: 'mono' }, probeLine(x[k])))))));
  }

  filter.addEventListener('input', () => { if (loaded) render(); });
  let connected = false;
  const stream = liveEvents({
    onEvent: (ev) => {
      if (/^(resource|replica|node)\//.test(ev.object || '') || /Drain|Sched|Ready|Placement/.test(ev.reason)) r.soon(400);
    },
    onConnected: () => { if (connected) r.soon(); connected = true; },
  });
  r.now();
}

// ---- events ----

function eventsPage() {
  const feed = $('#feed');
  const filter = $('#filter');
  const pauseBtn = $('#pause');
  const count = $('#feed-count');
  const pausedPill = $('#feed-paused');
  const pendingEl = $('#feed-pending');
  const all = []; // newest last
  const pending = [];
  let type = 'all';
  let paused = false;
  let connected = false;
  const MAX = 1000;

  function matches(ev) {
    if (type !== 'all' && ev.type !== type) return false;
    const q = filter.value.trim().toLowerCase();
    if (!q) return true;
    const hay = [ev.reason, ev.object, ev.message, ev.type, ...Object.entries(ev.fields || {}).map(([k, v]) => `${k}=${v}`)].join(' ').toLowerCase();
    return q.split(/\s+/).every((w) => hay.includes(w));
  }

  function row(ev, fresh) {
    const d = time(ev.time);
    const fields = Object.entries(ev.fields || {}).filter(([, v]) => v);
    return h('li', { class: fresh ? 'new' : '', dataset: { id: ev.id, type: ev.type, reason: ev.reason } },
      h('time', { datetime: d ? d.toISOString() : '', title: absolute(d) }, clock(d)),
      h('span', { class: 'ev-reason' }, h('span', { class: 'dot tone-' + eventTone(ev), 'aria-hidden': 'true' }), h('span', { title: ev.reason }, ev.reason)),
      h('span', { class: 'ev-obj' }, ev.object || '—'),
      h('div', {}, h('div', { class: 'ev-msg' }, ev.message || ''),
        fields.length ? h('div', { class: 'ev-fields' }, fields.map(([k, v]) => h('span', { class: 'chip', title: `${k}=${v}` }, `${k}=${v}`))) : null));
  }

  function renderAll() {
    const visible = all.filter(matches);
    updateCount(visible.length);
    if (!visible.length) {
      feed.replaceChildren(h('li', { class: 'empty' },
        h('div', { class: 'empty-title' }, all.length ? 'No events match' : 'No events yet'),
        h('div', {}, all.length ? 'Nothing matches the current filter.' : `Events of region ${region} appear here as they happen.`)));
      return;
    }
    feed.replaceChildren(...visible.slice().reverse().map((ev) => row(ev, false)));
  }

  function updateCount(n) {
    count.textContent = all.length ? `${plural(n, 'event')}${n !== all.length ? ` of ${all.length}` : ''} · newest first` : 'No events yet';
  }

  function add(ev) {
    all.push(ev);
    if (all.length > MAX) all.shift();
    if (!connected) return; // the backlog renders at once on connect
    if (!matches(ev)) { updateCount(all.filter(matches).length); return; }
    if (feed.querySelector('.empty')) feed.replaceChildren();
    feed.prepend(row(ev, true));
    while (feed.children.length > MAX) feed.lastElementChild.remove();
    updateCount(all.filter(matches).length);
  }

  liveEvents({
    backlog: 200,
    onEvent: (ev) => {
      if (paused) { pending.push(ev); pendingEl.textContent = String(pending.length); return; }
      add(ev);
    },
    onConnected: (first) => { if (first) { connected = true; renderAll(); } },
  });

  filter.addEventListener('input', renderAll);
  for (const b of $$('.seg')) {
    b.addEventListener('click', () => {
      type = b.dataset.type;
      for (const o of $$('.seg')) o.setAttribute('aria-pressed', String(o === b));
      renderAll();
    });
  }
  pauseBtn.addEventListener('click', () => {
    paused = !paused;
    pauseBtn.setAttribute('aria-pressed', String(paused));
    pauseBtn.textContent = paused ? 'Resume' : 'Pause';
    pausedPill.hidden = !paused;
    if (!paused) { pending.splice(0).forEach(add); pendingEl.textContent = '0'; }
  });
}

start(() => {
  const page = document.body.dataset.page;
  if (page === 'nodes') nodesPage();
  else if (page === 'resources') resourcesPage();
  else if (page === 'events') eventsPage();
  document.body.dataset.started = 'true';
});
