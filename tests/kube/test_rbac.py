"""The RBAC matcher (rbac.py) against Kubernetes' rules, the request-log checker, and deploy/'s
roles: what each component must be allowed and what it must not be.

Run: /usr/bin/python3 -m pytest -q tests/kube/test_rbac.py (needs kubectl for deploy/'s render).
"""
import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import rbac  # noqa: E402
from rbac import Request as R  # noqa: E402

SCHEDULER = "system:serviceaccount:gpusched:gpusched-scheduler"
NODE = "system:serviceaccount:gpusched:gpusched-node"
EXTENDER = "system:serviceaccount:gpusched:gpusched-extender"


def cluster_role(name, *rules):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": name},
            "rules": list(rules)}


def role(name, ns, *rules):
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": ns}, "rules": list(rules)}


def binding(kind, name, role_kind, role_name, subjects, ns=None):
    md = {"name": name}
    if ns:
        md["namespace"] = ns
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": md,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
            "subjects": subjects}


def sa(ns, name):
    return {"kind": "ServiceAccount", "name": name, "namespace": ns}


def allows(docs, req, subject=None):
    return rbac.Policy(docs, subject).allows(req)


# --- the matcher ---

def test_verbs_and_groups():
    docs = [cluster_role("r", {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]})]
    assert allows(docs, R("get", "", "pods", namespace="a", name="p"))
    assert allows(docs, R("list", "", "pods"))
    assert not allows(docs, R("delete", "", "pods", namespace="a", name="p"))
    assert not allows(docs, R("watch", "", "pods"))
    assert not allows(docs, R("get", "apps", "pods", namespace="a", name="p"))  # same resource, other group
    star = [cluster_role("r", {"apiGroups": ["*"], "resources": ["pods"], "verbs": ["*"]})]
    assert allows(star, R("deletecollection", "example.com", "pods", namespace="a"))


def test_subresources_are_separate_resources():
    pods = [cluster_role("r", {"apiGroups": [""], "resources": ["pods"], "verbs": ["*"]})]
    assert not allows(pods, R("create", "", "pods", "binding", "a", "p"))
    assert not allows(pods, R("update", "", "pods", "status", "a", "p"))
    binding_only = [cluster_role("r", {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]})]
    assert allows(binding_only, R("create", "", "pods", "binding", "a", "p"))
    assert not allows(binding_only, R("create", "", "pods", namespace="a"))
    assert not allows(binding_only, R("create", "", "pods", "eviction", "a", "p"))
    any_status = [cluster_role("r", {"apiGroups": ["*"], "resources": ["*/status"], "verbs": ["update"]})]
    assert allows(any_status, R("update", "", "pods", "status", "a", "p"))
    assert allows(any_status, R("update", "scheduling.x-k8s.io", "podgroups", "status", "a", "g"))
    assert not allows(any_status, R("update", "", "pods", namespace="a", name="p"))
    everything = [cluster_role("r", {"apiGroups": [""], "resources": ["*"], "verbs": ["create"]})]
    assert allows(everything, R("create", "", "pods", "binding", "a", "p"))


def test_resource_names():
    docs = [role("le", "gpusched", {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                    "resourceNames": ["gpusched"], "verbs": ["get", "update", "create"]})]
    assert allows(docs, R("get", "coordination.k8s.io", "leases", namespace="gpusched", name="gpusched"))
    assert not allows(docs, R("get", "coordination.k8s.io", "leases", namespace="gpusched", name="other"))
    # A create names no object in its URL, so resourceNames can never allow it; nor a plain list.
    assert not allows(docs, R("create", "coordination.k8s.io", "leases", namespace="gpusched"))
    assert not allows(docs, R("list", "coordination.k8s.io", "leases", namespace="gpusched"))
    # A list narrowed to one name by a fieldSelector carries the name.
    req = rbac.request_info("GET", "/apis/coordination.k8s.io/v1/namespaces/gpusched/leases",
                            "fieldSelector=metadata.name%3Dgpusched")
    assert req.name == "gpusched" and req.verb == "list"
    assert allows([role("le", "gpusched", {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                                           "resourceNames": ["gpusched"], "verbs": ["list"]})], req)


