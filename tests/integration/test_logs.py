"""Pod logs through the API server (`gpusched up --mock`): `kubectl logs` and
`gpusched logs` both ask GET .../pods/NAME/log, which the server proxies to
the agent of the pod's node. Whole logs, --tail, -c with a two-container pod
(and kube-apiserver's error without it), -f streaming lines while the pod
runs and ending when it ends, and the tenant rule.

kubectl tests use /usr/bin/kubectl when present and are skipped otherwise."""
import os
import shutil
import subprocess
import time

import pytest

from stack import Stack, apply, phase, pod_manifest, require_tool, wait_for

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
needs_kubectl = require_tool(KUBECTL, "kubectl")

TOKENS = "adm,admin,system:masters,,admin\nten,alice,,team-a,tenant\n"


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("logs"))
    s.data.mkdir(parents=True)
    (s.data / "tokens.csv").write_text(TOKENS)
    s.up("1x2xH100-80GB")
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    duo = pod_manifest("duo", "")
    duo["spec"]["containers"] = [{"name": n, "command": ["sh", "-c", f"echo from {n}"]} for n in ("a", "b")]
    apply(s, ns, pod_manifest("hello", "echo one; echo two; echo three"), duo,
          pod_manifest("mine", "echo tenant line", ns="team-a"))
    for name, n in (("hello", "default"), ("duo", "default"), ("mine", "team-a")):
        wait_for(lambda: phase(s.pod(name, n)) == "Succeeded", 30, f"{name} to succeed")
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def kubectl(stack, *args, token=None, timeout=60):
    extra = ["--token", token] if token else []
    return subprocess.run([KUBECTL, "--kubeconfig", stack.kubeconfig, *extra, *args], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, HOME=str(stack.dir)))


@needs_kubectl
def test_kubectl_logs_whole_and_tail(stack):
    r = kubectl(stack, "logs", "hello")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "one\ntwo\nthree\n"
    r = kubectl(stack, "logs", "hello", "--tail=1")
    assert r.returncode == 0 and r.stdout == "three\n", r.stderr
    r = kubectl(stack, "logs", "hello", "--tail=2", "--limit-bytes=6")
    assert r.returncode == 0 and r.stdout == "two\nth", r.stderr


@needs_kubectl
def test_kubectl_logs_container_choice(stack):
    r = kubectl(stack, "logs", "duo", "-c", "b")
    assert r.returncode == 0 and r.stdout == "from b\n", r.stderr
    # kubectl itself picks the first container (and says so); the server,
    # asked without one, answers as kube-apiserver does
    r = kubectl(stack, "logs", "duo")
    assert r.returncode == 0 and r.stdout == "from a\n" and 'Defaulted container "a"' in r.stderr
    r = kubectl(stack, "get", "--raw", "/api/v1/namespaces/default/pods/duo/log")
    assert r.returncode != 0
    assert "a container name must be specified for pod duo, choose one of: [a b]" in r.stderr, r.stderr
    r = kubectl(stack, "get", "--raw", "/api/v1/namespaces/default/pods/duo/log?container=b&tailLines=1")
    assert r.returncode == 0 and r.stdout == "from b\n", r.stderr
    r = kubectl(stack, "logs", "duo", "-c", "zz")
    assert r.returncode != 0 and "container zz is not valid for pod duo" in r.stderr
    r = kubectl(stack, "logs", "nosuch")
    assert r.returncode != 0 and 'pods "nosuch" not found' in r.stderr
    r = kubectl(stack, "logs", "hello", "--previous")
    assert r.returncode != 0 and "previous=true is not supported" in r.stderr


@needs_kubectl
def test_kubectl_tenant_only_its_namespaces(stack):
    r = kubectl(stack, "logs", "mine", "-n", "team-a", token="ten")
    assert r.returncode == 0 and r.stdout == "tenant line\n", r.stderr
    r = kubectl(stack, "logs", "hello", "-n", "default", token="ten")
    assert r.returncode != 0
    assert "Forbidden" in r.stderr or "forbidden" in r.stderr, r.stderr
    # kubectl stopped at the pod itself; the log subresource says the same
    r = kubectl(stack, "get", "--raw", "/api/v1/namespaces/default/pods/hello/log", token="ten")
    assert r.returncode != 0 and 'cannot get resource "pods/log"' in r.stderr, r.stderr


def follow(stack, name, argv):
    """Starts a pod printing 6 lines 0.7 s apart, follows it with argv, and
    returns [(seconds since start, line)] plus the follower's exit code."""
    apply(stack, pod_manifest(name, "for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.7; done"))
    wait_for(lambda: phase(stack.pod(name)) in ("Running", "Succeeded"), 30, f"{name} to run")
    t0 = time.time()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(os.environ, HOME=str(stack.dir)))
    got = []
    for line in p.stdout:  # ends when the server ends the stream
        got.append((time.time() - t0, line.rstrip("\n")))
    rc = p.wait(timeout=30)
    err = p.stderr.read()
    p.stderr.close()
    p.stdout.close()
    assert rc == 0, err
    ended = time.time() - t0
    # the stream ended with the container, not by a timeout of ours
    assert ended < 25
    assert phase(wait_for(lambda: stack.pod(name) if phase(stack.pod(name)) == "Succeeded" else None, 20,
                          f"{name} to succeed")) == "Succeeded"
    return got, ended


def check_follow(got, ended):
    assert [line for _, line in got] == [f"tick {i}" for i in range(1, 7)]
    # lines arrived while the pod ran: the first well before the stream ended
    assert ended - got[0][0] >= 1.5, got


@needs_kubectl
def test_kubectl_logs_follow_streams_until_the_pod_ends(stack):
    check_follow(*follow(stack, "ticker", [KUBECTL, "--kubeconfig", stack.kubeconfig, "logs", "-f", "ticker"]))


def test_gpusched_logs(stack):
    assert stack.cli("logs", "hello").stdout == "one\ntwo\nthree\n"
    assert stack.cli("logs", "hello", "--tail", "1").stdout == "three\n"
    assert stack.cli("logs", "hello", "--tail=0").stdout == ""
    assert stack.cli("logs", "duo", "-c", "a").stdout == "from a\n"
    r = stack.cli("logs", "duo", check=False)
    assert r.returncode == 1
    assert "a container name must be specified for pod duo, choose one of: [a b]" in r.stderr
    r = stack.cli("logs", "hello", "--tail", "x", check=False)
    assert r.returncode == 2 and '--tail "x"' in r.stderr
    r = stack.cli("logs", "nosuch", check=False)
    assert r.returncode == 1 and "not found" in r.stderr
    assert stack.cli("logs", "mine", "-n", "team-a").stdout == "tenant line\n"
    r = subprocess.run([stack.bin, "logs", "hello", "--kubeconfig", stack.kubeconfig, "--token", "ten"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "forbidden" in r.stderr, r.stderr


def test_gpusched_logs_follow(stack):
    check_follow(*follow(stack, "ticker2", [stack.bin, "logs", "-f", "ticker2", "--kubeconfig", stack.kubeconfig]))
