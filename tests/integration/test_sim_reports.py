"""The simulator's reports as a reader sees them: report.html of the fgd and
replay experiments and tenants.html, rendered in headless Chromium
(browser.py), screenshotted into the test artifacts, with their charts
checked in the page (the SVG elements, their size on the page, the series in
the legend, the axis titles and ticks with units), plus the metadata and the
CSV/JSON next to each report.

The fgd run is two policies x two seeds of the openb trace ($GS_TRACE_DIR);
the replay a small cluster (examples/sim/cluster.yaml) with two Kueue queues,
a gang whose second member arrives 100 s after the first and a pod no node
can hold; the tenants run the openb trace thinned to a tenth of the nodes.
"""
import csv
import html.parser
import json
import os
import pathlib
import re

import pytest
import yaml

import browser

ROOT = pathlib.Path(__file__).resolve().parents[2]
TRACE_DIR = os.environ.get("GS_TRACE_DIR", str(ROOT.parent / "shared" / "traces" / "openb"))
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"


class Charts(html.parser.HTMLParser):
    """The report's <svg class="chart"> elements: id, viewBox, width, titles, series and tick labels."""

    def __init__(self):
        super().__init__()
        self.charts, self.meta, self.cur, self.text_class, self.in_meta_th = [], {}, None, None, None
        self.meta_key = None
        self.scripts = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self.scripts += 1
        if tag == "svg":
            self.cur = {"id": a.get("data-chart"), "viewBox": a.get("viewbox"), "width": a.get("width"),
                        "series": set(), "xtick": [], "ytick": [], "xlabel": "", "ylabel": "", "legend": []}
            self.charts.append(self.cur)
        elif self.cur is not None and "data-series" in a:
            self.cur["series"].add(a["data-series"])
        elif self.cur is not None and tag == "text":
            self.text_class = a.get("class", "")
        if tag == "th":
            self.in_meta_th = True

    def handle_endtag(self, tag):
        if tag == "svg":
            self.cur = None
        if tag == "text":
            self.text_class = None
        if tag == "th":
            self.in_meta_th = False

    def handle_data(self, data):
        if self.in_meta_th:
            self.meta_key = data
        elif self.meta_key and data.strip():
            self.meta.setdefault(self.meta_key, data)
            self.meta_key = None
        if self.cur is None or not self.text_class:
            return
        for k in ("xtick", "ytick", "legend"):
            if k in self.text_class.split():
                self.cur[k].append(data)
        for k in ("xlabel", "ylabel"):
            if k in self.text_class.split():
                self.cur[k] += data


def parse(path):
    p = Charts()
    p.feed(path.read_text())
    assert p.scripts == 0, f"{path}: a report has no script"
    assert "src=" not in path.read_text() and "http://" not in path.read_text().replace(
        'xmlns="http://www.w3.org/2000/svg"', ""), f"{path}: a report loads nothing from outside"
    return p


def chart(p, cid):
    got = [c for c in p.charts if c["id"] == cid]
    assert got, f"no chart {cid}; charts: {[c['id'] for c in p.charts]}"
    c = got[0]
    assert c["width"] == "100%" and c["viewBox"], c
    return c


