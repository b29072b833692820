#!/usr/bin/python3
"""Pod start latency, create to Running, with the runc runtime against the process runtime.

For each runtime: a fresh `gpusched up --mock NODESx1xH100-80GB --default-runtime R` (one mock GPU per
node, the pods ask for none), the busybox test image (scripts/make-test-image.sh) imported into every
agent's store, then PODS pods created over the API as fast as one client goes (POST, HTTPS with the admin
token); each pod runs `sleep HOLD` (restartPolicy Never). One pod list every POLL seconds records the
first time each pod is seen Running (or already finished), so a latency is accurate to about POLL.
Printed: create-to-Running p50 / p90 / p99 / max and the start rate (pods Running per second from the
first create to the last start), per runtime, in one run (so both see the same machine load).

    /usr/bin/python3 bench/pod_start.py build/gpusched                  # 1,000 pods each, 10 nodes
    /usr/bin/python3 bench/pod_start.py build/gpusched --pods 100       # a quick look

Needs root, runc and busybox-static (scripts/install-deps.sh).
"""
import argparse
import json
import os
import pathlib
import signal
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]


def api(info, method, path, body=None, ctx=None):
    req = urllib.request.Request(info["server"] + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {info['token']}",
                                          "Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=ctx, timeout=30) as f:
        return json.loads(f.read())


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def one(binary, runtime, nodes, pods, hold, poll, tar, workdir):
    d = pathlib.Path(workdir) / runtime
    d.mkdir()
    info_path = d / "info.json"
    log = open(d / "up.log", "wb")
    up = subprocess.Popen([binary, "up", "--mock", f"{nodes}x1xH100-80GB", "--data-dir", str(d / "data"),
                           "--listen", "127.0.0.1:0", "--info", str(info_path), "--default-runtime", runtime,
                           "--grace-ms", "500", "--log-level", "error"], stdout=log, stderr=subprocess.STDOUT)
    try:
        end = time.time() + 60
        while not info_path.exists() and time.time() < end and up.poll() is None:
            time.sleep(0.2)
        if not info_path.exists():
            raise SystemExit(f"gpusched up did not start: {(d / 'up.log').read_text()}")
        info = json.loads(info_path.read_text())
        for n in info["nodes"]:
            subprocess.run([binary, "image", "import", str(tar), "--store",
                            str(d / "data" / "agent" / n["name"] / "images")], check=True, capture_output=True)
        ctx = ssl.create_default_context(cafile=str(d / "data" / "ca.crt")) if (d / "data" / "ca.crt").exists() \
            else ssl._create_unverified_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        created, running = {}, {}
        t_first = time.time()
        next_poll = 0.0
        i = 0

        def sweep():
            items = api(info, "GET", "/api/v1/namespaces/default/pods", ctx=ctx)["items"]
            now = time.time()
            for p in items:
                name = p["metadata"]["name"]
                ph = (p.get("status") or {}).get("phase")
                if name not in running and ph in ("Running", "Succeeded", "Failed"):
                    running[name] = now
        while i < pods:
            name = f"start-{i:05d}"
            body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "spec": {"restartPolicy": "Never", "containers": [
                        {"name": "c", "image": "busybox", "command": ["sh", "-c", f"sleep {hold}"]}]}}
            created[name] = time.time()
            api(info, "POST", "/api/v1/namespaces/default/pods", body, ctx)
            i += 1
            if time.time() >= next_poll:
                sweep()
                next_poll = time.time() + poll
        end = time.time() + max(120, pods)
        while len(running) < pods and time.time() < end:
            time.sleep(poll)
            sweep()
        t_last = max(running.values()) if running else time.time()
        lat = [running[n] - created[n] for n in running]
        failed = sum(1 for p in api(info, "GET", "/api/v1/namespaces/default/pods", ctx=ctx)["items"]
                     if (p.get("status") or {}).get("phase") == "Failed")
        return {"runtime": runtime, "pods": pods, "started": len(running), "failed": failed,
                "p50_s": pct(lat, 50) if lat else None, "p90_s": pct(lat, 90) if lat else None,
                "p99_s": pct(lat, 99) if lat else None, "max_s": max(lat) if lat else None,
                "rate_per_s": len(running) / (t_last - t_first) if running else 0.0}
    finally:
        up.send_signal(signal.SIGTERM)
        try:
            up.wait(120)
        except subprocess.TimeoutExpired:
            up.kill()
        log.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("binary")
    ap.add_argument("--pods", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=10, help="mock nodes (a node takes at most 110 pods)")
    ap.add_argument("--hold", type=float, default=2, help="seconds each pod runs")
    ap.add_argument("--poll", type=float, default=0.25)
    ap.add_argument("--runtimes", default="process,runc")
    a = ap.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("pod_start.py: the runc runtime needs root")
    with tempfile.TemporaryDirectory() as w:
        tar = pathlib.Path(w) / "busybox.tar"
        subprocess.run(["bash", str(ROOT / "scripts" / "make-test-image.sh"), str(tar)], check=True)
        rows = [one(a.binary, r, a.nodes, a.pods, a.hold, a.poll, tar, w) for r in a.runtimes.split(",")]
    print(f"{'runtime':8} {'pods':>5} {'started':>7} {'failed':>6} {'p50 s':>6} {'p90 s':>6} {'p99 s':>6} "
          f"{'max s':>6} {'pods/s':>7}")
    for r in rows:
        f = lambda v: f"{v:6.2f}" if v is not None else "     -"
        print(f"{r['runtime']:8} {r['pods']:5d} {r['started']:7d} {r['failed']:6d} {f(r['p50_s'])} {f(r['p90_s'])} "
              f"{f(r['p99_s'])} {f(r['max_s'])} {r['rate_per_s']:7.1f}")
    print(json.dumps(rows))


if __name__ == "__main__":
    sys.exit(main())
