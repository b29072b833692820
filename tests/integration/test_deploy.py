"""deploy/ for a real cluster, checked without one: the kustomizations render (kubectl
kustomize), every object carries what its kind requires and the references between
objects hold, every flag a container passes is accepted by the binary's own flag parser,
the extender's KubeSchedulerConfiguration is one kube-scheduler's v1 config loads, and
`gpusched node-publisher` (the DaemonSet's labeller) writes labels, the gpusched.io/gpus
annotation and the NodeResourceTopology to our own server with only the requests its
ClusterRole allows.
"""
import http.server
import json
import pathlib
import re
import subprocess
import sys
import threading
import time

import pytest
import requests
import yaml

from stack import require_tool, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "kube"))
import rbac  # noqa: E402

KUBECTL = "/usr/bin/kubectl"
KUSTOMIZATIONS = ["deploy", "deploy/extender", "deploy/crds"]
NS = "gpusched"
NAMESPACED = {"ServiceAccount", "Role", "RoleBinding", "Deployment", "DaemonSet", "Service", "PodDisruptionBudget",
              "ConfigMap"}
CLUSTER = {"Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition"}
# Subcommands the manifests run that other parts of the tree provide; where this build lacks one its
# flag check is expected to fail (and reported as such), where it has one the check runs for real.
PENDING_COMMANDS = {"scheduler", "extender"}


def render(d):
    r = subprocess.run([KUBECTL, "kustomize", str(ROOT / d)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"kubectl kustomize {d}: {r.stderr}"
    return [o for o in yaml.safe_load_all(r.stdout) if o]


@pytest.fixture(scope="module")
def rendered():
    if not pathlib.Path(KUBECTL).exists():
        pytest.fail(f"kubectl not found at {KUBECTL}: install it (scripts/install-deps.sh)")
    return {d: render(d) for d in KUSTOMIZATIONS}


def objects(rendered, kind=None):
    seen = {}
    for objs in rendered.values():
        for o in objs:
            if kind is None or o["kind"] == kind:
                seen[(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])] = o
    return list(seen.values())


def workloads(rendered):
    return objects(rendered, "Deployment") + objects(rendered, "DaemonSet")


def containers(rendered):
    return [(w, c) for w in workloads(rendered) for c in w["spec"]["template"]["spec"]["containers"]]


@require_tool(KUBECTL, "kubectl")
def test_kustomizations_render(rendered):
    kinds = sorted({o["kind"] for o in rendered["deploy"]})
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "DaemonSet", "Deployment", "Namespace",
                     "PodDisruptionBudget", "Role", "RoleBinding", "Service", "ServiceAccount"]
    assert {o["kind"] for o in rendered["deploy/extender"]} >= {"DaemonSet", "Deployment", "Service", "ClusterRole"}
    assert [o["kind"] for o in rendered["deploy/crds"]] == ["CustomResourceDefinition"]
    # Images resolved by the kustomization, never the bare placeholder.
    for w, c in containers(rendered):
        assert re.fullmatch(r"[a-z0-9.-]+/[a-z0-9/_-]+:[0-9][0-9A-Za-z.-]*", c["image"]), (w["metadata"]["name"], c)


