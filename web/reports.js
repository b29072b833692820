// reports.js - the simulator's stored runs, when the server was started with
// --ui-reports DIR: a list of DIR's runs (those with a report.html) and the
// chosen run's report embedded in a frame, with its files to save. The
// reports need the API's token like every data call, and a frame or a link
// cannot send one: the page fetches each file with its Bearer token and hands
// it over as a blob: URL. The report is the simulator's own self-contained
// page; its frame is sandboxed without allow-scripts (the report's no-script
// policy holds in the frame too) and without allow-same-origin (it cannot
// read the console's token).
import { el } from './util.js';
import { request } from './api.js';

// A file of a run as a blob: URL (revoked by the caller).
async function blobOf(path, type) {
  const resp = await request(path, { raw: true, headers: { Accept: type } });
  return URL.createObjectURL(new Blob([await resp.arrayBuffer()], { type }));
}

export function reportsView(view, run) {
  const body = el('div');
  view.replaceChildren(el('h1', { text: 'Simulator reports' }), body);
  let stopped = false;
  const urls = [];
  const keep = (u) => { if (stopped) URL.revokeObjectURL(u); else urls.push(u); return u; };
  (async () => {
    const runs = (await request('/ui/reports/')).runs || [];
    if (stopped) return;
    const list = el('ul', {}, runs.map(r => el('li', {}, el('a', { href: '#/reports/' + encodeURIComponent(r), 'aria-current': r === run ? 'page' : null, text: r }))));
    const parts = [runs.length ? list : el('p', { class: 'muted', text: 'No runs with a report.html in the reports directory.' })];
    body.replaceChildren(...parts);
    if (!run || !runs.includes(run)) return;
    const base = '/ui/reports/' + encodeURIComponent(run) + '/';
    const html = keep(await blobOf(base + 'report.html', 'text/html'));
    if (stopped) return;
    // The other files: fetched with the token when asked for, saved under their own names.
    const save = (file, type) => {
      const b = el('button', { type: 'button', text: 'save ' + file });
      b.addEventListener('click', async () => {
        try {
          const a = el('a', { href: keep(await blobOf(base + file, type)), download: run + '-' + file });
          document.body.append(a); a.click(); a.remove();
        } catch (e) { b.textContent = file + ': ' + e.message; }
      });
      return b;
    };
    parts.push(el('h2', { text: 'Run ' + run }),
      el('p', {}, save('series.csv', 'text/csv'), ' ', save('events.jsonl', 'application/x-ndjson')),
      el('iframe', { src: html, sandbox: '', title: 'Simulator report of run ' + run, class: 'report', id: 'report-frame' }));
    body.replaceChildren(...parts);
  })().catch(e => { if (!stopped) body.replaceChildren(el('p', { class: 'error', role: 'alert', text: 'reports: ' + e.message })); });
  return { destroy() { stopped = true; for (const u of urls) URL.revokeObjectURL(u); } };
}
