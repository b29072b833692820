"""Multi-tenant admission in the server, end to end under `gpusched up`:
pods labelled kueue.x-k8s.io/queue-name wait for quota in their
ClusterQueue (condition QuotaReserved=False with the reason) before they are
scheduled, run once admitted, and give the quota back when they finish; a
pod naming an unknown LocalQueue waits with a clear reason; unlabelled pods
are unaffected."""
import json

import pytest

from stack import Stack, apply, phase, pod_manifest, wait_for

MOCK = "1x8xH100-80GB"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("stack_admission"))
    s.up(MOCK)
    apply(s,
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "team-a-cq"},
           "spec": {"namespaceSelector": {}, "resourceGroups": [
               {"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "default-flavor",
                             "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 4}]}]}]}},
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
           "metadata": {"name": "team-a", "namespace": "default"}, "spec": {"clusterQueue": "team-a-cq"}})
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def queued_pod(name, cmd, gpus, queue):
    p = pod_manifest(name, cmd, gpus=gpus, run_as_root=True)  # waits on a flag file in the test's own directory
    p["metadata"]["labels"] = {QUEUE_LABEL: queue}
    return p


def node_of(stack, name):
    return ((stack.pod(name) or {}).get("spec") or {}).get("nodeName")


def condition(stack, name, ctype):
    p = stack.pod(name) or {}
    return {c["type"]: c for c in (p.get("status") or {}).get("conditions", [])}.get(ctype)


def test_second_job_waits_for_quota_then_runs(stack):
    flag = stack.dir / "qa-1-may-finish"  # qa-1 runs until the checks below are done
    apply(stack, queued_pod("qa-1", f"while [ ! -e {flag} ]; do sleep 0.2; done", 4, "team-a"))
    wait_for(lambda: node_of(stack, "qa-1"), 20, "the first job to bind")
    assert condition(stack, "qa-1", "QuotaReserved")["status"] == "True"
    apply(stack, queued_pod("qa-2", "sleep 1", 4, "team-a"))

    def waiting():
        c = condition(stack, "qa-2", "QuotaReserved")
        return c if c and c["status"] == "False" else None
    cond = wait_for(waiting, 20, "QuotaReserved=False on the second job")
    assert cond["reason"] == "Pending"
    assert cond["message"] == ("waiting for quota in ClusterQueue team-a-cq: nvidia.com/gpu 4 > 0 available"
                               " (flavor default-flavor)"), cond
    desc = stack.cli("describe", "pod", "qa-2")
    assert "QuotaReserved" in desc.stdout and "nvidia.com/gpu 4 > 0 available" in desc.stdout, desc.stdout
    # The node has 8 GPUs: only the quota keeps it off.
    assert not node_of(stack, "qa-2")
    ex = stack.cli("explain", "qa-2")
    assert ex.returncode == 0, ex.stderr
    assert "waiting for admission" in ex.stdout and "position in line: 1" in ex.stdout, ex.stdout
    flag.touch()
    wait_for(lambda: phase(stack.pod("qa-1")) == "Succeeded", 30, "the first job to finish")
    wait_for(lambda: node_of(stack, "qa-2"), 20, "the second job to be admitted and bound")
    assert condition(stack, "qa-2", "QuotaReserved")["status"] == "True"
    wait_for(lambda: phase(stack.pod("qa-2")) == "Succeeded", 30, "the second job to finish")


def test_unknown_local_queue_waits_with_reason(stack):
    apply(stack, queued_pod("qx", "sleep 1", 1, "no-such-queue"))

    def waiting():
        c = condition(stack, "qx", "QuotaReserved")
        return c if c and c["status"] == "False" else None
    cond = wait_for(waiting, 20, "QuotaReserved=False on the pod in an unknown queue")
    assert cond["reason"] == "UnknownQueue" and "no-such-queue" in cond["message"], cond
    assert not node_of(stack, "qx")
    stack.cli("delete", "pod", "qx", check=False)


def test_unlabelled_pod_unaffected(stack):
    apply(stack, pod_manifest("plain", "sleep 1", gpus=6))
    wait_for(lambda: node_of(stack, "plain"), 20, "the unlabelled pod to bind")
    assert condition(stack, "plain", "QuotaReserved") is None
    wait_for(lambda: phase(stack.pod("plain")) == "Succeeded", 30, "the unlabelled pod to finish")


def cq_status(stack):
    r = stack.cli("get", "clusterqueues", "team-a-cq", "-o", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout).get("status") or {}


def test_queue_status_published_on_cluster_queue(stack):
    """The ClusterQueue carries Kueue's counters and admission's numbers,
    kept current as workloads come and go, and `get clusterqueues` shows them."""
    flag = stack.dir / "qs-1-may-finish"
    apply(stack, queued_pod("qs-1", f"while [ ! -e {flag} ]; do sleep 0.2; done", 4, "team-a"),
          queued_pod("qs-2", "sleep 1", 2, "team-a"))

    def one_and_one():
        s = cq_status(stack)
        return s if s.get("admittedWorkloads") == 1 and s.get("pendingWorkloads") == 1 else None
    st = wait_for(one_and_one, 30, "status 1 admitted / 1 pending on the ClusterQueue")
    assert st["reservingWorkloads"] == 1
    assert {c["type"]: c["status"] for c in st["conditions"]} == {"Active": "True"}
    adm = st["admission"]
    assert adm["nominal"]["nvidia.com/gpu"] == "4" and adm["usage"]["nvidia.com/gpu"] == "4", adm
    assert adm["pending"][0]["workload"] == "default/qs-2" and adm["pending"][0]["position"] == 1, adm
    table = stack.cli("get", "clusterqueues", "-o", "wide")
    assert table.returncode == 0, table.stderr
    header, row = table.stdout.splitlines()[0], table.stdout.splitlines()[1]
    assert "PENDING-WORKLOADS" in header and "GPUS-USED" in header, table.stdout
    cells = row.split()
    assert cells[0] == "team-a-cq" and "1" in cells and "4" in cells, table.stdout
    flag.touch()

    def drained():
        s = cq_status(stack)
        return s if s.get("admittedWorkloads") == 0 and s.get("pendingWorkloads") == 0 else None
    st = wait_for(drained, 40, "the ClusterQueue status to drain once both jobs finished")
    assert st["admission"]["usage"]["nvidia.com/gpu"] == "0"
