"""Node identity end to end: `gpusched up` gives every agent a node token of
its own (written to the tokens file, never the admin one), the agents register
their Nodes with it, a node token writes only what belongs to its node, no
token can be read by a pod (neither from its parent's command line nor from its
environment), and `gpusched agent` refuses a token on its command line."""
import json
import subprocess

import pytest

from stack import Stack, phase, pod_manifest, wait_for


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("nodeid"))
    s.up("2x1xH100-80GB", "--insecure")
    yield s
    assert s.stop("up") == 0, s.log("up")


def tokens(stack):
    rows = [line.split(",") for line in (stack.data / "tokens.csv").read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    return {r[1]: (r[0], r[4]) for r in rows}


def call(stack, token, method, path, body=None, ctype="application/json"):
    import urllib.error
    import urllib.request
    req = urllib.request.Request(stack.info["server"] + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": ctype})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, json.loads(r.read() or b"{}")
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def test_up_mints_one_node_token_per_agent(stack):
    t = tokens(stack)
    nodes = [n["name"] for n in stack.info["nodes"]]
    assert nodes == ["gpu-node-1", "gpu-node-2"]
    for n in nodes:
        tok, role = t[f"system:node:{n}"]
        assert role == "node" and tok != stack.info["token"]
        # Registered by its agent with that token (a node token may create only its own Node).
        assert stack.node(n)["metadata"]["name"] == n
    assert [u for u, (_, role) in t.items() if role == "admin"] == ["admin"]


def test_node_token_writes_only_its_own(stack):
    tok, _ = tokens(stack)["system:node:gpu-node-1"]
    code, _ = call(stack, tok, "GET", "/api/v1/nodes")
    assert code == 200
    patch = {"metadata": {"annotations": {"gpusched.io/agent-endpoint": "127.0.0.1:1"}}}
    code, st = call(stack, tok, "PATCH", "/api/v1/nodes/gpu-node-2", patch, "application/merge-patch+json")
    assert code == 403 and "a node may only write its own Node object" in st["message"]
    code, st = call(stack, tok, "POST", "/api/v1/namespaces/default/pods", pod_manifest("sneaky", "true"))
    assert code == 403 and "nodes may not create pods" in st["message"]
    code, st = call(stack, tok, "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases",
                    {"metadata": {"name": "gpu-node-2"}, "spec": {"holderIdentity": "gpu-node-2"}})
    assert code == 403


def test_pods_cannot_read_any_token(stack):
    cmd = "tr '\\0' ' ' < /proc/$PPID/cmdline; echo; env"
    stack.cli("apply", "-f", "-", input=json.dumps(pod_manifest("peek", cmd)))
    wait_for(lambda: phase(stack.pod("peek")) == "Succeeded", 30, "the peek pod to finish")
    out = stack.cli("logs", "peek").stdout
    assert "PATH=" in out  # the pod did print its environment
    for user, (tok, _) in tokens(stack).items():
        assert tok not in out, f"the token of {user} is visible to a pod"


def test_agent_refuses_a_token_on_its_command_line(gpusched_bin, tmp_path):
    r = subprocess.run([gpusched_bin, "agent", "--token", "s3cr3t", "--node-name", "x"], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 2
    assert "use --token-file FILE or GPUSCHED_TOKEN in the environment" in r.stderr
    r = subprocess.run([gpusched_bin, "agent", "--token-file", str(tmp_path / "missing"), "--node-name", "x"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--token-file" in r.stderr and "missing" in r.stderr
    (tmp_path / "two").write_text("a b\n")
    r = subprocess.run([gpusched_bin, "agent", "--token-file", str(tmp_path / "two"), "--node-name", "x"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "want one token on one line" in r.stderr


def test_restart_keeps_the_node_tokens(gpusched_bin, tmp_path):
    s = Stack(gpusched_bin, tmp_path)
    s.up("1x1xH100-80GB", "--insecure")
    first = tokens(s)
    assert s.stop("up") == 0, s.log("up")
    s.up("1x1xH100-80GB", "--insecure")
    try:
        assert tokens(s) == first
        wait_for(lambda: s.node("gpu-node-1"), 20, "the node to register again")
    finally:
        assert s.stop("up") == 0, s.log("up")
