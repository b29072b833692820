"""`gpusched scheduler` against the strict fake kube-apiserver (fake_apiserver.py): the
standalone scheduler tested against a peer written from the Kubernetes API conventions, not
from our server.

Every test starts `gpusched scheduler --kubeconfig <fake>/scheduler.kubeconfig
--scheduler-name gpusched ...` as the ServiceAccount deploy/ gives it
(system:serviceaccount:gpusched:gpusched-scheduler, its own token in the fake). Nodes look
as a kubelet writes them: no status.devices, the per-GPU state in the gpusched.io/gpus
annotation our node DaemonSet publishes, and one node with only allocatable nvidia.com/gpu
(count-only). The tests cover binding through pods/binding with the devices annotation, pods
of other schedulers and gated pods left alone, PodScheduled=False with the diagnosis,
events.k8s.io Events, preemption (uid precondition, nominatedNodeName), faults while 200+ pods
come in (watches closed at random, 429 with Retry-After, 500, a compaction forcing 410 and a
relist), injected Lease conflicts, kill -9 of the leader of two replicas (a scheduler-plugins
PodGroup bound whole), Volcano and native scheduling.k8s.io PodGroups with the status each
shape's controller shows, Kueue v1beta2 queues where only v1beta2 is served, and `kubectl
describe`. After each test a fixture checks every request made with the scheduler's identity
against deploy/'s scheduler ClusterRole and Role (rbac.py).

Run: GPUSCHED_BIN=$PWD/build/gpusched /usr/bin/python3 -m pytest -q tests/kube/test_scheduler_vs_fake.py
(fails, never skips, without the binary or kubectl).
"""
import collections
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import rbac  # noqa: E402
from fake_apiserver import start_fake  # noqa: E402

SCHEDULER = "system:serviceaccount:gpusched:gpusched-scheduler"
SCHED_TOKEN = "gpusched-scheduler-token-0123456789"
NAME = "gpusched"
KUBECTL = "/usr/bin/kubectl"
NS = "/api/v1/namespaces/default"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/gpusched/leases/gpusched"
SHORT_LEASE = ("--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1.5s",
               "--leader-elect-retry-period", "0.25s")


def binary():
    b = os.environ.get("GPUSCHED_BIN", "")
    if not b or not os.access(b, os.X_OK):
        pytest.fail(f"GPUSCHED_BIN={b!r}: set it to the built gpusched binary (build/gpusched)")
    return b


def wait_for(fn, timeout, what, every=0.05):
    end = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


# --- Objects as a real cluster holds them ------------------------------------------------------