@require_tool(KUBECTL, "kubectl")
def test_every_object_has_what_its_kind_requires(rendered):
    for o in objects(rendered):
        kind, md = o["kind"], o["metadata"]
        where = f"{kind} {md.get('name')}"
        assert o.get("apiVersion") and md.get("name"), where
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", md["name"]) and len(md["name"]) <= 253, where
        assert kind in NAMESPACED | CLUSTER, f"{where}: no check for this kind"
        if kind in NAMESPACED:
            assert md.get("namespace") == NS, f"{where}: metadata.namespace"
        else:
            assert "namespace" not in md, f"{where}: cluster-scoped objects have no namespace"
        assert md.get("labels", {}).get("app.kubernetes.io/part-of") == "gpusched", f"{where}: part-of label"
    names = {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]) for o in objects(rendered)}
    for w in workloads(rendered):
        where = f"{w['kind']} {w['metadata']['name']}"
        spec, pod = w["spec"], w["spec"]["template"]
        sel = spec["selector"]["matchLabels"]
        assert sel and all(pod["metadata"]["labels"].get(k) == v for k, v in sel.items()), f"{where}: selector"
        ps = pod["spec"]
        assert ("ServiceAccount", NS, ps["serviceAccountName"]) in names, f"{where}: serviceAccountName"
        volumes = {v["name"] for v in ps.get("volumes", [])}
        for c in ps["containers"]:
            cw = f"{where} container {c['name']}"
            assert c.get("name") and c.get("image") and c.get("command") == ["gpusched"], cw
            assert c.get("resources", {}).get("requests") and c["resources"].get("limits", {}).get("memory"), cw
            assert c.get("securityContext", {}).get("allowPrivilegeEscalation") is False, cw
            assert {m["name"] for m in c.get("volumeMounts", [])} <= volumes, f"{cw}: volumeMounts"
            ports = {p["name"] for p in c.get("ports", [])}
            for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
                if probe in c:
                    assert c[probe]["httpGet"]["port"] in ports, f"{cw}: {probe} port"
            env = {e["name"] for e in c.get("env", [])}
            for ref in re.findall(r"\$\((\w+)\)", " ".join(c.get("args", []))):
                assert ref in env, f"{cw}: $({ref}) without an env entry"
    for s in objects(rendered, "Service"):
        where = f"Service {s['metadata']['name']}"
        targets = [w for w in workloads(rendered)
                   if all(w["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in s["spec"]["selector"].items())]
        assert len(targets) == 1, f"{where}: selects {len(targets)} workloads"
        ports = {p["name"] for c in targets[0]["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
        for p in s["spec"]["ports"]:
            assert isinstance(p["port"], int) and p["targetPort"] in ports, f"{where}: port {p}"
    for b in objects(rendered, "ClusterRoleBinding") + objects(rendered, "RoleBinding"):
        where = f"{b['kind']} {b['metadata']['name']}"
        ref = b["roleRef"]
        ns = b["metadata"].get("namespace", "") if ref["kind"] == "Role" else ""
        assert ref["apiGroup"] == "rbac.authorization.k8s.io" and (ref["kind"], ns, ref["name"]) in names, where
        for s in b["subjects"]:
            assert ("ServiceAccount", s["namespace"], s["name"]) in names, f"{where}: subject {s}"
    for crd in objects(rendered, "CustomResourceDefinition"):
        spec = crd["spec"]
        assert crd["metadata"]["name"] == f"{spec['names']['plural']}.{spec['group']}"
        assert sum(v["storage"] for v in spec["versions"]) == 1 and all(v["served"] for v in spec["versions"])
        assert all(v["schema"]["openAPIV3Schema"]["type"] == "object" for v in spec["versions"])


@require_tool(KUBECTL, "kubectl")
def test_scheduler_deployment_shape(rendered):
    (d,) = [w for w in objects(rendered, "Deployment") if w["metadata"]["name"] == "gpusched-scheduler"]
    assert d["spec"]["replicas"] == 2
    (c,) = d["spec"]["template"]["spec"]["containers"]
    args = dict(a[2:].split("=", 1) if "=" in a else (a[2:], True) for a in c["args"][1:])
    assert c["args"][0] == "scheduler" and args["leader-elect"] is True and args["scheduler-name"] == "gpusched"
    assert "kubeconfig" not in args  # in-cluster configuration from the service account
    # client-go's constraints: lease duration > renew deadline > retry period.
    secs = {k: float(args[f"leader-elect-{k}"].rstrip("s")) for k in ("lease-duration", "renew-deadline", "retry-period")}
    assert secs["lease-duration"] > secs["renew-deadline"] > secs["retry-period"] > 0
    # The leader-election Role names exactly the Lease the scheduler is told to use, in its namespace.
    (le,) = [r for r in objects(rendered, "Role") if r["metadata"]["name"] == "gpusched-scheduler-leader-election"]
    assert le["metadata"]["namespace"] == args["leader-elect-namespace"]
    assert {n for r in le["rules"] for n in r.get("resourceNames", [])} == {args["leader-elect-name"]}
    assert c["livenessProbe"]["httpGet"]["path"] == "/healthz" and c["readinessProbe"]["httpGet"]["path"] == "/readyz"
    (port,) = c["ports"]
    assert port["containerPort"] == 10259


def help_text(binary, cmd):
    r = subprocess.run([binary, cmd, "--help"], capture_output=True, text=True, timeout=30)
    return r.returncode, r.stdout + r.stderr


@require_tool(KUBECTL, "kubectl")
def test_container_args_accepted_by_the_binary(rendered, gpusched_bin):
    listing = subprocess.run([gpusched_bin, "--help"], capture_output=True, text=True, timeout=30).stdout
    known = set(re.findall(r"^  (\S+)\s", listing, re.M))
    assert {"device-plugin", "exporter", "node-publisher"} <= known, listing
    missing = []
    for w, c in containers(rendered):
        cmd, flags = c["args"][0], c["args"][1:]
        where = f"{w['kind']} {w['metadata']['name']} container {c['name']}"
        if cmd not in known:
            assert cmd in PENDING_COMMANDS, f"{where}: gpusched has no command {cmd!r}"
            missing.append(cmd)
            continue
        env = {e["name"]: "value-of-" + e["name"].lower() for e in c.get("env", [])}
        argv = [re.sub(r"\$\((\w+)\)", lambda m: env[m.group(1)], a) for a in flags]
        # Every flag must be one the command lists and its parser takes: options are parsed in
        # order, so a bad flag or value stops it before the trailing --help.
        rc, text = help_text(gpusched_bin, cmd)
        assert rc == 0, f"{cmd} --help: {text}"
        for a in argv:
            assert a.split("=", 1)[0] in text, f"{where}: {a} not in `gpusched {cmd} --help`"
        r = subprocess.run([gpusched_bin, cmd, *argv, "--help"], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, f"{where}: gpusched {cmd} {' '.join(argv)}: {r.stderr}"
        bad = subprocess.run([gpusched_bin, cmd, *argv, "--no-such-flag", "--help"], capture_output=True, text=True,
                             timeout=30)
        assert bad.returncode == 2, f"{where}: the parser took an unknown flag"
    if missing:
        pytest.xfail(f"this build has no {', '.join(sorted(set(missing)))} command: their flags are unchecked")


KSC_FIELDS = {"apiVersion", "kind", "parallelism", "leaderElection", "clientConnection", "enableProfiling",
              "enableContentionProfiling", "percentageOfNodesToScore", "percentageOfPlacementsToScore",
              "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles", "extenders", "delayCacheUntilActive"}
EXTENDER_FIELDS = {"urlPrefix", "filterVerb", "preemptVerb", "prioritizeVerb", "weight", "bindVerb", "enableHTTPS",
                   "tlsConfig", "httpTimeout", "nodeCacheCapable", "managedResources", "ignorable"}


@require_tool(KUBECTL, "kubectl")
def test_extender_kube_scheduler_configuration(rendered):
    """kube-scheduler decodes its config strictly (an unknown field is an error) and validates the
    extenders (k8s.io/kube-scheduler/config/v1 types.go; pkg/scheduler/apis/config/validation)."""
    cfg = yaml.safe_load((ROOT / "deploy/extender/kube-scheduler-config.yaml").read_text())
    assert cfg["apiVersion"] == "kubescheduler.config.k8s.io/v1" and cfg["kind"] == "KubeSchedulerConfiguration"
    assert set(cfg) <= KSC_FIELDS, set(cfg) - KSC_FIELDS
    assert set(cfg["clientConnection"]) <= {"kubeconfig", "acceptContentTypes", "contentType", "qps", "burst"}
    binders = 0
    for i, e in enumerate(cfg["extenders"]):
        where = f"extenders[{i}]"
        assert set(e) <= EXTENDER_FIELDS, f"{where}: unknown {set(e) - EXTENDER_FIELDS}"
        assert e["urlPrefix"], where
        if e.get("prioritizeVerb"):
            assert isinstance(e["weight"], int) and e["weight"] > 0, f"{where}.weight: must be positive"
        binders += bool(e.get("bindVerb"))
        assert re.fullmatch(r"(\d+(\.\d+)?(ns|us|ms|s|m|h))+", e["httpTimeout"]), f"{where}.httpTimeout"
        names = [m["name"] for m in e.get("managedResources", [])]
        assert len(names) == len(set(names)), f"{where}.managedResources: duplicate"
        for m in e["managedResources"]:
            assert set(m) <= {"name", "ignoredByScheduler"}
            domain = m["name"].split("/")[0]
            assert "/" in m["name"] and not domain.endswith("kubernetes.io"), f"{m['name']}: not an extended resource"
        # Each verb kube-scheduler calls, and the extender Service it calls them on.
        assert {e.get(k) for k in ("filterVerb", "prioritizeVerb", "preemptVerb", "bindVerb")} == {
            "filter", "prioritize", "preempt", "bind"}
        assert e["nodeCacheCapable"] is True
        m = re.fullmatch(r"http://([a-z0-9-]+)\.([a-z0-9-]+)\.svc:(\d+)", e["urlPrefix"])
        assert m and not e["enableHTTPS"], e["urlPrefix"]
        (svc,) = [s for s in objects(rendered, "Service") if s["metadata"]["name"] == m.group(1)]
        assert svc["metadata"]["namespace"] == m.group(2)
        assert int(m.group(3)) in [p["port"] for p in svc["spec"]["ports"]]
        (dep,) = [w for w in objects(rendered, "Deployment") if w["metadata"]["name"] == "gpusched-extender"]
        listen = [a for a in dep["spec"]["template"]["spec"]["containers"][0]["args"] if a.startswith("--listen=")]
        assert listen and listen[0].endswith(":" + m.group(3))
    assert binders == 1, "only one extender can implement bind"


# --- the node publisher against our own server ---

class Server:
    def __init__(self, binary, workdir):
        self.bin, self.data = binary, pathlib.Path(workdir) / "data"
        self.data.mkdir(parents=True)
        (self.data / "tokens.csv").write_text("adm,admin,,,admin\n")
        port_file = self.data / "port"
        self.log = open(pathlib.Path(workdir) / "server.log", "wb")
        self.proc = subprocess.Popen([binary, "server", "--data-dir", str(self.data), "--listen", "127.0.0.1:0",
                                      "--port-file", str(port_file), "--tokens", str(self.data / "tokens.csv"),
                                      "--no-scheduler", "--log-level", "warn"], stdout=self.log, stderr=subprocess.STDOUT)
        wait_for(lambda: (port_file.exists() and port_file.read_text().strip()) or self.proc.poll() is not None, 20,
                 "gpusched server")
        assert self.proc.poll() is None, (pathlib.Path(workdir) / "server.log").read_text()
        self.url = f"https://127.0.0.1:{int(port_file.read_text())}"
        self.ca = str(self.data / "ca.crt")

    def call(self, method, path, **kw):
        kw.setdefault("headers", {})["Authorization"] = "Bearer adm"
        return requests.request(method, self.url + path, verify=self.ca, timeout=20, **kw)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(20)
        self.log.close()


class RecordingProxy:
    """Plain HTTP in front of the server's HTTPS: forwards each request and keeps (method, path) as
    the fake kube-apiserver's request log would, for the RBAC check."""

    def __init__(self, server, log_path):
        self.entries, self.log_path = [], log_path
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "content-type",
                                                                                   "accept")}
                r = requests.request(self.command, server.url + self.path, data=body or None, headers=headers,
                                     verify=server.ca, timeout=20)
                proxy.entries.append({"method": self.command, "path": self.path, "code": r.status_code})
                self.send_response(r.status_code)
                self.send_header("Content-Type", r.headers.get("Content-Type", "application/json"))
                self.send_header("Content-Length", str(len(r.content)))
                self.end_headers()
                self.wfile.write(r.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = forward

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def write_log(self):
        self.log_path.write_text("".join(json.dumps(e) + "\n" for e in self.entries))
        return self.log_path

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server(gpusched_bin, tmp_path):
    s = Server(gpusched_bin, tmp_path)
    yield s
    s.stop()


def kubeconfig(path, url, ca=None):
    cluster = {"server": url}
    if ca:
        cluster["certificate-authority"] = ca
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": cluster}], "users": [{"name": "u", "user": {"token": "adm"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    return str(path)


def publish(binary, kc, node, mock, *extra):
    return subprocess.run([binary, "node-publisher", "--kubeconfig", kc, "--node-name", node, "--mock", mock,
                           "--once", *extra], capture_output=True, text=True, timeout=60)


def discover(binary, mock):
    r = subprocess.run([binary, "discover", "--mock", mock, "-o", "json"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


NRT = "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies"
SLICES = "/apis/resource.k8s.io/v1/resourceslices"


def test_node_publisher_labels_annotation_nrt(server, gpusched_bin, tmp_path):
    s = server
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1", "labels": {"team": "a"}},
            "status": {"capacity": {"cpu": "64", "memory": "256Gi", "pods": "110", "nvidia.com/gpu": "4"}}}
    assert s.call("POST", "/api/v1/nodes", json=node).status_code == 201
    proxy = RecordingProxy(s, tmp_path / "requests.jsonl")
    try:
        kc = kubeconfig(tmp_path / "kubeconfig", proxy.url)
        mock = "4xH100-80GB,nvlink=all,numa=2,xid=79@gpu1@t=0s"
        r = publish(gpusched_bin, kc, "gpu-1", mock, "--resource-slices")
        assert r.returncode == 0, r.stderr
        n = s.call("GET", "/api/v1/nodes/gpu-1").json()
        labels, ann = n["metadata"]["labels"], n["metadata"]["annotations"]
        assert labels["nvidia.com/gpu.count"] == "4" and labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
        assert labels["team"] == "a" and "nvidia.com/gfd.timestamp" not in labels
        # The annotation is the devices array an agent writes, decoded here as the scheduler would.
        devs = json.loads(ann["gpusched.io/gpus"])
        inv = discover(gpusched_bin, "4xH100-80GB,nvlink=all,numa=2")
        assert [d["uuid"] for d in devs] == [g["uuid"] for g in inv["gpus"]]
        assert [d["index"] for d in devs] == [0, 1, 2, 3]
        assert {d["model"] for d in devs} == {labels["nvidia.com/gpu.product"]}
        assert [d["health"] for d in devs] == ["Healthy", "Unhealthy", "Healthy", "Healthy"]  # Xid 79 on GPU 1
        assert all(sorted(d["nvlinkPeers"]) == [i for i in range(4) if i != d["index"]] for d in devs)
        assert {d["numaNode"] for d in devs} == {0, 1}
        owned = set(ann["gpusched.io/published-labels"].split(","))
        assert "nvidia.com/gpu.count" in owned and "team" not in owned
        nrt = s.call("GET", f"{NRT}/gpu-1").json()
        assert [z["name"] for z in nrt["zones"]] == ["node-0", "node-1"]
        gpu = {z["name"]: [x for x in z["resources"] if x["name"] == "nvidia.com/gpu"][0] for z in nrt["zones"]}
        assert sum(int(g["capacity"]) for g in gpu.values()) == 4
        assert sum(int(g["allocatable"]) for g in gpu.values()) == 3
        # The DRA ResourceSlice: the same GPUs, the unhealthy one tainted.
        sl = s.call("GET", f"{SLICES}?fieldSelector=spec.nodeName=gpu-1").json()["items"]
        assert [x["metadata"]["name"] for x in sl] == ["gpu-1-gpu.nvidia.com-0"]
        sdevs = {d["name"]: d for d in sl[0]["spec"]["devices"]}
        assert [sdevs[f"gpu-{i}"]["attributes"]["uuid"]["string"] for i in range(4)] == [d["uuid"] for d in devs]
        assert sdevs["gpu-1"]["taints"][0]["effect"] == "NoExecute" and "taints" not in sdevs["gpu-0"]
        assert sl[0]["spec"]["pool"]["generation"] == 1
        rv = n["metadata"]["resourceVersion"]
        srv = sl[0]["metadata"]["resourceVersion"]
        # Unchanged inventory: no write at all (the taint keeps its time across publisher runs).
        r = publish(gpusched_bin, kc, "gpu-1", mock, "--resource-slices")
        assert r.returncode == 0, r.stderr
        assert s.call("GET", "/api/v1/nodes/gpu-1").json()["metadata"]["resourceVersion"] == rv
        assert s.call("GET", f"{SLICES}/gpu-1-gpu.nvidia.com-0").json()["metadata"]["resourceVersion"] == srv
        # MIG under the single strategy, then MIG off: its labels come and go, others' stay.
        r = publish(gpusched_bin, kc, "gpu-1", "2xA100-40GB,mig=1g.5gb*7", "--mig-strategy", "single",
                    "--resource-slices", "--dra-partitionable")
        assert r.returncode == 0, r.stderr
        sl = s.call("GET", f"{SLICES}?fieldSelector=spec.nodeName=gpu-1").json()["items"]
        assert len(sl) == 2 and {x["spec"]["pool"]["generation"] for x in sl} == {2}  # counter sets, devices
        labels = s.call("GET", "/api/v1/nodes/gpu-1").json()["metadata"]["labels"]
        assert labels["nvidia.com/mig.strategy"] == "single" and labels["nvidia.com/gpu.count"] == "14"
        assert "nvidia.com/mig-1g.5gb" in json.dumps(s.call("GET", f"{NRT}/gpu-1").json()["zones"])
        s.call("PATCH", "/api/v1/nodes/gpu-1", data=json.dumps({"metadata": {"labels": {"nvidia.com/x": "mine"}}}),
               headers={"Content-Type": "application/merge-patch+json"})
        r = publish(gpusched_bin, kc, "gpu-1", "2xA100-40GB", "--resource-slices")
        assert r.returncode == 0, r.stderr
        sl = s.call("GET", f"{SLICES}?fieldSelector=spec.nodeName=gpu-1").json()["items"]
        assert [x["metadata"]["name"] for x in sl] == ["gpu-1-gpu.nvidia.com-0"]  # the second one deleted
        assert sorted(d["name"] for d in sl[0]["spec"]["devices"]) == ["gpu-0", "gpu-1"]
        n = s.call("GET", "/api/v1/nodes/gpu-1").json()
        labels = n["metadata"]["labels"]
        assert "nvidia.com/mig.strategy" not in labels and "nvidia.com/gpu.slices.gi" not in labels
        assert labels["nvidia.com/gpu.count"] == "2" and labels["team"] == "a" and labels["nvidia.com/x"] == "mine"
        assert len(json.loads(n["metadata"]["annotations"]["gpusched.io/gpus"])) == 2
        assert "nvidia.com/mig-1g.5gb" not in json.dumps(s.call("GET", f"{NRT}/gpu-1").json()["zones"])
        # The status is kubelet's: untouched.
        assert "devices" not in n["status"] and n["status"]["capacity"]["nvidia.com/gpu"] == "4"
        # Every request it made is one the DaemonSet's ClusterRole allows, and it used every grant.
        log = proxy.write_log()
        policy = rbac.deploy_policy("system:serviceaccount:gpusched:gpusched-node", dirs=("deploy",))
        assert rbac.check_log(log, policy) == []
        assert rbac.unused_rules(log, policy) == []
        verbs = {(x.verb, x.resource) for _, _, x in rbac.read_log(log)}
        assert {("get", "nodes"), ("patch", "nodes"), ("get", "noderesourcetopologies"),
                ("create", "noderesourcetopologies"), ("update", "noderesourcetopologies"), ("list", "resourceslices"),
                ("create", "resourceslices"), ("update", "resourceslices"), ("delete", "resourceslices")} == verbs
    finally:
        proxy.close()


def test_node_publisher_errors(server, gpusched_bin, tmp_path):
    kc = kubeconfig(tmp_path / "kubeconfig", server.url, server.ca)
    r = publish(gpusched_bin, kc, "absent", "1xT4")
    assert r.returncode == 1 and "the Node does not exist" in r.stderr and "absent" in r.stderr
    r = publish(gpusched_bin, str(tmp_path / "nope"), "n", "1xT4")
    assert r.returncode == 1 and "cannot read the kubeconfig" in r.stderr
    r = subprocess.run([gpusched_bin, "node-publisher", "--mock", "1xT4"], capture_output=True, text=True,
                       env={"PATH": "/usr/bin:/bin"}, timeout=30)
    assert r.returncode == 2 and "--node-name is required" in r.stderr
    r = subprocess.run([gpusched_bin, "node-publisher", "--node-name", "n", "--interval", "100ms"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and '--interval "100ms": want a duration of at least 1s' in r.stderr
    r = subprocess.run([gpusched_bin, "node-publisher", "--node-name", "n", "--mock", "1xT4", "--nvml"],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--mock" in r.stderr and "cannot be combined" in r.stderr


def test_node_publisher_runs_until_sigterm(server, gpusched_bin, tmp_path):
    s = server
    assert s.call("POST", "/api/v1/nodes", json={"apiVersion": "v1", "kind": "Node",
                                                  "metadata": {"name": "gpu-2"}}).status_code == 201
    kc = kubeconfig(tmp_path / "kubeconfig", s.url, s.ca)
    p = subprocess.Popen([gpusched_bin, "node-publisher", "--kubeconfig", kc, "--node-name", "gpu-2", "--mock",
                          "2xT4", "--interval", "1s"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: s.call("GET", "/api/v1/nodes/gpu-2").json()["metadata"].get("labels", {}).get(
            "nvidia.com/gpu.count") == "2", 15, "the first publish")
        s.call("PATCH", "/api/v1/nodes/gpu-2", data=json.dumps({"metadata": {"labels": {"nvidia.com/gpu.count": "9"}}}),
               headers={"Content-Type": "application/merge-patch+json"})
        # The next period puts its own value back.
        wait_for(lambda: s.call("GET", "/api/v1/nodes/gpu-2").json()["metadata"]["labels"]["nvidia.com/gpu.count"]
                 == "2", 15, "the label restored")
    finally:
        p.terminate()
        out, err = p.communicate(timeout=15)
    assert p.returncode == 0, err
