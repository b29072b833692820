#!/bin/bash
# policy_cpu.sh - decision CPU time per pod of placement policies in the FGD
# experiment, side by side on every openb variant.
#
# The run's wall time (bench/variants.sh) moves with the load of the machine;
# CPU time much less. For each variant this runs `sim --experiment fgd` with
# one policy at a time, REPS times each in turn (Random first, whose decisions
# cost next to nothing, so its CPU time is the setup: trace, cluster, workload),
# and prints per policy the median CPU seconds (user + system, from the
# child's rusage), the decision CPU per pod (median minus Random's median,
# divided by the pods) and its ratio to FGD's. Used for the decision-time
# target of FGD-style policies (within 2x FGD's); numbers in bench/RESULTS.md
# ("Learned fragmentation").
#
# usage: bench/policy_cpu.sh [GPUSCHED] [TRACE_DIR]
#   POLICIES (default FGD,FGDLearn), SEED (default 42), REPS (default 3)
set -euo pipefail
BIN=${1:-build/gpusched}
TRACE=${2:-../shared/traces/openb}
POLICIES=${POLICIES:-FGD,FGDLearn}
SEED=${SEED:-42}
REPS=${REPS:-3}
/usr/bin/python3 - "$BIN" "$TRACE" "$POLICIES" "$SEED" "$REPS" <<'PY'
import json, os, resource, statistics, subprocess, sys
binary, trace, policies, seed, reps = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4], int(sys.argv[5])
variants = ["default", "gpushare40", "gpuspec20", "multigpu30", "cpu100"]
order = ["Random"] + [p for p in policies if p != "Random"]

def run(variant, policy):
    cmd = [binary, "sim", "--experiment", "fgd", "--trace-dir", trace, "--variant", variant,
           "--policy", policy, "--seed", seed, "--json", "-q"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"policy_cpu: {' '.join(cmd)} failed with status {status}")
    res = json.loads(out.decode().strip().splitlines()[-1])[0]
    return ru.ru_utime + ru.ru_stime, res["pods_arrived"]

print(f"| variant | " + " | ".join(f"{p} CPU s (us / pod decision)" for p in order) + " | " +
      " | ".join(f"{p} / FGD" for p in order if p not in ("Random", "FGD")) + " |")
print("|---|" + "---|" * (len(order) + len([p for p in order if p not in ("Random", "FGD")])))
for v in variants:
    cpu = {p: [] for p in order}
    pods = 0
    for _ in range(reps):
        for p in order:
            t, pods = run(v, p)
            cpu[p].append(t)
    med = {p: statistics.median(cpu[p]) for p in order}
    per = {p: 1e6 * (med[p] - med["Random"]) / pods for p in order}
    cells = [f"{med[p]:.2f} ({per[p]:.0f})" if p != "Random" else f"{med[p]:.2f}" for p in order]
    ratios = [f"{per[p] / per['FGD']:.2f}x" if per.get("FGD", 0) > 0 else "-" for p in order if p not in ("Random", "FGD")]
    print(f"| {v} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
PY
