"""End-to-end tests of `gpusched server` and its client, over HTTPS with tokens.

Each test starts its own server on an ephemeral 127.0.0.1 port with a fresh
data directory and stops it (SIGTERM, or SIGKILL where that is the point).
kubectl tests use /usr/bin/kubectl when present and are skipped otherwise.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import threading
import time

import pytest

from stack import require_tool

requests = pytest.importorskip("requests")

TOKENS = "adm,admin,,,admin\nten,alice,,team-a,tenant\nnod,system:node:g1,,,node\n"


class Server:
    def __init__(self, binary, data_dir, extra=()):
        self.binary, self.data, self.extra = binary, pathlib.Path(data_dir), list(extra)
        self.proc = None

    def start(self):
        self.data.mkdir(parents=True, exist_ok=True)
        (self.data / "tokens.csv").write_text(TOKENS)
        port_file = self.data / "port"
        if port_file.exists():
            port_file.unlink()
        self.proc = subprocess.Popen(
            [self.binary, "server", "--data-dir", str(self.data), "--listen", "127.0.0.1:0", "--port-file",
             str(port_file), "--tokens", str(self.data / "tokens.csv"), "--log-level", "warn", *self.extra],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(200):
            if port_file.exists() and port_file.read_text().strip():
                break
            if self.proc.poll() is not None:
                raise RuntimeError("server exited: " + self.proc.stderr.read())
            time.sleep(0.02)
        self.port = int(port_file.read_text())
        self.url = f"https://127.0.0.1:{self.port}"
        self.ca = str(self.data / "ca.crt")
        return self

    def stop(self, sig=signal.SIGTERM):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=20)
        rc = self.proc.returncode if self.proc else None
        if self.proc:
            self.proc.stdout.close()
            self.proc.stderr.close()
        self.proc = None
        return rc

    def call(self, method, path, token="adm", **kw):
        headers = kw.pop("headers", {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return requests.request(method, self.url + path, headers=headers, verify=self.ca, timeout=20, **kw)


@pytest.fixture
def server(gpusched_bin, tmp_path):
    s = Server(gpusched_bin, tmp_path / "data").start()
    yield s
    assert s.stop() == 0  # a clean stop: every thread joined


def pod(name, gpus="0", labels=None, ns=None):
    md = {"name": name, "labels": labels or {"app": name}}
    if ns:
        md["namespace"] = ns
    return {"apiVersion": "v1", "kind": "Pod", "metadata": md,
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}


def node(name, gpus):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "110"},
                       "devices": [{"index": i, "uuid": f"GPU-{name}-{i}", "model": "H100", "memoryMiB": 81920}
                                   for i in range(gpus)]}}


PODS = "/api/v1/namespaces/default/pods"


def wait_pod(s, name, pred, ns="default", timeout=10):
    deadline = time.time() + timeout
    while time.time() < deadline:
        r = s.call("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
        if r.status_code == 200 and pred(r.json()):
            return r.json()
        time.sleep(0.05)
    raise AssertionError(f"pod {name} did not reach the state: {r.text}")


def test_crud_conflicts_and_selectors(server):
    s = server
    r = s.call("POST", PODS, json=pod("web", labels={"app": "web", "tier": "a"}))
    assert r.status_code == 201, r.text
    rv = r.json()["metadata"]["resourceVersion"]
    assert isinstance(rv, str) and r.json()["metadata"]["uid"]
    assert s.call("POST", PODS, json=pod("web")).json()["reason"] == "AlreadyExists"
    s.call("POST", PODS, json=pod("db", labels={"app": "db"}))
    # Stale update -> 409 Conflict with a Status body.
    cur = s.call("GET", PODS + "/web").json()
    cur["metadata"]["labels"]["v"] = "2"
    stale = json.loads(json.dumps(cur))
    assert s.call("PUT", PODS + "/web", json=cur).status_code == 200
    r = s.call("PUT", PODS + "/web", json=stale)
    assert r.status_code == 409 and r.json()["reason"] == "Conflict"
    items = s.call("GET", PODS, params={"labelSelector": "tier in (a,b)"}).json()["items"]
    assert [p["metadata"]["name"] for p in items] == ["web"]
    items = s.call("GET", "/api/v1/pods", params={"fieldSelector": "metadata.name=db"}).json()["items"]
    assert [p["metadata"]["name"] for p in items] == ["db"]
    r = s.call("PATCH", PODS + "/db", data=json.dumps({"metadata": {"labels": {"x": "1"}}}),
               headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["metadata"]["labels"] == {"app": "db", "x": "1"}
    assert s.call("DELETE", PODS + "/db").status_code == 200
    assert s.call("GET", PODS + "/db").json()["code"] == 404
    bad = pod("bad", gpus="lots")
    r = s.call("POST", PODS, json=bad)
    assert r.status_code == 422
    assert r.json()["details"]["causes"][0]["field"] == 'spec.containers[0].resources.limits["nvidia.com/gpu"]'


def test_watch_stream_events(server):
    s = server
    rv = s.call("GET", "/api/v1/nodes").json()["metadata"]["resourceVersion"]
    lines = []

    def watch():
        with s.call("GET", "/api/v1/nodes", params={"watch": "true", "resourceVersion": rv,
                                                    "timeoutSeconds": "10"}, stream=True) as r:
            for line in r.iter_lines():
                if line:
                    lines.append(json.loads(line))
                    if lines[-1]["type"] == "DELETED":
                        return

    t = threading.Thread(target=watch)
    t.start()
    time.sleep(0.2)
    s.call("POST", "/api/v1/nodes", json=node("w1", 0))
    s.call("PATCH", "/api/v1/nodes/w1", data=json.dumps({"metadata": {"labels": {"a": "b"}}}),
           headers={"Content-Type": "application/strategic-merge-patch+json"})
    s.call("DELETE", "/api/v1/nodes/w1")
    t.join(15)
    assert [e["type"] for e in lines] == ["ADDED", "MODIFIED", "DELETED"]
    assert lines[1]["object"]["metadata"]["labels"] == {"a": "b"}
    versions = [int(e["object"]["metadata"]["resourceVersion"]) for e in lines]
    assert versions == sorted(versions) and versions[0] > int(rv)


def test_restart_after_kill9_keeps_data(gpusched_bin, tmp_path):
    s = Server(gpusched_bin, tmp_path / "data", ["--no-scheduler"]).start()
    names = [f"p{i}" for i in range(50)]
    for n in names:
        assert s.call("POST", PODS, json=pod(n)).status_code == 201
    last = int(s.call("GET", PODS).json()["metadata"]["resourceVersion"])
    s.stop(signal.SIGKILL)
    s.start()
    try:
        got = s.call("GET", PODS).json()
        assert sorted(p["metadata"]["name"] for p in got["items"]) == sorted(names)
        assert int(got["metadata"]["resourceVersion"]) == last
        r = s.call("POST", PODS, json=pod("after"))
        assert int(r.json()["metadata"]["resourceVersion"]) == last + 1
    finally:
        assert s.stop() == 0


def test_tenant_and_node_tokens(server):
    s = server
    assert s.call("GET", PODS, token=None).status_code == 401
    assert s.call("GET", PODS, token="wrong").json()["reason"] == "Unauthorized"
    r = s.call("POST", "/api/v1/namespaces/team-a/pods", token="ten", json=pod("t"))
    assert r.status_code == 404 and r.json()["message"] == 'namespaces "team-a" not found'
    assert s.call("POST", "/api/v1/namespaces", json={"metadata": {"name": "team-a"}}).status_code == 201
    assert s.call("POST", "/api/v1/namespaces/team-a/pods", token="ten", json=pod("t")).status_code == 201
    r = s.call("POST", PODS, token="ten", json=pod("t"))
    assert r.status_code == 403 and r.json()["reason"] == "Forbidden"
    assert s.call("GET", PODS, token="ten").status_code == 403
    s.call("POST", PODS, json=pod("mine"))
    assert [p["metadata"]["namespace"] for p in s.call("GET", "/api/v1/pods", token="ten").json()["items"]] == ["team-a"]
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "mine"},
               "target": {"kind": "Node", "name": "g1"}}
    assert s.call("POST", PODS + "/mine/binding", token="nod", json=binding).status_code == 403
    assert s.call("POST", PODS + "/mine/binding", token="ten", json=binding).status_code == 403
    assert s.call("GET", PODS + "/mine", token="nod").status_code == 403  # not bound to g1 yet
    assert s.call("POST", PODS + "/mine/binding", json=binding).status_code == 201
    assert s.call("GET", PODS + "/mine", token="nod").status_code == 200
    r = s.call("PATCH", PODS + "/mine/status", token="nod", data=json.dumps({"status": {"phase": "Running"}}),
               headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200 and r.json()["status"]["phase"] == "Running"
    assert s.call("POST", "/api/v1/nodes", token="nod", json=node("g2", 0)).status_code == 403
    assert s.call("POST", "/api/v1/nodes", token="nod", json=node("g1", 0)).status_code == 201  # registers itself


def test_malformed_and_oversized_requests(server):
    s = server
    h = {"Content-Type": "application/json"}
    assert s.call("POST", PODS, data=b"\x00\xff{{{", headers=h).status_code == 400
    assert s.call("POST", PODS, data=b"[1,2]", headers=h).json()["kind"] == "Status"
    r = s.call("POST", PODS, data=b"x" * (4 << 20), headers=h)
    assert r.status_code == 413 and r.json()["reason"] == "RequestEntityTooLarge"
    assert s.call("GET", "/api/v1/namespaces/default/widgets").status_code == 404
    assert s.call("GET", PODS, params={"labelSelector": "a in b"}).status_code == 400
    assert s.call("PATCH", PODS + "/x", data=b"[]", headers={"Content-Type": "application/json-patch+json"}
                  ).status_code == 415
    assert s.call("GET", "/version", token=None).json()["major"] == "1"  # still serving
    assert s.call("POST", PODS, json=pod("fine")).status_code == 201


def test_scheduler_binds_and_explains(server):
    s = server
    assert s.call("POST", "/api/v1/nodes", json=node("g1", 2)).status_code == 201
    s.call("POST", PODS, json=pod("train", "2"))
    s.call("POST", PODS, json=pod("huge", "8"))
    p = wait_pod(s, "train", lambda p: p["spec"].get("nodeName"))
    assert p["spec"]["nodeName"] == "g1"
    assert p["metadata"]["annotations"]["gpusched.io/devices"] == "GPU-g1-0,GPU-g1-1"
    assert any(c["type"] == "PodScheduled" and c["status"] == "True" for c in p["status"]["conditions"])
    p = wait_pod(s, "huge", lambda p: p.get("status", {}).get("conditions"))
    c = p["status"]["conditions"][0]
    assert (c["type"], c["status"], c["reason"]) == ("PodScheduled", "False", "Unschedulable")
    assert c["message"].startswith("0/1 nodes are available")


def test_client_commands(server, run):
    env_args = ["--server", server.url, "--token", "adm", "--certificate-authority", server.ca]
    manifest = server.data / "m.yaml"
    manifest.write_text("""apiVersion: v1
