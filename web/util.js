// util.js - small DOM and data helpers shared by the views. Text from the
// cluster (names, messages, logs) only ever goes in as text nodes, never as
// HTML, so nothing a pod or an event says can become markup or script.

export function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'text') e.textContent = v;
    else if (k === 'class') e.className = v;
    else if (k === 'style') e.style.cssText = v; // CSSOM: allowed by the CSP, unlike a style attribute
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

const SVG = 'http://www.w3.org/2000/svg';
export function svg(tag, attrs, ...children) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) if (k === 'text') e.textContent = v; else e.setAttribute(k, String(v));
  for (const c of children.flat()) if (c) e.append(c);
  return e;
}

// A Kubernetes quantity as a number ("4", "500m").
export function qty(v) {
  if (typeof v === 'number') return v;
  if (typeof v !== 'string') return 0;
  const m = /^([0-9.]+)(m?)$/.exec(v);
  return m ? parseFloat(m[1]) / (m[2] ? 1000 : 1) : 0;
}

export function podGpus(pod) {
  let n = 0;
  for (const c of (pod.spec && pod.spec.containers) || []) {
    const r = c.resources || {};
    n += qty((r.limits && r.limits['nvidia.com/gpu']) || (r.requests && r.requests['nvidia.com/gpu']));
  }
  return n;
}

export function age(ts) {
  if (!ts) return '';
  const s = Math.max(0, (Date.now() - Date.parse(ts)) / 1000);
  return s < 120 ? Math.round(s) + 's' : s < 7200 ? Math.round(s / 60) + 'm' : Math.round(s / 3600) + 'h';
}

export function podKey(pod) { return pod.metadata.namespace + '/' + pod.metadata.name; }

export function isPending(pod) {
  const ph = pod.status && pod.status.phase;
  return !(pod.spec && pod.spec.nodeName) && (!ph || ph === 'Pending');
}

export function podGroup(pod) {
  const l = (pod.metadata && pod.metadata.labels) || {};
  const a = (pod.metadata && pod.metadata.annotations) || {};
  return l['scheduling.x-k8s.io/pod-group'] || l['pod-group.scheduling.sigs.k8s.io'] ||
         a['scheduling.k8s.io/group-name'] || l['scheduling.k8s.io/group-name'] || '';
}

export function podQueue(pod) {
  const l = (pod.metadata && pod.metadata.labels) || {};
  return l['kueue.x-k8s.io/queue-name'] || l['scheduling.gpusched.io/queue'] || '';
}

// A virtualised list: only the rows in view (plus a margin) are in the DOM.
// render(key) builds a row; keys() is the current order.
export class VirtualList {
  constructor(container, rowHeight, render) {
    this.c = container; this.h = rowHeight; this.render = render;
    this.keys = []; this.rows = new Map();
    this.spacer = el('div', { class: 'spacer', 'aria-hidden': 'true' });
    this.c.append(this.spacer);
    this.c.addEventListener('scroll', () => this.paint());
    this.resize = () => this.paint();
    window.addEventListener('resize', this.resize);
  }
  destroy() { window.removeEventListener('resize', this.resize); }
  setKeys(keys, dirty) {
    this.keys = keys;
    this.spacer.style.height = (keys.length * this.h) + 'px';
    if (dirty) for (const k of dirty) { const r = this.rows.get(k); if (r) { r.remove(); this.rows.delete(k); } }
    this.paint(true);
  }
  refreshAll() { for (const r of this.rows.values()) r.remove(); this.rows.clear(); this.paint(); }
  paint() {
    const top = this.c.scrollTop, height = this.c.clientHeight || 600;
    const first = Math.max(0, Math.floor(top / this.h) - 5);
    const last = Math.min(this.keys.length, Math.ceil((top + height) / this.h) + 5);
    const want = new Map();
    for (let i = first; i < last; i++) want.set(this.keys[i], i);
    for (const [k, r] of this.rows) if (!want.has(k)) { if (r.contains(document.activeElement)) continue; r.remove(); this.rows.delete(k); }
    for (const [k, i] of want) {
      let r = this.rows.get(k);
      if (!r) { r = this.render(k); this.rows.set(k, r); this.c.append(r); }
      r.style.top = (i * this.h) + 'px';
    }
  }
}
