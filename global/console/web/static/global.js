// Strata global console: the overview of regions and resources, a page
// per resource that acts on it, the network policies page, the configs
// and secrets page, the tokens page and the alert rules. Every action is a
// call of the global REST API (the one stratactl uses), behind a
// confirmation dialog.
import {
  $, h, api, start, refresher, setLive, showAlert, clearAlert, describeError,
  pill, bar, pct, plural, relTime, time, ago, absolute, clock, healthTone, phaseTone,
  confirmDialog, field, toast, ApiError, auth,
  containerTone, probeLine, probeKinds, podContainers, hasPod, containersReady, containerRestarts, containerMessage,
  dnsForms, resourceNames, namesRows,
} from './common.js';

const REFRESH_MS = 5000;

// ---- pods and probes ----

// containerTable is a replica's containers as its node reports them:
// state, ready, restarts, the last exit code and reason, the message.
function containerTable(rep) {
  return h('table', { class: 'subtable', 'aria-label': `Containers of ${rep.id}` },
    h('thead', {}, h('tr', {}, ['Container', 'State', 'Ready', 'Restarts', 'Exit code', 'Reason', 'Started'].map((c) => h('th', { scope: 'col' }, c)))),
    h('tbody', {}, rep.status.containers.map((c) => h('tr', { dataset: { container: c.name, state: c.state, ready: String(!!c.ready), restarts: String(c.restarts || 0), reason: c.reason || '' } },
      h('td', { class: 'mono' }, c.name),
      h('td', {}, pill(c.state || 'unknown', containerTone[c.state] || 'neutral')),
      h('td', {}, c.ready ? pill('ready', 'ok') : pill('not ready', c.state === 'terminated' ? 'neutral' : 'warn')),
      h('td', { class: 'num' }, String(c.restarts || 0)),
      h('td', { class: 'num mono' }, c.exitCode === undefined || c.exitCode === null ? '—' : String(c.exitCode)),
      h('td', { class: 'reason-cell' }, c.reason ? h('b', { class: c.reason === 'Completed' ? '' : 'tone-err' }, c.reason) : h('span', { class: 'muted' }, '—'),
        c.message ? [': ', h('span', { dataset: { role: 'message' } }, containerMessage(c))] : null),
      h('td', { class: 'time-cell' }, c.startedAt ? relTime(c.startedAt) : '—')))));
}

