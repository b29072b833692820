// app.js - the console's entry: login, routing by location.hash, and the
// cluster state every page reads (one list+watch per kind, see api.js).
// Routes: #/login, #/nodes, #/nodes/<name>, #/queues, #/pending,
// #/pods/<ns>/<name>; without a token every route shows the login form.
import { Kind, request, token, setToken, whoami, onUnauthorizedSet } from './api.js';
import { el, podKey } from './util.js';
import { nodesView, nodeView } from './nodes.js';
import { pendingView, podView } from './pods.js';
import { queuesView } from './queues.js';
import { reportsView } from './reports.js';

const view = document.getElementById('view');
const live = document.getElementById('live');
const who = document.getElementById('whoami');
const logout = document.getElementById('logout');

// The shared state: kinds started on demand, and who holds which GPU.
export const state = {
  me: null,
  kinds: new Map(),
  // node name -> GPU index -> [{pod: "ns/name", milli}] (pods bound there, not finished)
  holders: new Map(),
  kind(path, startAfter, seed) {
    let k = this.kinds.get(path);
    if (!k) { k = new Kind(path, liveState, startAfter, seed); this.kinds.set(path, k); liveState(); }
    return k;
  },
  // Nodes and pods start from the GPU grid (one read, see gridNodes and
  // gridPods), then watch from its resourceVersion; whole objects are
  // fetched by the node and pod pages. The grid is asked for as soon as a
  // token is there, alongside the token's check, and nothing else is: the
  // nodes and their holders paint from it first, the 50,000 partial pods are
  // made from it after that paint, and only then do the pod watch and the
  // rest start.
  grid: null,
  seeds() {
    if (!this.grid) {
      const t = token();
      // the token given: a refused one is the sign-in's to report (whoami), not this read's
      this.grid = request('/apis/ui.gpusched.io/v1/gpugrid', { token: t }).then(doc => {
        const nodes = gridNodes(doc);
        // the grid's holders stand for the pods' until the pods are in (the first pods batch re-counts them)
        if (!this.kinds.get(PODS) || !this.kinds.get(PODS).ready) this.holders = nodes.holders;
        return { nodes, pods: afterPaint().then(() => gridPods(doc, nodes.rv)) };
      }).catch(() => null);
    }
    return this.grid;
  },
  nodes() {
    const k = this.kinds.get(NODES);
    return k || this.indexed(this.kind(NODES, null, this.seeds().then(s => s && s.nodes)), nodesChanged);
  },
  // Without the grid, pods are listed once the nodes are (or 1.5 s later): the grid paints first, holders follow.
  pods() {
    const k = this.kinds.get(PODS);
    return k || this.indexed(this.kind(PODS, Promise.race([this.nodes().listed, new Promise(r => setTimeout(r, 1500))]),
                                       this.seeds().then(s => s && s.pods)), podsChanged);
  },
  // The holders' index listens first, so a page's listener sees the holders of the same batch.
  indexed(kind, fn) { kind.subscribe(fn); return kind; },
};

const NODES = '/api/v1/nodes', PODS = '/api/v1/pods';

// Resolves in a task after the next frame has begun: the nodes' rows, rendered in the frame now
// being prepared, are on screen by then.
function afterPaint() {
  return new Promise(resolve => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(resolve, 0))));
}

const split = (k) => { const i = k.indexOf('/'); return [k.slice(0, i), k.slice(i + 1)]; };

// The grid's nodes as partial Node objects (the fields the grid reads) and
// who holds each GPU: {objects, rv, holders} (holders as recount makes them).
function gridNodes(doc) {
  const rv = (doc.metadata && doc.metadata.resourceVersion) || '';
  const nodes = [], holders = new Map();
  for (const n of doc.nodes || []) {
    nodes.push({ partial: true,
      metadata: { name: n.name, annotations: n.stack ? { 'gpusched.io/gpu-stack-state': n.stack } : {} },
      spec: { unschedulable: n.unschedulable, taints: n.taints || [] },
      status: { conditions: [{ type: 'Ready', status: n.ready ? 'True' : 'False' }], devices: n.gpus || [] } });
    let per = null;
    for (const g of n.gpus || []) {
      if (n.model && !g.model) g.model = n.model;
      const h = g.holders || [];
      if (!h.length) continue;
      if (!per) holders.set(n.name, per = new Map());
      const l = per.get(g.index) || [];
      h.forEach((pod, i) => l.push({ pod, milli: g.milli ? g.milli[i] : 1000 }));
      per.set(g.index, l);
    }
  }
  return { objects: nodes, rv, holders };
}