def check_meta(p, command_part, experiment):
    assert p.meta.get("gpusched version"), p.meta
    assert command_part in p.meta.get("command", ""), p.meta
    assert p.meta.get("experiment") == experiment
    assert re.match(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", p.meta.get("date", "")), p.meta


def render(path, name, charts):
    """Opens path in Chromium, screenshots it, and checks each chart id is drawn at a real size."""
    with browser.chrome(width=1400, height=1000) as d:
        d.get(path.as_uri())
        shots = []
        for cid in charts:
            el = d.find_element("css selector", f'svg[data-chart="{cid}"]')
            d.execute_script("arguments[0].scrollIntoView()", el)
            size = el.size
            # width="100%": the chart spans the page body (1400 px less the margins), in proportion
            assert size["width"] > 1000 and size["height"] > 300, (cid, size)
            labels = [t.text for t in el.find_elements("css selector", "text.tick")]
            assert len([t for t in labels if t.strip()]) >= 6, (cid, labels)
            shot = browser.screenshot(d, f"{name}-{cid}")
            browser.assert_not_blank(shot)
            shots.append(shot)
        assert not [m for m in browser.browser_log(d).splitlines() if m.startswith("SEVERE")], browser.browser_log(d)
        return shots


def test_fgd_report(run, tmp_path):
    out = tmp_path / "fgd"
    r = run("sim", "--trace-dir", TRACE_DIR, "--experiment", "fgd", "--policy", "FGD,BestFit", "--seeds", "42-43",
            "--out", str(out), "-q")
    assert r.returncode == 0, r.stderr
    p = parse(out / "report.html")
    check_meta(p, "--policy FGD,BestFit --seeds 42-43", "fgd")
    assert p.meta.get("seeds") == "42, 43" and p.meta.get("tune") == "1.3", p.meta
    band = chart(p, "alloc-band")
    assert band["series"] == {"FGD", "BestFit"}
    assert band["xlabel"] == "arrived GPU demand (% of capacity)" and band["ylabel"] == "allocated GPU (% of capacity)"
    assert "100 %" in band["ytick"] and "50 %" in band["xtick"], band
    bars = chart(p, "alloc-bars")
    assert bars["series"] == {"mean ± std"}
    shapes = chart(p, "unscheduled-shapes")
    assert shapes["series"] == {"FGD", "BestFit"}
    assert "GPU share" in shapes["xtick"] and "8 GPUs" in shapes["xtick"]

    # The CSV/JSON next to the page agree with it.
    summary = json.loads((out / "summary.json").read_text())
    assert summary["meta"]["seeds"] == [42, 43] and "--seeds 42-43" in summary["meta"]["command"]
    pols = {x["policy"]: x for x in summary["policies"]}
    assert pols["FGD"]["runs"] == 2 and pols["FGD"]["mean"]["alloc_pct_at_100"] > pols["BestFit"]["mean"]["alloc_pct_at_100"]
    rows = list(csv.DictReader((out / "band.csv").open()))
    assert {r["policy"] for r in rows} == {"FGD", "BestFit"}
    for row in rows:
        assert float(row["alloc_pct_min"]) <= float(row["alloc_pct_mean"]) <= float(row["alloc_pct_max"])
    unsched = list(csv.DictReader((out / "unscheduled.csv").open()))
    per_run = {}
    for row in unsched:
        per_run[(row["policy"], row["seed"])] = per_run.get((row["policy"], row["seed"]), 0) + int(row["pods"])
    failed = {}
    for line in (out / "events.jsonl").open():
        e = json.loads(line)
        if e["event"] == "failed":
            failed[(e["policy"], str(e["seed"]))] = failed.get((e["policy"], str(e["seed"])), 0) + 1
    assert per_run == failed  # every failed pod has its shape

    render(out / "report.html", "fgd", ["alloc-band", "alloc-bars", "unscheduled-shapes"])


def replay_workload():
    docs = [
        {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
    ]
    for team, quota in (("team-a", 8), ("team-b", 8)):
        docs.append({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": team},
                     "spec": {"namespaceSelector": {}, "resourceGroups": [
                         {"coveredResources": ["cpu", "memory", "nvidia.com/gpu"], "flavors": [
                             {"name": "default-flavor", "resources": [
                                 {"name": "cpu", "nominalQuota": 100}, {"name": "memory", "nominalQuota": "1000Gi"},
                                 {"name": "nvidia.com/gpu", "nominalQuota": quota}]}]}]}})
        docs.append({"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
                     "metadata": {"name": team, "namespace": "default"}, "spec": {"clusterQueue": team}})
    docs.append({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                 "metadata": {"name": "gang", "namespace": "default"}, "spec": {"minMember": 2}})

    def pod(name, arrival, duration, gpus, labels):
        return {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default", "labels": labels,
                             "annotations": {"sim.gpusched.io/arrival": arrival, "sim.gpusched.io/duration": duration}},
                "spec": {"containers": [{"name": "c", "image": "i", "resources": {
                    "limits": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)}}}]}}

    for i in range(6):
        docs.append(pod(f"a-{i}", f"{10 * i}s", "30m", 4, {QUEUE_LABEL: "team-a"}))
    for i in range(4):
        docs.append(pod(f"b-{i}", f"{5 + 20 * i}s", "1h", 2, {QUEUE_LABEL: "team-b"}))
    docs.append(pod("gang-0", "0s", "2h", 2, {QUEUE_LABEL: "team-b", GROUP_LABEL: "gang"}))
    docs.append(pod("gang-1", "100s", "2h", 2, {QUEUE_LABEL: "team-b", GROUP_LABEL: "gang"}))
    docs.append(pod("too-big", "1m", "10m", 16, {QUEUE_LABEL: "team-a"}))
    return docs


