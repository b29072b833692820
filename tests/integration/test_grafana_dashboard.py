"""deploy/grafana/gpusched.json, the Grafana dashboard, against what gpusched exports.

The dashboard must be a well-formed Grafana dashboard (panels with targets,
unique ids, a gridPos each inside the 24-column grid, the Prometheus
datasource as a template variable), and every metric and label its queries
name must be one a running gpusched exports: the names are scraped here
from `gpusched up --mock` (the server's /metrics with a ClusterPolicy, a
bound pod and a pending one, and each node agent's /metrics) and from a
standalone `gpusched exporter` on mock MIG GPUs. PromQL is parsed loosely:
identifiers minus functions, keywords, label matchers, grouping clauses,
ranges, strings and Grafana variables.
"""
import json
import pathlib
import re
import signal
import subprocess

import pytest
import requests

from stack import Stack, apply, free_port, phase, pod_manifest, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "gpusched.json"

# Labels Prometheus adds at scrape time (job, instance) and the histogram bucket label.
SCRAPE_LABELS = {"job", "instance", "le"}
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless",
            "offset", "atan2", "inf", "nan"}
IDENT = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*")
SERIES = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})? \S+$")
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="(?:[^"\\]|\\.)*"')
GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
MATCHER = re.compile(r"\{([^}]*)\}")
MATCHER_LABEL = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"")
LEGEND = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")


def promql_names(expr):
    """(metric names, label names) a PromQL expression uses, loosely."""
    labels = set()
    for _, inner in GROUPING.findall(expr):
        labels |= {l.strip() for l in inner.split(",") if l.strip()}
    for inner in MATCHER.findall(expr):
        labels |= set(MATCHER_LABEL.findall(inner))
    s = GROUPING.sub(" ", expr)
    s = MATCHER.sub(" ", s)
    s = re.sub(r'"(?:[^"\\]|\\.)*"', " ", s)       # strings (label_replace arguments)
    s = re.sub(r"\boffset\s+-?[0-9a-z]+", " ", s)     # offset 5m
    s = re.sub(r"\[[^\]]*\]", " ", s)               # ranges and subqueries: [5m], [$__rate_interval]
    s = re.sub(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", " ", s)  # Grafana variables
    s = re.sub(r"\b\d+(?:\.\d+)?(?:e[+-]?\d+)?\b", " ", s)  # numbers
    metrics = set()
    for m in IDENT.finditer(s):
        word = m.group(0)
        if word.lower() in KEYWORDS or re.match(r"\s*\(", s[m.end():]):
            continue  # a keyword, or a function or aggregation called here
        metrics.add(word)
    return metrics, labels


def scrape_names(text):
    """{series name: set of label names} of a Prometheus text page."""
    out = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SERIES.match(line)
        assert m, f"not a Prometheus series line: {line!r}"
        out.setdefault(m.group(1), set()).update(LABEL.findall(m.group(2) or ""))
    return out


def merge(into, more):
    for k, v in more.items():
        into.setdefault(k, set()).update(v)
    return into


def dashboard():
    return json.loads(DASHBOARD.read_text())


def all_panels(d):
    for p in d["panels"]:
        yield p
        yield from p.get("panels", [])  # a collapsed row holds its panels


def queries(d):
    """(where, expr, legendFormat) of every panel target and template variable query."""
    for p in all_panels(d):
        for t in p.get("targets", []):
            yield f"panel {p['id']} ({p['title']}) target {t.get('refId')}", t["expr"], t.get("legendFormat", "")
    for v in d["templating"]["list"]:
        if v["type"] == "query":
            q = v["query"]["query"] if isinstance(v["query"], dict) else v["query"]
            m = re.fullmatch(r"label_values\((\w+),\s*(\w+)\)", q)
            assert m, f"variable {v['name']}: query {q!r} is not label_values(metric, label)"
            yield f"variable {v['name']}", f"{m.group(1)}{{{m.group(2)}!=\"\"}}", ""


def test_promql_names_parser():
    """The loose parser finds the metrics and labels, and nothing else."""
    m, l = promql_names('histogram_quantile(0.99, sum by (le) (rate(x_bucket{job=~"$job"}[$__rate_interval])))')
    assert (m, l) == ({"x_bucket"}, {"le", "job"})
    m, l = promql_names('sum(a{Hostname=~"$node"}) / (sum(a) + sum without (gpu) (b)) > bool 0 or vector(0)')
    assert (m, l) == ({"a", "b"}, {"Hostname", "gpu"})
    m, _ = promql_names('count(DCGM_FI_DEV_XID_ERRORS{pod!=""} > 0) and on (gpu) up offset 5m')
    assert m == {"DCGM_FI_DEV_XID_ERRORS", "up"}


def test_dashboard_is_a_valid_grafana_dashboard():
    d = dashboard()
    assert d["title"] and d["uid"] and isinstance(d["schemaVersion"], int) and d["schemaVersion"] >= 36
    ds = [v for v in d["templating"]["list"] if v["type"] == "datasource"]
    assert len(ds) == 1 and ds[0]["query"] == "prometheus", "the datasource must be a Prometheus template variable"
    ref = {"type": "prometheus", "uid": "${" + ds[0]["name"] + "}"}
    panels = list(all_panels(d))
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids)), f"panel ids repeat: {sorted(ids)}"
    cells = set()
    graphs = 0
    for p in panels:
        g = p["gridPos"]
        assert all(isinstance(g[k], int) for k in "hwxy"), f"panel {p['id']}: gridPos {g}"
        assert g["w"] > 0 and g["h"] > 0 and 0 <= g["x"] and g["x"] + g["w"] <= 24, f"panel {p['id']}: gridPos {g}"
        mine = {(x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])}
        assert not mine & cells, f"panel {p['id']} ({p['title']}) overlaps another"
        cells |= mine
        if p["type"] == "row":
            continue
        graphs += 1
        assert p["title"], f"panel {p['id']} has no title"
        assert p["datasource"] == ref, f"panel {p['id']}: datasource {p['datasource']}, want {ref}"
        targets = p.get("targets") or []
        assert targets, f"panel {p['id']} ({p['title']}) has no targets"
        refs = [t["refId"] for t in targets]
        assert len(refs) == len(set(refs)), f"panel {p['id']}: refIds repeat {refs}"
        for t in targets:
            assert t["expr"].strip() and t["datasource"] == ref, f"panel {p['id']} target {t['refId']}"
    assert graphs >= 20, f"only {graphs} panels"


