#!/usr/bin/python3
"""The control plane on SQLite and on etcd, side by side, in one run.

    /usr/bin/python3 bench/ha.py [--bin build/gpusched] [--pods 20000] [--phases api,e2e,rss,failover,replicas]
        [--rss-nodes 5000] [--rss-pods 50000]

A three-member etcd cluster (Debian's /usr/bin/etcd, default Raft timings)
is started on free loopback ports in a temporary directory and stopped at
the end; tests/integration/etcd.py starts it.

Phases (each prints its lines; the table at the end sums them up):
  api, e2e, rss  `gpusched server --bench --only PHASE`, once with the
            SQLite store and once with `--store etcd --etcd-endpoints ...`
            (each phase on a fresh etcd prefix): pod creates/s from 8
            clients, watch events/s delivered to 50 watchers, create to
            bound (pods/s, p50/p99), and the RSS of one process holding
            the server, its store and the scheduler at 5,000 nodes /
            50,000 pods.
  failover  two `gpusched server --store etcd` replicas and N nodes; the
            leader is killed with SIGKILL and one pod is created at once
            through the other: the time from the kill to that pod's
            binding, with short leases (1s / 700ms / 200ms) and with the
            defaults (15s / 10s / 2s). For SQLite the same figure is a
            kill -9 and a restart of the one server.
  replicas  two etcd replicas and --rss-nodes nodes / --rss-pods pods
            created over HTTPS: the RSS of the leader (watch cache,
            scheduler) and of the follower (watch cache only).
"""
import argparse
import os
import pathlib
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "integration"))
from etcd import EtcdCluster  # noqa: E402
from stack import Server, share_identity, wait_for  # noqa: E402

LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpusched-control-plane"


def run_bench(binary, only, store, endpoints, pods, rss_nodes, rss_pods):
    args = [binary, "server", "--bench", "--only", only, "--pods", str(pods), "--rss-nodes", str(rss_nodes),
            "--rss-pods", str(rss_pods)]
    if store == "etcd":
        args += ["--store", "etcd", "--etcd-endpoints", ",".join(endpoints)]
    t0 = time.time()
    r = subprocess.run(args, capture_output=True, text=True, timeout=3600)
    out = r.stdout + r.stderr
    print(f"[{store} {only}, {time.time() - t0:.0f} s]\n" + out.strip(), flush=True)
    if r.returncode != 0:
        raise SystemExit(f"gpusched server --bench --only {only} ({store}) exited {r.returncode}")
    return out


def parse(out):
    got = {}
    m = re.search(r"creates .*?: (\d+) pods/s \((\d+) failed\)", out)
    if m:
        got["creates"] = f"{int(m.group(1)):,} pods/s" + (f" ({m.group(2)} failed)" if m.group(2) != "0" else "")
    m = re.search(r"watch .*?= (\d+) events/s delivered", out)
    if m:
        got["watch"] = f"{int(m.group(1)):,} events/s"
    m = re.search(r"end to end .*?= (\d+) pods/s \(create to binding\).*?p50 (\d+) ms, p99 (\d+) ms; CPU ([\d.]+) ms",
                  out)
    if m:
        got["e2e"] = f"{int(m.group(1)):,} pods/s, p50 {m.group(2)} ms / p99 {m.group(3)} ms"
        got["cpu"] = f"{m.group(4)} ms"
    m = re.search(r"memory .*?\((\d+) bound\) in ([\d.]+) s: RSS (\d+) MiB", out)
    if m:
        got["rss"] = f"{int(m.group(3)):,} MiB ({int(m.group(1)):,} bound in {float(m.group(2)):.0f} s)"
    return got


def write_tokens(data):
    data.mkdir(parents=True, exist_ok=True)
    (data / "tokens.csv").write_text(f"{secrets.token_hex(16)},admin,system:masters,,admin\n")
    (data / "tokens.csv").chmod(0o600)


def node(i):
    devs = [{"index": g, "uuid": f"GPU-{i}-{g}", "model": "H100", "memoryMiB": 81920} for g in range(8)]
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}"},
            "status": {"capacity": {"cpu": "256", "memory": "2Ti", "pods": "1000", "nvidia.com/gpu": "8"},
                       "allocatable": {"cpu": "256", "memory": "2Ti", "pods": "1000", "nvidia.com/gpu": "8"},
                       "devices": devs}}


def pod(name):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": {"gpusched.io/gpu-milli": "25"}},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {
                "requests": {"cpu": "10m", "memory": "16Mi", "nvidia.com/gpu": 1}}}]}}