// The grid's bound and pending pods as partial Pod objects, the fields the
// holders and the pending list read: {objects, rv}.
function gridPods(doc, rv) {
  const pods = new Map();
  const grouped = doc.grouped || {};
  for (const n of doc.nodes || []) {
    for (const g of n.gpus || []) (g.holders || []).forEach((h, i) => {
      let p = pods.get(h);
      if (!p) {
        const [ns, name] = split(h);
        pods.set(h, p = { partial: true, metadata: { namespace: ns, name, labels: grouped[h] ? { 'scheduling.x-k8s.io/pod-group': grouped[h] } : {} },
          spec: { nodeName: n.name }, status: { devices: [] } });
      }
      p.status.devices.push({ index: g.index, milli: g.milli ? g.milli[i] : 1000 });
    });
  }
  for (const w of doc.pending || []) {
    const labels = {};
    if (w.podGroup) labels['scheduling.x-k8s.io/pod-group'] = w.podGroup;
    if (w.queue) labels['kueue.x-k8s.io/queue-name'] = w.queue;
    pods.set(w.namespace + '/' + w.name, { partial: true,
      metadata: { namespace: w.namespace, name: w.name, creationTimestamp: w.creationTimestamp, labels },
      spec: { containers: [{ name: '', resources: { requests: { 'nvidia.com/gpu': String(w.gpus) } } }] },
      status: { phase: 'Pending' } });
  }
  return { objects: [...pods.values()], rv };
}

function liveState() {
  let ok = state.kinds.size > 0, err = '';
  for (const k of state.kinds.values()) if (k.state !== 'connected') { ok = false; err = k.error; }
  live.dataset.state = ok ? 'connected' : 'reconnecting';
  live.textContent = ok ? 'live' : 'reconnecting' + (err ? ': ' + err : '');
}

// The GPUs a pod holds (the pods the token may read: a tenant sees its own only).
function podDevices(pod, node) {
  const out = [];
  const st = pod.status || {};
  if (Array.isArray(st.devices) && st.devices.length) {
    for (const d of st.devices) if (typeof d.index === 'number') out.push({ index: d.index, milli: d.milli || 1000 });
    return out;
  }
  const ann = (pod.metadata.annotations || {})['gpusched.io/devices'];
  if (ann && node) {
    const devs = (node.status && node.status.devices) || [];
    for (const u of ann.split(',')) {
      const d = devs.find(x => x.uuid === u.trim());
      if (d) out.push({ index: d.index, milli: 1000 });
    }
  }
  return out;
}

// Who holds which GPU, kept per node: a batch of pod changes re-counts the
// nodes those pods left or are on, not all 50,000 pods; a Node's change
// re-counts its own (its UUIDs resolve the devices annotation).
const placed = new Map();   // pod key -> the node it holds GPUs on (bound, not finished)
const onNode = new Map();   // node name -> Set of pod keys
let holdersChanged = new Set(); // nodes whose holders changed since the nodes page last asked

function recount(name) {
  const pods = state.kinds.get(PODS), node = state.kinds.get(NODES) && state.kinds.get(NODES).objects.get(name);
  const per = new Map();
  for (const k of onNode.get(name) || []) {
    for (const d of podDevices(pods.objects.get(k), node)) {
      let l = per.get(d.index);
      if (!l) per.set(d.index, l = []);
      l.push({ pod: k, milli: d.milli });
    }
  }
  for (const l of per.values()) l.sort((a, b) => (a.pod < b.pod ? -1 : a.pod > b.pod ? 1 : 0));
  const before = state.holders.get(name);
  if (per.size) state.holders.set(name, per); else state.holders.delete(name);
  const text = (m) => JSON.stringify(m ? [...m].sort((a, b) => a[0] - b[0]) : []);
  if (text(before) !== text(per.size ? per : null)) holdersChanged.add(name);
}

function podsChanged(keys) {
  const pods = state.kinds.get(PODS), touched = new Set();
  for (const k of keys) {
    const pod = pods.objects.get(k);
    const nn = pod && pod.spec && pod.spec.nodeName, ph = pod && pod.status && pod.status.phase;
    const now = nn && ph !== 'Succeeded' && ph !== 'Failed' ? nn : null, was = placed.get(k) || null;
    if (was && was !== now) { const set = onNode.get(was); set.delete(k); if (!set.size) onNode.delete(was); touched.add(was); }
    if (now) {
      if (was !== now) { if (!onNode.has(now)) onNode.set(now, new Set()); onNode.get(now).add(k); placed.set(k, now); }
      touched.add(now);
    } else placed.delete(k);
  }
  for (const n of touched) recount(n);
}

