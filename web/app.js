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
  gridHolders: null, // holders from the grid, until the pods are in
  seeds() {
    if (!this.grid) {
      const t = token();
      // the token given: a refused one is the sign-in's to report (whoami), not this read's
      this.grid = request('/apis/ui.gpusched.io/v1/gpugrid', { token: t }).then(doc => {
        const nodes = gridNodes(doc);
        this.gridHolders = nodes.holders;
        return { nodes, pods: afterPaint().then(() => gridPods(doc, nodes.rv)) };
      }).catch(() => null);
    }
    return this.grid;
  },
  nodes() { return this.kind('/api/v1/nodes', null, this.seeds().then(s => s && s.nodes)); },
  // Without the grid, pods are listed once the nodes are (or 1.5 s later): the grid paints first, holders follow.
  pods() {
    return this.kind('/api/v1/pods', Promise.race([this.nodes().listed, new Promise(r => setTimeout(r, 1500))]),
                     this.seeds().then(s => s && s.pods));
  },
};

// Resolves once the frame now being prepared has been painted.
function afterPaint() {
  return new Promise(resolve => requestAnimationFrame(() => setTimeout(resolve, 0)));
}

const split = (k) => { const i = k.indexOf('/'); return [k.slice(0, i), k.slice(i + 1)]; };

// The grid's nodes as partial Node objects (the fields the grid reads) and
// who holds each GPU: {objects, rv, holders} (holders as rebuildHolders makes them).
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

// GPU holders, rebuilt from the pods the token may read (a tenant sees its own only).
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

export function rebuildHolders() {
  // Until the pods are in (a frame after the grid's nodes), the grid's own holders stand for them.
  const pk = state.kinds.get('/api/v1/pods');
  if (state.gridHolders && !(pk && pk.ready)) { state.holders = state.gridHolders; return; }
  state.gridHolders = null;
  const h = new Map();
  const nodes = state.nodes().objects;
  for (const pod of state.pods().objects.values()) {
    const nn = pod.spec && pod.spec.nodeName;
    const ph = pod.status && pod.status.phase;
    if (!nn || ph === 'Succeeded' || ph === 'Failed') continue;
    let per = h.get(nn);
    if (!per) h.set(nn, per = new Map());
    for (const d of podDevices(pod, nodes.get(nn))) {
      let l = per.get(d.index);
      if (!l) per.set(d.index, l = []);
      l.push({ pod: podKey(pod), milli: d.milli });
    }
  }
  for (const per of h.values()) for (const l of per.values()) l.sort((a, b) => (a.pod < b.pod ? -1 : a.pod > b.pod ? 1 : 0));
  state.holders = h;
}

let current = null; // the page shown: {destroy()}

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
  state.gridHolders = null;
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
  if (!state.me) {
    // The grid is read alongside the token's check on the pages that paint from it.
    if (!/^#\/(queues|reports)/.test(hash)) state.seeds();
    try { signedIn(await whoami(token())); } catch (e) { signOut(e.message); return; }
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
onUnauthorizedSet(() => signOut('the server no longer accepts this token'));
window.addEventListener('hashchange', route);
route();