function overviewPage() {
  const alertBox = $('#alert');
  const summary = $('#summary');
  const cluster = $('#cluster');
  const regionsBody = $('#regions tbody');
  const resourcesBody = $('#resources tbody');
  let loaded = false;
  let lastOK = null;

  const r = refresher(load, () => REFRESH_MS);

  async function load() {
    try {
      const [status, resources] = await Promise.all([
        api('/v1/status'),
        api('/v1/resources?limit=200').catch((e) => ({ error: e })),
      ]);
      let regions = status.regions;
      if (!Array.isArray(regions)) {
        const body = await api('/v1/regions');
        regions = (body && body.items) || [];
      }
      regions = regions.slice().sort((a, b) => a.name.localeCompare(b.name));
      loaded = true;
      lastOK = new Date();
      clearAlert(alertBox);
      renderCluster(status);
      renderSummary(regions, resources);
      renderRegions(regions);
      renderResources(resources);
      await loadQuota(status.caller);
      setLive('polling', 'The overview refreshes every few seconds', 'Auto-refresh');
    } catch (e) {
      if (e.status === 401) return;
      setLive('offline', 'The global API did not answer', 'Offline');
      showAlert(alertBox, e, loaded ? 'The overview could not be refreshed; showing the state of ' + absolute(lastOK) : 'The overview could not be loaded');
      if (!loaded) {
        regionsBody.replaceChildren(h('tr', {}, h('td', { colspan: '9', class: 'detail-empty' }, describeError(e))));
      }
    }
  }

  function renderCluster(s) {
    const master = s.leader
      ? [h('b', { dataset: { role: 'master' } }, s.leader), s.isLeader ? ' (this replica)' : '', time(s.leaderSince) ? [' · since ', relTime(s.leaderSince)] : '']
      : [h('b', { class: 'tone-warn', dataset: { role: 'master' } }, 'no master elected')];
    cluster.replaceChildren(
      h('span', {}, 'Master ', ...master),
      h('span', {}, 'Answered by ', h('b', {}, s.id || '—')),
      h('span', {}, 'Version ', h('b', { dataset: { role: 'version' } }, s.version || '—')));
  }

  function renderSummary(regions, resources) {
    let up = 0, nodes = 0, nodesUp = 0, replicas = 0, ready = 0, placed = 0;
    for (const g of regions) {
      const s = g.status || {};
      if (s.health === 'Up') up++;
      nodes += s.nodes || 0;
      nodesUp += s.nodesUp || 0;
      replicas += s.replicas || 0;
      ready += s.ready || 0;
      placed += s.resources || 0;
    }
    const items = resources && !resources.error ? resources.items || [] : null;
    const stat = (label, value, note, extra) => h('div', { class: 'stat' },
      h('div', { class: 'stat-label' }, label), h('div', { class: 'stat-value' }, value), note ? h('div', { class: 'stat-note' }, note) : null, extra || null);
    const down = regions.length - up;
    summary.replaceChildren(
      stat('Regions up', [String(up), h('small', {}, ` / ${regions.length}`)],
        down ? h('span', { class: 'tone-err' }, `${down} not up`) : 'all healthy', bar(pct(up, regions.length), up === regions.length ? 'ok' : 'warn')),
      stat('Nodes up', [String(nodesUp), h('small', {}, ` / ${nodes}`)], nodes - nodesUp ? `${nodes - nodesUp} not up` : 'across every region',
        bar(pct(nodesUp, nodes), nodesUp === nodes ? 'ok' : 'warn')),
      stat('Resources', String(items ? items.length + (resources.continue ? '+' : '') : placed), items ? `${plural(placed, 'placement')} in regions` : 'placed in regions'),
      stat('Replicas ready', [String(ready), h('small', {}, ` / ${replicas}`)], replicas - ready ? `${replicas - ready} not ready` : 'all ready',
        bar(pct(ready, replicas), ready === replicas ? 'ok' : 'info')));
  }

  function consoleLink(g) {
    if (!g.consoleURL) return h('span', { class: 'muted', title: 'The region did not report a console address' }, 'no console');
    let url;
    try { url = new URL(g.consoleURL.endsWith('/') ? g.consoleURL : g.consoleURL + '/', location.href); } catch { return h('span', { class: 'muted' }, '—'); }
    if (!/^https?:$/.test(url.protocol)) return h('span', { class: 'muted' }, '—');
    return h('a', { class: 'btn btn-sm', href: url.href, dataset: { role: 'console-link', region: g.name } }, 'Open console →');
  }

  // The caller's tenant's quota with its usage; the card stays hidden
  // when the tenant has no record or the answer is refused.
  async function loadQuota(caller) {
    const card = $('#quota-card');
    if (!caller || !caller.tenant) { card.hidden = true; return; }
    let q;
    try {
      q = await api('/v1/tenants/' + encodeURIComponent(caller.tenant) + '/quota');
    } catch (e) {
      card.hidden = true;
      return;
    }
    const rows = [
      ['Resources', 'resources', (n) => String(n)],
      ['Replicas', 'replicas', (n) => String(n)],
      ['vCPUs', 'vcpus', (n) => (Math.round(n * 100) / 100).toString()],
      ['Memory', 'memoryMiB', (n) => n + ' MiB'],
      ['Volumes', 'volumeGiB', (n) => n + ' GiB'],
      ['Load balancers', 'loadbalancers', (n) => String(n)],
    ];
    const quota = q.quota || {}, usage = q.usage || {};
    $('#quota-note').textContent = 'tenant ' + q.tenant;
    $('#quota tbody').replaceChildren(...rows.map(([label, key, fmt]) => {
      const used = usage[key] || 0, limit = quota[key] || 0;
      return h('tr', { dataset: { quota: key } },
        h('td', {}, label),
        h('td', { class: 'num' }, fmt(used)),
        h('td', { class: 'num' }, limit ? fmt(limit) : 'no limit'),
        h('td', {}, limit ? bar(pct(used, limit)) : ''));
    }));
    card.hidden = false;
  }

  function renderRegions(regions) {
    $('#regions-note').textContent = regions.length ? plural(regions.length, 'region') : '';
    if (!regions.length) {
      regionsBody.replaceChildren(h('tr', {}, h('td', { colspan: '9' }, h('div', { class: 'empty' },
        h('div', { class: 'empty-title' }, 'No regions yet'),
        h('div', {}, 'A region registers itself with its first heartbeat to the global tier (its global.endpoint).')))));
      return;
    }
    regionsBody.replaceChildren(...regions.map((g) => {
      const s = g.status || {};
      const health = s.health || 'Unknown';
      const tip = [s.reason, time(s.since) ? 'since ' + absolute(time(s.since)) : ''].filter(Boolean).join(' · ') || health;
      return h('tr', { dataset: { region: g.name, health } },
        h('td', {},
          h('div', { class: 'region-name' }, g.name),
          h('div', { class: 'region-sub' }, (g.zones || []).length ? 'zones ' + g.zones.join(', ') : 'no zones', g.endpoint ? ' · ' + g.endpoint : '')),
        h('td', {}, pill(health, healthTone[health] || 'neutral', { class: 'tip', tabindex: '0', dataset: { tip } }),
          s.reason && health !== 'Up' ? h('div', { class: 'region-sub' }, s.reason) : null),
        h('td', { class: 'ready-cell' }, h('div', { class: 'ready-num' }, `${s.nodesUp || 0} / ${s.nodes || 0}`),
          bar(pct(s.nodesUp || 0, s.nodes || 0), (s.nodesUp || 0) === (s.nodes || 0) && s.nodes ? 'ok' : 'warn')),
        h('td', { class: 'num' }, String(s.resources || 0)),
        h('td', { class: 'ready-cell' }, h('div', { class: 'ready-num' }, `${s.ready || 0} / ${s.replicas || 0}`),
          bar(pct(s.ready || 0, s.replicas || 0), (s.ready || 0) === (s.replicas || 0) ? 'ok' : 'info')),
        h('td', { dataset: { role: 'headroom' } }, headroomCell(s.headroom)),
        h('td', { class: 'mono', dataset: { role: 'leader' } }, s.leader || h('span', { class: 'muted', title: 'The region has not reported its leader yet' }, '—')),
        h('td', { class: 'time-cell' }, relTime(s.lastHeartbeat)),
        h('td', { class: 'num' }, consoleLink(g)));
    }));
  }

  // headroomCell lists, per flavor, how many more replicas fit in the
  // region; each line's tip splits it by zone.
  function headroomCell(headroom) {
    if (!headroom || !headroom.length) {
      return h('span', { class: 'muted', title: 'The region has not reported its headroom yet' }, '—');
    }
    return h('div', {}, ...headroom.map((f) => {
      const zones = Object.entries(f.zones || {}).sort(([a], [b]) => a.localeCompare(b))
        .map(([z, n]) => `${z || '(no zone)'}: ${n}`).join(' · ');
      return h('div', { class: 'region-sub tip', tabindex: '0', dataset: { flavor: f.flavor, tip: zones || f.flavor } },
        h('span', { class: 'mono' }, f.flavor), ` ${f.replicas} more`);
    }));
  }

  function renderResources(resources) {
    const note = $('#resources-note');
    if (!resources || resources.error) {
      note.textContent = '';
      resourcesBody.replaceChildren(h('tr', {}, h('td', { colspan: '6', class: 'detail-empty tone-err' },
        'Resources could not be loaded — ', describeError(resources && resources.error))));
      return;
    }
    const items = (resources.items || []).slice().sort((a, b) => `${a.tenant}/${a.name}`.localeCompare(`${b.tenant}/${b.name}`));
    note.textContent = items.length ? plural(items.length, 'resource') + (resources.continue ? ' (first page)' : '') : '';
    if (!items.length) {
      resourcesBody.replaceChildren(h('tr', {}, h('td', { colspan: '6' }, h('div', { class: 'empty' },
        h('div', { class: 'empty-title' }, 'No resources yet'),
        h('div', {}, 'Create one with ', h('code', {}, 'stratactl apply -f resource.yaml'), ' or POST /v1/resources.')))));
      return;
    }
    resourcesBody.replaceChildren(...items.map((res) => {
      const s = res.status || {};
      const phase = s.phase || 'created';
      const shares = Object.entries(s.regions || {}).sort(([a], [b]) => a.localeCompare(b));
      return h('tr', { dataset: { resource: `${res.tenant}/${res.name}`, phase } },
        h('td', {},
          h('div', { class: 'res-name' }, h('a', { class: 'res-link', href: resourceHref(res), dataset: { role: 'resource-link' } },
            res.tenant ? h('span', { class: 'res-tenant' }, res.tenant + ' / ') : null, res.name)),
          h('div', { class: 'res-sub' }, h('span', {}, res.kind), res.spec && res.spec.flavor ? h('span', {}, '· ' + res.spec.flavor) : null,
            res.deletionRequestedAt ? h('span', { class: 'tone-warn' }, '· being deleted') : null)),
        h('td', {}, pill(phase, phaseTone[phase] || 'neutral')),
        h('td', { class: 'ready-cell' }, h('div', { class: 'ready-num' }, `${s.ready || 0} / ${res.replicas ?? s.replicas ?? 0}`),
          bar(pct(s.ready || 0, res.replicas || 0), (s.ready || 0) >= (res.replicas || 0) ? 'ok' : 'info')),
        h('td', {}, h('div', { class: 'labels' }, shares.length ? shares.map(([name, sh]) =>
          h('span', { class: 'chip', title: `${name}: ${sh.phase}${sh.reason ? ' — ' + sh.reason : ''}` }, `${name} ${sh.ready}/${sh.replicas}`))
          : h('span', { class: 'muted' }, 'not placed'))),
        h('td', { class: 'num' }, res.revision ? 'r' + res.revision : '—'),
        h('td', { class: 'reason-cell' }, s.reason || h('span', { class: 'muted' }, '—')));
    }));
  }

  const deleted = new URLSearchParams(location.search).get('deleted');
  if (deleted) toast(`deletion of ${deleted} requested`);
  r.now();
}

