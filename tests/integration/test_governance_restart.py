"""The GPU stack state survives a server restart: a server and an agent as
separate processes, a ClusterPolicy walks the node to ready, the server is
killed -9 and started again on the same data directory. The node is ready
as soon as the server answers (the operator restores its state machine
from the Node instead of walking it again), it never leaves ready, no
transition event is repeated, and a GPU pod is placed at once."""
import json
import signal
import time

from stack import phase, pod_manifest, wait_for
from test_chaos import Cluster

NODE = "gpu-node-1"


def policy():
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
            "spec": {"validator": {"retry": {"initialBackoffSeconds": 0.2, "maxBackoffSeconds": 1,
                                             "answerTimeoutSeconds": 20}}}}


def stack_cond(node):
    return next((c for c in (node or {}).get("status", {}).get("conditions", []) if c["type"] == "GPUStackReady"),
                None)


def ready(c):
    cond = stack_cond(c.node(NODE))
    return cond is not None and cond["status"] == "True"


def operator_events(c):
    r = c.cli("get", "events", "-o", "json")
    return [e for e in json.loads(r.stdout)["items"]
            if e["involvedObject"]["name"] == NODE and e.get("source", {}).get("component") == "gpusched-operator"]


def test_ready_node_stays_ready_across_a_server_kill(gpusched_bin, tmp_path):
    c = Cluster(gpusched_bin, tmp_path, [NODE], "2xA100-40GB")
    try:
        c.server()
        c.agent(NODE)
        wait_for(lambda: c.node(NODE), 20, "node registration")
        c.cli("apply", "-f", "-", input=json.dumps(policy()))
        wait_for(lambda: ready(c), 90, "GPUStackReady=True before the restart", step=0.3)
        before = operator_events(c)
        assert sum(e["reason"] == "Ready" for e in before) == 1, before
        saved = json.loads(c.node(NODE)["metadata"]["annotations"]["gpusched.io/gpu-stack-machine"])
        assert saved["step"] == "ready"
        assert saved["generation"] >= 1

        c.stop("server", signal.SIGKILL)
        c.server()  # returns as soon as the server answers
        # Ready at the first look after the server answers, by order rather than by the clock (a
        # slow machine's client call alone can take a second): a walk again would start from
        # not-ready and publish its transitions, which the checks below count.
        assert ready(c), stack_cond(c.node(NODE))

        # A GPU pod is placed without waiting for a walk.
        c.cli("apply", "-f", "-", input=json.dumps(pod_manifest("after-restart", "true", gpus=1)))
        placed = wait_for(lambda: (c.pod("after-restart") or {}).get("spec", {}).get("nodeName"), 10,
                          "the GPU pod to be placed")
        assert placed == NODE
        wait_for(lambda: phase(c.pod("after-restart")) == "Succeeded", 60, "the GPU pod to finish")

        # Ready all along (the background check never takes it out), and no
        # transition was published again.
        end = time.time() + 3
        while time.time() < end:
            n = c.node(NODE)
            assert stack_cond(n)["status"] == "True", stack_cond(n)
            assert n["metadata"]["labels"]["gpusched.io/gpu-stack-state"] == "ready"
            time.sleep(0.2)
        wait_for(lambda: "checked again" in stack_cond(c.node(NODE))["message"], 30,
                 "the background check after the restart to finish", step=0.3)
        after = operator_events(c)
        assert len(after) == len(before), [e["reason"] for e in after[len(before):]]
        policy_status = json.loads(c.cli("get", "clusterpolicies.nvidia.com", "cluster-policy", "-o",
                                         "json").stdout)["status"]
        assert policy_status["generation"] == saved["generation"]
    finally:
        c.stop_all()
