"""Helpers for tests that run the whole stack: `gpusched up`, or a server
and agents as separate processes, and a client bound to their kubeconfig."""
import json
import os
import pathlib
import secrets
import signal
import socket
import subprocess
import time
import urllib.request

import pytest


def wait_for(cond, timeout, what, step=0.1):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")


class Stack:
    def __init__(self, binary, workdir):
        self.bin = binary
        self.dir = pathlib.Path(workdir)
        self.data = self.dir / "data"
        self.procs = {}
        self.logs = {}

    # --- processes ---
    def spawn(self, name, *args, env=None):
        log = open(self.dir / f"{name}.log", "ab")
        e = dict(os.environ)
        e.update(env or {})
        p = subprocess.Popen([self.bin, *args], stdout=log, stderr=subprocess.STDOUT, cwd=self.dir, env=e)
        self.procs[name] = p
        self.logs[name] = log
        return p

    def stop(self, name, sig=signal.SIGTERM, timeout=20):
        p = self.procs.pop(name, None)
        if not p:
            return None
        if p.poll() is None:
            p.send_signal(sig)
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.logs.pop(name).close()
        return p.returncode

    def stop_all(self):
        for name in list(self.procs):
            self.stop(name)

    def log(self, name):
        return (self.dir / f"{name}.log").read_text(errors="replace")

    # --- credentials ---
    def node_tokens(self, *nodes):
        """Writes data/tokens.csv before a server first starts there: an admin token and one node token per node,
        each also in data/NODE.token, so agents read their own token from a file (never a command-line argument)."""
        self.data.mkdir(parents=True, exist_ok=True)
        lines = ["# token,user,groups,namespaces,role", f"{secrets.token_hex(16)},admin,system:masters,,admin"]
        for n in nodes:
            tok = secrets.token_hex(16)
            lines.append(f"{tok},system:node:{n},system:nodes,,node")
            f = self.data / f"{n}.token"
            f.write_text(tok + "\n")
            f.chmod(0o600)
        f = self.data / "tokens.csv"
        f.write_text("\n".join(lines) + "\n")
        f.chmod(0o600)

    def agent_args(self, node):
        """Connection flags of an agent: the kubeconfig for the server and CA, its node token from a file."""
        return ["--kubeconfig", self.kubeconfig, "--token-file", str(self.data / f"{node}.token")]

    # --- all in one ---
    def up(self, mock, *extra):
        info = self.dir / "info.json"
        if info.exists():
            info.unlink()
        self.spawn("up", "up", "--mock", mock, "--data-dir", str(self.data), "--listen", "127.0.0.1:0",
                   "--info", str(info), "--grace-ms", "1000", "--metrics-interval-ms", "300", *extra)
        wait_for(lambda: info.exists() or self.procs["up"].poll() is not None, 20, "gpusched up")
        assert info.exists(), self.log("up")
        self.info = json.loads(info.read_text())
        return self.info

    # --- client ---
    @property
    def kubeconfig(self):
        return str(self.data / "kubeconfig")

    def cli(self, *args, input=None, check=True, timeout=30):
        r = subprocess.run([self.bin, *args, "--kubeconfig", self.kubeconfig], input=input, capture_output=True,
                           text=True, timeout=timeout)
        if check:
            assert r.returncode == 0, f"gpusched {' '.join(args)}: {r.stdout}{r.stderr}"
        return r

    def pods(self):
        r = self.cli("get", "pods", "-A", "-o", "json", check=False)
        if r.returncode != 0:
            return None
        return json.loads(r.stdout).get("items", [])

    def pod(self, name, ns="default"):
        r = self.cli("get", "pod", name, "-n", ns, "-o", "json", check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    def node(self, name):
        r = self.cli("get", "node", name, "-o", "json", check=False)
        return json.loads(r.stdout) if r.returncode == 0 else None

    @property
    def agent_token(self):
        """The server's token for agents (every agent route but /metrics wants it)."""
        return (self.data / "agent.token").read_text().strip()

    def agent_get(self, port, path, timeout=5):
        req = urllib.request.Request(f"http://127.0.0.1:{port}{path}",
                                     headers={"Authorization": f"Bearer {self.agent_token}"})
        with urllib.request.urlopen(req, timeout=timeout) as f:
            return f.read().decode()

    def agent_pods(self, port):
        """The agent's own view (/pods) as a dict, or None while it does not answer."""
        try:
            return json.loads(self.agent_get(port, "/pods", timeout=2))
        except OSError:
            return None


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# What replicas of one control plane share, so that one kubeconfig, one CA and
# one set of tokens serve for all of them: the first replica's are copied into
# the others' data directories before they first start.
SHARED_FILES = ("ca.crt", "ca.key", "server.crt", "server.key", "tokens.csv", "agent.token")


class Server:
    """One `gpusched server` process with its own data directory, on a port
    fixed for its life (a restart comes back on the same URL), with any extra
    flags (e.g. `--store etcd --etcd-endpoints ...`). Its output goes to
    DIR/server.log."""

    def __init__(self, binary, data_dir, extra=(), port=None, name="server", env=None):
        self.bin, self.data, self.extra, self.name = binary, pathlib.Path(data_dir), list(extra), name
        self.env = dict(os.environ, **(env or {}))
        self.port = port or free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.proc, self.logf = None, None

    def start(self, wait=True, timeout=30):
        self.data.mkdir(parents=True, exist_ok=True)
        self.logf = open(self.data / "server.log", "ab")
        self.proc = subprocess.Popen([self.bin, "server", "--data-dir", str(self.data),
                                      "--listen", f"127.0.0.1:{self.port}", "--log-level", "info", *self.extra],
                                     stdout=self.logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                     env=self.env)
        if wait:
            self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout=30):
        def ready():
            if self.proc.poll() is not None:
                raise AssertionError(f"{self.name} exited {self.proc.returncode}:\n{self.log()[-4000:]}")
            try:
                return self.call("GET", "/readyz", timeout=2).status_code == 200
            except OSError:  # requests' connection errors are OSErrors
                return False
        wait_for(lambda: (self.data / "ca.crt").exists() and (self.data / "kubeconfig").exists() and ready(),
                 timeout, f"{self.name} on {self.url}")

    @property
    def pid(self):
        return self.proc.pid if self.proc is not None and self.proc.poll() is None else None

    def send(self, sig):
        os.kill(self.proc.pid, sig)

    def stop(self, sig=signal.SIGTERM, timeout=20):
        """Stops it (SIGKILL: kill -9) and returns its exit status."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.logf.close()
        rc, self.proc = self.proc.returncode, None
        return rc

    def log(self):
        return (self.data / "server.log").read_text(errors="replace")

    @property
    def token(self):
        for line in (self.data / "tokens.csv").read_text().splitlines():
            if line and not line.startswith("#"):
                return line.split(",")[0]
        raise AssertionError(f"no token in {self.data / 'tokens.csv'}")

    def call(self, method, path, timeout=20, **kw):
        """An HTTPS request as the admin, verified against the server's CA."""
        import requests
        h = {"Authorization": f"Bearer {self.token}", **kw.pop("headers", {})}
        return requests.request(method, self.url + path, headers=h, verify=str(self.data / "ca.crt"),
                                timeout=timeout, **kw)

    @property
    def kubeconfig(self):
        return str(self.data / "kubeconfig")


