"""Layer 4 end to end with `gpusched up --mock`: a ClusterPolicy drives the
node through not-ready -> driver -> toolkit -> device-plugin -> mig ->
monitoring -> ready, a policy change re-drives it, a MIG layout change
drains and re-partitions a mock GPU (the MIG devices become schedulable),
a failing validator shows its reason and the node recovers when it is
fixed, GPU pods wait for ready nodes while CPU pods do not, and the
server's /metrics shows it all."""
import json
import ssl
import urllib.request

import pytest

from stack import Stack, apply, phase, pod_manifest, wait_for

NODE = "gpu-node-1"


def policy(**spec):
    base = {"mig": {"strategy": "mixed"},
            "migManager": {"enabled": True, "drainTimeoutSeconds": 30, "config": {"default": "all-disabled"}},
            "validator": {"retry": {"initialBackoffSeconds": 0.2, "maxBackoffSeconds": 1,
                                    "answerTimeoutSeconds": 20}}}
    base.update(spec)
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
            "spec": base}


def stack_cond(node):
    return next((c for c in node["status"].get("conditions", []) if c["type"] == "GPUStackReady"), None)


def state(stack):
    n = stack.node(NODE)
    return n["metadata"]["labels"].get("gpusched.io/gpu-stack-state") if n else None


def events(stack):
    r = stack.cli("get", "events", "-o", "json")
    items = json.loads(r.stdout)["items"]
    return sorted((e for e in items if e["involvedObject"]["name"] == NODE), key=lambda e: e["metadata"]["name"])


def label_node(stack, **labels):
    apply(stack, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE, "labels": labels}})


def metrics(stack):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(stack.info["server"] + "/metrics",
                                 headers={"Authorization": "Bearer " + stack.info["token"]})
    with urllib.request.urlopen(req, timeout=5, context=ctx) as f:
        return f.read().decode()


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    # GPU 3 stops answering for the first 15 s: the monitoring validator must say so, then recover.
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("govern"))
    s.up("4xA100-40GB,lost@gpu3@t=0s@for=15s")
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def test_without_policy_nothing_is_governed(stack):
    wait_for(lambda: stack.node(NODE), 20, "node registration")
    n = stack.node(NODE)
    assert stack_cond(n) is None
    assert "gpusched.io/gpu-stack-state" not in n["metadata"]["labels"]


def test_gpu_pods_wait_for_ready_and_failing_validator_recovers(stack):
    apply(stack, policy())
    # GPU 3 does not answer yet: the node stops at monitoring and says why.
    def stuck():
        c = stack_cond(stack.node(NODE)) or {}
        return c.get("reason") == "MonitoringValidating" and "no samples for GPU 3" in c.get("message", "") and c
    c = wait_for(stuck, 15, "the monitoring validator to fail on GPU 3")
    assert c["status"] == "False"
    assert "retry in" in c["message"] and "attempt" in c["message"]
    assert state(stack) == "monitoring"
    # Not ready: a GPU pod waits, a CPU pod runs.
    apply(stack, pod_manifest("gpu-early", "sleep 0.2", gpus=1), pod_manifest("cpu-early", "sleep 0.2"))
    wait_for(lambda: phase(stack.pod("cpu-early")) == "Succeeded", 20, "the CPU pod to run")
    assert not stack.pod("gpu-early")["spec"].get("nodeName")
    # The GPU answers again: ready, and the GPU pod runs.
    wait_for(lambda: state(stack) == "ready", 30, "the node to become ready")
    c = stack_cond(stack.node(NODE))
    assert c["status"] == "True" and c["reason"] == "Ready"
    wait_for(lambda: phase(stack.pod("gpu-early")) == "Succeeded", 20, "the GPU pod to run once ready")
    # Every step left an event, in order, and the failure left a warning.
    reasons = [e["reason"] for e in events(stack)]
    walk = ["DriverValidating", "ToolkitValidating", "DevicePluginValidating", "MIGConfiguring",
            "MonitoringValidating", "Ready"]
    assert [r for r in reasons if r in walk][:6] == walk
    assert "ValidationFailed" in reasons
    n = stack.node(NODE)
    labels = n["metadata"]["labels"]
    assert labels["nvidia.com/gpu.deploy.driver"] == "true"
    assert labels["nvidia.com/gpu.deploy.node-status-exporter"] == "false"
    assert labels["nvidia.com/mig.strategy"] == "mixed"  # GFD labels published at ready
    cp = json.loads(stack.cli("get", "clusterpolicy", "cluster-policy", "-o", "json").stdout)
    assert cp["status"]["state"] == "ready"
    # The toolkit step wrote a CDI spec naming every GPU.
    assert "CDI spec" in next(e["message"] for e in events(stack) if e["reason"] == "DevicePluginValidating")


