"""The fake kube-apiserver checked against the Kubernetes API conventions it claims to follow.

Each test states one convention (authentication, optimistic concurrency, the status
subresource, pods/binding, preconditions, patches, selectors, paging and continue expiry,
watches from a resourceVersion, 410 Expired, bookmarks, timeouts, fault injection and the
request log's RBAC verbs) and fails if the fake departs from it, so clients tested against the
fake are tested against Kubernetes' rules.
"""
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest
import requests

from fake_apiserver import start_fake

NS = "/api/v1/namespaces/default"


def pod(name, **spec):
    body = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}
    return body


def create_pod(api, name, labels=None, **spec):
    body = pod(name, **spec)
    if labels:
        body["metadata"]["labels"] = labels
    r = api.post(api.base + NS + "/pods", json=body)
    assert r.status_code == 201, r.text
    return r.json()


def bind(api, name, node, **md):
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, **md},
            "target": {"kind": "Node", "name": node}}
    return api.post(api.base + NS + f"/pods/{name}/binding", json=body)


def watch(api, path, n=None, until=None, timeout=5.0, **params):
    """Reads watch events from path until n arrived, until(event) is true or the stream ends."""
    params = {"watch": "1", **params}
    events = []
    with api.get(api.base + path, params=params, stream=True, timeout=(5, timeout)) as r:
        assert r.status_code == 200, r.text
        assert r.headers["Content-Type"] == "application/json"
        try:
            for line in r.iter_lines():
                if not line:
                    continue
                ev = json.loads(line)
                events.append(ev)
                if (n is not None and len(events) >= n) or (until and until(ev)):
                    break
        except requests.exceptions.ConnectionError:
            pass  # read timeout: the caller asserts on what arrived
    return events


def status_of(r, code, reason):
    assert r.status_code == code, r.text
    s = r.json()
    assert s["kind"] == "Status" and s["status"] == "Failure"
    assert s["code"] == code and s["reason"] == reason, s
    return s


# --- Authentication and discovery ------------------------------------------------------------

def test_requests_without_the_token_get_401(fake):
    anon = fake.session(token=False)
    status_of(anon.get(fake.url + "/api/v1/pods"), 401, "Unauthorized")
    anon.headers["Authorization"] = "Bearer wrong"
    status_of(anon.get(fake.url + "/api/v1/pods"), 401, "Unauthorized")
    assert anon.get(fake.url + "/healthz").text == "ok"
    # The client certificate the CA signed authenticates as the token does (a new session: the
    # certificate belongs to the TLS connection).
    ok = fake.session(token=False).get(fake.url + "/api/v1/pods", cert=(
        os.path.join(fake.dir, "client.crt"), os.path.join(fake.dir, "client.key")))
    assert ok.status_code == 200 and ok.json()["kind"] == "PodList"


