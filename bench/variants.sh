#!/bin/bash
# variants.sh - every placement policy on every openb trace variant, one table.
#
# Runs the FGD experiment (src/sim/fgd_experiment.c) on the default,
# gpushare40, gpuspec20, multigpu30 and cpu100 pod lists with the same seeds
# and prints a Markdown table: per policy and variant the mean alloc % at
# 100% arrived (in brackets: minus FGD's), the mean wall time per pod (setup
# included, so an upper bound on the decision time per pod), and a last row
# "bound" with bound_pct (src/sim/bound.c: no placer can pass it; it depends
# only on the trace and the seeds). The numbers are in bench/RESULTS.md,
# section "Every policy on every openb variant".
#
# usage: bench/variants.sh [GPUSCHED] [TRACE_DIR]
#   POLICIES (default: every FGD-experiment policy), SEEDS (default 42-51)
set -euo pipefail
BIN=${1:-build/gpusched}
TRACE=${2:-../shared/traces/openb}
POLICIES=${POLICIES:-Random,DotProd,GpuClustering,GpuPacking,BestFit,FGD,FGDPack,FGDPlus,FGDLook,FGDLearn}
SEEDS=${SEEDS:-42-51}
VARIANTS="default gpushare40 gpuspec20 multigpu30 cpu100"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for v in $VARIANTS; do
    "$BIN" sim --experiment fgd --trace-dir "$TRACE" --variant "$v" --policy "$POLICIES" --seeds "$SEEDS" --bound \
        --json 2>/dev/null | tail -1 >"$tmp/$v.json"
done
/usr/bin/python3 - "$tmp" $VARIANTS <<'PY'
import json, sys
d, variants = sys.argv[1], sys.argv[2:]
rows = {v: {p["policy"]: p for p in json.load(open(f"{d}/{v}.json"))} for v in variants}
policies = list(rows[variants[0]])
print("| policy | " + " | ".join(variants) + " | us / pod (mean over variants) |")
print("|---|" + "---|" * (len(variants) + 1))
for p in policies:
    cells, us = [], []
    for v in variants:
        r = rows[v][p]
        f = rows[v].get("FGD")
        diff = f" ({r['alloc_pct_at_100'] - f['alloc_pct_at_100']:+.2f})" if f and p != "FGD" else ""
        cells.append(f"{r['alloc_pct_at_100']:.2f}{diff}")
        us.append(1e6 * r["wall_seconds"] / r["pods_arrived"])
    print(f"| {p} | " + " | ".join(cells) + f" | {sum(us) / len(us):.0f} |")
first = {v: next(iter(rows[v].values())) for v in variants}
print("| bound | " + " | ".join(f"{first[v]['bound_pct']:.2f}" for v in variants) + " | - |")
PY