function resourceHref(res) {
  return 'resource?' + new URLSearchParams({ tenant: res.tenant || '', name: res.name });
}

// ---- one resource ----

function resourcePage() {
  const qs = new URLSearchParams(location.search);
  const name = qs.get('name') || '';
  let tenant = qs.get('tenant') || '';
  const alertBox = $('#alert');
  const path = (sub = '') => `/v1/resources/${encodeURIComponent(name)}${sub}${tenant ? '?tenant=' + encodeURIComponent(tenant) : ''}`;
  let res = null;
  let revisions = [];
  const r = refresher(load, () => REFRESH_MS);

  async function load() {
    try {
      res = await api(path());
      tenant = res.tenant;
      const [revs, reps, evs] = await Promise.all([
        api(path('/revisions')).catch((e) => ({ error: e })),
        api(path('/replicas')).catch((e) => ({ error: e })),
        api(`/v1/events?limit=200&object=${encodeURIComponent(`resource/${res.tenant}/${res.name}`)}`).catch((e) => ({ error: e })),
      ]);
      revisions = revs.error ? [] : revs.items || [];
      clearAlert(alertBox);
      render(revs, reps, evs);
      setLive('polling', 'The page refreshes every few seconds', 'Auto-refresh');
    } catch (e) {
      if (e.status === 401) return;
      showAlert(alertBox, e, res ? 'The resource could not be refreshed' : 'The resource could not be loaded');
      if (e.status === 404) {
        document.body.dataset.resourceGone = 'true';
        for (const b of document.querySelectorAll('#actions button')) b.disabled = true;
      }
    }
  }

  function render(revs, reps, evs) {
    const s = res.status || {};
    const rollout = s.rollout || null;
    const paused = !!(res.rollout && res.rollout.paused);
    const deleting = !!res.deletionRequestedAt;
    document.title = `${res.name} · Strata`;
    $('#crumb').textContent = `${res.tenant} / ${res.name}`;
    const title = $('#res-title');
    title.textContent = res.name;
    Object.assign(title.dataset, { tenant: res.tenant, replicas: String(res.replicas ?? 0), revision: String(res.revision || 0), paused: String(paused), deleting: String(deleting), phase: s.phase || 'created' });
    $('#res-sub').replaceChildren(`${res.kind} of tenant `, h('b', {}, res.tenant), res.spec && res.spec.flavor ? ` · flavor ${res.spec.flavor}` : '',
      deleting ? h('span', { class: 'tone-warn' }, ' · being deleted') : '');
    for (const b of document.querySelectorAll('#actions button')) b.disabled = deleting;
    // The master owns an autoscaled resource's count: the API refuses a
    // scale by hand, so the button says why instead.
    const scaleBtn = $('button[data-action="scale"]');
    scaleBtn.disabled = deleting || !!res.autoscale;
    scaleBtn.title = res.autoscale ? `Autoscaled (${res.autoscale.minReplicas} to ${res.autoscale.maxReplicas}): change its bounds in the manifest` : '';
    $('button[data-action="pause"]').hidden = paused;
    $('button[data-action="resume"]').hidden = !paused;

    const stat = (label, value, note) => h('div', { class: 'stat' }, h('div', { class: 'stat-label' }, label), h('div', { class: 'stat-value' }, value), note ? h('div', { class: 'stat-note' }, note) : null);
    $('#summary').replaceChildren(
      stat('Phase', pill(s.phase || 'created', phaseTone[s.phase] || 'neutral'), s.reason || ''),
      stat('Ready', [String(s.ready || 0), h('small', {}, ` / ${res.replicas ?? 0}`)], plural(Object.keys(s.regions || {}).length, 'region')),
      stat('Revision', 'r' + (res.revision || 0), plural(revisions.length, 'revision') + ' kept'),
      stat('Rollout', paused ? 'paused' : rollout ? rollout.state : '—', rollout && rollout.message ? rollout.message : ''));

    if (s.job || (res.spec && res.spec.job)) renderJob(s.job);
    renderPlacement(s);
    renderReplicas(reps);
    renderNames(reps);
    renderContainers();
    renderRevisions(revs);
    $('#spec').textContent = JSON.stringify(res.spec, null, 2);
    renderEvents(evs);
  }

  // renderJob shows a Job's kept runs, newest first, and their attempts:
  // node, exit code, times.
  function renderJob(job) {
    $('#job').hidden = false;
    const spec = res.spec.job || {};
    const runs = (job && job.runs) || [];
    const note = [];
    if (job) note.push(`${job.phase}${job.reason ? ' (' + job.reason + ')' : ''}`, `${job.succeeded || 0}/${spec.completions || 1} succeeded`, `${job.active || 0} active`, `${job.failed || 0} failed`);
    if (spec.schedule) note.push(`schedule ${spec.schedule}`);
    if (job && job.nextRunAt) note.push('next run ' + relTime(job.nextRunAt));
    $('#job-note').textContent = note.join(' · ');
    const rows = [];
    for (const run of runs) {
      for (const a of run.attempts || []) {
        const tone = a.phase === 'Succeeded' ? 'ok' : a.phase === 'Failed' ? 'err' : a.phase === 'Running' ? 'info' : 'neutral';
        rows.push(h('tr', { dataset: { run: String(run.number), attempt: a.id, phase: a.phase, exitCode: a.exitCode === undefined ? '' : String(a.exitCode) } },
          h('td', { class: 'num' }, String(run.number)),
          h('td', { class: 'mono' }, a.id, a.removed ? h('span', { class: 'muted' }, ' (removed)') : null),
          h('td', { class: 'mono' }, a.node || '—'),
          h('td', {}, pill(a.phase, tone)),
          h('td', { class: 'num mono' }, a.exitCode === undefined ? '—' : String(a.exitCode)),
          h('td', { class: 'time-cell' }, a.startedAt ? relTime(a.startedAt) : '—'),
          h('td', { class: 'time-cell' }, a.finishedAt ? relTime(a.finishedAt) : '—'),
          h('td', { class: 'reason-cell' }, a.reason || h('span', { class: 'muted' }, '—'))));
      }
    }
    $('#job-attempts tbody').replaceChildren(...(rows.length ? rows
      : [h('tr', {}, h('td', { colspan: '8', class: 'detail-empty' }, spec.schedule ? 'No run yet: waiting for the schedule.' : 'No attempt yet.'))]));
  }

  function renderPlacement(s) {
    const shares = Object.entries(s.regions || {}).sort(([a], [b]) => a.localeCompare(b));
    $('#placement-note').textContent = shares.length ? plural(shares.length, 'region') : '';
    $('#placement tbody').replaceChildren(...(shares.length ? shares.map(([region, sh]) => h('tr', { dataset: { region, phase: sh.phase } },
      h('td', { class: 'mono' }, region, sh.failoverFrom ? h('span', { class: 'muted' }, ` (for ${sh.failoverFrom})`) : null),
      h('td', {}, pill(sh.phase, phaseTone[sh.phase] || 'neutral')),
      h('td', { class: 'ready-cell' }, h('div', { class: 'ready-num' }, `${sh.ready} / ${sh.replicas}`), bar(pct(sh.ready, sh.replicas), sh.ready >= sh.replicas ? 'ok' : 'info')),
      h('td', {}, sh.revision ? 'r' + sh.revision : '—'),
      h('td', { class: 'reason-cell' }, sh.reason || h('span', { class: 'muted' }, '—'))))
      : [h('tr', {}, h('td', { colspan: '5', class: 'detail-empty' }, 'Not placed in any region yet.'))]));
    // Why the split differs from the weights (a region without room),
    // and whether schedule.reserve holds, as stratactl describe says.
    const notes = [];
    if (s.split) notes.push(h('p', { dataset: { role: 'split' } }, h('strong', {}, 'Split: '), s.split));
    if (s.reserve) {
      notes.push(h('p', { dataset: { role: 'reserve', holds: String(s.reserve.holds) }, class: s.reserve.holds ? '' : 'tone-warn' },
        h('strong', {}, `Reserve ${(res.schedule && res.schedule.reserve) || ''} ${s.reserve.holds ? 'holds' : 'short'}: `), s.reserve.message || ''));
    }
    if (res.autoscale) notes.push(autoscaleNote(res.autoscale, s.autoscale));
    const fit = $('#placement-fit');
    fit.hidden = !notes.length;
    fit.replaceChildren(...notes);
  }

  // autoscaleNote is an autoscaled resource's bounds and the master's
  // last reading, as stratactl describe prints them.
  function autoscaleNote(p, st) {
    const parts = [`${p.minReplicas} to ${p.maxReplicas}`];
    if (!st) {
      parts.push('no reading yet');
    } else {
      let line = `desired ${st.desired}`;
      if ((st.metrics || []).length) line += ` (${st.metrics.join(', ')})`;
      const at = time(st.lastScaleAt);
      if (at) line += `, scaled ${ago(at)}`;
      if (st.message) line += `: ${st.message}`;
      parts.push(line);
    }
    return h('p', { dataset: { role: 'autoscale' } }, h('strong', {}, 'Autoscale: '), parts.join('; '));
  }

  // renderReplicas lists the replicas, each followed by its containers
  // when its node reports them (READY is then ready/running containers).
  function renderReplicas(reps) {
    const body = $('#replicas tbody');
    if (reps.error) {
      body.replaceChildren(h('tr', {}, h('td', { colspan: '8', class: 'detail-empty tone-err' }, 'Replicas could not be loaded — ', describeError(reps.error))));
      return;
    }
    const items = (reps.items || []).slice().sort((a, b) => `${a.region}/${a.id}`.localeCompare(`${b.region}/${b.id}`));
    const partial = (reps.unreachable || []).length ? ` · ${reps.unreachable.join(', ')} did not answer` : '';
    $('#placement-note').textContent += (items.length ? ` · ${plural(items.length, 'replica')}` : '') + partial;
    const rows = items.flatMap((rep) => {
      const cs = (rep.status && rep.status.containers) || [];
      const row = h('tr', { dataset: { replica: rep.id, region: rep.region, node: rep.node || '', phase: rep.phase } },
        h('td', { class: 'mono' }, rep.id), h('td', {}, rep.region || '—'), h('td', { class: 'mono' }, rep.node || '—'),
        h('td', {}, pill(rep.phase, phaseTone[rep.phase] || 'neutral')),
        h('td', { class: 'num', dataset: { role: 'ready' } }, cs.length ? containersReady(rep) : '—'),
        h('td', { class: 'num', dataset: { role: 'restarts' } }, String(containerRestarts(rep))),
        h('td', {}, 'r' + rep.revision),
        h('td', { class: 'mono' }, (rep.status && rep.status.address) || (rep.network && rep.network.address) || '—'));
      if (!cs.length) return [row];
      return [row, h('tr', { class: 'detail-row', dataset: { containersOf: rep.id } }, h('td', { colspan: '8' }, containerTable(rep)))];
    });
    body.replaceChildren(...(rows.length ? rows : [h('tr', {}, h('td', { colspan: '8', class: 'detail-empty' }, 'No replicas.'))]));
  }

  // renderNames lists a container resource's DNS names on the region
  // network, as stratactl describe does: region-less, per region with
  // the ready replicas each answers, SRV of named ports.
  function renderNames(reps) {
    const card = $('#names');
    const n = reps.error ? null : resourceNames(dnsForms(card), res, reps.items || []);
    card.hidden = !n;
    if (n) $('#names-table tbody').replaceChildren(...namesRows(n));
  }

  // renderContainers shows a pod's containers, or a container's probes,
  // as stratactl describe prints them; nothing for a plain container.
  function renderContainers() {
    const c = res.spec && res.spec.compute;
    const card = $('#containers');
    card.hidden = !hasPod(c);
    if (card.hidden) return;
    const cs = podContainers(c);
    $('#containers-note').textContent = plural(cs.length, 'container');
    $('#containers-table tbody').replaceChildren(...cs.map((x) => h('tr', { dataset: { container: x.name, init: String(!!x.init) } },
      h('td', { class: 'mono' }, x.name, x.init ? [' ', pill('init', 'neutral')] : null),
      h('td', { class: 'mono' }, x.image || '—'),
      h('td', {}, probeKinds.some(([k]) => x[k])
        ? probeKinds.filter(([k]) => x[k]).map(([k, label]) => h('div', { dataset: { probe: k } }, h('b', {}, label + ': '), h('span', { class: 'mono' }, probeLine(x[k]))))
        : h('span', { class: 'muted' }, x.init ? 'runs to completion' : 'no probes')))));
  }

  function renderRevisions(revs) {
    const body = $('#revisions tbody');
    if (revs.error) {
      body.replaceChildren(h('tr', {}, h('td', { colspan: '4', class: 'detail-empty tone-err' }, 'Revisions could not be loaded — ', describeError(revs.error))));
      return;
    }
    $('#revisions-note').textContent = plural(revisions.length, 'revision');
    body.replaceChildren(...revisions.slice().reverse().map((rv) => {
      const current = rv.number === res.revision;
      return h('tr', { dataset: { revision: String(rv.number), current: String(current) } },
        h('td', { class: 'num' }, 'r' + rv.number, current ? pill('current', 'ok', { class: 'cur-badge' }) : null, rv.pinned ? h('span', { class: 'chip' }, 'pinned') : null),
        h('td', {}, rv.cause || h('span', { class: 'muted' }, '—')),
        h('td', { class: 'time-cell' }, relTime(rv.createdAt)),
        h('td', { class: 'num' },
          current ? null : h('button', { type: 'button', class: 'btn btn-sm', dataset: { action: 'diff', revision: String(rv.number) }, onclick: () => showDiff(rv) }, 'Diff'),
          ' ',
          current ? null : h('button', { type: 'button', class: 'btn btn-sm', dataset: { action: 'rollback', revision: String(rv.number) }, onclick: () => rollback(rv) }, 'Roll back…')));
    }));
  }

  function showDiff(rv) {
    const lines = diffLines(JSON.stringify(rv.spec, null, 2), JSON.stringify(res.spec, null, 2));
    $('#diff-title').textContent = `r${rv.number} → r${res.revision} (current)`;
    $('#diff-text').replaceChildren(...lines.map(([op, text]) =>
      op === ' ' ? text + '\n' : h('span', { class: op === '+' ? 'diff-add' : 'diff-del' }, op + ' ' + text)));
    $('#diff').hidden = false;
    $('#diff').dataset.revision = String(rv.number);
  }

  function renderEvents(evs) {
    const list = $('#events');
    if (evs.error) {
      list.replaceChildren(h('li', { class: 'empty' }, 'Events could not be loaded — ', describeError(evs.error)));
      return;
    }
    const items = (evs.items || []).slice().reverse();
    $('#events-note').textContent = items.length ? plural(items.length, 'event') + ' · newest first' : '';
    list.replaceChildren(...(items.length ? items.map((ev) => {
      const d = time(ev.time);
      const fields = Object.entries(ev.fields || {}).filter(([, v]) => v);
      return h('li', { dataset: { id: ev.id, reason: ev.reason, type: ev.type } },
        h('time', { datetime: d ? d.toISOString() : '', title: absolute(d) }, clock(d)),
        h('span', { class: 'ev-reason' }, h('span', { class: 'dot tone-' + (ev.type === 'Warning' ? 'warn' : 'info'), 'aria-hidden': 'true' }), h('span', {}, ev.reason)),
        h('span', { class: 'ev-obj' }, ev.region || 'global'),
        h('div', {}, h('div', { class: 'ev-msg' }, ev.message || ''),
          fields.length ? h('div', { class: 'ev-fields' }, fields.map(([k, v]) => h('span', { class: 'chip' }, `${k}=${v}`))) : null));
    }) : [h('li', { class: 'empty' }, 'No events yet.')]));
  }

  // act runs one action behind its dialog, then says so and reloads.
  async function act(opts, done) {
    const ok = await confirmDialog(opts);
    if (ok) { toast(done); r.now(); }
  }

  function rollback(rv) {
    act({
      title: `Roll back ${res.name} to r${rv.number}?`,
      body: [h('p', {}, `A new revision is made with the spec of revision ${rv.number} and rolled out like any other.`)],
      confirmLabel: 'Roll back',
      onConfirm: () => api(path('/rollback'), { method: 'POST', body: { revision: rv.number } }),
    }, `${res.name} rolled back to the spec of r${rv.number}`);
  }

  const actions = {
    scale: () => act({
      title: `Scale ${res.name}`,
      body: [h('p', {}, `Now ${plural(res.replicas ?? 0, 'replica')} over every region. Scaling makes no new revision.`),
        field({ label: 'Replicas', name: 'replicas', type: 'number', value: String(res.replicas ?? 0), attrs: { min: '0', required: true } })],
      confirmLabel: 'Scale',
      onConfirm: (v) => {
        const n = Number(v.replicas);
        if (v.replicas === '' || !Number.isInteger(n) || n < 0) throw new ApiError(400, 'Invalid', 'replicas: a whole number, 0 or more', 'replicas');
        return api(path('/scale'), { method: 'POST', body: { replicas: n } });
      },
    }, `${res.name} scaled`),
    pause: () => act({
      title: `Pause the rollout of ${res.name}?`,
      body: [h('p', {}, 'No region gets a new revision, and regions stop replacing replicas, until it is resumed.')],
      confirmLabel: 'Pause',
      onConfirm: () => api(path('/rollout/pause'), { method: 'POST' }),
    }, `rollout of ${res.name} paused`),
    resume: () => act({
      title: `Resume the rollout of ${res.name}?`,
      body: [h('p', {}, 'Regions get the current revision and replace replicas again.')],
      confirmLabel: 'Resume',
      onConfirm: () => api(path('/rollout/resume'), { method: 'POST' }),
    }, `rollout of ${res.name} resumed`),
    // Once deleted the resource is soon gone: the overview shows it
    // being deleted, and then no more.
    delete: () => confirmDialog({
      title: `Delete ${res.name}?`,
      body: [h('p', {}, 'Every region destroys its replicas, then the resource and its revisions go. This cannot be undone.'),
        field({ label: `Type ${res.name} to confirm`, name: 'confirm', attrs: { required: true, spellcheck: 'false' } })],
      confirmLabel: 'Delete',
      danger: true,
      onConfirm: async (v) => {
        if (v.confirm !== res.name) throw new ApiError(400, 'Invalid', `type ${res.name} to confirm`, 'confirm');
        // No refresh may ask for the resource once it may be gone.
        await r.stop();
        try {
          await api(path(), { method: 'DELETE' });
        } catch (e) {
          r.resume();
          throw e;
        }
      },
    }).then((ok) => {
      if (ok) location.href = './?' + new URLSearchParams({ deleted: `${res.tenant}/${res.name}` });
    }),
  };
  for (const b of document.querySelectorAll('#actions button')) {
    b.addEventListener('click', () => { if (res) actions[b.dataset.action](); });
  }
  r.now();
}

