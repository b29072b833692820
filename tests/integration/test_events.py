"""Events end to end with `gpusched up --mock`: the scheduler's Scheduled and
FailedScheduling (with the diagnosis, aggregated), the agent's Started and
Killing, as `kubectl describe pod`, `kubectl get events -A` and the
events.k8s.io/v1 API show them, and their expiry after --event-ttl.

kubectl is required (/usr/bin/kubectl): these tests fail without it."""
import json
import os
import re
import shutil
import ssl
import subprocess
import urllib.request

import pytest

from stack import Stack, apply, phase, pod_manifest, wait_for

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("events"))
    s.up("2x4xH100-80GB")
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def kubectl(stack, *args, check=True):
    assert os.path.exists(KUBECTL), f"kubectl not found at {KUBECTL}: these tests need it"
    r = subprocess.run([KUBECTL, "--kubeconfig", stack.kubeconfig, *args], capture_output=True, text=True,
                       timeout=60)
    if check:
        assert r.returncode == 0, f"kubectl {' '.join(args)}: {r.stdout}{r.stderr}"
    return r


def events(stack, api="events"):
    return json.loads(kubectl(stack, "get", api, "-A", "-o", "json").stdout)["items"]


def about(evs, name, reason=None, key="involvedObject"):
    return [e for e in evs if e[key]["name"] == name and (reason is None or e["reason"] == reason)]


def describe_events(stack, name):
    out = kubectl(stack, "describe", "pod", name).stdout
    assert "\nEvents:" in out, out
    return out.split("\nEvents:", 1)[1]


def test_fitting_pod_is_scheduled_then_started(stack):
    apply(stack, pod_manifest("fits", "sleep 60", gpus=1))
    wait_for(lambda: phase(stack.pod("fits")) == "Running", 20, "fits to run")
    node = stack.pod("fits")["spec"]["nodeName"]

    def shown():
        ev = describe_events(stack, "fits")
        return "Started" in ev and "Scheduled" in ev and ev

    ev = wait_for(shown, 20, "Scheduled and Started in kubectl describe")
    assert f"Successfully assigned default/fits to {node}" in ev, ev
    assert "default-scheduler" in ev and "Started container main" in ev and "kubelet" in ev, ev
    lines = [line for line in ev.splitlines() if "Scheduled" in line or "Started" in line]
    assert lines[0].split()[1] == "Scheduled", ev  # oldest first, as kubectl sorts
    table = kubectl(stack, "get", "events", "-A").stdout
    assert "pod/fits" in table and "Scheduled" in table and "Started" in table, table
    assert table.splitlines()[0].split()[:4] == ["NAMESPACE", "LAST", "SEEN", "TYPE"], table
    started = about(events(stack), "fits", "Started")
    assert len(started) == 1
    e = started[0]
    assert e["involvedObject"]["uid"] == stack.pod("fits")["metadata"]["uid"]
    assert e["involvedObject"]["fieldPath"] == "spec.containers{main}"
    assert e["source"] == {"component": "kubelet", "host": node}
    assert e["type"] == "Normal" and e["count"] == 1 and e["firstTimestamp"] and e["lastTimestamp"]
    assert e["metadata"]["namespace"] == "default" and e["metadata"]["name"].startswith("fits.")


def test_too_big_pod_fails_scheduling_with_the_diagnosis_aggregated(stack):
    apply(stack, pod_manifest("huge", "sleep 60", gpus=16))

    def failed():
        evs = about(events(stack), "huge", "FailedScheduling")
        return evs and evs

    evs = wait_for(failed, 20, "FailedScheduling for huge")
    assert evs[0]["type"] == "Warning"
    assert evs[0]["message"].startswith("0/2 nodes are available:"), evs[0]["message"]
    assert "Insufficient nvidia.com/gpu" in evs[0]["message"], evs[0]["message"]
    # Each retry (a cluster change moves the pod back to the active queue)
    # folds into the same Event: count grows, no second Event.
    n = 0

    def aggregated():
        nonlocal n
        n += 1
        apply(stack, pod_manifest(f"poke-{n}", "true"))
        evs = about(events(stack), "huge", "FailedScheduling")
        return len(evs) == 1 and evs[0]["count"] > 1 and evs

    evs = wait_for(aggregated, 40, "FailedScheduling to aggregate", step=1)
    e = evs[0]
    assert e["lastTimestamp"] >= e["firstTimestamp"]
    assert e["series"]["count"] == e["count"]
    ev = describe_events(stack, "huge")
    assert "FailedScheduling" in ev and re.search(r"\(x\d+ over \d+[smh]\)", ev), ev
    assert "0/2 nodes are available" in ev, ev
    wait_for(lambda: all(phase(stack.pod(f"poke-{i}")) == "Succeeded" for i in range(1, n + 1)), 30, "pokes")


