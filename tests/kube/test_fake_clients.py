"""Our own client (the gpusched CLI's libcurl client, src/control/client.c) against the strict
fake kube-apiserver: the two were written apart, so each checks the other's reading of the
Kubernetes API (kubeconfig with CA data and token, discovery-free REST paths for built-in and
custom kinds, create / get / merge patch / delete, lists).

The binary is $GPUSCHED_BIN, else build/gpusched; a missing binary fails the test.
"""
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

MANIFEST = """apiVersion: scheduling.x-k8s.io/v1alpha1
kind: PodGroup
metadata: {name: g1}
spec: {minMember: 2}
---
apiVersion: v1
kind: Pod
metadata:
  name: w0
  labels: {scheduling.x-k8s.io/pod-group: g1}
spec:
  schedulerName: gpusched
  containers: [{name: c, image: busybox, resources: {limits: {nvidia.com/gpu: 1}}}]
---
apiVersion: v1
kind: Node
metadata: {name: n1}
status:
  allocatable: {nvidia.com/gpu: "8", cpu: "64"}
"""


@pytest.fixture
def gpusched(fake):
    path = pathlib.Path(os.environ.get("GPUSCHED_BIN", ROOT / "build" / "gpusched"))
    if not path.is_absolute():
        path = ROOT / path
    if not path.exists():
        pytest.fail(f"gpusched binary not found at {path}; build first or set GPUSCHED_BIN")

    def run(*args):
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        return subprocess.run([str(path), *args, "--kubeconfig", fake.kubeconfig],
                              capture_output=True, text=True, timeout=60, env=env)
    return run


def test_gpusched_cli_applies_gets_patches_and_deletes_through_the_fake(fake, gpusched):
    manifest = os.path.join(fake.dir, "m.yaml")
    with open(manifest, "w") as f:
        f.write(MANIFEST)
    r = gpusched("apply", "-f", manifest)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split("\n")[:3] == ["podgroup/g1 created", "pod/w0 created", "node/n1 created"]
    state = fake.state("pods,nodes,podgroups")["objects"]
    pod = state["pods.core"][0]
    assert pod["status"] == {"phase": "Pending"} and pod["spec"]["schedulerName"] == "gpusched"
    assert state["nodes.core"][0]["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert state["podgroups.scheduling.x-k8s.io"][0]["spec"] == {"minMember": 2}
    r = gpusched("get", "podgroups", "-o", "json")
    assert r.returncode == 0, r.stderr
    assert [i["metadata"]["name"] for i in json.loads(r.stdout)["items"]] == ["g1"]
    # A second apply changes nothing: the fake answers the patch without a new version.
    rv = fake.state("pods")["objects"]["pods.core"][0]["metadata"]["resourceVersion"]
    r = gpusched("apply", "-f", manifest)
    assert r.returncode == 0 and "pod/w0 unchanged" in r.stdout, r.stdout + r.stderr
    assert fake.state("pods")["objects"]["pods.core"][0]["metadata"]["resourceVersion"] == rv
    r = gpusched("delete", "-f", manifest)
    assert r.returncode == 0, r.stderr
    left = fake.state("pods,nodes,podgroups")["objects"]
    assert all(v == [] for v in left.values()), left
    verbs = {(e["verb"], e["resource"], e["code"]) for e in fake.requests()}
    assert {("create", "podgroups", 201), ("patch", "pods", 200), ("delete", "nodes", 200),
            ("list", "podgroups", 200)} <= verbs
    assert not [e for e in fake.requests() if e["code"] >= 500]
