// pods.js - the pending pods (virtualised, with the scheduler's diagnosis
// from pods/NAME/explain fetched for the rows in view only) and the pod
// page: phase (live from the pods watch), diagnosis and counterfactual,
// ETA, PodGroup, events (watched), devices and logs (follow).
import { request, token } from './api.js';
import { el, age, podKey, isPending, podGroup, podQueue, podGpus, VirtualList } from './util.js';

// Explain answers, cached a short while: "ns/name" -> {at, text, error}.
const explained = new Map();
let inflight = 0;
const waiting = [];
const EXPLAIN_TTL_MS = 10000;

function explain(ns, name) {
  const k = ns + '/' + name;
  const have = explained.get(k);
  if (have && (have.busy || Date.now() - have.at < EXPLAIN_TTL_MS)) return have.promise;
  const entry = { at: Date.now(), busy: true };
  entry.promise = new Promise((resolve) => waiting.push(async () => {
    try { entry.text = (await request(`/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}/explain`)).report || ''; }
    catch (e) { entry.error = e.message; }
    entry.busy = false; entry.at = Date.now();
    resolve(entry);
  }));
  explained.set(k, entry);
  pump();
  return entry.promise;
}

// At most four explains at once: each runs the scheduler's filters over every node.
function pump() {
  while (inflight < 4 && waiting.length) {
    const job = waiting.shift();
    inflight++;
    job().finally(() => { inflight--; pump(); });
  }
}

// The diagnosis: the report's first lines after the pod's header; the
// counterfactual: what it lacks and whether preemption would help.
export function summarize(report) {
  const lines = (report || '').split('\n').map(s => s.trim()).filter(Boolean);
  const diag = lines.slice(1).find(l => !/^(closest node|it lacks|preemption|topology)/.test(l)) || lines[0] || '';
  const counter = lines.filter(l => /^(closest node|it lacks|topology|preemption)/.test(l)).join('; ');
  const eta = (lines.find(l => /estimated start|eta/i.test(l)) || '').replace(/^.*?(estimated start|eta)[:\s]*/i, '');
  return { diag, counter, eta };
}

// A pending workload's estimatedStart from the queue status objects, if one lists it.
function queueEta(state, pod) {
  for (const path of ['/apis/kueue.x-k8s.io/v1beta1/clusterqueues', '/apis/scheduling.gpusched.io/v1alpha1/queues']) {
    const k = state.kinds.get(path);
    if (!k) continue;
    for (const q of k.objects.values()) {
      const p = (((q.status || {}).admission || {}).pending || []).find(w => w.workload === podKey(pod) ||
        (podGroup(pod) && w.workload === pod.metadata.namespace + '/' + podGroup(pod)));
      if (p) return { eta: p.estimatedStart || '', position: p.position, queue: q.metadata.name };
    }
  }
  return null;
}

function groupWaiting(state, pod) {
  const g = podGroup(pod);
  if (!g) return null;
  let waitingN = 0, total = 0;
  for (const p of state.pods().objects.values())
    if (p.metadata.namespace === pod.metadata.namespace && podGroup(p) === g) { total++; if (isPending(p)) waitingN++; }
  return { name: g, waiting: waitingN, total };
}