def test_policy_change_redrives_and_skips_disabled(stack):
    wait_for(lambda: state(stack) == "ready", 30, "ready")
    before = len(events(stack))
    apply(stack, policy(toolkit={"enabled": False}, dcgmExporter={"enabled": False}))
    # The walk back may be quicker than a poll: look at the events.
    wait_for(lambda: [e for e in events(stack)[before:] if e["reason"] == "Ready"], 30, "the re-drive to end at ready")
    new = events(stack)[before:]
    reasons = [e["reason"] for e in new]
    assert "NotReady" in reasons and reasons[-1] == "Ready"
    assert "ToolkitValidating" not in reasons and "MonitoringValidating" not in reasons
    assert "DriverValidating" in reasons and "MIGConfiguring" in reasons
    labels = stack.node(NODE)["metadata"]["labels"]
    assert labels["nvidia.com/gpu.deploy.container-toolkit"] == "false"
    # an administrator's label switches a component off on this node alone
    before = len(events(stack))
    label_node(stack, **{"nvidia.com/gpu.deploy.device-plugin": "false"})
    wait_for(lambda: [e for e in events(stack)[before:] if e["reason"] == "Ready"], 30, "the node re-driven to ready")
    assert "DevicePluginValidating" not in [e["reason"] for e in events(stack)[before:]]
    label_node(stack, **{"nvidia.com/gpu.deploy.device-plugin": "true"})
    apply(stack, policy(toolkit={"enabled": True}, dcgmExporter={"enabled": True}))  # apply merges
    wait_for(lambda: state(stack) == "ready" and stack.node(NODE)["metadata"]["labels"][
        "nvidia.com/gpu.deploy.container-toolkit"] == "true", 30, "the full policy back")


