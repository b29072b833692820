"""Reliability of the whole stack, with the server and the agents as
separate processes on fixed ports, hurt in the ways real machines are:

- kill -9 of the server and of an agent during a workload of short pods
  (GS_CHAOS_PODS pods, GS_CHAOS_ROUNDS kills): every pod finishes, each ran
  exactly once;
- an agent gone for good: its node turns NotReady, its pod is evicted and,
  once the node is declared lost (--node-lost-timeout), re-created and run
  elsewhere;
- a SIGSTOP partition of one agent while its pods run, then SIGCONT;
- the WAL of a killed server truncated: the next start is refused with the
  story, a start with --accept-store-regression serves what is left with
  versions above every one handed out (an old watch gets 410), and the
  survivors run;
- poison objects: a pod nested 2,046 deep is refused at create; a row made
  corrupt directly in SQLite is named by GET (500) while lists, /metrics and
  scheduling go on;
- a watch flood: hundreds of watches opened and dropped while pods run;
- a disk that stops taking writes: /readyz answers 500 with the reason, and
  ok again once writes work.

Every scenario runs an invariant checker beside it - sampling the store, the
agents' reports and the pods' own processes - and asserts at the end: no pod
lost, none running twice at once, no GPU held by two running pods, every pod
in its expected phase. Each prints its time to converge. Every wait is
bounded, so a failure fails; the whole file takes a few minutes on two
cores. `make bench` runs the long variant (bench/run.sh: more pods, more
kills).
"""
import json
import os
import random
import re
import resource
import signal
import socket
import sqlite3
import threading
import time

import requests

from stack import Stack, phase, pid_alive, wait_for
from stack import pod_manifest as _pod_manifest


def pod_manifest(*args, **kw):
    """Pods here write their marks into the test's private tmp_path, which
    only root may enter: they run as root, not as the agent's default uid."""
    kw.setdefault("run_as_root", True)
    return _pod_manifest(*args, **kw)

