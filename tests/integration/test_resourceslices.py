"""DRA ResourceSlices end to end.

`gpusched up --mock` agents publish one slice per node with NVIDIA's device
names and attributes; a GPU that turns unhealthy gets a taint and the pool a
new generation; a restarted agent with the same GPUs writes nothing new.
kubectl v1.32 (which knows only resource.k8s.io/v1beta1 by name) gets and
applies the DRA kinds from our discovery documents, and sees the ResourceSlice
columns kube prints. The default DeviceClasses are there.
"""
import json
import pathlib
import shutil
import subprocess
import tempfile
import time

import pytest

from stack import Stack, require_tool, wait_for

KUBECTL = "/usr/bin/kubectl"


@pytest.fixture
def stack(request):
    import os
    d = pathlib.Path(tempfile.mkdtemp(prefix="gsslices", dir="/tmp"))
    s = Stack(os.environ["GPUSCHED_BIN"], d)
    yield s
    rc = s.stop("up") if "up" in s.procs else 0
    log = s.log("up") if (d / "up.log").exists() else ""
    s.stop_all()
    shutil.rmtree(d, ignore_errors=True)
    assert rc == 0, log


def slices(stack, node=None):
    r = stack.cli("get", "resourceslices", "-o", "json", check=False)
    if r.returncode != 0:
        return None
    items = json.loads(r.stdout).get("items", [])
    return [s for s in items if node is None or s["spec"].get("nodeName") == node]


def devices(sl):
    return {d["name"]: d for s in sl for d in s["spec"].get("devices", [])}


def test_agents_publish_slices_and_taint_unhealthy_gpus(stack):
    stack.up("2x4xH100-80GB,nvlink=pairs,xid=79@gpu2@t=3s")
    got = wait_for(lambda: (s := slices(stack)) and len({x["spec"]["nodeName"] for x in s}) == 2 and s, 20,
                   "slices of both nodes")
    node = got[0]["spec"]["nodeName"]
    mine = [s for s in got if s["spec"]["nodeName"] == node]
    assert len(mine) == 1 and mine[0]["metadata"]["name"] == f"{node}-gpu.nvidia.com-0"
    spec = mine[0]["spec"]
    assert spec["driver"] == "gpu.nvidia.com" and spec["pool"]["name"] == node
    assert spec["pool"]["resourceSliceCount"] == 1
    devs = devices(mine)
    assert sorted(devs) == ["gpu-0", "gpu-1", "gpu-2", "gpu-3"]
    a = devs["gpu-1"]["attributes"]
    assert a["type"] == {"string": "gpu"} and a["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert a["gpu.nvidia.com/nvlinkDomain"] == {"int": 0}
    assert devs["gpu-2"]["attributes"]["gpu.nvidia.com/nvlinkDomain"] == {"int": 2}
    # the uuid is the one the Node reports for that GPU
    n = stack.node(node)
    uuids = {d["index"]: d["uuid"] for d in n["status"]["devices"]}
    assert devs["gpu-1"]["attributes"]["uuid"]["string"] == uuids[1]
    # Xid 79 on GPU 2: a NoExecute taint, a new generation
    gen0 = spec["pool"]["generation"]

    def tainted():
        s = slices(stack, node)
        d = devices(s or [])
        t = d.get("gpu-2", {}).get("taints")
        return t and (s, t)
    s2, taints = wait_for(tainted, 30, "gpu-2 tainted")
    assert taints[0]["key"] == "gpu.nvidia.com/unhealthy" and taints[0]["effect"] == "NoExecute"
    assert taints[0]["timeAdded"].endswith("Z")
    assert s2[0]["spec"]["pool"]["generation"] == gen0 + 1
    assert "taints" not in devices(s2)["gpu-0"]
    # the default classes
    r = stack.cli("get", "deviceclasses", "-o", "json")
    names = sorted(c["metadata"]["name"] for c in json.loads(r.stdout)["items"])
    assert names == ["gpu.nvidia.com", "mig.nvidia.com"]


def test_restart_keeps_the_generation(tmp_path):
    import os
    from test_chaos import Cluster
    c = Cluster(os.environ["GPUSCHED_BIN"], tmp_path, ["r1"], "2xA100-40GB,mig=3g.20gb+2g.10gb*2")
    try:
        c.server()
        c.agent("r1")
        first = wait_for(lambda: slices(c, "r1"), 20, "r1's slices")
        devs = devices(first)
        assert sorted(devs) == ["gpu-0-mig-2g10gb-14-0", "gpu-0-mig-2g10gb-14-2", "gpu-0-mig-3g20gb-9-4",
                                "gpu-1-mig-2g10gb-14-0", "gpu-1-mig-2g10gb-14-2", "gpu-1-mig-3g20gb-9-4"]
        assert devs["gpu-0-mig-3g20gb-9-4"]["attributes"]["profile"] == {"string": "3g.20gb"}
        rv = first[0]["metadata"]["resourceVersion"]
        c.stop("agent-r1")
        c.agent("r1")
        wait_for(lambda: c.agent_report("r1") is not None, 20, "the agent back")
        time.sleep(3)  # more than a publishing period
        again = slices(c, "r1")
        assert again[0]["metadata"]["resourceVersion"] == rv, "a restart with the same GPUs rewrote the slice"
        assert again[0]["spec"]["pool"]["generation"] == first[0]["spec"]["pool"]["generation"]
    finally:
        c.stop_all()


@require_tool(KUBECTL, "kubectl")
def test_kubectl_gets_and_applies_dra_kinds(stack, tmp_path):
    stack.up("1x2xL4")
    wait_for(lambda: slices(stack), 20, "a slice")
    env = {"KUBECONFIG": stack.kubeconfig, "HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}

    def kubectl(*args, input=None):
        r = subprocess.run([KUBECTL, *args], capture_output=True, text=True, env=env, input=input, timeout=60)
        assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stdout}{r.stderr}"
        return r.stdout
    out = kubectl("get", "resourceslices")
    head = out.splitlines()[0].split()
    assert head == ["NAME", "NODE", "DRIVER", "POOL", "AGE"], out
    assert "gpu.nvidia.com" in out.splitlines()[1]
    # v1beta1 as a 1.32 user writes it, read back as v1
    claim = """apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: two-gpus, namespace: default}
spec:
  devices:
    requests:
    - name: gpus
      deviceClassName: gpu.nvidia.com
      count: 2
"""
    kubectl("apply", "-f", "-", input=claim)
    kubectl("apply", "-f", "-", input=claim)  # again: unchanged
    r = stack.cli("get", "resourceclaims.resource.k8s.io", "two-gpus", "-o", "json")
    got = json.loads(r.stdout)
    assert got["apiVersion"] == "resource.k8s.io/v1"
    assert got["spec"]["devices"]["requests"][0]["exactly"] == {"deviceClassName": "gpu.nvidia.com", "count": 2}
    out = kubectl("get", "resourceclaims")
    assert out.splitlines()[0].split() == ["NAME", "STATE", "AGE"] and "pending" in out
    out = kubectl("get", "deviceclasses", "-o", "name")
    assert "deviceclass.resource.k8s.io/gpu.nvidia.com" in out
