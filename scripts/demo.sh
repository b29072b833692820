#!/usr/bin/env bash
# The main job. Part 1: the whole stack running end to end - `gpusched up`
# with two mock 8-GPU nodes (two NVLink islands and two NUMA nodes each),
# the manifests of examples/demo/ applied (a 4-pod gang of 2 GPUs each, a
# quarter GPU, a single-NUMA job, two tenant queues with a job each), every
# pod run as a process that prints the GPUs it was given, the chosen GPUs,
# the pods' logs and the exporter's per-pod view, then a clean stop.
# Part 2: the FGD experiment on the openb trace in the simulator. If `up`
# cannot start, part 1 says why and the simulator still runs.
set -uo pipefail
BIN=${1:-build/gpusched}
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
TRACE_DIR=${GS_TRACE_DIR:-../shared/traces/openb}
PY=${PYTHON:-/usr/bin/python3}
MOCK=${GS_DEMO_MOCK:-2x8xH100-80GB,nvlink=islands:4,numa=2}
WORK=$(mktemp -d /tmp/gpusched-demo.XXXXXX)
UP_PID=

stop_up() {
    if [ -n "$UP_PID" ] && kill -0 "$UP_PID" 2>/dev/null; then
        kill -TERM "$UP_PID"
        wait "$UP_PID" 2>/dev/null
        echo "gpusched up stopped (exit $?)"
    fi
    UP_PID=
}
trap 'stop_up; rm -rf "$WORK"' EXIT

# Prints the pods as JSON lines: name ns phase node gpus
pods_json() { "$BIN" get pods -A -o json 2>/dev/null; }

all_done() {
    pods_json | "$PY" -c '
import json, sys
items = json.load(sys.stdin).get("items", [])
left = [p["metadata"]["name"] for p in items if p.get("status", {}).get("phase") not in ("Succeeded", "Failed")]
running = sum(1 for p in items if p.get("status", {}).get("phase") == "Running")
print(len(items), len(left), running)'
}

exporter_view() {
    "$PY" - "$WORK/info.json" <<'EOF'
import json, sys, urllib.request
info = json.load(open(sys.argv[1]))
for n in info["nodes"]:
    page = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % n["port"], timeout=5).read().decode()
    for line in page.splitlines():
        if line.startswith("DCGM_FI_DEV_GPU_UTIL{"):
            labels = dict(kv.split("=", 1) for kv in line[line.index("{") + 1:line.index("}")].split('",') if "=" in kv)
            get = lambda k: labels.get(k, "").strip('"')
            print("  %-11s gpu %-2s util %3s%%  pod %s/%s" % (n["name"], get("gpu"), line.rsplit(" ", 1)[1],
                  get("namespace") or "-", get("pod") or "-"))
EOF
}

part1() {
    echo "== gpusched up --mock $MOCK"
    "$BIN" up --mock "$MOCK" --data-dir "$WORK/data" --listen 127.0.0.1:0 --info "$WORK/info.json" \
        --metrics-interval-ms 300 --grace-ms 1000 >"$WORK/up.out" 2>"$WORK/up.err" &
    UP_PID=$!
    for _ in $(seq 1 100); do
        [ -s "$WORK/info.json" ] && break
        kill -0 "$UP_PID" 2>/dev/null || break
        sleep 0.1
    done
    if [ ! -s "$WORK/info.json" ]; then
        echo "gpusched up did not start:"
        sed 's/^/  /' "$WORK/up.err" | tail -20
        stop_up
        return 1
    fi
    sed 's/^/  /' "$WORK/up.out"
    export KUBECONFIG="$WORK/data/kubeconfig"
    echo
    echo "== gpusched get nodes -o wide"
    "$BIN" get nodes -o wide
    echo
    echo "== gpusched apply -f examples/demo/"
    "$BIN" apply -f examples/demo/ || return 1
    echo
    echo "== waiting for every pod to finish"
    local start=$SECONDS view="" seen=0
    while :; do
        read -r total left running < <(all_done)
        if [ "${running:-0}" -gt "$seen" ]; then
            seen=$running
            sleep 0.7   # one exporter collection after the pods started
            view="  ($running pods running)"$'\n'$(exporter_view 2>&1)
        fi
        [ "${total:-0}" -gt 0 ] && [ "${left:-1}" -eq 0 ] && break
        if [ $((SECONDS - start)) -gt 45 ]; then
            echo "  timed out; still unfinished:"
            "$BIN" get pods -A
            break
        fi
        sleep 0.3
    done
    echo "  done in $((SECONDS - start))s"
    echo
    echo "== gpusched get pods -A -o wide (GPUS: the devices the scheduler chose)"
    "$BIN" get pods -A -o wide
    echo
    echo "== admission: the tenant jobs' queue and QuotaReserved condition (see docs/QUEUES.md)"
    pods_json | "$PY" -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    q = (p["metadata"].get("labels") or {}).get("kueue.x-k8s.io/queue-name")
    if not q:
        continue
    c = {c["type"]: c for c in p.get("status", {}).get("conditions", [])}.get("QuotaReserved", {})
    print("  %-22s queue %-8s QuotaReserved=%s (%s)" % (p["metadata"]["namespace"] + "/" + p["metadata"]["name"], q,
          c.get("status", "?"), c.get("message", "")))'
    echo
    echo "== each pod's log: the GPUs its process saw"
    pods_json | "$PY" -c '
import json, sys
for p in json.load(sys.stdin)["items"]:
    print(p["metadata"]["namespace"], p["metadata"]["name"])' | while read -r ns name; do
        printf '  %-22s ' "$ns/$name"
        "$BIN" logs -n "$ns" "$name" 2>&1 | head -1
    done
    echo
    echo "== the exporter's view while the most pods ran (DCGM_FI_DEV_GPU_UTIL with pod labels)"
    echo "$view"
    echo
    echo "== gpusched top nodes"
    "$BIN" top nodes
    echo
    stop_up
}

part2() {
    echo "== gpusched validate examples/"
    "$BIN" validate -f examples/
    echo
    echo "== gpusched sim: the FGD experiment on the openb trace, every placement policy (profile: the server's, FGDLearn) and the upper bound on any placer (bound%)"
    GS_TRACE_DIR="$TRACE_DIR" "$BIN" sim --trace-dir "$TRACE_DIR" --experiment fgd \
        --policy Random,DotProd,GpuClustering,GpuPacking,BestFit,FGD,FGDPack,FGDPlus,FGDLearn,profile --bound --seed 42 \
        --out out/demo
    echo
    echo "Report: $(pwd)/out/demo/report.html (events.jsonl and series.csv next to it)"
}

echo "######## Part 1: the stack end to end (server, scheduler, agents, pods as processes)"
if ! part1; then
    echo "Part 1 failed; the simulator below still shows the scheduler."
fi
echo
echo "######## Part 2: the FGD experiment in the simulator"
[ -n "${GS_DEMO_SKIP_SIM:-}" ] || part2