def parallel(server, items, fn, threads=8):
    """fn(post, item) over items from `threads` keep-alive sessions, post(path, body)
    making a request of the session; returns the failures."""
    import requests
    fails = []
    ca = str(server.data / "ca.crt")

    def work(chunk):
        sess = requests.Session()
        sess.headers["Authorization"] = f"Bearer {server.token}"

        def post(path, body):
            return sess.post(server.url + path, json=body, verify=ca, timeout=60)
        for it in chunk:
            try:
                r = fn(post, it)
            except OSError as e:
                fails.append((0, str(e)[:200]))
                continue
            if r.status_code not in (200, 201):
                fails.append((r.status_code, r.text[:200]))
    ts = [threading.Thread(target=work, args=(items[t::threads],)) for t in range(threads)]
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


def metric(server, name):
    try:
        text = server.call("GET", "/metrics", timeout=5).text
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


class Bench:
    def __init__(self, a):
        self.a = a
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="gpusched-ha-bench."))
        self.etcd = EtcdCluster(self.dir, members=3, heartbeat_ms=100, election_ms=1000, progress_notify="10m")
        self.rows = {"sqlite": {}, "etcd": {}}
        self.runs = 0

    def close(self):
        self.etcd.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def replicas(self, n, *extra, prefix):
        """n replicas on the etcd cluster, one CA and tokens file, under a fresh key prefix."""
        self.runs += 1
        base = self.dir / f"run{self.runs}"
        flags = ["--store", "etcd", "--etcd-endpoints", ",".join(self.etcd.endpoints), "--etcd-prefix", prefix,
                 "--log-level", "warn", *extra]
        reps = [Server(self.a.bin, base / f"r{i}", [*flags, "--replica-id", f"r{i}"], name=f"r{i}") for i in range(n)]
        write_tokens(reps[0].data)
        reps[0].start(timeout=120)
        for r in reps[1:]:
            share_identity(reps[0], r)
            r.start(timeout=120)
        return reps

    def leader(self, reps, timeout=120):
        def find():
            for r in reps:
                if r.pid is not None and metric(r, "gpusched_leader") == 1:
                    return r
            return None
        return wait_for(find, timeout, "a leading replica", step=0.05)

    def time_to_bound(self, server, name, t0, timeout=120):
        r = server.call("POST", "/api/v1/namespaces/default/pods", json=pod(name))
        assert r.status_code == 201, r.text
        path = f"/api/v1/namespaces/default/pods/{name}"
        wait_for(lambda: server.call("GET", path).json()["spec"].get("nodeName"), timeout, f"{name} bound",
                 step=0.02)
        return time.time() - t0

    def failover(self, label, lease, renew, retry):
        flags = [] if lease is None else ["--leader-elect-lease-duration", lease, "--leader-elect-renew-deadline",
                                          renew, "--leader-elect-retry-period", retry]
        reps = self.replicas(2, *flags, prefix=f"/bench-failover-{label}")
        try:
            first = self.leader(reps)
            fails = parallel(first, list(range(10)), lambda post, i: post("/api/v1/nodes", node(i)))
            assert not fails, fails[:3]
            self.time_to_bound(first, "warm", time.time())
            t0 = time.time()
            first.stop(signal.SIGKILL)
            other = next(r for r in reps if r is not first)
            dt = self.time_to_bound(other, "after-kill", t0)
        finally:
            for r in reps:
                r.stop()
        what = "short" if lease else "default"
        leases = f"{lease}/{renew}/{retry}" if lease else "15s/10s/2s"
        print(f"failover etcd ({what} leases {leases}): pod bound {dt:.2f}s after SIGKILL of the leader", flush=True)
        self.rows["etcd"][f"failover_{what}"] = f"{dt:.2f} s ({leases})"

    def sqlite_restart(self):
        """kill -9 of the only server, restarted at once: the time to the next binding."""
        data = self.dir / "sqlite-restart"
        write_tokens(data)
        s = Server(self.a.bin, data, ["--log-level", "warn"], name="sqlite")
        s.start()
        try:
            fails = parallel(s, list(range(10)), lambda post, i: post("/api/v1/nodes", node(i)))
            assert not fails, fails[:3]
            self.time_to_bound(s, "warm", time.time())
            t0 = time.time()
            s.stop(signal.SIGKILL)
            s.start()
            dt = self.time_to_bound(s, "after-kill", t0)
        finally:
            s.stop()
        print(f"failover sqlite: pod bound {dt:.2f}s after SIGKILL of the one server, restarted at once", flush=True)
        self.rows["sqlite"]["failover_short"] = f"{dt:.2f} s (kill -9 and an immediate restart)"
        self.rows["sqlite"]["failover_default"] = "none: down until restarted"

    def replica_rss(self):
        a = self.a
        reps = self.replicas(2, prefix="/bench-rss")
        try:
            lead = self.leader(reps)
            t0 = time.time()
            fails = parallel(lead, list(range(a.rss_nodes)), lambda post, i: post("/api/v1/nodes", node(i)))
            fails += parallel(lead, [f"p{i}" for i in range(a.rss_pods)],
                              lambda post, n: post("/api/v1/namespaces/default/pods", pod(n)))
            assert not fails, fails[:3]
            print(f"replicas: {a.rss_nodes} nodes + {a.rss_pods} pods created in {time.time() - t0:.0f} s", flush=True)

            def bound():
                return metric(lead, 'gpusched_scheduler_schedule_attempts_total{result="scheduled"}') or 0
            # Every pod bound, or no binding for 30 s (a pod left unbound is reported, not waited for).
            last, still = bound(), time.time()
            while last < a.rss_pods and time.time() - still < 30:
                time.sleep(1)
                now = bound()
                if now != last:
                    last, still = now, time.time()
            fol = next(r for r in reps if r is not lead)
            lr, fr = rss_mib(lead.pid), rss_mib(fol.pid)
            print(f"replicas: RSS leader {lr:.0f} MiB, follower {fr:.0f} MiB "
                  f"({a.rss_nodes} nodes, {a.rss_pods} pods, {last:.0f} bound)", flush=True)
            self.rows["etcd"]["rss_replicas"] = (f"leader {lr:,.0f} MiB, follower {fr:,.0f} MiB "
                                                 f"({last:,.0f} pods bound)")
        finally:
            for r in reps:
                r.stop()

    def table(self):
        rows = [("pod creates over HTTP (8 clients, scheduler off)", "creates"),
                ("watch fan-out (50 watchers)", "watch"),
                ("create to bound, 100 nodes x 8 GPUs", "e2e"),
                ("CPU per pod, end to end (all threads)", "cpu"),
                ("RSS, one process at 5,000 nodes / 50,000 pods", "rss"),
                ("RSS per replica (2 processes) at 5,000 nodes / 50,000 pods", "rss_replicas"),
                ("failover, short leases: SIGKILL to the next binding", "failover_short"),
                ("failover, default leases", "failover_default")]
        print("\n| what | SQLite | etcd (3 members) |\n|---|---|---|")
        for label, k in rows:
            s, e = self.rows["sqlite"].get(k), self.rows["etcd"].get(k)
            if s or e:
                print(f"| {label} | {s or '-'} | {e or '-'} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=str(ROOT / "build" / "gpusched"))
    ap.add_argument("--pods", type=int, default=20000)
    ap.add_argument("--rss-nodes", type=int, default=5000)
    ap.add_argument("--rss-pods", type=int, default=50000)
    ap.add_argument("--phases", default="api,e2e,rss,failover,replicas")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    phases = a.phases.split(",")
    bad = [p for p in phases if p not in ("api", "e2e", "rss", "failover", "replicas")]
    if bad:
        ap.error(f"--phases: unknown phase {bad[0]!r}: want api, e2e, rss, failover, replicas")
    print(f"gpusched bench/ha.py: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
          f"etcd {subprocess.run(['/usr/bin/etcd', '--version'], capture_output=True, text=True).stdout.split()[2]}",
          flush=True)
    b = Bench(a)
    try:
        for ph in ("api", "e2e", "rss"):
            if ph in phases:
                for store in ("sqlite", "etcd"):
                    got = parse(run_bench(a.bin, ph, store, b.etcd.endpoints, a.pods, a.rss_nodes, a.rss_pods))
                    want = {"api": "creates", "e2e": "e2e", "rss": "rss"}[ph]
                    if want not in got:
                        raise SystemExit(f"gpusched server --bench --only {ph} ({store}) printed no {want} figure")
                    b.rows[store].update(got)
        if "failover" in phases:
            b.sqlite_restart()
            b.failover("short", "1s", "700ms", "200ms")
            b.failover("default", None, None, None)
        if "replicas" in phases:
            b.replica_rss()
        b.table()
        print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        b.close()


if __name__ == "__main__":
    sys.exit(main())