PODS = int(os.environ.get("GS_CHAOS_PODS", "1000"))
ROUNDS = int(os.environ.get("GS_CHAOS_ROUNDS", "4"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster(Stack):
    """A server and agents, each on a port fixed for the cluster's life, so a
    restarted process comes back where its peers expect it."""

    def __init__(self, binary, workdir, nodes, mock, env=None, server_args=()):
        super().__init__(binary, workdir)
        self.server_args = server_args
        self.port = free_port()
        self.nodes = nodes
        self.mock = mock
        self.env = env or {}
        self.agent_ports = {n: free_port() for n in nodes}

    def server(self, *extra, wait=True):
        if not (self.data / "tokens.csv").exists():
            self.node_tokens(*self.nodes)
        p = self.spawn("server", "server", "--data-dir", str(self.data), "--listen", f"127.0.0.1:{self.port}",
                       "--log-level", "warn", *self.server_args, *extra, env=self.env)
        if wait:
            wait_for(lambda: (self.data / "kubeconfig").exists() and self._healthy(), 20, "the server")
        return p

    def _healthy(self):
        return self.cli("get", "nodes", check=False, timeout=5).returncode == 0

    def agent(self, node):
        self.spawn(f"agent-{node}", "agent", *self.agent_args(node), "--node-name", node, "--mock", self.mock,
                   "--state-dir", str(self.dir / "agents" / node), "--listen", f"127.0.0.1:{self.agent_ports[node]}",
                   "--heartbeat-ms", "500", "--grace-ms", "500", "--log-level", "warn",
                   "--agent-token-file", str(self.data / "agent.token"))

    def agent_report(self, node):
        return self.agent_pods(self.agent_ports[node])

    # --- the API itself, for what the CLI does not show (status codes, watches, /readyz) ---
    def token(self):
        for line in (self.data / "tokens.csv").read_text().splitlines():
            if line and not line.startswith("#"):
                return line.split(",")[0]
        raise AssertionError("no token in tokens.csv")

    def api(self, method, path, headers=None, **kw):
        kw.setdefault("timeout", 20)
        h = {"Authorization": f"Bearer {self.token()}", **(headers or {})}
        return requests.request(method, f"https://127.0.0.1:{self.port}{path}", verify=str(self.data / "ca.crt"),
                                headers=h, **kw)


def pod_processes(marker):
    """The pods' own processes (their command line holds marker): (pid, env)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() not in f.read():
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split("=", 1) for kv in f.read().decode(errors="replace").split("\0") if "=" in kv)
        except OSError:
            continue
        if "GPUSCHED_POD" in env:
            out.append((int(pid), env))
    return out


class Invariants:
    """Samples, every 0.2 s until stopped: no GPU held by two unfinished pods
    (store) or two running pods (agents' reports, and the processes' own
    NVIDIA_VISIBLE_DEVICES), and no pod running twice at once (two live
    processes of one pod name with different pod UIDs)."""

    def __init__(self, c, marker):
        self.c, self.marker = c, marker
        self.violations = []
        self.most_processes = 0  # the most pod processes seen at once: shows the process check saw something
        self.stop_ev = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop_ev.set()
        self.t.join(10)

    def _add(self, v):
        if v not in self.violations:
            self.violations.append(v)

    def _store(self):
        held = {}
        for p in self.c.pods() or []:
            node = p["spec"].get("nodeName")
            dev = p["metadata"].get("annotations", {}).get("gpusched.io/devices")
            if not node or not dev or phase(p) in ("Succeeded", "Failed"):
                continue
            for g in dev.split(","):
                key = (node, g.split(":")[0])
                if key in held and held[key] != p["metadata"]["name"]:
                    self._add(f"store: {key} held by {held[key]} and {p['metadata']['name']}")
                held[key] = p["metadata"]["name"]

    def _agents(self):
        for n in self.c.nodes:
            seen = {}
            for p in (self.c.agent_report(n) or {}).get("pods", []):
                if p["phase"] != "Running":
                    continue
                for g in p["devices"]:
                    if g in seen:
                        self._add(f"agent {n}: {g} held by {seen[g]} and {p['name']}")
                    seen[g] = p["name"]

    def _processes(self):
        runs, gpus = {}, {}
        procs = pod_processes(self.marker)
        self.most_processes = max(self.most_processes, len(procs))
        for pid, env in procs:
            name, uid = f"{env.get('GPUSCHED_NAMESPACE')}/{env['GPUSCHED_POD']}", env.get("GPUSCHED_POD_UID")
            runs.setdefault(name, {})[uid] = env.get("GPUSCHED_NODE")
            for g in filter(None, env.get("NVIDIA_VISIBLE_DEVICES", "").split(",")):
                key = (env.get("GPUSCHED_NODE"), g)
                if key in gpus and gpus[key] != uid:
                    self._add(f"processes: GPU {key} used by pods {gpus[key]} and {uid} at once")
                gpus[key] = uid
        for name, uids in runs.items():
            if len(uids) > 1:
                self._add(f"processes: pod {name} running twice at once: {uids}")

    def _run(self):
        while not self.stop_ev.is_set():
            self._store()
            self._agents()
            self._processes()
            time.sleep(0.2)


def assert_converged(c, names, want, ran=None, once=True):
    """No pod lost, each in phase want; with ran, each ran (exactly once when once)."""
    pods = {p["metadata"]["name"]: p for p in c.pods() or []}
    lost = [n for n in names if n not in pods]
    assert not lost, f"pods lost: {lost[:10]}"
    wrong = [(n, phase(pods[n])) for n in names if phase(pods[n]) != want]
    assert not wrong, f"pods not {want}: {wrong[:10]}"
    if ran is not None:
        counts = {p.name: len(p.read_text().split()) for p in ran.iterdir()}
        never = [n for n in names if n not in counts]
        assert not never, f"never ran: {never[:10]}"
        if once:
            twice = {k: v for k, v in counts.items() if k in names and v != 1}
            assert not twice, f"ran more than once: {list(twice.items())[:10]}"


def all_in(c, names, phases):
    pods = {p["metadata"]["name"]: p for p in c.pods() or []}
    return all(n in pods and phase(pods[n]) in phases for n in names)


def wait_all_in(c, names, phases, timeout, what):
    """wait_for(all_in) that says, when it times out, where the pods are."""
    try:
        wait_for(lambda: all_in(c, names, phases), timeout, what, step=0.5)
    except AssertionError as e:
        pods = {p["metadata"]["name"]: phase(p) for p in c.pods() or []}
        by = {}
        for n in names:
            by[pods.get(n, "missing")] = by.get(pods.get(n, "missing"), 0) + 1
        raise AssertionError(f"{e}; pods by phase: {by}") from None


def apply(c, docs, timeout=120):
    c.cli("apply", "-f", "-", input="\n".join(json.dumps(d) for d in docs), timeout=timeout)


def test_server_and_agent_killed_during_a_workload(gpusched_bin, tmp_path):
    nodes = ["n1", "n2"]
    c = Cluster(gpusched_bin, tmp_path, nodes, "32xH100-80GB,nvlink=islands:8")
    ran = tmp_path / "ran"
    ran.mkdir()
    try:
        c.server()
        for n in nodes:
            c.agent(n)
        wait_for(lambda: all(c.node(n) for n in nodes), 20, "nodes to register")
        docs = [pod_manifest(f"w{i:04d}", f'echo "$GPUSCHED_POD_UID" >> {ran}/$GPUSCHED_POD', gpus=1)
                for i in range(PODS)]
        names = [d["metadata"]["name"] for d in docs]
        apply(c, docs)
        rnd = random.Random(8)
        start = time.time()
        kills = {"server": 0, "agent": 0}
        with Invariants(c, str(ran)) as inv:
            for round_ in range(ROUNDS):
                time.sleep(rnd.uniform(0.5, 2.5))
                if all_in(c, names, ("Succeeded", "Failed")):
                    break
                if round_ % 3 == 2:  # every third round an agent, on the same port
                    c.stop("agent-n2", signal.SIGKILL)
                    time.sleep(rnd.uniform(0.2, 1.0))
                    c.agent("n2")
                    kills["agent"] += 1
                else:
                    c.stop("server", signal.SIGKILL)
                    time.sleep(rnd.uniform(0.1, 0.8))
                    c.server()
                    kills["server"] += 1
            wait_all_in(c, names, ("Succeeded", "Failed"), 120 + PODS // 5, "every pod to finish")
        elapsed = time.time() - start
        assert_converged(c, names, "Succeeded", ran)
        assert not inv.violations, inv.violations[:5]
        print(f"\nchaos kill: {PODS} pods through {kills['server']} server kills and {kills['agent']} agent kills: "
              f"converged in {elapsed:.1f}s")
    finally:
        c.stop_all()


def test_agent_gone_for_good(gpusched_bin, tmp_path):
    nodes = ["a", "b"]
    # No toleration of the unreachable taint, and a node that never confirms is declared lost after 3 s.
    c = Cluster(gpusched_bin, tmp_path, nodes, "4xH100-80GB", env={"GPUSCHED_NODE_GRACE": "2"},
                server_args=("--default-unreachable-toleration-seconds", "0", "--node-lost-timeout", "3s"))
    try:
        c.server()
        for n in nodes:
            c.agent(n)
        wait_for(lambda: all(c.node(n) for n in nodes), 20, "nodes to register")
        docs = [pod_manifest(f"big{i}", "echo on $GPUSCHED_NODE; sleep 3", gpus=4, restart="OnFailure")
                for i in range(2)]
        apply(c, docs)
        wait_for(lambda: all(phase(c.pod(f"big{i}")) == "Running" for i in range(2)), 20, "both pods to run")
        victim = c.pod("big0")
        lost_node = victim["spec"]["nodeName"]
        pids = [ct["pid"] for p in c.agent_report(lost_node)["pods"] for ct in p["containers"]]
        start = time.time()
        # The machine goes away: its agent and its processes.
        c.stop(f"agent-{lost_node}", signal.SIGKILL)
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        def not_ready():
            n = c.node(lost_node)
            ready = [x for x in n["status"]["conditions"] if x["type"] == "Ready"][0]
            taints = [t["key"] for t in n["spec"].get("taints", [])]
            return ready["status"] == "Unknown" and "node.kubernetes.io/unreachable" in taints

        wait_for(not_ready, 15, "the node to turn NotReady")
        p = wait_for(lambda: (q := c.pod("big0")) and q["metadata"]["uid"] != victim["metadata"]["uid"] and q,
                     10, "the pod to be re-created")
        assert p["metadata"]["annotations"]["gpusched.io/recreated-from"] == victim["metadata"]["uid"]
        done = wait_for(lambda: phase(c.pod("big0")) == "Succeeded" and c.pod("big0"), 30, "the re-created pod to run")
        assert done["spec"]["nodeName"] != lost_node
        assert phase(c.pod("big1")) == "Succeeded"
        assert all(not pid_alive(pid) for pid in pids)
        print(f"\nchaos agent gone: pod re-created and finished elsewhere in {time.time() - start:.1f}s")
    finally:
        c.stop_all()


def test_sigstop_partition_of_an_agent(gpusched_bin, tmp_path):
    """The agent stops answering (SIGSTOP) while its pods keep running: a
    partition. Whatever the control plane does meanwhile, no pod may run
    twice at once and every pod must end Succeeded once it heals."""
    nodes = ["a", "b"]
    c = Cluster(gpusched_bin, tmp_path, nodes, "4xH100-80GB", env={"GPUSCHED_NODE_GRACE": "2"})
    ran = tmp_path / "ran"
    ran.mkdir()
    try:
        c.server()
        for n in nodes:
            c.agent(n)
        wait_for(lambda: all(c.node(n) for n in nodes), 20, "nodes to register")
        docs = [pod_manifest(f"p{i}", f'echo "$GPUSCHED_POD_UID" >> {ran}/$GPUSCHED_POD; sleep 6', gpus=2,
                             restart="OnFailure") for i in range(4)]
        names = [d["metadata"]["name"] for d in docs]
        apply(c, docs)
        with Invariants(c, str(ran)) as inv:
            wait_for(lambda: all_in(c, names, ("Running",)), 30, "all four pods to run")
            victim = c.procs["agent-a"]
            start = time.time()
            os.kill(victim.pid, signal.SIGSTOP)
            try:
                time.sleep(8)  # past the node grace: the server sees the node unreachable
            finally:
                os.kill(victim.pid, signal.SIGCONT)
            wait_for(lambda: all_in(c, names, ("Succeeded",)), 60, "every pod to succeed after the partition",
                     step=0.5)
            elapsed = time.time() - start
        assert_converged(c, names, "Succeeded", ran, once=False)
        assert not inv.violations, inv.violations[:5]
        assert inv.most_processes >= 4, "the checker never saw the pods' processes"
        print(f"\nchaos partition: 8 s SIGSTOP of an agent, converged {elapsed:.1f}s after it began")
    finally:
        for name, p in list(c.procs.items()):
            if name.startswith("agent-") and p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
        c.stop_all()


def committed_rv(c):
    m = re.search(r"^committed (\d+)$", (c.data / "store.hwm").read_text(), re.M)
    return int(m.group(1)) if m else 0


def test_wal_truncated_while_stopped(gpusched_bin, tmp_path):
    c = Cluster(gpusched_bin, tmp_path, ["n1"], "8xH100-80GB")
    ran = tmp_path / "ran"
    ran.mkdir()
    try:
        c.server()
        # No node yet: the pods wait, and their creates are the WAL's only content.
        docs = [pod_manifest(f"s{i:03d}", f'echo "$GPUSCHED_POD_UID" >> {ran}/$GPUSCHED_POD', gpus=1)
                for i in range(80)]
        apply(c, docs)
        listed = c.api("GET", "/api/v1/namespaces/default/pods").json()
        acked = int(listed["metadata"]["resourceVersion"])
        assert len(listed["items"]) == 80
        wait_for(lambda: committed_rv(c) >= acked, 10, "the committed version to be recorded")
        c.stop("server", signal.SIGKILL)
        wal = c.data / "store.db-wal"
        size = wal.stat().st_size
        assert size > 64 * 1024, f"the WAL holds the creates ({size} bytes)"
        os.truncate(wal, size // 2)

        start = time.time()
        p = c.server(wait=False)
        rc = p.wait(20)
        log = c.log("server")
        c.stop("server")
        assert rc != 0, "a store that lost acknowledged writes must not be served"
        assert f"but resourceVersion {committed_rv(c)} was acknowledged before" in log, log[-2000:]
        assert "store.db-wal was truncated, corrupted or deleted" in log
        assert "Restore the data directory from a backup" in log and "--accept-store-regression" in log

        c.server("--accept-store-regression")
        after = c.api("GET", "/api/v1/namespaces/default/pods").json()
        kept = [i["metadata"]["name"] for i in after["items"]]
        assert 0 < len(kept) < 80, f"{len(kept)} pods survived a WAL cut in half"
        rv_now = int(after["metadata"]["resourceVersion"])
        assert rv_now > acked, f"versions go on above {acked}, not from {rv_now}"
        created = c.api("POST", "/api/v1/namespaces/default/pods",
                        json=pod_manifest("fresh", f'echo "$GPUSCHED_POD_UID" >> {ran}/$GPUSCHED_POD', gpus=1))
        assert created.status_code == 201, created.text
        assert int(created.json()["metadata"]["resourceVersion"]) > acked
        with c.api("GET", f"/api/v1/pods?watch=true&resourceVersion={acked}", stream=True, timeout=10) as w:
            first = json.loads(next(w.iter_lines()))
        assert first["type"] == "ERROR" and first["object"]["code"] == 410, first

        names = kept + ["fresh"]
        with Invariants(c, str(ran)) as inv:
            c.agent("n1")
            wait_for(lambda: all_in(c, names, ("Succeeded",)), 90, "the surviving pods to run", step=0.5)
        assert_converged(c, names, "Succeeded", ran)
        assert not inv.violations, inv.violations[:5]
        print(f"\nchaos WAL truncation: refused, then {len(kept)}/80 pods served above version {acked}; "
              f"converged in {time.time() - start:.1f}s")
    finally:
        c.stop_all()


def metric(c, name):
    text = c.api("GET", "/metrics").text
    m = re.search(rf"^{name} (\S+)$", text, re.M)
    assert m, f"{name} not on /metrics"
    return float(m.group(1))


def test_poison_deep_object_refused(gpusched_bin, tmp_path):
    c = Cluster(gpusched_bin, tmp_path, [], "1xH100-80GB")
    try:
        c.server("--no-scheduler")
        start = time.time()
        deep = pod_manifest("deep", "true")
        deep["spec"]["x"] = "DEEP"  # a field nested 2,046 deep (too deep for Python's own json to build)
        body = json.dumps(deep).replace('"DEEP"', "[" * 2046 + "]" * 2046)
        r = c.api("POST", "/api/v1/namespaces/default/pods", data=body, headers={"Content-Type": "application/json"})
        assert 400 <= r.status_code < 500, f"a 2,046-deep pod must be refused, got {r.status_code}"
        lst = c.api("GET", "/api/v1/pods")
        assert lst.status_code == 200 and lst.json()["items"] == []
        assert c.cli("get", "pods", "-A", check=False).returncode == 0
        print(f"\nchaos poison: deep pod refused, lists readable ({time.time() - start:.1f}s)")
    finally:
        c.stop_all()


def test_poison_corrupt_row_isolated(gpusched_bin, tmp_path):
    c = Cluster(gpusched_bin, tmp_path, ["n1"], "8xH100-80GB")
    ran = tmp_path / "ran"
    ran.mkdir()
    try:
        c.server()
        c.agent("n1")
        wait_for(lambda: c.node("n1"), 20, "the node to register")
        start = time.time()
        docs = [pod_manifest(f"q{i}", f'echo "$GPUSCHED_POD_UID" >> {ran}/$GPUSCHED_POD; sleep 1', gpus=1)
                for i in range(6)]
        names = [d["metadata"]["name"] for d in docs]
        apply(c, docs[:3])
        wait_for(lambda: all_in(c, names[:3], ("Succeeded",)), 40, "the first pods to run", step=0.5)
        db = sqlite3.connect(str(c.data / "store.db"), timeout=10)
        with db:
            n = db.execute("UPDATE objects SET value = '{\"kind\":\"Pod\", broken' WHERE key LIKE '%/default/q1'").rowcount
        db.close()
        assert n == 1
        got = c.api("GET", "/api/v1/namespaces/default/pods/q1")
        assert got.status_code == 500 and "pods/default/q1 is corrupt" in got.json()["message"], got.text
        lst = c.api("GET", "/api/v1/namespaces/default/pods")
        assert lst.status_code == 200
        assert sorted(i["metadata"]["name"] for i in lst.json()["items"]) == ["q0", "q2"]
        assert metric(c, "gpusched_store_corrupt_objects") == 1
        with c.api("GET", "/api/v1/namespaces/default/pods?watch=true&timeoutSeconds=2", stream=True) as w:
            watched = {json.loads(line)["object"]["metadata"]["name"] for line in w.iter_lines() if line}
        assert watched == {"q0", "q2"}, f"a watch from scratch replays the readable pods: {watched}"
        assert "q1" in c.log("server") and "not valid JSON" in c.log("server")
        # Watches and scheduling go on around it.
        with Invariants(c, str(ran)) as inv:
            apply(c, docs[3:])
            wait_for(lambda: all_in(c, names[3:], ("Succeeded",)), 40, "the later pods to run", step=0.5)
        assert_converged(c, ["q0", "q2"] + names[3:], "Succeeded", ran)
        assert not inv.violations, inv.violations[:5]
        print(f"\nchaos poison: corrupt row isolated, scheduling went on; converged in {time.time() - start:.1f}s")
    finally:
        c.stop_all()


def threads_of(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


def test_watch_flood(gpusched_bin, tmp_path):
    c = Cluster(gpusched_bin, tmp_path, ["n1"], "8xH100-80GB")
    ran = tmp_path / "ran"
    ran.mkdir()
    try:
        c.server()
        c.agent("n1")
        wait_for(lambda: c.node("n1"), 20, "the node to register")
        pid = c.procs["server"].pid
        base = threads_of(pid)
        docs = [pod_manifest(f"f{i:03d}", f'echo "$GPUSCHED_POD_UID" >> {ran}/$GPUSCHED_POD', gpus=1)
                for i in range(100)]
        names = [d["metadata"]["name"] for d in docs]
        start = time.time()
        opened, errors = [0], []

        def flood(k):
            for _ in range(k):
                try:
                    with c.api("GET", "/api/v1/pods?watch=true", stream=True, timeout=10) as w:
                        next(w.iter_lines())  # one event, then drop the connection
                        opened[0] += 1
                except Exception as e:  # noqa: BLE001 - counted and reported
                    errors.append(repr(e))

        with Invariants(c, str(ran)) as inv:
            threads = [threading.Thread(target=flood, args=(75,), daemon=True) for _ in range(4)]
            for t in threads:
                t.start()
            apply(c, docs)
            for t in threads:
                t.join(120)
            wait_for(lambda: all_in(c, names, ("Succeeded",)), 90, "every pod to finish", step=0.5)
        elapsed = time.time() - start
        assert opened[0] == 300 and not errors, f"{opened[0]} watches served, errors: {errors[:3]}"
        assert_converged(c, names, "Succeeded", ran)
        assert not inv.violations, inv.violations[:5]
        # Dropped watches give their threads back.
        wait_for(lambda: threads_of(pid) <= base + 16, 15, f"the server's threads to drop back to ~{base}")
        print(f"\nchaos watch flood: 300 watches opened and dropped, 100 pods; converged in {elapsed:.1f}s")
    finally:
        c.stop_all()


def test_readyz_false_while_writes_fail(gpusched_bin, tmp_path):
    """A full disk, for real: the server may not grow any file (RLIMIT_FSIZE
    set on the running process), so every commit fails."""
    c = Cluster(gpusched_bin, tmp_path, [], "1xH100-80GB")
    try:
        c.server("--no-scheduler")
        assert c.api("GET", "/readyz").status_code == 200
        pid = c.procs["server"].pid
        old = resource.prlimit(pid, resource.RLIMIT_FSIZE)
        start = time.time()
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (1, old[1]))
        try:
            r = c.api("POST", "/api/v1/namespaces/default/pods", json=pod_manifest("nospace", "true"))
            assert r.status_code == 500, r.text
            ready = c.api("GET", "/readyz")
            assert ready.status_code == 500 and "not ready: store writes are failing" in ready.text, ready.text
            assert metric(c, "gpusched_store_writable") == 0
        finally:
            resource.prlimit(pid, resource.RLIMIT_FSIZE, old)
        wait_for(lambda: c.api("GET", "/readyz").status_code == 200, 10, "/readyz to recover")
        r = c.api("POST", "/api/v1/namespaces/default/pods", json=pod_manifest("nospace", "true"))
        assert r.status_code == 201, r.text
        assert metric(c, "gpusched_store_writable") == 1
        print(f"\nchaos disk full: /readyz false while writes failed, ready again {time.time() - start:.1f}s later")
    finally:
        c.stop_all()
