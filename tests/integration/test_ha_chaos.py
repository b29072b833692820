"""The control plane highly available, hurt: three etcd members, several
`gpusched server --store etcd` replicas electing one leader, two agents
running short pods as processes (tests/integration/etcd.py for etcd).

- kill -9 of the leading server twice (each restarted) and of one etcd
  member once (restarted) while GS_HA_PODS (default 1,000) pods of 1 GPU
  and 0.2 s run: no pod lost, none created twice, none bound twice, every
  pod Succeeded and ran exactly once; the time from each kill to the first
  binding made after it (the new leader's) is printed;
- the leader frozen with SIGSTOP for longer than its lease: a follower
  leads and binds; the old one, woken with SIGCONT, stops leading and
  never leads or runs the control loops again while the rest finish
  (gpusched_leader, gpusched_leader_loops_running on its /metrics), and no
  pod is bound twice (what it had in hand when frozen is fenced).

Beside each run a sampler checks every ~100 ms that no GPU is held by two
Running pods: in the API (pod phase and the gpusched.io/devices annotation),
in the agents' own reports, and in the pods' processes
(NVIDIA_VISIBLE_DEVICES); and every second, from a full list, that no pod
name got a second uid and no pod a second node. Leases are short (2 s
lease, 1.5 s renew deadline, 0.5 s retry) to keep the file within a few
minutes on two cores.
"""
import json
import os
import random
import re
import secrets
import signal
import subprocess
import threading
import time
import urllib.request

from etcd import EtcdCluster
from stack import Server, free_port, phase, pod_manifest, share_identity, wait_for

PODS = int(os.environ.get("GS_HA_PODS", "1000"))
LEASE = ("2s", "1500ms", "500ms")  # lease duration, renew deadline, retry period
LEASE_S = 2.0
LEASE_PATH = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/gpusched-control-plane"
MOCK = "8xH100-80GB"


