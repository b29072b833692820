#!/usr/bin/python3
"""Issue 19 item 3's figures for one fair run of the tenants experiment.

    bench/tenants_target.py BIN [--seed N] [--samples] -- [extra sim flags...]

Runs the command at the top of bench/RESULTS.md's "Multi-tenant queues"
section with --mode fair, the seed and the extra flags, and prints one
markdown row: Jain mean and min, used/entitled of each tenant summed over the
contended samples (from tenants.csv: the samples where the tenants' demand
exceeds the GPUs), small and large waits p50/p90/p99, evictions, idle, then a
line with the needless evictions and the victim searches (and one with the
consolidation counters when something moved). --samples also prints each contended sample's GPUs
used / entitled per tenant. The target (issue 19 item 3): every ratio >= 0.95,
Jain mean >= 0.99, evictions <= 449, small p90 <= 1132 s (FIFO's).
"""
import csv
import json
import os
import subprocess
import sys
import tempfile


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    binary, rest = args[0], args[1:]
    seed, samples, extra = "42", False, []
    while rest:
        a = rest.pop(0)
        if a == "--":
            extra = rest
            break
        if a == "--seed":
            seed = rest.pop(0)
        elif a == "--samples":
            samples = True
        else:
            sys.exit("unknown option %s" % a)
    trace = os.environ.get("GS_TRACE_DIR", "../shared/traces/openb")
    with tempfile.TemporaryDirectory() as out:
        cmd = [binary, "sim", "--experiment", "tenants", "--trace-dir", trace, "--speedup", "2000",
               "--node-fraction", "0.25", "--weights", "1,2,1", "--seed", seed, "--mode", "fair",
               "--out", out, "--json"] + extra
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            sys.exit("%s: exit %d\n%s" % (" ".join(cmd), p.returncode, p.stderr))
        lines = p.stdout.strip().splitlines()
        res = json.loads(lines[-1])[0]
        rows = list(csv.DictReader(open(os.path.join(out, "tenants.csv"))))
    by_t = {}
    for r in rows:
        by_t.setdefault(float(r["t"]), {})[r["tenant"]] = r
    tenants = sorted({r["tenant"] for r in rows})
    used = {k: 0.0 for k in tenants}
    ent = {k: 0.0 for k in tenants}
    contended = []
    for t in sorted(by_t):
        s = by_t[t]
        if float(next(iter(s.values()))["jain"]) < 0:
            continue
        contended.append(t)
        for k in tenants:
            used[k] += float(s[k]["used_gpus"])
            ent[k] += float(s[k]["entitled_gpus"])
    ratio = " / ".join("%.2f" % (used[k] / ent[k] if ent[k] else 0) for k in tenants)
    ws, wl = res["wait_small"], res["wait_large"]
    print("| %s | %.3f | %.3f | %s | %.0f / %.0f / %.0f | %.0f / %.0f / %.0f | %d | %.2f |" %
          (" ".join(extra) or "(defaults)", res["jain_mean"], res["jain_min"], ratio, ws[0], ws[1], ws[2],
           wl[0], wl[1], wl[2], res["preemptions"], res["idle_share"]))
    print("  evicted GPUs %.1f; needless evictions %d (of %d claims not bound within their hold); "
          "victim searches %d, won %d" % (res.get("evicted_gpus", 0), res.get("evictions_unplaced", 0),
                                          res.get("claims_unplaced", 0), res.get("victim_searches", 0),
                                          res.get("victim_searches_won", 0)))
    if res.get("consolidations", 0) or res.get("consolidation_moves", 0):
        print("  consolidations %d, moves %d (of the gang's own queue %d, %d of them back in line)" %
              (res["consolidations"], res["consolidation_moves"], res.get("consolidation_own", 0),
               res.get("consolidation_own_waiting", 0)))
    if samples:
        print("| t (s) | " + " | ".join(tenants) + " | jain |")
        for t in contended:
            s = by_t[t]
            print("| %.0f | %s | %.3f |" % (t, " | ".join("%.0f/%.0f" % (float(s[k]["used_gpus"]),
                                                                         float(s[k]["entitled_gpus"]))
                                                        for k in tenants), float(s[tenants[0]]["jain"])))


if __name__ == "__main__":
    main()
