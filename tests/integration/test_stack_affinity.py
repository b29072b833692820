"""Pod (anti-)affinity and PodDisruptionBudget-aware preemption through the
server's scheduler under `gpusched up`: required anti-affinity spreads pods
over hosts and says why the extra one waits, the waiting pod binds once the
pod in its way is gone, required affinity follows its target, and a
preemptor evicts the pod no budget protects."""
import json

import pytest

from stack import Stack, apply, delete, phase, pod_manifest, wait_for

MOCK = "2x8xH100-80GB"
HOST = "kubernetes.io/hostname"


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("stack_affinity"))
    s.up(MOCK)
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def node_of(stack, name):
    return ((stack.pod(name) or {}).get("spec") or {}).get("nodeName")


def labelled(name, labels, cmd="sleep 60", gpus=0, affinity=None):
    p = pod_manifest(name, cmd, gpus=gpus)
    p["metadata"]["labels"] = labels
    if affinity:
        p["spec"]["affinity"] = affinity
    return p


def term(labels, key=HOST):
    return {"labelSelector": {"matchLabels": labels}, "topologyKey": key}


def condition(stack, name):
    conds = {c["type"]: c for c in ((stack.pod(name) or {}).get("status") or {}).get("conditions", [])}
    c = conds.get("PodScheduled")
    return c if c and c["status"] == "False" else None


def test_anti_affinity_spreads_and_waits(stack):
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "spread"})]}}
    names = ["spread-0", "spread-1", "spread-2"]
    apply(stack, *[labelled(n, {"app": "spread"}, affinity=anti) for n in names[:2]])
    wait_for(lambda: all(node_of(stack, n) for n in names[:2]), 20, "two spread pods bound")
    assert node_of(stack, names[0]) != node_of(stack, names[1])
    apply(stack, labelled(names[2], {"app": "spread"}, affinity=anti))
    cond = wait_for(lambda: condition(stack, names[2]), 20, "the third spread pod to be diagnosed")
    assert "didn't match pod anti-affinity rules" in cond["message"], cond
    # The pod in its way goes: it binds where that pod was.
    freed = node_of(stack, names[0])
    delete(stack, names[0])
    wait_for(lambda: node_of(stack, names[2]), 30, "the third spread pod to bind")
    assert node_of(stack, names[2]) == freed
    delete(stack, *names[1:])


def test_affinity_follows_its_target(stack):
    apply(stack, labelled("db", {"app": "db"}))
    wait_for(lambda: node_of(stack, "db"), 20, "db bound")
    aff = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "db"})]}}
    apply(stack, *[labelled(f"near-{i}", {"app": "near"}, affinity=aff) for i in range(3)])
    wait_for(lambda: all(node_of(stack, f"near-{i}") for i in range(3)), 20, "the near pods to bind")
    assert {node_of(stack, f"near-{i}") for i in range(3)} == {node_of(stack, "db")}
    # A pod whose target does not exist waits, unresolvably.
    lost = labelled("lost", {"app": "lost"},
                    affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term({"app": "none"})]}})
    apply(stack, lost)
    cond = wait_for(lambda: condition(stack, "lost"), 20, "lost to be diagnosed")
    assert "didn't match pod affinity rules" in cond["message"], cond
    delete(stack, "db", "lost", *[f"near-{i}" for i in range(3)])


def test_bad_affinity_is_refused_with_its_field(stack):
    bad = labelled("bad-aff", {"app": "x"}, affinity={
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{"labelSelector": {}}]}})
    r = stack.cli("apply", "-f", "-", input=json.dumps(bad), check=False)
    assert r.returncode != 0
    assert "podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey" in r.stderr, r.stderr


@pytest.mark.parametrize("round_", [0, 1])
def test_preemption_spares_the_budgeted_pod(stack, round_):
    lows = [f"low{round_}-a", f"low{round_}-b"]
    apply(stack, *[labelled(n, {"app": n}, gpus=8) for n in lows])
    wait_for(lambda: all(node_of(stack, n) for n in lows), 20, "low-priority pods bound")
    wait_for(lambda: all(phase(stack.pod(n)) == "Running" for n in lows), 20, "low-priority pods running")
    # Protect the pod on the first node in one round and on the second in the other, so
    # that one of the rounds protects the pod preemption would otherwise choose.
    by_node = sorted(lows, key=lambda n: node_of(stack, n))
    protected, other = by_node[round_], by_node[1 - round_]
    apply(stack, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                  "metadata": {"name": f"pdb{round_}", "namespace": "default"},
                  "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": protected}}}})
    apply(stack, {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                  "metadata": {"name": "high-aff"}, "value": 1000})
    high = pod_manifest(f"high{round_}", "sleep 0.5", gpus=8)
    high["spec"]["priorityClassName"] = "high-aff"
    apply(stack, high)
    wait_for(lambda: node_of(stack, f"high{round_}"), 30, "the high-priority pod to bind")
    assert phase(stack.pod(other)) == "Failed", stack.pod(other)["status"]
    assert stack.pod(other)["status"]["reason"] == "Preempted"
    assert phase(stack.pod(protected)) == "Running"
    assert node_of(stack, f"high{round_}") == node_of(stack, other)
    stack.cli("delete", "poddisruptionbudget", f"pdb{round_}", check=False)
    delete(stack, f"high{round_}", *lows)
