// nodes.js - the nodes grid (every GPU of every node, virtualised) and the
// node page. A GPU cell carries data-holders ("ns/name" of the pods holding
// it, comma-separated in name order), data-health and an aria-label saying
// the same in words. Filtering matches node names, GPU models, "unhealthy",
// "cordoned" and taint keys; a filter naming a node brings its row in.
import { el, podKey, age } from './util.js';
import { request } from './api.js';
import { takeHolderChanges } from './app.js';

const ROW = 56;

function islands(devs) {
  // NVLink islands: connected components of nvlinkPeers, numbered by their lowest GPU.
  const of = new Map();
  let n = 0;
  for (const d of devs) {
    if (of.has(d.index)) continue;
    const stack = [d.index];
    n++;
    while (stack.length) {
      const i = stack.pop();
      if (of.has(i)) continue;
      of.set(i, n);
      const g = devs.find(x => x.index === i);
      for (const p of (g && g.nvlinkPeers) || []) if (!of.has(p)) stack.push(p);
    }
  }
  return of;
}

function nodeFacts(node) {
  const spec = node.spec || {}, st = node.status || {}, ann = (node.metadata && node.metadata.annotations) || {};
  const ready = (st.conditions || []).find(c => c.type === 'Ready');
  return {
    cordoned: !!spec.unschedulable,
    taints: spec.taints || [],
    ready: ready ? ready.status === 'True' : false,
    stack: ann['gpusched.io/gpu-stack-state'] || '',
    devices: (st.devices || []).slice().sort((a, b) => a.index - b.index),
  };
}

function gpuCell(name, d, held, isl) {
  const holders = held.map(h => h.pod);
  const milli = held.reduce((s, h) => s + (h.milli || 0), 0);
  const health = d.health === 'Unhealthy' ? 'Unhealthy' : 'Healthy';
  const mig = d.mig && d.mig.enabled ? (d.mig.instances || []).map(i => i.profile).join(' ') : '';
  const words = `GPU ${d.index} of ${name}: ${d.model || 'GPU'}, ${health}, ` +
    (holders.length ? `held by ${holders.join(', ')}` + (milli && milli < 1000 ? ` (${milli} of 1000 milli)` : '') : 'free') +
    (mig ? `, MIG ${mig}` : '') + (d.numaNode !== undefined ? `, NUMA ${d.numaNode}` : '') + (isl ? `, NVLink island ${isl}` : '');
  return el('div', {
    class: 'gpu' + (holders.length && milli < 1000 ? ' part' : ''), role: 'img', 'data-node': name, 'data-gpu': d.index,
    'data-holders': holders.join(','), 'data-health': health, 'aria-label': words, title: words,
  }, `${d.index}` + (holders.length ? (milli < 1000 ? ` ${milli}m` : ' ●') : ''),
     el('span', { class: 'isl', 'aria-hidden': 'true', text: (isl ? 'L' + isl : '') + (d.numaNode !== undefined ? ' N' + d.numaNode : '') + (mig ? ' M' : '') }));
}

export function matches(node, f) {
  if (!f) return true;
  const name = node.metadata.name.toLowerCase();
  if (name.includes(f)) return true;
  const x = nodeFacts(node);
  if (f === 'cordoned' && x.cordoned) return true;
  if (f === 'unhealthy' && x.devices.some(d => d.health === 'Unhealthy')) return true;
  if (f === 'notready' && !x.ready) return true;
  if (x.taints.some(t => (t.key || '').toLowerCase().includes(f))) return true;
  return x.devices.some(d => (d.model || '').toLowerCase().includes(f));
}

