"""The Kubernetes objects of real clusters through kubectl against `gpusched up --mock`:
discovery lists the three PodGroup resources and Kueue at v1beta1 and v1beta2; a Volcano
and a native PodGroup of the same name in one namespace are two gangs, each waiting for
its own members with its own status (Volcano's Unschedulable condition, the native
PodGroupScheduled=False with the diagnosis), then scheduled (Volcano phase Running, native
PodGroupScheduled=True) once its members are there; `kubectl describe` shows the condition;
a v1beta2 ClusterQueue written under v1beta2 is read back under v1beta1.

kubectl is required: these tests fail when /usr/bin/kubectl is missing."""
import json
import os
import subprocess

import pytest

from stack import Stack, wait_for

KUBECTL = "/usr/bin/kubectl"


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    assert os.path.exists(KUBECTL), "kubectl is required (scripts/install-deps.sh installs it)"
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("k8sobj"))
    s.up("2x2xH100-80GB")
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def kubectl(stack, *args, input=None, check=True):
    r = subprocess.run([KUBECTL, "--kubeconfig", stack.kubeconfig, *args], input=input, capture_output=True,
                       text=True, timeout=90, env=dict(os.environ, HOME=str(stack.dir)))
    if check:
        assert r.returncode == 0, (args, r.stdout, r.stderr)
    return r


def pod(name, ns, annotations=None, group=None):
    spec = {"restartPolicy": "Never",
            "containers": [{"name": "main", "image": "busybox", "command": ["sh", "-c", "sleep 600"],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}
    if group:
        spec["schedulingGroup"] = {"podGroupName": group}
    meta = {"name": name, "namespace": ns}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def apply(stack, *docs):
    kubectl(stack, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)}))


def get(stack, resource, name, ns="ml"):
    r = kubectl(stack, "get", resource, name, "-n", ns, "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def cond(doc, ctype):
    for c in ((doc or {}).get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c
    return None


def test_discovery_lists_the_new_resources(stack):
    r = kubectl(stack, "api-resources", "-o", "name")
    names = set(r.stdout.split())
    for want in ("podgroups.scheduling.x-k8s.io", "podgroups.scheduling.volcano.sh", "podgroups.scheduling.k8s.io",
                 "workloads.scheduling.k8s.io", "workloadpriorityclasses.kueue.x-k8s.io",
                 "clusterqueues.kueue.x-k8s.io", "priorityclasses.scheduling.k8s.io"):
        assert want in names, (want, r.stdout)
    versions = kubectl(stack, "api-versions").stdout.split()
    for want in ("kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2", "scheduling.k8s.io/v1",
                 "scheduling.k8s.io/v1beta1", "scheduling.volcano.sh/v1beta1"):
        assert want in versions, (want, versions)


def test_two_shapes_one_name_two_gangs(stack):
    apply(stack, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
    volcano = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
               "metadata": {"name": "train", "namespace": "ml"}, "spec": {"minMember": 2}}
    native = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
              "metadata": {"name": "train", "namespace": "ml"},
              "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}}}
    apply(stack, volcano, native,
          pod("v-0", "ml", annotations={"scheduling.k8s.io/group-name": "train"}),
          pod("k-0", "ml", group="train"))
    # one member each: both wait, each group says so in its own fields
    v = wait_for(lambda: cond(get(stack, "podgroups.scheduling.volcano.sh", "train"), "Unschedulable"), 30,
                 "Volcano Unschedulable condition")
    assert v["status"] == "True" and v["reason"] == "NotEnoughResources" and v["message"], v
    k = wait_for(lambda: cond(get(stack, "podgroups.scheduling.k8s.io", "train"), "PodGroupScheduled"), 30,
                 "native PodGroupScheduled condition")
    assert k["status"] == "False" and k["reason"] == "Unschedulable", k
    assert "scheduling.k8s.io/train" in k["message"], k
    for name in ("v-0", "k-0"):
        assert not (get(stack, "pod", name) or {}).get("spec", {}).get("nodeName"), name
    # the native gang completes; the Volcano one still waits for its own second member
    apply(stack, pod("k-1", "ml", group="train"))
    k = wait_for(lambda: (c := cond(get(stack, "podgroups.scheduling.k8s.io", "train"), "PodGroupScheduled"))
                 and c["status"] == "True" and c, 30, "native PodGroupScheduled=True")
    assert k["reason"] == "Scheduled", k
    for name in ("k-0", "k-1"):
        assert get(stack, "pod", name)["spec"].get("nodeName"), name
    assert not get(stack, "pod", "v-0")["spec"].get("nodeName")
    apply(stack, pod("v-1", "ml", annotations={"scheduling.k8s.io/group-name": "train"}))
    v = wait_for(lambda: (d := get(stack, "podgroups.scheduling.volcano.sh", "train"))
                 and (d.get("status") or {}).get("phase") == "Running" and d, 30, "Volcano phase Running")
    assert cond(v, "Scheduled")["status"] == "True", v
    assert cond(v, "Unschedulable") is None, v
    d = kubectl(stack, "describe", "podgroups.scheduling.k8s.io", "train", "-n", "ml").stdout
    assert "PodGroupScheduled" in d and "Scheduled" in d, d


def test_kueue_v1beta2_next_to_v1beta1(stack):
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "team-a"},
          "spec": {"cohortName": "lab",
                   "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"],
                                       "flavors": [{"name": "h100",
                                                    "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "2"}]}]}]}}
    rf = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "h100"}}
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "WorkloadPriorityClass", "metadata": {"name": "urgent"},
           "value": 1000}
    apply(stack, rf, cq, wpc)
    old = json.loads(kubectl(stack, "get", "clusterqueues.v1beta1.kueue.x-k8s.io", "team-a", "-o", "json").stdout)
    assert old["spec"]["cohortName"] == "lab", old
    assert json.loads(kubectl(stack, "get", "wpc", "urgent", "-o", "json").stdout)["value"] == 1000
    bad = dict(cq, metadata={"name": "team-b"}, spec=dict(cq["spec"], cohort="lab"))
    r = kubectl(stack, "apply", "-f", "-", input=json.dumps(bad), check=False)
    assert r.returncode != 0 and "it is called cohortName since v1beta2" in r.stderr, (r.stdout, r.stderr)
