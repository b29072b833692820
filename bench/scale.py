#!/usr/bin/python3
"""How each cost grows with nodes and pods, measured in one run.

For each cluster size (default 1,000 / 5,000 / 20,000 / 50,000 nodes x 8 GPUs):
  - decision throughput: `gpusched bench` with the default profile and with
    `--profile gpusched` (the production profile), pods per CPU second of the
    scheduling thread (`pods_per_cpu_second`: the steady figure on a shared
    machine), min(10 x nodes, 100,000) pods;
  - the whole stack: `gpusched server --bench --only scale --secure` with
    10 pods per node stored (500,000 at 50,000 nodes): memory per node and per
    pod, the relist after a restart (until the scheduler's cache holds
    everything, and until /readyz answers), create to bound over HTTPS with a
    bearer token (rate, CPU per pod, p50/p99), and the run's peak RSS.
It prints one table and a second one saying how each cost grows (the exponent
k of cost ~ nodes^k between the smallest and the largest size), and writes
both into the "## Scale" section of bench/RESULTS.md (replaced when present,
appended otherwise).

    /usr/bin/python3 bench/scale.py build/gpusched            # the full table (20-40 min on 2 busy cores)
    /usr/bin/python3 bench/scale.py build/gpusched --quick    # 100 / 300 nodes, seconds: the table's shape

--quick writes nothing unless --results is given; --no-write never writes.
"""
import argparse
import datetime
import json
import math
import os
import pathlib
import re
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]

COLUMNS = [
    "nodes", "pods stored", "default pods/CPU-s", "gpusched pods/CPU-s", "bytes/node", "bytes/pod",
    "relist s", "/readyz s", "create to bound pods/s (TLS+auth)", "CPU ms/pod", "p50 / p99 ms", "peak RSS MiB",
]
GROWTH_COLUMNS = ["cost", "at smallest", "at largest", "grows as nodes^k", "k"]


class Failure(Exception):
    pass


def run(cmd, timeout):
    t0 = time.time()
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return p, time.time() - t0


TIMEOUT = 3600  # seconds per command (--timeout)
BENCH_PODS_MAX = 100000  # --bench-pods-max


