#!/usr/bin/python3
"""The web console (/ui) at scale: first paint of the GPU grid and the delay of a live update.

    /usr/bin/python3 bench/console.py [--bin build/gpusched] [--nodes 5000] [--pods 50000]
        [--pending 1000] [--threads 4] [--repeat 3] [--loads 3] [--json FILE]

Starts one `gpusched server` (SQLite) in a temporary directory and fills it through
the API: --nodes Node objects of 8 H100s each (status.devices, two NVLink islands of
four, two NUMA nodes; no agents: GPUSCHED_NODE_GRACE keeps them from being declared
unreachable), then --pods pods, of which --pending ask for 16 GPUs and stay pending
and the others are bound (spec.nodeName, gpusched.io/devices, phase Running): per
node two 2-GPU pods and four 1-GPU pods, which hold all 8 GPUs, and the rest without
GPUs. Headless Chromium (tests/integration/browser.py) then opens the console and
measures, with performance.now() in the page:

  first paint   navigation start -> the first GPU cell ([data-gpu]) in the DOM, and
                -> the next animation frame after it (the grid on screen), for
                --loads page loads (the first with a cold cache; the JSON's
                first_paint_ms is that one), with the API requests done by then
  --trace       one more cold load in a Chromium recording its trace (the
                driver's performance log): the main thread's busy and idle
                time up to the first paint, time per event (script, JSON
                and style, layout, paint), the longest tasks, every request
  update        performance.now() just before the API write -> the cell changed:
                a GPU marked Unhealthy in its Node's status (data-health), and a pod
                holding a GPU deleted (data-holders); each --repeat times

The same functions (fill, measure) run at a smaller size in
tests/integration/test_console.py. Targets: first paint <= 2 s, update <= 1 s.
"""
import argparse
import json
import pathlib
import statistics
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))

GPUS = 8
GPU_PODS = [2, 2, 1, 1, 1, 1]  # the GPU pods of each node: 8 GPUs held
NAMESPACES = [f"team-{i}" for i in range(10)]


def node_name(i):
    return f"node-{i:05d}"


def node(i):
    devs = [{"index": g, "uuid": f"GPU-{i:05d}-{g}", "model": "NVIDIA-H100-80GB-HBM3", "memoryMiB": 81559,
             "numaNode": g // 4, "nvlinkPeers": [p for p in range(g // 4 * 4, g // 4 * 4 + 4) if p != g],
             "health": "Healthy"} for g in range(GPUS)]
    res = {"cpu": "256", "memory": "2Ti", "pods": "110", "nvidia.com/gpu": str(GPUS)}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": node_name(i), "labels": {"kubernetes.io/hostname": node_name(i),
                                                          "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            "status": {"capacity": res, "allocatable": res, "devices": devs,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "Bench"}]}}


def pod(name, space, gpus=0, node_i=None, first_gpu=0):
    res = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {"requests": {"cpu": "100m"}}
    p = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": space, "annotations": {}},
         "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"],
                                  "resources": res}]},
         "status": {"phase": "Pending"}}
    if node_i is not None:
        p["spec"]["nodeName"] = node_name(node_i)
        p["status"]["phase"] = "Running"
        if gpus:
            p["metadata"]["annotations"]["gpusched.io/devices"] = ",".join(
                f"GPU-{node_i:05d}-{g}" for g in range(first_gpu, first_gpu + gpus))
    return p


