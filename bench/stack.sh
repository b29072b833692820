#!/usr/bin/env bash
# End to end through the whole stack: `gpusched up` with mock nodes, N pods
# (1 GPU each, command `true`) applied at once, timed from the first create
# to the last binding and to the last pod Succeeded (reported by the agents
# after running the processes). Usage: bench/stack.sh [BIN] [PODS] [MOCK]
set -euo pipefail
BIN=$(cd "$(dirname "${1:-build/gpusched}")" && pwd)/$(basename "${1:-build/gpusched}")
PODS=${2:-1000}
MOCK=${3:-2x32xH100-80GB}
W=$(mktemp -d /tmp/gpusched-stack-bench.XXXXXX)
"$BIN" up --mock "$MOCK" --data-dir "$W/data" --listen 127.0.0.1:0 --info "$W/info.json" >/dev/null 2>"$W/up.err" &
UP=$!
trap 'kill -TERM $UP 2>/dev/null; wait $UP 2>/dev/null; rm -rf "$W"' EXIT
for _ in $(seq 100); do [ -s "$W/info.json" ] && break; sleep 0.1; done
/usr/bin/python3 - "$BIN" "$W/data/kubeconfig" "$PODS" "$MOCK" <<'PY'
import json, subprocess, sys, time
bin_, kc, n, mock = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
docs = "\n".join(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"b{i:05d}"},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "command": ["true"],
        "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}) for i in range(n))
t0 = time.time()
subprocess.run([bin_, "apply", "-f", "-", "--kubeconfig", kc], input=docs, text=True, check=True, capture_output=True)
t_created = time.time()
t_bound = None
while True:
    items = json.loads(subprocess.run([bin_, "get", "pods", "-o", "json", "--kubeconfig", kc], text=True,
                                      capture_output=True, check=True).stdout)["items"]
    if t_bound is None and len(items) == n and all(p["spec"].get("nodeName") for p in items):
        t_bound = time.time()
    if len(items) == n and all(p["status"].get("phase") in ("Succeeded", "Failed") for p in items):
        break
    time.sleep(0.2)
t_done = time.time()
ok = sum(p["status"]["phase"] == "Succeeded" for p in items)
print(f"{n} pods on {mock}: created in {t_created - t0:.1f}s ({n / (t_created - t0):.0f}/s), "
      f"all bound after {t_bound - t0:.1f}s, all finished after {t_done - t0:.1f}s "
      f"({n / (t_done - t0):.0f} pods/s end to end, {ok} Succeeded)")
PY
