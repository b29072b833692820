"""PodGroups as admission workloads under `gpusched up` (2 nodes x 8 GPUs):
a 4-pod group of 2 GPUs each in a ClusterQueue with nominal 8 GPUs is
admitted as one (QuotaReserved on every pod, Admitted on the PodGroup) and
runs; a second such group waits whole (explain: position 1, the quota reason
and an estimated start, since the first group's pods state their run time)
and runs after the first finishes; a group of 3 pods with minMember 4 is
never admitted until its 4th pod arrives."""
import json

import pytest

from stack import Stack, apply, phase, pod_manifest, wait_for

MOCK = "2x8xH100-80GB"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("stack_pg_admission"))
    s.up(MOCK)
    apply(s,
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "gangs-cq"},
           "spec": {"namespaceSelector": {}, "resourceGroups": [
               {"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "default-flavor",
                             "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 8}]}]}]}},
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
           "metadata": {"name": "gangs", "namespace": "default"}, "spec": {"clusterQueue": "gangs-cq"}})
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def group(name, min_member):
    return {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"minMember": min_member}}


def member(group_name, i, cmd, seconds=None):
    p = pod_manifest(f"{group_name}-{i}", cmd, gpus=2, run_as_root=True)  # flag files in the test's directory
    p["metadata"]["labels"] = {QUEUE_LABEL: "gangs", GROUP_LABEL: group_name}
    if seconds:
        p["spec"]["activeDeadlineSeconds"] = seconds
    return p


def node_of(stack, name):
    return ((stack.pod(name) or {}).get("spec") or {}).get("nodeName")


def conditions(doc):
    return {c["type"]: c for c in ((doc or {}).get("status") or {}).get("conditions", [])}


def podgroup(stack, name):
    r = stack.cli("get", "podgroup", name, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def quota(stack, name):
    return conditions(stack.pod(name)).get("QuotaReserved")


def test_groups_admitted_whole_in_turn(stack):
    # The first group's pods state their run time, so the second's start can be estimated;
    # they run until the test lets them finish.
    flag = stack.dir / "ga-may-finish"
    hold = f"while [ ! -e {flag} ]; do sleep 0.2; done"
    apply(stack, group("ga", 4), *[member("ga", i, hold, seconds=600) for i in range(4)])
    for i in range(4):
        wait_for(lambda: node_of(stack, f"ga-{i}"), 30, f"ga-{i} to be admitted and bound")
        assert quota(stack, f"ga-{i}")["status"] == "True"
    adm = wait_for(lambda: conditions(podgroup(stack, "ga")).get("Admitted"), 20, "Admitted on PodGroup ga")
    assert adm["status"] == "True" and "4 pods" in adm["message"], adm

    apply(stack, group("gb", 4), *[member("gb", i, "sleep 1") for i in range(4)])

    def waiting():
        c = quota(stack, "gb-3")
        return c if c and c["status"] == "False" else None
    c = wait_for(waiting, 20, "QuotaReserved=False on the second group")
    assert c["reason"] == "Pending", c
    assert "nvidia.com/gpu 8 > 0 available" in c["message"], c
    ex = stack.cli("explain", "gb-0")
    assert "waiting for admission" in ex.stdout, ex.stdout
    assert "position in line: 1" in ex.stdout, ex.stdout
    assert "PodGroup: default/gb, 4 pods (minMember 4)" in ex.stdout, ex.stdout
    assert "estimated start: in " in ex.stdout, ex.stdout
    # 16 GPUs are free of pods: only the quota keeps the whole group off, no member runs alone.
    assert not any(node_of(stack, f"gb-{i}") for i in range(4))
    g = conditions(podgroup(stack, "gb")).get("Admitted")
    assert g and g["status"] == "False", g

    flag.touch()
    for i in range(4):
        wait_for(lambda: phase(stack.pod(f"ga-{i}")) == "Succeeded", 40, f"ga-{i} to finish")
    for i in range(4):
        wait_for(lambda: node_of(stack, f"gb-{i}"), 30, f"gb-{i} to be admitted after ga finished")
    for i in range(4):
        wait_for(lambda: phase(stack.pod(f"gb-{i}")) == "Succeeded", 40, f"gb-{i} to finish")


def test_group_short_of_min_member_waits_for_its_last_pod(stack):
    apply(stack, group("gc", 4), *[member("gc", i, "sleep 1") for i in range(3)])

    def waiting():
        c = quota(stack, "gc-0")
        return c if c and c["status"] == "False" else None
    c = wait_for(waiting, 20, "QuotaReserved=False on a group short of minMember")
    assert c["reason"] == "WaitingForPods", c
    assert c["message"] == "PodGroup default/gc has 3 of minMember 4 pods", c
    ex = stack.cli("explain", "gc-1")
    assert "WaitingForPods" in ex.stdout, ex.stdout
    # Quota (8) and GPUs (16) are free: still nothing runs until the 4th pod exists.
    wait_for(lambda: quota(stack, "gc-2") and quota(stack, "gc-2")["status"] == "False", 20, "gc-2 waiting")
    assert not any(node_of(stack, f"gc-{i}") for i in range(3))
    apply(stack, member("gc", 3, "sleep 1"))
    for i in range(4):
        wait_for(lambda: node_of(stack, f"gc-{i}"), 30, f"gc-{i} to be admitted once the group is complete")
    for i in range(4):
        wait_for(lambda: phase(stack.pod(f"gc-{i}")) == "Succeeded", 40, f"gc-{i} to finish")
