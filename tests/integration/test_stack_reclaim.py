"""Reclaim across a cohort, end to end under `gpusched up` with the server's
admission flags (--reclaim-wait 0s --reclaim-min-runtime 0s): two
ClusterQueues of 4 GPUs each share one 8-GPU node; team-b fills it,
borrowing 4 from team-a. When team-a asks for its 4 GPUs, team-b's borrowing
job is evicted (re-created unbound, since its restartPolicy is OnFailure),
team-a's job is admitted and bound on the freed GPUs while an unqueued pod
that was waiting longer is kept off them by the AdmissionHold, and the
evicted job waits until team-a's demand drops, evicted once only. The
ClusterQueues' status counts the eviction on both sides.

In that cohort quota alone keeps the evicted job out while team-a runs. A
second stack makes the no-ping-pong rule the only obstacle: an idle third
queue lends quota, --reclaim-from nominal lets team-a reclaim anyway, and
GPUs are freed while team-a's job runs; the evicted job still does not come
back to borrow until team-a's job ends. Bad flag values are refused with the
flag, the value and the reason."""
import json
import time

import pytest

from stack import Stack, apply, phase, pod_manifest, wait_for

MOCK = "1x8xH100-80GB"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
FLAGS = ("--reclaim-wait", "0s", "--reclaim-min-runtime", "0s")


