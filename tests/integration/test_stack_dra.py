"""`gpusched up` with mock GPUs runs pods with resource claims end to end: each node's DRA
plugin (gpusched dra-plugin on a thread of up) prepares the claim, the agent hands the
container exactly the claimed devices (NVIDIA_VISIBLE_DEVICES = their UUIDs) and unprepares
the claim once the pod is gone.

test_bound_pod_*: the claim's allocation is written by the test as the scheduler would and the
pod is bound by nodeName, so only the node side is exercised. test_scheduled_*: the scheduler
allocates (DynamicResources plugin, the resourceclaim controller for templates, which needs
ResourceClaimTemplates served).
"""
import json

import pytest
import requests

from stack import Stack, apply, phase, wait_for

NODE = "gpu-node-1"
DRIVER = "gpu.nvidia.com"
VERSIONS = ("v1", "v1beta2", "v1beta1")


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("dra"))
    s.up("2x4xH100-80GB,nvlink=islands:2")
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


class Api:
    def __init__(self, stack):
        self.s = requests.Session()
        self.s.trust_env = False
        self.s.verify = str(stack.data / "ca.crt")
        self.s.headers["Authorization"] = f"Bearer {stack.info['token']}"
        self.base = stack.info["server"]

    def call(self, method, path, **kw):
        return self.s.request(method, self.base + path, timeout=10, **kw)

    def claim_version(self):
        """The newest resource.k8s.io version the server serves ResourceClaims in."""
        for v in VERSIONS:
            if self.call("GET", f"/apis/resource.k8s.io/{v}/namespaces/default/resourceclaims").status_code == 200:
                return v
        raise AssertionError("the server serves no resource.k8s.io ResourceClaims")


def claim_doc(version, name, count):
    if version == "v1beta1":
        req = {"name": "gpus", "deviceClassName": "gpu.nvidia.com", "count": count}
    else:
        req = {"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": count}}
    return {"apiVersion": f"resource.k8s.io/{version}", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": "default"}, "spec": {"devices": {"requests": [req]}}}


def dra_pod(name, claims, node=None, cmd='echo "nv=$NVIDIA_VISIBLE_DEVICES cuda=$CUDA_VISIBLE_DEVICES"; sleep 2'):
    spec = {"restartPolicy": "Never", "resourceClaims": claims,
            "containers": [{"name": "main", "command": ["sh", "-c", cmd],
                            "resources": {"claims": [{"name": c["name"]} for c in claims]}},
                           {"name": "side", "command": ["sh", "-c", 'echo "side nv=$NVIDIA_VISIBLE_DEVICES"']}]}
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def on_node(devices, node=NODE):
    """An allocation as the scheduler writes it: the devices, and the node they are on (a node
    may read only the claims allocated on it)."""
    return {"devices": devices, "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}


def uuids_by_device(stack, node):
    """gpu-<minor> -> UUID, from the Node's status.devices (what the agent discovered)."""
    return {f"gpu-{d['index']}": d["uuid"] for d in stack.node(node)["status"]["devices"]}  # mock minors = indices


def logs(stack, pod, container):
    return stack.cli("logs", pod, "-c", container).stdout.strip()


def test_bound_pod_sees_exactly_its_claimed_gpus(stack):
    api = Api(stack)
    v = api.claim_version()
    base = f"/apis/resource.k8s.io/{v}/namespaces/default/resourceclaims"
    r = api.call("POST", base, json=claim_doc(v, "two-gpus", 2))
    assert r.status_code == 201, r.text
    apply(stack, dra_pod("bound", [{"name": "gpus", "resourceClaimName": "two-gpus"}], node=NODE))
    pod = wait_for(lambda: stack.pod("bound"), 10, "pod bound")

    # Not allocated yet: the pod waits, saying so, and runs nothing.
    def waiting():
        p = stack.pod("bound")
        conds = {c["type"]: c for c in (p or {}).get("status", {}).get("conditions", [])}
        c = conds.get("ResourceClaimsPrepared")
        return c if c and c["status"] == "False" else None
    cond = wait_for(waiting, 15, "the pod to wait for its claim")
    assert "two-gpus" in cond["message"] and "allocated" in cond["message"]
    assert phase(stack.pod("bound")) == "Pending"

    claim = api.call("GET", f"{base}/two-gpus").json()
    claim["status"] = {
        "allocation": {
            "devices": {"results": [{"request": "gpus", "driver": DRIVER, "pool": NODE, "device": d}
                                    for d in ("gpu-1", "gpu-2")]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [NODE]}]}]}},
        "reservedFor": [{"resource": "pods", "name": "bound", "uid": pod["metadata"]["uid"]}]}
    r = api.call("PUT", f"{base}/two-gpus/status", json=claim)
    assert r.status_code == 200, r.text

    wait_for(lambda: phase(stack.pod("bound")) == "Succeeded", 30, "the claim's pod to succeed")
    st = stack.pod("bound")["status"]
    assert "message" not in st, st  # the wait's message went with the wait
    assert {c["type"]: c["status"] for c in st["conditions"]}["ResourceClaimsPrepared"] == "True"
    u = uuids_by_device(stack, NODE)
    want = f"{u['gpu-1']},{u['gpu-2']}"
    assert logs(stack, "bound", "main") == f"nv={want} cuda={want}"
    assert logs(stack, "bound", "side") == "side nv=void"  # names no claim: sees none

    cdi = stack.data / "dra" / NODE / "cdi" / f"k8s.gpu.nvidia.com-claim_{claim['metadata']['uid']}.json"
    wait_for(lambda: not cdi.exists(), 15, "the claim to be unprepared after the pod ended")
    ckpt = json.loads((stack.data / "dra" / NODE / "plugins" / DRIVER / "checkpoint.json").read_text())
    assert claim["metadata"]["uid"] not in ckpt["claims"]


