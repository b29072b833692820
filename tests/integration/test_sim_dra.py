"""`gpusched sim` with DRA documents (tests/data/sim/dra): claims from
templates allocated at bind and carried by the scheduled events, a node
without a ResourceSlice served by one built from its GPUs, a shared claim
allocated once, an impossible claim explained, deallocation when its pod
completes, and DRA documents that do not decode reported with file and line."""
import json
import os
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("GPUSCHED_BIN", os.path.join(ROOT, "build", "gpusched"))
DATA = os.path.join(ROOT, "tests", "data", "sim", "dra")


def sim(*args):
    return subprocess.run([BIN, "sim", *args], capture_output=True, text=True, timeout=120)


def events(tmp_path):
    out = sim("--cluster", os.path.join(DATA, "cluster.yaml"), "--workload", os.path.join(DATA, "workload.yaml"),
              "--experiment", "replay", "--policy", "BestFit", "--out", str(tmp_path), "--json", "-q")
    assert out.returncode == 0, out.stderr
    return [json.loads(l) for l in (tmp_path / "events.jsonl").read_text().splitlines()]


def devices(e):
    return [(r["pool"], r["device"]) for c in e["claims"] for r in c["allocation"]["devices"]["results"]]


def test_claims_allocated_on_bind_and_released(tmp_path):
    ev = events(tmp_path)
    sched = [e for e in ev if e["event"] == "scheduled"]
    by_pod = {}
    for e in sched:
        by_pod.setdefault(e["pod"], []).append(e)
    a = by_pod["default/h100-a"][0]
    assert a["node"] == "dra-a" and a["t"] == 0
    assert a["claims"][0]["claim"].startswith("h100-a-gpus-")
    assert devices(a) == [("dra-a", "gpu-0"), ("dra-a", "gpu-1")]
    assert a["gpus"] == [0, 1]  # the claim's GPUs are the pod's slots
    term = a["claims"][0]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]
    assert term == {"key": "metadata.name", "operator": "In", "values": ["dra-a"]}
    # dra-b has no slice of its own: the built one serves the pod.
    b = by_pod["default/any-b"][0]
    assert b["node"] == "dra-b" and devices(b) == [("dra-b", "gpu-0")]
    # No H100 free at t=20: the failure names the claim, request and selector.
    fail = [e for e in ev if e["event"] == "failed" and e["pod"] == "default/h100-c"][0]
    assert fail["t"] == 20
    assert "claim h100-c-gpus-" in fail["reason"] and "request gpus" in fail["reason"]
    assert 'productName == "H100"' in fail["reason"]
    # The shared claim is allocated once; its second consumer gets the same device.
    d, e = by_pod["default/shared-d"][0], by_pod["default/shared-e"][0]
    assert devices(d) == devices(e) == [("dra-b", "gpu-1")]
    assert d["claims"][0]["claim"] == e["claims"][0]["claim"] == "pair-shared"
    # h100-a completes at 50: its claim is deallocated and h100-c gets the devices.
    c = by_pod["default/h100-c"][0]
    assert c["t"] == 50 and devices(c) == [("dra-a", "gpu-0"), ("dra-a", "gpu-1")]


def test_same_seed_same_claim_names(tmp_path):
    one = [e.get("claims") for e in events(tmp_path / "1") if e["event"] == "scheduled"]
    two = [e.get("claims") for e in events(tmp_path / "2") if e["event"] == "scheduled"]
    assert one == two


def test_bad_dra_document_reported(tmp_path):
    bad = tmp_path / "workload.yaml"
    bad.write_text("apiVersion: resource.k8s.io/v1\nkind: ResourceClaim\nmetadata: {name: c}\n"
                   "spec:\n  devices:\n    requests:\n    - name: gpus\n      exactly:\n"
                   "        deviceClassName: gpu.nvidia.com\n        count: -1\n")
    out = sim("--cluster", os.path.join(DATA, "cluster.yaml"), "--workload", str(bad), "--experiment", "replay",
              "--policy", "BestFit", "-q")
    assert out.returncode != 0
    assert f"{bad}:1: spec.devices.requests[0].exactly.count" in out.stderr, out.stderr
