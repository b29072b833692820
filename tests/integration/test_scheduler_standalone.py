"""`gpusched scheduler` as its own process against `gpusched server` over HTTPS,
with the tenant-free scheduler token of scheduler.kubeconfig (the server's own
scheduler off: --no-scheduler).

One replica: a pod for its scheduler name is bound with the devices annotation
naming the node's GPUs; a pod for another scheduler and a gated pod are left
alone; an impossible pod gets PodScheduled=False with the diagnosis;
events.k8s.io Events are written and `kubectl describe` shows them; probes and
metrics answer; SIGTERM exits 0. Every request it made is one the scheduler
role allows, and one deploy/'s ClusterRole grants (tests/kube/rbac.py).

Two replicas with --leader-elect and short leases: one leads, the other only
follows; kill -9 of the leader mid-run: the other takes the Lease over and
binds the rest; no pod bound twice, no GPU given twice, no node over its
allocatable. A leader frozen (SIGSTOP) past its lease writes nothing when it
wakes: its renew deadline has passed before it even retries.
"""
import base64
import json
import pathlib
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import yaml

from stack import Stack, require_tool, wait_for

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "kube"))
import rbac  # noqa: E402  the RBAC matcher of tests/kube

KUBECTL = "/usr/bin/kubectl"
NAME = "gpusched-ext"


class Api:
    """A client holding one kubeconfig's server, CA and token."""

    def __init__(self, kubeconfig):
        cfg = yaml.safe_load(open(kubeconfig))
        self.server = cfg["clusters"][0]["cluster"]["server"]
        ca = base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"]).decode()
        self.ctx = ssl.create_default_context(cadata=ca)
        self.token = cfg["users"][0]["user"]["token"]

    def call(self, method, path, body=None, ctype="application/json"):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method,
                                     headers={"Authorization": f"Bearer {self.token}", "Content-Type": ctype})
        try:
            with urllib.request.urlopen(req, context=self.ctx, timeout=10) as f:
                return f.status, json.loads(f.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def ok(self, method, path, body=None, ctype="application/json"):
        code, out = self.call(method, path, body, ctype)
        assert 200 <= code < 300, f"{method} {path}: {code} {out}"
        return out


def node(name, gpus):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
                       "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
                       "devices": [{"index": i, "uuid": f"GPU-{name}-{i}", "model": "NVIDIA-H100-80GB",
                                    "memoryMiB": 81559} for i in range(gpus)]}}


