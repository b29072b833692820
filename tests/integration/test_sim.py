"""`gpusched sim` end to end: the real binary on the openb trace and on the
hand-written manifest scenario in tests/data/sim.

GPUSCHED_BIN names the binary (default build/gpusched), GS_TRACE_DIR the
openb trace directory (default ../shared/traces/openb)."""
import csv
import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("GPUSCHED_BIN", os.path.join(ROOT, "build", "gpusched"))
TRACE = os.environ.get("GS_TRACE_DIR", os.path.join(ROOT, "..", "shared", "traces", "openb"))
DATA = os.path.join(ROOT, "tests", "data", "sim")
KEYS = ["policy", "seed", "nodes", "gpus", "pods_arrived", "pods_scheduled", "alloc_pct_at_100",
        "alloc_pct_final", "frag_ratio_at_80", "wall_seconds"]
NUMERIC = KEYS[2:]


def sim(*args, timeout=600):
    env = dict(os.environ, GS_TRACE_DIR=TRACE)
    return subprocess.run([BIN, "sim", *args], capture_output=True, text=True, timeout=timeout, env=env)


def last_json(out):
    lines = [l for l in out.stdout.splitlines() if l.strip()]
    assert lines, out.stderr
    return json.loads(lines[-1])


def need_trace():
    if not os.path.isfile(os.path.join(TRACE, "openb_pod_list_default.csv")):
        pytest.fail("openb trace not found in " + TRACE + " (GS_TRACE_DIR; CI has ../shared/traces/openb)")


@pytest.fixture(scope="module")
def trace_slice(tmp_path_factory):
    """The first 120 GPU nodes and 900 pods of the default trace: quick runs."""
    need_trace()
    d = tmp_path_factory.mktemp("slice")
    for src, dst, n in (("openb_node_list_gpu_node.csv", "nodes.csv", 120),
                        ("openb_pod_list_default.csv", "pods.csv", 900)):
        with open(os.path.join(TRACE, src)) as f:
            lines = f.readlines()[: n + 1]
        (d / dst).write_text("".join(lines))
    return str(d / "nodes.csv"), str(d / "pods.csv")


def test_full_default_trace_json():
    need_trace()
    out = sim("--json", "-q")
    assert out.returncode == 0, out.stderr
    res = last_json(out)
    assert isinstance(res, list) and len(res) == 1
    r = res[0]
    for k in KEYS:
        assert k in r, k
    for k in NUMERIC:
        assert isinstance(r[k], (int, float)), k
    assert r["policy"] == "profile" and r["seed"] == 42  # no --policy: the server's placement
    assert r["nodes"] == 1213 and r["gpus"] == 6212
    # Inflated to 1.3x the GPU capacity: more pods than the 8152 of the trace.
    assert 8152 < r["pods_arrived"] < 20000
    assert 0 < r["pods_scheduled"] <= r["pods_arrived"]
    assert 85 <= r["alloc_pct_at_100"] <= 100
    assert r["alloc_pct_at_100"] - 0.5 <= r["alloc_pct_final"] <= 100
    assert 0 <= r["frag_ratio_at_80"] <= 100
    assert r["wall_seconds"] > 0


def test_human_table(trace_slice):
    nodes, pods = trace_slice
    out = sim("--nodes", nodes, "--pods", pods, "--policy", "BestFit", "-q")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].split()[0] == "policy"
    assert lines[1].split()[0] == "BestFit"


