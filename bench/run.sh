#!/usr/bin/env bash
# Runs every benchmark once and prints its numbers (make bench). The recorded
# results, with the machine and the exact commands, are in bench/RESULTS.md.
set -euo pipefail
BIN=${1:-build/gpusched}
TRACE_DIR=${GS_TRACE_DIR:-../shared/traces/openb}

echo "== scheduling throughput: 5000 nodes x 8 GPUs, 50k pods, every node filtered and scored"
"$BIN" bench --nodes 5000 --gpus-per-node 8 --pods 50000

echo "== FGD experiment on the openb trace, seeds 42-51, every policy"
"$BIN" sim --trace-dir "$TRACE_DIR" --experiment fgd \
    --policy Random,DotProd,GpuClustering,GpuPacking,BestFit,FGD,FGDPack --seeds 42-51

echo "== exporter: CPU per scrape and RSS, 8 mock GPUs"
bash bench/exporter.sh "$BIN" 2000

echo "== control plane: creates/s, watch fan-out, create-to-binding, RSS at 5k nodes / 50k pods"
"$BIN" server --bench --only api
"$BIN" server --bench --only e2e --runs 3
"$BIN" server --bench --only rss

echo "== whole stack: gpusched up, 1000 pods run as processes"
bash bench/stack.sh "$BIN" 1000

echo "== chaos, long: ${GS_CHAOS_PODS:-2000} pods through ${GS_CHAOS_ROUNDS:-10} kills of the server and agents, then every other scenario"
GS_CHAOS_PODS=${GS_CHAOS_PODS:-2000} GS_CHAOS_ROUNDS=${GS_CHAOS_ROUNDS:-10} GPUSCHED_BIN="$(realpath "$BIN")" \
    ${PYTHON:-/usr/bin/python3} -m pytest -q -s tests/integration/test_chaos.py 2>&1 | grep -E '^chaos|passed|failed'