def test_shared_claim_is_unprepared_after_its_last_pod(stack):
    api = Api(stack)
    v = api.claim_version()
    base = f"/apis/resource.k8s.io/{v}/namespaces/default/resourceclaims"
    assert api.call("POST", base, json=claim_doc(v, "shared", 1)).status_code == 201
    apply(stack, dra_pod("long", [{"name": "gpus", "resourceClaimName": "shared"}], node=NODE,
                         cmd='echo "nv=$NVIDIA_VISIBLE_DEVICES"; sleep 4'),
          dra_pod("short", [{"name": "gpus", "resourceClaimName": "shared"}], node=NODE,
                  cmd='echo "nv=$NVIDIA_VISIBLE_DEVICES"'))
    pods = [wait_for(lambda n=n: stack.pod(n), 10, f"{n} bound") for n in ("long", "short")]
    claim = api.call("GET", f"{base}/shared").json()
    claim["status"] = {"allocation": on_node({"results": [
        {"request": "gpus", "driver": DRIVER, "pool": NODE, "device": "gpu-3"}]}),
        "reservedFor": [{"resource": "pods", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
                        for p in pods]}
    assert api.call("PUT", f"{base}/shared/status", json=claim).status_code == 200
    cdi = stack.data / "dra" / NODE / "cdi" / f"k8s.gpu.nvidia.com-claim_{claim['metadata']['uid']}.json"
    wait_for(lambda: phase(stack.pod("short")) == "Succeeded", 20, "the short pod to succeed")
    assert phase(stack.pod("long")) == "Running"
    assert cdi.exists(), "unprepared while another pod still uses the claim"
    uuid = uuids_by_device(stack, NODE)["gpu-3"]
    assert logs(stack, "short", "main") == f"nv={uuid}"
    wait_for(lambda: phase(stack.pod("long")) == "Succeeded", 20, "the long pod to succeed")
    assert logs(stack, "long", "main") == f"nv={uuid}"
    wait_for(lambda: not cdi.exists(), 15, "the claim to be unprepared after its last pod")


def test_bound_pod_with_a_bad_allocation_never_starts(stack):
    api = Api(stack)
    v = api.claim_version()
    base = f"/apis/resource.k8s.io/{v}/namespaces/default/resourceclaims"
    assert api.call("POST", base, json=claim_doc(v, "bad", 1)).status_code == 201
    apply(stack, dra_pod("bad-pod", [{"name": "gpus", "resourceClaimName": "bad"}], node=NODE,
                         cmd="echo started"))
    pod = wait_for(lambda: stack.pod("bad-pod"), 10, "pod bound")
    claim = api.call("GET", f"{base}/bad").json()
    claim["status"] = {"allocation": on_node({"results": [
        {"request": "gpus", "driver": DRIVER, "pool": NODE, "device": "gpu-7"}]}),
        "reservedFor": [{"resource": "pods", "name": "bad-pod", "uid": pod["metadata"]["uid"]}]}
    assert api.call("PUT", f"{base}/bad/status", json=claim).status_code == 200

    def refused():
        c = {c["type"]: c for c in stack.pod("bad-pod").get("status", {}).get("conditions", [])}
        m = c.get("ResourceClaimsPrepared", {}).get("message", "")
        return m if "gpu-7" in m else None
    msg = wait_for(refused, 20, "the plugin's error on the pod")
    assert "claim bad" in msg and "not a device" in msg
    assert phase(stack.pod("bad-pod")) == "Pending"
    r = stack.cli("get", "events", "-o", "json", check=False)
    assert "FailedPrepareDynamicResources" in r.stdout


def node_slices(api, v):
    """The API's ResourceSlices of driver gpu.nvidia.com: device name -> UUID, per node."""
    r = api.call("GET", f"/apis/resource.k8s.io/{v}/resourceslices")
    assert r.status_code == 200, r.text
    out = {}
    for sl in r.json().get("items", []):
        if sl["spec"].get("driver") != DRIVER:
            continue
        for d in sl["spec"].get("devices", []):
            attrs = d.get("attributes") or d.get("basic", {}).get("attributes", {})
            u = attrs.get("uuid") or attrs.get(f"{DRIVER}/uuid")
            out.setdefault(sl["spec"]["nodeName"], {})[d["name"]] = u["string"]
    return out


def ensure_slices_and_class(stack, api, v):
    """The nodes' slices and the gpu.nvidia.com DeviceClass, as the agents' publishing and the server
    create them; written here (as admin, from the Nodes' own devices) where this build does not."""
    have = node_slices(api, v)
    for n in (x["name"] for x in stack.info["nodes"]):
        if n in have:
            continue
        devs = []
        for d in stack.node(n)["status"]["devices"]:
            attrs = {"type": {"string": "gpu"}, "uuid": {"string": d["uuid"]}}
            devs.append({"name": f"gpu-{d['index']}", **({"basic": {"attributes": attrs}} if v == "v1beta1"
                                                          else {"attributes": attrs})})
        r = api.call("POST", f"/apis/resource.k8s.io/{v}/resourceslices", json={
            "apiVersion": f"resource.k8s.io/{v}", "kind": "ResourceSlice", "metadata": {"name": f"{n}-{DRIVER}-0"},
            "spec": {"driver": DRIVER, "nodeName": n, "pool": {"name": n, "generation": 1, "resourceSliceCount": 1},
                     "devices": devs}})
        assert r.status_code == 201, r.text
    if api.call("GET", f"/apis/resource.k8s.io/{v}/deviceclasses/{DRIVER}").status_code == 404:
        r = api.call("POST", f"/apis/resource.k8s.io/{v}/deviceclasses", json={
            "apiVersion": f"resource.k8s.io/{v}", "kind": "DeviceClass", "metadata": {"name": DRIVER},
            "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                                          "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}})
        assert r.status_code == 201, r.text
    return node_slices(api, v)