kind: Node
metadata: {name: g1}
status:
  capacity: {cpu: "8", memory: 64Gi, pods: "10"}
  devices: [{index: 0, uuid: GPU-x, model: H100, memoryMiB: 80000}]
---
apiVersion: v1
kind: Pod
metadata: {name: one}
spec:
  containers: [{name: c, resources: {limits: {nvidia.com/gpu: "1"}}}]
""")
    r = run("apply", "-f", str(manifest), *env_args)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["node/g1 created", "pod/one created"]
    wait_pod(server, "one", lambda p: p["spec"].get("nodeName"))
    r = run("apply", "-f", str(manifest), *env_args)
    assert r.stdout.splitlines() == ["node/g1 unchanged", "pod/one unchanged"]
    r = run("get", "pods", "-o", "wide", *env_args)
    assert r.returncode == 0
    header, row = r.stdout.splitlines()
    assert header.split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "GPUS"]
    assert row.split()[0] == "one" and row.split()[-2:] == ["g1", "GPU-x"]
    r = run("get", "po", "one", "-o", "json", *env_args)
    assert json.loads(r.stdout)["spec"]["nodeName"] == "g1"
    r = run("describe", "node", "g1", *env_args)
    assert "default/one" in r.stdout and "GPU-x" in r.stdout
    # Bound, and no agent to confirm a graceful deletion: remove it at once.
    r = run("delete", "pod", "one", "--grace-period=0", *env_args)
    assert r.stdout.strip() == 'pod "one" force deleted'
    r = run("get", "pods", "one", *env_args)
    assert r.returncode == 1 and "not found" in r.stderr
    # The kubeconfig the server wrote works on its own (its first admin token, its CA).
    r = run("get", "nodes", "--kubeconfig", str(server.data / "kubeconfig"))
    assert r.returncode == 0 and r.stdout.split()[5] == "g1"


KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


@require_tool(KUBECTL, "kubectl")
def test_kubectl_over_https_with_a_token(server, tmp_path):
    s = server
    s.call("POST", "/api/v1/nodes", json=node("g1", 1))
    env = dict(os.environ, HOME=str(tmp_path), KUBECONFIG=str(s.data / "kubeconfig"))

    def k(*args):
        return subprocess.run([KUBECTL, *args], capture_output=True, text=True, timeout=60, env=env)

    r = k("get", "nodes")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split()[:2] == ["NAME", "STATUS"] and "g1" in r.stdout
    manifest = tmp_path / "p.json"
    manifest.write_text(json.dumps(pod("kube")))
    r = k("create", "-f", str(manifest))
    assert r.returncode == 0 and "pod/kube created" in r.stdout, r.stderr
    r = k("get", "pods", "-A", "-o", "json")
    assert r.returncode == 0
    assert [p["metadata"]["name"] for p in json.loads(r.stdout)["items"]] == ["kube"]
    r = k("delete", "pod", "kube", "--grace-period=0", "--force")  # no agent to confirm a graceful deletion
    assert r.returncode == 0 and 'pod "kube" force deleted' in r.stdout, r.stderr
    assert s.call("GET", PODS + "/kube").status_code == 404
    # The same with --server/--token and the CA on the command line.
    r = subprocess.run([KUBECTL, "--server", s.url, "--token", "adm", "--certificate-authority", s.ca, "get",
                        "nodes", "-o", "name"], capture_output=True, text=True, timeout=60,
                       env=dict(os.environ, HOME=str(tmp_path), KUBECONFIG="/nonexistent"))
    assert r.stdout.strip() == "node/g1", r.stderr