def test_out_writes_three_files(trace_slice, tmp_path):
    nodes, pods = trace_slice
    out_dir = tmp_path / "out"
    out = sim("--nodes", nodes, "--pods", pods, "--policy", "BestFit,FGD", "--out", str(out_dir), "--json", "-q")
    assert out.returncode == 0, out.stderr
    res = last_json(out)
    assert [r["policy"] for r in res] == ["BestFit", "FGD"]
    events = (out_dir / "events.jsonl").read_text().splitlines()
    assert len(events) >= sum(r["pods_arrived"] for r in res)
    kinds = set()
    for line in events:
        e = json.loads(line)
        for k in ("t", "event", "pod", "node", "gpus", "reason"):
            assert k in e, (k, line)
        assert e["event"] in ("scheduled", "failed", "preempted", "completed")
        assert "/" in e["pod"]
        assert all(isinstance(g, int) and g >= 0 for g in e["gpus"])
        if e["event"] == "failed":
            assert e["reason"] and e["node"] is None
        if e["event"] == "scheduled":
            assert e["node"]
        kinds.add(e["event"])
    assert "scheduled" in kinds
    scheduled = sum(1 for l in events if json.loads(l)["event"] == "scheduled")
    assert scheduled == sum(r["pods_scheduled"] for r in res)
    with open(out_dir / "series.csv") as f:
        rows = list(csv.DictReader(f))
    for k in ("t", "pods_arrived", "pods_scheduled", "pods_running", "pods_pending", "arrived_pct", "alloc_pct",
              "frag_ratio"):
        assert k in rows[0], k
    assert {r["policy"] for r in rows} == {"BestFit", "FGD"}
    html = (out_dir / "report.html").read_text()
    assert html.count("<svg") >= 2 and "BestFit" in html and "FGD" in html
    assert "<script" not in html and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")


def test_default_placement_is_fgdlearn(trace_slice, tmp_path):
    """Without --policy the fgd experiment runs the server's profile, whose placement is FGDLearn:
    every decision (node and GPUs, in events.jsonl) is the one of --policy FGDLearn."""
    nodes, pods = trace_slice
    runs = {}
    for policy in ("profile", "FGDLearn", "FGD"):
        args = ["--nodes", nodes, "--pods", pods, "--seeds", "42-43", "--out", str(tmp_path / policy), "--json", "-q"]
        out = sim(*args) if policy == "profile" else sim(*args, "--policy", policy)
        assert out.returncode == 0, out.stderr
        assert last_json(out)[0]["policy"] == policy
        events = [json.loads(line) for line in (tmp_path / policy / "events.jsonl").read_text().splitlines()]
        assert {e["policy"] for e in events} == {policy}
        runs[policy] = [(e["seed"], e["t"], e["event"], e["pod"], e["node"], e["gpus"], e["milli"]) for e in events]
    assert len(runs["profile"]) > 900 and runs["profile"] == runs["FGDLearn"]
    assert runs["profile"] != runs["FGD"]  # the comparison can tell policies apart


def test_fgdlearn_memo_budget_keeps_decisions(trace_slice, tmp_path):
    """FGDLearn's memo drops the rows of the requests seen longest ago past memoEntries: a
    budget of one key (every new request shape drops a row once eight are kept) decides as the
    default budget. The config places with FGDLearn alone, as --policy FGDLearn does."""
    nodes, pods = trace_slice
    config = tmp_path / "learn.json"
    config.write_text(json.dumps({"kind": "KubeSchedulerConfiguration", "profiles": [{
        "plugins": {"preScore": {"enabled": [{"name": "FGDLearn"}], "disabled": [{"name": "*"}]},
                    "score": {"enabled": [{"name": "FGDLearn"}], "disabled": [{"name": "*"}]},
                    "reserve": {"enabled": [{"name": "FGDLearn"}, {"name": "GpuShare"}],
                                "disabled": [{"name": "*"}]}},
        "pluginConfig": [{"name": "FGDLearn", "args": {"memoEntries": 1}}]}]}))
    runs = {}
    for name, extra in (("budget1", ["--config", str(config)]), ("FGDLearn", ["--policy", "FGDLearn"])):
        out = sim("--nodes", nodes, "--pods", pods, "--seeds", "42-43", "--out", str(tmp_path / name), "-q", *extra)
        assert out.returncode == 0, out.stderr
        events = [json.loads(line) for line in (tmp_path / name / "events.jsonl").read_text().splitlines()]
        runs[name] = [(e["seed"], e["event"], e["pod"], e["node"], e["gpus"]) for e in events]
    assert len(runs["budget1"]) > 900 and runs["budget1"] == runs["FGDLearn"]
    bad = tmp_path / "bad.json"
    bad.write_text(config.read_text().replace('"memoEntries": 1', '"memoEntries": -1'))
    out = sim("--nodes", nodes, "--pods", pods, "--config", str(bad), "-q")
    assert out.returncode != 0 and "memoEntries" in out.stderr, out.stderr