def test_token_auth_file_users_are_named_in_the_request_log(tmp_path):
    """Each --token-auth-file token authenticates as its user, the log says who made each
    request, and a token file kube-apiserver would refuse is refused with its line named."""
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('s3cret,system:serviceaccount:gs:sched,uid-1,"system:serviceaccounts"\n')
    with start_fake(str(tmp_path / "f"), "--token-auth-file", str(tokens)) as f:
        kc = f.add_kubeconfig(str(tmp_path / "sched.kubeconfig"), "s3cret")
        assert "token: s3cret\n" in open(kc).read() and f.token not in open(kc).read()
        s = f.session(token=False)
        s.headers["Authorization"] = "Bearer s3cret"
        assert s.get(f.url + "/api/v1/nodes").status_code == 200
        assert f.session().get(f.url + "/api/v1/pods").status_code == 200
        s.headers["Authorization"] = "Bearer s3cre"
        assert s.get(f.url + "/api/v1/namespaces").status_code == 401
        cert = f.session(token=False).get(f.url + "/api/v1/events", cert=(
            os.path.join(f.dir, "client.crt"), os.path.join(f.dir, "client.key")))
        assert cert.status_code == 200
        sa = "system:serviceaccount:gs:sched"
        log = [(e["resource"], e["user"], e["code"]) for e in f.requests()]
        assert log == [("nodes", sa, 200), ("pods", "fake-admin", 200), ("namespaces", "", 401),
                       ("events", "fake-admin", 200)]
        assert [e["resource"] for e in f.requests(user=sa)] == ["nodes"]
    bad = tmp_path / "bad.csv"
    bad.write_text("# a comment\nonly-a-token\n")
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_apiserver.py")
    r = subprocess.run([sys.executable, here, "--dir", str(tmp_path / "g"), "--token-auth-file",
                        str(bad)], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and f"{bad}:2: want token,user,uid[,groups]" in r.stderr, r.stderr


def test_kubeconfig_names_the_server_ca_and_token(fake):
    text = open(fake.kubeconfig).read()
    assert f"server: https://127.0.0.1:{fake.port}\n" in text
    assert f"token: {fake.token}\n" in text
    assert "certificate-authority-data: " in text
    assert "client-certificate-data: " in open(fake.kubeconfig_cert).read()


def test_discovery_lists_every_group_and_subresource(api):
    assert api.get(api.base + "/api").json()["versions"] == ["v1"]
    groups = {g["name"]: g for g in api.get(api.base + "/apis").json()["groups"]}
    for g in ("events.k8s.io", "coordination.k8s.io", "policy", "scheduling.k8s.io",
              "scheduling.x-k8s.io", "scheduling.volcano.sh", "topology.node.k8s.io",
              "kueue.x-k8s.io", "resource.k8s.io"):
        assert g in groups, g
    sched = groups["scheduling.k8s.io"]
    assert [v["version"] for v in sched["versions"]] == ["v1", "v1beta1"]
    assert sched["preferredVersion"]["version"] == "v1"
    core = {r["name"]: r for r in api.get(api.base + "/api/v1").json()["resources"]}
    assert core["pods/binding"]["verbs"] == ["create"]
    assert "update" in core["pods/status"]["verbs"] and core["pods"]["namespaced"]
    assert not core["nodes"]["namespaced"]
    native = {r["name"] for r in api.get(api.base + "/apis/scheduling.k8s.io/v1beta1").json()
              ["resources"]}
    assert {"workloads", "podgroups", "podgroups/status"} <= native
    status_of(api.get(api.base + "/apis/apps/v1/namespaces/default/deployments"), 404,
              "NotFound")
    status_of(api.get(api.base + NS + "/nodes"), 404, "NotFound")
    status_of(api.get(api.base + NS + "/pods/p/exec"), 404, "NotFound")
    status_of(api.put(api.base + NS + "/pods", json=pod("p")), 405, "MethodNotAllowed")


# --- Create, update, the status subresource --------------------------------------------------

def test_create_sets_uid_timestamp_version_generation_and_drops_status(api):
    body = pod("p", schedulerName="gpusched")
    body["status"] = {"phase": "Running", "podIP": "10.0.0.1"}
    got = create_pod(api, "p", schedulerName="gpusched")
    md = got["metadata"]
    assert len(md["uid"]) == 36 and md["creationTimestamp"].endswith("Z")
    assert isinstance(md["resourceVersion"], str) and int(md["resourceVersion"]) > 0
    assert md["generation"] == 1
    assert got["status"] == {"phase": "Pending"}
    r = api.post(api.base + NS + "/pods", json={**body, "metadata": {"name": "q"}})
    assert r.json()["status"] == {"phase": "Pending"}, "create may not set a pod's status"
    s = status_of(api.post(api.base + NS + "/pods", json=pod("p")), 409, "AlreadyExists")
    assert s["message"] == 'pods "p" already exists'
    status_of(api.post(api.base + "/api/v1/namespaces/nope/pods", json=pod("p")), 404,
              "NotFound")
    s = status_of(api.post(api.base + NS + "/pods", json=pod("Bad_Name")), 422, "Invalid")
    assert s["details"]["causes"][0]["field"] == "metadata.name" and "Bad_Name" in s["message"]
    s = status_of(api.post(api.base + NS + "/pods", json={"metadata": {"name": "x"},
                                                          "spec": {}}), 422, "Invalid")
    assert s["details"]["causes"][0]["field"] == "spec.containers"
    s = status_of(api.post(api.base + NS + "/pods", json={**pod("y"), "kind": "Node"}), 400,
                  "BadRequest")
    assert "Node" in s["message"] and "Pod" in s["message"]


def test_update_with_a_stale_resource_version_is_409(api):
    cur = create_pod(api, "p")
    first_rv = cur["metadata"]["resourceVersion"]
    cur["metadata"]["labels"] = {"a": "1"}
    r = api.put(api.base + NS + "/pods/p", json=cur)
    assert r.status_code == 200, r.text
    assert int(r.json()["metadata"]["resourceVersion"]) > int(first_rv)
    cur["metadata"]["labels"] = {"a": "2"}  # still carries first_rv
    s = status_of(api.put(api.base + NS + "/pods/p", json=cur), 409, "Conflict")
    assert "the object has been modified" in s["message"]
    del cur["metadata"]["resourceVersion"]
    s = status_of(api.put(api.base + NS + "/pods/p", json=cur), 422, "Invalid")
    assert s["details"]["causes"][0]["field"] == "metadata.resourceVersion"
    status_of(api.put(api.base + NS + "/pods/none", json={**cur, "metadata": {"name": "none"}}),
              404, "NotFound")


def test_main_resource_ignores_status_and_status_ignores_the_rest(api):
    r = api.post(api.base + "/api/v1/nodes", json={
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "spec": {}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}})
    assert r.status_code == 201 and r.json()["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    node = r.json()
    # PUT to the main resource: the status change is dropped, the label kept.
    node["status"]["allocatable"]["nvidia.com/gpu"] = "1"
    node["metadata"]["labels"] = {"zone": "a"}
    node = api.put(api.base + "/api/v1/nodes/n1", json=node).json()
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node["metadata"]["labels"] == {"zone": "a"} and node["metadata"]["generation"] == 1
    # PUT to /status: the status change is kept, label and spec changes dropped.
    node["status"]["allocatable"]["nvidia.com/gpu"] = "4"
    node["metadata"]["labels"] = {"zone": "b"}
    node["spec"] = {"unschedulable": True}
    r = api.put(api.base + "/api/v1/nodes/n1/status", json=node)
    assert r.status_code == 200, r.text
    node = r.json()
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "4"
    assert node["metadata"]["labels"] == {"zone": "a"} and node["spec"] == {}
    # A spec change bumps generation; a status change does not.
    node["spec"] = {"unschedulable": True}
    node = api.put(api.base + "/api/v1/nodes/n1", json=node).json()
    assert node["metadata"]["generation"] == 2 and node["spec"]["unschedulable"] is True
    # The same separation for a custom resource with a status subresource.
    pg = "/apis/scheduling.x-k8s.io/v1alpha1/namespaces/default/podgroups"
    r = api.post(api.base + pg, json={"apiVersion": "scheduling.x-k8s.io/v1alpha1",
                                      "kind": "PodGroup", "metadata": {"name": "g"},
                                      "spec": {"minMember": 2}, "status": {"phase": "Running"}})
    assert r.status_code == 201 and "status" not in r.json()
    g = r.json()
    g["status"] = {"phase": "Scheduled"}
    assert "status" not in api.put(api.base + pg + "/g", json=g).json()
    g = api.get(api.base + pg + "/g").json()
    g["status"] = {"phase": "Scheduled"}
    g["spec"]["minMember"] = 9
    g = api.put(api.base + pg + "/g/status", json=g).json()
    assert g["status"] == {"phase": "Scheduled"} and g["spec"]["minMember"] == 2


def test_pod_spec_changes_only_where_kubernetes_allows(api):
    cur = create_pod(api, "p", schedulingGates=[{"name": "a"}, {"name": "b"}])
    bad = json.loads(json.dumps(cur))
    bad["spec"]["nodeName"] = "n1"
    s = status_of(api.put(api.base + NS + "/pods/p", json=bad), 422, "Invalid")
    assert s["details"]["causes"][0]["field"] == "spec.nodeName"
    bad = json.loads(json.dumps(cur))
    bad["spec"]["schedulingGates"].append({"name": "c"})
    s = status_of(api.put(api.base + NS + "/pods/p", json=bad), 422, "Invalid")
    assert "only deletion is allowed" in s["message"] and "'c'" in s["message"]
    cur["spec"]["schedulingGates"] = [{"name": "b"}]
    r = api.put(api.base + NS + "/pods/p", json=cur)
    assert r.status_code == 200 and r.json()["spec"]["schedulingGates"] == [{"name": "b"}]


# --- pods/binding ----------------------------------------------------------------------------

def test_binding_sets_node_condition_and_annotations_and_a_second_is_409(api):
    p = create_pod(api, "p", schedulerName="gpusched")
    r = bind(api, "p", "n1", uid=p["metadata"]["uid"],
             annotations={"gpusched.io/gpus": "0,1"})
    assert r.status_code == 201, r.text
    assert r.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {},
                        "status": "Success", "code": 201}
    got = api.get(api.base + NS + "/pods/p").json()
    assert got["spec"]["nodeName"] == "n1"
    assert got["metadata"]["annotations"]["gpusched.io/gpus"] == "0,1"
    cond = [c for c in got["status"]["conditions"] if c["type"] == "PodScheduled"]
    assert len(cond) == 1 and cond[0]["status"] == "True"
    s = status_of(bind(api, "p", "n2"), 409, "Conflict")
    assert 'already assigned to node "n1"' in s["message"]
    assert api.get(api.base + NS + "/pods/p").json()["spec"]["nodeName"] == "n1"


