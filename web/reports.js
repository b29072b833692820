// reports.js - the simulator's stored runs, when the server was started with
// --ui-reports DIR: a list of DIR's runs (those with a report.html) and the
// chosen run's report embedded in a frame, with links to its files. The
// report is the simulator's own self-contained page, served by the server
// with a policy that allows no script.
import { el } from './util.js';

export function reportsView(view, run) {
  const body = el('div');
  view.replaceChildren(el('h1', { text: 'Simulator reports' }), body);
  let stopped = false;
  (async () => {
    const resp = await fetch('/ui/reports/');
    if (stopped) return;
    if (!resp.ok) {
      body.replaceChildren(el('p', { class: 'muted', text: (await resp.text()).trim() }));
      return;
    }
    const runs = (await resp.json()).runs || [];
    const list = el('ul', {}, runs.map(r => el('li', {}, el('a', { href: '#/reports/' + encodeURIComponent(r), 'aria-current': r === run ? 'page' : null, text: r }))));
    const parts = [runs.length ? list : el('p', { class: 'muted', text: 'No runs with a report.html in the reports directory.' })];
    if (run && runs.includes(run)) {
      const base = '/ui/reports/' + encodeURIComponent(run) + '/';
      parts.push(el('h2', { text: 'Run ' + run }),
        el('p', {}, el('a', { href: base + 'report.html', target: '_blank', rel: 'noopener', text: 'report.html (new tab)' }), ' · ',
          el('a', { href: base + 'series.csv', text: 'series.csv' }), ' · ', el('a', { href: base + 'events.jsonl', text: 'events.jsonl' })),
        el('iframe', { src: base + 'report.html', title: 'Simulator report of run ' + run, class: 'report' }));
    }
    body.replaceChildren(...parts);
  })().catch(e => { if (!stopped) body.replaceChildren(el('p', { class: 'error', text: 'reports: ' + e.message })); });
  return { destroy() { stopped = true; } };
}
