#!/bin/bash
# policy_cpu.sh - decision CPU time per pod of placement policies in the FGD
# experiment, side by side on every openb variant.
#
# The run's wall time (bench/variants.sh) moves with the load of the machine;
# CPU time much less. For each variant and policy this runs `sim --experiment
# fgd` twice: the experiment itself, and with `--tune 0.001`, which tries only
# the first handful of pods and so costs the run's setup alone (trace,
# cluster, target workload, the policy's start). Runs are interleaved (every
# policy's pair, then the next repetition), REPS times, and per policy it
# prints the median CPU seconds of the experiment (user + system, from the
# child's rusage), the decision CPU per pod (experiment median minus setup
# median, divided by the pods) and its ratio to FGD's. Used for the
# decision-time target of FGD-style policies (within 2x FGD's); numbers in
# bench/RESULTS.md ("Learned fragmentation"). `profile` is the server's
# placement (sim without --policy).
#
# usage: bench/policy_cpu.sh [GPUSCHED] [TRACE_DIR]
#   POLICIES (default FGD,FGDLearn), SEED (default 42), REPS (default 3),
#   VARIANTS (default: the five openb pod lists)
set -euo pipefail
BIN=${1:-build/gpusched}
TRACE=${2:-../shared/traces/openb}
POLICIES=${POLICIES:-FGD,FGDLearn}
SEED=${SEED:-42}
REPS=${REPS:-3}
VARIANTS=${VARIANTS:-default gpushare40 gpuspec20 multigpu30 cpu100}
/usr/bin/python3 - "$BIN" "$TRACE" "$POLICIES" "$SEED" "$REPS" "$VARIANTS" <<'PY'
import json, os, statistics, subprocess, sys
binary, trace, policies, seed, reps = sys.argv[1], sys.argv[2], sys.argv[3].split(","), sys.argv[4], int(sys.argv[5])
variants = sys.argv[6].split()
order = (["FGD"] if "FGD" not in policies else []) + policies  # FGD is the reference

def run(variant, policy, tune):
    cmd = [binary, "sim", "--experiment", "fgd", "--trace-dir", trace, "--variant", variant,
           "--policy", policy, "--seed", seed, "--tune", tune, "--json", "-q"]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    if status != 0:
        sys.exit(f"policy_cpu: {' '.join(cmd)} failed with status {status}")
    res = json.loads(out.decode().strip().splitlines()[-1])[0]
    return ru.ru_utime + ru.ru_stime, res["pods_arrived"]

others = [p for p in order if p != "FGD"]
print("| variant | " + " | ".join(f"{p} CPU s (setup s, us / pod decision)" for p in order) + " | " +
      " | ".join(f"{p} / FGD" for p in others) + " |")
print("|---|" + "---|" * (len(order) + len(others)))
for v in variants:
    full = {p: [] for p in order}
    setup = {p: [] for p in order}
    pods = 0
    for _ in range(reps):
        for p in order:
            t, pods = run(v, p, "1.3")
            full[p].append(t)
            setup[p].append(run(v, p, "0.001")[0])
    med = {p: statistics.median(full[p]) for p in order}
    base = {p: statistics.median(setup[p]) for p in order}
    per = {p: 1e6 * (med[p] - base[p]) / pods for p in order}
    cells = [f"{med[p]:.2f} ({base[p]:.2f}, {per[p]:.0f})" for p in order]
    ratios = [f"{per[p] / per['FGD']:.2f}x" if per["FGD"] > 0 else "-" for p in others]
    print(f"| {v} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |", flush=True)
PY