class HA:
    """etcd members, server replicas r0..rN-1 (one CA, one tokens file, fixed
    ports, so a restarted replica comes back at its URL) and agents that know
    every replica's URL."""

    def __init__(self, binary, tmp, etcd, replicas=2, nodes=("n1", "n2"), extra=()):
        self.bin, self.dir, self.etcd, self.nodes = binary, tmp, etcd, list(nodes)
        self.servers = []
        for i in range(replicas):
            name = f"r{i}"
            args = ["--store", "etcd", "--etcd-endpoints", ",".join(etcd.endpoints), "--replica-id", name,
                    "--leader-elect-lease-duration", LEASE[0], "--leader-elect-renew-deadline", LEASE[1],
                    "--leader-elect-retry-period", LEASE[2], *extra]
            self.servers.append(Server(binary, tmp / name, args, name=name))
        self.agents, self.agent_logs = {}, {}
        self.paused = set()  # names of replicas frozen with SIGSTOP: the test's own requests avoid them
        self.agent_ports = {n: free_port() for n in self.nodes}

    # --- servers ---
    def start(self):
        first = self.servers[0]
        write_tokens(first.data, self.nodes)
        first.start()
        for s in self.servers[1:]:
            share_identity(first, s)
            s.start()

    def live(self):
        return [s for s in self.servers if s.pid is not None and s.name not in self.paused]

    def pause(self, s):
        self.paused.add(s.name)
        s.send(signal.SIGSTOP)

    def resume(self, s):
        s.send(signal.SIGCONT)
        self.paused.discard(s.name)

    def api(self, method, path, **kw):
        """The request through the first live replica that answers (as a client with every URL would)."""
        last, timeout = None, kw.pop("timeout", 10)
        for s in self.live():
            try:
                r = s.call(method, path, timeout=timeout, **kw)
            except OSError as e:
                last = e
                continue
            if r.status_code < 500:
                return r
            last = r.text
        raise AssertionError(f"no replica answered {method} {path}: {last}")

    def holder(self):
        """The Lease's holder (a replica's name) as the API says, or None."""
        try:
            r = self.api("GET", LEASE_PATH, timeout=3)
        except AssertionError:
            return None
        return r.json().get("spec", {}).get("holderIdentity") if r.status_code == 200 else None

    def leader(self, timeout=20):
        """The replica that leads: the Lease's holder, alive, and saying so on its /metrics."""
        def find():
            h = self.holder()
            s = next((s for s in self.live() if s.name == h), None)
            return s if s is not None and metric(s, "gpusched_leader") == 1 else None
        return wait_for(find, timeout, "a leading replica", step=0.1)

    # --- agents ---
    def agent(self, node):
        first = self.servers[0]
        log = open(self.dir / f"agent-{node}.log", "ab")
        urls = ",".join(s.url for s in self.servers)
        p = subprocess.Popen([self.bin, "agent", "--kubeconfig", first.kubeconfig, "--server", urls,
                              "--token-file", str(first.data / f"{node}.token"), "--node-name", node,
                              "--mock", MOCK, "--state-dir", str(self.dir / "agents" / node),
                              "--listen", f"127.0.0.1:{self.agent_ports[node]}", "--heartbeat-ms", "500",
                              "--grace-ms", "500", "--log-level", "warn",
                              "--agent-token-file", str(first.data / "agent.token")],
                             stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        self.agents[node], self.agent_logs[node] = p, log

    def agent_report(self, node):
        tok = (self.servers[0].data / "agent.token").read_text().strip()
        req = urllib.request.Request(f"http://127.0.0.1:{self.agent_ports[node]}/pods",
                                     headers={"Authorization": f"Bearer {tok}"})
        try:
            with urllib.request.urlopen(req, timeout=2) as f:
                return json.loads(f.read().decode())
        except (OSError, ValueError):
            return None

    def stop(self):
        for p in self.agents.values():
            if p.poll() is None:
                p.terminate()
        for n, p in self.agents.items():
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            self.agent_logs[n].close()
        return {s.name: s.stop() for s in self.servers}

    def logs(self, lines=40):
        out = []
        for s in self.servers:
            out.append(f"--- {s.name} ---")
            out.extend(s.log().splitlines()[-lines:])
        for n in self.nodes:
            out.append(f"--- agent {n} ---")
            out.extend((self.dir / f"agent-{n}.log").read_text(errors="replace").splitlines()[-lines:])
        return "\n".join(out)


def write_tokens(data, nodes):
    """tokens.csv with an admin token and one node token per node (also in data/NODE.token)."""
    data.mkdir(parents=True, exist_ok=True)
    lines = ["# token,user,groups,namespaces,role", f"{secrets.token_hex(16)},admin,system:masters,,admin"]
    for n in nodes:
        tok = secrets.token_hex(16)
        lines.append(f"{tok},system:node:{n},system:nodes,,node")
        (data / f"{n}.token").write_text(tok + "\n")
        (data / f"{n}.token").chmod(0o600)
    (data / "tokens.csv").write_text("\n".join(lines) + "\n")
    (data / "tokens.csv").chmod(0o600)


def metric(server, name, labels=None):
    """One sample of server's /metrics (summed over series matching labels), or None."""
    try:
        text = server.call("GET", "/metrics", timeout=3).text
    except OSError:
        return None
    total, seen = 0.0, False
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)", line)
        if not m or m.group(1) != name:
            continue
        if labels and not all(f'{k}="{v}"' in (m.group(2) or "") for k, v in labels.items()):
            continue
        total, seen = total + float(m.group(3)), True
    return total if seen else None