def test_manifest_replay():
    out = sim("--cluster", os.path.join(DATA, "cluster.yaml"), "--workload", os.path.join(DATA, "workload.yaml"),
              "--experiment", "replay", "--policy", "BestFit", "--json", "-q")
    assert out.returncode == 0, out.stderr
    r = last_json(out)[0]
    assert r["nodes"] == 2 and r["gpus"] == 3
    assert r["pods_arrived"] == 6 and r["pods_scheduled"] == 5
    assert r["delay_p50"] == 0 and r["delay_p90"] == 30


def test_manifest_fgd(tmp_path):
    out = sim("--cluster", os.path.join(DATA, "cluster.yaml"), "--workload", os.path.join(DATA, "workload.yaml"),
              "--out", str(tmp_path), "--json", "-q")
    assert out.returncode == 0, out.stderr
    r = last_json(out)[0]
    assert r["nodes"] == 2 and r["gpus"] == 3
    # The experiment resizes the workload to 1.3x the 3 GPUs (shrinking it here).
    assert 1 <= r["pods_arrived"] and r["pods_scheduled"] <= r["pods_arrived"]
    assert (tmp_path / "report.html").exists()


def test_seed_range_reports_std(trace_slice):
    nodes, pods = trace_slice
    out = sim("--nodes", nodes, "--pods", pods, "--policy", "Random,BestFit", "--seeds", "42-44", "--json", "-q")
    assert out.returncode == 0, out.stderr
    res = last_json(out)
    assert [r["policy"] for r in res] == ["Random", "BestFit"]
    for r in res:
        assert r["seeds"] == [42, 43, 44]
        for k in NUMERIC:
            assert k in r and k + "_std" in r, k
            assert r[k + "_std"] >= 0
        assert r["nodes_std"] == 0
    # Random placement depends on the seed.
    assert res[0]["alloc_pct_at_100_std"] > 0 or res[0]["pods_scheduled_std"] > 0


@pytest.mark.parametrize("args,flag,value", [
    (["--experiment", "fgdx"], "--experiment", "fgdx"),
    (["--policy", "NoSuchPolicy"], "--policy", "NoSuchPolicy"),
    (["--policy", "FGD,,"], "--policy", None),
    (["--seed", "abc"], "--seed", "abc"),
    (["--seed", "-4"], "--seed", "-4"),
    (["--seeds", "51-42"], "--seeds", "51-42"),
    (["--seeds", "4x"], "--seeds", "4x"),
    (["--tune", "-1"], "--tune", "-1"),
    (["--tune=abc"], "--tune", "abc"),
    (["--trace-dir", "/nonexistent/dir"], "--trace-dir", "/nonexistent/dir"),
    (["--variant", "nosuchvariant"], "--variant", "nosuchvariant"),
    (["--nodes", "/nonexistent.csv", "--pods", "/nonexistent2.csv"], "--nodes", "/nonexistent.csv"),
    (["--nodes", "x.csv"], "--pods", None),
    (["--cluster", "a.yaml", "--nodes", "b.csv", "--pods", "c.csv"], "one input", None),
    (["--bogus"], "--bogus", None),
    (["--seed"], "--seed", "missing value"),
    (["stray"], "stray", None),
    (["--gang-queue", "lifo"], "--gang-queue",
     "want scheduler, fifo, volcano, reserve, reserve-exact, reserve-pinned, volcano-reserve, backfill or auto"),
    (["--gang-queue", "fifo"], "--gang-queue", "a mode of --experiment replay"),
    (["--gang-slack", "0"], "--gang-slack", "want whole seconds from 1 to 31536000"),
    (["--gang-slack", "5m"], "--gang-slack", "5m"),
    (["--gang-slack", "600"], "--gang-slack", "for --experiment replay"),
])
def test_bad_flags_exit_2(args, flag, value):
    out = sim(*args)
    assert out.returncode == 2, (out.returncode, out.stderr)
    assert flag in out.stderr, out.stderr
    if value:
        assert value in out.stderr, out.stderr
    assert out.stdout == ""


def test_help():
    out = sim("--help")
    assert out.returncode == 0
    assert "--experiment" in out.stdout and "--seeds" in out.stdout


def test_unreadable_out_dir_fails_with_1(trace_slice, tmp_path):
    nodes, pods = trace_slice
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = sim("--nodes", nodes, "--pods", pods, "--out", str(blocker / "sub"), "-q")
    assert out.returncode == 1
    assert "--out" in out.stderr
