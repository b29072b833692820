"""The web console's server side against `gpusched up`, through kubectl and
plain HTTPS (the page itself is driven in a browser by test_console.py):

- `/ui/` is served over the API's TLS without a token, with its policy, and
  `--ui-reports DIR` lists and serves a stored simulator run to a token
  only;
- `kubectl auth whoami` (SelfSubjectReview) names the admin, and a tenant
  with its namespaces;
- the queue history fills from ClusterQueue status and LocalQueue pods, and a
  tenant reads only its own namespace's LocalQueue (kubectl get and --raw).
"""
import json
import os
import secrets
import ssl
import subprocess
import urllib.error
import urllib.request

import pytest

from stack import Stack, wait_for

KUBECTL = "/usr/bin/kubectl"
TENANT = secrets.token_hex(16)
ADMIN = secrets.token_hex(16)


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    assert os.path.exists(KUBECTL), "kubectl is required (scripts/install-deps.sh installs it)"
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("uiapi"))
    s.data.mkdir(parents=True)
    (s.data / "tokens.csv").write_text(f"{ADMIN},admin,system:masters,,admin\n"
                                       f"{TENANT},alice,dev,team-a,tenant\n")
    (s.data / "tokens.csv").chmod(0o600)
    run = s.dir / "reports" / "run-1"
    run.mkdir(parents=True)
    (run / "report.html").write_text("<html><body><h1>run one</h1></body></html>")
    os.environ["GPUSCHED_UI_HISTORY_INTERVAL"] = "0.2"
    try:
        s.up("1x8xH100-80GB", "--ui-reports", str(s.dir / "reports"))
    finally:
        del os.environ["GPUSCHED_UI_HISTORY_INTERVAL"]
    yield s
    assert s.stop("up") == 0, s.log("up")


def kubectl(stack, *args, token=None, input=None, check=True):
    extra = ["--token", token] if token else []
    r = subprocess.run([KUBECTL, "--kubeconfig", stack.kubeconfig, *extra, *args], input=input, capture_output=True,
                       text=True, timeout=90, env=dict(os.environ, HOME=str(stack.dir)))
    if check:
        assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stdout}{r.stderr}"
    return r


def https(stack, path, token=None):
    ctx = ssl.create_default_context(cafile=str(stack.data / "ca.crt"))
    req = urllib.request.Request(stack.info["server"] + path,
                                 headers={"Authorization": "Bearer " + token} if token else {})
    try:
        with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
            return r.status, dict(r.headers), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read().decode()


def test_console_served_over_tls_without_token(stack):
    code, headers, body = https(stack, "/ui/")
    assert code == 200 and '<script type="module" src="app.js"></script>' in body
    assert "script-src 'self'" in headers["Content-Security-Policy"]
    assert "unsafe-inline" not in headers["Content-Security-Policy"]
    # the reports need the token (docs/CONTROL_PLANE.md, row "reports")
    code, _, body = https(stack, "/ui/reports/")
    assert code == 401 and "need the API's Bearer token" in body
    code, _, body = https(stack, "/ui/reports/", token=TENANT)
    assert code == 200 and json.loads(body) == {"runs": ["run-1"]}
    code, headers, body = https(stack, "/ui/reports/run-1/report.html", token=ADMIN)
    assert code == 200 and "run one" in body and "script-src" not in headers["Content-Security-Policy"]


def test_whoami_admin_and_tenant(stack):
    me = json.loads(kubectl(stack, "auth", "whoami", "-o", "json").stdout)
    assert me["status"]["userInfo"]["username"] == "admin"
    me = json.loads(kubectl(stack, "auth", "whoami", "-o", "json", token=TENANT).stdout)
    u = me["status"]["userInfo"]
    assert u["username"] == "alice" and u["groups"] == ["dev"]
    assert u["extra"] == {"gpusched.io/role": ["tenant"], "gpusched.io/namespaces": ["team-a"]}
    r = kubectl(stack, "auth", "whoami", token="not-a-token", check=False)
    assert r.returncode != 0 and "Unauthorized" in r.stderr


def pod(name, ns, gpus):
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
            "spec": {"containers": [{"name": "c", "image": "i", "command": ["sleep", "300"],
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def test_queue_history_narrowed_for_tenant(stack):
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in ("team-a", "team-b")]
    docs += [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default"}},
             {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "cq"},
              "spec": {"namespaceSelector": {}, "resourceGroups": [{"coveredResources": ["nvidia.com/gpu"], "flavors": [
                  {"name": "default", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": "4"}]}]}]}}]
    docs += [{"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue", "metadata": {"name": "lq", "namespace": n},
              "spec": {"clusterQueue": "cq"}} for n in ("team-a", "team-b")]
    docs += [pod("a1", "team-a", 3), pod("b1", "team-b", 3)]  # 6 > 4: one admitted, one pending
    kubectl(stack, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))

    def history(token=None, path="/apis/ui.gpusched.io/v1/queuehistories"):
        doc = json.loads(kubectl(stack, "get", "--raw", path, token=token).stdout)
        return {(i["queueKind"], i["metadata"].get("namespace", ""), i["metadata"]["name"]): i["samples"]
                for i in doc["items"]}

    def settled():
        h = history()
        cq, la, lb = h.get(("ClusterQueue", "", "cq")), h.get(("LocalQueue", "team-a", "lq")), h.get(
            ("LocalQueue", "team-b", "lq"))
        if not (cq and la and lb):
            return None
        last = cq[-1], la[-1], lb[-1]
        ok = last[0]["used"] == 3 and last[0]["nominal"] == 4 and last[1]["admitted"] + last[2]["admitted"] == 1 \
            and last[1]["pending"] + last[2]["pending"] == 1
        return h if ok else None

    h = wait_for(settled, 60, "queue history with one workload admitted and one pending")
    assert len(h) == 3
    mine = history(TENANT)
    assert set(mine) == {("ClusterQueue", "", "cq"), ("LocalQueue", "team-a", "lq")}
    assert set(history(TENANT, "/apis/ui.gpusched.io/v1/namespaces/team-a/queuehistories")) == {
        ("LocalQueue", "team-a", "lq")}
    r = kubectl(stack, "get", "--raw", "/apis/ui.gpusched.io/v1/namespaces/team-b/queuehistories", token=TENANT,
                check=False)
    assert r.returncode != 0 and "forbidden" in r.stderr.lower()
    table = kubectl(stack, "get", "queuehistories", "-A", token=TENANT).stdout
    assert "team-a" in table and "team-b" not in table and "cq" in table