def test_events_k8s_io_serves_the_same_events(stack):
    wait_for(lambda: about(events(stack), "fits", "Started"), 20, "the Started event")
    core = {e["metadata"]["name"]: e for e in events(stack)}
    v1 = events(stack, "events.v1.events.k8s.io")
    assert v1 and {e["metadata"]["name"] for e in v1} & set(core)
    for e in v1:
        c = core.get(e["metadata"]["name"])
        if c is None:
            continue  # written between the two lists
        assert e["apiVersion"] == "events.k8s.io/v1"
        assert e["regarding"] == c["involvedObject"] and e["note"] == c["message"]
        assert e["reportingController"] == c["reportingComponent"]
        assert e["deprecatedSource"] == c["source"]
        assert "involvedObject" not in e and "message" not in e
    raw = json.loads(kubectl(stack, "get", "--raw", "/apis/events.k8s.io/v1/namespaces/default/events").stdout)
    assert raw["kind"] == "EventList" and raw["apiVersion"] == "events.k8s.io/v1"
    assert any(e["regarding"]["name"] == "fits" and e["reason"] == "Scheduled" for e in raw["items"])
    groups = json.loads(kubectl(stack, "get", "--raw", "/apis").stdout)["groups"]
    assert any(g["name"] == "events.k8s.io" for g in groups)
    # A client of events.k8s.io writes one; core v1 reads it.
    body = {"apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "fits.custom", "namespace": "default"},
            "eventTime": "2026-01-02T03:04:05.000000Z", "reportingController": "example.com/ctl",
            "reportingInstance": "ctl-1", "action": "Check", "reason": "Checked", "type": "Normal",
            "note": "checked by hand", "regarding": {"kind": "Pod", "name": "fits", "namespace": "default"}}
    r = subprocess.run([KUBECTL, "--kubeconfig", stack.kubeconfig, "create", "-f", "-"], input=json.dumps(body),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    got = json.loads(kubectl(stack, "get", "event", "fits.custom", "-o", "json").stdout)
    assert got["apiVersion"] == "v1" and got["message"] == "checked by hand"
    assert got["involvedObject"]["name"] == "fits" and got["reportingComponent"] == "example.com/ctl"
    r = kubectl(stack, "patch", "events.v1.events.k8s.io", "fits.custom", "--type=merge", "-p", '{"note":"x"}',
                check=False)
    assert r.returncode != 0 and "not patched in place" in r.stderr, r.stderr
    r = kubectl(stack, "delete", "events.v1.events.k8s.io", "fits.custom")
    assert kubectl(stack, "get", "event", "fits.custom", check=False).returncode != 0
    bad = dict(body, type="Fatal", metadata={"name": "fits.bad", "namespace": "default"})
    r = subprocess.run([KUBECTL, "--kubeconfig", stack.kubeconfig, "create", "-f", "-"], input=json.dumps(bad),
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "type" in r.stderr and "Fatal" in r.stderr, r.stderr


def test_gpusched_describe_and_killing(stack):
    out = stack.cli("describe", "pod", "fits").stdout
    tail = out.split("Events:", 1)[1]
    assert "Scheduled" in tail and "default-scheduler" in tail and "Started" in tail, out
    stack.cli("delete", "pod", "fits")
    evs = wait_for(lambda: about(events(stack), "fits", "Killing"), 20, "Killing")
    assert evs[0]["message"] == "Stopping container main"
    node = stack.cli("describe", "node", "gpu-node-1").stdout
    assert "Events:" in node


def test_admission_records_quota_reserved_and_admitted(stack):
    apply(stack,
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "ev-cq"},
           "spec": {"namespaceSelector": {}, "resourceGroups": [
               {"coveredResources": ["nvidia.com/gpu"],
                "flavors": [{"name": "default-flavor",
                             "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 2}]}]}]}},
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
           "metadata": {"name": "ev-lq", "namespace": "default"}, "spec": {"clusterQueue": "ev-cq"}})
    p = pod_manifest("queued", "sleep 0.2", gpus=1)
    p["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "ev-lq"}
    apply(stack, p)
    wait_for(lambda: phase(stack.pod("queued")) == "Succeeded", 30, "the queued pod to run")
    evs = wait_for(lambda: len(about(events(stack), "queued")) >= 4 and about(events(stack), "queued"), 20,
                   "admission, scheduler and agent events")
    by = {e["reason"]: e for e in evs}
    assert by["QuotaReserved"]["message"] == "Quota reserved in queue ev-cq", by["QuotaReserved"]
    assert by["Admitted"]["source"]["component"] == "kueue-admission"
    assert by["Admitted"]["involvedObject"]["uid"] == stack.pod("queued")["metadata"]["uid"]
    first = lambda e: (e["eventTime"], e["metadata"]["name"])  # noqa: E731
    assert first(by["QuotaReserved"]) <= first(by["Scheduled"]) <= first(by["Started"])


def test_describe_node_lists_its_events(stack):
    """Node Events live in default with no involvedObject.namespace; kubectl
    selects them by kind and name with the Node's uid or its name (kubelet's)."""
    node = stack.node("gpu-node-2")
    for name, uid in (("gpu-node-2.a", node["metadata"]["uid"]), ("gpu-node-2.b", "gpu-node-2")):
        body = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": "default"},
                "involvedObject": {"kind": "Node", "name": "gpu-node-2", "uid": uid, "apiVersion": "v1"},
                "reason": "Checked" + name[-1].upper(), "message": "looked at " + name, "type": "Normal",
                "source": {"component": "tester"}, "count": 1,
                "firstTimestamp": "2026-01-02T03:04:05Z", "lastTimestamp": "2026-01-02T03:04:05Z"}
        r = subprocess.run([KUBECTL, "--kubeconfig", stack.kubeconfig, "create", "-f", "-"],
                           input=json.dumps(body), capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    out = kubectl(stack, "describe", "node", "gpu-node-2").stdout
    assert "CheckedA" in out and "CheckedB" in out, out
    mine = stack.cli("describe", "node", "gpu-node-2").stdout.split("Events:", 1)[1]
    assert "CheckedA" in mine and "CheckedB" in mine and "tester" in mine, mine


def test_metrics_count_events(stack):
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    req = urllib.request.Request(stack.info["server"] + "/metrics",
                                 headers={"Authorization": "Bearer " + stack.info["token"]})
    with urllib.request.urlopen(req, timeout=5, context=ctx) as f:
        text = f.read().decode()
    created = [line for line in text.splitlines() if line.startswith('gpusched_events_total{result="created"}')]
    assert created and int(created[0].split()[-1]) > 0, text
    assert 'gpusched_events_total{result="dropped_queue_full"} 0' in text


def test_events_expire_after_the_ttl(gpusched_bin, tmp_path):
    s = Stack(gpusched_bin, tmp_path)
    s.up("1x1xH100-80GB", "--event-ttl", "3s")
    try:
        apply(s, pod_manifest("brief", "true", gpus=1))
        wait_for(lambda: phase(s.pod("brief")) == "Succeeded", 20, "brief to finish")
        wait_for(lambda: about(events(s), "brief", "Started"), 20, "brief's events")
        # Nothing new happens to it: every Event goes within the TTL plus a sweep.
        wait_for(lambda: not events(s), 20, "the events to expire", step=0.5)
        assert s.pod("brief") is not None  # only the Events went
    finally:
        s.stop("up")
    bad = subprocess.run([gpusched_bin, "up", "--mock", "1x1xH100-80GB", "--event-ttl", "0"], capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode == 2 and "--event-ttl" in bad.stderr and "at least 1s" in bad.stderr, bad.stderr
