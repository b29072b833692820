"""Graceful pod deletion and node leases, end to end with mock GPUs:

- a running pod deleted turns Terminating, its processes get SIGTERM (a trap
  in the command writes to its log), then the pod disappears;
- a pod that ignores SIGTERM is killed after its grace period;
- a new pod for the same GPUs never runs while the old pod's process lives;
- `kubectl delete pod` waits until the agent confirmed the deletion;
- each node renews a Lease in kube-node-lease, and its Node status is not
  rewritten every heartbeat;
- with the server and the agent as separate processes: the lease alone keeps
  the node Ready, and an agent that stops makes its node NotReady; an agent
  that was away confirms a deletion of a pod it never ran.
"""
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import time

import pytest

from stack import Stack, apply, phase, pid_alive, pod_manifest, require_tool, wait_for

MICRO = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("lifecycle"))
    s.up("1x2xH100-80GB")
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def graceful_pod(name, cmd, gpus, grace, run_as_root=False):
    p = pod_manifest(name, cmd, gpus=gpus, run_as_root=run_as_root)
    p["spec"]["terminationGracePeriodSeconds"] = grace
    return p


def agent_pod(stack, name):
    for n in stack.info["nodes"]:
        for p in json.loads(stack.agent_get(n["port"], "/pods"))["pods"]:
            if p["name"] == name:
                return p
    return None


def status_column(stack, name):
    r = stack.cli("get", "pods", check=False)
    for line in r.stdout.splitlines()[1:]:
        cols = line.split()
        if cols and cols[0] == name:
            return cols[2]
    return None