export function pendingView(view, state) {
  const pods = state.pods();
  const count = el('p', { class: 'muted', role: 'status', 'aria-live': 'polite' });
  const list = el('div', { class: 'list', role: 'list', 'aria-label': 'Pending pods', tabindex: '0' });
  view.replaceChildren(el('h1', { text: 'Pending pods' }), count, list);
  const render = (k) => {
    const pod = pods.objects.get(k);
    if (!pod) return el('div', { class: 'prow' });
    const why = el('span', { class: 'why', text: 'asking the scheduler…' });
    const g = groupWaiting(state, pod), q = queueEta(state, pod);
    explain(pod.metadata.namespace, pod.metadata.name).then(e => {
      if (e.error) { why.textContent = 'explain: ' + e.error; return; }
      const s = summarize(e.text);
      why.textContent = s.diag + (s.counter ? ' — ' + s.counter : '');
      why.title = e.text;
    });
    return el('div', { class: 'prow', role: 'listitem', 'data-pod': k },
      el('span', { class: 'pname' }, el('a', { href: '#/pods/' + k, text: k })),
      el('span', { text: `${podGpus(pod)} GPU · ${age(pod.metadata.creationTimestamp)}` }),
      el('span', { text: (q ? `${q.queue} #${q.position}` : podQueue(pod)) + (q && q.eta ? ' ETA ' + q.eta : '') }),
      el('span', { text: g ? `group ${g.name}: ${g.waiting}/${g.total} waiting` : '' }),
      why);
  };
  const vl = new VirtualList(list, 48, render);
  const refresh = (dirty) => {
    // Plain comparisons, not localeCompare: this sorts up to 50,000 pods per batch of changes.
    const rows = [];
    for (const p of pods.objects.values()) if (isPending(p)) rows.push([p.metadata.creationTimestamp || '', podKey(p)]);
    rows.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
    const keys = rows.map(r => r[1]);
    count.textContent = `${keys.length} pending pods, oldest first`;
    vl.setKeys(keys, dirty);
  };
  const u = pods.subscribe(refresh);
  refresh();
  return { destroy() { u(); vl.destroy(); } };
}

