// queues.js - every queue against its share: ClusterQueues and
// Volcano-style Queues from the status admission writes on them
// (usage, nominal quota, borrowed, lent, fair share, pending in order),
// LocalQueues with their pods, and each one's GPU usage over the last hours
// as an inline SVG chart, from the server's queue history
// (/apis/ui.gpusched.io/v1/queuehistories, refreshed once per sample).
import { request } from './api.js';
import { el, svg, qty } from './util.js';

const GPU = 'nvidia.com/gpu';
const CQ = '/apis/kueue.x-k8s.io/v1beta1/clusterqueues';
const VQ = '/apis/scheduling.gpusched.io/v1alpha1/queues';
const LQ = '/apis/kueue.x-k8s.io/v1beta1/localqueues';

function bar(used, nominal, label) {
  const pct = nominal > 0 ? Math.min(100, (used / nominal) * 100) : (used > 0 ? 100 : 0);
  return el('span', { class: 'bar', role: 'meter', 'aria-label': label, 'aria-valuemin': 0, 'aria-valuemax': nominal || used || 1, 'aria-valuenow': used },
    el('span', { class: used > nominal ? 'over' : '', style: `width:${pct}%` }));
}

// GPUs used (and nominal, when known) over time.
function chart(samples, label) {
  const W = 480, H = 90, P = 4;
  if (!samples || samples.length < 2) return el('p', { class: 'muted', text: 'history: not enough samples yet' });
  const t0 = samples[0].t, t1 = samples[samples.length - 1].t;
  const max = Math.max(1, ...samples.map(s => Math.max(s.used || 0, s.nominal || 0)));
  const x = t => P + ((t - t0) / Math.max(1, t1 - t0)) * (W - 2 * P);
  const y = v => H - P - (v / max) * (H - 2 * P);
  const line = (f) => samples.map((s, i) => (i ? 'L' : 'M') + x(s.t).toFixed(1) + ' ' + y(f(s)).toFixed(1)).join(' ');
  const last = samples[samples.length - 1];
  const mins = Math.round((t1 - t0) / 60);
  return svg('svg', { class: 'chart', width: W, height: H, viewBox: `0 0 ${W} ${H}`, role: 'img',
                      'aria-label': `${label}: GPUs used over the last ${mins} minutes, now ${last.used}, peak ${max}` },
    svg('rect', { x: 0, y: 0, width: W, height: H, fill: '#ffffff', stroke: '#8a8a8a' }),
    svg('path', { d: line(s => s.nominal || 0), fill: 'none', stroke: '#4a4a4a', 'stroke-dasharray': '4 3' }),
    svg('path', { d: line(s => s.used || 0), fill: 'none', stroke: '#0b4f9c', 'stroke-width': 2 }),
    svg('text', { x: W - 6, y: 14, 'text-anchor': 'end', 'font-size': 11, fill: '#1a1a1a', text: `${mins} min, max ${max} GPU (dashed: nominal)` }));
}

function clusterQueue(q, kind, hist) {
  const st = q.status || {}, adm = st.admission || {};
  const used = qty((adm.usage || {})[GPU]), nominal = qty((adm.nominal || {})[GPU]);
  const name = q.metadata.name;
  const pend = adm.pending || [];
  return el('section', { class: 'queue', 'data-queue': name, 'aria-label': `${kind} ${name}` },
    el('h2', { text: `${kind} ${name}` + (q.spec && q.spec.cohort ? ` (cohort ${q.spec.cohort})` : '') }),
    el('p', {}, bar(used, nominal, `${name}: ${used} of ${nominal} GPUs`), ` ${used} / ${nominal} GPUs used`,
      ` · borrowed ${qty((adm.borrowed || {})[GPU])} · lent ${qty((adm.lent || {})[GPU])}` +
      ` · fair share ${qty((adm.fairShare || {})[GPU])} GPUs · weighted share ${adm.weightedShare ?? '–'}` +
      ` · ${st.pendingWorkloads ?? st.pending ?? 0} pending, ${st.admittedWorkloads ?? st.running ?? 0} admitted`),
    chart(hist, name),
    pend.length ? el('table', {}, el('caption', { text: 'Pending workloads in order' }),
      el('thead', {}, el('tr', {}, ['#', 'Workload', 'GPUs', 'Estimated start', 'Why'].map(h => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, pend.map(w => el('tr', {}, el('td', { text: w.position }),
        el('td', {}, el('a', { href: '#/pods/' + w.workload, text: w.workload })), el('td', { text: w.gpus ?? '' }),
        el('td', { text: w.estimatedStart || '' }), el('td', { text: w.reason || '' })))))
      : el('p', { class: 'muted', text: 'nothing pending' }));
}

function localQueue(q, hist) {
  const k = q.metadata.namespace + '/' + q.metadata.name;
  const last = hist && hist.length ? hist[hist.length - 1] : null;
  return el('section', { class: 'queue', 'data-localqueue': k, 'aria-label': `LocalQueue ${k}` },
    el('h2', { text: `LocalQueue ${k}` }),
    el('p', { text: `into ClusterQueue ${(q.spec && q.spec.clusterQueue) || '?'}` + (last ? ` · ${last.used} GPUs used by ${last.admitted} pods, ${last.pending} pending` : '') }),
    chart(hist, k));
}

export function queuesView(view, state) {
  const body = el('div');
  view.replaceChildren(el('h1', { text: 'Queues' }), body);
  const kinds = [state.kind(CQ), state.kind(VQ), state.kind(LQ)];
  let history = new Map(), timer = 0, stopped = false;
  const loadHistory = async () => {
    try {
      const doc = await request('/apis/ui.gpusched.io/v1/queuehistories');
      history = new Map((doc.items || []).map(i => [i.queueKind + '/' + (i.metadata.namespace ? i.metadata.namespace + '/' : '') + i.metadata.name, i.samples]));
      render();
      if (!stopped) timer = setTimeout(loadHistory, Math.max(5, (doc.metadata && doc.metadata.intervalSeconds) || 30) * 1000);
    } catch (e) {
      if (!stopped) timer = setTimeout(loadHistory, 30000);
    }
  };
  const render = () => {
    const byName = (a, b) => (a.metadata.namespace || '').localeCompare(b.metadata.namespace || '') || a.metadata.name.localeCompare(b.metadata.name);
    const cqs = [...kinds[0].objects.values()].sort(byName), vqs = [...kinds[1].objects.values()].sort(byName), lqs = [...kinds[2].objects.values()].sort(byName);
    const parts = [
      ...cqs.map(q => clusterQueue(q, 'ClusterQueue', history.get('ClusterQueue/' + q.metadata.name))),
      ...vqs.map(q => clusterQueue(q, 'Queue', history.get('Queue/' + q.metadata.name))),
      ...lqs.map(q => localQueue(q, history.get('LocalQueue/' + q.metadata.namespace + '/' + q.metadata.name))),
    ];
    body.replaceChildren(...(parts.length ? parts : [el('p', { class: 'muted', text: 'No queues (ClusterQueues, Queues or LocalQueues) are defined, or none you may read.' })]));
  };
  const us = kinds.map(k => k.subscribe(render));
  render();
  loadHistory();
  return { destroy() { stopped = true; clearTimeout(timer); us.forEach(u => u()); } };
}