// diffLines is a line diff of a and b (longest common subsequence; specs
// are small): [op, line] with op ' ', '-' (only in a) or '+' (only in b).
function diffLines(a, b) {
  const x = a.split('\n');
  const y = b.split('\n');
  const n = x.length;
  const m = y.length;
  const lcs = Array.from({ length: n + 1 }, () => new Array(m + 1).fill(0));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  }
  const out = [];
  let i = 0;
  let j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push([' ', x[i]]); i++; j++; } else if (lcs[i + 1][j] >= lcs[i][j + 1]) out.push(['-', x[i++]]);
    else out.push(['+', y[j++]]);
  }
  while (i < n) out.push(['-', x[i++]]);
  while (j < m) out.push(['+', y[j++]]);
  return out;
}

// ---- tokens (admins; tenant-admins their tenant's) ----

function tokensPage() {
  const alertBox = $('#alert');
  const body = $('#tokens tbody');
  const r = refresher(load, () => REFRESH_MS * 2);

  async function load() {
    try {
      const list = await api('/v1/tokens');
      clearAlert(alertBox);
      render(list.items || []);
      setLive('polling', 'The list refreshes every few seconds', 'Auto-refresh');
    } catch (e) {
      if (e.status === 401) return;
      const msg = e.status === 403 ? 'Only admins and tenant-admins manage tokens; this token is neither' : 'The tokens could not be loaded';
      showAlert(alertBox, e, msg);
      body.replaceChildren(h('tr', {}, h('td', { colspan: '7', class: 'detail-empty' }, msg + '.')));
    }
  }

  function expires(t) {
    const d = time(t.expiresAt);
    if (!d) return h('span', { class: 'muted' }, 'never');
    return d < new Date() ? h('span', { class: 'tone-err', title: absolute(d) }, 'expired') : relTime(t.expiresAt);
  }

  function render(items) {
    $('#tokens-note').textContent = plural(items.length, 'token');
    const mine = auth.token.split('_')[1] || '';
    body.replaceChildren(...items.map((t) => h('tr', { dataset: { token: t.id, tenant: t.tenant, role: t.role, name: t.name || '' } },
      h('td', { class: 'mono' }, t.id, t.id === mine ? h('span', { class: 'muted' }, ' (this session)') : null),
      h('td', {}, t.name || h('span', { class: 'muted' }, '—')),
      h('td', {}, t.tenant), h('td', {}, pill(t.role, t.role === 'admin' || t.role === 'tenant-admin' ? 'warn' : 'neutral')),
      h('td', { class: 'time-cell' }, relTime(t.createdAt)), h('td', { class: 'time-cell' }, expires(t)),
      h('td', { class: 'num' }, h('button', { type: 'button', class: 'btn btn-sm', dataset: { action: 'revoke', token: t.id }, onclick: () => revoke(t) }, 'Revoke…')))));
  }

  async function revoke(t) {
    const ok = await confirmDialog({
      title: `Revoke token ${t.id}?`,
      body: [h('p', {}, `${t.name || 'This token'} (${t.role} of ${t.tenant}) stops working at once. `, 'Anyone using it must sign in with another.')],
      confirmLabel: 'Revoke',
      danger: true,
      onConfirm: () => api('/v1/tokens/' + encodeURIComponent(t.id), { method: 'DELETE' }),
    });
    if (ok) { toast(`token ${t.id} revoked`); r.now(); }
  }

  async function create() {
    let made = null;
    const ok = await confirmDialog({
      title: 'Create a token',
      body: [
        field({ label: 'Name', name: 'name', placeholder: 'alice', hint: 'A label for people.' }),
        field({ label: 'Tenant', name: 'tenant', placeholder: 'yours', hint: 'Empty: your token\'s tenant. A tenant-admin makes tokens of its own tenant only.', attrs: { spellcheck: 'false' } }),
        h('div', { class: 'field' }, h('label', { class: 'field-label', for: 'f-role' }, 'Role'),
          h('select', { id: 'f-role', name: 'role', class: 'input' }, ['member', 'viewer', 'operator', 'tenant-admin', 'infra', 'admin'].map((r0) => h('option', { value: r0 }, r0))),
          h('span', { class: 'field-hint' }, 'tenant-admin runs one tenant, its tokens included; admin reaches every tenant and is for tenant default only; infra and admin are made by admins only.')),
        field({ label: 'Expires in days', name: 'days', type: 'number', hint: 'Empty: never.', attrs: { min: '1' } }),
      ],
      confirmLabel: 'Create',
      onConfirm: async (v) => {
        const req = { name: v.name.trim(), tenant: v.tenant.trim(), role: v.role };
        if (v.days) {
          const d = Number(v.days);
          if (!Number.isInteger(d) || d < 1) throw new ApiError(400, 'Invalid', 'days: a whole number, 1 or more', 'days');
          req.expiresAt = new Date(Date.now() + d * 86400000).toISOString().replace(/\.\d+Z$/, 'Z');
        }
        made = await api('/v1/tokens', { method: 'POST', body: req });
      },
    });
    if (!ok || !made) return;
    const base = location.origin + location.pathname.replace(/\/console\/.*$/, '');
    $('#secret-value').textContent = made.token;
    $('#secret-config').textContent = `stratactl config set-context ${made.tenant} --url ${base} --token ${made.token}`;
    $('#secret-title').textContent = `New token ${made.id} (${made.role} of ${made.tenant})`;
    $('#secret').hidden = false;
    $('#secret').dataset.token = made.id;
    r.now();
  }

  $('button[data-action="create-token"]').addEventListener('click', create);
  $('#secret-dismiss').addEventListener('click', () => {
    // The secret leaves the page once read.
    $('#secret-value').textContent = '';
    $('#secret-config').textContent = '';
    $('#secret').hidden = true;
  });
  r.now();
}