def lease(stack, node):
    r = stack.cli("get", "lease", node, "-n", "kube-node-lease", "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def test_deleted_pod_gets_sigterm_then_disappears(stack):
    # The trap answers SIGTERM slowly, so the Terminating state lasts long enough to be seen.
    cmd = "trap 'echo got TERM; sleep 10; exit 0' TERM; echo started; while true; do sleep 0.2; done"
    apply(stack, graceful_pod("polite", cmd, 1, 30))
    wait_for(lambda: phase(stack.pod("polite")) == "Running", 30, "polite to run")
    wait_for(lambda: "started" in stack.cli("logs", "polite", check=False).stdout, 10, "the command to start")
    r = stack.cli("delete", "pod", "polite", "--wait=false")
    assert r.stdout.strip() == 'pod "polite" deleted'
    p = stack.pod("polite")
    assert p and p["metadata"].get("deletionTimestamp"), "the pod was removed without waiting for its node"
    assert p["metadata"]["deletionGracePeriodSeconds"] == 30
    assert status_column(stack, "polite") == "Terminating"
    wait_for(lambda: "got TERM" in stack.cli("logs", "polite", check=False).stdout, 10, "the trap to run")
    wait_for(lambda: stack.pod("polite") is None, 30, "the pod to disappear")
    wait_for(lambda: agent_pod(stack, "polite") is None, 10, "the agent to forget the pod")


def test_pod_ignoring_sigterm_is_killed_after_its_grace(stack):
    apply(stack, graceful_pod("stubborn", "trap '' TERM; echo started; while true; do sleep 0.2; done", 1, 30))
    wait_for(lambda: phase(stack.pod("stubborn")) == "Running", 30, "stubborn to run")
    shim = wait_for(lambda: agent_pod(stack, "stubborn"), 10, "the agent's record")["containers"][0]["pid"]
    t0 = time.time()
    stack.cli("delete", "pod", "stubborn", "--grace-period=1", "--wait=false")
    p = stack.pod("stubborn")
    assert p is None or p["metadata"]["deletionGracePeriodSeconds"] == 1
    wait_for(lambda: not pid_alive(shim), 20, "the stubborn process to be killed")
    assert time.time() - t0 >= 0.9, "killed before its grace period ended"
    wait_for(lambda: stack.pod("stubborn") is None, 20, "the pod to disappear")


def test_new_pod_never_overlaps_the_terminating_one(stack, tmp_path):
    old_exit, new_start = tmp_path / "old.exit", tmp_path / "new.start"
    cmd = f"trap 'sleep 6; date +%s.%N > {old_exit}; exit 0' TERM; echo started; while true; do sleep 0.2; done"
    apply(stack, graceful_pod("old", cmd, 2, 30, run_as_root=True))
    wait_for(lambda: phase(stack.pod("old")) == "Running", 30, "old to run")
    stack.cli("delete", "pod", "old", "--wait=false")
    apply(stack, pod_manifest("new", f"date +%s.%N > {new_start}; sleep 1", gpus=2, run_as_root=True))
    # While old terminates, new is not even bound: the scheduler still counts old's GPUs.
    seen_terminating = False
    end = time.time() + 3
    while time.time() < end:
        new = stack.pod("new") or {}
        if stack.pod("old") is None:
            break
        seen_terminating = True
        assert not new.get("spec", {}).get("nodeName"), "bound while the old pod still terminates"
        time.sleep(0.3)
    assert seen_terminating
    wait_for(lambda: phase(stack.pod("new")) == "Succeeded", 60, "new to run once old is gone")
    assert float(new_start.read_text()) > float(old_exit.read_text())
    stack.cli("delete", "pod", "new")
    assert stack.pod("new") is None


@require_tool(KUBECTL, "kubectl")
def test_kubectl_delete_waits_and_lists_leases(stack, tmp_path):
    env = dict(os.environ, HOME=str(tmp_path), KUBECONFIG=stack.kubeconfig)

    def k(*args):
        return subprocess.run([KUBECTL, *args], capture_output=True, text=True, timeout=90, env=env)

    apply(stack, graceful_pod("kdel", "trap 'sleep 2; exit 0' TERM; while true; do sleep 0.2; done", 1, 30))
    wait_for(lambda: phase(stack.pod("kdel")) == "Running", 30, "kdel to run")
    r = k("delete", "pod", "kdel")
    assert r.returncode == 0 and 'pod "kdel" deleted' in r.stdout, r.stderr
    assert stack.pod("kdel") is None, "kubectl returned before the pod was gone"
    r = k("get", "leases", "-n", "kube-node-lease")
    assert r.returncode == 0, r.stderr
    assert "gpu-node-1" in r.stdout


def test_node_lease_renews_without_rewriting_the_node(stack):
    node = stack.info["nodes"][0]["name"]
    first = wait_for(lambda: lease(stack, node), 20, "the node lease")
    assert first["kind"] == "Lease" and first["apiVersion"] == "coordination.k8s.io/v1"
    assert first["spec"]["holderIdentity"] == node
    assert first["spec"]["leaseDurationSeconds"] > 0
    assert MICRO.match(first["spec"]["renewTime"]), first["spec"]["renewTime"]
    r = stack.cli("get", "leases", "-n", "kube-node-lease")
    assert r.stdout.split()[:3] == ["NAME", "HOLDER", "AGE"], r.stdout
    assert r.stdout.splitlines()[1].split()[:2] == [node, node], r.stdout  # kubelet's lease: held by the node

    def ready_hb():
        n = stack.node(node)
        return [c for c in n["status"]["conditions"] if c["type"] == "Ready"][0]["lastHeartbeatTime"]

    hb = ready_hb()
    second = wait_for(lambda: (l := lease(stack, node)) and l["spec"]["renewTime"] != first["spec"]["renewTime"]
                      and l, 20, "the lease to be renewed")
    wait_for(lambda: (l := lease(stack, node)) and l["spec"]["renewTime"] != second["spec"]["renewTime"], 20,
             "a second renewal")
    assert second["spec"]["renewTime"] > first["spec"]["renewTime"]
    assert ready_hb() == hb, "the Node status was rewritten although nothing changed"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_stopped_agent_turns_its_node_not_ready_via_the_lease(gpusched_bin, tmp_path):
    s = Stack(gpusched_bin, tmp_path)
    port, aport = free_port(), free_port()
    s.node_tokens("solo")
    try:
        s.spawn("server", "server", "--data-dir", str(s.data), "--listen", f"127.0.0.1:{port}", "--log-level", "warn",
                env={"GPUSCHED_NODE_GRACE": "3"})
        wait_for(lambda: (s.data / "kubeconfig").exists() and s.cli("get", "nodes", check=False, timeout=5).returncode
                 == 0, 20, "the server")

        def agent():
            s.spawn("agent", "agent", *s.agent_args("solo"), "--node-name", "solo", "--mock", "2xH100-80GB",
                    "--state-dir", str(tmp_path / "agent"), "--listen", f"127.0.0.1:{aport}", "--heartbeat-ms", "500",
                    "--grace-ms", "500", "--log-level", "warn")

        def ready():
            n = s.node("solo")
            c = [x for x in (n or {}).get("status", {}).get("conditions", []) if x["type"] == "Ready"]
            taints = [t["key"] for t in (n or {}).get("spec", {}).get("taints", [])]
            return c[0]["status"] if c else None, "node.kubernetes.io/unreachable" in taints

        agent()
        wait_for(lambda: ready() == ("True", False), 20, "the node to be Ready")
        wait_for(lambda: lease(s, "solo"), 10, "the lease")
        # Longer than the 3 s grace: only the lease (the Ready heartbeat is not rewritten) keeps it Ready.
        end = time.time() + 6
        while time.time() < end:
            assert ready() == ("True", False), s.log("server")
            time.sleep(0.5)
        s.stop("agent", signal.SIGKILL)
        wait_for(lambda: ready() == ("Unknown", True), 20, "the node to turn NotReady")
        # Back again: the agent sees the server's Ready is not its own and writes it.
        agent()
        wait_for(lambda: ready() == ("True", False), 20, "the node to be Ready again")
    finally:
        s.stop_all()


def test_agent_confirms_a_deletion_that_happened_while_it_was_away(gpusched_bin, tmp_path):
    s = Stack(gpusched_bin, tmp_path)
    port, aport = free_port(), free_port()
    s.node_tokens("away")
    try:
        s.spawn("server", "server", "--data-dir", str(s.data), "--listen", f"127.0.0.1:{port}", "--log-level", "warn",
                env={"GPUSCHED_NODE_GRACE": "120"})
        wait_for(lambda: (s.data / "kubeconfig").exists() and s.cli("get", "nodes", check=False, timeout=5).returncode
                 == 0, 20, "the server")

        def agent():
            s.spawn("agent", "agent", *s.agent_args("away"), "--node-name", "away", "--mock", "1xH100-80GB",
                    "--state-dir", str(tmp_path / "agent"), "--listen", f"127.0.0.1:{aport}", "--heartbeat-ms", "500",
                    "--log-level", "warn")

        agent()
        wait_for(lambda: s.node("away"), 20, "the node to register")
        s.stop("agent")
        # Bound while its agent is away, so nothing ever ran it; then deleted.
        p = pod_manifest("orphan", "sleep 100")
        p["spec"]["nodeName"] = "away"
        s.cli("apply", "-f", "-", input=json.dumps(p))
        s.cli("delete", "pod", "orphan", "--wait=false")
        time.sleep(1)
        assert (s.pod("orphan") or {}).get("metadata", {}).get("deletionTimestamp")
        agent()
        wait_for(lambda: s.pod("orphan") is None, 30, "the returning agent to confirm the deletion")
    finally:
        s.stop_all()
