"""Helpers for tests that run the whole stack: `gpusched up`, or a server
and agents as separate processes, and a client bound to their kubeconfig."""
import json
import os
import pathlib
import secrets
import signal
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