export function podView(view, state, ns, name) {
  const key = ns + '/' + name;
  const pods = state.pods();
  const phase = el('span', { id: 'pod-phase', role: 'status', 'aria-live': 'polite' });
  const node = el('span');
  const reason = el('pre', { id: 'pod-reason', 'aria-label': 'Why this pod is where it is' });
  const eta = el('span', { id: 'pod-eta' });
  const group = el('span');
  const devices = el('div', { id: 'pod-devices' });
  const events = el('div', { id: 'pod-events' });
  const logs = el('pre', { id: 'pod-logs', 'aria-label': 'Logs', tabindex: '0' });
  const follow = el('button', { type: 'button', id: 'pod-logs-follow', 'aria-pressed': 'false', text: 'Follow logs' });
  view.replaceChildren(
    el('p', {}, el('a', { href: '#/pending', text: '← pending pods' })),
    el('h1', { text: 'Pod ' + key }),
    el('table', {}, el('tbody', {},
      el('tr', {}, el('th', { scope: 'row', text: 'Phase' }), el('td', {}, phase)),
      el('tr', {}, el('th', { scope: 'row', text: 'Node' }), el('td', {}, node)),
      el('tr', {}, el('th', { scope: 'row', text: 'ETA' }), el('td', {}, eta)),
      el('tr', {}, el('th', { scope: 'row', text: 'PodGroup' }), el('td', {}, group)))),
    el('h2', { text: 'Scheduler' }), reason,
    el('h2', { text: 'Devices' }), devices,
    el('h2', { text: 'Events' }), events,
    el('h2', { text: 'Logs' }), el('p', {}, follow), logs);
  let lastPhase = null, lastNode = null;
  const showReason = async (pod) => {
    if (pod && pod.spec && pod.spec.nodeName) {
      reason.textContent = `Bound to ${pod.spec.nodeName}.`;
      eta.textContent = 'started';
      return;
    }
    const e = await explain(ns, name);
    if (e.error) { reason.textContent = 'The scheduler could not explain this pod: ' + e.error; return; }
    reason.textContent = e.text || '(no report)';
    const s = summarize(e.text), q = pod && queueEta(state, pod);
    eta.textContent = s.eta || (q && q.eta) || (q ? `position ${q.position} in ${q.queue}, no estimate yet` : 'no estimate');
  };
  const render = () => {
    const pod = pods.objects.get(key);
    if (!pod) {
      phase.textContent = pods.state === 'connected' ? 'not found (deleted, or not in your namespaces)' : 'loading…';
      return;
    }
    const ph = pod.partial && pod.spec.nodeName ? 'loading…' : (pod.status && pod.status.phase) || 'Pending';
    phase.textContent = ph;
    const nn = (pod.spec && pod.spec.nodeName) || '';
    node.replaceChildren(nn ? el('a', { href: '#/nodes/' + encodeURIComponent(nn), text: nn }) : 'not bound');
    const g = groupWaiting(state, pod);
    group.textContent = g ? `${g.name}: ${g.waiting} of ${g.total} members waiting` : 'none';
    const devs = (pod.status && pod.status.devices) || [];
    devices.replaceChildren(devs.length ? el('table', {},
      el('thead', {}, el('tr', {}, ['GPU', 'Share', 'UUID', 'MIG'].map(h => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, devs.map(d => el('tr', {}, el('td', { text: d.index ?? '' }), el('td', { text: (d.milli || 1000) + ' milli' }),
        el('td', { text: d.uuid || '' }), el('td', { text: d.mig || d.profile || '' })))))
      : el('p', { class: 'muted', text: ((pod.metadata.annotations || {})['gpusched.io/devices']) || 'no devices allocated' }));
    if (ph !== lastPhase || nn !== lastNode) {
      if (explained.get(key)) explained.get(key).at = 0; // the answer may have changed
      showReason(pod);
      // A pod that just started has logs now; a followed stream keeps going by itself.
      if (lastPhase !== null && ph !== lastPhase && follow.getAttribute('aria-pressed') !== 'true') loadLogs(false);
      lastPhase = ph; lastNode = nn;
    }
  };
  // Events about this pod, listed then watched.
  const evKind = state.kind(`/api/v1/namespaces/${encodeURIComponent(ns)}/events?fieldSelector=${encodeURIComponent('involvedObject.name=' + name)}`);
  const renderEvents = () => {
    const evs = [...evKind.objects.values()].sort((a, b) => (a.lastTimestamp || a.eventTime || '').localeCompare(b.lastTimestamp || b.eventTime || ''));
    events.replaceChildren(evs.length ? el('table', {},
      el('thead', {}, el('tr', {}, ['Type', 'Reason', 'Age', 'From', 'Message'].map(h => el('th', { scope: 'col', text: h })))),
      el('tbody', {}, evs.map(e => el('tr', {}, el('td', { text: e.type || '' }), el('td', { text: e.reason || '' }),
        el('td', { text: age(e.lastTimestamp || e.eventTime) + (e.count > 1 ? ` (x${e.count})` : '') }),
        el('td', { text: (e.source && e.source.component) || e.reportingComponent || '' }), el('td', { text: e.message || '' })))))
      : el('p', { class: 'muted', text: 'no events' }));
  };
  const ue = evKind.subscribe(renderEvents);
  renderEvents();
  // Logs: the last lines, or followed as a stream until the page is left.
  let ctl = null;
  const loadLogs = async (streaming) => {
    if (ctl) ctl.abort();
    ctl = new AbortController();
    const path = `/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}/log?tailLines=500` + (streaming ? '&follow=true' : '');
    try {
      const resp = await fetch(path, { headers: { Authorization: 'Bearer ' + token() }, signal: ctl.signal });
      if (!resp.ok) {
        let m = resp.statusText;
        try { m = JSON.parse(await resp.text()).message || m; } catch (e) { /* plain */ }
        logs.textContent = 'no logs: ' + m;
        return;
      }
      logs.textContent = '';
      const reader = resp.body.getReader(), dec = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        logs.append(dec.decode(value, { stream: true }));
        if (streaming) logs.scrollTop = logs.scrollHeight;
      }
    } catch (e) { if (e.name !== 'AbortError') logs.append('\n[log stream ended: ' + e.message + ']'); }
  };
  follow.addEventListener('click', () => {
    const on = follow.getAttribute('aria-pressed') !== 'true';
    follow.setAttribute('aria-pressed', String(on));
    follow.textContent = on ? 'Stop following' : 'Follow logs';
    loadLogs(on);
  });
  loadLogs(false);
  const u = pods.subscribe(keys => { if (keys.has(key)) render(); });
  render();
  // The grid's pods are partial (or absent: a bound pod with no GPU): the page reads the whole one.
  pods.listed.then(() => {
    const have = pods.objects.get(key);
    if (!have || have.partial)
      request(`/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(name)}`).then(o => pods.fill(o), () => {});
  });
  return {
    destroy() {
      u(); ue();
      if (ctl) ctl.abort();
      state.kinds.delete(evKind.path);
      evKind.stop(); // after the delete: #live is recomputed without it
    },
  };
}
