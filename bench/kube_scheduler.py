#!/usr/bin/python3
"""The standalone scheduler (`gpusched scheduler --kubeconfig`) against our own
API server over HTTPS with TLS and token authentication on.

    /usr/bin/python3 bench/kube_scheduler.py [--bin build/gpusched] [--nodes 5000]
        [--pods 50000] [--steady 3000] [--phases backlog,steady,failover]

Phases (each prints one line of numbers):
  backlog   N nodes x 8 GPUs and P pending pods (a 1/40 GPU share each, so all fit) are
            created with the scheduler stopped; then `gpusched scheduler` starts with the
            scheduler token. Printed: time to its first binding (list + sync), the bind
            rate from the first to the last binding, and the scheduler's RSS at the end
            (N nodes / P pods in its caches).
  steady    with the scheduler synced and idle, S more pods are created from 8 client
            threads as fast as the server takes them; each pod's time from its create
            being sent to its binding appearing on a watch: p50 / p99.
  failover  two replicas with --leader-elect, default leases (15s / 10s / 2s) and short
            ones (2s / 1.5s / 0.25s); the leader is killed with SIGKILL and one pod is
            created at once: the time from the kill to that pod's binding.
The server runs with --no-scheduler so that only the standalone scheduler binds.
"""
import argparse
import base64
import json
import os
import pathlib
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import http.client

import yaml

SCHED = "gpusched"
BOUND = 'gpusched_scheduler_schedule_attempts_total{result="scheduled"}'


class Api:
    """A keep-alive HTTPS client on one connection (one per thread)."""

    def __init__(self, kubeconfig):
        kc = yaml.safe_load(open(kubeconfig))
        cl = kc["clusters"][0]["cluster"]
        self.token = kc["users"][0]["user"]["token"]
        url = cl["server"]
        self.host, self.port = url.split("//")[1].split(":")
        ctx = ssl.create_default_context(cadata=base64.b64decode(cl["certificate-authority-data"]).decode())
        ctx.check_hostname = False
        self.ctx = ctx
        self.conn = None

    def call(self, method, path, body=None):
        for attempt in range(3):
            if self.conn is None:
                self.conn = http.client.HTTPSConnection(self.host, int(self.port), context=self.ctx, timeout=60)
            try:
                data = json.dumps(body) if body is not None else None
                self.conn.request(method, path, body=data, headers={
                    "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
                r = self.conn.getresponse()
                out = r.read()
                return r.status, out
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt == 2:
                    raise
        return 0, b""


def node(i):
    devs = [{"index": g, "uuid": f"GPU-{i}-{g}", "model": "H100", "memoryMiB": 81920} for g in range(8)]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
            "status": {"capacity": {"cpu": "256", "memory": "2Ti", "pods": "1000", "nvidia.com/gpu": "8"},
                       "allocatable": {"cpu": "256", "memory": "2Ti", "pods": "1000", "nvidia.com/gpu": "8"},
                       "devices": devs}}


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "bench", "annotations": {"gpusched.io/gpu-milli": "25"}},
            "spec": {"schedulerName": SCHED, "containers": [{"name": "c", "image": "busybox", "resources": {
                "requests": {"cpu": "10m", "memory": "16Mi", "nvidia.com/gpu": 1}}}]}}


def parallel(kubeconfig, items, fn, threads=8):
    """fn(api, item) over items from `threads` connections; returns the failures."""
    fails = []
    chunks = [items[t::threads] for t in range(threads)]

    def run(chunk):
        api = Api(kubeconfig)
        for it in chunk:
            code, out = fn(api, it)
            if code not in (200, 201):
                fails.append((code, out[:200]))
    ts = [threading.Thread(target=run, args=(c,)) for c in chunks]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return fails


def rss_mib(pid):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def metric(port, name):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        c.request("GET", "/metrics")
        text = c.getresponse().read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