def plan(nodes, pods, pending):
    """(path, body) of every object, namespaces and nodes first."""
    if pods - pending < 0:
        raise ValueError(f"--pending {pending} is more than --pods {pods}")
    out = [("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}})
           for n in NAMESPACES]
    out += [("/api/v1/nodes", node(i)) for i in range(nodes)]
    bound = pods - pending
    per, extra = divmod(bound, nodes)
    k = 0
    for i in range(nodes):
        gpu = 0
        for j in range(per + (1 if i < extra else 0)):
            space = NAMESPACES[k % len(NAMESPACES)]
            gpus = GPU_PODS[j] if j < len(GPU_PODS) else 0
            out.append((f"/api/v1/namespaces/{space}/pods", pod(f"p-{i:05d}-{j}", space, gpus, i, gpu)))
            gpu += gpus
            k += 1
    for j in range(pending):
        space = NAMESPACES[j % len(NAMESPACES)]
        out.append((f"/api/v1/namespaces/{space}/pods", pod(f"wait-{j:05d}", space, 16)))
    return out


def session(token, ca):
    import requests
    s = requests.Session()
    s.trust_env = False  # REQUESTS_CA_BUNDLE would replace the server's own CA
    s.verify = ca
    s.headers["Authorization"] = f"Bearer {token}"
    return s


def fill(url, token, ca, nodes, pods, pending, threads=4):
    """Creates the namespaces, nodes and pods of plan(); returns the seconds it took. Raises on a refusal."""
    items = plan(nodes, pods, pending)
    t0 = time.time()
    head = len(NAMESPACES) + nodes  # nodes before the pods bound to them
    fails = []

    def work(chunk):
        s = session(token, ca)
        for path, body in chunk:
            r = s.post(url + path, json=body, timeout=60)
            if r.status_code != 201:
                fails.append(f"POST {path} {body['metadata']['name']}: {r.status_code} {r.text[:200]}")
                return
    for part in (items[:head], items[head:]):
        ts = [threading.Thread(target=work, args=(part[t::threads],)) for t in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        if fails:
            raise RuntimeError("fill refused: " + "; ".join(fails[:3]))
    return time.time() - t0


# Installed before the page's own scripts: the moment the first GPU cell is in the DOM,
# and the animation frame after it (the grid painted).
FIRST_CELL_JS = """
window.__gsFirstCell = null; window.__gsFirstFrame = null;
new MutationObserver((m, o) => {
  if (window.__gsFirstCell === null && document.querySelector('[data-gpu]')) {
    window.__gsFirstCell = performance.now();
    requestAnimationFrame(() => { window.__gsFirstFrame = performance.now(); });
    o.disconnect();
  }
}).observe(document, {childList: true, subtree: true});
"""

# Arms a watch on one cell (found again on every mutation: a virtualised grid may
# replace elements) and returns performance.now(); __gsChanged gets the moment the
# cell's attribute stops being what it was.
ARM_JS = """
const [node, gpu, name, before] = arguments;
const sel = '[data-node="' + node + '"][data-gpu="' + gpu + '"]';
window.__gsChanged = null;
if (window.__gsObs) window.__gsObs.disconnect();
window.__gsObs = new MutationObserver(() => {
  const e = document.querySelector(sel);
  if (e && e.getAttribute(name) !== before && window.__gsChanged === null) window.__gsChanged = performance.now();
});
window.__gsObs.observe(document.body, {subtree: true, childList: true, attributes: true});
return performance.now();
"""


RESOURCES_JS = """
return performance.getEntriesByType('resource').filter(e => e.name.includes('/api')).map(e => ({
  path: new URL(e.name).pathname + new URL(e.name).search, start_ms: Math.round(e.startTime),
  end_ms: Math.round(e.responseEnd), bytes: e.encodedBodySize}));
"""


def _wait(d, js, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = d.execute_script(js)
        if v is not None and v is not False:
            return v
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


def measure(d, url, token, ca, repeat=3, loads=1):
    """First paint (of `loads` page loads; first_paint_ms is the first) and update delays (ms) on the
    console in driver d; see the module's comment."""
    s = session(token, ca)
    # the token goes in from another page of the origin, so that /ui is a new document (not a hash change)
    d.get(url + "/readyz")
    d.execute_script("sessionStorage.setItem('gpusched.token', arguments[0]);", token)
    d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": FIRST_CELL_JS})
    firsts, cells, api = [], [], []
    for _ in range(loads):
        d.get(url + "/readyz")  # away first: loading the same URL with the same hash would be no navigation
        d.get(url + "/ui/#/nodes")
        firsts.append(_wait(d, "return window.__gsFirstFrame", 60, "the first GPU cell"))
        cells.append(d.execute_script("return window.__gsFirstCell"))
        # where the time went: the API requests done by then (watches still open are not listed)
        api.append(d.execute_script(RESOURCES_JS))
    first, cell = firsts[0], cells[0]
    _wait(d, "const e = document.querySelector('#live'); return e && e.dataset.state === 'connected'", 30,
          "#live connected")
    dom_cells = d.execute_script("return document.querySelectorAll('[data-gpu]').length")
    health, holder = [], []
    for k in range(repeat):
        # a GPU of the first node in view turns Unhealthy
        n, g = d.execute_script("const e = document.querySelector('[data-gpu]');"
                                "return [e.dataset.node, e.dataset.gpu];")
        obj = s.get(f"{url}/api/v1/nodes/{n}", timeout=30).json()
        g = (int(g) + k) % GPUS
        dev = next(x for x in obj["status"]["devices"] if x["index"] == g)
        before = dev.get("health", "Healthy")
        dev["health"] = "Unhealthy" if before == "Healthy" else "Healthy"
        t0 = d.execute_script(ARM_JS, n, g, "data-health", before)
        r = s.put(f"{url}/api/v1/nodes/{n}/status", json=obj, timeout=30)
        if r.status_code != 200:
            raise RuntimeError(f"PUT node {n} status: {r.status_code} {r.text[:200]}")
        health.append(_wait(d, "return window.__gsChanged", 30, f"{n} GPU {g} to change health") - t0)
        # a pod holding a GPU in view is deleted
        n, g, holders = d.execute_script(
            "const e = Array.from(document.querySelectorAll('[data-gpu]')).find(x => x.dataset.holders);"
            "return e ? [e.dataset.node, e.dataset.gpu, e.dataset.holders] : [null, null, null];")
        if not n:
            raise AssertionError("no GPU cell with a holder in view")
        space, name = holders.split(",")[0].split("/")
        t0 = d.execute_script(ARM_JS, n, g, "data-holders", holders)
        r = s.delete(f"{url}/api/v1/namespaces/{space}/pods/{name}?gracePeriodSeconds=0", timeout=30)
        if r.status_code != 200:
            raise RuntimeError(f"DELETE pod {space}/{name}: {r.status_code} {r.text[:200]}")
        holder.append(_wait(d, "return window.__gsChanged", 30, f"{n} GPU {g} to lose {space}/{name}") - t0)
    return {"first_cell_ms": round(cell), "first_paint_ms": round(first), "dom_cells": dom_cells,
            "first_paint_all_ms": [round(x) for x in firsts], "api_requests": api[0],
            "update_health_ms": round(max(health)), "update_health_median_ms": round(statistics.median(health)),
            "update_holder_ms": round(max(holder)), "update_holder_median_ms": round(statistics.median(holder))}


# Chromium's trace categories for --trace: the main thread's tasks and what they ran
TRACE_CATEGORIES = "devtools.timeline,blink.user_timing,v8.execute,toplevel,disabled-by-default-devtools.timeline"
# the events a page load's time is split into (each summed over its outermost occurrences)
TRACE_NAMES = ("ParseHTML", "EvaluateScript", "v8.evaluateModule", "v8.compile", "v8.compileModule", "FunctionCall",
               "RunMicrotasks", "TimerFire", "FireAnimationFrame", "UpdateLayoutTree", "Layout", "PrePaint", "Paint",
               "Layerize", "ParseAuthorStyleSheet", "HitTest", "MajorGC", "MinorGC", "V8.GC_SCAVENGER", "BlinkGC.AtomicPhase")
ALL_RESOURCES_JS = """
return performance.getEntriesByType('resource').concat(performance.getEntriesByType('navigation')).map(e => ({
  path: new URL(e.name).pathname + new URL(e.name).search, start_ms: Math.round(e.startTime),
  response_start_ms: Math.round(e.responseStart), end_ms: Math.round(e.responseEnd), bytes: e.encodedBodySize}));
"""


def summarize_trace(events, first_ms):
    """Where the renderer's main thread spent a page load, from navigation start to the first paint
    (first_ms after it): busy time (its top-level tasks), time per event name (outermost occurrences),
    and the longest tasks with their largest events."""
    # the console's is the session's last main-frame navigation (its documentLoaderURL is often empty)
    navs = [e for e in events if e.get("name") == "navigationStart" and
            e.get("args", {}).get("data", {}).get("isLoadingMainFrame")]
    if not navs:
        return {"error": "no main-frame navigationStart in the trace"}
    nav = max(navs, key=lambda e: e["ts"])
    pid, tid, t0 = nav["pid"], nav["tid"], nav["ts"]
    t1 = t0 + first_ms * 1000
    mine = sorted((e for e in events if e.get("pid") == pid and e.get("tid") == tid and e.get("ph") == "X" and
                   "dur" in e and t0 <= e["ts"] <= t1), key=lambda e: e["ts"])
    tasks = [e for e in mine if e["name"] in ("RunTask", "ThreadControllerImpl::RunTask")]
    outer = []  # top-level tasks only
    for e in tasks:
        if not outer or e["ts"] >= outer[-1]["ts"] + outer[-1]["dur"]:
            outer.append(e)
    by_name = {}
    for name in TRACE_NAMES:
        end, total = -1, 0
        for e in mine:
            if e["name"] == name and e["ts"] >= end:
                total += e["dur"]
                end = e["ts"] + e["dur"]
        if total:
            by_name[name] = round(total / 1000, 1)
    longest = []
    for task in sorted(outer, key=lambda e: -e["dur"])[:6]:
        inside = [e for e in mine if e is not task and e["name"] not in ("RunTask", "ThreadControllerImpl::RunTask")
                  and task["ts"] <= e["ts"] and e["ts"] + e["dur"] <= task["ts"] + task["dur"]]
        top = sorted(inside, key=lambda e: -e["dur"])[:3]
        longest.append({"start_ms": round((task["ts"] - t0) / 1000), "ms": round(task["dur"] / 1000, 1),
                        "events": [f'{e["name"]} {e["dur"] / 1000:.1f}' for e in top]})
    busy = sum(e["dur"] for e in outer) / 1000
    return {"first_paint_ms": round(first_ms), "main_thread_busy_ms": round(busy),
            "main_thread_idle_ms": round(first_ms - busy), "by_event_ms": by_name, "longest_tasks": longest}


def trace_load(url, token, out=None):
    """One more cold page load, in a Chromium that records a trace into its performance log (its overhead
    kept out of the timed loads): the main thread's time up to the first paint, and the page's requests."""
    from browser import chrome
    with chrome(accept_insecure_certs=True, trace_categories=TRACE_CATEGORIES) as d:
        d.get(url + "/readyz")
        d.execute_script("sessionStorage.setItem('gpusched.token', arguments[0]);", token)
        d.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": FIRST_CELL_JS})
        d.get(url + "/ui/#/nodes")
        first = _wait(d, "return window.__gsFirstFrame", 60, "the first GPU cell")
        resources = d.execute_script(ALL_RESOURCES_JS)
        events = []
        for entry in d.get_log("performance"):
            msg = json.loads(entry["message"])["message"]
            if msg.get("method") == "Tracing.dataCollected":
                events.append(msg["params"])
    if out:
        pathlib.Path(out).write_text(json.dumps({"traceEvents": events}) + "\n")  # chrome://tracing, Perfetto
    res = summarize_trace(events, first)
    res["requests"] = sorted(resources, key=lambda r: r["start_ms"])
    res["trace_events"] = len(events)
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "gpusched"))
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=50000)
    ap.add_argument("--pending", type=int, default=1000)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3, help="updates of each kind")
    ap.add_argument("--loads", type=int, default=3, help="page loads timed for the first paint")
    ap.add_argument("--json", help="also write the result here")
    ap.add_argument("--trace", action="store_true",
                    help="one more cold load with Chromium's trace: where the page's main thread spent the time")
    ap.add_argument("--trace-out", help="with --trace, also write the raw trace events here (chrome://tracing)")
    a = ap.parse_args()
    from browser import chrome
    from stack import Server
    with tempfile.TemporaryDirectory(prefix="gs-console-bench-") as tmp:
        srv = Server(a.bin, pathlib.Path(tmp) / "srv", env={"GPUSCHED_NODE_GRACE": "86400"}).start()
        try:
            took = fill(srv.url, srv.token, str(srv.data / "ca.crt"), a.nodes, a.pods, a.pending, a.threads)
            lists = {}
            s = session(srv.token, str(srv.data / "ca.crt"))
            # the server's side of the page's first read (the GPU grid) and of the lists it replaced
            for what, path in (("gpugrid", "/apis/ui.gpusched.io/v1/gpugrid"),
                               ("gpugrid_2", "/apis/ui.gpusched.io/v1/gpugrid"),
                               ("gpugrid_3", "/apis/ui.gpusched.io/v1/gpugrid"), ("nodes", "/api/v1/nodes"),
                               ("pods", "/api/v1/pods")):
                t0 = time.time()
                r = s.get(f"{srv.url}{path}", timeout=120)
                r.raise_for_status()
                lists[f"list_{what}_ms"] = round((time.time() - t0) * 1000)
                lists[f"list_{what}_bytes"] = len(r.content)
            t0 = time.time()  # one page, as a page that painted the first screen first would ask
            s.get(f"{srv.url}/api/v1/nodes?limit=100", timeout=120).raise_for_status()
            lists["list_nodes_limit100_ms"] = round((time.time() - t0) * 1000)
            print(f"console: {a.nodes} nodes + {a.pods} pods ({a.pending} pending) created in {took:.0f} s",
                  flush=True)
            with chrome(accept_insecure_certs=True) as d:
                res = measure(d, srv.url, srv.token, str(srv.data / "ca.crt"), a.repeat, a.loads)
            if a.trace:
                res["trace"] = trace_load(srv.url, srv.token, a.trace_out)
            with open("/proc/loadavg") as f:
                res["loadavg"] = f.read().split()[0]
            res.update(nodes=a.nodes, pods=a.pods, pending=a.pending, fill_s=round(took), **lists)
            # the server's own account of each grid it answered (api_ui.c): where from, how long, the view's size
            grids = [ln for ln in (srv.data / "server.log").read_text(errors="replace").splitlines()
                     if 'msg="console grid: answered"' in ln]
            res["server_grid"] = [dict(kv.split("=", 1) for kv in ln.split() if kv.split("=", 1)[0] in
                                       ("from", "ms", "view_nodes", "view_pods", "view_bytes")) for ln in grids]
            print(json.dumps(res), flush=True)
            if a.json:
                pathlib.Path(a.json).write_text(json.dumps(res, indent=2) + "\n")
        finally:
            srv.stop()


if __name__ == "__main__":
    main()