def test_replay_report(run, tmp_path):
    (tmp_path / "workload.yaml").write_text(yaml.safe_dump_all(replay_workload()))
    out = tmp_path / "replay"
    r = run("sim", "--cluster", str(ROOT / "examples" / "sim" / "cluster.yaml"), "--workload",
            str(tmp_path / "workload.yaml"), "--experiment", "replay", "--out", str(out), "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    p = parse(out / "report.html")
    check_meta(p, "--experiment replay", "replay")
    q = chart(p, "wait-cdf-queue-0")
    assert q["series"] == {"team-a", "team-b"}, q
    assert q["ylabel"] == "pods of the queue started within (%)" and q["xlabel"].startswith("waiting time")
    assert "100 %" in q["ytick"] and all(re.search(r" (s|min|h)$", t) for t in q["xtick"]), q
    size = chart(p, "wait-cdf-size-0")
    assert {"2 GPUs", "4 GPUs", "other GPUs"} <= size["series"], size
    util = chart(p, "util")
    assert util["xlabel"] == "time (hours)" and all(t.endswith(" h") for t in util["xtick"]), util

    waits = {row["pod"]: row for row in csv.DictReader((out / "waits.csv").open())}
    assert waits["default/too-big"]["start"] == "", waits["default/too-big"]  # 16 GPUs: no node holds it
    assert waits["default/a-0"]["queue"] == "team-a" and waits["default/gang-1"]["group"] == "default/gang"
    queues = {row["queue"]: row for row in csv.DictReader((out / "queues.csv").open())}
    assert queues["team-a"]["never_started"] == "1" and queues["team-a"]["pods"] == "7", queues
    assert queues["team-b"]["pods"] == "6", queues
    gangs = list(csv.DictReader((out / "gangs.csv").open()))
    assert [g["group"] for g in gangs] == ["default/gang"] and gangs[0]["members"] == "2"
    text = (out / "report.html").read_text()
    assert "<td>default/too-big</td><td>team-a</td>" in text  # in the never-scheduled table
    # events.jsonl names the queue and group of the events that have them.
    ev = [json.loads(line) for line in (out / "events.jsonl").open()]
    assert any(e.get("group") == "default/gang" for e in ev) and any(e.get("queue") == "team-b" for e in ev)

    render(out / "report.html", "replay", ["wait-cdf-queue-0", "wait-cdf-size-0", "util"])


def test_tenants_report(run, tmp_path):
    out = tmp_path / "tenants"
    r = run("sim", "--experiment", "tenants", "--trace-dir", TRACE_DIR, "--speedup", "2000", "--node-fraction",
            "0.1", "--weights", "1,2,1", "--mode", "fair", "--out", str(out))
    assert r.returncode == 0, r.stderr
    p = parse(out / "tenants.html")
    check_meta(p, "--node-fraction 0.1 --weights 1,2,1", "tenants")
    used = chart(p, "tenants-used-0")
    assert used["series"] == {"tenant-a (weight 1)", "tenant-b (weight 2)", "tenant-c (weight 1)"}, used
    assert used["xlabel"] == "simulated time (hours)" and used["ylabel"] == "GPUs in use"
    # Readable axes: several ticks, in hours and GPUs (not just the two ends).
    assert len(used["xtick"]) >= 3 and all(t.endswith(" h") for t in used["xtick"]), used["xtick"]
    assert len(used["ytick"]) >= 3 and all(t.endswith(" GPUs") for t in used["ytick"]), used["ytick"]
    a = chart(p, "tenant-a-0")
    assert a["series"] == {"GPUs used", "fair-share entitlement"}
    jain = chart(p, "jain-0")
    assert "1.0" in jain["ytick"] and "0.4" in jain["ytick"], jain["ytick"]
    doc = json.loads((out / "tenants.json").read_text())
    assert doc["meta"]["experiment"] == "tenants" and doc["meta"]["seeds"] == [42]
    assert doc["results"][0]["mode"] == "fair" and doc["results"][0]["workloads"] > 0

    render(out / "tenants.html", "tenants", ["tenants-used-0", "tenant-b-0", "jain-0"])
