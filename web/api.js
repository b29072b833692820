// api.js - the console's only way to the server: the ordinary API with the
// user's Bearer token (kept in sessionStorage "gpusched.token", gone when
// the tab closes), and one watch stream per kind kept open with fetch and a
// ReadableStream (EventSource cannot send the Authorization header). A kind
// is listed once, then watched from the list's resourceVersion; a broken
// stream resumes from the last version seen with a growing back-off, and a
// 410 Gone (history compacted) lists again. Changes reach the views batched
// per animation frame, so 50,000 pods arriving at once cost one render.

const TOKEN_KEY = 'gpusched.token';

export function token() { return sessionStorage.getItem(TOKEN_KEY); }
export function setToken(t) { if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY); }

export class ApiError extends Error {
  constructor(code, message) { super(message); this.code = code; }
}

// The reason of a refused request: the Status message when it has one.
async function failure(resp) {
  let msg = resp.statusText || ('HTTP ' + resp.status);
  try {
    const text = await resp.text();
    try { const st = JSON.parse(text); if (st && st.message) msg = st.message; } catch (e) { if (text) msg = text.trim(); }
  } catch (e) { /* keep the status text */ }
  return new ApiError(resp.status, msg);
}

export async function request(path, opts = {}) {
  const headers = Object.assign({ 'Accept': 'application/json' }, opts.headers || {});
  const t = opts.token !== undefined ? opts.token : token();
  if (t) headers['Authorization'] = 'Bearer ' + t;
  const resp = await fetch(path, { method: opts.method || 'GET', headers, body: opts.body, signal: opts.signal });
  if (!resp.ok) {
    const err = await failure(resp);
    if (resp.status === 401 && opts.token === undefined) onUnauthorized();
    throw err;
  }
  return opts.raw ? resp : resp.json();
}

let unauthorizedHook = () => {};
export function onUnauthorizedSet(fn) { unauthorizedHook = fn; }
function onUnauthorized() { unauthorizedHook(); }

// Who a token is (SelfSubjectReview): {user, role, namespaces}. Throws ApiError.
export async function whoami(t) {
  const doc = await request('/apis/authentication.k8s.io/v1/selfsubjectreviews', {
    method: 'POST', token: t, headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
  });
  const u = (doc.status && doc.status.userInfo) || {};
  const extra = u.extra || {};
  return { user: u.username || '', role: (extra['gpusched.io/role'] || [''])[0], namespaces: extra['gpusched.io/namespaces'] || [] };
}

export function keyOf(obj) {
  const md = obj.metadata || {};
  return md.namespace ? md.namespace + '/' + md.name : md.name;
}

// Lines of a streamed body, as they arrive.
async function* lines(resp) {
  const reader = resp.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let nl;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl).trim();
      buf = buf.slice(nl + 1);
      if (line) yield line;
    }
  }
}

const pending = new Set();
let frame = 0;
function schedule(kind) {
  pending.add(kind);
  if (!frame) frame = requestAnimationFrame(() => {
    frame = 0;
    const kinds = [...pending];
    pending.clear();
    for (const k of kinds) k.flush();
  });
}

// One resource, listed and watched: objects by "ns/name" (or "name").
export class Kind {
  // startAfter: a promise to wait for before the first list (or null), so a
  // small kind the first paint needs (nodes) is not slowed by a large one.
  // seed: a promise of {objects, rv} (or null) that stands for the first
  // list: partial objects (partial: true) from the console's GPU grid, the
  // watch then starting at rv; a page needing a whole object fetches it
  // (fill). Without a seed (the grid refused or failed) the kind is listed.
  constructor(path, onState, startAfter, seed) {
    this.path = path; // "/api/v1/pods"
    this.objects = new Map();
    this.changed = new Set();
    this.listeners = new Set();
    this.rv = '';
    this.ready = false; // true once listed or seeded: objects holds the kind
    this.state = 'reconnecting';
    this.error = '';
    this.onState = onState;
    this.stopped = false;
    this.backoff = 500;
    this.ctl = null;
    this.startAfter = startAfter || null;
    this.seed = seed || null;
    this.listed = new Promise(resolve => { this.listedResolve = resolve; });
    this.run();
  }
  subscribe(fn) { this.listeners.add(fn); return () => this.listeners.delete(fn); }
  flush() {
    const keys = this.changed;
    this.changed = new Set();
    for (const fn of this.listeners) fn(keys);
  }
  mark(key) { this.changed.add(key); schedule(this); }
  setState(s, err) {
    this.state = s; this.error = err || '';
    if (this.onState) this.onState();
  }
  stop() { this.stopped = true; if (this.ctl) this.ctl.abort(); if (this.onState) this.onState(); }
  async list() {
    const doc = await request(this.path, { signal: this.ctl.signal });
    const seen = new Set();
    for (const o of doc.items || []) {
      const k = keyOf(o);
      seen.add(k);
      this.objects.set(k, o);
      this.mark(k);
    }
    for (const k of [...this.objects.keys()]) if (!seen.has(k)) { this.objects.delete(k); this.mark(k); }
    this.rv = (doc.metadata && doc.metadata.resourceVersion) || '';
    this.ready = true;
    this.listedResolve();
  }
  // A whole object fetched by a page: it replaces a partial one, or stands for
  // one the grid did not carry; one the watch already delivered is newer.
  fill(o) {
    const k = keyOf(o), have = this.objects.get(k);
    if (have && !have.partial) return;
    this.objects.set(k, o);
    this.mark(k);
  }
  async run() {
    const seeded = this.seed ? await this.seed.catch(() => null) : null;
    if (seeded && !this.stopped) {
      for (const o of seeded.objects) { const k = keyOf(o); this.objects.set(k, o); this.mark(k); }
      this.rv = seeded.rv;
      this.ready = true;
      this.listedResolve();
    } else if (this.startAfter) await this.startAfter;
    while (!this.stopped) {
      this.ctl = new AbortController();
      try {
        if (!this.rv) await this.list();
        const sep = this.path.includes('?') ? '&' : '?';
        const resp = await request(this.path + sep + 'watch=1&allowWatchBookmarks=true&resourceVersion=' +
                                   encodeURIComponent(this.rv), { raw: true, signal: this.ctl.signal });
        this.setState('connected');
        this.backoff = 500;
        for await (const line of lines(resp)) this.event(JSON.parse(line));
        // The server ended the stream (its timeout): resume at once.
      } catch (e) {
        if (this.stopped) return;
        this.listedResolve(); // a kind waiting on this one does not wait for a failing list
        if (e instanceof ApiError && e.code === 410) this.rv = '';
        this.setState('reconnecting', e.message || String(e));
        if (e instanceof ApiError && (e.code === 401 || e.code === 403)) this.backoff = Math.max(this.backoff, 5000);
        await new Promise(r => setTimeout(r, this.backoff));
        this.backoff = Math.min(this.backoff * 2, 30000);
      }
    }
  }
  event(ev) {
    const o = ev.object || {};
    const rv = o.metadata && o.metadata.resourceVersion;
    if (ev.type === 'ERROR') {
      if (o.code === 410) this.rv = '';
      throw new ApiError(o.code || 500, o.message || 'watch error');
    }
    if (rv) this.rv = rv;
    if (ev.type === 'BOOKMARK') return;
    const k = keyOf(o);
    if (ev.type === 'DELETED') this.objects.delete(k); else this.objects.set(k, o);
    this.mark(k);
  }
}