export function nodesView(view, state) {
  const filter = el('input', { id: 'node-filter', type: 'search', 'aria-describedby': 'node-filter-help' });
  const count = el('span', { class: 'muted', role: 'status', 'aria-live': 'polite' });
  const grid = el('div', { class: 'grid', role: 'list', 'aria-label': 'Nodes and their GPUs', tabindex: '0' });
  view.replaceChildren(
    el('h1', { text: 'Nodes' }),
    el('p', {}, el('label', { for: 'node-filter', text: 'Filter nodes' }), filter, ' ', count),
    el('p', { id: 'node-filter-help', class: 'muted', text: 'Matches a node name, a GPU model, a taint key, or the words cordoned, unhealthy, notready. A GPU: its index, ● held whole, NNNm a fractional share; L: NVLink island, N: NUMA node, M: MIG.' }),
    grid);
  const nodes = state.nodes(), pods = state.pods();
  const render = (name) => {
    const node = nodes.objects.get(name);
    if (!node) return el('div', { class: 'row' });
    const x = nodeFacts(node);
    const isl = islands(x.devices);
    const per = state.holders.get(name) || new Map();
    const tags = [];
    if (!x.ready) tags.push(el('span', { class: 'tag warn', text: 'NotReady' }));
    if (x.cordoned) tags.push(el('span', { class: 'tag warn', text: 'cordoned' }));
    for (const t of x.taints) tags.push(el('span', { class: 'tag', text: `${t.key}${t.value ? '=' + t.value : ''}:${t.effect}` }));
    if (x.stack) tags.push(el('span', { class: 'tag', text: 'stack ' + x.stack }));
    const models = [...new Set(x.devices.map(d => d.model))].join(', ');
    return el('div', { class: 'row', role: 'listitem', 'data-node': name },
      el('div', { class: 'name' }, el('a', { href: '#/nodes/' + encodeURIComponent(name), text: name })),
      el('div', { class: 'meta', title: models }, models || 'no GPUs', el('br'), ...tags),
      el('div', { class: 'gpus' }, x.devices.map(d => gpuCell(name, d, per.get(d.index) || [], isl.get(d.index)))));
  };
  const list = new VirtualGrid(grid, render);
  const refresh = (dirtyNodes) => {
    const f = filter.value.trim().toLowerCase();
    const keys = [...nodes.objects.values()].filter(n => matches(n, f)).map(n => n.metadata.name).sort();
    count.textContent = `${keys.length} of ${nodes.objects.size} nodes`;
    list.setKeys(keys, dirtyNodes);
  };
  // Only the rows whose node or holders changed are rebuilt (app.js keeps the holders per node).
  const onPods = () => { const dirty = takeHolderChanges(); if (dirty.size) refresh(dirty); };
  const u1 = nodes.subscribe((keys) => refresh(new Set([...keys, ...takeHolderChanges()])));
  const u2 = pods.subscribe(onPods);
  filter.addEventListener('input', () => { grid.scrollTop = 0; refresh(); });
  takeHolderChanges();
  refresh();
  return { destroy() { u1(); u2(); list.destroy(); } };
}

// VirtualList (util.js) with the nodes' row height.
import { VirtualList } from './util.js';
class VirtualGrid extends VirtualList { constructor(c, render) { super(c, ROW, render); } }

