// Strata global console: the overview of regions and resources.
import {
  $, h, api, start, refresher, setLive, showAlert, clearAlert, describeError,
  pill, bar, pct, plural, relTime, time, absolute, healthTone, phaseTone,
} from './common.js';

const REFRESH_MS = 5000;

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
      setLive('polling', 'The overview refreshes every few seconds', 'Auto-refresh');
    } catch (e) {
      if (e.status === 401) return;
      setLive('offline', 'The global API did not answer', 'Offline');
      showAlert(alertBox, e, loaded ? 'The overview could not be refreshed; showing the state of ' + absolute(lastOK) : 'The overview could not be loaded');
      if (!loaded) {
        regionsBody.replaceChildren(h('tr', {}, h('td', { colspan: '8', class: 'detail-empty' }, describeError(e))));
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

  function renderRegions(regions) {
    $('#regions-note').textContent = regions.length ? plural(regions.length, 'region') : '';
    if (!regions.length) {
      regionsBody.replaceChildren(h('tr', {}, h('td', { colspan: '8' }, h('div', { class: 'empty' },
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
        h('td', { class: 'mono' }, s.leader || h('span', { class: 'muted' }, '—')),
        h('td', { class: 'time-cell' }, relTime(s.lastHeartbeat)),
        h('td', { class: 'num' }, consoleLink(g)));
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
        h('div', {}, 'Create one with ', h('code', {}, 'strata create -f resource.yaml'), ' or POST /v1/resources.')))));
      return;
    }
    resourcesBody.replaceChildren(...items.map((res) => {
      const s = res.status || {};
      const phase = s.phase || 'created';
      const shares = Object.entries(s.regions || {}).sort(([a], [b]) => a.localeCompare(b));
      return h('tr', { dataset: { resource: `${res.tenant}/${res.name}`, phase } },
        h('td', {},
          h('div', { class: 'res-name' }, res.tenant ? h('span', { class: 'res-tenant' }, res.tenant + ' / ') : null, res.name),
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

  r.now();
}

start(() => {
  overviewPage();
  document.body.dataset.started = 'true';
});