function nodesChanged(keys) {
  const pods = state.kinds.get(PODS);
  if (!pods || !pods.ready) return; // the grid's holders stand until the pods are in
  for (const n of keys) recount(n);
}

// The nodes whose holders changed since the last call (the nodes page re-renders those rows).
export function takeHolderChanges() {
  const out = holdersChanged;
  holdersChanged = new Set();
  return out;
}

function resetHolders() {
  placed.clear();
  onNode.clear();
  holdersChanged = new Set();
  state.holders = new Map();
}

let current = null; // the page shown: {destroy()}
let checking = null; // the stored token's check, while it is out

function loginView(message) {
  const input = el('input', { id: 'token', type: 'password', autocomplete: 'off', required: true });
  const err = el('p', { id: 'login-error', class: 'error', role: 'alert', hidden: !message, text: message || '' });
  const button = el('button', { id: 'login', type: 'submit', text: 'Sign in' });
  const form = el('form', { class: 'login', 'aria-labelledby': 'login-title' },
    el('h1', { id: 'login-title', text: 'Sign in to gpusched' }),
    el('p', { class: 'muted', text: 'Use a bearer token of the server (tokens.csv in its data directory).' }),
    el('p', {}, el('label', { for: 'token', text: 'Token' }), input),
    err, button);
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    button.disabled = true;
    try {
      const me = await whoami(input.value.trim());
      setToken(input.value.trim());
      signedIn(me);
      const want = sessionStorage.getItem('gpusched.after') || '#/nodes';
      sessionStorage.removeItem('gpusched.after');
      location.hash = want === '#/login' ? '#/nodes' : want;
      route();
    } catch (ex) {
      err.hidden = false;
      err.textContent = 'Sign-in refused: ' + (ex.message || String(ex));
      button.disabled = false;
      input.focus();
    }
  });
  view.replaceChildren(form);
  input.focus();
  return { destroy() {} };
}

function signedIn(me) {
  state.me = me;
  who.textContent = me.user + (me.role ? ' (' + me.role + (me.namespaces.length ? ': ' + me.namespaces.join(', ') : '') + ')' : '');
  logout.hidden = false;
}

function signOut(message) {
  for (const k of state.kinds.values()) k.stop();
  state.kinds.clear();
  state.grid = null;
  resetHolders();
  state.me = null;
  setToken(null);
  who.textContent = '';
  logout.hidden = true;
  liveState();
  if (current) current.destroy();
  current = loginView(message);
  if (location.hash !== '#/login') history.replaceState(null, '', '#/login');
}

async function route() {
  const hash = location.hash || '#/nodes';
  if (current) { current.destroy(); current = null; }
  if (!token()) {
    if (hash !== '#/login') sessionStorage.setItem('gpusched.after', hash);
    current = loginView();
    return;
  }
  if (!state.me && !checking) {
    // A stored token: its check (SelfSubjectReview) runs while the page reads the grid and paints;
    // every fact shown was authorized for the same token, and a refused one returns to the login form.
    if (!/^#\/(queues|reports)/.test(hash)) state.seeds();
    const t = token();
    checking = whoami(t).then(me => { checking = null; if (token() === t) signedIn(me); },
                              e => { checking = null; if (token() === t) signOut(e.message); });
  }
  const parts = hash.replace(/^#\/?/, '').split('/').map(decodeURIComponent);
  for (const a of document.querySelectorAll('header nav a')) {
    if (a.getAttribute('href') === '#/' + parts[0]) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
  if (parts[0] === 'login') { location.hash = '#/nodes'; return; }
  if (parts[0] === 'nodes' && parts[1]) current = nodeView(view, state, parts[1]);
  else if (parts[0] === 'queues') current = queuesView(view, state);
  else if (parts[0] === 'pending') current = pendingView(view, state);
  else if (parts[0] === 'reports') current = reportsView(view, parts[1]);
  else if (parts[0] === 'pods' && parts[2]) current = podView(view, state, parts[1], parts[2]);
  else current = nodesView(view, state);
}

logout.addEventListener('click', () => signOut());
// The skip link moves focus without touching location.hash (which is the route).
document.querySelector('.skip').addEventListener('click', (e) => { e.preventDefault(); view.focus(); });
// While the token's check is out, its answer (and reason) is the one to show.
onUnauthorizedSet(() => { if (!checking) signOut('the server no longer accepts this token'); });
window.addEventListener('hashchange', route);
route();
