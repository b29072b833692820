"""End-to-end: `gpusched sim --experiment tenants` on the openb slice, made
to contend (arrivals 5000x faster, 30% of the nodes): both modes finish
every workload, admission reports preemptions, the outputs are written, the
eviction rules ration evictions, node-wise victims are used (and can be
switched off), and the per-queue status can be written."""
import functools
import json
import os

SLICE = os.path.join(os.path.dirname(__file__), "..", "data", "openb_slice")


def tenants(run, *extra):
    return run("sim", "--experiment", "tenants", "--nodes", os.path.join(SLICE, "nodes.csv"),
               "--pods", os.path.join(SLICE, "pods.csv"), "--speedup", "5000", "--node-fraction", "0.3", *extra)


def fair_json(run, *extra):
    """The fair run's JSON result with the extra flags."""
    r = tenants(run, "--mode", "fair", "--json", *extra)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])[0]


def decisions(res):
    """A run's result without its wall-clock time: what must repeat exactly."""
    return {k: v for k, v in res.items() if k != "wall_seconds"}


# The share gate with drains and narrow pins, reclaim at once: the base of the consolidation flags' runs.
GATED = ("--share-gate", "on", "--drain", "on", "--pin", "above", "--reclaim-wait", "0")


def test_both_modes_report_fairness_and_waits(run):
    r = tenants(run, "--json")
    assert r.returncode == 0, r.stderr
    res = {x["mode"]: x for x in json.loads(r.stdout.strip().splitlines()[-1])}
    assert set(res) == {"fair", "fifo"}
    for x in res.values():
        assert x["finished"] == x["workloads"] > 0
        assert x["gangs"] > 0
        assert 0 < x["jain_min"] <= x["jain_mean"] <= 1
        assert len(x["share"]) == len(x["entitled"]) == 3
        assert x["wait_small"][0] <= x["wait_small"][1] <= x["wait_small"][2]
    assert res["fifo"]["preemptions"] == 0
    assert res["fair"]["preemptions"] > 0
    assert res["fair"]["max_workload_preemptions"] <= 1  # the default cap: once per hour
    assert 0 <= res["fair"]["idle_share"] < 1


def test_eviction_rules_ration_evictions(run):
    fair = functools.partial(fair_json, run)
    rationed = fair()
    free = fair("--reclaim-wait", "0", "--min-runtime", "0", "--max-preemptions", "0", "--reclaim-from", "nominal")
    assert free["preemptions"] > rationed["preemptions"]
    assert free["reclaims_deferred"] == 0 and rationed["reclaims_deferred"] > 0
    assert rationed["spared_min_runtime"] > 0 and free["spared_min_runtime"] == 0


def test_nodewise_and_global_victims(run):
    fair = functools.partial(fair_json, run)
    nodewise, old = fair(), fair("--victims", "global")
    for x in (nodewise, old):
        assert x["finished"] == x["workloads"] > 0
        assert x["victim_searches_won"] <= x["victim_searches"]
    assert old["nodewise_won"] == old["nodewise_refused"] == 0  # the planner is not used
    assert nodewise["nodewise_won"] + nodewise["nodewise_refused"] > 0
    assert nodewise["nodewise_won"] <= nodewise["victim_searches_won"]
    assert tenants(run, "--victims", "random").returncode == 2


def test_queues_json(run, tmp_path):
    path = tmp_path / "queues.json"
    r = tenants(run, "--mode", "fair", "--queues-json", str(path), "--queues-at", "600")
    assert r.returncode == 0, r.stderr
    doc = json.loads(path.read_text())
    assert doc["time"] >= 600
    leaves = {q["name"]: q for q in doc["queues"] if "pending" in q}
    assert set(leaves) == {"tenant-a", "tenant-b", "tenant-c"}
    for q in leaves.values():
        for k in ("nominal", "borrowed", "lent", "usage", "fairShare", "decayedGpuHours", "weightedShare",
                  "pendingWorkloads", "admittedWorkloads", "preemptions", "evictionsCaused"):
            assert k in q, k
        assert [p["position"] for p in q["pending"]] == list(range(1, len(q["pending"]) + 1))
        for p in q["pending"]:
            assert "estimatedStart" in p and "reason" in p
    assert doc["stats"]["evictions"] >= 0 and "sparedMinRuntime" in doc["stats"]


