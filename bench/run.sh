#!/usr/bin/env bash
# Runs the benchmarks and prints their numbers; see bench/RESULTS.md for recorded results.
set -euo pipefail
BIN=${1:-build/gpusched}
"$BIN" bench --nodes 5000 --gpus-per-node 8 --pods 50000
