#!/bin/sh
# bound.sh - the FGD experiment's upper bound (src/sim/bound.c) next to the
# policies on every openb variant, as the markdown table of bench/RESULTS.md
# "Upper bound", then what the bound costs: CPU seconds of `sim --bound` minus
# `sim` on one seed, alternated REPS times (child CPU time, steadier than wall
# clock on a shared box). Last, for gpuspec20: the GPU milli asked at 100 %
# arrived by the pods limited to each set of GPU models (the pod list's share
# scaled to the cluster's capacity) against those models' GPUs.
#
#   bench/bound.sh [BIN] [POLICIES] [SEEDS] [REPS]
#   defaults: build/gpusched FGD,FGDPack 42-51 5; GS_TRACE_DIR as for `sim`.
set -eu
BIN=${1:-build/gpusched}
POLICIES=${2:-FGD,FGDPack}
SEEDS=${3:-42-51}
REPS=${4:-5}
/usr/bin/python3 - "$BIN" "$POLICIES" "$SEEDS" "$REPS" <<'PY'
import json, resource, subprocess, sys
bin_, policies, seeds, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
variants = ["default", "gpushare40", "gpuspec20", "multigpu30", "cpu100"]
names = policies.split(",")
print("| variant | " + " | ".join(names) + " | best | bound (std) | best - bound |")
print("|---|" + "---|" * (len(names) + 3))
for v in variants:
    out = subprocess.run([bin_, "sim", "--variant", v, "--policy", policies, "--seeds", seeds, "--bound",
                          "--json", "-q"], capture_output=True, text=True, check=True)
    rows = json.loads(out.stdout.splitlines()[-1])
    alloc = {r["policy"]: r["alloc_pct_at_100"] for r in rows}
    bound, bstd = rows[0]["bound_pct"], rows[0]["bound_pct_std"]
    assert all(r["bound_pct"] == bound for r in rows), "one bound per seed set"
    best = max(alloc, key=alloc.get)
    cells = " | ".join("%.2f" % alloc[n] for n in names)
    print("| %s | %s | %s | %.2f (%.2f) | %+.2f |" % (v, cells, best, bound, bstd, alloc[best] - bound))

def cpu(args):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(args, capture_output=True, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)

base = [bin_, "sim", "--policy", "Random", "--seed", "42", "--json", "-q"]
plain, bound = [], []
for _ in range(reps):
    plain.append(cpu(base))
    bound.append(cpu(base + ["--bound"]))
plain.sort(), bound.sort()
print("\nCPU s per run, default trace, Random, seed 42, median of %d: sim %.3f, sim --bound %.3f, "
      "bound %.3f" % (reps, plain[reps // 2], bound[reps // 2], bound[reps // 2] - plain[reps // 2]))

import collections, csv, os
tdir = os.environ.get("GS_TRACE_DIR", "../shared/traces/openb")
cap = collections.Counter()
for r in csv.DictReader(open(os.path.join(tdir, "openb_node_list_gpu_node.csv"))):
    cap[r["model"]] += int(r["gpu"])
dem, total = collections.Counter(), 0
for r in csv.DictReader(open(os.path.join(tdir, "openb_pod_list_gpuspec20.csv"))):
    k = int(r["num_gpu"])
    m = min(int(r["gpu_milli"]), 1000) if k else 0
    total += k * m
    if r["gpu_spec"] and k:
        dem["|".join(sorted(set(r["gpu_spec"].split("|"))))] += k * m
scale = sum(cap.values()) * 1000 / total
print("\ngpuspec20, GPUs asked at 100 % arrived by pods limited to a model set / GPUs of that set:")
for s, d in sorted(dem.items(), key=lambda x: -x[1]):
    print("  %-40s %5.0f / %d" % (s, d * scale / 1000, sum(cap[x] for x in s.split("|"))))
PY
