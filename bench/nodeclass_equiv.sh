#!/bin/sh
# nodeclass_equiv.sh - the simulator prints byte-identical results before and
# after a scheduler change: the FGD experiment (all policies, seeds 42-51) and
# a replay, by two gpusched binaries, compared with diff.
#
#   bench/nodeclass_equiv.sh BEFORE_BIN AFTER_BIN [VARIANT...]
#
# BEFORE_BIN is a build of the commit before the change (for example
# `git worktree add /tmp/base <commit>` and build it there). Variants default
# to "default"; the trace comes from $GS_TRACE_DIR or ../shared/traces/openb.
# The wall_seconds fields (how long a run took) are left out of the
# comparison; every other number must be the same. The replay also writes its
# events (every placement: node and GPUs) with --out, compared whole.
# Exit status 0 when every output is identical, 1 otherwise.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 BEFORE_BIN AFTER_BIN [VARIANT...]" >&2
    exit 2
fi
before=$1 after=$2
shift 2
[ $# -gt 0 ] || set -- default
for b in "$before" "$after"; do
    [ -x "$b" ] || { echo "$0: $b is not an executable" >&2; exit 2; }
done
dir=${GS_TRACE_DIR:-$(dirname "$0")/../../shared/traces/openb}
[ -d "$dir" ] || { echo "$0: no trace directory $dir (set GS_TRACE_DIR)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
policies=Random,DotProd,GpuClustering,GpuPacking,BestFit,FGD,FGDPack
strip() { sed -E 's/"wall_seconds(_std)?":[-+.0-9eE]+,?//g'; }
status=0
for v in "$@"; do
    for run in "fgd --policy $policies --seeds 42-51" "replay --policy FGD,BestFit --seed 42"; do
        name=$(echo "$v $run" | tr -c 'A-Za-z0-9\n' _)
        # shellcheck disable=SC2086
        "$before" sim --trace-dir "$dir" --variant "$v" --experiment $run --json -q | strip >"$tmp/$name.before"
        # shellcheck disable=SC2086
        "$after" sim --trace-dir "$dir" --variant "$v" --experiment $run --json -q | strip >"$tmp/$name.after"
        if cmp -s "$tmp/$name.before" "$tmp/$name.after"; then
            echo "identical: $v: sim --experiment $run ($(wc -c <"$tmp/$name.after") bytes)"
        else
            echo "DIFFERENT: $v: sim --experiment $run" >&2
            diff "$tmp/$name.before" "$tmp/$name.after" | head -20 >&2 || true
            status=1
        fi
    done
    for p in FGD BestFit; do
        for side in before after; do
            bin=$before
            [ $side = after ] && bin=$after
            "$bin" sim --trace-dir "$dir" --variant "$v" --experiment replay --policy $p --seed 42 -q \
                --out "$tmp/$v.$p.$side" >/dev/null
        done
        if cmp -s "$tmp/$v.$p.before/events.jsonl" "$tmp/$v.$p.after/events.jsonl"; then
            echo "identical: $v: replay $p events.jsonl ($(wc -l <"$tmp/$v.$p.after/events.jsonl") events)"
        else
            echo "DIFFERENT: $v: replay $p events.jsonl" >&2
            status=1
        fi
    done
done
exit $status
