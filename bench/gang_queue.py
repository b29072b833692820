#!/usr/bin/env python3
"""Gang queueing modes of the replay on the three gang-heavy workloads of
bench/RESULTS.md ("Gang queueing"): 64 nodes / 300 groups / seed 42 with the
gang/topology profile and with its no-preemption variant, and 48 nodes / 200
groups / seed 7 with preemption. Generates the workloads with
bench/gen_gang_workload.py, runs `gpusched sim --experiment replay
--gang-queue MODE` for each mode and prints one row per mode and workload:
gang delay p50/p99, GPU-hours idle while gangs wait, evictions, backfills and
partial gangs, as RESULTS.md's tables show them. Each run is one process;
the numbers are the JSON fields of that run (nothing is timed here).

usage: gang_queue.py GPUSCHED [--held-out] [MODE[:SLACK] ...]
--held-out: instead, three workloads no mode was tuned on (64/300 seeds 1
and 2, 48/200 seed 3, with preemption).
MODE is a --gang-queue mode, or "default" for none (the replay's default);
SLACK adds --gang-slack SLACK. Default: scheduler fifo volcano reserve
reserve-exact reserve-pinned backfill."""
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS = [  # (name, nodes, groups, seed, profile)
    ("64/300/42 preemption", 64, 300, 42, "examples/scheduler/gang-topology-scheduler.yaml"),
    ("64/300/42 no preemption", 64, 300, 42, "bench/gang-no-preemption.yaml"),
    ("48/200/7 preemption", 48, 200, 7, "examples/scheduler/gang-topology-scheduler.yaml"),
]
HELD_OUT = [
    ("64/300/1 preemption", 64, 300, 1, "examples/scheduler/gang-topology-scheduler.yaml"),
    ("64/300/2 preemption", 64, 300, 2, "examples/scheduler/gang-topology-scheduler.yaml"),
    ("48/200/3 preemption", 48, 200, 3, "examples/scheduler/gang-topology-scheduler.yaml"),
]
MODES = ["scheduler", "fifo", "volcano", "reserve", "reserve-exact", "reserve-pinned", "volcano-reserve", "backfill"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary = os.path.abspath(sys.argv[1])
    args = sys.argv[2:]
    workloads = WORKLOADS
    if args[:1] == ["--held-out"]:
        args, workloads = args[1:], HELD_OUT
    modes = args or MODES
    tmp = tempfile.mkdtemp(prefix="gs_gangq_")
    print("| workload | mode | gang delay p50 / p99 s | idle while gangs wait GPU-h (share) | preempted | backfilled | partial |")
    print("|---|---|---|---|---|---|---|")
    for name, nodes, groups, seed, profile in workloads:
        out = os.path.join(tmp, "%d_%d_%d" % (nodes, groups, seed))
        if not os.path.exists(os.path.join(out, "workload.yaml")):
            subprocess.run([sys.executable, os.path.join(HERE, "gen_gang_workload.py"), out, str(nodes), str(groups),
                            str(seed)], check=True)
        for m in modes:
            cmd = [binary, "sim", "--experiment", "replay", "--cluster", os.path.join(out, "nodes.yaml"),
                   "--workload", os.path.join(out, "workload.yaml"), "--config", os.path.join(ROOT, profile),
                   "--policy", "BestFit", "--json", "-q"]
            mode, _, slack = m.partition(":")
            if mode != "default":
                cmd += ["--gang-queue", mode]
            if slack:
                cmd += ["--gang-slack", slack]
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit("%s: exit %d: %s" % (" ".join(cmd), r.returncode, r.stderr.strip()))
            d = json.loads(r.stdout)[0]
            print("| %s | %s%s | %.0f / %.0f | %.1f of %.2f h (%.1f%%) | %d | %d | %d |" % (
                name, m, "" if mode != "default" else " (%s)" % d["gang_queue"], d["gang_delay_p50"], d["gang_delay_p99"], d["gang_idle_gpu_hours"], d["gang_wait_hours"],
                100 * d["gang_idle_frac"], d["pods_preempted"], d["gang_backfilled"], d["partial_gangs"]), flush=True)


if __name__ == "__main__":
    main()
