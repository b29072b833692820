#!/bin/sh
# nodeclass_bench.sh - `gpusched bench` over cluster sizes and placement
# policies with one or two builds, as a markdown table of pods per CPU
# second (the thread's CPU time: steadier than wall clock on a shared box).
#
#   bench/nodeclass_bench.sh AFTER_BIN [BEFORE_BIN]
#
# Sizes come from $SIZES (default "1000 5000 20000 50000"), policies from
# $PROFILES (default: the default profile and five placement policies), the
# pod count from $PODS (default 10000); every node has 8 GPUs.
set -eu
after=$1
before=${2:-}
sizes=${SIZES:-1000 5000 20000 50000}
profiles=${PROFILES:-default-scheduler FGD BestFit FGDPack DotProd GpuPacking}
pods=${PODS:-10000}
field() { sed -n 's/.*"'"$2"'":\([0-9.]*\).*/\1/p' "$1" | tail -1 | cut -d. -f1; }
if [ -n "$before" ]; then
    echo "| profile | nodes | before pods/s (CPU) | after pods/s (CPU) | after pods/s (wall) | scheduled | by class | classes at the end | peak RSS MiB |"
    echo "|---|---|---|---|---|---|---|---|---|"
else
    echo "| profile | nodes | pods/s (CPU) | pods/s (wall) | scheduled | by class | classes at the end | peak RSS MiB |"
    echo "|---|---|---|---|---|---|---|---|"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for p in $profiles; do
    for n in $sizes; do
        "$after" bench --nodes "$n" --gpus-per-node 8 --pods "$pods" --profile "$p" >"$tmp/a" 2>"$tmp/e"
        by=$(sed -n 's/^bench: \([0-9]*\) of .*/\1/p' "$tmp/e")
        cls=$(sed -n 's/.*; \([0-9]*\) classes at the end/\1/p' "$tmp/e")
        row="| $p | $n |"
        if [ -n "$before" ]; then
            "$before" bench --nodes "$n" --gpus-per-node 8 --pods "$pods" --profile "$p" >"$tmp/b" 2>/dev/null
            row="$row $(field "$tmp/b" pods_per_cpu_second) |"
        fi
        echo "$row $(field "$tmp/a" pods_per_cpu_second) | $(field "$tmp/a" pods_per_second) |" \
            "$(field "$tmp/a" scheduled) | $by | $cls | $(sed -n 's/.*"peak_rss_mb":\([0-9.]*\).*/\1/p' "$tmp/a") |"
    done
done
