"""A real etcd cluster for the integration tests of the etcd store backend.

EtcdCluster(tmpdir, members=3) starts that many members of Debian's etcd
(/usr/bin/etcd, package etcd-server, 3.4; $GS_ETCD_BIN overrides) on free
loopback ports, each with its own data directory and log under tmpdir, and
waits until every member answers /health. Raft timings are short
(heartbeat 50 ms, election 500 ms) so a killed member's absence and a new
etcd leader settle in about a second, and the watch progress interval is
short so servers see progress notifications (bookmarks) within a test.

A member is killed (SIGKILL), paused (SIGSTOP) and restarted on the same
ports with the same data directory (--initial-cluster-state existing), the
way a machine comes back: tests of failover and chaos use that. Nothing
here imitates etcd; when the binary is missing the cluster cannot start and
the test fails (pytest.fail), it never skips.
"""
import json
import os
import pathlib
import signal
import socket
import subprocess
import time
import urllib.request
import ctypes

import pytest

ETCD = os.environ.get("GS_ETCD_BIN", "/usr/bin/etcd")
ETCDCTL = os.environ.get("GS_ETCDCTL_BIN", "/usr/bin/etcdctl")


def _die_with_parent():
    """Runs in the child before exec: the member gets SIGKILL when the thread
    that started it exits, so a test process that dies leaves no etcd behind.
    (It is the starting thread that counts: start members from the test's
    main thread.)"""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def free_ports(n):
    """n distinct free loopback ports. The sockets stay bound until all are
    picked, so one call never hands out a port twice."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class EtcdCluster:
    def __init__(self, tmpdir, members=3, heartbeat_ms=50, election_ms=500, progress_notify="1s",
                 start=True, timeout=30):
        if not os.path.exists(ETCD):
            pytest.fail(f"etcd not found at {ETCD}: install Debian's etcd-server (scripts/install-deps.sh)")
        if members < 1:
            raise ValueError(f"EtcdCluster: members={members}: need at least one member")
        self.dir = pathlib.Path(tmpdir) / "etcd"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.n = members
        self.names = [f"m{i}" for i in range(members)]
        ports = free_ports(2 * members)
        self.client_ports, self.peer_ports = ports[:members], ports[members:]
        self.endpoints = [f"http://127.0.0.1:{p}" for p in self.client_ports]
        self.token = f"gs-{os.getpid()}-{ports[0]}"
        self.timing = (heartbeat_ms, election_ms, progress_notify)
        self.procs = [None] * members
        self.logs = [None] * members
        self.started = [False] * members  # ever started: a restart joins the existing cluster
        if start:
            try:
                for i in range(members):
                    self._spawn(i)
                self.wait_healthy(timeout=timeout)
            except BaseException:
                self.stop()
                raise

    # --- one member ---
    def _args(self, i):
        hb, el, pn = self.timing
        peer = lambda j: f"http://127.0.0.1:{self.peer_ports[j]}"  # noqa: E731
        return [ETCD, "--name", self.names[i], "--data-dir", str(self.dir / self.names[i]),
                "--listen-client-urls", self.endpoints[i], "--advertise-client-urls", self.endpoints[i],
                "--listen-peer-urls", peer(i), "--initial-advertise-peer-urls", peer(i),
                "--initial-cluster", ",".join(f"{self.names[j]}={peer(j)}" for j in range(self.n)),
                "--initial-cluster-token", self.token,
                "--initial-cluster-state", "existing" if self.started[i] else "new",
                "--heartbeat-interval", str(hb), "--election-timeout", str(el),
                "--experimental-watch-progress-notify-interval", pn,
                "--logger", "zap", "--log-outputs", "stderr", "--log-level", "error"]

    def _spawn(self, i):
        if self.procs[i] is not None and self.procs[i].poll() is None:
            raise AssertionError(f"etcd member {i} is already running (pid {self.procs[i].pid})")
        log = open(self.dir / f"{self.names[i]}.log", "ab")
        log.write(f"--- start {time.strftime('%H:%M:%S')} ---\n".encode())
        log.flush()
        self.procs[i] = subprocess.Popen(self._args(i), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        if self.logs[i]:
            self.logs[i].close()
        self.logs[i] = log
        self.started[i] = True

    def pid(self, i):
        p = self.procs[i]
        return p.pid if p is not None and p.poll() is None else None

    def kill(self, i):
        """SIGKILL of member i: no goodbye to its peers, its data directory stays."""
        p = self.procs[i]
        if p is None or p.poll() is not None:
            raise AssertionError(f"etcd member {i} is not running")
        p.send_signal(signal.SIGCONT)  # a paused member dies as well
        p.kill()
        p.wait(10)

    def start(self, i, wait=True, timeout=20):
        """Starts member i again on its ports with its data directory; with wait,
        returns once it answers /health (it has caught up with a leader)."""
        self._spawn(i)
        if wait:
            self._wait(lambda: self.healthy(i), timeout, f"etcd member {i} to rejoin")

    def pause(self, i):
        """SIGSTOP: the member keeps its sockets but answers nothing, like a partition."""
        os.kill(self.procs[i].pid, signal.SIGSTOP)

    def resume(self, i):
        os.kill(self.procs[i].pid, signal.SIGCONT)

    # --- the cluster ---
    def healthy(self, i):
        """Member i answers /health with health true (it sees a leader and can commit)."""
        if self.pid(i) is None:
            return False
        try:
            with urllib.request.urlopen(self.endpoints[i] + "/health", timeout=1) as r:
                return json.loads(r.read().decode()).get("health") == "true"
        except (OSError, ValueError):
            return False

    def wait_healthy(self, members=None, timeout=30):
        members = range(self.n) if members is None else members
        self._wait(lambda: all(self.healthy(i) for i in members), timeout,
                   f"etcd members {list(members)} to be healthy")

    def _wait(self, cond, timeout, what):
        end = time.time() + timeout
        while time.time() < end:
            if cond():
                return
            dead = [i for i, p in enumerate(self.procs) if p is not None and p.poll() is not None
                    and p.returncode not in (-signal.SIGKILL,)]
            if dead:
                break
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}\n{self.log_tail()}")

    def leader(self):
        """Index of the member that is etcd's Raft leader now, or None."""
        for i in range(self.n):
            if self.pid(i) is None:
                continue
            r = self.etcdctl("endpoint", "status", "-w", "json", endpoints=[self.endpoints[i]], check=False)
            if r.returncode != 0:
                continue
            try:
                st = json.loads(r.stdout)[0]["Status"]
                lead, me = st.get("leader"), st["header"]["member_id"]
            except (ValueError, KeyError, IndexError, TypeError):
                continue
            # During an election etcd's JSON leaves out "leader" (a zero field): no leader yet.
            if lead and lead == me:
                return i
        return None

    def wait_leader(self, timeout=10):
        """Index of etcd's leader once there is one (member 0 is a leader too: no truthiness here)."""
        end = time.time() + timeout
        while time.time() < end:
            i = self.leader()
            if i is not None:
                return i
            time.sleep(0.05)
        raise AssertionError(f"timed out after {timeout}s waiting for an etcd leader\n{self.log_tail()}")

    def etcdctl(self, *args, endpoints=None, check=True, timeout=20):
        """Runs etcdctl (v3 API) against the given endpoints (all members by default)."""
        if not os.path.exists(ETCDCTL):
            pytest.fail(f"etcdctl not found at {ETCDCTL}: install Debian's etcd-client (scripts/install-deps.sh)")
        env = dict(os.environ, ETCDCTL_API="3")
        r = subprocess.run([ETCDCTL, "--endpoints", ",".join(endpoints or self.endpoints),
                            "--dial-timeout", "2s", "--command-timeout", "5s", *args],
                           capture_output=True, text=True, env=env, timeout=timeout)
        if check:
            assert r.returncode == 0, f"etcdctl {' '.join(args)}: {r.stdout}{r.stderr}"
        return r

    def log(self, i):
        try:
            return (self.dir / f"{self.names[i]}.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines=30):
        out = []
        for i in range(self.n):
            p = self.procs[i]
            state = "never started" if p is None else ("running" if p.poll() is None else f"exited {p.returncode}")
            out.append(f"--- etcd member {i} ({self.endpoints[i]}, {state}) ---")
            out.extend(self.log(i).splitlines()[-lines:])
        return "\n".join(out)

    def stop(self):
        """Stops every member (SIGTERM, then SIGKILL after 10 s); the data stays in tmpdir."""
        for p in self.procs:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.terminate()
        for i, p in enumerate(self.procs):
            if p is None:
                continue
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
            if self.logs[i]:
                self.logs[i].close()
                self.logs[i] = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