def bench(binary, nodes, pods, profile):
    cmd = [binary, "bench", "--nodes", str(nodes), "--gpus-per-node", "8", "--pods", str(pods)]
    if profile:
        cmd += ["--profile", profile]
    p, _ = run(cmd, TIMEOUT)
    if p.returncode != 0:
        why = (p.stderr.strip().splitlines() or ["exit %d" % p.returncode])[-1]
        return {"refused": why}
    for line in reversed(p.stdout.splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise Failure("%s printed no JSON line:\n%s" % (" ".join(cmd), p.stdout + p.stderr))


def server_scale(binary, nodes, pods, e2e_pods, workdir):
    cmd = [binary, "server", "--bench", "--only", "scale", "--secure", "--scale-nodes", str(nodes),
           "--scale-pods", str(pods), "--scale-e2e-pods", str(e2e_pods), "--dir", workdir]
    p, _ = run(cmd, TIMEOUT)
    for line in p.stdout.splitlines():
        if line.startswith("scale-result "):
            kv = dict(f.split("=", 1) for f in line.split()[1:])
            return {k: float(v) for k, v in kv.items()}, p.stdout
    raise Failure("%s printed no scale-result line (exit %d):\n%s" % (" ".join(cmd), p.returncode,
                                                                     p.stdout + p.stderr))


def fmt(v, digits=0):
    if v is None:
        return "-"
    if isinstance(v, str):
        return v
    if digits == 0:
        return "{:,.0f}".format(v)
    return "{:,.{}f}".format(v, digits)


def rate_cell(r):
    return "refused" if "refused" in r else fmt(r["pods_per_cpu_second"])


def measure(binary, sizes, quick, e2e_pods, workdir, log, missed):
    rows = []
    for n in sizes:
        try:
            rows.append(measure_one(binary, n, quick, e2e_pods, workdir, log))
        except subprocess.TimeoutExpired as e:
            log("nodes %d: %s ran past %d s; the table stops here" % (n, " ".join(e.cmd[:4]), TIMEOUT))
            missed.append("%s nodes: `%s` ran past %d s" % (fmt(n), " ".join(e.cmd[1:4]), TIMEOUT))
            break
    return rows


def measure_one(binary, n, quick, e2e_pods, workdir, log):
    bench_pods = 10 * n if quick else min(10 * n, BENCH_PODS_MAX)
    stored = 10 * n
    e2e = e2e_pods or (500 if quick else 20000)
    log("nodes %d: bench default (%d pods)" % (n, bench_pods))
    d = bench(binary, n, bench_pods, None)
    log("nodes %d: bench --profile gpusched" % n)
    g = bench(binary, n, bench_pods, "gpusched")
    log("nodes %d: server --bench --only scale --secure (%d pods stored, %d created)" % (n, stored, e2e))
    s, out = server_scale(binary, n, stored, e2e, workdir)
    for line in out.splitlines():
        if not line.startswith("scale-result"):
            log("  " + line)
    return {"nodes": n, "stored": stored, "bench_pods": bench_pods, "e2e": e2e, "default": d, "gpusched": g,
            "server": s}


def table(rows):
    out = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for r in rows:
        s = r["server"]
        e2e = s["e2e_pods_per_s"] if s["e2e_pods_per_s"] > 0 else "lost pods"
        out.append("| " + " | ".join([
            fmt(r["nodes"]), fmt(r["stored"]), rate_cell(r["default"]), rate_cell(r["gpusched"]),
            fmt(s["bytes_per_node"]), fmt(s["bytes_per_pod"]), fmt(s["relist_s"], 2), fmt(s["ready_s"], 2),
            fmt(e2e), fmt(s["e2e_cpu_ms_per_pod"], 3),
            "%s / %s" % (fmt(s["e2e_p50_ms"]), fmt(s["e2e_p99_ms"])), fmt(s["peak_rss_mib"]),
        ]) + " |")
    return out


def growth(rows):
    """cost ~ nodes^k between the first and the last row, for each cost that was measured at both."""
    a, b = rows[0], rows[-1]
    ratio = b["nodes"] / a["nodes"]

    def per_decision(r, key):
        x = r[key]
        return None if "refused" in x or not x["pods_per_cpu_second"] else 1e6 / x["pods_per_cpu_second"]

    costs = [
        ("CPU us per decision, default profile", lambda r: per_decision(r, "default"), 1),
        ("CPU us per decision, gpusched profile", lambda r: per_decision(r, "gpusched"), 1),
        ("server bytes per node", lambda r: r["server"]["bytes_per_node"], 0),
        ("server bytes per pod", lambda r: r["server"]["bytes_per_pod"], 0),
        ("relist after a restart, s", lambda r: r["server"]["relist_s"], 2),
        ("create to bound, CPU ms per pod", lambda r: r["server"]["e2e_cpu_ms_per_pod"], 3),
        ("peak RSS, MiB", lambda r: r["server"]["peak_rss_mib"], 0),
    ]
    out = ["| " + " | ".join(GROWTH_COLUMNS) + " |", "|" + "---|" * len(GROWTH_COLUMNS)]
    for name, f, digits in costs:
        x, y = f(a), f(b)
        if x is None or y is None or x <= 0 or y <= 0 or ratio <= 1:
            k = None
        else:
            k = math.log(y / x) / math.log(ratio)
        shape = "-" if k is None else ("flat" if abs(k) < 0.15 else "falling" if k < 0 else
                                       "linear" if abs(k - 1) < 0.15 else "sublinear" if k < 1 else "superlinear")
        out.append("| %s | %s | %s | %s | %s |" % (name, fmt(x, digits), fmt(y, digits), shape,
                                                 "-" if k is None else "%.2f" % k))
    return out


def section(rows, quick, binary, started, load, missed):
    try:
        commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = ""
    sizes = ", ".join(fmt(r["nodes"]) for r in rows)
    lines = [
        "## Scale",
        "",
        "Written by `/usr/bin/python3 bench/scale.py %s` (one run: %s nodes x 8 GPUs), %s UTC%s,"
        % (" ".join(os.path.relpath(x, ROOT) if x.startswith(str(ROOT)) else x for x in sys.argv[1:]),
           sizes, started, ", commit " + commit if commit else ""),
        "load average %.1f at the start and %.1f at the end (the shared 2-core box). Decision rates are"
        % (load[0], load[1]),
        "`gpusched bench` pods per CPU second of the scheduling thread (every node considered,",
        "min(10 x nodes, %s) pods); the other columns are `gpusched server --bench --only scale --secure`"
        % fmt(BENCH_PODS_MAX),
        "with 10 running pods per node stored: RSS deltas per node and per pod, the restart until the",
        "scheduler's cache holds everything and until /readyz answers over HTTPS, and %s new pods"
        % fmt(rows[0]["e2e"]),
        "created over HTTPS with a bearer token and bound by the in-server scheduler (create to bound:",
        "wall-clock pods/s, process CPU per pod over all threads, p50/p99 per pod).",
        "",
    ] + table(rows) + ["Not measured: " + m + "." for m in missed] + [
        "", "How each cost grows from the smallest to the largest cluster:", ""] + growth(rows) + [""]
    return "\n".join(lines) + "\n"


def write_section(path, text):
    p = pathlib.Path(path)
    old = p.read_text() if p.exists() else ""
    m = re.search(r"^## Scale\n", old, re.M)
    if not m:
        new = old.rstrip("\n") + ("\n\n" if old else "") + text
    else:
        nxt = re.search(r"^## ", old[m.end():], re.M)
        end = m.end() + nxt.start() if nxt else len(old)
        new = old[:m.start()] + text + ("\n" + old[end:] if nxt else "")
    p.write_text(new)


def main():
    ap = argparse.ArgumentParser(description="the scale table: decisions, memory, relist, create to bound")
    ap.add_argument("binary", nargs="?", default=str(ROOT / "build" / "gpusched"))
    ap.add_argument("--quick", action="store_true", help="100 and 300 nodes: seconds, for the table's shape")
    ap.add_argument("--nodes", help="comma-separated node counts (default 1000,5000,20000,50000)")
    ap.add_argument("--results", help="file whose '## Scale' section is written (default bench/RESULTS.md, "
                                      "not written with --quick unless given)")
    ap.add_argument("--no-write", action="store_true")
    ap.add_argument("--dir", default="/tmp", help="where the server's data directories go")
    ap.add_argument("--e2e-pods", type=int, default=0, help="pods created to measure create to bound "
                                                             "(default 20,000; 500 with --quick)")
    ap.add_argument("--timeout", type=int, default=3600, help="seconds one command may run (default 3600)")
    ap.add_argument("--bench-pods-max", type=int, default=100000,
                    help="pods of each `gpusched bench` run: min(10 x nodes, this); default 100,000")
    a = ap.parse_args()
    global TIMEOUT, BENCH_PODS_MAX
    TIMEOUT, BENCH_PODS_MAX = a.timeout, a.bench_pods_max
    if a.e2e_pods < 0 or a.timeout < 1 or a.bench_pods_max < 1:
        sys.exit("scale.py: --e2e-pods must be >= 0, --timeout and --bench-pods-max >= 1")
    binary = os.path.abspath(a.binary)
    if not os.access(binary, os.X_OK):
        sys.exit("scale.py: %s: not an executable gpusched binary" % binary)
    if a.nodes:
        try:
            sizes = [int(x) for x in a.nodes.split(",")]
        except ValueError:
            sys.exit("scale.py: --nodes %r: want comma-separated whole numbers" % a.nodes)
        if not sizes or min(sizes) < 1:
            sys.exit("scale.py: --nodes %r: every count must be at least 1" % a.nodes)
    else:
        sizes = [100, 300] if a.quick else [1000, 5000, 20000, 50000]
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M")
    load0 = os.getloadavg()[0]

    def log(msg):
        print("scale.py: " + msg, file=sys.stderr, flush=True)

    missed = []
    try:
        rows = measure(binary, sizes, a.quick, a.e2e_pods, a.dir, log, missed)
    except Failure as e:
        sys.exit("scale.py: %s" % e)
    if not rows:
        sys.exit("scale.py: nothing measured: " + "; ".join(missed))
    text = section(rows, a.quick, binary, started, (load0, os.getloadavg()[0]), missed)
    print(text, end="")
    results = a.results or (None if a.quick else str(ROOT / "bench" / "RESULTS.md"))
    if results and not a.no_write:
        write_section(results, text)
        log("wrote the Scale section of %s" % results)


if __name__ == "__main__":
    main()
