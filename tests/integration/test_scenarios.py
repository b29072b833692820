"""Gang, topology, spread and preemption scenarios through the real binary:
`gpusched sim --experiment replay` on the manifests of tests/data/scenarios/<name>/
(nodes.yaml, workload.yaml, optional config.yaml; default the gang/topology
profile of examples/), asserting the events listed in expected.json.

expected.json: "events" each must match some event (fields equal; "t" to the
microsecond; "reason_contains", "gpus_within", "node_in" as named), "absent"
must match none ("t_lt": only events before that time), "counts" per event
type, "per_node": scheduled pods per node."""
import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("GPUSCHED_BIN", os.path.join(ROOT, "build", "gpusched"))
SCEN = os.path.join(ROOT, "tests", "data", "scenarios")
PROFILE = os.path.join(ROOT, "examples", "scheduler", "gang-topology-scheduler.yaml")
NAMES = sorted(d for d in os.listdir(SCEN) if os.path.isfile(os.path.join(SCEN, d, "expected.json")))


def run(name, tmp):
    d = os.path.join(SCEN, name)
    cfg = os.path.join(d, "config.yaml")
    out = os.path.join(tmp, "out")
    args = [BIN, "sim", "--experiment", "replay", "--cluster", os.path.join(d, "nodes.yaml"),
            "--workload", os.path.join(d, "workload.yaml"), "--policy", "BestFit",
            "--config", cfg if os.path.isfile(cfg) else PROFILE, "--out", out, "--json", "-q",
            "--gang-queue", "scheduler"]  # the scheduler's own decisions, as on the server
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    with open(os.path.join(out, "events.jsonl")) as f:
        return [json.loads(l) for l in f if l.strip()]


def matches(ev, want):
    for k, v in want.items():
        if k == "t":
            if abs(ev["t"] - v) > 1e-6:
                return False
        elif k == "t_lt":
            if not ev["t"] < v:
                return False
        elif k == "reason_contains":
            if v not in (ev.get("reason") or ""):
                return False
        elif k == "gpus_within":
            if not ev["gpus"] or not set(ev["gpus"]) <= set(v):
                return False
        elif k == "node_in":
            if ev.get("node") not in v:
                return False
        elif ev.get(k) != v:
            return False
    return True


@pytest.mark.parametrize("name", NAMES)
def test_scenario(name, tmp_path):
    with open(os.path.join(SCEN, name, "expected.json")) as f:
        exp = json.load(f)
    events = run(name, str(tmp_path))
    log = "\n".join(json.dumps(e) for e in events)
    for want in exp.get("events", []):
        assert any(matches(e, want) for e in events), "missing %s in\n%s" % (want, log)
    for want in exp.get("absent", []):
        bad = [e for e in events if matches(e, want)]
        assert not bad, "unexpected %s in\n%s" % (bad, log)
    for typ, n in exp.get("counts", {}).items():
        got = sum(1 for e in events if e["event"] == typ)
        assert got == n, "%d %s events, want %d\n%s" % (got, typ, n, log)
    if "per_node" in exp:
        got = {}
        for e in events:
            if e["event"] == "scheduled":
                got[e["node"]] = got.get(e["node"], 0) + 1
        assert got == exp["per_node"], log


def explain(*args):
    return subprocess.run([BIN, "explain", *args], capture_output=True, text=True, timeout=120)


def scen_args(name):
    d = os.path.join(SCEN, name)
    return ["--cluster", os.path.join(d, "nodes.yaml"), "--workload", os.path.join(d, "workload.yaml"),
            "--config", PROFILE]


def test_explain_from_output_dir(tmp_path):
    run("preempt-no-help", str(tmp_path))
    p = explain("huge", "--from", str(tmp_path / "out"), "--at", "20", *scen_args("preempt-no-help"))
    assert p.returncode == 0, p.stderr
    assert "at t=20:" in p.stdout
    assert "GpuShare               rejected 1 node(s): Insufficient nvidia.com/gpu" in p.stdout
    assert "closest node: n1" in p.stdout
    assert "preemption: would not help" in p.stdout


def test_explain_group_replayed():
    p = explain("gang-b", "--at", "50", *scen_args("two-competing-gangs"))
    assert p.returncode == 0, p.stderr
    assert "pod group default/gang-b: 4 member(s) known, 0 placed, minMember 4" in p.stdout
    assert "pod group default/gang-b needs 8.0 GPUs, 0.0 free and 0.0 preemptible" in p.stdout
    p = explain("a-0", "--at", "50", *scen_args("two-competing-gangs"))
    assert "is running on" in p.stdout


def test_explain_defaults_to_the_servers_profile():
    # Without --config the replay and the judgement are the server's profile (as gpusched sim):
    # Coscheduling speaks for the gang, as the server's scheduler would.
    d = os.path.join(SCEN, "two-competing-gangs")
    p = explain("gang-b", "--at", "50", "--cluster", os.path.join(d, "nodes.yaml"),
                "--workload", os.path.join(d, "workload.yaml"))
    assert p.returncode == 0, p.stderr
    assert "pod group default/gang-b: 4 member(s) known, 0 placed, minMember 4" in p.stdout
    assert "Coscheduling           rejected the pod before any node" in p.stdout
    # A policy puts kube's default set back: no gang plugin, the GPU filter answers.
    p = explain("gang-b", "--at", "50", "--policy", "BestFit", "--cluster", os.path.join(d, "nodes.yaml"),
                "--workload", os.path.join(d, "workload.yaml"))
    assert p.returncode == 0, p.stderr
    assert "GpuShare               rejected 2 node(s): Insufficient nvidia.com/gpu" in p.stdout
    assert "Coscheduling" not in p.stdout


def test_explain_usage():
    p = explain("x")
    assert p.returncode == 2
    assert "--cluster and --workload are required" in p.stderr
    p = explain("nosuch", *scen_args("spread"))
    assert p.returncode == 1
    assert "no pod or pod group default/nosuch" in p.stderr