def node(name, gpus, annotated=True):
    md = {"name": name, "labels": {"kubernetes.io/hostname": name,
                                   "nvidia.com/gpu.product": "NVIDIA-H100-80GB"}}
    if annotated:  # what the node DaemonSet publishes: Node status.devices as JSON text
        md["annotations"] = {"gpusched.io/gpus": json.dumps(
            [{"index": i, "uuid": f"GPU-{name}-{i}", "model": "NVIDIA-H100-80GB", "memoryMiB": 81559,
              "numaNode": i * 2 // max(gpus, 1)} for i in range(gpus)])}
    res = {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"apiVersion": "v1", "kind": "Node", "metadata": md,
            "status": {"capacity": res, "allocatable": res,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}}


def pod(name, gpus=1, scheduler=NAME, gates=None, priority_class=None, labels=None):
    spec = {"schedulerName": scheduler, "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"],
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if priority_class:
        spec["priorityClassName"] = priority_class
    md = {"name": name, "namespace": "default"}
    if labels:
        md["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md, "spec": spec}


def cond(p, t):
    for c in (p.get("status") or {}).get("conditions") or []:
        if c.get("type") == t:
            return c
    return None


class Cluster:
    """The fake plus the test's own (admin) client; writes retry the faults injected on them."""

    def __init__(self, fake, tmp):
        self.fake, self.tmp = fake, tmp
        self.api = fake.session()
        self.url = fake.url
        self.kubeconfig = fake.add_kubeconfig(str(tmp / "scheduler.kubeconfig"), SCHED_TOKEN)
        self.expect_denied = []  # (verb, resource, name) a test makes on purpose as the scheduler
        self.procs = {}

    def call(self, method, path, body=None, ok=(200, 201), **kw):
        for _ in range(200):
            r = self.api.request(method, self.url + path, json=body, timeout=30, **kw)
            if r.status_code == 429 or (r.status_code >= 500 and "injected" in r.text):
                time.sleep(0.05)
                continue
            assert r.status_code in ok, f"{method} {path}: {r.status_code} {r.text}"
            return r.json()
        raise AssertionError(f"{method} {path}: still refused after 200 tries")

    def create(self, path, obj):
        return self.call("POST", path, obj)

    def pods(self):
        return {p["metadata"]["name"]: p for p in self.call("GET", NS + "/pods")["items"]}

    def events(self):
        return self.call("GET", "/apis/events.k8s.io/v1/events")["items"]

    def start(self, name, *extra, wait_ready=True):
        pf = self.tmp / f"{name}.port"
        out = open(self.tmp / f"{name}.log", "w")
        p = subprocess.Popen([binary(), "scheduler", "--kubeconfig", self.kubeconfig, "--scheduler-name", NAME,
                              "--listen", "127.0.0.1:0", "--port-file", str(pf), *extra],
                             stdout=out, stderr=subprocess.STDOUT)
        out.close()
        self.procs[name] = p
        wait_for(lambda: (pf.exists() and pf.read_text().strip()) or p.poll() is not None, 20, f"{name} probes")
        assert p.poll() is None, self.log(name)
        port = int(pf.read_text())
        sched = Sched(name, p, port)
        if wait_ready:
            wait_for(lambda: sched.metric("gpusched_source_synced") == 1, 20, f"{name} synced")
        return sched

    def log(self, name):
        return (self.tmp / f"{name}.log").read_text()

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for name, p in self.procs.items():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def bindings(self):
        """Accepted bindings per pod name, from the fake's request log."""
        return collections.Counter(e["name"] for e in self.fake.requests(user=SCHEDULER)
                                   if e["subresource"] == "binding" and e["code"] == 201)

    def check_nodes(self, nodes):
        """No node over its allocatable nvidia.com/gpu, and no GPU given twice."""
        used = collections.defaultdict(int)
        devs = collections.defaultdict(list)
        for p in self.pods().values():
            n = p["spec"].get("nodeName")
            if not n or p["metadata"].get("deletionTimestamp"):
                continue
            g = int(p["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"])
            used[n] += g
            d = (p["metadata"].get("annotations") or {}).get("gpusched.io/devices", "")
            ids = [x for x in d.split(",") if x]
            assert len(ids) == g, (p["metadata"]["name"], d)
            devs[n] += ids
        for n, g in used.items():
            assert g <= nodes[n], f"node {n}: {g} GPUs bound, allocatable {nodes[n]}"
            assert len(devs[n]) == len(set(devs[n])), f"node {n}: a GPU given twice: {devs[n]}"
        return used


class Sched:
    def __init__(self, name, proc, port):
        self.name, self.proc, self.port = name, proc, port

    def metrics(self):
        import requests
        out = {}
        try:
            with requests.Session() as s:
                s.trust_env = False  # no proxy from the environment for 127.0.0.1
                text = s.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text
        except requests.RequestException:
            return None
        for line in text.splitlines():
            if line and not line.startswith("#"):
                k, _, v = line.rpartition(" ")
                out[k] = float(v)
        return out

    def metric(self, key):
        m = self.metrics()
        return None if m is None else m.get(key)

    def leading(self):
        return self.metric("gpusched_leader_is_leader") == 1


_POLICY = []


def scheduler_policy():
    """deploy/'s roles bound to the scheduler's ServiceAccount (rendered once: kubectl kustomize)."""
    if not _POLICY:
        if not os.access(KUBECTL, os.X_OK):
            pytest.fail(f"{KUBECTL} not found: install kubectl (scripts/install-deps.sh)")
        _POLICY.append(rbac.deploy_policy(SCHEDULER))
    return _POLICY[0]


def rbac_violations(c):
    """check_log over the requests made with the scheduler's identity."""
    path = c.tmp / "scheduler-requests.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in c.fake.requests(user=SCHEDULER)))
    return rbac.check_log(path, scheduler_policy())


@pytest.fixture
def cluster(tmp_path):
    binary()
    tokens = tmp_path / "tokens.csv"
    tokens.write_text(f'{SCHED_TOKEN},{SCHEDULER},uid-gpusched-scheduler,'
                      f'"system:serviceaccounts,system:serviceaccounts:gpusched"\n')
    fake = start_fake(str(tmp_path / "fake"), "--token-auth-file", str(tokens), "--bookmark-interval", "0.3",
                      "--history", "2000")
    c = Cluster(fake, tmp_path)
    try:
        c.create("/api/v1/namespaces", {"metadata": {"name": "gpusched"}})
        yield c
        c.stop_all()
        # The RBAC contract: every request the scheduler made is one its roles allow.
        got = sorted((v.request["verb"], v.request["resource"], v.request["name"]) for v in rbac_violations(c))
        assert got == sorted(c.expect_denied), [v.reason for v in rbac_violations(c)]
        assert c.fake.requests(user=SCHEDULER), "the scheduler made no request as its own identity"
    finally:
        c.stop_all()
        fake.stop()


def add_nodes(c, spec):
    """spec: {name: (gpus, annotated)}; returns {name: gpus}."""
    for n, (g, ann) in spec.items():
        c.create("/api/v1/nodes", node(n, g, ann))
    return {n: g for n, (g, _) in spec.items()}


# --- The tests ---------------------------------------------------------------------------------

def test_binds_with_devices_leaves_others_and_says_why_not(cluster):
    c = cluster
    nodes = add_nodes(c, {"n1": (4, True), "n2": (4, True), "n3": (2, False)})
    for p in (pod("a"), pod("b", 2), pod("other", 1, scheduler="default-scheduler"), pod("huge", 16)):
        c.create(NS + "/pods", p)
    s = c.start("s1")
    wait_for(lambda: all(c.pods()[n]["spec"].get("nodeName") for n in ("a", "b")), 20, "a and b bound")
    wait_for(lambda: cond(c.pods()["huge"], "PodScheduled"), 20, "huge's PodScheduled condition")
    pods = c.pods()
    for name, g in (("a", 1), ("b", 2)):
        p = pods[name]
        n = p["spec"]["nodeName"]
        devs = p["metadata"]["annotations"]["gpusched.io/devices"].split(",")
        assert len(devs) == g
        if n != "n3":  # the annotation's uuids name this node's GPUs
            assert all(d.startswith(f"GPU-{n}-") for d in devs), (name, n, devs)
        assert cond(p, "PodScheduled")["status"] == "True"
    # Another scheduler's pod: untouched.
    other = pods["other"]
    assert not other["spec"].get("nodeName") and not cond(other, "PodScheduled")
    assert not (other["metadata"].get("annotations") or {})
    # The impossible pod: PodScheduled=False with the diagnosis, naming the count-only node.
    ps = cond(pods["huge"], "PodScheduled")
    assert ps["status"] == "False" and ps["reason"] == "Unschedulable", ps
    assert "0/3 nodes are available" in ps["message"] and "Insufficient nvidia.com/gpu" in ps["message"], ps
    assert "node n3: count-only GPU state" in ps["message"], ps
    assert "node n1" not in ps["message"].split("Insufficient")[-1], ps  # annotated nodes are not count-only
    # events.k8s.io/v1 Events, as the scheduler's reporting controller.
    wait_for(lambda: {("Scheduled", "a"), ("Scheduled", "b"), ("FailedScheduling", "huge")} <=
             {(e["reason"], e["regarding"]["name"]) for e in c.events()}, 10, "the Events")
    for e in c.events():
        assert e["apiVersion"] == "events.k8s.io/v1" and e["reportingController"] == NAME, e
        if e["reason"] == "FailedScheduling":
            assert e["type"] == "Warning" and e["action"] == "Scheduling" and "count-only" in e["note"], e
        if e["reason"] == "Scheduled":
            assert e["note"] == f"Successfully assigned default/{e['regarding']['name']} to " \
                                f"{pods[e['regarding']['name']]['spec']['nodeName']}", e
    assert c.bindings() == {"a": 1, "b": 1}
    c.check_nodes(nodes)
    assert s.metric('gpusched_scheduler_schedule_attempts_total{result="scheduled"}') == 2
    # The RBAC check can fail: a request the role does not allow (creating a pod) is reported.
    r = c.fake.session(token=False).post(c.url + NS + "/pods", json=pod("not-mine"),
                                         headers={"Authorization": f"Bearer {SCHED_TOKEN}"})
    assert r.status_code == 201  # the fake authorizes nothing: the log is what is checked
    v = rbac_violations(c)
    assert [(x.request["verb"], x.request["resource"]) for x in v] == [("create", "pods")], v
    assert "create pods (core) in namespace default: no rule allows it" in v[0].reason
    c.expect_denied.append(("create", "pods", ""))


def test_a_gated_pod_waits_until_its_gate_is_removed(cluster):
    c = cluster
    add_nodes(c, {"n1": (4, True)})
    c.create(NS + "/pods", pod("gated", gates=["example.com/quota"]))
    c.create(NS + "/pods", pod("free"))
    s = c.start("s1")
    wait_for(lambda: c.pods()["free"]["spec"].get("nodeName"), 20, "the ungated pod bound")
    time.sleep(1.5)  # a few scheduling rounds
    g = c.pods()["gated"]
    assert not g["spec"].get("nodeName"), g
    ps = cond(g, "PodScheduled")  # kube-scheduler's own note on a gated pod, if any: no diagnosis
    assert not ps or (ps["status"], ps["reason"]) == ("False", "SchedulingGated"), ps
    assert "gated" not in c.bindings()
    assert not [e for e in c.events() if e["regarding"]["name"] == "gated"]
    c.call("PATCH", NS + "/pods/gated", {"spec": {"schedulingGates": None}},
           headers={"Content-Type": "application/merge-patch+json"})
    wait_for(lambda: c.pods()["gated"]["spec"].get("nodeName"), 20, "the pod bound once ungated")
    assert c.bindings() == {"free": 1, "gated": 1}
    assert s.proc.poll() is None


def test_preemption_deletes_the_victim_with_a_uid_precondition_and_nominates(cluster):
    c = cluster
    add_nodes(c, {"n1": (2, True)})
    for name, value in (("low", 10), ("high", 1000)):
        c.create("/apis/scheduling.k8s.io/v1/priorityclasses",
                 {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                  "value": value})
    c.create(NS + "/pods", pod("victim", 2, priority_class="low"))
    rv = c.call("GET", NS + "/pods")["metadata"]["resourceVersion"]
    seen = []  # every pod state the watch saw: the nomination is brief
    stop = threading.Event()

    def watch():
        try:
            follow()
        except Exception:  # the watch ends when the test stops
            pass

    def follow():
        w = c.fake.session()
        with w.get(c.url + NS + "/pods", params={"watch": "1", "resourceVersion": rv, "timeoutSeconds": "60"},
                   stream=True, timeout=70) as r:
            for line in r.iter_lines():
                if stop.is_set():
                    return
                if line:
                    seen.append(json.loads(line))

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    s = c.start("s1")
    wait_for(lambda: c.pods()["victim"]["spec"].get("nodeName"), 20, "the victim bound")
    victim_uid = c.pods()["victim"]["metadata"]["uid"]
    c.create(NS + "/pods", pod("high", 2, priority_class="high"))
    wait_for(lambda: c.pods().get("high", {}).get("spec", {}).get("nodeName"), 30, "the preemptor bound")
    assert "victim" not in c.pods()
    deletes = [e for e in c.fake.requests(user=SCHEDULER) if e["verb"] == "delete"]
    assert [(e["resource"], e["name"], e["code"]) for e in deletes] == [("pods", "victim", 200)], deletes
    assert deletes[0]["preconditions"]["uid"] == victim_uid, deletes
    stop.set()
    states = [e["object"] for e in seen if e["type"] in ("ADDED", "MODIFIED")]
    nominated = [o for o in states if o["metadata"]["name"] == "high" and
                 (o.get("status") or {}).get("nominatedNodeName") == "n1" and not o["spec"].get("nodeName")]
    assert nominated, "the preemptor's status.nominatedNodeName was never n1 before it was bound"
    target = [o for o in states if o["metadata"]["name"] == "victim" and
              (cond(o, "DisruptionTarget") or {}).get("status") == "True"]
    assert target, "the victim never got the DisruptionTarget condition"
    assert c.bindings() == {"victim": 1, "high": 1}
    evs = {(e["reason"], e["regarding"]["name"]) for e in c.events()}
    assert {("Preempted", "victim"), ("Scheduled", "high")} <= evs, evs
    assert s.metric('gpusched_scheduler_schedule_attempts_total{result="scheduled"}') >= 2


def test_faults_while_pods_stream_in_bind_each_pod_once(cluster):
    c = cluster
    nodes = add_nodes(c, {f"n{i:02d}": (8, i != 0) for i in range(30)})  # 240 GPUs, one count-only node
    s = c.start("s1")
    c.fake.faults(watch_close_prob=0.02, error_rate=0.05, error_code=429, retry_after=1, seed=7)
    npods, made = 220, 0

    def bound():
        return sum(1 for p in c.pods().values() if p["spec"].get("nodeName"))

    def add(upto):
        nonlocal made
        while made < upto:
            c.create(NS + "/pods", pod(f"p{made:03d}"))
            made += 1

    # Phases, each waiting for the scheduler to bind through it: 429 with Retry-After; 500;
    # a compaction while every watch is down (each closes after its next event and its
    # reconnects are refused), so each resumes from a version gone: 410, then a relist; then
    # 429 with watches dropped without their last chunk.
    add(70)
    wait_for(lambda: bound() >= 60, 60, "60 pods bound", every=0.3)
    c.fake.faults(error_code=500)
    add(120)
    wait_for(lambda: bound() >= 110, 60, "110 pods bound", every=0.3)
    c.fake.faults(watch_close_prob=1.0, error_rate=1.0, error_verbs=["watch"], error_code=429)
    add(130)
    time.sleep(0.3)
    c.fake.faults(compact=True, history=50)
    add(140)
    c.fake.faults(watch_close_prob=0.02, error_rate=0.05, error_verbs=[], watch_close_abrupt=True)
    add(npods)
    wait_for(lambda: bound() == npods, 120, f"{npods} pods bound", every=0.5)
    view = c.fake.faults(error_rate=0.0, watch_close_prob=0.0)
    assert view["injected"], view
    b = c.bindings()
    assert len(b) == npods and set(b.values()) == {1}, {k: v for k, v in b.items() if v != 1}
    c.check_nodes(nodes)
    m = s.metrics()
    assert m['gpusched_source_requests_total{kind="retry"}'] > 0, m
    assert m["gpusched_source_relists_total"] > 0, m
    codes = collections.Counter(e["code"] for e in c.fake.requests(user=SCHEDULER))
    assert codes[429] and codes[500], codes
    assert s.proc.poll() is None


def test_injected_lease_conflicts_never_give_two_leaders(cluster):
    c = cluster
    nodes = add_nodes(c, {"n1": (16, True), "n2": (16, True)})
    c.fake.faults(lease_conflicts=3)
    a = c.start("a", "--leader-elect", "--leader-elect-namespace", "gpusched", "--leader-elect-id", "a",
                *SHORT_LEASE)
    b = c.start("b", "--leader-elect", "--leader-elect-namespace", "gpusched", "--leader-elect-id", "b",
                *SHORT_LEASE)
    both, leaders = 0, set()
    end = time.monotonic() + 8
    i = 0
    while time.monotonic() < end:
        if i % 20 == 0:
            c.fake.faults(lease_conflicts=2)  # the next Lease writes answer 409, again and again
        la, lb = a.leading(), b.leading()
        both += la and lb
        leaders |= {x for x, on in (("a", la), ("b", lb)) if on}
        if i % 10 == 0:
            c.create(NS + "/pods", pod(f"p{i}"))
        i += 1
        time.sleep(0.05)
    assert both == 0, "two replicas led at once"
    assert leaders, "no replica ever led"
    lease = c.call("GET", LEASE)
    assert lease["spec"]["holderIdentity"] in ("a", "b"), lease
    assert lease["spec"]["leaseDurationSeconds"] == 2
    conflicts = [e for e in c.fake.requests(user=SCHEDULER) if e["resource"] == "leases" and e["code"] == 409]
    assert conflicts, "no Lease conflict was answered"
    assert len(c.pods()) <= 32
    wait_for(lambda: all(p["spec"].get("nodeName") for p in c.pods().values()), 20, "every pod bound")
    assert set(c.bindings().values()) == {1} and len(c.bindings()) == len(c.pods())
    c.check_nodes(nodes)


def test_kill_9_of_the_leader_the_other_takes_over_and_gangs_stay_whole(cluster):
    c = cluster
    nodes = add_nodes(c, {f"n{i}": (8, True) for i in range(10)})  # 80 GPUs
    le = ("--leader-elect", "--leader-elect-namespace", "gpusched") + SHORT_LEASE
    r1 = c.start("r1", *le, "--leader-elect-id", "r1")
    r2 = c.start("r2", *le, "--leader-elect-id", "r2")
    wait_for(lambda: r1.leading() or r2.leading(), 15, "a leader")
    leader, other = (r1, r2) if r1.leading() else (r2, r1)
    assert not other.leading()
    c.create("/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups",
             {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
              "metadata": {"name": "gang", "namespace": "default"}, "spec": {"minMember": 3}})
    gang = [f"gang-{i}" for i in range(3)]
    total = 60
    both = []
    for i in range(total):
        if leader.proc.poll() is None and other.leading() and leader.leading():
            both.append(i)
        c.create(NS + "/pods", pod(f"p{i:02d}"))
        if i == 30:
            wait_for(lambda: len(c.bindings()) > 5, 20, "the leader binding")
            for g in gang[:2]:  # the gang's members straddle the failover
                c.create(NS + "/pods", pod(g, 2, labels={"scheduling.x-k8s.io/pod-group": "gang"}))
            leader.proc.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            leader.proc.wait()
            c.create(NS + "/pods", pod(gang[2], 2, labels={"scheduling.x-k8s.io/pod-group": "gang"}))
        time.sleep(0.01)
    wait_for(other.leading, 15, f"{other.name} to lead", every=0.02)
    failover = time.monotonic() - killed
    print(f"\nfailover: {other.name} leads {failover:.2f}s after kill -9 of {leader.name} "
          f"(lease 2s, renew deadline 1.5s, retry 0.25s)")
    assert failover < 6, failover  # a lease duration and a few retries, with room for a loaded machine
    assert not both, f"both replicas led while pods {both} were created"
    names = [f"p{i:02d}" for i in range(total)] + gang
    wait_for(lambda: all(c.pods()[n]["spec"].get("nodeName") for n in names), 30, "every pod bound", every=0.2)
    b = c.bindings()
    assert set(b) == set(names) and set(b.values()) == {1}, {k: v for k, v in b.items() if v != 1}
    c.check_nodes(nodes)
    bound = [g for g in gang if c.pods()[g]["spec"].get("nodeName")]
    assert len(bound) in (0, 3), bound
    lease = c.call("GET", LEASE)
    assert lease["spec"]["holderIdentity"] == other.name and lease["spec"]["leaseTransitions"] >= 1, lease
    pg = c.call("GET", "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups/gang")
    assert (pg.get("status") or {}).get("phase") == "Scheduled", pg


def kubectl(c, *args):
    if not os.access(KUBECTL, os.X_OK):
        pytest.fail(f"{KUBECTL} not found: install kubectl (scripts/install-deps.sh)")
    r = subprocess.run([KUBECTL, "--kubeconfig", c.fake.kubeconfig, *args], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_kubectl_describe_shows_the_events_and_condition_written(cluster):
    c = cluster
    add_nodes(c, {"n1": (4, True), "n2": (2, False)})
    c.create(NS + "/pods", pod("ok", 2))
    c.create(NS + "/pods", pod("toobig", 9))
    c.start("s1")
    wait_for(lambda: c.pods()["ok"]["spec"].get("nodeName"), 20, "ok bound")
    wait_for(lambda: cond(c.pods()["toobig"], "PodScheduled"), 20, "toobig's condition")
    wait_for(lambda: len(c.events()) >= 2, 10, "two Events")
    out = kubectl(c, "describe", "pod", "ok")
    node_name = c.pods()["ok"]["spec"]["nodeName"]
    assert re.search(rf"Node:\s+{node_name}", out), out
    assert re.search(r"PodScheduled\s+True", out), out
    assert re.search(rf"Normal\s+Scheduled\s+.*{NAME}\s+Successfully assigned default/ok to {node_name}", out), out
    assert "gpusched.io/devices" in out, out
    out = kubectl(c, "describe", "pod", "toobig")
    assert re.search(r"PodScheduled\s+False", out), out
    assert re.search(rf"Warning\s+FailedScheduling\s+.*{NAME}\s+0/2 nodes are available", out), out
    assert "count-only GPU state" in out, out


def test_volcano_and_native_pod_groups_bound_whole_with_their_status(cluster):
    c = cluster
    nodes = add_nodes(c, {"n1": (4, True), "n2": (4, True)})
    vc = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
    native = "/apis/scheduling.k8s.io/v1beta1/namespaces/default"
    for name, gpus in (("vg", 2), ("toolarge", 8)):
        c.create(vc, {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                      "metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": 2}})
        for i in range(2):
            p = pod(f"{name}-{i}", gpus)
            p["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": name}
            c.create(NS + "/pods", p)
    c.create(native + "/workloads", {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
        "metadata": {"name": "train", "namespace": "default"},
        "spec": {"controllerRef": {"apiGroup": "batch", "kind": "Job", "name": "train"},
                 "podGroupTemplates": [{"name": "workers", "schedulingPolicy": {"gang": {"minCount": 2}}}]}})
    c.create(native + "/podgroups", {
        "apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "ng", "namespace": "default"},
        "spec": {"workloadRef": {"workloadName": "train", "templateName": "workers"},
                 "schedulingPolicy": {"gang": {"minCount": 2}}}})
    for i in range(2):
        p = pod(f"ng-{i}", 1)
        p["spec"]["schedulingGroup"] = {"podGroupName": "ng"}
        c.create(NS + "/pods", p)
    c.start("s1")
    members = ["vg-0", "vg-1", "ng-0", "ng-1"]
    wait_for(lambda: all(c.pods()[n]["spec"].get("nodeName") for n in members), 20, "both gangs bound")
    wait_for(lambda: (c.call("GET", vc + "/toolarge").get("status") or {}).get("conditions"), 20,
             "the Volcano group's Unschedulable condition")
    pods = c.pods()
    assert not pods["toolarge-0"]["spec"].get("nodeName") and not pods["toolarge-1"]["spec"].get("nodeName")
    assert c.bindings() == {n: 1 for n in members}
    c.check_nodes(nodes)
    vg = wait_for(lambda: (lambda g: g if (g.get("status") or {}).get("phase") == "Running" else None)(
        c.call("GET", vc + "/vg")), 10, "the Volcano group Running")
    assert [x["type"] for x in vg["status"]["conditions"]] == ["Scheduled"], vg["status"]
    big = c.call("GET", vc + "/toolarge")["status"]
    un = [x for x in big["conditions"] if x["type"] == "Unschedulable"]
    assert un and un[0]["reason"] == "NotEnoughResources" and "toolarge needs 16.0 GPUs" in un[0]["message"], big
    ng = wait_for(lambda: cond(c.call("GET", native + "/podgroups/ng"), "PodGroupScheduled"), 10,
                  "the native PodGroupScheduled condition")
    assert ng["status"] == "True" and ng["reason"] == "Scheduled", ng


def test_kueue_v1beta2_queues_admit_pods_where_only_v1beta2_is_served(cluster):
    """Kueue 0.20 serves kueue.x-k8s.io/v1beta2 only (as the fake does): the scheduler finds its
    ClusterQueue and LocalQueue there, admits within the quota and holds what exceeds it."""
    c = cluster
    add_nodes(c, {"n1": (8, True)})
    kq = "/apis/kueue.x-k8s.io/v1beta2"
    c.create(kq + "/resourceflavors", {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                        "metadata": {"name": "default"}, "spec": {}})
    c.create(kq + "/clusterqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "cq"},
        "spec": {"namespaceSelector": {}, "resourceGroups": [{
            "coveredResources": ["nvidia.com/gpu"],
            "flavors": [{"name": "default", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 2}]}]}]}})
    c.create(kq + "/namespaces/default/localqueues", {
        "apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
        "metadata": {"name": "lq", "namespace": "default"}, "spec": {"clusterQueue": "cq"}})
    for name in ("q1", "q2", "q3"):
        c.create(NS + "/pods", pod(name, 1, labels={"kueue.x-k8s.io/queue-name": "lq"}))
    c.start("s1")
    wait_for(lambda: sum(1 for p in c.pods().values() if p["spec"].get("nodeName")) == 2, 20,
             "two pods admitted and bound")
    time.sleep(1.0)
    assert sum(1 for p in c.pods().values() if p["spec"].get("nodeName")) == 2  # the quota is 2 GPUs
    lists = {(e["path"].split("/")[3], e["code"]) for e in c.fake.requests(user=SCHEDULER)
             if e["resource"] == "clusterqueues" and e["verb"] == "list"}
    assert ("v1beta2", 200) in lists, lists
    # Kueue's own controller owns the queues' status in a real cluster: the scheduler only reads them.
    assert not [e for e in c.fake.requests(user=SCHEDULER)
                if e["resource"] in ("clusterqueues", "localqueues") and e["verb"] not in ("list", "watch")]