def allocation(api, base, claim_name):
    """The claim's results once allocated (read while its pod runs: it is deallocated after)."""
    def get():
        c = api.call("GET", f"{base}/resourceclaims/{claim_name}").json()
        return c.get("status", {}).get("allocation", {}).get("devices", {}).get("results")
    return wait_for(get, 30, f"claim {claim_name} allocated")


def uuids_of(res, node, slices):
    assert res and all(x["driver"] == DRIVER and x["pool"] == node for x in res)
    return [slices[node][x["device"]] for x in res]


def test_scheduled_claim_runs_on_its_devices(stack):
    """The scheduler allocates (DynamicResources plugin); the node side prepares what it chose."""
    api = Api(stack)
    v = api.claim_version()
    slices = ensure_slices_and_class(stack, api, v)
    base = f"/apis/resource.k8s.io/{v}/namespaces/default"
    assert api.call("POST", f"{base}/resourceclaims", json=claim_doc(v, "sched-two", 2)).status_code == 201
    apply(stack, dra_pod("sched", [{"name": "gpus", "resourceClaimName": "sched-two"}]))
    res = allocation(api, base, "sched-two")
    p = wait_for(lambda: phase(stack.pod("sched")) == "Succeeded" and stack.pod("sched"), 60, "the pod to succeed")
    node = p["spec"]["nodeName"]
    want = uuids_of(res, node, slices)
    assert len(want) == 2 and len(set(want)) == 2
    nv = logs(stack, "sched", "main").split()[0].removeprefix("nv=")
    assert sorted(nv.split(",")) == sorted(want)
    assert set(want) <= set(uuids_by_device(stack, node).values())  # the node's own GPUs


