"""kubectl's safety nets against `gpusched up --mock`: server-side dry runs
(`apply`, `run`, `delete --dry-run=server`, `kubectl diff`) change nothing -
no new version, no watch event, nothing scheduled; field validation
(`--validate=strict` refuses a misspelt field with kube's message, warn and
`gpusched apply` print kube's Warning) and enum fields (`restartPolicy:
Sometimes`); `kubectl drain` through pods/eviction, held back by a
PodDisruptionBudget with kube's message, and with `--disable-eviction`
(protobuf DeleteOptions).

kubectl is required: these tests fail when /usr/bin/kubectl is missing."""
import json
import os
import subprocess
import threading
import time

import pytest
import requests
import urllib3

from stack import Stack, phase, wait_for

KUBECTL = "/usr/bin/kubectl"

# the server's certificate is self-signed: requests talks to it unverified
pytestmark = pytest.mark.filterwarnings("ignore::urllib3.exceptions.InsecureRequestWarning")


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    assert os.path.exists(KUBECTL), "kubectl is required (scripts/install-deps.sh installs it)"
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("safety"))
    s.up("2x2xH100-80GB")
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def kubectl(stack, *args, input=None, timeout=90):
    return subprocess.run([KUBECTL, "--kubeconfig", stack.kubeconfig, *args], input=input, capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ, HOME=str(stack.dir)))


def manifest(name, labels=None, node=None, restart="Never", extra_spec=None):
    spec = {"restartPolicy": restart, "containers": [{"name": "main", "image": "busybox",
                                                      "command": ["sh", "-c", "sleep 600"]}]}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    spec.update(extra_spec or {})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {"app": name}},
            "spec": spec}


def write(stack, name, doc):
    path = stack.dir / name
    path.write_text(json.dumps(doc))
    return str(path)


def api(stack, path, **kw):
    return requests.get(stack.info["server"] + path, headers={"Authorization": "Bearer " + stack.info["token"]},
                        verify=False, timeout=10, **kw)


def running(stack, name):
    return phase(stack.pod(name)) == "Running"


class Watch:
    """Every pod event from resourceVersion rv on, in a thread."""

    def __init__(self, stack, rv):
        self.events = []
        self.resp = requests.get(stack.info["server"] + f"/api/v1/pods?watch=true&resourceVersion={rv}",
                                 headers={"Authorization": "Bearer " + stack.info["token"]}, verify=False,
                                 stream=True, timeout=30)
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        try:
            for line in self.resp.iter_lines():
                if line:
                    self.events.append(json.loads(line))
        except Exception:
            pass

    def close(self):
        self.resp.close()


def test_server_dry_runs_change_nothing(stack):
    path = write(stack, "web.json", manifest("web"))
    r = kubectl(stack, "apply", "-f", path)
    assert r.returncode == 0, r.stderr
    wait_for(lambda: running(stack, "web"), 30, "web to run")
    time.sleep(1)  # let the agent's last status write land
    before = stack.pod("web")
    rv = api(stack, "/api/v1/pods").json()["metadata"]["resourceVersion"]
    watch = Watch(stack, rv)
    try:
        r = kubectl(stack, "apply", "--dry-run=server", "-f", write(stack, "dry1.json", manifest("dry1")))
        assert r.returncode == 0 and "pod/dry1 created (server dry run)" in r.stdout, r.stdout + r.stderr
        r = kubectl(stack, "run", "dry2", "--image=busybox", "--restart=Never", "--dry-run=server", "-o", "json",
                    "--", "sleep", "1")
        assert r.returncode == 0, r.stderr
        answer = json.loads(r.stdout)
        assert answer["metadata"]["uid"] and answer["metadata"]["creationTimestamp"]
        assert "resourceVersion" not in answer["metadata"]
        changed = manifest("web", labels={"app": "web", "tier": "changed"})
        r = kubectl(stack, "diff", "-f", write(stack, "web2.json", changed))
        assert r.returncode == 1, r.stdout + r.stderr  # 1: differences found
        assert "+    tier: changed" in r.stdout, r.stdout
        r = kubectl(stack, "diff", "-f", write(stack, "dry3.json", manifest("dry3")))
        assert r.returncode == 1 and "+  name: dry3" in r.stdout, r.stdout + r.stderr
        r = kubectl(stack, "apply", "--dry-run=server", "-f", str(stack.dir / "web2.json"))
        assert r.returncode == 0 and "pod/web configured (server dry run)" in r.stdout, r.stdout + r.stderr
        r = kubectl(stack, "delete", "--dry-run=server", "pod", "web")
        assert r.returncode == 0 and 'pod "web" deleted (server dry run)' in r.stdout, r.stdout + r.stderr
        r = kubectl(stack, "delete", "--dry-run=server", "-f", path)
        assert r.returncode == 0, r.stderr
        time.sleep(2)  # room for a stray event or a scheduling round
    finally:
        watch.close()
    assert watch.events == [], watch.events  # (the list's version is global: leases move it)
    after = stack.pod("web")
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
    assert after["metadata"]["labels"] == {"app": "web"} and "deletionTimestamp" not in after["metadata"]
    names = [p["metadata"]["name"] for p in stack.pods()]
    assert names == ["web"], names
    # a bad dryRun value is refused as kube-apiserver does
    r = kubectl(stack, "delete", "--raw", "/api/v1/namespaces/default/pods/web?dryRun=Maybe")
    assert r.returncode != 0 and 'dryRun: Unsupported value: "Maybe": supported values: "All"' in r.stderr, r.stderr
    assert stack.pod("web") is not None
    # the same watch does see a real write: the empty list above means something
    control = Watch(stack, rv)
    try:
        r = kubectl(stack, "delete", "pod", "web", "--grace-period=0", "--force")
        assert r.returncode == 0, r.stderr
        wait_for(lambda: any(e["type"] == "DELETED" for e in control.events), 10, "the DELETED event")
    finally:
        control.close()