def cluster_queue(name):
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, "cohort": "pool",
                     "preemption": {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"},
                     "resourceGroups": [
                         {"coveredResources": ["nvidia.com/gpu"],
                          "flavors": [{"name": "default-flavor",
                                       "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}]}}


def local_queue(name, cq):
    return {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"clusterQueue": cq}}


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("stack_reclaim"))
    s.up(MOCK, *FLAGS)
    apply(s,
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
          cluster_queue("team-a-cq"), cluster_queue("team-b-cq"),
          local_queue("team-a", "team-a-cq"), local_queue("team-b", "team-b-cq"))
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def queued_pod(name, cmd, gpus, queue, restart="Never"):
    p = pod_manifest(name, cmd, gpus=gpus, restart=restart, run_as_root=True)  # flag files in the test's directory
    p["metadata"]["labels"] = {QUEUE_LABEL: queue}
    return p


def node_of(doc):
    return ((doc or {}).get("spec") or {}).get("nodeName")


def uid_of(doc):
    return ((doc or {}).get("metadata") or {}).get("uid")


def condition(doc, ctype):
    return {c["type"]: c for c in ((doc or {}).get("status") or {}).get("conditions", [])}.get(ctype)


def cq_status(stack, name):
    r = stack.cli("get", "clusterqueues", name, "-o", "json")
    return json.loads(r.stdout).get("status") or {}


def wait_until(stack, flag):
    return f"while [ ! -e {stack.dir / flag} ]; do sleep 0.2; done"


def test_reclaim_evicts_borrower_holds_capacity_and_does_not_ping_pong(stack):
    # team-b: one job within its nominal quota, then one borrowing team-a's 4 GPUs.
    apply(stack, queued_pod("tb-1", wait_until(stack, "b-done"), 4, "team-b"))
    wait_for(lambda: node_of(stack.pod("tb-1")), 30, "tb-1 to bind")
    apply(stack, queued_pod("tb-2", wait_until(stack, "b-done"), 4, "team-b", restart="OnFailure"))
    wait_for(lambda: phase(stack.pod("tb-2")) == "Running", 30, "tb-2 (borrowing) to run")
    tb1_uid, tb2_uid = uid_of(stack.pod("tb-1")), uid_of(stack.pod("tb-2"))

    def borrowing():
        a = cq_status(stack, "team-b-cq").get("admission") or {}
        return a if (a.get("usage") or {}).get("nvidia.com/gpu") == "8" else None
    adm = wait_for(borrowing, 30, "team-b-cq to show 8 GPUs in use")
    assert adm["borrowed"]["nvidia.com/gpu"] == "4", adm

    # An unqueued pod that waits for GPUs before team-a asks: without the
    # hold it would be first in line for the GPUs reclaim frees.
    apply(stack, pod_manifest("rival", "sleep 1", gpus=4))

    def rival_unschedulable():
        c = condition(stack.pod("rival"), "PodScheduled")
        return c if c and c["status"] == "False" else None
    wait_for(rival_unschedulable, 30, "the rival pod to be Unschedulable on the full node")

    apply(stack, queued_pod("ta-1", wait_until(stack, "a-done"), 4, "team-a"))
    ta1 = wait_for(lambda: (lambda p: p if node_of(p) else None)(stack.pod("ta-1")), 30,
                   "team-a's job to be admitted by reclaim and bound")
    assert condition(ta1, "QuotaReserved")["status"] == "True"

    # The borrowing job was evicted: re-created unbound under a new uid.
    tb2 = stack.pod("tb-2")
    assert uid_of(tb2) != tb2_uid, tb2
    ann = tb2["metadata"].get("annotations") or {}
    assert ann.get("gpusched.io/recreated-from") == tb2_uid, ann
    assert "ta-1" in ann.get("gpusched.io/recreated-reason", ""), ann
    # The job within team-b's own quota was not touched.
    tb1 = stack.pod("tb-1")
    assert uid_of(tb1) == tb1_uid and phase(tb1) == "Running", tb1
    # The hold kept the rival off the freed GPUs; now the node is full again.
    rival = stack.pod("rival")
    assert not node_of(rival), rival

    # While team-a's demand stands the evicted job is not readmitted (here
    # the cohort's quota is spent too), and team-a's job is not evicted in turn.
    def waiting():
        c = condition(stack.pod("tb-2"), "QuotaReserved")
        return c if c and c["status"] == "False" else None
    cond = wait_for(waiting, 30, "the evicted job to wait for admission again")
    assert "team-b-cq" in cond["message"], cond
    end = time.time() + 4
    while time.time() < end:
        now_tb2, now_ta1 = stack.pod("tb-2"), stack.pod("ta-1")
        assert not node_of(now_tb2), now_tb2
        assert uid_of(now_ta1) == uid_of(ta1) and node_of(now_ta1), now_ta1
        time.sleep(0.5)

    # The queues' status: one eviction suffered by team-b, caused by team-a.
    def counted():
        a = cq_status(stack, "team-a-cq").get("admission") or {}
        b = cq_status(stack, "team-b-cq").get("admission") or {}
        return (a, b) if a.get("evictionsCaused") == 1 and b.get("preemptions") == 1 else None
    a, b = wait_for(counted, 30, "evictionsCaused=1 on team-a-cq and preemptions=1 on team-b-cq")
    assert a.get("preemptions") == 0 and b.get("evictionsCaused") == 0, (a, b)
    assert b["usage"]["nvidia.com/gpu"] == "4" and a["usage"]["nvidia.com/gpu"] == "4", (a, b)
    assert b["pending"][0]["workload"] == "default/tb-2", b

    # team-a's job ends: its demand drops and the evicted job runs again
    # (after the rival, if the rival gets there first).
    (stack.dir / "a-done").touch()
    wait_for(lambda: phase(stack.pod("ta-1")) == "Succeeded", 30, "team-a's job to finish")
    wait_for(lambda: phase(stack.pod("tb-2")) == "Running", 40, "the evicted job to be readmitted and run")
    assert condition(stack.pod("tb-2"), "QuotaReserved")["status"] == "True"
    (stack.dir / "b-done").touch()
    for name in ("tb-1", "tb-2", "rival"):
        wait_for(lambda: phase(stack.pod(name)) == "Succeeded", 40, f"{name} to finish")
    b = cq_status(stack, "team-b-cq").get("admission") or {}
    assert b.get("preemptions") == 1, b  # evicted once, never again


@pytest.fixture(scope="module")
def lender_stack(gpusched_bin, tmp_path_factory):
    """team-a and team-b as above plus team-c, an idle queue whose 4 GPUs of
    quota others may borrow: the cohort has 12 GPUs of quota on 8 GPUs."""
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("stack_reclaim_lender"))
    s.up(MOCK, *FLAGS, "--reclaim-from", "nominal", "--admission-hold", "20s")
    apply(s,
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
          cluster_queue("team-a-cq"), cluster_queue("team-b-cq"), cluster_queue("team-c-cq"),
          local_queue("team-a", "team-a-cq"), local_queue("team-b", "team-b-cq"))
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def test_evicted_job_does_not_borrow_again_while_claimant_runs(lender_stack):
    stack = lender_stack
    # The node: 2 GPUs to an unqueued pod, 4 to team-b within its quota,
    # 2 to team-b borrowing.
    apply(stack, pod_manifest("filler", wait_until(stack, "filler-done"), gpus=2, run_as_root=True))
    wait_for(lambda: node_of(stack.pod("filler")), 30, "the filler pod to bind")
    apply(stack, queued_pod("lb-1", wait_until(stack, "lb-done"), 4, "team-b"))
    wait_for(lambda: node_of(stack.pod("lb-1")), 30, "lb-1 to bind")
    apply(stack, queued_pod("lb-2", wait_until(stack, "lb-done"), 2, "team-b", restart="OnFailure"))
    wait_for(lambda: node_of(stack.pod("lb-2")), 30, "lb-2 (borrowing) to bind")
    lb2_uid = uid_of(stack.pod("lb-2"))

    # team-a's quota fits (team-c lends), the node does not: reclaim.
    apply(stack, queued_pod("la-1", wait_until(stack, "la-done"), 2, "team-a"))
    wait_for(lambda: node_of(stack.pod("la-1")), 30, "team-a's job to be admitted by reclaim and bound")
    wait_for(lambda: uid_of(stack.pod("lb-2")) not in (None, lb2_uid), 30, "lb-2 to be re-created")

    # Two GPUs come free while team-a's job runs. lb-2 fits them and team-c's
    # quota, but it would borrow again: the no-ping-pong rule keeps it out.
    (stack.dir / "filler-done").touch()
    wait_for(lambda: phase(stack.pod("filler")) == "Succeeded", 30, "the filler pod to finish")

    def blocked():
        c = condition(stack.pod("lb-2"), "QuotaReserved")
        return c if c and c["status"] == "False" and c["message"].startswith("evicted by reclaim") else None
    cond = wait_for(blocked, 30, "the evicted job to wait with the no-ping-pong reason")
    assert cond["message"] == "evicted by reclaim: not borrowing again until team-a-cq's demand drops", cond
    # Several admission cycles (one a second at least) with room for it.
    end = time.time() + 5
    while time.time() < end:
        lb2 = stack.pod("lb-2")
        assert not node_of(lb2), lb2
        assert condition(lb2, "QuotaReserved")["message"] == cond["message"], lb2
        time.sleep(0.5)

    # team-a's demand drops: lb-2 is admitted to borrow again and runs.
    (stack.dir / "la-done").touch()
    wait_for(lambda: phase(stack.pod("la-1")) == "Succeeded", 30, "team-a's job to finish")
    wait_for(lambda: node_of(stack.pod("lb-2")), 30, "lb-2 to be readmitted once team-a's demand dropped")
    assert condition(stack.pod("lb-2"), "QuotaReserved")["status"] == "True"
    (stack.dir / "lb-done").touch()
    for name in ("lb-1", "lb-2"):
        wait_for(lambda: phase(stack.pod(name)) == "Succeeded", 40, f"{name} to finish")


@pytest.mark.parametrize("cmd", ["up", "server"])
def test_bad_admission_flags_are_refused(run, tmp_path, cmd):
    cases = [
        (["--reclaim-wait", "soon"], '--reclaim-wait "soon": want a duration like 30s, 10m or 1h'),
        (["--reclaim-min-runtime", "-5s"], '--reclaim-min-runtime "-5s": must not be negative'),
        (["--admission-hold", "0"], '--admission-hold "0": must be more than 0'),
        (["--max-preemptions", "0"], '--max-preemptions "0": must be at least 1, or unlimited'),
        (["--max-preemptions", "2x"], '--max-preemptions "2x": want a whole number'),
        (["--preemption-window", "1d"], '--preemption-window "1d": want a duration'),
        (["--starvation-wait", "sometime"], '--starvation-wait "sometime": want a duration'),
        (["--evict-charge", "-1"], '--evict-charge "-1": must not be negative'),
        (["--reclaim-from", "anyone"], '--reclaim-from "anyone": want fairshare or nominal'),
        (["--victims", "some"], '--victims "some": want nodewise or global'),
        (["--dra-device-class-mapping", "gpu.nvidia.com"],
         '--dra-device-class-mapping "gpu.nvidia.com": want RESOURCE=CLASS[,CLASS...]'),
        (["--dra-device-class-mapping", "example.com/gpus=a,,b"],
         '--dra-device-class-mapping "example.com/gpus=a,,b": want RESOURCE=CLASS[,CLASS...]'),
        (["--dra-device-class-mapping", "example.com/gpus=a,b", "--dra-device-class-mapping", "example.com/x=b"],
         '--dra-device-class-mapping "example.com/x=b": DeviceClass "b" is mapped twice'),
        ([a for i in range(9) for a in ("--dra-device-class-mapping", f"r{i}=c{i}")],
         '--dra-device-class-mapping "r8=c8": at most 8 mappings'),
    ]
    for args, msg in cases:
        r = run(cmd, "--data-dir", str(tmp_path / "data"), "--listen", "127.0.0.1:0", *args, cwd=tmp_path)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert f"gpusched {cmd}: {msg}" in r.stderr, (args, r.stderr)
        assert not (tmp_path / "data").exists(), "a refused flag must not start anything"


def test_admission_flags_are_listed_in_help(run):
    for cmd in ("up", "server"):
        r = run(cmd, "--help")
        assert r.returncode == 0, r.stderr
        for flag in ("--reclaim-wait DUR", "--reclaim-min-runtime DUR", "--admission-hold DUR",
                     "--starvation-wait DUR|never", "--max-preemptions N|unlimited", "--preemption-window DUR",
                     "--admission-halflife DUR", "--admission-quota-only",
                     "--dra-device-class-mapping RESOURCE=CLASS[,CLASS...]"):
            assert flag in r.stdout, (cmd, flag, r.stdout)