// labels renders a label map as "k=v, k=v", or what empty means.
function labels(m, empty) {
  const ks = Object.keys(m || {}).sort();
  return ks.length ? ks.map((k) => `${k}=${m[k]}`).join(', ') : empty;
}

// admits says in short what a policy's rules admit.
function admits(p) {
  const rules = p.ingress || [];
  if (!rules.length) return h('span', { class: 'muted' }, 'nothing (replies only)');
  return rules.map((r) => {
    const from = (r.from || []).map((f) => f.ipBlock ? f.ipBlock.cidr + ((f.ipBlock.except || []).length ? ` except ${f.ipBlock.except.join(' ')}` : '')
      : labels(f.resources && f.resources.matchLabels, 'all resources')).join(' or ') || 'anyone of the tenant or outside';
    const ports = (r.ports || []).map((pt) => `${pt.protocol || 'tcp'}/${pt.port ? pt.port + (pt.endPort ? '-' + pt.endPort : '') : 'any'}`).join(' ') || 'any port';
    return `${from} → ${ports}`;
  }).join('; ');
}

// enforced says where a policy is enforced at its generation.
function enforced(p) {
  const st = p.status || {};
  const parts = (st.regions || []).map((r) => r.observedGeneration !== p.generation
    ? `${r.region}: generation ${r.observedGeneration}`
    : `${plural(r.nodes, 'node')} in ${r.region}`);
  if ((st.unreachable || []).length) parts.push(`${st.unreachable.join(', ')} did not answer`);
  return parts.length ? parts.join(', ') : h('span', { class: 'muted' }, 'no replica selected');
}