def test_role_only_in_its_namespace():
    docs = [role("r", "a", {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]})]
    assert allows(docs, R("get", "", "pods", namespace="a", name="p"))
    assert not allows(docs, R("get", "", "pods", namespace="b", name="p"))
    assert not allows(docs, R("list", "", "pods"))  # all namespaces is cluster-wide
    nodes = [role("r", "a", {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]})]
    assert not allows(nodes, R("get", "", "nodes", name="n1"))  # cluster-scoped: never through a Role


def test_bindings_decide_scope_and_subject():
    cr = cluster_role("reader", {"apiGroups": [""], "resources": ["pods", "nodes"], "verbs": ["get"]})
    rb = binding("RoleBinding", "rb", "ClusterRole", "reader", [sa("x", "me")], ns="team")
    crb = binding("ClusterRoleBinding", "crb", "ClusterRole", "reader", [sa("x", "all")])
    docs = [cr, rb, crb]
    me, everywhere = "system:serviceaccount:x:me", "system:serviceaccount:x:all"
    assert allows(docs, R("get", "", "pods", namespace="team", name="p"), me)
    assert not allows(docs, R("get", "", "pods", namespace="other", name="p"), me)
    assert not allows(docs, R("get", "", "nodes", name="n"), me)  # a RoleBinding never reaches cluster scope
    assert allows(docs, R("get", "", "nodes", name="n"), everywhere)
    assert allows(docs, R("get", "", "pods", namespace="other", name="p"), everywhere)
    assert not allows(docs, R("get", "", "pods", namespace="team", name="p"), "system:serviceaccount:y:me")
    group = [cr, binding("ClusterRoleBinding", "g", "ClusterRole", "reader",
                         [{"kind": "Group", "name": "system:serviceaccounts:x"}])]
    assert allows(group, R("get", "", "nodes", name="n"), "system:serviceaccount:x:anyone")
    assert not allows(group, R("get", "", "nodes", name="n"), "system:serviceaccount:z:anyone")
    # A RoleBinding's ServiceAccount subject without a namespace means the binding's namespace.
    local = [cr, binding("RoleBinding", "l", "ClusterRole", "reader", [{"kind": "ServiceAccount", "name": "me"}],
                         ns="team")]
    assert allows(local, R("get", "", "pods", namespace="team", name="p"), "system:serviceaccount:team:me")


def test_non_resource_urls():
    docs = [cluster_role("m", {"verbs": ["get"], "nonResourceURLs": ["/metrics", "/debug/*"]})]
    assert allows(docs, R("get", path="/metrics"))
    assert allows(docs, R("get", path="/debug/pprof/heap"))
    assert not allows(docs, R("get", path="/metricsx"))
    assert not allows(docs, R("post", path="/metrics"))
    # Every authenticated subject may discover the API (the bootstrap system:discovery role).
    assert allows([], R("get", path="/apis"))
    assert allows([], R("get", path="/apis/events.k8s.io/v1"))
    assert not rbac.Policy([], discovery=False).allows(R("get", path="/api"))
    assert not allows([], R("get", path="/metrics"))


def test_request_info():
    cases = [
        ("GET", "/api/v1/pods", R("list", "", "pods")),
        ("GET", "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=5", R("watch", "", "pods", namespace="ns")),
        ("GET", "/api/v1/watch/namespaces/ns/pods", R("watch", "", "pods", namespace="ns")),
        ("GET", "/api/v1/nodes/n1", R("get", "", "nodes", name="n1")),
        ("PATCH", "/api/v1/nodes/n1", R("patch", "", "nodes", name="n1")),
        ("POST", "/api/v1/namespaces/ns/pods/p/binding", R("create", "", "pods", "binding", "ns", "p")),
        ("PUT", "/api/v1/namespaces/ns/pods/p/status", R("update", "", "pods", "status", "ns", "p")),
        ("DELETE", "/api/v1/namespaces/ns/pods/p", R("delete", "", "pods", namespace="ns", name="p")),
        ("DELETE", "/api/v1/namespaces/ns/pods", R("deletecollection", "", "pods", namespace="ns")),
        ("GET", "/api/v1/namespaces/foo", R("get", "", "namespaces", namespace="foo", name="foo")),
        ("PUT", "/api/v1/namespaces/foo/finalize", R("update", "", "namespaces", "finalize", "foo", "foo")),
        ("GET", "/apis/coordination.k8s.io/v1/namespaces/gs/leases/gs",
         R("get", "coordination.k8s.io", "leases", namespace="gs", name="gs")),
        ("POST", "/apis/events.k8s.io/v1/namespaces/ns/events", R("create", "events.k8s.io", "events", namespace="ns")),
        ("GET", "/apis/topology.node.k8s.io/v1alpha2/noderesourcetopologies?limit=500",
         R("list", "topology.node.k8s.io", "noderesourcetopologies")),
        ("GET", "/api", R("get", path="/api")),
        ("GET", "/apis/events.k8s.io/v1", R("get", path="/apis/events.k8s.io/v1")),
        ("GET", "/healthz", R("get", path="/healthz")),
        ("POST", "/apis", R("post", path="/apis")),
        ("GET", "/api/v1/pods?fieldSelector=metadata.name%3D%3Dp", R("list", "", "pods", name="p")),
        ("GET", "/api/v1/pods?fieldSelector=metadata.name%21%3Dp", R("list", "", "pods")),
    ]
    for method, path, want in cases:
        assert rbac.request_info(method, path) == want, (method, path)
    with pytest.raises(rbac.RBACError, match="method 'BREW'"):
        rbac.request_info("BREW", "/api/v1/pods")


