"""Partitions and agent restarts, with the server and agents as separate
processes:

- bad node lifecycle flags refused by `server` and `up`, naming the flag;
- an agent on a fixed --listen port killed -9 and restarted five times while
  its pods run: every restart listens at once (the pods' shims do not hold
  its socket), running pods are re-adopted, finished ones stay Succeeded,
  no pod is marked NodeLost;
- an agent stopped (SIGSTOP) long enough for its node to turn unreachable:
  the node gets the unreachable NoExecute taint, pods are evicted only when
  their tolerationSeconds run out (a pod tolerating the taint forever never),
  an evicted OnFailure pod is not re-created while its process lives, the
  evicted pods' GPUs go to no new pod until the node confirms, and after
  SIGCONT the agent stops the orphans first. The times to converge are printed.
"""
import calendar
import json
import os
import signal
import socket
import subprocess
import time

from stack import Stack, phase, pid_alive, pod_manifest, wait_for

UNREACHABLE = "node.kubernetes.io/unreachable"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster(Stack):
    def __init__(self, binary, workdir, *server_args, grace="2"):
        super().__init__(binary, workdir)
        self.port = free_port()
        self.server_args = server_args
        self.grace = grace
        self.agent_ports = {}

    def server(self):
        if not (self.data / "tokens.csv").exists():
            self.node_tokens("fixed", "a", "b")  # every agent here holds its own node token
        self.spawn("server", "server", "--data-dir", str(self.data), "--listen", f"127.0.0.1:{self.port}",
                   "--log-level", "info", *self.server_args, env={"GPUSCHED_NODE_GRACE": self.grace})
        wait_for(lambda: (self.data / "kubeconfig").exists() and
                 self.cli("get", "nodes", check=False, timeout=5).returncode == 0, 20, "the server")

    def agent(self, node, mock):
        port = self.agent_ports.setdefault(node, free_port())
        return self.spawn(f"agent-{node}", "agent", *self.agent_args(node), "--node-name", node, "--mock",
                          mock, "--state-dir", str(self.dir / "agents" / node), "--listen", f"127.0.0.1:{port}",
                          "--heartbeat-ms", "500", "--grace-ms", "500", "--log-level", "info", "--kill-pods-on-exit",
                          "--agent-token-file", str(self.data / "agent.token"))

    def report(self, node):
        return self.agent_pods(self.agent_ports[node])

    def pids(self, node, name):
        r = self.report(node) or {"pods": []}
        return [c["pid"] for p in r["pods"] if p["name"] == name for c in p["containers"] if c["pid"] > 0]

    def apply(self, *docs):
        self.cli("apply", "-f", "-", input="\n".join(json.dumps(d) for d in docs))

    def taints(self, node):
        return {(t["key"], t["effect"]) for t in ((self.node(node) or {}).get("spec", {}).get("taints") or [])}


def stamp(text):
    return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))


def ann(p, key):
    return ((p or {}).get("metadata", {}).get("annotations") or {}).get(key)


def cond(p, kind):
    return [c for c in (p or {}).get("status", {}).get("conditions") or [] if c["type"] == kind]


def test_agent_restarts_on_a_fixed_port(gpusched_bin, tmp_path):
    # A short grace and toleration: an agent that failed to come back would show as NodeLost within the test.
    c = Cluster(gpusched_bin, tmp_path, "--default-unreachable-toleration-seconds", "2", grace="4")
    try:
        c.server()
        c.agent("fixed", "4xH100-80GB")
        wait_for(lambda: c.node("fixed"), 20, "the node to register")
        c.apply(*[pod_manifest(f"long{i}", "sleep 300", gpus=1) for i in range(2)],
                *[pod_manifest(f"short{i}", "echo done", gpus=1) for i in range(2)])
        wait_for(lambda: all(phase(c.pod(f"long{i}")) == "Running" for i in range(2)) and
                 all(phase(c.pod(f"short{i}")) == "Succeeded" for i in range(2)), 30, "the pods to run and finish")
        uids = {f"long{i}": c.pod(f"long{i}")["metadata"]["uid"] for i in range(2)}
        pids = {n: c.pids("fixed", n) for n in uids}
        assert all(pids.values()), pids
        took = []
        for k in range(5):
            # One pod finishes while its agent is away.
            c.apply(pod_manifest(f"away{k}", "sleep 1.5"))
            wait_for(lambda: phase(c.pod(f"away{k}")) == "Running", 20, f"away{k} to run")
            c.stop("agent-fixed", signal.SIGKILL)
            time.sleep(2)
            t = time.time()
            p = c.agent("fixed", "4xH100-80GB")
            wait_for(lambda: c.report("fixed") is not None or p.poll() is not None, 10, "the agent to listen")
            assert p.poll() is None, c.log("agent-fixed")[-2000:]
            took.append(time.time() - t)
            wait_for(lambda: phase(c.pod(f"away{k}")) == "Succeeded", 20, f"away{k} to be Succeeded")
        log = c.log("agent-fixed")
        assert "cannot listen" not in log, log[-2000:]
        for name, uid in uids.items():
            p = c.pod(name)
            assert p["metadata"]["uid"] == uid and phase(p) == "Running", p["status"]
            assert c.pids("fixed", name) == pids[name], "the running pod was not re-adopted"
            assert all(pid_alive(x) for x in pids[name])
        for p in c.pods():
            assert p["status"].get("reason") != "NodeLost", (p["metadata"]["name"], p["status"])
            assert not ann(p, "gpusched.io/evicted-at"), p["metadata"]
        for name in [f"short{i}" for i in range(2)] + [f"away{k}" for k in range(5)]:
            assert phase(c.pod(name)) == "Succeeded", c.pod(name)["status"]
        print(f"agent restarts listened after {', '.join(f'{x:.2f}s' for x in took)}")
    finally:
        c.stop_all()