def test_mig_layout_change_drains_then_repartitions(stack):
    wait_for(lambda: state(stack) == "ready", 30, "ready")
    # A pod holds one GPU while the layout changes.
    apply(stack, pod_manifest("holder", "sleep 8", gpus=1))
    wait_for(lambda: phase(stack.pod("holder")) == "Running", 20, "holder to run")
    label_node(stack, **{"nvidia.com/mig.config": "all-1g.5gb"})
    apply(stack, policy(migManager={"enabled": True, "drainTimeoutSeconds": 30, "config": {
        "default": "all-disabled",
        "migConfigs": {"all-1g.5gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]}}}))
    def draining():
        c = stack_cond(stack.node(NODE)) or {}
        return c.get("reason") == "MIGConfiguring" and "waiting for pods to finish" in c.get("message", "") and c
    c = wait_for(draining, 20, "the MIG manager to wait for the holder pod")
    assert "default/holder" in c["message"] and "deadline in" in c["message"]
    wait_for(lambda: phase(stack.pod("holder")) == "Succeeded", 20, "holder to finish")
    wait_for(lambda: state(stack) == "ready", 30, "ready with the new layout")
    n = stack.node(NODE)
    assert n["status"]["capacity"]["nvidia.com/mig-1g.5gb"] == "28"
    assert n["status"]["capacity"]["nvidia.com/gpu"] == "0"
    assert all(len(d["mig"]["instances"]) == 7 for d in n["status"]["devices"])
    # GFD labels are republished on arrival at Ready, in a write of their own.
    wait_for(lambda: stack.node(NODE)["metadata"]["labels"].get("nvidia.com/mig-1g.5gb.count") == "28", 10,
             "the MIG labels")
    # The MIG devices are schedulable resources.
    pod = pod_manifest("mig-user", "sleep 0.2")
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/mig-1g.5gb": "2"}}
    apply(stack, pod)
    wait_for(lambda: phase(stack.pod("mig-user")) == "Succeeded", 20, "the MIG pod to run")
    assert stack.pod("mig-user")["spec"]["nodeName"] == NODE
    # A whole GPU is no longer offered on MIG GPUs.
    apply(stack, pod_manifest("whole", "true", gpus=1))
    wait_for(lambda: (stack.pod("whole") or {}).get("status", {}).get("conditions"), 20, "a verdict")
    assert not stack.pod("whole")["spec"].get("nodeName")
    stack.cli("delete", "pod", "whole")


def test_metrics(stack):
    text = metrics(stack)
    assert f'gpusched_gpu_stack_state{{node="{NODE}",state="ready"}} 1' in text
    fails = [l for l in text.splitlines() if l.startswith("gpusched_gpu_stack_validation_failures_total{")]
    assert fails and int(fails[0].split()[-1]) >= 1
    assert "gpusched_gpu_stack_state_seconds{" in text
    assert 'gpusched_scheduler_queue_pods{queue="active"}' in text
    assert "gpusched_scheduler_scheduling_attempt_duration_seconds_count" in text


def test_get_nodes_wide_shows_stack_state(stack):
    out = stack.cli("get", "nodes", "-o", "wide").stdout
    assert "GPU-STACK" in out.splitlines()[0]
    assert "ready" in out.splitlines()[1]


# --- GPUCluster: the DRA model ---------------------------------------------------------------

def gpu_cluster(**spec):
    base = {"validator": {"retry": {"initialBackoffSeconds": 0.2, "maxBackoffSeconds": 1,
                                    "answerTimeoutSeconds": 20}}}
    base.update(spec)
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "GPUCluster", "metadata": {"name": "gpu-cluster"},
            "spec": base}


def test_gpucluster_walks_the_dra_stack(gpusched_bin, tmp_path):
    """Under a GPUCluster the node walks driver -> toolkit -> dra-plugin -> monitoring -> ready, its
    ResourceSlices are what the dra-plugin step checks, the Node no longer advertises nvidia.com/gpu
    (GPUs reach pods through DRA), and a ClusterPolicy is refused while the GPUCluster exists."""
    s = Stack(gpusched_bin, tmp_path)
    s.up("2xH100-80GB")
    try:
        wait_for(lambda: s.node(NODE), 20, "node registration")
        apply(s, gpu_cluster())
        wait_for(lambda: state(s) == "ready", 40, "the node to become ready under the GPUCluster")
        reasons = [e["reason"] for e in events(s)]
        walk = ["DriverValidating", "ToolkitValidating", "DRAPluginValidating", "MonitoringValidating", "Ready"]
        assert [r for r in reasons if r in walk][:5] == walk, reasons
        assert "DevicePluginValidating" not in reasons and "MIGConfiguring" not in reasons
        n = s.node(NODE)
        labels = n["metadata"]["labels"]
        assert labels["nvidia.com/gpu.deploy.dra-driver"] == "true"
        assert labels["nvidia.com/gpu.deploy.device-plugin"] == "false"
        wait_for(lambda: "nvidia.com/gpu" not in s.node(NODE)["status"].get("capacity", {}), 20,
                 "nvidia.com/gpu no longer advertised")
        r = s.cli("get", "resourceslices", "-o", "json")
        slices = [x for x in json.loads(r.stdout)["items"] if x["spec"]["nodeName"] == NODE]
        assert sorted(d["name"] for x in slices for d in x["spec"]["devices"]) == ["gpu-0", "gpu-1"]
        gc = json.loads(s.cli("get", "gpuclusters", "gpu-cluster", "-o", "json").stdout)
        assert gc["status"]["state"] == "ready"
        r = s.cli("apply", "-f", "-", input=json.dumps(policy()), check=False)
        assert r.returncode != 0 and 'GPUCluster "gpu-cluster" exists' in r.stdout + r.stderr
        # Back to the device-plugin model: the slices go, nvidia.com/gpu comes back.
        s.cli("delete", "gpuclusters", "gpu-cluster")
        apply(s, policy())

        def device_plugin_model():
            n = s.node(NODE)
            items = json.loads(s.cli("get", "resourceslices", "-o", "json").stdout)["items"]
            return n["status"].get("capacity", {}).get("nvidia.com/gpu") == "2" and not items
        wait_for(device_plugin_model, 30, "nvidia.com/gpu advertised and the slices deleted")
    finally:
        rc = s.stop("up")
        assert rc == 0, s.log("up")