def pod_processes(marker):
    """The pods' own processes (their command line holds marker): their environment."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() not in f.read():
                    continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split("=", 1) for kv in f.read().decode(errors="replace").split("\0") if "=" in kv)
        except OSError:
            continue
        if "GPUSCHED_POD" in env:
            out.append(env)
    return out


class Sampler:
    """The invariants, sampled on a thread until stopped (see the module's
    docstring); .violations lists what broke, .most_running shows the
    sampler saw pods run at all."""

    def __init__(self, ha, marker):
        self.ha, self.marker = ha, marker
        self.violations, self.most_running, self.samples = [], 0, 0
        self.uid_of, self.node_of = {}, {}  # name -> uid, uid -> node: from full lists
        self.stop_ev = threading.Event()
        self.t = threading.Thread(target=self._run, daemon=True)

    def __enter__(self):
        self.t.start()
        return self

    def __exit__(self, *exc):
        self.stop_ev.set()
        self.t.join(20)

    def _add(self, v):
        if v not in self.violations:
            self.violations.append(v)

    def _api_running(self):
        r = self.ha.api("GET", "/api/v1/pods", params={"fieldSelector": "status.phase=Running"}, timeout=3)
        held = {}
        items = r.json().get("items", []) if r.status_code == 200 else []
        self.most_running = max(self.most_running, len(items))
        for p in items:
            node = p["spec"].get("nodeName")
            dev = p["metadata"].get("annotations", {}).get("gpusched.io/devices", "")
            for g in filter(None, dev.split(",")):
                key = (node, g.split(":")[0])
                if key in held and held[key] != p["metadata"]["uid"]:
                    self._add(f"api: GPU {key} held by two running pods {held[key]} and {p['metadata']['uid']}")
                held[key] = p["metadata"]["uid"]

    def _agents(self):
        for n in self.ha.nodes:
            seen = {}
            for p in (self.ha.agent_report(n) or {}).get("pods", []):
                if p.get("phase") != "Running":
                    continue
                for g in p.get("devices", []):
                    if g in seen and seen[g] != p["name"]:
                        self._add(f"agent {n}: GPU {g} held by {seen[g]} and {p['name']}")
                    seen[g] = p["name"]

    def _processes(self):
        gpus = {}
        for env in pod_processes(self.marker):
            uid = env.get("GPUSCHED_POD_UID")
            for g in filter(None, env.get("NVIDIA_VISIBLE_DEVICES", "").split(",")):
                key = (env.get("GPUSCHED_NODE"), g)
                if key in gpus and gpus[key] != uid:
                    self._add(f"processes: GPU {key} used by pods {gpus[key]} and {uid} at once")
                gpus[key] = uid

    def full_list(self):
        r = self.ha.api("GET", "/api/v1/namespaces/default/pods", timeout=20)
        items = r.json().get("items", []) if r.status_code == 200 else []
        for p in items:
            name, uid, node = p["metadata"]["name"], p["metadata"]["uid"], p["spec"].get("nodeName")
            if self.uid_of.setdefault(name, uid) != uid:
                self._add(f"pod {name} created twice: uids {self.uid_of[name]} and {uid}")
            if node and self.node_of.setdefault(uid, node) != node:
                self._add(f"pod {name} ({uid}) bound twice: {self.node_of[uid]} then {node}")
        return items

    def _run(self):
        last_full = 0.0
        while not self.stop_ev.is_set():
            try:
                self._api_running()
                self._agents()
                self._processes()
                if time.time() - last_full >= 1.0:
                    self.full_list()
                    last_full = time.time()
                self.samples += 1
            except AssertionError:
                pass  # no replica answered this instant (all of them restarting): sampled again next time
            time.sleep(0.1)


def unbound(ha):
    """How many pods have no node yet, or None while no replica answers."""
    try:
        r = ha.api("GET", "/api/v1/namespaces/default/pods", params={"fieldSelector": "spec.nodeName="}, timeout=5)
    except AssertionError:
        return None
    return len(r.json()["items"]) if r.status_code == 200 else None


def wait_unbound(ha, pred, timeout, what):
    """Waits until pred(count of unbound pods) holds; returns (count, when)."""
    def check():
        n = unbound(ha)
        return (n, time.time()) if n is not None and pred(n) else None
    return wait_for(check, timeout, what, step=0.1)


def kill_leader_and_time_failover(ha, restart=True):
    """kill -9 of the leader; returns (old, new leader, seconds from the kill to
    the first binding after it)."""
    old = ha.leader()
    old.stop(signal.SIGKILL)
    t0 = time.time()
    n0, _ = wait_unbound(ha, lambda n: True, 10, "the unbound pods counted after the kill")
    assert n0 > 0, "every pod was bound before the kill: nothing left to time the failover with"
    _, bound = wait_unbound(ha, lambda n: n < n0, 30, "a binding after the leader was killed")
    new = ha.leader()
    assert new is not old
    if restart:
        old.start()
    return old, new, bound - t0


def docs_for(ran, prefix, n):
    return [pod_manifest(f"{prefix}{i:04d}", f'echo "$GPUSCHED_POD_UID" >> {ran}/$GPUSCHED_POD; sleep 0.2', gpus=1,
                         run_as_root=True) for i in range(n)]


def create_all(ha, docs):
    """Creates the pods (through any replica) with a few threads; each create is retried on
    another replica if one fails, and AlreadyExists after a retry counts as created."""
    errors = []

    def worker(chunk):
        for d in chunk:
            for attempt in range(20):
                try:
                    r = ha.api("POST", "/api/v1/namespaces/default/pods", json=d)
                except AssertionError as e:
                    r = None
                    err = str(e)
                if r is not None and (r.status_code == 201 or (attempt and r.status_code == 409)):
                    break
                err = r.text if r is not None else err
                time.sleep(0.2)
            else:
                errors.append((d["metadata"]["name"], err))

    ts = [threading.Thread(target=worker, args=(docs[i::4],)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:5]


def wait_all_succeeded(ha, names, timeout):
    def done():
        try:
            pods = {p["metadata"]["name"]: phase(p) for p in
                    ha.api("GET", "/api/v1/namespaces/default/pods", timeout=20).json()["items"]}
        except AssertionError:
            return False
        return all(pods.get(n) == "Succeeded" for n in names)
    try:
        wait_for(done, timeout, "every pod to succeed", step=1)
    except AssertionError as e:
        pods = {p["metadata"]["name"]: phase(p) for p in
                ha.api("GET", "/api/v1/namespaces/default/pods", timeout=20).json()["items"]}
        by, stuck = {}, {}
        for n in names:
            ph = pods.get(n, "missing")
            by[ph] = by.get(ph, 0) + 1
            if ph != "Succeeded":
                stuck.setdefault(ph, []).append(n)
        said = []  # what the replicas last logged about the first stuck pods
        for n in [n for ns in stuck.values() for n in ns][:3]:
            lines = [ln for s in ha.servers for ln in s.log().splitlines() if f"pods/default/{n} " in ln + " "]
            said.append(f"{n}: {lines[-1] if lines else 'nothing logged'}")
        raise AssertionError(f"{e}; pods by phase: {by}; not Succeeded: "
                             + "; ".join(f"{ph}: {ns[:5]}" for ph, ns in stuck.items())
                             + ("\n" + "\n".join(said) if said else "")) from None


def assert_converged(ha, names, ran):
    pods = {p["metadata"]["name"]: p for p in ha.api("GET", "/api/v1/namespaces/default/pods", timeout=20).json()["items"]}
    lost = [n for n in names if n not in pods]
    assert not lost, f"pods lost: {lost[:10]}"
    extra = [n for n in pods if n not in names]
    assert not extra, f"pods nobody created: {extra[:10]}"
    wrong = [(n, phase(pods[n])) for n in names if phase(pods[n]) != "Succeeded"]
    assert not wrong, f"pods not Succeeded: {wrong[:10]}"
    counts = {p.name: p.read_text().split() for p in ran.iterdir()}
    never = [n for n in names if n not in counts]
    assert not never, f"never ran: {never[:10]}"
    twice = {n: u for n, u in counts.items() if len(u) != 1}
    assert not twice, f"ran more than once: {list(twice.items())[:10]}"
    other = [n for n in names if counts[n][0] != pods[n]["metadata"]["uid"]]
    assert not other, f"ran under another uid than the stored pod's: {other[:10]}"


def test_leader_and_etcd_member_killed_during_a_workload(gpusched_bin, tmp_path):
    etcd = EtcdCluster(tmp_path)
    ha = HA(gpusched_bin, tmp_path, etcd, replicas=3)
    ran = tmp_path / "ran"
    ran.mkdir()
    ok = False
    try:
        ha.start()
        for n in ha.nodes:
            ha.agent(n)
        wait_for(lambda: all(ha.api("GET", f"/api/v1/nodes/{n}").status_code == 200 for n in ha.nodes), 30,
                 "the nodes to register")
        ha.leader()
        docs = docs_for(ran, "w", PODS)
        names = [d["metadata"]["name"] for d in docs]
        rnd = random.Random(16)
        start = time.time()
        failovers = []
        with Sampler(ha, str(ran)) as inv:
            create_all(ha, docs)
            for what in ("server", "etcd", "server"):
                time.sleep(rnd.uniform(1.0, 3.0))
                if what == "server":
                    old, new, dt = kill_leader_and_time_failover(ha)
                    failovers.append(dt)
                    print(f"\nha chaos: leader {old.name} killed, {new.name} leads, first binding after "
                          f"{dt:.2f}s")
                else:
                    victim = etcd.wait_leader()
                    etcd.kill(victim)  # etcd's own leader: the harder case (an election, writes pause)
                    time.sleep(rnd.uniform(0.5, 2.0))
                    etcd.start(victim)
                    print(f"\nha chaos: etcd member {victim} (its leader) killed and restarted")
            wait_all_succeeded(ha, names, 60 + PODS // 5)
            inv.full_list()
        elapsed = time.time() - start
        assert inv.samples > 20 and inv.most_running > 0, (inv.samples, inv.most_running)
        assert not inv.violations, inv.violations[:5]
        assert_converged(ha, names, ran)
        print(f"\nha chaos: {PODS} pods through 2 leader kills and 1 etcd member kill, all Succeeded in "
              f"{elapsed:.1f}s; failover (kill to the first binding after it): "
              + ", ".join(f"{x:.2f}s" for x in failovers))
        ok = True
    finally:
        codes = ha.stop()
        etcd.stop()
        if not ok:
            print(ha.logs() + "\n" + etcd.log_tail())
    assert all(c in (0, None) for c in codes.values()), codes


def test_leader_paused_past_its_lease_is_fenced(gpusched_bin, tmp_path):
    etcd = EtcdCluster(tmp_path)
    ha = HA(gpusched_bin, tmp_path, etcd, replicas=2)
    ran = tmp_path / "ran"
    ran.mkdir()
    ok = False
    try:
        ha.start()
        for n in ha.nodes:
            ha.agent(n)
        wait_for(lambda: all(ha.api("GET", f"/api/v1/nodes/{n}").status_code == 200 for n in ha.nodes), 30,
                 "the nodes to register")
        old = ha.leader()
        n_pods = max(100, PODS // 5)
        docs = docs_for(ran, "s", n_pods)
        names = [d["metadata"]["name"] for d in docs]
        with Sampler(ha, str(ran)) as inv:
            create_all(ha, docs)
            wait_unbound(ha, lambda n: n < n_pods, 20, "the first bindings")
            ha.pause(old)
            t0 = time.time()
            try:
                n0, _ = wait_unbound(ha, lambda n: n > 0, 5, "pods left unbound when the leader froze")
                new = ha.leader(timeout=LEASE_S * 5)
                assert new is not old
                _, when = wait_unbound(ha, lambda n: n < n0, 20, "the new leader's first binding")
                took = when - t0
                time.sleep(max(0.0, LEASE_S * 2 - (time.time() - t0)))  # frozen for at least twice its lease
            finally:
                ha.resume(old)
            print(f"\nha pause: {old.name} frozen, {new.name} leads and binds after {took:.2f}s; "
                  f"{old.name} woken after {time.time() - t0:.1f}s")
            # Woken, the old leader sees it lost the Lease and stops its loops; whatever its threads had
            # in hand is fenced. From then on it must not lead or run the loops again.
            wait_for(lambda: metric(old, "gpusched_leader") == 0 and metric(old, "gpusched_leader_loops_running") == 0,
                     10, f"{old.name} to stop leading")
            woke = time.time()
            done = threading.Event()
            relapses = []

            def watch_old():
                while not done.is_set():
                    if metric(old, "gpusched_leader") == 1 or metric(old, "gpusched_leader_loops_running") == 1:
                        relapses.append(time.time() - woke)
                    time.sleep(0.1)
            t = threading.Thread(target=watch_old, daemon=True)
            t.start()
            try:
                wait_all_succeeded(ha, names, 60 + n_pods // 5)
            finally:
                done.set()
                t.join(10)
            assert not relapses, f"{old.name} led or ran the loops again {relapses[0]:.1f}s after it woke"
            print(f"ha pause: {old.name} followed from then on; its refused binding writes: "
                  f"{metric(old, 'gpusched_scheduler_binding_write_failures_total') or 0:.0f}")
            assert ha.holder() == new.name
            inv.full_list()
        assert not inv.violations, inv.violations[:5]
        assert_converged(ha, names, ran)
        ok = True
    finally:
        codes = ha.stop()
        etcd.stop()
        if not ok:
            print(ha.logs() + "\n" + etcd.log_tail())
    assert all(c in (0, None) for c in codes.values()), codes