@pytest.fixture(scope="module")
def exported(gpusched_bin, tmp_path_factory):
    """{series name: label names} scraped from a running gpusched: server, agents, exporter."""
    names = {}
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("grafana"))
    s.up("2x4xH100-80GB")
    exporter = None
    try:
        apply(s, {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
                  "spec": {"validator": {"retry": {"initialBackoffSeconds": 0.2, "maxBackoffSeconds": 1}}}},
              pod_manifest("holder", "sleep 60", gpus=2), pod_manifest("too-big", "true", gpus=16))
        wait_for(lambda: phase(s.pod("holder")) == "Running", 30, "the holder pod to run")
        ca = str(s.data / "ca.crt")

        def server_names():
            r = requests.get(s.info["server"] + "/metrics", headers={"Authorization": "Bearer " + s.info["token"]},
                             verify=ca, timeout=5)
            assert r.status_code == 200, r.text
            got = scrape_names(r.text)
            want = ("gpusched_gpu_stack_state", "gpusched_gpu_stack_validation_failures_total",
                    "gpusched_events_total", "gpusched_scheduler_scheduling_attempt_duration_seconds_bucket")
            return got if all(w in got for w in want) else None
        merge(names, wait_for(server_names, 40, "the server's metrics with the GPU stack and the scheduler's"))
        for n in s.info["nodes"]:
            merge(names, wait_for(lambda: (lambda g: g if "pod" in g.get("DCGM_FI_DEV_GPU_UTIL", ()) or
                                           n["name"] != s.pod("holder")["spec"]["nodeName"] else None)(
                scrape_names(s.agent_get(n["port"], "/metrics"))), 20, f"{n['name']}'s /metrics"))
        port = free_port()
        exporter = subprocess.Popen([gpusched_bin, "exporter", "--mock", "2xA100-80GB,mig=1g.10gb*2+2g.20gb",
                                     "--listen", f"127.0.0.1:{port}", "--interval", "200ms"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

        def exporter_names():
            try:
                return scrape_names(requests.get(f"http://127.0.0.1:{port}/metrics", timeout=2).text)
            except requests.ConnectionError:
                return None
        merge(names, wait_for(exporter_names, 20, "the exporter's /metrics"))
    finally:
        if exporter is not None:
            exporter.send_signal(signal.SIGTERM)
            exporter.wait(10)
        s.stop_all()
    return names


def test_every_query_names_exported_metrics_and_labels(exported):
    d = dashboard()
    unknown, bad_labels, seen = [], [], set()
    for where, expr, legend in queries(d):
        metrics, labels = promql_names(expr)
        assert metrics, f"{where}: no metric found in {expr!r}"
        seen |= metrics
        unknown += [f"{where}: {m}" for m in sorted(metrics) if m not in exported]
        have = set().union(*(exported.get(m, set()) for m in metrics)) | SCRAPE_LABELS
        used = labels | set(LEGEND.findall(legend))
        bad_labels += [f"{where}: label {l} on none of {sorted(metrics)}" for l in sorted(used - have)]
    assert not unknown, "queries name metrics gpusched does not export:\n" + "\n".join(unknown)
    assert not bad_labels, "queries name labels the metrics do not have:\n" + "\n".join(bad_labels)
    # the dashboard covers both sides: the exporter's DCGM metrics and the server's
    assert {"DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_XID_ERRORS", "gpusched_gpu_healthy"} <= seen
    assert {"gpusched_scheduler_queue_pods", "gpusched_scheduler_schedule_attempts_total",
            "gpusched_gpu_stack_state"} <= seen


def test_a_misspelled_metric_would_be_caught(exported):
    """The check above is not vacuous: a name one letter off is not among the exported ones."""
    metrics, _ = promql_names('rate(DCGM_FI_DEV_GPU_UTILS{Hostname=~"$node"}[5m])')
    assert metrics == {"DCGM_FI_DEV_GPU_UTILS"} and not metrics & set(exported)
    assert "DCGM_FI_DEV_GPU_UTIL" in exported and "gpusched_scheduler_queue_pods" in exported
