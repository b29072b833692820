"""Reliability of the whole stack, with the server and the agents as
separate processes killed at random moments:

- a 1,000-pod workload of short commands while the server is killed -9
  and restarted several times, and one agent is killed -9 and restarted:
  every pod finishes, each ran exactly once (none lost, none duplicated),
  and an invariant checker sampling the store and the agents' reports
  never sees one GPU held by two unfinished pods;
- an agent gone for good: its node turns NotReady and its pod is re-created
  and runs elsewhere.
Bounded to stay within a few minutes on two cores (GS_CHAOS_PODS to scale).
"""
import json
import os
import random
import signal
import socket
import threading
import time
import urllib.request

import pytest

from stack import Stack, phase, pid_alive, pod_manifest, wait_for

PODS = int(os.environ.get("GS_CHAOS_PODS", "1000"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster(Stack):
    def __init__(self, binary, workdir, nodes, mock, env=None):
        super().__init__(binary, workdir)
        self.port = free_port()
        self.nodes = nodes
        self.mock = mock
        self.env = env or {}
        self.agent_ports = {n: free_port() for n in nodes}

    def server(self):
        if not (self.data / "tokens.csv").exists():
            self.node_tokens(*self.nodes)
        self.spawn("server", "server", "--data-dir", str(self.data), "--listen", f"127.0.0.1:{self.port}",
                   "--log-level", "warn", env=self.env)
        wait_for(lambda: (self.data / "kubeconfig").exists() and self._healthy(), 20, "the server")

    def _healthy(self):
        return self.cli("get", "nodes", check=False, timeout=5).returncode == 0

    def agent(self, node):
        self.spawn(f"agent-{node}", "agent", *self.agent_args(node), "--node-name", node, "--mock", self.mock,
                   "--state-dir", str(self.dir / "agents" / node), "--listen", f"127.0.0.1:{self.agent_ports[node]}",
                   "--heartbeat-ms", "500", "--grace-ms", "500", "--log-level", "warn")

    def agent_report(self, node):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.agent_ports[node]}/pods", timeout=2) as f:
                return json.loads(f.read())
        except OSError:
            return None


def check_invariants(c, violations, stop):
    """No GPU held by two unfinished pods: in the store, and in each agent."""
    while not stop.is_set():
        pods = c.pods() or []
        held = {}
        for p in pods:
            node = p["spec"].get("nodeName")
            dev = p["metadata"].get("annotations", {}).get("gpusched.io/devices")
            if not node or not dev or phase(p) in ("Succeeded", "Failed"):
                continue
            for g in dev.split(","):
                key = (node, g.split(":")[0])
                if key in held:
                    violations.append(f"store: {key} held by {held[key]} and {p['metadata']['name']}")
                held[key] = p["metadata"]["name"]
        for n in c.nodes:
            r = c.agent_report(n)
            seen = {}
            for p in (r or {}).get("pods", []):
                if p["phase"] != "Running":
                    continue
                for g in p["devices"]:
                    if g in seen:
                        violations.append(f"agent {n}: {g} held by {seen[g]} and {p['name']}")
                    seen[g] = p["name"]
        time.sleep(0.2)


def test_server_and_agent_killed_during_a_workload(gpusched_bin, tmp_path):
    nodes = ["n1", "n2"]
    c = Cluster(gpusched_bin, tmp_path, nodes, "32xH100-80GB,nvlink=islands:8")
    ran = tmp_path / "ran"
    ran.mkdir()
    try:
        c.server()
        for n in nodes:
            c.agent(n)
        wait_for(lambda: all(c.node(n) for n in nodes), 20, "nodes to register")
        docs = [pod_manifest(f"w{i:04d}", f'echo "$GPUSCHED_POD_UID" >> {ran}/$GPUSCHED_POD', gpus=1)
                for i in range(PODS)]
        c.cli("apply", "-f", "-", input="\n".join(json.dumps(d) for d in docs), timeout=120)
        violations, stop = [], threading.Event()
        checker = threading.Thread(target=check_invariants, args=(c, violations, stop), daemon=True)
        checker.start()
        rnd = random.Random(8)
        start = time.time()

        def finished():
            ps = c.pods()
            return ps is not None and len(ps) == PODS and all(phase(p) in ("Succeeded", "Failed") for p in ps)

        for round_ in range(4):
            time.sleep(rnd.uniform(0.5, 2.5))
            if finished():
                break
            if round_ == 2:
                c.stop("agent-n2", signal.SIGKILL)
                time.sleep(rnd.uniform(0.2, 1.0))
                c.agent("n2")
            else:
                c.stop("server", signal.SIGKILL)
                time.sleep(rnd.uniform(0.1, 0.8))
                c.server()
        wait_for(finished, 150, "every pod to finish", step=0.5)
        stop.set()
        checker.join(5)
        elapsed = time.time() - start
        pods = c.pods()
        assert len(pods) == PODS
        failed = [p["metadata"]["name"] for p in pods if phase(p) != "Succeeded"]
        assert not failed, f"failed pods: {[(p['metadata']['name'], p.get('status')) for p in pods if phase(p) != 'Succeeded'][:5]}"
        counts = {p.name: len(p.read_text().split()) for p in ran.iterdir()}
        lost = [d["metadata"]["name"] for d in docs if d["metadata"]["name"] not in counts]
        twice = {k: v for k, v in counts.items() if v != 1}
        assert not lost, f"never ran: {lost[:10]}"
        assert not twice, f"ran more than once: {list(twice.items())[:10]}"
        assert not violations, violations[:5]
        print(f"{PODS} pods through 3 server kills and 1 agent kill in {elapsed:.1f}s")
    finally:
        c.stop_all()


def test_agent_gone_for_good(gpusched_bin, tmp_path):
    nodes = ["a", "b"]
    c = Cluster(gpusched_bin, tmp_path, nodes, "4xH100-80GB", env={"GPUSCHED_NODE_GRACE": "2"})
    try:
        c.server()
        for n in nodes:
            c.agent(n)
        wait_for(lambda: all(c.node(n) for n in nodes), 20, "nodes to register")
        docs = [pod_manifest(f"big{i}", "echo on $GPUSCHED_NODE; sleep 3", gpus=4, restart="OnFailure")
                for i in range(2)]
        c.cli("apply", "-f", "-", input="\n".join(json.dumps(d) for d in docs))
        wait_for(lambda: all(phase(c.pod(f"big{i}")) == "Running" for i in range(2)), 20, "both pods to run")
        victim = c.pod("big0")
        lost_node = victim["spec"]["nodeName"]
        pids = [ct["pid"] for p in c.agent_report(lost_node)["pods"] for ct in p["containers"]]
        # The machine goes away: its agent and its processes.
        c.stop(f"agent-{lost_node}", signal.SIGKILL)
        for pid in pids:
            try:
                os.killpg(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

        def not_ready():
            n = c.node(lost_node)
            ready = [x for x in n["status"]["conditions"] if x["type"] == "Ready"][0]
            taints = [t["key"] for t in n["spec"].get("taints", [])]
            return ready["status"] == "Unknown" and "node.kubernetes.io/unreachable" in taints

        wait_for(not_ready, 15, "the node to turn NotReady")
        p = wait_for(lambda: (q := c.pod("big0")) and q["metadata"]["uid"] != victim["metadata"]["uid"] and q,
                     10, "the pod to be re-created")
        assert p["metadata"]["annotations"]["gpusched.io/recreated-from"] == victim["metadata"]["uid"]
        done = wait_for(lambda: phase(c.pod("big0")) == "Succeeded" and c.pod("big0"), 30, "the re-created pod to run")
        assert done["spec"]["nodeName"] != lost_node
        assert phase(c.pod("big1")) == "Succeeded"
        assert all(not pid_alive(pid) for pid in pids)
    finally:
        c.stop_all()