def test_binding_checks_uid_name_gates_and_existence(api):
    create_pod(api, "p")
    s = status_of(bind(api, "p", "n1", uid="00000000-0000-0000-0000-000000000000"), 409,
                  "Conflict")
    assert "Precondition failed: UID in precondition" in s["message"]
    r = api.post(api.base + NS + "/pods/p/binding",
                 json={"metadata": {"name": "other"}, "target": {"name": "n1"}})
    assert "does not match" in status_of(r, 400, "BadRequest")["message"]
    s = status_of(api.post(api.base + NS + "/pods/p/binding", json={"metadata": {"name": "p"},
                                                                    "target": {}}), 422, "Invalid")
    assert s["details"]["causes"][0]["field"] == "target.name"
    status_of(bind(api, "none", "n1"), 404, "NotFound")
    create_pod(api, "gated", schedulingGates=[{"name": "kueue.x-k8s.io/admission"}])
    assert "schedulingGates" in status_of(bind(api, "gated", "n1"), 409, "Conflict")["message"]
    assert "nodeName" not in api.get(api.base + NS + "/pods/p").json()["spec"]


def test_concurrent_bindings_of_one_pod_bind_it_once(api, fake):
    create_pod(api, "p")
    codes = []

    def one(node):
        s = fake.session()
        s.base = fake.url
        codes.append(bind(s, "p", node).status_code)
    threads = [threading.Thread(target=one, args=(f"n{i}",)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(codes) == [201] + [409] * 7


# --- Delete ----------------------------------------------------------------------------------

def test_delete_honours_uid_and_resource_version_preconditions(api):
    p = create_pod(api, "p")
    md = p["metadata"]
    s = status_of(api.delete(api.base + NS + "/pods/p", json={
        "preconditions": {"uid": "00000000-0000-0000-0000-000000000000"}}), 409, "Conflict")
    assert f"UID in object meta: {md['uid']}" in s["message"]
    s = status_of(api.delete(api.base + NS + "/pods/p", json={
        "preconditions": {"resourceVersion": "1"}}), 409, "Conflict")
    assert "ResourceVersion in precondition: 1" in s["message"]
    assert api.get(api.base + NS + "/pods/p").status_code == 200
    r = api.delete(api.base + NS + "/pods/p", json={"preconditions": {"uid": md["uid"]}})
    assert r.status_code == 200 and r.json()["metadata"]["name"] == "p"
    status_of(api.get(api.base + NS + "/pods/p"), 404, "NotFound")


def test_bound_pods_terminate_gracefully_and_finalizers_hold_objects(api):
    create_pod(api, "p")
    assert bind(api, "p", "n1").status_code == 201
    r = api.delete(api.base + NS + "/pods/p")
    assert r.status_code == 200 and r.json()["metadata"]["deletionTimestamp"]
    assert r.json()["metadata"]["deletionGracePeriodSeconds"] == 30
    for _ in range(50):
        if api.get(api.base + NS + "/pods/p").status_code == 404:
            break
        time.sleep(0.05)
    status_of(api.get(api.base + NS + "/pods/p"), 404, "NotFound")
    lease = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    r = api.post(api.base + lease, json={"metadata": {"name": "l", "finalizers": ["x/y"]},
                                         "spec": {}})
    assert r.status_code == 201
    r = api.delete(api.base + lease + "/l")
    assert r.json()["metadata"]["deletionTimestamp"]
    cur = api.get(api.base + lease + "/l").json()
    cur["metadata"]["finalizers"] = []
    assert api.put(api.base + lease + "/l", json=cur).status_code == 200
    status_of(api.get(api.base + lease + "/l"), 404, "NotFound")


# --- Patches ---------------------------------------------------------------------------------

def test_merge_strategic_and_json_patches(api):
    create_pod(api, "p", nodeSelector={"a": "1", "b": "2"})
    mp = {"Content-Type": "application/merge-patch+json"}
    r = api.patch(api.base + NS + "/pods/p", headers=mp,
                  data=json.dumps({"metadata": {"labels": {"x": "1"}}}))
    assert r.status_code == 200 and r.json()["metadata"]["labels"] == {"x": "1"}
    smp = {"Content-Type": "application/strategic-merge-patch+json"}
    cond = lambda t, s: {"type": t, "status": s, "reason": "r"}  # noqa: E731
    r = api.patch(api.base + NS + "/pods/p/status", headers=smp, data=json.dumps(
        {"status": {"conditions": [cond("PodScheduled", "False"), cond("Ready", "False")]}}))
    assert r.status_code == 200, r.text
    r = api.patch(api.base + NS + "/pods/p/status", headers=smp, data=json.dumps(
        {"status": {"conditions": [cond("PodScheduled", "True")]},
         "metadata": {"labels": {"ignored": "yes"}}}))
    got = r.json()
    assert [(c["type"], c["status"]) for c in got["status"]["conditions"]] == [
        ("PodScheduled", "True"), ("Ready", "False")], "conditions merge by type"
    assert got["metadata"]["labels"] == {"x": "1"}, "a status patch changes only status"
    r = api.patch(api.base + NS + "/pods/p", headers=mp,
                  data=json.dumps({"status": {"phase": "Running"}}))
    assert r.json()["status"]["phase"] == "Pending", "a main-resource patch ignores status"
    r = api.patch(api.base + NS + "/pods/p", headers=mp, data=json.dumps(
        {"metadata": {"resourceVersion": "1", "labels": {"y": "1"}}}))
    status_of(r, 409, "Conflict")
    jp = {"Content-Type": "application/json-patch+json"}
    r = api.patch(api.base + NS + "/pods/p", headers=jp, data=json.dumps(
        [{"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}}]))
    assert r.json()["metadata"]["annotations"] == {"k": "v"}
    pg = "/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups"
    assert api.post(api.base + pg, json={"metadata": {"name": "g"},
                                         "spec": {"minMember": 1}}).status_code == 201
    status_of(api.patch(api.base + pg + "/g", headers=smp, data="{}"), 415,
              "UnsupportedMediaType")
    r = api.patch(api.base + pg + "/g", headers=mp, data=json.dumps({"spec": {"queue": "q"}}))
    assert r.json()["spec"] == {"minMember": 1, "queue": "q"}
    assert r.json()["metadata"]["generation"] == 2


# --- Lists: selectors, paging, continue expiry -----------------------------------------------

def test_list_label_and_field_selectors(api):
    create_pod(api, "a", labels={"app": "x", "tier": "1"}, schedulerName="gpusched")
    create_pod(api, "b", labels={"app": "y"}, schedulerName="gpusched")
    create_pod(api, "c", labels={"app": "x"})
    assert bind(api, "a", "n1").status_code == 201

    def names(**params):
        r = api.get(api.base + NS + "/pods", params=params)
        assert r.status_code == 200, r.text
        return [i["metadata"]["name"] for i in r.json()["items"]]
    assert names(labelSelector="app=x") == ["a", "c"]
    assert names(labelSelector="app in (x,y),!tier") == ["b", "c"]
    assert names(labelSelector="app!=x") == ["b"]
    assert names(labelSelector="tier") == ["a"]
    assert names(fieldSelector="spec.schedulerName=gpusched") == ["a", "b"]
    assert names(fieldSelector="spec.nodeName=") == ["b", "c"]
    assert names(fieldSelector="spec.nodeName=n1,status.phase=Pending") == ["a"]
    assert names(fieldSelector="metadata.name=c") == ["c"]
    assert names(fieldSelector="spec.schedulerName!=gpusched") == ["c"]
    s = status_of(api.get(api.base + NS + "/pods", params={"fieldSelector": "spec.foo=1"}), 400,
                  "BadRequest")
    assert '"spec.foo"' in s["message"]
    status_of(api.get(api.base + NS + "/pods", params={"labelSelector": "app in x"}), 400,
              "BadRequest")
    all_ns = api.get(api.base + "/api/v1/pods").json()
    assert all_ns["kind"] == "PodList" and len(all_ns["items"]) == 3


def test_paging_is_one_consistent_snapshot(api):
    for i in range(25):
        create_pod(api, f"p{i:02d}")
    r = api.get(api.base + NS + "/pods", params={"limit": 10}).json()
    list_rv = r["metadata"]["resourceVersion"]
    assert len(r["items"]) == 10 and r["metadata"]["remainingItemCount"] == 15
    seen = [i["metadata"]["name"] for i in r["items"]]
    create_pod(api, "p00a")  # sorts inside the unread pages: a snapshot does not show it
    api.delete(api.base + NS + "/pods/p24")  # gone now, but the snapshot still has it
    pages = 1
    while r["metadata"].get("continue"):
        r = api.get(api.base + NS + "/pods", params={"limit": 10,
                                                     "continue": r["metadata"]["continue"]})
        assert r.status_code == 200, r.text
        r = r.json()
        assert r["metadata"]["resourceVersion"] == list_rv
        seen += [i["metadata"]["name"] for i in r["items"]]
        pages += 1
    assert pages == 3 and seen == [f"p{i:02d}" for i in range(25)]
    # resourceVersion=0 is served from the cache: the whole list, the limit ignored.
    r = api.get(api.base + NS + "/pods", params={"limit": 10, "resourceVersion": "0"}).json()
    assert len(r["items"]) == 25 and "continue" not in r["metadata"]
    s = status_of(api.get(api.base + NS + "/pods", params={"continue": "garbage"}), 400,
                  "BadRequest")
    assert "continue" in s["message"]
    token = api.get(api.base + NS + "/pods", params={"limit": 1}).json()["metadata"]["continue"]
    s = status_of(api.get(api.base + "/api/v1/nodes", params={"continue": token}), 400,
                  "BadRequest")
    assert "pods.core" in s["message"] and "nodes.core" in s["message"]


def test_continue_token_expires_when_its_version_is_compacted(api, fake):
    for i in range(5):
        create_pod(api, f"p{i}")
    r = api.get(api.base + NS + "/pods", params={"limit": 2}).json()
    token = r["metadata"]["continue"]
    create_pod(api, "later")
    fake.faults(compact=True)
    s = status_of(api.get(api.base + NS + "/pods", params={"limit": 2, "continue": token}), 410,
                  "Expired")
    assert "continue parameter is too old" in s["message"]
    # The history bound alone compacts too (--history 200 in the fixture).
    r = api.get(api.base + NS + "/pods", params={"limit": 2}).json()
    token = r["metadata"]["continue"]
    for i in range(210):
        api.patch(api.base + NS + "/pods/p0", headers={"Content-Type":
                                                       "application/merge-patch+json"},
                  data=json.dumps({"metadata": {"labels": {"n": str(i)}}}))
    status_of(api.get(api.base + NS + "/pods", params={"limit": 2, "continue": token}), 410,
              "Expired")


# --- Watches ---------------------------------------------------------------------------------

def test_watch_from_a_resource_version_sends_the_events_after_it(api):
    create_pod(api, "before")
    rv = api.get(api.base + NS + "/pods").json()["metadata"]["resourceVersion"]
    create_pod(api, "p")
    assert bind(api, "p", "n1").status_code == 201
    api.delete(api.base + NS + "/pods/before")
    evs = watch(api, NS + "/pods", n=3, resourceVersion=rv)
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [
        ("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "before")]
    assert evs[1]["object"]["spec"]["nodeName"] == "n1"
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
    assert rvs == sorted(rvs) and rvs[0] > int(rv)
    # "" and "0" start with the current objects as synthetic ADDED events.
    evs = watch(api, NS + "/pods", n=1, resourceVersion="0")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("ADDED", "p")]


def test_watch_from_a_compacted_version_gets_410_as_an_error_event(api, fake):
    rv = api.get(api.base + NS + "/pods").json()["metadata"]["resourceVersion"]
    create_pod(api, "p")
    fake.faults(compact=True)
    evs = watch(api, NS + "/pods", n=1, resourceVersion=rv)
    assert len(evs) == 1 and evs[0]["type"] == "ERROR"
    st = evs[0]["object"]
    assert st["kind"] == "Status" and st["code"] == 410 and st["reason"] == "Expired"
    assert "too old resource version" in st["message"]
    # From the current version the watch works.
    rv = api.get(api.base + NS + "/pods").json()["metadata"]["resourceVersion"]
    create_pod(api, "q")
    evs = watch(api, NS + "/pods", n=1, resourceVersion=rv)
    assert evs[0]["type"] == "ADDED" and evs[0]["object"]["metadata"]["name"] == "q"


def test_history_is_per_resource_and_compaction_spares_live_watches(api, fake):
    rv = api.get(api.base + NS + "/pods").json()["metadata"]["resourceVersion"]
    create_pod(api, "a")
    lease = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    assert api.post(api.base + lease, json={"metadata": {"name": "l"}, "spec": {}}).ok
    for i in range(250):  # more Lease events than --history 200
        r = api.patch(api.base + lease + "/l", headers={"Content-Type":
                                                        "application/merge-patch+json"},
                      data=json.dumps({"spec": {"leaseTransitions": i}}))
        assert r.status_code == 200, r.text
    evs = watch(api, NS + "/pods", n=1, resourceVersion=rv)
    assert evs[0]["type"] == "ADDED" and evs[0]["object"]["metadata"]["name"] == "a"
    # A watcher that has seen every event keeps going through a compaction.
    got = []

    def watcher():
        s = fake.session()
        s.base = fake.url
        got.extend(watch(s, NS + "/pods", n=2, resourceVersion="0", timeout=5))
    t = threading.Thread(target=watcher)
    t.start()
    time.sleep(0.5)
    fake.faults(compact=True)
    create_pod(api, "b")
    t.join()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in got] == [
        ("ADDED", "a"), ("ADDED", "b")]


def test_bookmarks_carry_only_the_resource_version(api):
    rv = api.get(api.base + NS + "/pods").json()["metadata"]["resourceVersion"]
    create_pod(api, "p")
    evs = watch(api, NS + "/pods", until=lambda e: e["type"] == "BOOKMARK",
                resourceVersion=rv, allowWatchBookmarks="true")
    assert evs[0]["type"] == "ADDED" and evs[-1]["type"] == "BOOKMARK"
    bm = evs[-1]["object"]
    assert bm["kind"] == "Pod" and bm["apiVersion"] == "v1"
    assert list(bm["metadata"]) == ["resourceVersion"]
    assert int(bm["metadata"]["resourceVersion"]) >= int(evs[0]["object"]["metadata"]
                                                         ["resourceVersion"])
    # Without allowWatchBookmarks no bookmark arrives (the stream ends at its timeout).
    evs = watch(api, NS + "/pods", resourceVersion=rv, timeoutSeconds="1")
    assert [e["type"] for e in evs] == ["ADDED"]


def test_watch_ends_at_timeout_seconds(api):
    t0 = time.monotonic()
    evs = watch(api, NS + "/pods", timeoutSeconds="1", timeout=10)
    took = time.monotonic() - t0
    # Ended by the server, not by the client's 10 s read timeout; how far past 1 s depends on load.
    assert evs == [] and 0.9 <= took < 8, took


def test_selector_watch_sees_objects_enter_and_leave(api):
    rv = api.get(api.base + NS + "/pods").json()["metadata"]["resourceVersion"]
    create_pod(api, "p", labels={"app": "x"})
    api.patch(api.base + NS + "/pods/p", headers={"Content-Type": "application/merge-patch+json"},
              data=json.dumps({"metadata": {"labels": {"app": "y"}}}))
    create_pod(api, "q", labels={"app": "y"})
    assert bind(api, "q", "n1").status_code == 201
    evs = watch(api, NS + "/pods", n=2, resourceVersion=rv, labelSelector="app=x")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs[:2]] == [
        ("ADDED", "p"), ("DELETED", "p")]
    evs = watch(api, "/api/v1/pods", n=1, resourceVersion=rv, fieldSelector="spec.nodeName=n1")
    assert evs[0]["type"] == "ADDED" and evs[0]["object"]["metadata"]["name"] == "q"


def test_watches_closed_at_random(api, fake):
    rv = api.get(api.base + NS + "/pods").json()["metadata"]["resourceVersion"]
    for i in range(3):
        create_pod(api, f"p{i}")
    fake.faults(watch_close_prob=1.0)
    t0 = time.monotonic()
    # Closed by the server each time, not left to the client's 10 s read timeout (the bounds leave
    # a loaded machine room, and stay below that timeout).
    evs = watch(api, NS + "/pods", resourceVersion=rv, timeout=10)
    assert len(evs) == 1 and time.monotonic() - t0 < 8, "closed right after its first event"
    fake.faults(watch_close_prob=0.0, watch_close_period=0.5)
    t0 = time.monotonic()
    watch(api, NS + "/pods", timeout=10)
    assert time.monotonic() - t0 < 8
    # Abrupt: the stream breaks without its terminating chunk, as a dropped connection does.
    fake.faults(watch_close_prob=1.0, watch_close_period=0.0, watch_close_abrupt=True)
    with api.get(api.base + NS + "/pods", params={"watch": "1", "resourceVersion": rv},
                 stream=True, timeout=(5, 5)) as r:
        with pytest.raises((requests.exceptions.ChunkedEncodingError,
                            requests.exceptions.ConnectionError)):
            for _ in r.iter_lines():
                pass


# --- Faults ----------------------------------------------------------------------------------

def test_injected_429_has_retry_after_and_500_is_an_internal_error(api, fake):
    fake.faults(error_rate=1.0, error_code=429)
    r = api.get(api.base + NS + "/pods")
    s = status_of(r, 429, "TooManyRequests")
    assert r.headers["Retry-After"] == "1" and s["details"]["retryAfterSeconds"] == 1
    fake.faults(error_code=500)
    status_of(api.post(api.base + NS + "/pods", json=pod("p")), 500, "InternalError")
    fake.faults(error_rate=0.5, error_code=429, seed=7)
    codes = [api.get(api.base + NS + "/pods").status_code for _ in range(100)]
    assert 25 < codes.count(429) < 75 and codes.count(429) + codes.count(200) == 100
    fake.faults(error_rate=1.0, error_verbs=["create"])
    assert api.get(api.base + NS + "/pods").status_code == 200
    status_of(api.post(api.base + NS + "/pods", json=pod("p")), 429, "TooManyRequests")
    fake.faults(error_rate=0.0)
    assert api.post(api.base + NS + "/pods", json=pod("p")).status_code == 201


def test_fault_endpoint_rejects_unknown_keys_and_bad_values(fake):
    for body, word in (({"eror_rate": 1}, "eror_rate"), ({"error_rate": 2}, "[0, 1]"),
                       ({"error_code": 404}, "error_code"), ({"pause": "yes"}, "pause")):
        r = fake.session(token=False).post(fake.url + "/fake/faults", json=body)
        assert r.status_code == 400 and word in r.json()["message"], (body, r.text)


def test_bad_options_are_refused_with_the_option_named(tmp_path):
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fake_apiserver.py")
    for args, word in ((["--error-rate", "2"], "--error-rate 2.0"),
                       (["--retry-after", "-1"], "retry_after -1"),
                       (["--history", "0"], "--history 0")):
        r = subprocess.run([sys.executable, here, "--dir", str(tmp_path / "d"), *args],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode != 0 and word in r.stderr, (args, r.stderr)


def test_lease_optimistic_concurrency_and_injected_conflicts(api, fake):
    path = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    spec = {"holderIdentity": "a", "leaseDurationSeconds": 15,
            "acquireTime": "2026-12-01T00:00:00.000000Z",
            "renewTime": "2026-12-01T00:00:00.000000Z", "leaseTransitions": 0}
    r = api.post(api.base + path, json={"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                        "metadata": {"name": "gpusched"}, "spec": spec})
    assert r.status_code == 201, r.text
    lease = r.json()
    # Two replicas read the same version; only the first write wins.
    a, b = json.loads(json.dumps(lease)), json.loads(json.dumps(lease))
    a["spec"]["renewTime"] = "2026-12-01T00:00:02.000000Z"
    b["spec"]["holderIdentity"] = "b"
    assert api.put(api.base + path + "/gpusched", json=a).status_code == 200
    status_of(api.put(api.base + path + "/gpusched", json=b), 409, "Conflict")
    fake.faults(lease_conflicts=2)
    cur = api.get(api.base + path + "/gpusched").json()
    for _ in range(2):
        status_of(api.put(api.base + path + "/gpusched", json=cur), 409, "Conflict")
    cur["spec"]["leaseTransitions"] = 1
    assert api.put(api.base + path + "/gpusched", json=cur).status_code == 200
    cur = api.get(api.base + path + "/gpusched").json()
    # MicroTime decodes only with exactly six fractional digits; a wrong type does not decode.
    for bad in ("yesterday", "2026-12-01T00:00:03Z", "2026-12-01T00:00:03.000Z"):
        cur["spec"]["renewTime"] = bad
        s = status_of(api.put(api.base + path + "/gpusched", json=cur), 400, "BadRequest")
        assert "spec.renewTime" in s["message"] and bad in s["message"], s["message"]
    cur["spec"]["renewTime"] = "2026-12-01T00:00:03.000000Z"
    cur["spec"]["leaseDurationSeconds"] = "15"
    s = status_of(api.put(api.base + path + "/gpusched", json=cur), 400, "BadRequest")
    assert "spec.leaseDurationSeconds" in s["message"]
    cur["spec"]["leaseDurationSeconds"] = 0
    s = status_of(api.put(api.base + path + "/gpusched", json=cur), 422, "Invalid")
    assert s["details"]["causes"][0]["field"] == "spec.leaseDurationSeconds"


def test_pause_holds_answers_until_resumed(api, fake):
    fake.faults(pause=True)
    with pytest.raises(requests.exceptions.ReadTimeout):
        api.get(api.base + NS + "/pods", timeout=0.7)
    fake.faults(pause=False)
    assert api.get(api.base + NS + "/pods", timeout=5).status_code == 200


# --- The request log -------------------------------------------------------------------------

def test_request_log_verbs_follow_rbac(api, fake):
    create_pod(api, "p")
    cur = api.get(api.base + NS + "/pods/p").json()
    api.get(api.base + NS + "/pods")
    api.get(api.base + "/api/v1/pods", params={"fieldSelector": "metadata.name=p"})
    watch(api, NS + "/pods", timeoutSeconds="1")
    api.put(api.base + NS + "/pods/p", json=cur)
    api.patch(api.base + NS + "/pods/p/status",
              headers={"Content-Type": "application/merge-patch+json"}, data="{}")
    bind(api, "p", "n1")
    api.get(api.base + "/api/v1/namespaces/default")
    api.get(api.base + "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/x")
    api.delete(api.base + NS + "/pods/p")
    api.delete(api.base + NS + "/pods", params={"labelSelector": "none=1"})
    api.get(api.base + "/apis")
    watch(api, "/api/v1/watch/namespaces/default/pods/p", timeoutSeconds="1")
    want = [
        ("create", "POST", "", "pods", "", "default", "", 201),
        ("get", "GET", "", "pods", "", "default", "p", 200),
        ("list", "GET", "", "pods", "", "default", "", 200),
        ("list", "GET", "", "pods", "", "", "p", 200),
        ("watch", "GET", "", "pods", "", "default", "", 200),
        ("update", "PUT", "", "pods", "", "default", "p", 200),
        ("patch", "PATCH", "", "pods", "status", "default", "p", 200),
        ("create", "POST", "", "pods", "binding", "default", "p", 201),
        ("get", "GET", "", "namespaces", "", "default", "default", 200),
        ("get", "GET", "coordination.k8s.io", "leases", "", "kube-system", "x", 404),
        ("delete", "DELETE", "", "pods", "", "default", "p", 200),
        ("deletecollection", "DELETE", "", "pods", "", "default", "", 200),
        ("get", "GET", "", "", "", "", "", 200),
        ("watch", "GET", "", "pods", "", "default", "p", 200),
    ]
    keys = ("verb", "method", "apiGroup", "resource", "subresource", "namespace", "name", "code")
    got = [tuple(e[k] for k in keys) for e in fake.requests()]
    assert got == want
    time.sleep(0.6)  # the file is written in batches
    with open(os.path.join(fake.dir, "requests.jsonl")) as f:
        lines = [json.loads(x) for x in f]
    assert [tuple(e[k] for k in keys) for e in lines] == want
    assert lines[7]["path"] == "/api/v1/namespaces/default/pods/p/binding"


# --- Events, priorities, kubectl -------------------------------------------------------------

def test_events_are_one_resource_in_two_shapes(api):
    p = create_pod(api, "p")
    ev = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
          "metadata": {"name": "p.1", "namespace": "default"},
          "eventTime": "2026-12-01T00:00:00.000001Z", "reportingController": "gpusched",
          "reportingInstance": "gpusched-0", "action": "Scheduling", "reason":
          "FailedScheduling", "type": "Warning", "note": "0/3 nodes are available",
          "regarding": {"kind": "Pod", "namespace": "default", "name": "p",
                        "uid": p["metadata"]["uid"], "apiVersion": "v1"}}
    r = api.post(api.base + "/apis/events.k8s.io/v1/namespaces/default/events", json=ev)
    assert r.status_code == 201, r.text
    assert r.json()["note"] == "0/3 nodes are available" and "message" not in r.json()
    core = api.get(api.base + NS + "/events", params={
        "fieldSelector": "involvedObject.name=p,involvedObject.namespace=default"}).json()
    assert len(core["items"]) == 1
    assert core["items"][0]["message"] == "0/3 nodes are available"
    assert core["items"][0]["reportingComponent"] == "gpusched"
    bad = {k: v for k, v in ev.items() if k not in ("eventTime", "reportingController")}
    bad["metadata"] = {"name": "p.2"}
    bad["type"] = "Info"
    s = status_of(api.post(api.base + "/apis/events.k8s.io/v1/namespaces/default/events",
                           json=bad), 422, "Invalid")
    fields = sorted(c["field"] for c in s["details"]["causes"])
    assert fields == ["eventTime", "reportingController", "type"]
    s = status_of(api.post(api.base + "/apis/events.k8s.io/v1/namespaces/default/events",
                           json=dict(ev, metadata={"name": "p.4"},
                                     eventTime="2026-12-01T00:00:00Z")), 400, "BadRequest")
    assert "eventTime" in s["message"]
    other = dict(ev, metadata={"name": "p.3"}, regarding=dict(ev["regarding"], namespace="x"))
    s = status_of(api.post(api.base + "/apis/events.k8s.io/v1/namespaces/default/events",
                           json=other), 422, "Invalid")
    assert s["details"]["causes"][0]["field"] == "regarding.namespace"


def test_priority_class_admission(api):
    r = api.post(api.base + "/apis/scheduling.k8s.io/v1/priorityclasses", json={
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": "high"}, "value": 1000, "preemptionPolicy": "Never"})
    assert r.status_code == 201
    got = create_pod(api, "p", priorityClassName="high")
    assert got["spec"]["priority"] == 1000 and got["spec"]["preemptionPolicy"] == "Never"
    s = status_of(api.post(api.base + NS + "/pods", json=pod("q", priorityClassName="nope")),
                  403, "Forbidden")
    assert "no PriorityClass with name nope" in s["message"]
    s = status_of(api.post(api.base + NS + "/pods", json=pod("r", priority=5)), 403, "Forbidden")
    assert "computed 0" in s["message"]


def kubectl(fake, *args):
    exe = shutil.which("kubectl")
    if exe is None:
        pytest.fail("kubectl not found (install it from pkgs.k8s.io, see scripts/install-deps.sh)")
    env = dict(os.environ, HOME=fake.dir, KUBECONFIG=fake.kubeconfig)
    return subprocess.run([exe, *args], capture_output=True, text=True, timeout=60, env=env)


def test_kubectl_creates_binds_describes_and_deletes(api, fake):
    manifest = os.path.join(fake.dir, "pod.yaml")
    with open(manifest, "w") as f:
        f.write("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  schedulerName: "
                "gpusched\n  containers:\n  - name: c\n    image: busybox\n")
    r = kubectl(fake, "apply", "-f", manifest)
    assert r.returncode == 0 and "pod/web created" in r.stdout, r.stderr
    uid = api.get(api.base + NS + "/pods/web").json()["metadata"]["uid"]
    api.post(api.base + "/apis/events.k8s.io/v1/namespaces/default/events", json={
        "metadata": {"name": "web.1"}, "eventTime": "2026-12-01T00:00:00.000001Z",
        "reportingController": "gpusched", "reportingInstance": "gpusched-0",
        "action": "Binding", "reason": "Scheduled", "type": "Normal",
        "note": "Successfully assigned default/web to n1",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "web", "uid": uid}})
    assert bind(api, "web", "n1").status_code == 201
    r = kubectl(fake, "describe", "pod", "web")
    assert r.returncode == 0, r.stderr
    assert "Node:" in r.stdout and "n1" in r.stdout
    assert "PodScheduled" in r.stdout and "Successfully assigned default/web to n1" in r.stdout
    r = kubectl(fake, "get", "pods", "-o", "jsonpath={.items[*].spec.nodeName}")
    assert r.returncode == 0 and r.stdout == "n1", r.stderr
    create_pod(api, "gated", schedulingGates=[{"name": "example.com/hold"}])
    r = kubectl(fake, "get", "pods", "-o", "wide")
    assert r.returncode == 0, r.stderr
    lines = [ln.split() for ln in r.stdout.splitlines()]
    assert lines[0][:5] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"] and "NODE" in lines[0]
    rows = {ln[0]: ln for ln in lines[1:]}
    assert rows["web"][2] == "Pending" and "n1" in rows["web"]
    assert rows["gated"][2] == "SchedulingGated"
    r = kubectl(fake, "delete", "pod", "web", "--wait=true", "--timeout=20s")
    assert r.returncode == 0 and 'pod "web" deleted' in r.stdout, r.stderr


def test_a_terminating_pod_cannot_be_bound_and_goes_after_its_grace(tmp_path):
    with start_fake(str(tmp_path / "slow"), "--pod-termination", "1") as fake:
        api = fake.session()
        api.base = fake.url
        create_pod(api, "p")
        create_pod(api, "q")
        assert bind(api, "p", "n1").status_code == 201
        t0 = time.monotonic()
        assert api.delete(api.base + NS + "/pods/p").status_code == 200
        # q is unbound: deleted at once. p stays Terminating for the kubelet's part.
        assert api.delete(api.base + NS + "/pods/q").status_code == 200
        status_of(api.get(api.base + NS + "/pods/q"), 404, "NotFound")
        got = api.get(api.base + NS + "/pods/p").json()
        assert got["metadata"]["deletionTimestamp"]
        s = status_of(api.post(api.base + NS + "/pods/p/binding", json={
            "metadata": {"name": "p"}, "target": {"name": "n2"}}), 409, "Conflict")
        assert "being deleted" in s["message"] or "already assigned" in s["message"]
        r = api.delete(api.base + NS + "/pods/p")  # a second delete changes nothing
        assert r.json()["metadata"]["resourceVersion"] == got["metadata"]["resourceVersion"]
        while api.get(api.base + NS + "/pods/p").status_code == 200:
            assert time.monotonic() - t0 < 20  # gone once its 1 s is over; the bound only ends the loop
            time.sleep(0.05)
        assert time.monotonic() - t0 >= 0.9


def test_bodies_must_be_json_and_watch_list_is_not_served(api):
    r = api.post(api.base + NS + "/pods", data=json.dumps(pod("p")),
                 headers={"Content-Type": "application/x-www-form-urlencoded"})
    s = status_of(r, 415, "UnsupportedMediaType")
    assert "application/x-www-form-urlencoded" in s["message"]
    status_of(api.post(api.base + NS + "/pods", data="{", headers={"Content-Type":
                                                                   "application/json"}),
              400, "BadRequest")
    s = status_of(api.patch(api.base + NS + "/pods/p", data="{}", headers={
        "Content-Type": "application/apply-patch+yaml"}), 415, "UnsupportedMediaType")
    assert "merge-patch" in s["message"]
    r = api.get(api.base + NS + "/pods", params={"watch": "1", "sendInitialEvents": "true"})
    s = status_of(r, 422, "Invalid")
    assert s["details"]["causes"][0]["field"] == "sendInitialEvents"


def test_native_workload_and_pod_group_rules(api):
    base = "/apis/scheduling.k8s.io/v1beta1/namespaces/default"
    wl = {"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "Workload",
          "metadata": {"name": "job"}, "spec": {"podGroupTemplates": [
              {"name": "workers", "schedulingPolicy": {"gang": {"minCount": 4}}}]}}
    r = api.post(api.base + base + "/workloads", json=wl)
    assert r.status_code == 201, r.text
    cur = r.json()
    cur["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = 2
    s = status_of(api.put(api.base + base + "/workloads/job", json=cur), 422, "Invalid")
    assert "immutable" in s["message"]
    bad = json.loads(json.dumps(wl))
    bad["metadata"]["name"] = "bad"
    bad["spec"]["podGroupTemplates"][0]["schedulingPolicy"] = {"basic": {}, "gang": {}}
    s = status_of(api.post(api.base + base + "/workloads", json=bad), 422, "Invalid")
    assert s["details"]["causes"][0]["field"] == \
        "spec.podGroupTemplates[0].schedulingPolicy"
    bad["spec"]["podGroupTemplates"] = [{"name": f"t{i}"} for i in range(9)]
    s = status_of(api.post(api.base + base + "/workloads", json=bad), 422, "Invalid")
    assert s["details"]["causes"][0]["field"] == "spec.podGroupTemplates"
    pg = {"metadata": {"name": "workers-0"}, "spec": {
        "workloadRef": {"workloadName": "job", "templateName": "workers"},
        "schedulingPolicy": {"gang": {"minCount": 0}}}}
    s = status_of(api.post(api.base + base + "/podgroups", json=pg), 422, "Invalid")
    assert s["details"]["causes"][0]["field"] == "spec.schedulingPolicy.gang.minCount"
    pg["spec"]["schedulingPolicy"]["gang"]["minCount"] = 4
    r = api.post(api.base + base + "/podgroups", json=pg)
    assert r.status_code == 201, r.text
    g = r.json()
    g["status"] = {"conditions": [{"type": "PodGroupScheduled", "status": "False",
                                   "reason": "Unschedulable", "message": "2/4 pods fit",
                                   "lastTransitionTime": "2026-12-01T00:00:00Z"}]}
    r = api.put(api.base + base + "/podgroups/workers-0/status", json=g)
    assert r.status_code == 200 and r.json()["status"]["conditions"][0]["reason"] == \
        "Unschedulable"


def test_watch_order_under_concurrent_writers(api, fake):
    rv = api.get(api.base + NS + "/pods").json()["metadata"]["resourceVersion"]

    def writer(k):
        s = fake.session()
        s.base = fake.url
        for i in range(25):
            create_pod(s, f"w{k}-{i}")
            assert bind(s, f"w{k}-{i}", f"n{k}").status_code == 201
    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    evs = watch(api, NS + "/pods", n=200, resourceVersion=rv, timeout=10)
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
    assert len(evs) == 200 and rvs == sorted(set(rvs)), "each event once, in version order"
    per_pod = {}
    for e in evs:
        per_pod.setdefault(e["object"]["metadata"]["name"], []).append(e["type"])
    assert len(per_pod) == 100 and all(t == ["ADDED", "MODIFIED"] for t in per_pod.values())
    nodes = {e["object"]["spec"].get("nodeName") for e in evs if e["type"] == "MODIFIED"}
    assert nodes == {"n0", "n1", "n2", "n3"}


# --- The ClusterRole check over the request log ----------------------------------------------

ROLE = """apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: sched}
rules:
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, create]
- apiGroups: [""]
  resources: [pods/binding]
  verbs: [create]
- apiGroups: [""]
  resources: ["*/status"]
  verbs: [patch]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  resourceNames: [gpusched]
  verbs: [get, update]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [create]
- apiGroups: [""]
  resources: [nodes]
  verbs: [delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: other}
rules: []
"""


def test_request_log_checked_against_a_cluster_role(api, fake, tmp_path):
    import rbac

    def log_file():
        p = tmp_path / "requests.jsonl"
        p.write_text("".join(json.dumps(e) + "\n" for e in fake.requests()))
        return p

    def denied(roles):
        return [v.request for v in rbac.check_log(log_file(), roles)]

    lease = "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
    create_pod(api, "p")
    api.get(api.base + NS + "/pods", params={"watch": "1", "timeoutSeconds": "1"})
    api.patch(api.base + NS + "/pods/p/status",
              headers={"Content-Type": "application/merge-patch+json"}, data="{}")
    bind(api, "p", "n1")
    api.post(api.base + lease, json={"metadata": {"name": "gpusched"}, "spec": {}})
    api.get(api.base + lease + "/gpusched")
    api.get(api.base + "/apis")
    api.get(api.base + "/api/v1")
    assert denied(ROLE) == []
    unused = rbac.unused_rules(log_file(), ROLE)
    assert ("sched", "delete", "", "nodes") in unused
    assert ("sched", "create", "", "pods/binding") not in unused
    # What the role does not grant: another lease's name, an update of pods, discovery
    # without the bootstrap discovery role.
    api.get(api.base + lease + "/other")
    api.put(api.base + NS + "/pods/p", json=api.get(api.base + NS + "/pods/p").json())
    bad = denied(ROLE)
    assert sorted((e["verb"], e["resource"], e["name"]) for e in bad) == [
        ("get", "leases", "other"), ("update", "pods", "p")]
    no_discovery = rbac.Policy(rbac.load_docs(ROLE), discovery=False)
    assert {e["path"] for e in denied(no_discovery) if not e["resource"]} == {"/apis", "/api/v1"}
    with pytest.raises(rbac.RBACError):
        rbac.check_log(log_file(), "kind: ClusterRole\napiVersion: rbac.authorization.k8s.io/v1\n"
                       "metadata: {name: x}\nrules: [{verbs: [get]}]\n")


def test_paged_lists_at_an_old_version_match_what_was_there(api):
    """Exact lists at recorded versions, paged three at a time across two namespaces, equal the
    full list recorded at that version, while creates, updates and deletes go on."""
    import random
    rng = random.Random(5)
    assert api.post(api.base + "/api/v1/namespaces",
                    json={"metadata": {"name": "other"}}).status_code == 201
    seen = {}  # rv -> [(namespace, name, rv)]
    live = set()
    for step in range(120):
        ns = rng.choice(["default", "other"])
        name = f"p{rng.randrange(30)}"
        base = api.base + f"/api/v1/namespaces/{ns}/pods"
        if (ns, name) not in live:
            r = api.post(base, json=pod(name))
            assert r.status_code == 201, r.text
            live.add((ns, name))
        elif rng.random() < 0.4:
            assert api.delete(base + "/" + name).status_code == 200
            live.discard((ns, name))
        else:
            r = api.patch(base + "/" + name, headers={"Content-Type":
                                                      "application/merge-patch+json"},
                          data=json.dumps({"metadata": {"labels": {"step": str(step)}}}))
            assert r.status_code == 200, r.text
        full = api.get(api.base + "/api/v1/pods").json()
        seen[full["metadata"]["resourceVersion"]] = [
            (i["metadata"]["namespace"], i["metadata"]["name"], i["metadata"]["resourceVersion"])
            for i in full["items"]]
    for rv in rng.sample(sorted(seen), 15):
        for ns in ("", "other"):
            want = [x for x in seen[rv] if not ns or x[0] == ns]
            path = "/api/v1/pods" if not ns else f"/api/v1/namespaces/{ns}/pods"
            params = {"limit": 3, "resourceVersion": rv, "resourceVersionMatch": "Exact"}
            got, first = [], True
            while True:
                r = api.get(api.base + path, params=params)
                assert r.status_code == 200, r.text
                page = r.json()
                assert page["metadata"]["resourceVersion"] == rv
                got += [(i["metadata"]["namespace"], i["metadata"]["name"],
                         i["metadata"]["resourceVersion"]) for i in page["items"]]
                if page["metadata"].get("continue"):
                    if first:
                        assert page["metadata"]["remainingItemCount"] == len(want) - 3
                    params = {"limit": 3, "continue": page["metadata"]["continue"]}
                    first = False
                else:
                    break
            assert got == want, (rv, ns)