def test_role_errors_name_the_field():
    def err(doc):
        with pytest.raises(rbac.RBACError) as e:
            rbac.Policy([doc])
        return str(e.value)

    assert err(cluster_role("r", {"apiGroups": [""], "resources": ["pods"]})) == "ClusterRole r: rules[0].verbs: required"
    assert "rules[0].apiGroups: required" in err(cluster_role("r", {"resources": ["pods"], "verbs": ["get"]}))
    assert "rules[1].verbs: want a list of strings, got 'get'" in err(
        cluster_role("r", {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                     {"apiGroups": [""], "resources": ["pods"], "verbs": "get"}))
    assert "a Role cannot grant non-resource URLs" in err(role("r", "a", {"verbs": ["get"], "nonResourceURLs": ["/x"]}))
    assert "metadata.namespace: required for a Role" in err(
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r"}, "rules": []})
    assert "needs resources or nonResourceURLs" in err(cluster_role("r", {"apiGroups": [""], "verbs": ["get"]}))
    assert "aggregationRule is not supported" in err(dict(cluster_role("r"), aggregationRule={"x": 1}))
    with pytest.raises(rbac.RBACError, match="roleRef ClusterRole missing not found"):
        rbac.Policy([binding("ClusterRoleBinding", "b", "ClusterRole", "missing", [sa("a", "b")])], "system:serviceaccount:a:b")


# --- the request log ---

def write_log(tmp_path, entries):
    p = tmp_path / "requests.jsonl"
    p.write_text("".join(json.dumps(e) + "\n" for e in entries))
    return p


def entry(verb, resource, namespace="", name="", group="", sub="", code=200):
    return {"verb": verb, "method": "", "path": "", "apiGroup": group, "resource": resource, "subresource": sub,
            "namespace": namespace, "name": name, "code": code}


# What the scheduler's design says it sends (src/informer/source_kube.h, sched_loop, leader election, the
# event sink): informers list and watch, writes as REST calls. Each must be allowed by deploy/'s ClusterRole,
# and together they must use every grant (least privilege). Once the scheduler runs against the fake
# kube-apiserver, its recorded log replaces this hand-written one.
INFORMED = [("", "nodes"), ("", "pods"), ("", "namespaces"), ("scheduling.x-k8s.io", "podgroups"),
            ("scheduling.volcano.sh", "podgroups"), ("scheduling.k8s.io", "podgroups"),
            ("scheduling.k8s.io", "workloads"), ("scheduling.k8s.io", "priorityclasses"),
            ("scheduling.gpusched.io", "queues"),
            ("topology.node.k8s.io", "noderesourcetopologies"), ("kueue.x-k8s.io", "clusterqueues"),
            ("kueue.x-k8s.io", "localqueues"), ("kueue.x-k8s.io", "resourceflavors"),
            ("kueue.x-k8s.io", "workloadpriorityclasses"), ("policy", "poddisruptionbudgets"),
            ("resource.k8s.io", "resourceslices"), ("resource.k8s.io", "deviceclasses"),
            ("resource.k8s.io", "devicetaintrules"), ("resource.k8s.io", "resourceclaimtemplates"),
            ("resource.k8s.io", "resourceclaims")]
SCHEDULER_REQUESTS = [entry(verb, res, group=g) for g, res in INFORMED for verb in ("list", "watch")] + [
    entry("create", "pods", "team-a", "train-0", sub="binding", code=201),
    entry("get", "pods", "team-a", "big"), entry("update", "pods", "team-a", "big", sub="status"),
    entry("delete", "pods", "team-b", "victim"),
    entry("get", "resourceclaims", "team-a", "c", group="resource.k8s.io"),
    entry("update", "resourceclaims", "team-a", "c", group="resource.k8s.io", sub="status"),
] + [r for g in ("scheduling.k8s.io", "scheduling.x-k8s.io", "scheduling.volcano.sh") for r in (
    entry("get", "podgroups", "team-a", "g", group=g),
    entry("update", "podgroups", "team-a", "g", group=g, sub="status"))] + [
    entry("create", "events", "team-a", group="events.k8s.io", code=201),
    entry("get", "events", "team-a", "big.1", group="events.k8s.io"),
    entry("update", "events", "team-a", "big.1", group="events.k8s.io"),
    entry("create", "leases", "gpusched", group="coordination.k8s.io", code=409),
    entry("get", "leases", "gpusched", "gpusched", group="coordination.k8s.io"),
    entry("update", "leases", "gpusched", "gpusched", group="coordination.k8s.io", code=409),
    {"verb": "get", "method": "GET", "path": "/apis", "apiGroup": "", "resource": "", "subresource": "",
     "namespace": "", "name": "", "code": 200},
]


@pytest.fixture(scope="module")
def scheduler_policy():
    return rbac.deploy_policy(SCHEDULER)


def test_check_log_reports_exactly_the_disallowed(tmp_path, scheduler_policy):
    bad = [
        entry("create", "pods", "team-a", code=201),                        # creating pods: never
        entry("get", "secrets", "team-a", "token"),                         # secrets: never
        entry("patch", "nodes", name="n1"),                                 # node writes: the DaemonSet's, not ours
        entry("update", "leases", "kube-system", "gpusched", group="coordination.k8s.io"),  # Role: own namespace only
        entry("update", "leases", "gpusched", "someone-else", group="coordination.k8s.io"),  # only its own Lease
        entry("patch", "pods", "team-a", "big", sub="status"),              # status written with update, not patch
    ]
    log = write_log(tmp_path, SCHEDULER_REQUESTS[:3] + bad[:3] + SCHEDULER_REQUESTS[3:] + bad[3:])
    v = rbac.check_log(log, scheduler_policy)
    n = len(SCHEDULER_REQUESTS)
    assert [x.line for x in v] == [4, 5, 6, n + 4, n + 5, n + 6]
    assert v[0].reason == "line 4: create pods (core) in namespace team-a: no rule allows it"
    assert v[1].request["resource"] == "secrets"
    assert "update leases someone-else (coordination.k8s.io) in namespace gpusched" in v[4].reason
    assert "patch pods/status big" in v[5].reason
    # The same roles given as a file of manifests and a subject decide alike.
    docs = rbac.render(rbac.ROOT / "deploy")
    manifests = tmp_path / "all.yaml"
    import yaml
    manifests.write_text(yaml.safe_dump_all(docs))
    assert [x.line for x in rbac.check_log(log, manifests, SCHEDULER)] == [x.line for x in v]


def test_scheduler_requests_allowed_and_every_rule_used(tmp_path, scheduler_policy):
    log = write_log(tmp_path, SCHEDULER_REQUESTS)
    assert rbac.check_log(log, scheduler_policy) == []
    assert rbac.unused_rules(log, scheduler_policy) == []
    # Without the leases the Role's grants show up as unused, so the check can fail.
    short = write_log(tmp_path, [e for e in SCHEDULER_REQUESTS if e["resource"] != "leases"])
    assert rbac.unused_rules(short, scheduler_policy) == [
        ("gpusched-scheduler-leader-election", "create", "coordination.k8s.io", "leases"),
        ("gpusched-scheduler-leader-election", "get", "coordination.k8s.io", "leases"),
        ("gpusched-scheduler-leader-election", "update", "coordination.k8s.io", "leases")]


def test_log_in_method_and_path_form(tmp_path):
    docs = [cluster_role("r", {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]})]
    log = write_log(tmp_path, [{"method": "POST", "path": "/api/v1/namespaces/a/pods/p/binding", "code": 201},
                               {"method": "POST", "path": "/api/v1/namespaces/a/pods", "code": 201}])
    v = rbac.check_log(log, docs)
    assert [x.line for x in v] == [2]


def test_log_in_the_schedulers_text_form(tmp_path, scheduler_policy):
    p = tmp_path / "scheduler-requests.log"
    p.write_text("GET /api/v1/pods?limit=500 200\n"
                 "GET /api/v1/pods?allowWatchBookmarks=true&resourceVersion=12&timeoutSeconds=300&watch=true 200\n"
                 "POST /api/v1/namespaces/a/pods/p/binding 201\n"
                 "PUT /apis/coordination.k8s.io/v1/namespaces/gpusched/leases/gpusched 409\n"
                 "GET /api/v1/namespaces/a/secrets/s 403\n")
    reqs = [r for _, _, r in rbac.read_log(p)]
    assert [r.verb for r in reqs] == ["list", "watch", "create", "update", "get"]
    assert [x.line for x in rbac.check_log(p, scheduler_policy)] == [5]
    p.write_text("GET /api/v1/pods\n")
    with pytest.raises(rbac.RBACError, match=r":1: want METHOD PATH CODE or a JSON object"):
        rbac.read_log(p)


def test_log_errors_name_the_line(tmp_path):
    p = tmp_path / "requests.jsonl"
    p.write_text(json.dumps(entry("get", "pods", "a", "p")) + "\n{not json\n")
    with pytest.raises(rbac.RBACError, match=r"requests.jsonl:2: not JSON"):
        rbac.check_log(p, [])
    p.write_text('{"code": 200}\n')
    with pytest.raises(rbac.RBACError, match=r":1: want verb .* or method and path"):
        rbac.check_log(p, [])
    p.write_text('{"verb": "get", "resource": 7}\n')
    with pytest.raises(rbac.RBACError, match=r":1: resource: want a string, got 7"):
        rbac.check_log(p, [])


# --- deploy/'s roles: least privilege per component ---

def test_scheduler_may_not(scheduler_policy):
    p = scheduler_policy
    for req in [R("create", "", "pods", namespace="a"), R("get", "", "secrets", namespace="a", name="s"),
                R("list", "", "secrets"), R("list", "", "configmaps"), R("patch", "", "nodes", name="n"),
                R("update", "", "nodes", "status", name="n"), R("delete", "", "nodes", name="n"),
                R("update", "", "pods", namespace="a", name="p"), R("deletecollection", "", "pods", namespace="a"),
                R("create", "", "pods", "eviction", "a", "p"), R("create", "", "serviceaccounts", "token", "a", "x"),
                R("list", "coordination.k8s.io", "leases"), R("delete", "coordination.k8s.io", "leases", "gpusched", "gpusched"),
                R("create", "rbac.authorization.k8s.io", "clusterrolebindings"),
                R("update", "kueue.x-k8s.io", "workloads", "status", "a", "w"), R("list", "kueue.x-k8s.io", "workloads"),
                R("list", "scheduling.volcano.sh", "queues"),
                R("create", "", "events", namespace="a")]:
        assert not p.allows(req), req


def test_node_daemonset_role():
    p = rbac.deploy_policy(NODE)
    assert p.allows(R("get", "", "nodes", name="n1"))
    assert p.allows(R("patch", "", "nodes", name="n1"))
    assert p.allows(R("create", "topology.node.k8s.io", "noderesourcetopologies"))
    assert p.allows(R("update", "topology.node.k8s.io", "noderesourcetopologies", name="n1"))
    for req in [R("update", "", "nodes", "status", name="n1"), R("delete", "", "nodes", name="n1"),
                R("list", "", "nodes"), R("list", "", "pods"), R("create", "", "pods", "binding", "a", "p"),
                R("delete", "topology.node.k8s.io", "noderesourcetopologies", name="n1")]:
        assert not p.allows(req), req


def test_extender_role():
    p = rbac.deploy_policy(EXTENDER)
    assert p.allows(R("watch", "", "nodes"))
    assert p.allows(R("create", "", "pods", "binding", "a", "p"))
    for req in [R("delete", "", "pods", namespace="a", name="p"), R("update", "", "pods", "status", "a", "p"),
                R("get", "", "pods", namespace="a", name="p"),
                R("patch", "", "nodes", name="n"), R("get", "", "secrets", namespace="a", name="s")]:
        assert not p.allows(req), req