def test_field_validation_and_enums(stack):
    typo = manifest("typo", extra_spec={"nodeSelecter": {"gpu": "yes"}})
    path = write(stack, "typo.json", typo)
    r = kubectl(stack, "apply", "--validate=strict", "-f", path)
    assert r.returncode != 0
    assert 'Pod in version "v1" cannot be handled as a Pod: strict decoding error: unknown field "spec.nodeSelecter"' \
        in r.stderr, r.stderr
    r = kubectl(stack, "apply", "-f", path)  # kubectl's default is strict too
    assert r.returncode != 0 and 'unknown field "spec.nodeSelecter"' in r.stderr, r.stderr
    assert stack.pod("typo") is None
    r = kubectl(stack, "apply", "--validate=warn", "-f", path)
    assert r.returncode == 0, r.stderr
    assert 'Warning: unknown field "spec.nodeSelecter"' in r.stderr, r.stderr
    assert stack.pod("typo")["spec"]["nodeSelecter"] == {"gpu": "yes"}  # kept, as before
    # gpusched apply: the server's default (Warn), its warning on stderr as kubectl prints it
    typo2 = manifest("typo2", extra_spec={"nodeSelecter": {"gpu": "yes"}})
    r = stack.cli("apply", "-f", write(stack, "typo2.json", typo2))
    assert 'Warning: unknown field "spec.nodeSelecter"' in r.stderr, r.stderr
    assert "pod/typo2 created" in r.stdout
    # enums: refused whatever the validation mode
    some = manifest("sometimes", restart="Sometimes")
    for mode in ("strict", "warn", "false"):
        r = kubectl(stack, "apply", f"--validate={mode}", "-f", write(stack, "some.json", some))
        assert r.returncode != 0
        assert 'The Pod "sometimes" is invalid: spec.restartPolicy: Unsupported value: "Sometimes": supported ' \
               'values: "Always", "Never", "OnFailure"' in r.stderr, r.stderr
    assert stack.pod("sometimes") is None
    # duplicate fields (raw JSON: kubectl never sends them): Strict refuses, Warn keeps the last with a warning
    body = ('{"apiVersion":"v1","kind":"Pod","metadata":{"name":"dup","name":"dup"},"spec":{"restartPolicy":"Never",'
            '"containers":[{"name":"c","image":"busybox","command":["sleep","600"]}]}}')
    url = stack.info["server"] + "/api/v1/namespaces/default/pods"
    hdr = {"Authorization": "Bearer " + stack.info["token"], "Content-Type": "application/json"}
    r = requests.post(url + "?fieldValidation=Strict", data=body, headers=hdr, verify=False, timeout=10)
    assert r.status_code == 400
    assert r.json()["message"] == ('Pod in version "v1" cannot be handled as a Pod: strict decoding error: '
                                   'duplicate field "name"')
    r = requests.post(url, data=body, headers=hdr, verify=False, timeout=10)
    assert r.status_code == 201, r.text
    assert r.headers["Warning"] == '299 - "duplicate field \\"name\\""'
    for name in ("typo", "typo2", "dup"):
        kubectl(stack, "delete", "pod", name, "--grace-period=0", "--force")


