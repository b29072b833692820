#!/usr/bin/env bash
# The main job on the embedded default: checks the example manifests, then
# runs the FGD experiment on the openb trace with every placement policy.
set -euo pipefail
BIN=${1:-build/gpusched}
TRACE_DIR=${GS_TRACE_DIR:-../shared/traces/openb}
echo "== gpusched validate examples/"
"$BIN" validate -f examples/
