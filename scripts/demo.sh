#!/usr/bin/env bash
# The main job on the embedded default: checks the example manifests, then
# runs the FGD experiment on the openb trace with every placement policy.
set -euo pipefail
BIN=${1:-build/gpusched}
TRACE_DIR=${GS_TRACE_DIR:-../shared/traces/openb}
echo "== gpusched validate examples/"
"$BIN" validate -f examples/

echo
echo "== gpusched sim: the FGD experiment on the openb trace, every placement policy"
GS_TRACE_DIR="$TRACE_DIR" "$BIN" sim --trace-dir "$TRACE_DIR" --experiment fgd \
    --policy Random,DotProd,GpuClustering,GpuPacking,BestFit,FGD,FGDPack --seed 42 --out out/demo
echo
echo "Report: $(pwd)/out/demo/report.html (events.jsonl and series.csv next to it)"
