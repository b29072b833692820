"""Several `gpusched server --store etcd` replicas on one real etcd
(tests/integration/etcd.py; Debian's etcd-server): one leader runs the
control loops, a follower takes over after kill -9 and binds what is
pending, a leader paused past its lease steps down when it wakes, clients
and an agent given every replica's URL keep working through a failover,
and `gpusched store migrate` carries a SQLite store's objects to etcd.

Replicas run over plain http with one shared tokens file and agent token,
as docs/CONTROL_PLANE.md "Running highly available" says to share them;
the lease is short (2 s) so failovers fit a test.
"""
import json
import os
import signal
import subprocess
import time
import urllib.request

import pytest

from etcd import EtcdCluster, free_ports
from stack import Stack, pod_manifest, wait_for

PRIO = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "batch"},
        "value": 1000}
LEASE = ["--leader-elect-lease-duration", "2s", "--leader-elect-renew-deadline", "1500ms",
         "--leader-elect-retry-period", "500ms"]


class Replicas(Stack):
    def __init__(self, binary, workdir, endpoints, n=2, nodes=("n1",)):
        super().__init__(binary, workdir)
        self.endpoints = endpoints
        self.ports = free_ports(n)
        self.urls = [f"http://127.0.0.1:{p}" for p in self.ports]
        self.nodes = nodes
        self.node_tokens(*nodes)
        (self.data / "agent.token").write_text("agent-" + os.urandom(8).hex() + "\n")
        (self.data / "agent.token").chmod(0o600)
        self.write_kubeconfig(self.urls)

    def admin_token(self):
        for line in (self.data / "tokens.csv").read_text().splitlines():
            if line and not line.startswith("#") and ",admin," in line:
                return line.split(",")[0]
        raise AssertionError("no admin token")

    def write_kubeconfig(self, urls):
        """One cluster whose server is the first URL and whose gpusched.io/servers extension lists all."""
        kc = {"apiVersion": "v1", "kind": "Config", "current-context": "g",
              "clusters": [{"name": "g", "cluster": {"server": urls[0], "extensions": [
                  {"name": "gpusched.io/servers", "extension": {"servers": urls}}]}}],
              "contexts": [{"name": "g", "context": {"cluster": "g", "user": "admin"}}],
              "users": [{"name": "admin", "user": {"token": self.admin_token()}}]}
        p = self.data / "kubeconfig"
        p.write_text(json.dumps(kc))
        p.chmod(0o600)

    def replica(self, i, *extra):
        return self.spawn(f"r{i}", "server", "--store", "etcd", "--etcd-endpoints", ",".join(self.endpoints),
                          "--data-dir", str(self.dir / f"r{i}"), "--listen", f"127.0.0.1:{self.ports[i]}",
                          "--insecure", "--tokens", str(self.data / "tokens.csv"),
                          "--agent-token-file", str(self.data / "agent.token"), "--replica-id", f"r{i}",
                          "--log-level", "info", *LEASE, *extra)

    def readyz(self, i):
        try:
            with urllib.request.urlopen(self.urls[i] + "/readyz", timeout=2) as r:
                return r.read().decode()
        except OSError:
            return None

    def metrics(self, i):
        req = urllib.request.Request(self.urls[i] + "/metrics",
                                     headers={"Authorization": f"Bearer {self.admin_token()}"})
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.read().decode()

    def leaders(self, among):
        return [i for i in among if (self.readyz(i) or "").startswith("ok\nleader ")]

    def agent(self, node, port):
        self.spawn(f"agent-{node}", "agent", "--server", ",".join(self.urls), "--token-file",
                   str(self.data / f"{node}.token"), "--node-name", node, "--mock", "2xH100-80GB",
                   "--state-dir", str(self.dir / "agents" / node), "--listen", f"127.0.0.1:{port}",
                   "--heartbeat-ms", "500", "--grace-ms", "500", "--log-level", "warn",
                   "--agent-token-file", str(self.data / "agent.token"))


