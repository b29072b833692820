#!/bin/sh
# gang_equiv.sh - two gpusched builds decide the same on gang workloads: the
# gang-heavy replays and every scenario under tests/data/scenarios/, each with
# the gang/topology profile (preemption on) and without preemption, compared
# byte for byte (events.jsonl: every placement and eviction; series.csv; the
# JSON summary less wall_seconds).
#
#   bench/gang_equiv.sh BEFORE_BIN AFTER_BIN
#
# BEFORE_BIN is a build of the commit before the change. The two gang-heavy
# workloads are generated with bench/gen_gang_workload.py (64 nodes / 300
# groups, seed 42, BestFit; 48 nodes / 200 groups, seed 7, FGD), as in
# bench/RESULTS.md "Gang-heavy replay". Exit status 0 when every output is
# identical, 1 otherwise. bench/nodeclass_equiv.sh covers the FGD experiment.
set -eu
if [ $# -ne 2 ]; then
    echo "usage: $0 BEFORE_BIN AFTER_BIN" >&2
    exit 2
fi
before=$1 after=$2
for b in "$before" "$after"; do
    [ -x "$b" ] || { echo "$0: $b is not an executable" >&2; exit 2; }
done
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 "$root/bench/gen_gang_workload.py" "$tmp/gb" 64 300 42 >/dev/null
/usr/bin/python3 "$root/bench/gen_gang_workload.py" "$tmp/gb2" 48 200 7 >/dev/null
strip() { sed -E 's/"wall_seconds(_std)?":[-+.0-9eE]+,?//g'; }
status=0 runs=0

# compare NAME CLUSTER WORKLOAD CONFIG POLICY
compare() {
    name=$1
    for side in before after; do
        bin=$before
        [ $side = after ] && bin=$after
        "$bin" sim --experiment replay --cluster "$2" --workload "$3" --config "$4" --policy "$5" --json -q --gang-queue scheduler \
            --out "$tmp/$name.$side" | strip >"$tmp/$name.$side.json"
    done
    same=1
    cmp -s "$tmp/$name.before.json" "$tmp/$name.after.json" || same=0
    for f in events.jsonl series.csv; do
        [ -f "$tmp/$name.before/$f" ] || [ -f "$tmp/$name.after/$f" ] || continue
        cmp -s "$tmp/$name.before/$f" "$tmp/$name.after/$f" || same=0
    done
    runs=$((runs + 1))
    if [ $same = 1 ]; then
        echo "identical: $name ($(wc -l <"$tmp/$name.after/events.jsonl") events)"
    else
        echo "DIFFERENT: $name" >&2
        diff "$tmp/$name.before/events.jsonl" "$tmp/$name.after/events.jsonl" | head -10 >&2 || true
        status=1
    fi
}

gang=$root/examples/scheduler/gang-topology-scheduler.yaml
nopre=$root/bench/gang-no-preemption.yaml
for cfg in gang nopre; do
    conf=$gang
    [ $cfg = nopre ] && conf=$nopre
    compare "gb-BestFit-$cfg" "$tmp/gb/nodes.yaml" "$tmp/gb/workload.yaml" "$conf" BestFit
    compare "gb2-FGD-$cfg" "$tmp/gb2/nodes.yaml" "$tmp/gb2/workload.yaml" "$conf" FGD
    for d in "$root"/tests/data/scenarios/*/; do
        [ -f "$d/nodes.yaml" ] || continue
        compare "$(basename "$d")-$cfg" "$d/nodes.yaml" "$d/workload.yaml" "$conf" BestFit
    done
done
echo "$runs runs compared"
exit $status
