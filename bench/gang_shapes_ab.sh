#!/bin/sh
# gang_shapes_ab.sh - the gang shapes of `gpusched bench` by two builds, side
# by side in one run: for each shape the build before, then the build after,
# one line each with the pods per CPU second of the scheduling thread and the
# digest of every decision (equal digests: the same binds and evictions in
# the same order).
#
#   bench/gang_shapes_ab.sh BEFORE_BIN AFTER_BIN [SHAPE...]
#
# Shapes default to kube's podgroup/gangscheduling ones but gang-10x5000 (run
# it by name: minutes per build). The load average is printed before and
# after, since the box the numbers come from may be shared.
set -eu
if [ $# -lt 2 ]; then
    echo "usage: $0 BEFORE_BIN AFTER_BIN [SHAPE...]" >&2
    exit 2
fi
before=$1 after=$2
shift 2
[ $# -gt 0 ] || set -- gang-1000x3 gang-3000x3 gang-9x1000 gang-1000x3-preempt gang-3000x3-preempt gang-9x1000-preempt
uptime
for sh in "$@"; do
    for side in before after; do
        bin=$before
        [ $side = after ] && bin=$after
        printf '%s %s ' $side "$sh"
        "$bin" bench --shape "$sh" 2>/dev/null |
            sed -E 's/.*"scheduled":([0-9]+).*"evictions":([0-9]+).*"cycles":([0-9]+).*"pods_per_cpu_second":([0-9.]+).*"decisions":"([0-9a-f]+)".*/bound=\1 evictions=\2 cycles=\3 cpu_pps=\4 decisions=\5/'
    done
done
uptime