def test_partition_evicts_after_toleration_without_a_double_run(gpusched_bin, tmp_path):
    c = Cluster(gpusched_bin, tmp_path, "--default-unreachable-toleration-seconds", "5",
                "--node-lost-timeout", "10m", grace="2")
    try:
        c.server()
        agent = c.agent("a", "2xH100-80GB")
        wait_for(lambda: c.node("a"), 20, "node a to register")
        forever = pod_manifest("forever", "sleep 300")
        forever["spec"]["tolerations"] = [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}]
        patient = pod_manifest("patient", "sleep 300")
        patient["spec"]["tolerations"] = [{"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute",
                                           "tolerationSeconds": 600}]
        c.apply(pod_manifest("never", "sleep 300", gpus=1), pod_manifest("again", "sleep 300", gpus=1,
                                                                          restart="OnFailure"),
                pod_manifest("short", "sleep 9"), forever, patient)
        names = ["never", "again", "short", "forever", "patient"]
        wait_for(lambda: all(phase(c.pod(n)) == "Running" for n in names), 30, "the pods to run")
        # DefaultTolerationSeconds: the pods without their own toleration got 5 s.
        tols = c.pod("never")["spec"]["tolerations"]
        assert {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 5} in tols, tols
        assert len([t for t in c.pod("forever")["spec"]["tolerations"] if t["key"] == UNREACHABLE]) == 1
        uids = {n: c.pod(n)["metadata"]["uid"] for n in names}
        pids = {n: c.pids("a", n) for n in names}
        assert all(pids.values()), pids
        c.agent("b", "2xH100-80GB")  # room for a replacement elsewhere
        wait_for(lambda: c.node("b"), 20, "node b to register")

        t0 = time.time()
        os.kill(agent.pid, signal.SIGSTOP)
        wait_for(lambda: (UNREACHABLE, "NoExecute") in c.taints("a"), 20, "the unreachable NoExecute taint")
        t_taint = time.time() - t0
        assert (UNREACHABLE, "NoSchedule") in c.taints("a")
        added = [t["timeAdded"] for t in c.node("a")["spec"]["taints"] if t["effect"] == "NoExecute"][0]
        # Within the 5 s toleration nothing is evicted.
        time.sleep(1.5)
        assert not any(ann(c.pod(n), "gpusched.io/evicted-at") for n in names), "evicted before tolerationSeconds"
        wait_for(lambda: ann(c.pod("never"), "gpusched.io/evicted-at") and ann(c.pod("again"), "gpusched.io/evicted-at"),
                 20, "the evictions")
        t_evict = time.time() - t0
        # Evicted when the toleration ran out, by the server's own stamps (whole seconds).
        for n in ("never", "again"):
            gap = stamp(ann(c.pod(n), "gpusched.io/evicted-at")) - stamp(added)
            assert 5 <= gap <= 9, (n, gap)
        never = c.pod("never")
        assert phase(never) == "Failed" and never["status"]["reason"] == "NodeLost", never["status"]
        assert cond(never, "DisruptionTarget"), never["status"]
        # A pod that needs node a's GPUs: they are still held by the evicted pods.
        newcomer = pod_manifest("newcomer", "sleep 300", gpus=1)
        newcomer["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "a"}
        newcomer["spec"]["tolerations"] = [{"key": UNREACHABLE, "operator": "Exists"}]  # only the GPUs hold it off
        c.apply(newcomer)
        # While the originals live, no second copy and no handover.
        end = time.time() + 4
        while time.time() < end:
            assert c.pod("again")["metadata"]["uid"] == uids["again"], "re-created while the original runs"
            assert not c.pod("newcomer")["spec"].get("nodeName"), "the evicted pods' GPUs were handed over"
            assert all(pid_alive(x) for x in pids["never"] + pids["again"])
            time.sleep(0.3)
        assert not any(ann(c.pod(n), "gpusched.io/evicted-at") for n in ("forever", "patient"))
        assert not pid_alive(pids["short"][0]), "short should have finished during the partition"

        t_cont = time.time()
        os.kill(agent.pid, signal.SIGCONT)
        orphans = pids["never"] + pids["again"]
        t_dead = t_new = t_confirm = None
        end = time.time() + 40
        while time.time() < end and None in (t_dead, t_new, t_confirm):
            if t_dead is None and not any(pid_alive(x) for x in orphans):
                t_dead = time.time() - t_cont
            ag = c.pod("again")
            if t_new is None and ag and ag["metadata"]["uid"] != uids["again"] and phase(ag) == "Running":
                assert t_dead is not None or not any(pid_alive(x) for x in orphans), "two copies of again ran"
                t_new = time.time() - t_cont
            nc = c.pod("newcomer")
            if nc["spec"].get("nodeName"):
                assert not any(pid_alive(x) for x in orphans), "GPUs handed over while an orphan ran"
                assert ann(c.pod("never"), "gpusched.io/devices-released"), c.pod("never")["metadata"]
            if t_confirm is None and cond(c.pod("never"), "ProcessesStopped"):
                t_confirm = time.time() - t_cont
            assert phase(c.pod("short")) == "Failed", "a finished orphan changed its terminal phase"
            time.sleep(0.1)
        assert None not in (t_dead, t_new, t_confirm), (t_dead, t_new, t_confirm, c.log("agent-a")[-3000:])
        wait_for(lambda: phase(c.pod("newcomer")) == "Running", 30, "the newcomer to run on node a")
        t_newcomer = time.time() - t_cont
        assert (UNREACHABLE, "NoExecute") not in c.taints("a")
        # The pods that tolerate the taint kept running, the same processes.
        for n in ("forever", "patient"):
            p = c.pod(n)
            assert p["metadata"]["uid"] == uids[n] and phase(p) == "Running", p["status"]
            assert all(pid_alive(x) for x in pids[n])
        time.sleep(2)
        short = c.pod("short")
        assert phase(short) == "Failed" and short["status"]["reason"] == "NodeLost", short["status"]
        log = c.log("agent-a")
        assert log.index("agent: reconciled, admitting pods", log.index("resumed after a pause")) > 0
        # A terminal phase is final, also for kubectl.
        r = subprocess.run(["kubectl", "--kubeconfig", c.kubeconfig, "patch", "pod", "short", "--subresource=status",
                            "--type=merge", "-p", '{"status":{"phase":"Succeeded"}}'], capture_output=True, text=True,
                           timeout=30)
        assert r.returncode != 0 and "status.phase" in r.stderr and "terminal phase Failed" in r.stderr, r
        print(f"partition: taint {t_taint:.1f}s, eviction {t_evict:.1f}s after SIGSTOP; after SIGCONT: orphans "
              f"dead {t_dead:.1f}s, confirmed {t_confirm:.1f}s, replacement running {t_new:.1f}s, "
              f"newcomer running {t_newcomer:.1f}s")
    finally:
        for name, p in list(c.procs.items()):
            if name.startswith("agent") and p.poll() is None:
                os.kill(p.pid, signal.SIGCONT)
        c.stop_all()


def test_bad_lifecycle_flags_are_refused(run):
    for cmd in ("server", "up"):
        r = run(cmd, "--default-unreachable-toleration-seconds", "abc")
        assert r.returncode == 2, r
        assert (f'gpusched {cmd}: --default-unreachable-toleration-seconds: "abc" is not a whole number of seconds'
                in r.stderr), r.stderr
        r = run(cmd, "--default-not-ready-toleration-seconds", "-5")
        assert r.returncode == 2 and "--default-not-ready-toleration-seconds: -5 must be 0 or more seconds" in r.stderr
        r = run(cmd, "--node-lost-timeout", "0")
        assert r.returncode == 2 and '--node-lost-timeout "0": want a duration above 0' in r.stderr, r.stderr
        assert "--node-lost-timeout DUR" in run(cmd, "--help").stdout
