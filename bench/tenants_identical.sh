#!/usr/bin/env bash
# The multi-tenant experiment of bench/RESULTS.md ("Multi-tenant queues") run
# by two gpusched binaries: prints each one's CPU seconds and fails unless
# both leave byte-identical outputs: the table, tenants.csv (every sample)
# and queues.json (tenants.html is only their rendering, and carries the date
# and command line). A change meant to make the experiment faster must pass it
# against a binary built from the commit before the change:
#
#   git worktree add /tmp/ref COMMIT && cmake -S /tmp/ref -B /tmp/ref/build \
#       -DCMAKE_BUILD_TYPE=RelWithDebInfo && cmake --build /tmp/ref/build -j2
#   bash bench/tenants_identical.sh /tmp/ref/build/gpusched build/gpusched
#
# Arguments after the two binaries are added to the command (e.g.
# --victims global, --mode fair).
set -euo pipefail
if [ $# -lt 2 ]; then
    echo "usage: bench/tenants_identical.sh REF_BIN NEW_BIN [extra sim flags]" >&2
    exit 2
fi
REF=$1 NEW=$2
shift 2
TRACE_DIR=${GS_TRACE_DIR:-../shared/traces/openb}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
for which in ref new; do
    bin=$REF
    [ "$which" = new ] && bin=$NEW
    out="$WORK/$which"
    mkdir -p "$out"
    /usr/bin/time -f "$which: %U s user CPU, %e s wall" "$bin" sim --experiment tenants --trace-dir "$TRACE_DIR" \
        --speedup 2000 --node-fraction 0.25 --weights 1,2,1 --out "$out" \
        --queues-json "$out/queues.json" --queues-at 9600 "$@" >"$out/stdout.txt"
done
status=0
for f in stdout.txt tenants.csv queues.json; do
    if cmp -s "$WORK/ref/$f" "$WORK/new/$f"; then
        echo "identical: $f"
    else
        echo "DIFFERENT: $f" >&2
        diff "$WORK/ref/$f" "$WORK/new/$f" | head -20 >&2 || true
        status=1
    fi
done
exit $status