class Bench:
    def __init__(self, args):
        self.a = args
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="gpusched-kube-bench."))
        self.data = self.dir / "data"
        self.procs = []
        pf = self.dir / "port"
        self.server = self.spawn("server", "server", "--data-dir", str(self.data), "--listen", "127.0.0.1:0",
                                 "--port-file", str(pf), "--no-scheduler", "--qps", "-1", "--log-level", "warn")
        wait(lambda: pf.exists() and pf.read_text().strip(), 30, "server")
        self.admin = str(self.data / "kubeconfig")
        self.sched_kc = str(self.data / "scheduler.kubeconfig")
        wait(lambda: os.path.exists(self.sched_kc), 10, "scheduler.kubeconfig")
        api = Api(self.admin)
        api.call("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                 "metadata": {"name": "bench"}})

    def spawn(self, name, *args):
        log = open(self.dir / f"{name}.log", "ab")
        p = subprocess.Popen([self.a.bin, *args], stdout=log, stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def scheduler(self, name, port, *extra):
        return self.spawn(name, "scheduler", "--kubeconfig", self.sched_kc, "--scheduler-name", SCHED,
                          "--listen", f"127.0.0.1:{port}", *extra)

    def close(self):
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        subprocess.run(["rm", "-rf", str(self.dir)])

    def create_pods(self, names):
        fails = parallel(self.admin, names, lambda api, n: api.call("POST", "/api/v1/namespaces/bench/pods", pod(n)))
        if fails:
            raise SystemExit(f"pod creates failed: {fails[:3]}")

    def backlog(self):
        t0 = time.time()
        fails = parallel(self.admin, list(range(self.a.nodes)), lambda api, i: api.call("POST", "/api/v1/nodes", node(i)))
        if fails:
            raise SystemExit(f"node creates failed: {fails[:3]}")
        t1 = time.time()
        self.create_pods([f"p{i}" for i in range(self.a.pods)])
        t2 = time.time()
        print(f"setup: {self.a.nodes} nodes in {t1 - t0:.1f}s, {self.a.pods} pods in {t2 - t1:.1f}s "
              f"({self.a.pods / (t2 - t1):.0f} creates/s)", flush=True)
        port = 18259
        t_start = time.time()
        p = self.scheduler("sched-backlog", port)
        first = None
        last_n, last_t = 0, time.time()
        while True:
            n = metric(port, BOUND) or 0
            now = time.time()
            if n and first is None:
                first = now
            if n >= self.a.pods:
                break
            if n != last_n:
                last_n, last_t = n, now
            if now - last_t > 60 or p.poll() is not None:
                raise SystemExit(f"scheduler stalled at {n} bindings (log: {self.dir}/sched-backlog.log)")
            time.sleep(0.05)
        done = time.time()
        rate = self.a.pods / max(done - first, 1e-9)
        print(f"backlog: {self.a.nodes} nodes, {self.a.pods} pods: first binding {first - t_start:.2f}s after start, "
              f"all bound {done - t_start:.2f}s after start, {rate:.0f} binds/s (first to last), "
              f"scheduler RSS {rss_mib(p.pid):.0f} MiB", flush=True)
        self.sched_port = port
        self.sched = p

    def steady(self):
        n = self.a.steady
        names = [f"s{i}" for i in range(n)]
        sent, bound = {}, {}
        api = Api(self.admin)
        code, out = api.call("GET", "/api/v1/namespaces/bench/pods?limit=1")
        rv = json.loads(out)["metadata"]["resourceVersion"]
        done = threading.Event()

        def watch():
            w = Api(self.admin)
            w.conn = http.client.HTTPSConnection(w.host, int(w.port), context=w.ctx, timeout=120)
            w.conn.request("GET", f"/api/v1/namespaces/bench/pods?watch=1&resourceVersion={rv}&timeoutSeconds=120",
                           headers={"Authorization": f"Bearer {w.token}"})
            r = w.conn.getresponse()
            while not done.is_set():
                line = r.readline()
                if not line:
                    break
                ev = json.loads(line)
                o = ev.get("object", {})
                nm = o.get("metadata", {}).get("name", "")
                if o.get("spec", {}).get("nodeName") and nm not in bound:
                    bound[nm] = time.time()
                    if len([k for k in bound if k.startswith("s")]) >= n:
                        break
        wt = threading.Thread(target=watch)
        wt.start()
        time.sleep(0.5)

        def create(api, nm):
            sent[nm] = time.time()
            return api.call("POST", "/api/v1/namespaces/bench/pods", pod(nm))
        t0 = time.time()
        fails = parallel(self.admin, names, create)
        t1 = time.time()
        wt.join(120)
        done.set()
        if fails:
            raise SystemExit(f"creates failed: {fails[:3]}")
        lat = sorted(bound[k] - sent[k] for k in names if k in bound)
        if len(lat) < n:
            raise SystemExit(f"steady: only {len(lat)} of {n} pods bound")
        p50 = statistics.median(lat) * 1e3
        p99 = lat[int(0.99 * (len(lat) - 1))] * 1e3
        print(f"steady: {n} pods created at {n / (t1 - t0):.0f}/s; create to bound p50 {p50:.1f} ms, "
              f"p99 {p99:.1f} ms", flush=True)

    def failover(self, label, lease, renew, retry):
        if getattr(self, "sched", None) and self.sched.poll() is None:
            self.sched.send_signal(signal.SIGTERM)
            self.sched.wait(20)
        flags = ["--leader-elect", "--leader-elect-lease-duration", lease, "--leader-elect-renew-deadline", renew,
                 "--leader-elect-retry-period", retry, "--leader-elect-name", f"bench-{label}"]
        ports = [18261, 18262]
        reps = [self.scheduler(f"rep{i}-{label}", ports[i], *flags) for i in range(2)]
        leader = None
        end = time.time() + 120
        while leader is None and time.time() < end:
            for i in range(2):
                if metric(ports[i], "gpusched_leader_is_leader") == 1:
                    leader = i
            time.sleep(0.05)
        if leader is None:
            raise SystemExit("failover: no replica leads")
        # Both replicas synced before the kill: the follower's readiness.
        wait(lambda: all(metric(p, "gpusched_source_synced") == 1 for p in ports), 120, "replicas synced")
        t_kill = time.time()
        reps[leader].send_signal(signal.SIGKILL)
        reps[leader].wait()
        name = f"f-{label}"
        self.create_pods([name])
        api = Api(self.admin)
        while time.time() < t_kill + 120:
            code, out = api.call("GET", f"/api/v1/namespaces/bench/pods/{name}")
            if code == 200 and json.loads(out)["spec"].get("nodeName"):
                break
            time.sleep(0.02)
        else:
            raise SystemExit(f"failover {label}: pod never bound")
        print(f"failover ({label} leases {lease}/{renew}/{retry}): pod bound {time.time() - t_kill:.2f}s "
              f"after SIGKILL of the leader", flush=True)
        other = reps[1 - leader]
        other.send_signal(signal.SIGTERM)
        other.wait(20)


def wait(cond, timeout, what):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise SystemExit(f"timed out waiting for {what}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/gpusched")
    ap.add_argument("--nodes", type=int, default=5000)
    ap.add_argument("--pods", type=int, default=50000)
    ap.add_argument("--steady", type=int, default=3000)
    ap.add_argument("--phases", default="backlog,steady,failover")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    b = Bench(a)
    try:
        phases = a.phases.split(",")
        b.backlog()
        if "steady" in phases:
            b.steady()
        if "failover" in phases:
            b.failover("short", "2s", "1500ms", "250ms")
            b.failover("default", "15s", "10s", "2s")
    finally:
        b.close()


if __name__ == "__main__":
    sys.exit(main())