function policiesPage() {
  const alertBox = $('#alert');
  const body = $('#policies tbody');
  const r = refresher(load, () => REFRESH_MS);

  async function load() {
    try {
      const list = await api('/v1/networkpolicies');
      clearAlert(alertBox);
      render(list.items || []);
      setLive('polling', 'The list refreshes every few seconds', 'Auto-refresh');
    } catch (e) {
      if (e.status === 401) return;
      showAlert(alertBox, e, 'The policies could not be loaded');
      body.replaceChildren(h('tr', {}, h('td', { colspan: '7', class: 'detail-empty' }, 'The policies could not be loaded.')));
    }
  }

  function render(items) {
    $('#policies-note').textContent = plural(items.length, 'policy', 'policies');
    if (items.length) $('#policies-tenant').textContent = items[0].tenant;
    if (!items.length) {
      body.replaceChildren(h('tr', {}, h('td', { colspan: '7', class: 'detail-empty' }, 'No network policies: every replica admits its own tenant, and no other.')));
      return;
    }
    body.replaceChildren(...items.map((p) => h('tr', { dataset: { policy: p.name } },
      h('td', { class: 'mono' }, p.name),
      h('td', {}, labels(p.selector, 'every replica')),
      h('td', {}, admits(p)),
      h('td', { class: 'num' }, String(p.generation)),
      h('td', {}, enforced(p)),
      h('td', { class: 'time-cell' }, relTime(p.createdAt)),
      h('td', { class: 'num' }, h('button', { type: 'button', class: 'btn btn-sm', dataset: { action: 'delete', policy: p.name }, onclick: () => remove(p) }, 'Delete…')))));
  }

  async function remove(p) {
    const ok = await confirmDialog({
      title: `Delete network policy ${p.name}?`,
      body: [h('p', {}, `The replicas it selects (${labels(p.selector, 'every replica')}) then admit what their other policies allow, or their whole tenant when no other selects them.`)],
      confirmLabel: 'Delete',
      danger: true,
      onConfirm: () => api('/v1/networkpolicies/' + encodeURIComponent(p.name), { method: 'DELETE' }),
    });
    if (ok) { toast(`network policy ${p.name} deleted`); r.now(); }
  }

  r.now();
}