def test_scheduled_template_claim_runs_on_its_device(stack):
    """A claim from a ResourceClaimTemplate (resourceclaim controller) next to a direct one."""
    api = Api(stack)
    v = api.claim_version()
    slices = ensure_slices_and_class(stack, api, v)
    base = f"/apis/resource.k8s.io/{v}/namespaces/default"
    assert api.call("POST", f"{base}/resourceclaims", json=claim_doc(v, "sched-one", 1)).status_code == 201
    tmpl = {"apiVersion": f"resource.k8s.io/{v}", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu", "namespace": "default"},
            "spec": {"spec": claim_doc(v, "x", 1)["spec"]}}
    r = api.call("POST", f"{base}/resourceclaimtemplates", json=tmpl)
    assert r.status_code == 201, r.text
    apply(stack, dra_pod("tmpl", [{"name": "gpus", "resourceClaimName": "sched-one"},
                                  {"name": "extra", "resourceClaimTemplateName": "one-gpu"}]))
    res = allocation(api, base, "sched-one")
    p = wait_for(lambda: (stack.pod("tmpl") or {}).get("status", {}).get("resourceClaimStatuses") and
                 stack.pod("tmpl"), 30, "the template's claim named on the pod")
    names = {s["name"]: s["resourceClaimName"] for s in p["status"]["resourceClaimStatuses"]}
    res += allocation(api, base, names["extra"])
    p = wait_for(lambda: phase(stack.pod("tmpl")) == "Succeeded" and stack.pod("tmpl"), 60, "the pod to succeed")
    node = p["spec"]["nodeName"]
    want = uuids_of(res, node, slices)
    assert len(set(want)) == 2
    nv = logs(stack, "tmpl", "main").split()[0].removeprefix("nv=")
    assert sorted(nv.split(",")) == sorted(want)


def test_separate_agent_and_plugin_processes(gpusched_bin, tmp_path):
    """A server, `gpusched agent --dra-registry-dir` and `gpusched dra-plugin --token-file` as their own
    processes, as on a real node: the two name the same mock GPUs, the plugin reads claims with the
    node's token."""
    import socket
    import time
    s = Stack(gpusched_bin, tmp_path)
    with socket.socket() as sk:
        sk.bind(("127.0.0.1", 0))
        port = sk.getsockname()[1]
    s.node_tokens("solo")
    reg, plugins, cdi = tmp_path / "registry", tmp_path / "plugins", tmp_path / "cdi"
    try:
        s.spawn("server", "server", "--data-dir", str(s.data), "--listen", f"127.0.0.1:{port}", "--log-level", "warn")
        wait_for(lambda: (s.data / "kubeconfig").exists() and s.cli("get", "nodes", check=False, timeout=5).returncode
                 == 0, 20, "the server")
        s.spawn("plugin", "dra-plugin", "--mock", "2xH100-80GB", "--node-name", "solo", "--plugins-dir", str(plugins),
                "--registry-dir", str(reg), "--cdi-dir", str(cdi), *s.agent_args("solo"))
        s.spawn("agent", "agent", *s.agent_args("solo"), "--node-name", "solo", "--mock", "2xH100-80GB",
                "--state-dir", str(tmp_path / "agent"), "--dra-registry-dir", str(reg), "--dra-cdi-dir", str(cdi),
                "--agent-token-file", str(s.data / "agent.token"), "--grace-ms", "500", "--log-level", "warn")
        wait_for(lambda: (s.node("solo") or {}).get("status", {}).get("devices"), 20, "the node")
        wait_for(lambda: (reg / f"{DRIVER}-reg.sock").exists(), 20, "the plugin's registration socket")
        admin = (s.data / "tokens.csv").read_text().splitlines()[1].split(",")[0]
        api = requests.Session()
        api.trust_env = False
        api.verify = str(s.data / "ca.crt")
        api.headers["Authorization"] = f"Bearer {admin}"
        url = f"https://127.0.0.1:{port}"
        v = next(x for x in VERSIONS if api.get(f"{url}/apis/resource.k8s.io/{x}/namespaces/default/resourceclaims",
                                                 timeout=10).status_code == 200)
        base = f"{url}/apis/resource.k8s.io/{v}/namespaces/default/resourceclaims"
        assert api.post(base, json=claim_doc(v, "solo-claim", 1), timeout=10).status_code == 201
        apply(s, dra_pod("solo-pod", [{"name": "gpus", "resourceClaimName": "solo-claim"}], node="solo"))
        pod = wait_for(lambda: s.pod("solo-pod"), 10, "the pod")
        claim = api.get(f"{base}/solo-claim", timeout=10).json()
        claim["status"] = {"allocation": on_node({"results": [
            {"request": "gpus", "driver": DRIVER, "pool": "solo", "device": "gpu-1"}]}, node="solo"),
            "reservedFor": [{"resource": "pods", "name": "solo-pod", "uid": pod["metadata"]["uid"]}]}
        assert api.put(f"{base}/solo-claim/status", json=claim, timeout=10).status_code == 200
        wait_for(lambda: phase(s.pod("solo-pod")) == "Succeeded", 30, "the pod to succeed")
        uuid = uuids_by_device(s, "solo")["gpu-1"]
        assert logs(s, "solo-pod", "main") == f"nv={uuid} cuda={uuid}"
        wait_for(lambda: not list(cdi.glob("k8s.gpu.nvidia.com-claim_*.json")), 15, "the claim unprepared")
        time.sleep(0.2)
        assert s.stop("plugin") == 0, s.log("plugin")
        assert not (reg / f"{DRIVER}-reg.sock").exists()
    finally:
        s.stop_all()
