"""The server's scheduler with the "gpusched" profile, end to end under
`gpusched up`: gang scheduling (all or nothing), single-NUMA placement,
priority preemption written back to the store, and explain from the live
cache."""
import json
import time

import pytest

from stack import Stack, apply, delete, phase, pod_manifest, wait_for

MOCK = "2x8xH100-80GB,nvlink=islands:4,numa=2"


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("stack_sched"))
    s.up(MOCK)
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def gang(stack, group, n, gpus, cmd="sleep 1"):
    docs = [{"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
             "metadata": {"name": group, "namespace": "default"},
             "spec": {"minMember": n, "scheduleTimeoutSeconds": 60}}]
    for i in range(n):
        p = pod_manifest(f"{group}-{i}", cmd, gpus=gpus, annotations={"gpusched.io/gpu-interconnect": "nvlink"})
        p["metadata"]["labels"] = {"scheduling.x-k8s.io/pod-group": group}
        docs.append(p)
    apply(stack, *docs)
    return [f"{group}-{i}" for i in range(n)]


def node_of(stack, name):
    return ((stack.pod(name) or {}).get("spec") or {}).get("nodeName")


def test_gang_binds_together(stack):
    names = gang(stack, "g8", 4, 2)
    wait_for(lambda: all(node_of(stack, n) for n in names), 20, "the gang to bind")
    for n in names:
        devs = stack.pod(n)["metadata"]["annotations"]["gpusched.io/devices"].split(",")
        assert len(devs) == 2
    wait_for(lambda: all(phase(stack.pod(n)) == "Succeeded" for n in names), 30, "the gang to finish")
    delete(stack, *names)


def test_gang_without_room_waits_whole_then_binds(stack):
    # 5 of 8 GPUs taken on each node: room for three 2-GPU members, not four.
    fillers = ["fill-a", "fill-b"]
    apply(stack, *[pod_manifest(f, "sleep 60", gpus=5) for f in fillers])
    wait_for(lambda: all(node_of(stack, f) for f in fillers), 20, "fillers bound")
    names = gang(stack, "g4", 4, 2)

    def diagnosed():
        p = stack.pod(names[0])
        conds = {c["type"]: c for c in (p.get("status") or {}).get("conditions", [])}
        c = conds.get("PodScheduled")
        return c if c and c["status"] == "False" else None
    cond = wait_for(diagnosed, 20, "an Unschedulable condition on a gang member")
    assert cond["reason"] == "Unschedulable" and cond["message"]
    assert not any(node_of(stack, n) for n in names)
    ex = stack.cli("explain", names[0])
    assert ex.returncode == 0, ex.stderr
    assert "g4" in ex.stdout and "node" in ex.stdout, ex.stdout
    assert not any(node_of(stack, n) for n in names)
    delete(stack, *fillers)
    wait_for(lambda: all(node_of(stack, n) for n in names), 30, "the gang to bind once room appears")
    try:
        wait_for(lambda: all(phase(stack.pod(n)) == "Succeeded" for n in names), 30, "the gang to finish")
    except AssertionError:
        raise AssertionError(f"gang did not finish: {[(n, stack.pod(n).get('status')) for n in names]}")
    delete(stack, *names)


def test_single_numa_pod_stays_on_one_numa_node(stack):
    apply(stack, pod_manifest("numa4", "sleep 0.5", gpus=4, annotations={"gpusched.io/gpu-interconnect": "numa"}))
    wait_for(lambda: node_of(stack, "numa4"), 20, "numa4 bound")
    p = stack.pod("numa4")
    chosen = p["metadata"]["annotations"]["gpusched.io/devices"].split(",")
    numa = {d["uuid"]: d["numaNode"] for d in stack.node(p["spec"]["nodeName"])["status"]["devices"]}
    assert len(chosen) == 4
    assert len({numa[u] for u in chosen}) == 1, (chosen, numa)
    wait_for(lambda: phase(stack.pod("numa4")) == "Succeeded", 20, "numa4 to finish")
    delete(stack, "numa4")


def test_low_priority_pod_is_preempted(stack):
    lows = ["low-a", "low-b"]
    apply(stack, *[pod_manifest(n, "sleep 60", gpus=8) for n in lows])
    wait_for(lambda: all(node_of(stack, n) for n in lows), 20, "low-priority pods bound")
    wait_for(lambda: all(phase(stack.pod(n)) == "Running" for n in lows), 20, "low-priority pods running")
    pc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "value": 1000}
    apply(stack, dict(pc, metadata={"name": "high-1000"}),
          dict(pc, metadata={"name": "never-1000"}, preemptionPolicy="Never"))
    # Priority comes only from the class: a number in the spec is refused, as Kubernetes' admission does.
    bad = pod_manifest("bad", "true", gpus=8)
    bad["spec"]["priority"] = 1000
    r = stack.cli("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert r.returncode != 0 and "the integer value of priority (1000) must not be provided" in r.stderr, r.stderr
    # preemptionPolicy Never: as high, yet it waits instead of evicting.
    polite = pod_manifest("polite", "sleep 0.5", gpus=8)
    polite["spec"]["priorityClassName"] = "never-1000"
    apply(stack, polite)
    assert stack.pod("polite")["spec"]["priority"] == 1000
    wait_for(lambda: "Unschedulable" in json.dumps(stack.pod("polite")["status"]), 20, "the Never pod to wait")
    time.sleep(3)  # several scheduling attempts: none may evict
    assert all(phase(stack.pod(n)) == "Running" for n in lows)
    ev = json.loads(stack.cli("get", "events", "-o", "json").stdout)["items"]
    assert not any(e["reason"] == "Preempted" for e in ev)
    delete(stack, "polite")
    high = pod_manifest("high", "sleep 0.5", gpus=8)
    high["spec"]["priorityClassName"] = "high-1000"
    apply(stack, high)
    wait_for(lambda: node_of(stack, "high"), 30, "the high-priority pod to bind")
    victims = [n for n in lows if phase(stack.pod(n)) == "Failed"]
    assert len(victims) == 1, [stack.pod(n)["status"] for n in lows]
    v = stack.pod(victims[0])
    assert v["status"]["reason"] == "Preempted" and "high" in v["status"]["message"]
    assert node_of(stack, "high") == v["spec"]["nodeName"]
    ev = json.loads(stack.cli("get", "events", "-o", "json").stdout)["items"]
    assert any(e["reason"] == "Preempted" and e["involvedObject"]["name"] == victims[0] for e in ev)
    wait_for(lambda: phase(stack.pod("high")) == "Succeeded", 30, "the high-priority pod to finish")
    delete(stack, "high", *lows)


def test_explain_bound_and_unknown(stack):
    apply(stack, pod_manifest("plain", "sleep 30", gpus=1))
    wait_for(lambda: node_of(stack, "plain"), 20, "plain bound")
    ex = stack.cli("explain", "plain")
    assert ex.returncode == 0 and "bound to" in ex.stdout, (ex.stdout, ex.stderr)
    missing = stack.cli("explain", "nope", check=False)
    assert missing.returncode != 0 and "not found" in missing.stderr
    delete(stack, "plain")
