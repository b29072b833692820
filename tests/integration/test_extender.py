"""`gpusched extender` against `gpusched server` over HTTPS with a token, through the
Kubernetes transport (informers and REST writes), answering requests shaped exactly as
kube-scheduler sends them (k8s.io/kube-scheduler/extender/v1: Go field names as keys).

The server runs without its own scheduler, so every binding here is the extender's.
"""
import json
import pathlib
import signal
import subprocess

import pytest
import requests  # Debian python3-requests: a missing module fails the run, never skips it

from stack import wait_for

TOKENS = "adm,admin,,,admin\n"
PODS = "/api/v1/namespaces/default/pods"


class Proc:
    def __init__(self, args, port_file):
        self.port_file = pathlib.Path(port_file)
        if self.port_file.exists():
            self.port_file.unlink()
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        wait_for(lambda: (self.port_file.exists() and self.port_file.read_text().strip()) or self.p.poll() is not None,
                 30, " ".join(args[:2]))
        if self.p.poll() is not None:
            raise AssertionError(f"{args[1]} exited {self.p.returncode}: {self.p.stderr.read()}")
        self.port = int(self.port_file.read_text())

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGTERM)
            self.p.wait(timeout=20)
        err = self.p.stderr.read()
        self.p.stdout.close()
        self.p.stderr.close()
        return self.p.returncode, err


@pytest.fixture
def cluster(gpusched_bin, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    (data / "tokens.csv").write_text(TOKENS)
    srv = Proc([gpusched_bin, "server", "--data-dir", str(data), "--listen", "127.0.0.1:0", "--port-file",
                str(tmp_path / "server.port"), "--tokens", str(data / "tokens.csv"), "--no-scheduler",
                "--log-level", "warn"], tmp_path / "server.port")
    url, ca = f"https://127.0.0.1:{srv.port}", str(data / "ca.crt")

    def api(method, path, **kw):
        return requests.request(method, url + path, headers={"Authorization": "Bearer adm"}, verify=ca, timeout=20,
                                **kw)

    ext = None
    try:
        for name, gpus in (("big", 4), ("small", 1)):
            r = api("POST", "/api/v1/nodes", json=node(name, gpus))
            assert r.status_code == 201, r.text
        for name, gpus in (("filler", 1), ("web", 1), ("large", 2)):
            r = api("POST", PODS, json=pod(name, gpus))
            assert r.status_code == 201, r.text
        ext = Proc([gpusched_bin, "extender", "--kubeconfig", str(data / "kubeconfig"), "--listen", "127.0.0.1:0",
                    "--port-file", str(tmp_path / "extender.port"), "--log-level", "warn"],
                   tmp_path / "extender.port")
        base = f"http://127.0.0.1:{ext.port}"
        wait_for(lambda: requests.get(base + "/readyz", timeout=5).status_code == 200, 30, "extender /readyz")
        yield api, base
    finally:
        if ext:
            rc, err = ext.stop()
            assert rc == 0, err  # a clean stop: HTTP, extender and informers joined
        rc, err = srv.stop()
        assert rc == 0, err


def node(name, gpus):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name},
            "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": str(gpus)},
                       "conditions": [{"type": "Ready", "status": "True"}],
                       "devices": [{"index": i, "uuid": f"GPU-{name}-{i}", "model": "H100", "memoryMiB": 81920}
                                   for i in range(gpus)]}}