// ---- configs and secrets ----

// configsPage lists the tenant's configs and secrets with their keys.
// It never asks for a secret's values: they do not reach the
// browser.
function configsPage() {
  const alertBox = $('#alert');
  const r = refresher(load, () => REFRESH_MS * 2);

  async function load() {
    try {
      const [configs, secrets] = await Promise.all([api('/v1/configs'), api('/v1/secrets')]);
      clearAlert(alertBox);
      renderConfigs(configs.items || []);
      renderSecrets(secrets.items || []);
      setLive('polling', 'The lists refresh every few seconds', 'Auto-refresh');
    } catch (e) {
      if (e.status === 401) return;
      showAlert(alertBox, e, 'The configs and secrets could not be loaded');
    }
  }

  const labels = (l) => Object.keys(l || {}).sort().map((k) => `${k}=${l[k]}`).join(', ') || h('span', { class: 'muted' }, '—');
  const keys = (ks) => (ks.length ? h('span', { class: 'mono' }, ks.join(', ')) : h('span', { class: 'muted' }, 'none'));
  const del = (what, name) => h('button', { type: 'button', class: 'btn btn-sm', dataset: { action: 'delete-' + what, name }, onclick: () => remove(what, name) }, 'Delete…');

  function renderConfigs(items) {
    $('#configs-note').textContent = plural(items.length, 'config');
    $('#configs tbody').replaceChildren(...items.map((c) => h('tr', { dataset: { config: c.name } },
      h('td', {}, c.name), h('td', {}, keys(Object.keys(c.data || {}).sort())), h('td', {}, labels(c.labels)),
      h('td', { class: 'time-cell' }, relTime(c.updatedAt)), h('td', { class: 'num' }, del('config', c.name)))));
  }

  function renderSecrets(items) {
    $('#secrets-note').textContent = plural(items.length, 'secret');
    $('#secrets tbody').replaceChildren(...items.map((s) => h('tr', { dataset: { secret: s.name } },
      h('td', {}, s.name), h('td', {}, pill(s.type || 'opaque', s.type === 'registry' ? 'info' : 'neutral')),
      h('td', {}, keys(s.keys || [])), h('td', {}, labels(s.labels)),
      h('td', { class: 'time-cell' }, relTime(s.updatedAt)), h('td', { class: 'num' }, del('secret', s.name)))));
  }

  async function remove(what, name) {
    const ok = await confirmDialog({
      title: `Delete ${what} ${name}?`,
      body: [h('p', {}, `The ${what} is removed at once.`)],
      confirmLabel: 'Delete',
      danger: true,
      onConfirm: () => api(`/v1/${what}s/` + encodeURIComponent(name), { method: 'DELETE' }),
    });
    if (ok) { toast(`${what} ${name} deleted`); r.now(); }
  }

  r.now();
}