def start_replicas(binary, workdir, n, extra=(), names=None, env=None):
    """n servers sharing one CA, serving certificate and tokens (SHARED_FILES,
    copied from the first once it has made them), each with its own data
    directory and port; all started and ready."""
    names = names or [f"r{i}" for i in range(n)]
    servers = [Server(binary, pathlib.Path(workdir) / nm, extra, name=nm, env=env) for nm in names]
    servers[0].start()
    for s in servers[1:]:
        share_identity(servers[0], s)
        s.start()
    return servers


def share_identity(src, dst):
    """Copies the files replicas share (SHARED_FILES) from src's data directory to dst's."""
    dst.data.mkdir(parents=True, exist_ok=True)
    for f in SHARED_FILES:
        if (src.data / f).exists():
            (dst.data / f).write_bytes((src.data / f).read_bytes())
            (dst.data / f).chmod((src.data / f).stat().st_mode & 0o777)


def apply(stack, *docs):
    """`gpusched apply` of the given objects, one JSON document each."""
    stack.cli("apply", "-f", "-", input="\n".join(json.dumps(d) for d in docs))


def delete(stack, *names):
    """Deletes the pods and waits until they are gone."""
    for n in names:
        stack.cli("delete", "pod", n, check=False)
    wait_for(lambda: not any(stack.pod(n) for n in names), 20, f"{names} deleted")


def require_tool(path, what):
    """Marks a test that needs a tool: where the tool is missing the test fails,
    never skips (scripts/install-deps.sh installs it; kubectl comes with the
    machine image)."""
    def mark(f):
        if os.path.exists(path):
            return f

        def missing():
            pytest.fail(f"{what} not found at {path}: install it (scripts/install-deps.sh)")
        missing.__name__, missing.__doc__ = f.__name__, f.__doc__
        return missing
    return mark


def pod_manifest(name, cmd, gpus=0, ns="default", restart="Never", annotations=None, run_as_root=False):
    """run_as_root: for pods that write into the test's own (root-owned) directory;
    others run as the agent's unprivileged default uid."""
    res = {"limits": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    spec = {"restartPolicy": restart,
            "containers": [{"name": "main", "command": ["sh", "-c", cmd], "resources": res}]}
    if run_as_root:
        spec["securityContext"] = {"runAsUser": 0, "runAsGroup": 0}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
        "spec": spec,
    }


def phase(p):
    return (p or {}).get("status", {}).get("phase")


def pid_alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except FileNotFoundError:
        return False