def node_pods(stack, node):
    return sorted(p["metadata"]["name"] for p in stack.pods() if p.get("spec", {}).get("nodeName") == node)


def test_drain_with_budget_and_without_eviction(stack):
    for n in ("w1", "w2"):
        r = kubectl(stack, "apply", "-f", write(stack, f"{n}.json", manifest(n, labels={"app": "w"},
                                                                             node="gpu-node-1")))
        assert r.returncode == 0, r.stderr
    for n in ("w1", "w2"):
        wait_for(lambda: running(stack, n), 30, f"{n} to run")
    wait_for(lambda: all(c["status"] == "True" for n in ("w1", "w2") for c in stack.pod(n)["status"]["conditions"]
                         if c["type"] == "Ready"), 30, "pods ready")
    # a server dry run of the whole drain: cordon and evictions answered, nothing done
    r = kubectl(stack, "drain", "gpu-node-1", "--ignore-daemonsets", "--force", "--dry-run=server")
    assert r.returncode == 0 and "node/gpu-node-1 drained (server dry run)" in r.stdout, r.stdout + r.stderr
    assert "evicting pod default/w1 (server dry run)" in r.stdout, r.stdout
    assert not stack.node("gpu-node-1")["spec"].get("unschedulable")
    assert all("deletionTimestamp" not in stack.pod(n)["metadata"] for n in ("w1", "w2"))
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "w-pdb"},
           "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "w"}}}}
    r = kubectl(stack, "apply", "-f", write(stack, "pdb.json", pdb))
    assert r.returncode == 0, r.stderr

    # the budget holds: kubectl retries the 429 until its timeout
    r = kubectl(stack, "drain", "gpu-node-1", "--ignore-daemonsets", "--delete-emptydir-data", "--force",
                "--timeout=8s")
    assert r.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget." in r.stderr, r.stderr
    assert node_pods(stack, "gpu-node-1") == ["w1", "w2"]
    assert all("deletionTimestamp" not in stack.pod(n)["metadata"] for n in ("w1", "w2"))
    st = json.loads(kubectl(stack, "get", "pdb", "w-pdb", "-o", "json").stdout)["status"]
    assert (st["expectedPods"], st["currentHealthy"], st["desiredHealthy"], st["disruptionsAllowed"]) == (2, 2, 2, 0)
    r = kubectl(stack, "get", "pdb")
    assert r.stdout.split("\n")[0].split() == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED",
                                               "DISRUPTIONS", "AGE"], r.stdout
    assert r.stdout.split("\n")[1].split()[:4] == ["w-pdb", "2", "N/A", "0"], r.stdout
    # cordoned: a new pod for that node stays pending
    assert stack.node("gpu-node-1")["spec"].get("unschedulable") is True
    r = kubectl(stack, "apply", "-f", write(stack, "late.json", manifest("late", node="gpu-node-1")))
    assert r.returncode == 0, r.stderr
    time.sleep(2)
    assert phase(stack.pod("late")) == "Pending" and not stack.pod("late")["spec"].get("nodeName")
    kubectl(stack, "delete", "pod", "late", "--grace-period=0", "--force")

    # without the budget the drain goes through pods/eviction and waits for the agent
    assert kubectl(stack, "delete", "pdb", "w-pdb").returncode == 0
    r = kubectl(stack, "drain", "gpu-node-1", "--ignore-daemonsets", "--delete-emptydir-data", "--force",
                "--timeout=60s")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pod/w1 evicted" in r.stdout and "pod/w2 evicted" in r.stdout, r.stdout
    assert "node/gpu-node-1 drained" in r.stdout
    assert node_pods(stack, "gpu-node-1") == []

    # --disable-eviction: DELETE with DeleteOptions (protobuf from kubectl)
    assert kubectl(stack, "uncordon", "gpu-node-1").returncode == 0
    r = kubectl(stack, "apply", "-f", write(stack, "w3.json", manifest("w3", node="gpu-node-1")))
    assert r.returncode == 0, r.stderr
    wait_for(lambda: running(stack, "w3"), 30, "w3 to run")
    r = kubectl(stack, "drain", "gpu-node-1", "--ignore-daemonsets", "--delete-emptydir-data", "--force",
                "--disable-eviction", "--timeout=60s")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "pod/w3 deleted" in r.stdout and "node/gpu-node-1 drained" in r.stdout, r.stdout
    assert node_pods(stack, "gpu-node-1") == [] and stack.pod("w3") is None
    assert kubectl(stack, "uncordon", "gpu-node-1").returncode == 0