def node_ready(s, name):
    n = s.node(name) or {}
    return any(c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", []))


def running(s, name):
    p = s.pod(name)
    return p and p.get("status", {}).get("phase") == "Running" and p


@pytest.fixture
def one_etcd(tmp_path):
    c = EtcdCluster(tmp_path, members=1)
    yield c
    c.stop()


def test_two_replicas_one_leader_kill9_failover(gpusched_bin, tmp_path, one_etcd):
    s = Replicas(gpusched_bin, tmp_path, one_etcd.endpoints, n=2)
    try:
        s.replica(0)
        s.replica(1)
        wait_for(lambda: all(s.readyz(i) for i in (0, 1)), 30, "both replicas to serve")
        lead = wait_for(lambda: s.leaders((0, 1)), 10, "a leader")
        assert len(lead) == 1, [s.readyz(i) for i in (0, 1)]
        lead = lead[0]
        other = 1 - lead
        assert s.readyz(other) == f"ok\nfollower r{other} (leader: r{lead})\n"
        assert f'gpusched_leader{{replica="r{lead}"}} 1' in s.metrics(lead)
        assert f'gpusched_leader{{replica="r{other}"}} 0' in s.metrics(other)
        assert "gpusched_leader_loops_running 1" in s.metrics(lead)
        assert "gpusched_leader_loops_running 0" in s.metrics(other)

        aport = free_ports(1)[0]
        s.agent("n1", aport)
        wait_for(lambda: node_ready(s, "n1"), 30, "node n1 Ready")
        s.cli("apply", "-f", "-", input=json.dumps(pod_manifest("before", "sleep 600", gpus=1)))
        before = wait_for(lambda: running(s, "before"), 30, "pod before Running")
        # The follower serves reads and writes of the same objects (one store).
        hdr = {"Authorization": f"Bearer {s.admin_token()}"}
        req = urllib.request.Request(s.urls[other] + "/api/v1/namespaces/default/pods/before", headers=hdr)
        with urllib.request.urlopen(req, timeout=5) as r:
            assert json.loads(r.read())["spec"]["nodeName"] == "n1"

        t0 = time.time()
        s.stop(f"r{lead}", sig=signal.SIGKILL)
        wait_for(lambda: s.leaders((other,)), 15, "the follower to lead")
        failover = time.time() - t0
        print(f"\nreplicas: r{other} leads {failover:.2f}s after r{lead} was killed (lease 2s, retry 0.5s)")
        assert failover < 2 + 0.5 * 2.2 + 2, failover  # lease + one jittered retry + slack

        # The client's first URL may be the dead one: it moves on. The new leader binds the new pod,
        # the agent (which had to fail over too) runs it, and the old pod ran on throughout.
        s.cli("apply", "-f", "-", input=json.dumps(pod_manifest("after", "sleep 600", gpus=1)))
        after = wait_for(lambda: running(s, "after"), 40, "pod after Running on the new leader")
        assert after["spec"]["nodeName"] == "n1"
        now = s.pod("before")
        assert now["status"]["phase"] == "Running"
        assert now["metadata"]["uid"] == before["metadata"]["uid"]
        assert set(now["metadata"]["annotations"]["gpusched.io/devices"].split(",")).isdisjoint(
            after["metadata"]["annotations"]["gpusched.io/devices"].split(","))
        assert f'gpusched_leader{{replica="r{other}"}} 1' in s.metrics(other)
    finally:
        s.stop_all()


def test_paused_leader_steps_down_and_binds_nothing(gpusched_bin, tmp_path, one_etcd):
    s = Replicas(gpusched_bin, tmp_path, one_etcd.endpoints, n=2)
    try:
        s.replica(0)
        s.replica(1)
        wait_for(lambda: all(s.readyz(i) for i in (0, 1)), 30, "both replicas to serve")
        lead = wait_for(lambda: s.leaders((0, 1)), 10, "a leader")[0]
        other = 1 - lead
        aport = free_ports(1)[0]
        s.agent("n1", aport)
        wait_for(lambda: node_ready(s, "n1"), 30, "node n1 Ready")
        # A paused server accepts connections and answers nothing: a client notices only at its request
        # timeout, so this one lists the live replica first (docs/CONTROL_PLANE.md says so).
        s.write_kubeconfig([s.urls[other], s.urls[lead]])
        s.procs[f"r{lead}"].send_signal(signal.SIGSTOP)
        try:
            wait_for(lambda: s.leaders((other,)), 15, "the follower to lead while the leader is paused")
            # Pods created while the old leader sleeps are bound by the new one, once each.
            for i in range(3):
                s.cli("apply", "-f", "-", input=json.dumps(pod_manifest(f"p{i}", "sleep 600")))
            time.sleep(3)  # longer than the lease: the paused one wakes with stale state
        finally:
            s.procs[f"r{lead}"].send_signal(signal.SIGCONT)
        wait_for(lambda: (s.readyz(lead) or "").startswith("ok\nfollower"), 10, "the woken replica to follow")
        assert s.leaders((0, 1)) == [other]
        for i in range(3):
            p = wait_for(lambda: running(s, f"p{i}"), 30, f"p{i} Running")
            assert p["spec"]["nodeName"] == "n1"
        # The loops stop on the worker thread after the fence closed; they are gone soon after.
        m = wait_for(lambda: (lambda t: "gpusched_leader_loops_running 0" in t and t)(s.metrics(lead)), 10,
                     "the woken replica's loops to stop")
        assert f'gpusched_leader{{replica="r{lead}"}} 0' in m
        assert "gpusched_leader_lost_total 1" in m
    finally:
        s.stop_all()


def test_three_replicas_on_three_etcd_members(gpusched_bin, tmp_path, etcd_cluster):
    s = Replicas(gpusched_bin, tmp_path, etcd_cluster.endpoints, n=3)
    try:
        for i in range(3):
            s.replica(i)
        wait_for(lambda: all(s.readyz(i) for i in range(3)), 30, "three replicas to serve")
        lead = wait_for(lambda: s.leaders(range(3)), 10, "a leader")
        assert len(lead) == 1
        s.stop(f"r{lead[0]}", sig=signal.SIGKILL)
        rest = [i for i in range(3) if i != lead[0]]
        new = wait_for(lambda: s.leaders(rest), 15, "another leader")
        assert len(new) == 1
        # An etcd member dies: the replicas carry on with the quorum left.
        etcd_cluster.kill(0)
        s.cli("apply", "-f", "-", input=json.dumps(PRIO))
        r = s.cli("get", "priorityclass", "batch", "-o", "json")
        assert json.loads(r.stdout)["value"] == 1000
        time.sleep(2)
        assert s.leaders(rest) == new  # the lease kept being renewed through the member's death
    finally:
        s.stop_all()


def test_migrate_sqlite_to_etcd_round_trip(gpusched_bin, tmp_path, one_etcd):
    s = Stack(gpusched_bin, tmp_path)
    s.node_tokens()
    port = free_ports(1)[0]
    s.spawn("sqlite", "server", "--data-dir", str(s.data), "--listen", f"127.0.0.1:{port}", "--no-scheduler",
            "--log-level", "warn")
    wait_for(lambda: (s.data / "kubeconfig").exists() and s.cli("get", "nodes", check=False).returncode == 0, 20,
             "the SQLite server")
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
            PRIO,
            pod_manifest("web", "sleep 5", ns="team")]
    s.cli("apply", "-f", "-", input="\n".join(json.dumps(d) for d in docs))
    old = json.loads(s.cli("get", "pod", "web", "-n", "team", "-o", "json").stdout)
    old_pc = json.loads(s.cli("get", "priorityclass", "batch", "-o", "json").stdout)
    to = "etcd:" + ",".join(one_etcd.endpoints)

    # A running server holds the store: refused, naming why.
    r = subprocess.run([gpusched_bin, "store", "migrate", "--from", f"sqlite:{s.data}", "--to", to],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "in use by a running gpusched server" in r.stderr, r.stderr
    s.stop("sqlite")

    r = subprocess.run([gpusched_bin, "store", "migrate", "--from", f"sqlite:{s.data}", "--to", to],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "copied " in r.stdout and "priorityclasses.scheduling.k8s.io 3" in r.stdout and "pods 1" in r.stdout, \
        r.stdout
    assert "above the SQLite store's last" in r.stdout, r.stdout
    # Again: the prefix is not empty now.
    r2 = subprocess.run([gpusched_bin, "store", "migrate", "--from", f"sqlite:{s.data}", "--to", to],
                        capture_output=True, text=True, timeout=60)
    assert r2.returncode == 1 and "already holds" in r2.stderr and "--force" in r2.stderr, r2.stderr
    # In etcd under kube-apiserver's layout.
    keys = one_etcd.etcdctl("get", "/registry/", "--prefix", "--keys-only").stdout.split()
    assert "/registry/pods/team/web" in keys and "/registry/priorityclasses.scheduling.k8s.io/batch" in keys, keys

    # A server on etcd serves the same objects, with higher resourceVersions.
    s.spawn("etcd", "server", "--store", "etcd", "--etcd-endpoints", ",".join(one_etcd.endpoints), "--data-dir",
            str(s.data), "--listen", f"127.0.0.1:{port}", "--no-scheduler", "--log-level", "warn")
    wait_for(lambda: s.cli("get", "pod", "web", "-n", "team", check=False).returncode == 0, 30, "the etcd server")
    new = json.loads(s.cli("get", "pod", "web", "-n", "team", "-o", "json").stdout)
    new_pc = json.loads(s.cli("get", "priorityclass", "batch", "-o", "json").stdout)
    assert new["metadata"]["uid"] == old["metadata"]["uid"]
    assert new["spec"] == old["spec"]
    assert new_pc["value"] == old_pc["value"] == 1000
    newest_old = max(int(old["metadata"]["resourceVersion"]), int(old_pc["metadata"]["resourceVersion"]))
    assert int(new["metadata"]["resourceVersion"]) > newest_old
    assert int(new_pc["metadata"]["resourceVersion"]) > newest_old
    s.stop_all()


def test_migrate_flag_errors(gpusched_bin, tmp_path):
    def run(*args):
        return subprocess.run([gpusched_bin, "store", "migrate", *args], capture_output=True, text=True, timeout=30)
    r = run("--from", "/x", "--to", "etcd:http://127.0.0.1:1")
    assert r.returncode == 2 and '--from "/x": want sqlite:DATA_DIR' in r.stderr, r.stderr
    r = run("--from", f"sqlite:{tmp_path}", "--to", "http://127.0.0.1:1")
    assert r.returncode == 2 and '--to "http://127.0.0.1:1": want etcd:URL' in r.stderr, r.stderr
    r = run("--from", f"sqlite:{tmp_path}", "--to", "etcd:http://127.0.0.1:1", "--etcd-endpoints", "x")
    assert r.returncode == 2 and "--etcd-endpoints: not a migrate flag" in r.stderr, r.stderr
    r = run("--from", f"sqlite:{tmp_path}", "--to", "etcd:http://127.0.0.1:1")
    assert r.returncode == 1 and "no store there" in r.stderr, r.stderr


def test_server_replica_flag_errors(gpusched_bin, tmp_path):
    def run(*args):
        return subprocess.run([gpusched_bin, "server", "--data-dir", str(tmp_path), *args], capture_output=True,
                              text=True, timeout=30)
    r = run("--leader-elect-lease-duration", "10s", "--leader-elect-renew-deadline", "10s")
    assert r.returncode == 2
    assert '--leader-elect-renew-deadline "10s": must be less than --leader-elect-lease-duration (10s)' in r.stderr
    r = run("--leader-elect-retry-period", "fast")
    assert r.returncode == 2 and '--leader-elect-retry-period "fast"' in r.stderr, r.stderr
    r = run("--replica-id", "")
    assert r.returncode == 2 and '--replica-id "": must be 1 to 250 characters' in r.stderr, r.stderr
