"""`gpusched sim --experiment fgd --bound`: the upper bound of src/sim/bound.c
next to every policy (bound_pct after alloc_pct_at_100), one value per seed
set, never below a policy's result, and outputs without --bound unchanged.

GPUSCHED_BIN names the binary (default build/gpusched), GS_TRACE_DIR the
openb trace directory (default ../shared/traces/openb)."""
import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("GPUSCHED_BIN", os.path.join(ROOT, "build", "gpusched"))
TRACE = os.environ.get("GS_TRACE_DIR", os.path.join(ROOT, "..", "shared", "traces", "openb"))


def sim(*args):
    env = dict(os.environ, GS_TRACE_DIR=TRACE)
    return subprocess.run([BIN, "sim", *args], capture_output=True, text=True, timeout=600, env=env)


@pytest.fixture(scope="module")
def trace_slice(tmp_path_factory):
    """The first 120 GPU nodes and 900 pods of the default trace."""
    if not os.path.isfile(os.path.join(TRACE, "openb_pod_list_default.csv")):
        pytest.fail("openb trace not found in " + TRACE + " (GS_TRACE_DIR)")
    d = tmp_path_factory.mktemp("slice")
    for src, dst, n in (("openb_node_list_gpu_node.csv", "nodes.csv", 120),
                        ("openb_pod_list_default.csv", "pods.csv", 900)):
        with open(os.path.join(TRACE, src)) as f:
            (d / dst).write_text("".join(f.readlines()[: n + 1]))
    return ["--nodes", str(d / "nodes.csv"), "--pods", str(d / "pods.csv")]


def test_bound_next_to_every_policy(trace_slice):
    out = sim(*trace_slice, "--policy", "BestFit,FGD,FGDPack", "--seeds", "42-44", "--bound", "--json", "-q")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout.splitlines()[-1])
    assert len(rows) == 3
    for r in rows:
        keys = list(r)
        assert keys[keys.index("alloc_pct_at_100") + 1] == "bound_pct"
        assert "bound_pct_std" in r
        assert r["alloc_pct_at_100"] <= r["bound_pct"] <= 100.0
    assert len({r["bound_pct"] for r in rows}) == 1  # depends on trace and seeds only


def test_without_bound_unchanged(trace_slice, tmp_path):
    plain = sim(*trace_slice, "--policy", "FGD", "--seed", "42", "--json", "-q", "--out", str(tmp_path / "a"))
    bound = sim(*trace_slice, "--policy", "FGD", "--seed", "42", "--json", "-q", "--bound")
    assert plain.returncode == 0 and bound.returncode == 0, plain.stderr + bound.stderr
    a = json.loads(plain.stdout.splitlines()[-1])[0]
    b = json.loads(bound.stdout.splitlines()[-1])[0]
    assert "bound_pct" not in a
    assert b.pop("bound_pct") >= a["alloc_pct_at_100"]
    a.pop("wall_seconds"), b.pop("wall_seconds")
    assert a == b  # same decisions
    summary = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert "bound_pct" not in summary["policies"][0]["mean"]


def test_table_has_bound_column(trace_slice):
    out = sim(*trace_slice, "--policy", "FGD", "--bound", "-q")
    assert out.returncode == 0, out.stderr
    head, row = out.stdout.splitlines()[:2]
    cols = head.split()
    assert cols[cols.index("alloc%@100") + 1] == "bound%"
    vals = row.split()
    assert float(vals[cols.index("bound%")]) >= float(vals[cols.index("alloc%@100")])


def test_bound_only_for_fgd(trace_slice):
    out = sim(*trace_slice, "--experiment", "replay", "--bound")
    assert out.returncode == 2
    assert "--bound: the upper bound is for --experiment fgd only" in out.stderr
