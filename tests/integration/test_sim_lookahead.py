"""`gpusched sim --experiment fgd --queue-window K`: the pods queued behind
the current one that a policy may read (gs_handle.queued). FGD, which does
not read the queue, decides the same with any window; FGDLook
(src/sched/plugins/fgd_look.c) reads it; a bad window is refused with a
message naming the flag, the value and why.

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


def run(trace_slice, policy, window):
    out = sim(*trace_slice, "--policy", policy, "--seeds", "42-44", "--queue-window", str(window), "--json", "-q")
    assert out.returncode == 0, out.stderr
    (row,) = json.loads(out.stdout.splitlines()[-1])
    assert row["policy"] == policy
    return row


def test_window_changes_nothing_for_fgd(trace_slice):
    a, b = run(trace_slice, "FGD", 0), run(trace_slice, "FGD", 8)
    assert a["alloc_pct_at_100"] == b["alloc_pct_at_100"]
    assert a["pods_scheduled"] == b["pods_scheduled"]


def test_fgd_look_reads_the_window(trace_slice):
    rows = [run(trace_slice, "FGDLook", w) for w in (0, 8, 8)]
    assert rows[1]["alloc_pct_at_100"] == rows[2]["alloc_pct_at_100"]  # same seeds, same decisions
    assert 0 < rows[1]["alloc_pct_at_100"] <= 100
    assert rows[0]["pods_scheduled"] != rows[1]["pods_scheduled"] or \
        rows[0]["alloc_pct_at_100"] != rows[1]["alloc_pct_at_100"]


@pytest.mark.parametrize("value", ["-1", "x", "1001", ""])
def test_bad_window(trace_slice, value):
    out = sim(*trace_slice, "--policy", "FGDLook", "--queue-window", value)
    assert out.returncode != 0
    assert f'--queue-window: invalid value "{value}": want an integer 0..1000' in out.stderr, out.stderr