def test_weights_and_outputs(run, tmp_path):
    out = tmp_path / "o"
    r = tenants(run, "--weights", "1,1,1,1", "--mode", "fair", "--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "fair" in r.stdout and "fifo" not in r.stdout
    rows = (out / "tenants.csv").read_text().splitlines()
    assert rows[0] == "t,mode,tenant,used_gpus,entitled_gpus,demand_gpus,jain"
    assert {row.split(",")[2] for row in rows[1:]} == {"tenant-a", "tenant-b", "tenant-c", "tenant-d"}
    assert "<svg" in (out / "tenants.html").read_text()


def test_bad_flags_are_usage_errors(run):
    assert tenants(run, "--weights", "1,-2").returncode == 2
    assert tenants(run, "--mode", "unfair").returncode == 2
    assert tenants(run, "--bogus", "1").returncode == 2
    assert tenants(run, "--reclaim-from", "anyone").returncode == 2


def test_share_gate_and_under_share_reservation(run):
    fair = functools.partial(fair_json, run)
    plain = fair()
    gated = fair("--share-gate", "on", "--reserve-for", "under-share")
    assert gated["finished"] == gated["workloads"] == plain["workloads"]
    assert 0 < gated["jain_min"] <= gated["jain_mean"] <= 1
    off = tenants(run, "--mode", "fair", "--share-gate", "on")
    assert off.returncode == 0, off.stderr
    bad = tenants(run, "--share-gate", "yes")
    assert bad.returncode == 2
    assert '--share-gate' in bad.stderr and '"yes"' in bad.stderr and "want on or off" in bad.stderr
    bad = tenants(run, "--reserve-for", "youngest")
    assert bad.returncode == 2
    assert "want oldest or under-share" in bad.stderr


def test_pins_drains_and_impatience(run):
    fair = functools.partial(fair_json, run)
    plain = fair()
    assert plain["drains"] == 0 and plain["pins_expired"] == 0
    on = fair("--share-gate", "on", "--pin", "on", "--drain", "on", "--impatient-below", "0.5",
              "--reserve-horizon", "0")
    assert on["finished"] == on["workloads"] == plain["workloads"]
    assert 0 < on["jain_min"] <= on["jain_mean"] <= 1
    assert on["drains"] > 0  # gangs of a queue below its share got nodes kept for them
    assert on["reclaims_deferred"] < plain["reclaims_deferred"]  # fewer claims wait out the patience
    for flag, value, why in (("--pin", "yes", "want on, large, above or off"), ("--drain", "1", "want on, strict or off"),
                             ("--impatient-below", "1.5", "a weighted share, at most 1"),
                             ("--impatient-below", "x", "want a number in range")):
        bad = tenants(run, flag, value)
        assert bad.returncode == 2
        assert flag in bad.stderr and '"%s"' % value in bad.stderr and why in bad.stderr, bad.stderr


def test_victim_cost_narrower_pins_and_eviction_counters(run):
    fair = functools.partial(fair_json, run)
    plain = fair("--reclaim-wait", "0")
    assert plain["preemptions"] > 0
    assert plain["evicted_gpus"] > 0
    assert 0 <= plain["evictions_unplaced"] <= plain["preemptions"]
    assert plain["claims_unplaced"] <= plain["victim_searches_won"]
    for extra in (("--victim-cost", "count"), ("--victim-cost", "room"), ("--pin", "large"), ("--pin", "above"),
                  ("--drain", "strict")):
        r = fair("--reclaim-wait", "0", "--share-gate", "on", *extra)
        assert r["finished"] == r["workloads"] == plain["workloads"]
        assert 0 < r["jain_min"] <= r["jain_mean"] <= 1
    same = fair("--reclaim-wait", "0", "--victim-cost", "work")
    assert decisions(same) == decisions(plain)  # work is the default
    text = tenants(run, "--mode", "fair", "--reclaim-wait", "0")
    assert text.returncode == 0, text.stderr
    assert "needless evictions:" in text.stdout and "evicted GPUs:" in text.stdout
    bad = tenants(run, "--victim-cost", "cheap")
    assert bad.returncode == 2
    assert "--victim-cost" in bad.stderr and '"cheap"' in bad.stderr and "want work, count or room" in bad.stderr


def test_consolidation_flag(run):
    fair = functools.partial(fair_json, run)
    plain = fair(*GATED)
    assert plain["consolidations"] == plain["consolidation_moves"] == 0  # off by default
    on = fair(*GATED, "--consolidate", "on")
    assert on["finished"] == on["workloads"] == plain["workloads"]
    assert 0 < on["jain_min"] <= on["jain_mean"] <= 1
    assert on["consolidations"] > 0  # a starved gang got a node made whole on the slice
    assert on["consolidation_moves"] >= on["consolidations"]  # each consolidation moved something
    assert on["preemptions"] >= on["consolidation_moves"]  # moves are counted as evictions
    same = fair(*GATED, "--consolidate", "off")
    assert decisions(same) == decisions(plain)
    for value in ("yes", "0", "9", "2x", ""):
        bad = tenants(run, "--consolidate", value)
        assert bad.returncode == 2
        assert "--consolidate" in bad.stderr and '"%s"' % value in bad.stderr, bad.stderr
        assert "want on, off or a number of moves per gang pod from 1 to 8" in bad.stderr, bad.stderr


def test_own_moves_flag(run):
    fair = functools.partial(fair_json, run)
    plain = fair(*GATED)
    assert plain["consolidation_own"] == plain["consolidation_own_waiting"] == 0  # off by default
    same = fair(*GATED, "--consolidate-own", "off")
    assert decisions(same) == decisions(plain)
    own = fair(*GATED, "--consolidate-own", "on")
    assert own["finished"] == own["workloads"] == plain["workloads"]
    assert own["consolidation_own"] == own["consolidation_moves"]  # alone: only the gang's own queue moves
    assert own["consolidation_own_waiting"] <= own["consolidation_own"]
    assert own["preemptions"] >= own["consolidation_moves"]  # moves are counted as evictions
    both = fair(*GATED, "--consolidate", "on", "--consolidate-own", "on")
    assert both["consolidation_own"] <= both["consolidation_moves"]
    for value in ("yes", "0", "9", ""):
        bad = tenants(run, "--consolidate-own", value)
        assert bad.returncode == 2
        assert "--consolidate-own" in bad.stderr and '"%s"' % value in bad.stderr, bad.stderr


def test_history_weight_flag(run):
    def fair(*extra):
        return decisions(fair_json(run, *extra))
    plain = fair()
    assert fair("--history-weight", "0.5") == plain  # the default
    shares = fair("--history-weight", "0")
    assert shares["finished"] == shares["workloads"] == plain["workloads"]
    for value in ("-0.1", "1.5", "x", ""):
        bad = tenants(run, "--history-weight", value)
        assert bad.returncode == 2
        assert "--history-weight" in bad.stderr and "want a number from 0 to 1" in bad.stderr, bad.stderr