// ---- alert rules (admins, infra) ----

function alertsPage() {
  const alertBox = $('#alert');
  const body = $('#alertrules tbody');
  const r = refresher(load, () => REFRESH_MS * 2);

  async function load() {
    try {
      const list = await api('/v1/alertrules');
      clearAlert(alertBox);
      render(list.items || []);
      setLive('polling', 'The list refreshes every few seconds', 'Auto-refresh');
    } catch (e) {
      if (e.status === 401) return;
      const msg = e.status === 403 ? 'Only admin and infra tokens see alert rules' : 'The alert rules could not be loaded';
      showAlert(alertBox, e, msg);
      body.replaceChildren(h('tr', {}, h('td', { colspan: '9', class: 'detail-empty' }, msg + '.')));
    }
  }

  function when(t) {
    return time(t) ? relTime(t) : h('span', { class: 'muted' }, 'never');
  }

  function render(items) {
    $('#alerts-note').textContent = plural(items.length, 'rule');
    if (!items.length) {
      body.replaceChildren(h('tr', {}, h('td', { colspan: '9', class: 'detail-empty' }, 'No alert rules: stratactl alerts create NAME --reason NodeDown --url URL.')));
      return;
    }
    body.replaceChildren(...items.map((a) => {
      const s = a.status || { active: 0, pending: 0, sent: 0, dropped: 0 };
      return h('tr', { dataset: { rule: a.name } },
        h('td', { class: 'mono' }, a.name),
        h('td', {}, (a.reasons || []).join(', '), ...(a.selector ? [h('div', { class: 'mono muted', title: 'selector' }, a.selector)] : [])),
        h('td', {}, pill(a.receiver.type, 'neutral'), ' ', h('span', { class: 'mono muted' }, a.receiver.url)),
        h('td', { class: 'num' }, String(s.active)),
        h('td', { class: 'num' }, s.pending ? pill(String(s.pending), 'warn') : '0'),
        h('td', { class: 'num' }, String(s.sent)),
        h('td', { class: 'num' }, s.dropped ? pill(String(s.dropped), 'err') : '0'),
        h('td', { class: 'time-cell' }, when(s.lastSuccess)),
        h('td', {}, s.lastError ? h('span', { class: 'tone-err' }, s.lastError) : h('span', { class: 'muted' }, '—')));
    }));
  }

  r.now();
}

start(() => {
  const page = document.body.dataset.page;
  if (page === 'resource') resourcePage();
  else if (page === 'tokens') tokensPage();
  else if (page === 'policies') policiesPage();
  else if (page === 'configs') configsPage();
  else if (page === 'alerts') alertsPage();
  else overviewPage();
  document.body.dataset.started = 'true';
});
