"""What-if on a live cluster: `gpusched snapshot` of our server and of a
Kubernetes API server (the strict fake of tests/kube) writes manifests the
simulator loads, with the running pods on their nodes and devices and the
pending pods arriving at 0; `gpusched sim --snapshot DIR` / `--from-cluster`
says when each pending pod would start and on which node, and with a change
(more nodes, one node fewer, a quota) what that change does to each pod;
`gpusched explain POD` prints that start as its ETA.

The clusters are built so the answers are known: two nodes of 2 GPUs, one
fully used by a pod of 1 h, the other by a pod without a duration (30 min
assumed); a pending 2-GPU pod therefore starts when the second ends, and
at once on a copy of a node."""
import json
import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from stack import Stack, apply, pod_manifest, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "kube"))
from fake_fixtures import fake, api  # noqa: E402,F401  (fixtures, by name)


def node(name, gpus):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
                       "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}}}


def kpod(name, gpus, ann=None):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "default", "annotations": ann or {}},
            "spec": {"containers": [{"name": "m", "image": "x", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def docs(path):
    return [d for d in yaml.safe_load_all(open(path)) if d]


@pytest.fixture
def kube_cluster(fake, api):
    """n1 runs run-a (2 GPUs, 1 h), n2 runs run-b (2 GPUs, no duration); wait-c (2 GPUs) is pending."""
    for n in ("n1", "n2"):
        r = api.post(api.base + "/api/v1/nodes", json=node(n, 2))
        assert r.ok, r.text
    for p, ann in (("run-a", {"sim.gpusched.io/duration": "1h"}), ("run-b", None), ("wait-c", None)):
        r = api.post(api.base + "/api/v1/namespaces/default/pods", json=kpod(p, 2, ann))
        assert r.ok, r.text
    for p, n in (("run-a", "n1"), ("run-b", "n2")):
        r = api.post(api.base + f"/api/v1/namespaces/default/pods/{p}/binding",
                     json={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": p},
                           "target": {"kind": "Node", "name": n}})
        assert r.ok, r.text
    return fake


def test_snapshot_of_a_kubernetes_api_server(run, kube_cluster, tmp_path):
    out = tmp_path / "snap"
    r = run("snapshot", "-o", str(out), "--kubeconfig", kube_cluster.kubeconfig)
    assert r.returncode == 1
    assert "2 pod(s) have no duration (default/run-b, default/wait-c)" in r.stderr
    assert "--assume-duration" in r.stderr

    r = run("snapshot", "-o", str(out), "--kubeconfig", kube_cluster.kubeconfig, "--assume-duration", "30m")
    assert r.returncode == 0, r.stderr
    assert "2 running pods, 1 pending" in r.stdout
    cluster, workload = docs(out / "cluster.yaml"), docs(out / "workload.yaml")
    assert sorted(d["metadata"]["name"] for d in cluster if d["kind"] == "Node") == ["n1", "n2"]
    pods = {d["metadata"]["name"]: d for d in workload if d["kind"] == "Pod"}
    ann = {n: p["metadata"]["annotations"] for n, p in pods.items()}
    assert pods["run-a"]["spec"]["nodeName"] == "n1" and ann["run-a"]["sim.gpusched.io/duration"] == "1h"
    assert "sim.gpusched.io/running-for" in ann["run-a"] and "sim.gpusched.io/arrival" not in ann["run-a"]
    assert ann["run-b"]["sim.gpusched.io/duration"] == "30m0s"
    assert "nodeName" not in pods["wait-c"]["spec"] and ann["wait-c"]["sim.gpusched.io/arrival"] == "0"
    assert all("managedFields" not in d["metadata"] for d in cluster + workload)

    # The loader takes the snapshot as it is; the replay starts wait-c when run-b's 30 minutes end.
    r = run("sim", "--snapshot", str(out), "--json")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    (c,) = res["pods"]
    assert c["pod"] == "default/wait-c" and c["node"] == "n2"
    assert 1795 <= c["start"] <= 1800  # 30 min less the seconds run-b has run

    # One more node like n1: wait-c starts at once, on the copy.
    r = run("sim", "--snapshot", str(out), "--add-nodes", "1:n1")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("default/wait-c"))
    assert "now" in line and "n1-new-1" in line and "earlier" in line, r.stdout

    # Without n2, run-b waits again (from 0, its whole 30 minutes) behind run-a's hour on n1.
    r = run("sim", "--snapshot", str(out), "--remove-node", "n2", "--json")
    assert r.returncode == 0, r.stderr
    (c,) = json.loads(r.stdout.strip().splitlines()[-1])["pods"]
    assert c["after"]["node"] == "n1" and c["after"]["start"] > c["start"], c
    assert c["change"].endswith("later")

    # Bad changes name the flag, the value and why.
    r = run("sim", "--snapshot", str(out), "--remove-node", "n9")
    assert r.returncode == 1 and "--remove-node: no node \"n9\" in the snapshot" in r.stderr
    r = run("sim", "--snapshot", str(out), "--add-nodes", "x:n1")
    assert r.returncode == 2 and "--add-nodes \"x:n1\": N must be a whole number" in r.stderr
    r = run("sim", "--snapshot", str(out), "--set-quota", "team-cq:nvidia.com/gpu=lots")
    assert r.returncode == 2 and "--set-quota \"team-cq:nvidia.com/gpu=lots\"" in r.stderr


def test_from_cluster_and_overlay(run, kube_cluster, tmp_path):
    """--from-cluster is the same snapshot in memory; an overlay replacing run-b with a shorter pod moves wait-c."""
    kc = kube_cluster.kubeconfig
    r = run("sim", "--from-cluster", "--kubeconfig", kc)
    assert r.returncode == 1 and "--assume-duration" in r.stderr
    r = run("sim", "--from-cluster", "--kubeconfig", kc, "--assume-duration", "30m")
    assert r.returncode == 0, r.stderr
    assert "assumed to run 1800s" in r.stdout
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("default/wait-c"))
    assert "n2" in line
    short = kpod("run-b", 2, {"sim.gpusched.io/duration": "10m"})
    short["spec"]["nodeName"] = "n2"
    overlay = tmp_path / "overlay.yaml"
    overlay.write_text(yaml.safe_dump(short))
    r = run("sim", "--from-cluster", "--kubeconfig", kc, "--assume-duration", "30m", "--overlay", str(overlay), "--json")
    assert r.returncode == 0, r.stderr
    (c,) = json.loads(r.stdout.strip().splitlines()[-1])["pods"]
    assert c["after"]["start"] == 600 and c["after"]["node"] == "n2" and c["change"].endswith("earlier"), c


def test_snapshot_of_our_server_and_explain_eta(gpusched_bin, run, tmp_path):
    stack = Stack(gpusched_bin, tmp_path / "stack")
    stack.dir.mkdir()
    stack.up("2x2xH100-80GB")
    try:
        apply(stack, pod_manifest("run-a", "sleep 300", gpus=2, annotations={"sim.gpusched.io/duration": "1h"}),
              pod_manifest("run-b", "sleep 300", gpus=2))
        wait_for(lambda: all((stack.pod(n) or {}).get("status", {}).get("phase") == "Running"
                             for n in ("run-a", "run-b")), 30, "both pods running")
        apply(stack, pod_manifest("wait-c", "sleep 1", gpus=2))
        wait_for(lambda: stack.pod("wait-c"), 10, "wait-c stored")
        out = tmp_path / "snap"
        r = run("snapshot", "-o", str(out), "--kubeconfig", stack.kubeconfig, "--assume-duration", "20m")
        assert r.returncode == 0, r.stderr
        pods = {d["metadata"]["name"]: d for d in docs(out / "workload.yaml") if d["kind"] == "Pod"}
        for n in ("run-a", "run-b"):  # bound, on the devices the server chose
            assert pods[n]["spec"]["nodeName"] and pods[n]["metadata"]["annotations"]["gpusched.io/devices"]
        nodes = [d for d in docs(out / "cluster.yaml") if d["kind"] == "Node"]
        assert len(nodes) == 2 and all(len(n["status"]["devices"]) == 2 for n in nodes)
        r = run("sim", "--snapshot", str(out), "--json")
        assert r.returncode == 0, r.stderr
        (c,) = json.loads(r.stdout.strip().splitlines()[-1])["pods"]
        assert c["node"] == pods["run-b"]["spec"]["nodeName"] and 1100 <= c["start"] <= 1200, c

        r = stack.cli("explain", "wait-c", "--assume-duration", "20m", check=False)
        assert r.returncode == 0, r.stderr
        eta = next(ln for ln in r.stdout.splitlines() if ln.startswith("ETA:"))
        assert "starts in" in eta and pods["run-b"]["spec"]["nodeName"] in eta and "1200s" in eta, eta
        r = stack.cli("explain", "wait-c", check=False)
        eta = next(ln for ln in r.stdout.splitlines() if ln.startswith("ETA:"))
        assert "ETA: none" in eta and "--assume-duration" in eta, eta
        r = stack.cli("explain", "run-a", "--assume-duration", "20m", check=False)
        assert "ETA: none: the pod is already bound to a node" in r.stdout or "ETA" not in r.stdout
    finally:
        rc = stack.stop("up")
    assert rc == 0, stack.log("up")


def test_quota_change_on_a_kueue_cluster(run, fake, api, tmp_path):
    """A LocalQueue's ClusterQueue has 2 GPUs, held by a running pod for 1 h: the queued pod waits for the
    quota although n2 is free; --set-quota to 4 GPUs starts it at once, on n2."""
    for n in ("n1", "n2"):
        assert api.post(api.base + "/api/v1/nodes", json=node(n, 2)).ok
    kueue = api.base + "/apis/kueue.x-k8s.io/v1beta2"
    r = api.post(kueue + "/resourceflavors", json={"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor",
                                                   "metadata": {"name": "f"}})
    assert r.ok, r.text
    cq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ClusterQueue", "metadata": {"name": "team-cq"},
          "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
              {"name": "f", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 2}]}]}]}}
    assert api.post(kueue + "/clusterqueues", json=cq).ok
    lq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
          "metadata": {"name": "team", "namespace": "default"}, "spec": {"clusterQueue": "team-cq"}}
    assert api.post(kueue + "/namespaces/default/localqueues", json=lq).ok
    for p in ("held", "queued"):
        doc = kpod(p, 2, {"sim.gpusched.io/duration": "1h"})
        doc["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team"}
        assert api.post(api.base + "/api/v1/namespaces/default/pods", json=doc).ok
    assert api.post(api.base + "/api/v1/namespaces/default/pods/held/binding",
                    json={"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "held"},
                          "target": {"kind": "Node", "name": "n1"}}).ok
    out = tmp_path / "snap"
    r = run("snapshot", "-o", str(out), "--kubeconfig", fake.kubeconfig)
    assert r.returncode == 0, r.stderr
    kinds = {d["kind"] for d in docs(out / "cluster.yaml") + docs(out / "workload.yaml")}
    assert {"ClusterQueue", "LocalQueue", "ResourceFlavor"} <= kinds
    r = run("sim", "--snapshot", str(out), "--set-quota", "team-cq:nvidia.com/gpu=4", "--json")
    assert r.returncode == 0, r.stderr
    (c,) = json.loads(r.stdout.strip().splitlines()[-1])["pods"]
    assert 3590 <= c["start"] <= 3600, c  # before: when held gives its quota back
    assert c["after"] == {"start": 0.0, "node": "n2"} and c["change"].endswith("earlier"), c