def pod(name, gpus):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "resources": {
                "limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"cpu": "1", "memory": "1Gi"}}}]}}


def as_sent(obj):
    """An object as kube-scheduler marshals it from its informer: no apiVersion/kind."""
    o = dict(obj)
    o.pop("apiVersion", None)
    o.pop("kind", None)
    return o


def post(base, verb, body):
    return requests.post(f"{base}/gpusched/{verb}", data=json.dumps(body),
                         headers={"Content-Type": "application/json"}, timeout=10)


def bind_args(api, name, node_name):
    p = api("GET", f"{PODS}/{name}").json()
    return {"PodName": name, "PodNamespace": "default", "PodUID": p["metadata"]["uid"], "Node": node_name}


def test_filter_prioritize_bind(cluster):
    api, base = cluster
    # Fill the one GPU of "small" through the extender's own bind.
    r = post(base, "bind", bind_args(api, "filler", "small"))
    assert r.status_code == 200 and r.json() == {"Error": ""}, r.text
    p = api("GET", f"{PODS}/filler").json()
    assert p["spec"]["nodeName"] == "small"
    assert p["metadata"]["annotations"]["gpusched.io/devices"] == "GPU-small-0"
    assert {"type": "PodScheduled", "status": "True"}.items() <= \
        next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled").items()

    web = as_sent(api("GET", f"{PODS}/web").json())
    # nodeCacheCapable: true -> NodeNames in, NodeNames out; small is full, with our reason.
    r = post(base, "filter", {"Pod": web, "Nodes": None, "NodeNames": ["big", "small", "gone"]})
    assert r.status_code == 200, r.text
    res = r.json()
    assert res["NodeNames"] == ["big"]
    assert res["FailedNodes"]["small"] == "Insufficient nvidia.com/gpu"
    assert "not known to gpusched" in res["FailedNodes"]["gone"]
    assert res["Error"] == ""
    # nodeCacheCapable: false -> the NodeList in, the surviving Node objects out.
    nodes = api("GET", "/api/v1/nodes").json()
    items = [as_sent(n) for n in nodes["items"]]
    r = post(base, "filter", {"Pod": web, "Nodes": {"items": items}, "NodeNames": None})
    assert r.status_code == 200, r.text
    res = r.json()
    assert [n["metadata"]["name"] for n in res["Nodes"]["items"]] == ["big"]
    assert res["Nodes"]["items"][0] == next(n for n in items if n["metadata"]["name"] == "big")
    assert res["FailedNodes"] == {"small": "Insufficient nvidia.com/gpu"}

    r = post(base, "prioritize", {"Pod": web, "NodeNames": ["big"]})
    assert r.status_code == 200, r.text
    (hp,) = r.json()
    assert hp["Host"] == "big" and 0 <= hp["Score"] <= 10

    r = post(base, "bind", bind_args(api, "web", "big"))
    assert r.json() == {"Error": ""}, r.text
    p = api("GET", f"{PODS}/web").json()
    assert p["spec"]["nodeName"] == "big"
    assert p["metadata"]["annotations"]["gpusched.io/devices"].startswith("GPU-big-")

    # Refusals come back as ExtenderBindingResult.Error, and nothing is written.
    err = post(base, "bind", bind_args(api, "large", "small")).json()["Error"]
    assert "does not fit on small" in err and "Insufficient nvidia.com/gpu" in err
    assert "nodeName" not in api("GET", f"{PODS}/large").json()["spec"]
    err = post(base, "bind", bind_args(api, "web", "small")).json()["Error"]
    assert "already bound to big" in err
    args = bind_args(api, "large", "big")
    args["PodUID"] = "not-its-uid"
    assert "does not match" in post(base, "bind", args).json()["Error"]

    metrics = requests.get(base + "/metrics", timeout=5).text
    assert 'gpusched_extender_requests_total{verb="filter"} 2' in metrics
    assert 'gpusched_extender_requests_total{verb="bind"} 5' in metrics
    assert 'gpusched_extender_errors_total{verb="bind"} 3' in metrics
    assert "gpusched_extender_cache_nodes 2" in metrics


def test_preempt_and_bad_requests(cluster):
    api, base = cluster
    assert post(base, "bind", bind_args(api, "filler", "small")).json() == {"Error": ""}
    r = api("POST", "/apis/scheduling.k8s.io/v1/priorityclasses",
            json={"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "urgent"},
                  "value": 1000})
    assert r.status_code == 201, r.text
    hi = pod("urgent", 1)
    hi["spec"]["priorityClassName"] = "urgent"
    r = api("POST", PODS, json=hi)
    assert r.status_code == 201, r.text
    assert r.json()["spec"]["priority"] == 1000
    urgent = as_sent(api("GET", f"{PODS}/urgent").json())
    filler_uid = api("GET", f"{PODS}/filler").json()["metadata"]["uid"]
    # The extender's cache must have seen the binding come back through the watch as well.
    r = post(base, "preempt", {"Pod": urgent, "NodeNameToMetaVictims": {
        "small": {"Pods": [{"UID": filler_uid}], "NumPDBViolations": 0}}})
    assert r.status_code == 200, r.text
    assert r.json() == {"NodeNameToMetaVictims": {"small": {"Pods": [{"UID": filler_uid}], "NumPDBViolations": 0}}}

    r = post(base, "filter", {"NodeNames": ["big"]})
    assert r.status_code == 400 and r.json() == {"Error": "ExtenderArgs.Pod: required"}
    r = post(base, "bind", {"PodName": "web"})
    assert r.status_code == 400 and r.json() == {"Error": "ExtenderBindingArgs.Node: required"}
    r = requests.post(base + "/gpusched/sort", data="{}", timeout=5)
    assert r.status_code == 404


def test_flags_are_checked(gpusched_bin, tmp_path):
    r = subprocess.run([gpusched_bin, "extender", "--tls-cert-file", "x.pem"], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 2 and "--tls-cert-file and --tls-private-key-file go together" in r.stderr
    r = subprocess.run([gpusched_bin, "extender", "--max-body", "12"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and '--max-body "12"' in r.stderr
    r = subprocess.run([gpusched_bin, "extender", "--kubeconfig", str(tmp_path / "none")], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1 and "--kubeconfig" in r.stderr
