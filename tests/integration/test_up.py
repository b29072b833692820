"""`gpusched up` end to end with mock GPUs: pods run as processes that see
exactly the GPUs the scheduler chose, report their phase and exit code,
serve their logs, die when deleted, and survive a restart of the stack."""
import json
import signal

import pytest

from stack import Stack, apply, phase, pid_alive, pod_manifest, wait_for


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("up"))
    s.up("2x4xH100-80GB,nvlink=islands:2")
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def agent_pods(stack):
    out = []
    for n in stack.info["nodes"]:
        out += json.loads(stack.agent_get(n["port"], "/pods"))["pods"]
    return out


def test_nodes_registered_with_devices_and_labels(stack):
    names = [n["name"] for n in stack.info["nodes"]]
    assert names == ["gpu-node-1", "gpu-node-2"]
    node = stack.node("gpu-node-1")
    devs = node["status"]["devices"]
    assert len(devs) == 4 and all(d["uuid"].startswith("GPU-") for d in devs)
    assert node["metadata"]["labels"]["nvidia.com/gpu.count"] == "4"
    assert node["status"]["capacity"]["nvidia.com/gpu"] == "4"
    ready = [c for c in node["status"]["conditions"] if c["type"] == "Ready"][0]
    assert ready["status"] == "True"
    # distinct nodes get distinct mock GPUs
    other = {d["uuid"] for d in stack.node("gpu-node-2")["status"]["devices"]}
    assert not other & {d["uuid"] for d in devs}


def test_pod_runs_and_sees_exactly_its_gpus(stack):
    apply(stack, pod_manifest("seer", 'echo "saw $NVIDIA_VISIBLE_DEVICES cuda=$CUDA_VISIBLE_DEVICES '
                                      'pod=$GPUSCHED_POD node=$GPUSCHED_NODE"; sleep 0.5', gpus=2))
    p = wait_for(lambda: phase(stack.pod("seer")) == "Succeeded" and stack.pod("seer"), 20, "seer to succeed")
    chosen = p["metadata"]["annotations"]["gpusched.io/devices"]
    assert len(chosen.split(",")) == 2
    log = stack.cli("logs", "seer").stdout.strip()
    node = p["spec"]["nodeName"]
    assert log == f"saw {chosen} cuda={chosen} pod=seer node={node}"
    cs = p["status"]["containerStatuses"][0]
    assert cs["state"]["terminated"]["exitCode"] == 0
    assert cs["state"]["terminated"]["reason"] == "Completed"


def test_pod_without_gpus_sees_none(stack):
    apply(stack, pod_manifest("cpu-only", 'echo "nv=$NVIDIA_VISIBLE_DEVICES cuda=[$CUDA_VISIBLE_DEVICES]"'))
    wait_for(lambda: phase(stack.pod("cpu-only")) == "Succeeded", 20, "cpu-only to succeed")
    assert stack.cli("logs", "cpu-only").stdout.strip() == "nv=void cuda=[]"


def test_exit_code_makes_the_pod_fail(stack):
    apply(stack, pod_manifest("fails", "echo oops >&2; exit 3", gpus=1))
    p = wait_for(lambda: phase(stack.pod("fails")) == "Failed" and stack.pod("fails"), 20, "fails to fail")
    term = p["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 3 and term["reason"] == "Error"
    assert stack.cli("logs", "fails").stdout.strip() == "oops"


def test_running_then_delete_kills_the_process_group(stack, tmp_path):
    marker = tmp_path / "child.pid"
    cmd = f"sleep 300 & echo $! > {marker}; echo started; wait"
    apply(stack, pod_manifest("long", cmd, gpus=1, run_as_root=True))
    wait_for(lambda: phase(stack.pod("long")) == "Running", 20, "long to run")
    wait_for(marker.exists, 10, "the child pid")
    child = int(marker.read_text())
    mine = [p for p in agent_pods(stack) if p["name"] == "long"][0]
    shim = mine["containers"][0]["pid"]
    assert pid_alive(child) and pid_alive(shim)
    assert len(mine["devices"]) == 1
    top = stack.cli("top", "nodes").stdout
    assert "ALLOCATED" in top
    stack.cli("delete", "pod", "long")
    wait_for(lambda: not pid_alive(child) and not pid_alive(shim), 10, "the pod's processes to die")
    wait_for(lambda: not [p for p in agent_pods(stack) if p["name"] == "long"], 10, "the agent to forget the pod")


def test_metrics_attribute_gpus_to_pods(stack):
    apply(stack, pod_manifest("metered", "sleep 3", gpus=1))
    p = wait_for(lambda: phase(stack.pod("metered")) == "Running" and stack.pod("metered"), 20, "metered to run")
    uuid = p["metadata"]["annotations"]["gpusched.io/devices"]
    port = [n["port"] for n in stack.info["nodes"] if n["name"] == p["spec"]["nodeName"]][0]

    def attributed():
        page = stack.agent_get(port, "/metrics")
        return [l for l in page.splitlines() if l.startswith("DCGM_FI_DEV_GPU_UTIL{") and uuid in l
                and 'pod="metered"' in l]

    wait_for(attributed, 10, "the exporter to attribute the GPU")


def test_restart_readopts_running_pods(gpusched_bin, tmp_path):
    s = Stack(gpusched_bin, tmp_path)
    s.up("1x2xH100-80GB", "--keep-pods")
    try:
        apply(s, pod_manifest("survivor", "echo begin; sleep 4; echo end; exit 5", gpus=1))
        wait_for(lambda: phase(s.pod("survivor")) == "Running", 20, "survivor to run")
        s.stop("up", signal.SIGKILL)
        s.up("1x2xH100-80GB", "--keep-pods")
        p = wait_for(lambda: phase(s.pod("survivor")) == "Failed" and s.pod("survivor"), 20, "survivor to end")
        assert p["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 5
        # adopted, not started again: one "begin"
        assert s.cli("logs", "survivor").stdout.split() == ["begin", "end"]
    finally:
        s.stop_all()