export function nodeView(view, state, name) {
  const nodes = state.nodes(), pods = state.pods();
  const body = el('div');
  view.replaceChildren(el('p', {}, el('a', { href: '#/nodes', text: '← all nodes' })), el('h1', { text: 'Node ' + name }), body);
  let metrics = el('pre', { id: 'node-metrics', text: 'loading metrics…' });
  const loadMetrics = async () => {
    try {
      const resp = await fetch('/metrics', { headers: { Authorization: 'Bearer ' + sessionStorage.getItem('gpusched.token') } });
      if (!resp.ok) throw new Error(resp.status + ' ' + resp.statusText);
      const text = await resp.text();
      const mine = text.split('\n').filter(l => !l.startsWith('#') && (l.includes(`node="${name}"`) || l.includes(`Hostname="${name}"`)));
      metrics.textContent = mine.length ? mine.join('\n') : 'no per-node series for this node in the server\'s /metrics (the node exporter serves DCGM metrics on its own port)';
    } catch (e) { metrics.textContent = 'metrics unavailable: ' + e.message; }
  };
  const render = () => {
    const node = nodes.objects.get(name);
    if (!node) { body.replaceChildren(el('p', { text: nodes.state === 'connected' ? 'No such node.' : 'Loading…' })); return; }
    const x = nodeFacts(node), isl = islands(x.devices), per = state.holders.get(name) || new Map();
    const st = node.status || {};
    const rows = x.devices.map(d => el('tr', {},
      el('td', {}, gpuCell(name, d, per.get(d.index) || [], isl.get(d.index))),
      el('td', { text: d.model || '' }), el('td', { text: d.memoryMiB ? d.memoryMiB + ' MiB' : '' }),
      el('td', { text: d.health || '' }), el('td', { text: d.numaNode ?? '' }), el('td', { text: isl.get(d.index) ? 'island ' + isl.get(d.index) + ' (peers ' + (d.nvlinkPeers || []).join(',') + ')' : '' }),
      el('td', { text: d.mig ? (d.mig.enabled ? 'on: ' : 'off ') + (d.mig.instances || []).map(i => i.profile).join(', ') : '' }),
      el('td', {}, (per.get(d.index) || []).map(h => el('div', {}, el('a', { href: '#/pods/' + h.pod, text: h.pod }), h.milli < 1000 ? ` (${h.milli}m)` : '')))));
    const mine = [...pods.objects.values()].filter(p => p.spec && p.spec.nodeName === name).sort((a, b) => podKey(a) < podKey(b) ? -1 : 1);
    body.replaceChildren(
      el('p', {}, x.ready ? 'Ready' : 'NotReady', x.cordoned ? ', cordoned' : '', x.stack ? ', GPU stack ' + x.stack : '',
        x.taints.length ? ', taints: ' + x.taints.map(t => `${t.key}${t.value ? '=' + t.value : ''}:${t.effect}`).join(' ') : ''),
      el('h2', { text: 'GPUs' }),
      el('table', {}, el('thead', {}, el('tr', {}, ['GPU', 'Model', 'Memory', 'Health', 'NUMA', 'NVLink', 'MIG', 'Held by'].map(h => el('th', { scope: 'col', text: h })))), el('tbody', {}, rows)),
      el('h2', { text: 'Capacity' }),
      el('table', {}, el('tbody', {}, Object.entries(st.allocatable || {}).map(([k, v]) => el('tr', {}, el('th', { scope: 'row', text: k }), el('td', { text: v }), el('td', { class: 'muted', text: 'capacity ' + ((st.capacity || {})[k] || '') }))))),
      el('h2', { text: `Pods (${mine.length})` }),
      el('table', {}, el('thead', {}, el('tr', {}, ['Pod', 'Phase', 'Age'].map(h => el('th', { scope: 'col', text: h })))),
        el('tbody', {}, mine.map(p => el('tr', {}, el('td', {}, el('a', { href: '#/pods/' + podKey(p), text: podKey(p) })), el('td', { text: (p.status && p.status.phase) || '' }), el('td', { text: age(p.metadata.creationTimestamp) }))))),
      el('h2', { text: 'Metrics' }), metrics);
  };
  const u1 = nodes.subscribe(keys => { if (keys.has(name)) render(); });
  const u2 = pods.subscribe(() => render());
  render();
  loadMetrics();
  // The grid's node and pods are partial: the page reads the whole node and every pod bound to it.
  const n = encodeURIComponent(name);
  nodes.listed.then(() => request('/api/v1/nodes/' + n).then(o => nodes.fill(o), () => {}));
  pods.listed.then(() => request('/api/v1/pods?fieldSelector=' + encodeURIComponent('spec.nodeName=' + name))
    .then(doc => { for (const o of doc.items || []) pods.fill(o); }, () => {}));
  return { destroy() { u1(); u2(); } };
}