def pod(name, gpus=1, scheduler=NAME, gates=None):
    spec = {"schedulerName": scheduler, "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "x", "command": ["sleep", "1"],
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def cond(p, t):
    for c in (p.get("status") or {}).get("conditions") or []:
        if c.get("type") == t:
            return c
    return None


class Env:
    def __init__(self, binary, tmp):
        self.s = Stack(binary, tmp)
        self.tmp = tmp

    def start_server(self):
        port_file = self.tmp / "server.port"
        self.s.spawn("server", "server", "--data-dir", str(self.s.data), "--listen", "127.0.0.1:0", "--port-file",
                     str(port_file), "--no-scheduler")
        wait_for(lambda: port_file.exists() and port_file.read_text().strip(), 20, "the server's port")
        wait_for(lambda: (self.s.data / "scheduler.kubeconfig").exists(), 10, "scheduler.kubeconfig")
        self.admin = Api(self.s.kubeconfig)
        self.sched_kc = str(self.s.data / "scheduler.kubeconfig")

    def scheduler(self, name, *extra):
        pf = self.tmp / f"{name}.port"
        if pf.exists():
            pf.unlink()
        p = self.s.spawn(name, "scheduler", "--kubeconfig", self.sched_kc, "--scheduler-name", NAME, "--listen",
                         "127.0.0.1:0", "--port-file", str(pf), "--request-log", str(self.tmp / f"{name}.requests"),
                         *extra)
        wait_for(lambda: (pf.exists() and pf.read_text().strip()) or p.poll() is not None, 20, f"{name} probes")
        assert p.poll() is None, self.s.log(name)
        return int(pf.read_text())

    def pods(self):
        return {p["metadata"]["name"]: p for p in self.admin.ok("GET", "/api/v1/namespaces/default/pods")["items"]}


@pytest.fixture
def env(gpusched_bin, tmp_path):
    e = Env(gpusched_bin, tmp_path)
    try:
        e.start_server()
        yield e
    finally:
        e.s.stop_all()  # also when the server never came up


def probe(port, path, ca=None):
    scheme = "https" if ca else "http"
    ctx = ssl.create_default_context(cafile=ca) if ca else None
    try:
        with urllib.request.urlopen(f"{scheme}://127.0.0.1:{port}{path}", timeout=5, context=ctx) as f:
            return f.status, f.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


# What the scheduler role may do (docs/CONTROL_PLANE.md, "Authorization table"), as (method, resource path piece).
def allowed(method, path):
    path = path.split("?")[0]
    reads = ("/pods", "/nodes", "/namespaces", "/podgroups", "/noderesourcetopologies", "/resourceflavors",
             "/clusterqueues", "/localqueues", "/queues", "/workloadpriorityclasses", "/poddisruptionbudgets",
             "/resourceslices", "/deviceclasses", "/devicetaintrules", "/resourceclaimtemplates", "/resourceclaims")
    if method == "GET" and "/leases" not in path and "/events" not in path:
        return any(r in path for r in reads)
    if "/leases" in path:
        return "/namespaces/kube-system/leases" in path and method in ("GET", "POST", "PUT")
    if "/events" in path:
        return method in ("GET", "POST", "PUT", "PATCH") and "/namespaces/" in path
    if path.endswith("/binding"):
        return method == "POST"
    if path.endswith("/status"):
        return method in ("PUT", "PATCH") and ("/pods/" in path or "/podgroups/" in path or "queues/" in path or
                                               "/resourceclaims/" in path)
    if method == "DELETE":
        return "/pods/" in path
    return False


@require_tool(KUBECTL, "kubectl")
def test_standalone_binds_diagnoses_and_leaves_others_alone(env):
    a = env.admin
    for n in ("n1", "n2"):
        a.ok("POST", "/api/v1/nodes", node(n, 2))
    # Probes over HTTPS (the server's serving certificate, for 127.0.0.1, stands in for the scheduler's).
    data = env.s.data
    port = env.scheduler("sched", "--tls-cert-file", str(data / "server.crt"), "--tls-private-key-file",
                         str(data / "server.key"))
    ca = str(data / "ca.crt")
    for p in (pod("fits"), pod("other", scheduler="someone-else"), pod("huge", gpus=8),
              pod("gated", gates=["example.com/wait"])):
        a.ok("POST", "/api/v1/namespaces/default/pods", p)

    def bound():
        p = env.pods()["fits"]
        return p if p["spec"].get("nodeName") else None
    p = wait_for(bound, 30, "the pod bound")
    node_name = p["spec"]["nodeName"]
    devs = p["metadata"]["annotations"]["gpusched.io/devices"]
    assert devs.startswith(f"GPU-{node_name}-"), devs
    assert cond(p, "PodScheduled")["status"] == "True"

    def diagnosed():
        c = cond(env.pods()["huge"], "PodScheduled")
        return c if c and c["status"] == "False" else None
    c = wait_for(diagnosed, 30, "the impossible pod's diagnosis")
    assert c["reason"] == "Unschedulable" and "0/2 nodes are available" in c["message"], c

    # Events through events.k8s.io, by this scheduler.
    def events():
        evs = a.ok("GET", "/apis/events.k8s.io/v1/namespaces/default/events")["items"]
        reasons = {(e["regarding"]["name"], e["reason"]) for e in evs if e.get("reportingController") == NAME}
        return evs if {("fits", "Scheduled"), ("huge", "FailedScheduling")} <= reasons else None
    evs = wait_for(events, 30, "Scheduled and FailedScheduling Events")
    sched = [e for e in evs if e["reason"] == "Scheduled" and e["regarding"]["name"] == "fits"][0]
    assert node_name in sched["note"] and sched["eventTime"] and sched["reportingInstance"], sched
    r = subprocess.run([KUBECTL, "--kubeconfig", env.s.kubeconfig, "describe", "pod", "huge"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "FailedScheduling" in r.stdout and "0/2 nodes are available" in r.stdout, r.stdout
    assert "PodScheduled" in r.stdout, r.stdout

    # Another scheduler's pod and a gated pod: left alone.
    time.sleep(1.5)
    pods = env.pods()
    assert not pods["other"]["spec"].get("nodeName") and cond(pods["other"], "PodScheduled") is None
    assert not pods["gated"]["spec"].get("nodeName")
    c = cond(pods["gated"], "PodScheduled")
    assert c is None or c.get("reason") == "SchedulingGated", c
    # Ungated: scheduled.
    a.ok("PATCH", "/api/v1/namespaces/default/pods/gated", {"spec": {"schedulingGates": None}},
         "application/merge-patch+json")
    wait_for(lambda: env.pods()["gated"]["spec"].get("nodeName"), 30, "the ungated pod bound")

    # Probes and metrics.
    assert probe(port, "/healthz", ca)[0] == 200
    assert probe(port, "/readyz", ca) == (200, "ok")
    assert probe(port, "/nothing", ca)[0] == 404
    code, text = probe(port, "/metrics", ca)
    assert code == 200 and "gpusched_scheduler_schedule_attempts_total" in text and "gpusched_leader_is_leader 1" in text
    assert "gpusched_source_synced 1" in text, text

    assert env.s.stop("sched") == 0
    reqs = (env.tmp / "sched.requests").read_text().splitlines()
    assert any(" /api/v1/namespaces/default/pods/fits/binding " in r for r in reqs), reqs[:20]
    for line in reqs:
        method, path, code = line.rsplit(" ", 2)
        assert allowed(method, path), f"the scheduler made a request its role does not list: {line}"
        assert code not in ("401", "403"), f"refused: {line}"
    # ... and one deploy/'s ClusterRole grants its ServiceAccount in a real cluster.
    policy = rbac.deploy_policy("system:serviceaccount:gpusched:gpusched-scheduler")
    v = rbac.check_log(env.tmp / "sched.requests", policy)
    assert v == [], [x.reason for x in v]


def lease(a):
    code, out = a.call("GET", "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpusched")
    return out["spec"] if code == 200 else None


def test_two_replicas_failover_after_kill_of_the_leader(env):
    a = env.admin
    nodes, gpus = 4, 4
    for i in range(nodes):
        a.ok("POST", "/api/v1/nodes", node(f"n{i}", gpus))
    le = ["--leader-elect", "--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1500ms",
          "--leader-elect-retry-period", "500ms"]
    ports = {"ra": env.scheduler("ra", *le, "--leader-elect-id", "ra"),
             "rb": env.scheduler("rb", *le, "--leader-elect-id", "rb")}
    holder = wait_for(lambda: (lease(a) or {}).get("holderIdentity"), 20, "a leader")
    follower = "rb" if holder == "ra" else "ra"
    # Both are ready; only the leader says it leads.
    wait_for(lambda: probe(ports[follower], "/readyz")[0] == 200, 20, "the follower ready")
    assert "gpusched_leader_is_leader 0" in probe(ports[follower], "/metrics")[1]
    assert "gpusched_leader_is_leader 1" in probe(ports[holder], "/metrics")[1]
    transitions = lease(a).get("leaseTransitions", 0)

    total = 24  # 16 fit, 8 stay pending
    for i in range(12):
        a.ok("POST", "/api/v1/namespaces/default/pods", pod(f"w{i:02d}"))
    wait_for(lambda: sum(1 for p in env.pods().values() if p["spec"].get("nodeName")) >= 4, 30, "some pods bound")
    env.s.procs[holder].send_signal(signal.SIGKILL)
    killed = time.time()
    env.s.procs[holder].wait()
    for i in range(12, total):
        a.ok("POST", "/api/v1/namespaces/default/pods", pod(f"w{i:02d}"))
    wait_for(lambda: (lease(a) or {}).get("holderIdentity") == follower, 30, "the follower taking the lease")
    failover = time.time() - killed
    spec = lease(a)
    assert spec["leaseTransitions"] == transitions + 1, spec
    assert spec["leaseDurationSeconds"] == 2, spec
    print(f"failover after kill -9 of the leader: {failover:.2f}s")
    assert failover < 10, failover

    def settled():
        pods = env.pods()
        bound = [p for p in pods.values() if p["spec"].get("nodeName")]
        return pods if len(bound) == nodes * gpus else None
    pods = wait_for(settled, 60, "every GPU given out")
    time.sleep(1.0)  # nothing more moves
    pods = env.pods()
    per_node, gpu_owner = {}, {}
    for p in pods.values():
        n = p["spec"].get("nodeName")
        if not n:
            assert cond(p, "PodScheduled")["status"] == "False", p["status"]
            continue
        per_node[n] = per_node.get(n, 0) + 1
        for d in p["metadata"]["annotations"]["gpusched.io/devices"].split(","):
            g = d.split(":")[0]
            assert g.startswith(f"GPU-{n}-"), (p["metadata"]["name"], n, d)
            assert g not in gpu_owner, f"{g} given to {gpu_owner.get(g)} and {p['metadata']['name']}"
            gpu_owner[g] = p["metadata"]["name"]
    assert sum(per_node.values()) == nodes * gpus and all(v <= gpus for v in per_node.values()), per_node
    # Bound once: at most one Scheduled occurrence per pod, from either replica.
    evs = a.ok("GET", "/apis/events.k8s.io/v1/namespaces/default/events")["items"]
    scheduled = {}
    for e in evs:
        if e["reason"] == "Scheduled":
            n = e["regarding"]["name"]
            scheduled[n] = scheduled.get(n, 0) + (e.get("series") or {}).get("count", 1)
    assert all(v == 1 for v in scheduled.values()), scheduled
    # Bound once: no pod got two accepted bindings, from one replica or both (a 409 is the server refusing one).
    accepted = {}
    for r in ("ra", "rb"):
        for line in (env.tmp / f"{r}.requests").read_text().splitlines():
            method, path, code = line.rsplit(" ", 2)
            if method == "POST" and path.endswith("/binding") and code == "201":
                accepted[path] = accepted.get(path, 0) + 1
    assert accepted and all(v == 1 for v in accepted.values()), accepted
    assert len(accepted) <= nodes * gpus
    # The survivor still leads and is ready; SIGTERM releases the Lease.
    assert probe(ports[follower], "/readyz")[0] == 200
    assert env.s.stop(follower) == 0
    spec = lease(a)
    assert not spec.get("holderIdentity"), spec
    assert spec["leaseDurationSeconds"] == 1, spec


def test_bad_flags_are_named(gpusched_bin, tmp_path):
    cases = [
        (["--leader-elect-lease-duration", "15"], "--leader-elect-lease-duration \"15\": missing unit"),
        (["--leader-elect-retry-period", "2x"], "--leader-elect-retry-period \"2x\": unknown unit"),
        (["--leader-elect-renew-deadline", "0s"], "--leader-elect-renew-deadline \"0s\": must be more than 0"),
        (["--seed", "-1"], "--seed \"-1\": want a whole number"),
        (["--tls-cert-file", "x"], "--tls-cert-file and --tls-private-key-file go together"),
    ]
    for args, want in cases:
        r = subprocess.run([gpusched_bin, "scheduler", *args], capture_output=True, text=True, timeout=30)
        assert r.returncode == 2 and want in r.stderr, (args, r.returncode, r.stderr)
    r = subprocess.run([gpusched_bin, "scheduler", "--leader-elect", "--leader-elect-lease-duration", "10s",
                        "--leader-elect-renew-deadline", "10s"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--leader-elect-renew-deadline \"10s\": must be less than " \
        "--leader-elect-lease-duration (10s)" in r.stderr, r.stderr
    r = subprocess.run([gpusched_bin, "scheduler", "--leader-elect-retry-period", "9s"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2 and "must be more than 1.2 x --leader-elect-retry-period (9s)" in r.stderr, r.stderr
    kc = tmp_path / "kc"
    kc.write_text("apiVersion: v1\nkind: Config\nclusters: []\n")
    r = subprocess.run([gpusched_bin, "scheduler", "--kubeconfig", str(kc)], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 1 and "no server" in r.stderr, r.stderr
    r = subprocess.run([gpusched_bin, "scheduler", "--config", str(tmp_path / "missing.yaml")], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1 and "missing.yaml: file not found" in r.stderr, r.stderr


def test_frozen_leader_writes_nothing_when_it_wakes(env):
    """A leader stopped (SIGSTOP) past its lease: the other replica takes over; woken up, the old one must not
    bind from its stale view: its renew deadline has passed, so may_write is false before it even retries."""
    a = env.admin
    a.ok("POST", "/api/v1/nodes", node("n0", 4))
    le = ["--leader-elect", "--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1500ms",
          "--leader-elect-retry-period", "500ms"]
    ports = {"ra": env.scheduler("ra", *le, "--leader-elect-id", "ra"),
             "rb": env.scheduler("rb", *le, "--leader-elect-id", "rb")}
    holder = wait_for(lambda: (lease(a) or {}).get("holderIdentity"), 20, "a leader")
    other = "rb" if holder == "ra" else "ra"
    env.s.procs[holder].send_signal(signal.SIGSTOP)
    try:
        for i in range(3):
            a.ok("POST", "/api/v1/namespaces/default/pods", pod(f"f{i}"))
        wait_for(lambda: (lease(a) or {}).get("holderIdentity") == other, 30, "the other replica taking over")
        wait_for(lambda: all(p["spec"].get("nodeName") for p in env.pods().values()), 30, "the pods bound")
        log = env.tmp / f"{holder}.requests"
        before = len(log.read_text().splitlines())
    finally:
        env.s.procs[holder].send_signal(signal.SIGCONT)
    a.ok("POST", "/api/v1/namespaces/default/pods", pod("late"))
    wait_for(lambda: env.pods()["late"]["spec"].get("nodeName"), 30, "the late pod bound")
    time.sleep(2.0)
    woke = log.read_text().splitlines()[before:]
    writes = [line for line in woke if line.split(" ", 1)[0] in ("POST", "PUT", "PATCH", "DELETE")
              and "/leases/" not in line]
    assert not writes, f"the old leader wrote after waking: {writes}"
    assert "gpusched_leader_is_leader 0" in probe(ports[holder], "/metrics")[1]
    assert (lease(a) or {}).get("holderIdentity") == other
    assert sum(1 for p in env.pods().values() if p["spec"].get("nodeName")) == 4
