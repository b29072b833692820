#!/usr/bin/env bash
# Measures the exporter serving 8 mock GPUs as a standalone process: resident
# memory and CPU time per scrape, read from /proc/<pid> while a client scrapes
# /metrics N times over loopback. Then runs the in-process benchmark
# (`gpusched exporter --bench`), which also reports CPU per collection.
# Usage: bench/exporter.sh [path/to/gpusched] [scrapes]
set -euo pipefail
BIN=${1:-build/gpusched}
N=${2:-2000}
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BIN" exporter --mock 8xH100-80GB --listen "127.0.0.1:$PORT" --interval 1s >/dev/null 2>&1 &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null || true' EXIT
/usr/bin/python3 - "$PID" "$PORT" "$N" <<'PY'
import os, sys, time, urllib.request
pid, port, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
url = f"http://127.0.0.1:{port}/metrics"
tick = os.sysconf("SC_CLK_TCK")
def cpu():
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / tick          # utime + stime
def status(key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
for _ in range(100):
    try:
        body = urllib.request.urlopen(url, timeout=1).read(); break
    except OSError:
        time.sleep(0.05)
time.sleep(1.5)                                      # let a collection or two happen
c0, w0 = cpu(), time.monotonic()
for _ in range(n):
    body = urllib.request.urlopen(url, timeout=5).read()
c1, w1 = cpu(), time.monotonic()
# the server also collected every second meanwhile; that CPU is counted too (upper bound)
print(f"standalone: gpus=8 scrapes={n} page_bytes={len(body)} "
      f"server_cpu_us_per_scrape={(c1 - c0) / n * 1e6:.1f} client_wall_us_per_scrape={(w1 - w0) / n * 1e6:.1f} "
      f"rss_kib={status('VmRSS')} rss_peak_kib={status('VmHWM')}")
PY
echo "in-process: $("$BIN" exporter --bench --mock 8xH100-80GB --scrapes "$N")"
