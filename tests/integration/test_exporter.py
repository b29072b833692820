"""End-to-end tests of `gpusched exporter` and `gpusched discover` on mock GPUs.

The exporter is scraped directly with urllib, then by a real Prometheus server
(Debian's `prometheus`, started here on a free loopback port with a temporary
config and a short scrape interval); its HTTP API must return one
DCGM_FI_DEV_GPU_UTIL series per mock GPU with dcgm-exporter's labels.
"""
import json
import os
import pathlib
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from stack import require_tool

PROMETHEUS = "/usr/bin/prometheus"
SERIES = re.compile(r'^([A-Za-z_:][A-Za-z0-9_:]*)\{(.*)\} (\S+)$')
LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')
DCGM_LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url, timeout=5):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, "", e.read().decode()


def wait_until(fn, timeout=20, step=0.1):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(step)
    return None


def parse(text):
    """Prometheus text -> {name: [(labels dict in order, value)]}, checking TYPE lines."""
    out, types = {}, {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        if line.startswith("#") or not line:
            continue
        m = SERIES.match(line)
        if not m:
            name, value = line.split(" ")
            out.setdefault(name, []).append(({}, float(value)))
            continue
        assert m.group(1) in types, f"series before its TYPE: {line}"
        labels = dict(LABEL.findall(m.group(2)))
        out.setdefault(m.group(1), []).append((labels, float(m.group(3))))
    return out, types


@pytest.fixture
def exporter(gpusched_bin):
    procs = []

    def start(*args):
        port = free_port()
        p = subprocess.Popen([gpusched_bin, "exporter", "--listen", f"127.0.0.1:{port}", *args],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(p)
        ok = wait_until(lambda: p.poll() is None and get_quiet(f"http://127.0.0.1:{port}/healthz") == 200)
        assert ok, f"exporter did not come up: {p.poll()} {p.stderr.read() if p.poll() is not None else ''}"
        return p, port

    yield start
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def get_quiet(url):
    try:
        return get(url, timeout=1)[0]
    except OSError:
        return None


def test_scrape_metric_names_and_labels(exporter):
    _, port = exporter("--mock", "8xH100-80GB,host=node-a", "--interval", "200ms")
    status, ctype, body = get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200
    assert ctype.startswith("text/plain; version=0.0.4")
    series, types = parse(body)
    for name in ["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_TEMP",
                 "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
                 "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "DCGM_FI_DEV_SM_CLOCK"]:
        assert len(series[name]) == 8, name
    assert types["DCGM_FI_DEV_GPU_UTIL"] == "gauge"
    assert types["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "counter"
    gpus = set()
    for labels, value in series["DCGM_FI_DEV_GPU_UTIL"]:
        assert list(labels)[:7] == DCGM_LABELS
        assert labels["modelName"] == "NVIDIA H100 80GB HBM3"
        assert labels["Hostname"] == "node-a"
        assert labels["device"] == f"nvidia{labels['gpu']}"
        assert labels["UUID"].startswith("GPU-")
        assert 0 <= value <= 100
        gpus.add(labels["gpu"])
    assert gpus == {str(i) for i in range(8)}
    assert get(f"http://127.0.0.1:{port}/nope")[0] == 404


def test_fault_script_marks_gpu(exporter):
    _, port = exporter("--mock", "4xA100-40GB,numa=2,nvlink=pairs", "--interval", "200ms",
                       "--faults", "xid=79@gpu3@t=300ms")

    def xid_seen():
        series, _ = parse(get(f"http://127.0.0.1:{port}/metrics")[2])
        xid = {l["gpu"]: (l, v) for l, v in series["DCGM_FI_DEV_XID_ERRORS"]}
        return xid if xid["3"][1] == 79 else None

    xid = wait_until(xid_seen, timeout=10)
    assert xid, "Xid 79 never showed"
    assert xid["3"][0]["err_code"] == "79"
    assert xid["0"][1] == 0
    series, _ = parse(get(f"http://127.0.0.1:{port}/metrics")[2])
    health = {l["gpu"]: v for l, v in series["gpusched_gpu_healthy"]}
    assert health == {"0": 1, "1": 1, "2": 1, "3": 0}


def test_sigterm_exits_cleanly(exporter):
    p, _ = exporter("--mock", "2xT4", "--interval", "100ms")
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 0
    assert "exporter stopping" in p.stderr.read()


def test_bad_arguments(run):
    r = run("exporter", "--mock", "3xNOPE", "--listen", "127.0.0.1:0")
    assert r.returncode == 2 and "unknown GPU model" in r.stderr
    r = run("exporter", "--mock", "2xT4", "--listen", "garbage")
    assert r.returncode == 2 and "HOST:PORT" in r.stderr
    r = run("exporter", "--mock", "2xT4", "--interval", "soon")
    assert r.returncode == 2


def test_discover_outputs(run):
    r = run("discover", "--mock", "4xA100-40GB,numa=2,nvlink=pairs", "--no-timestamp")
    assert r.returncode == 0, r.stderr
    labels = dict(line.split("=", 1) for line in r.stdout.splitlines())
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert labels["nvidia.com/gpu.count"] == "4"
    assert labels["feature.node.kubernetes.io/pci-10de.present"] == "true"
    r = run("discover", "--mock", "4xA100-40GB,numa=2,nvlink=pairs", "-o", "json")
    inv = json.loads(r.stdout)
    assert [g["numaNode"] for g in inv["gpus"]] == [0, 0, 1, 1]
    assert inv["gpus"][0]["nvlink"][0]["peer"] == 1
    assert "nvidia.com/gfd.timestamp" in inv["labels"]
    r = run("discover", "--mock", "4xA100-40GB,numa=2", "-o", "nrt")
    assert "kind: NodeResourceTopology" in r.stdout and "name: node-1" in r.stdout
    with tempfile.TemporaryDirectory() as d:
        path = pathlib.Path(d) / "nrt.yaml"
        path.write_text(r.stdout)
        v = run("validate", "-f", str(path))
        assert v.returncode == 0, v.stdout + v.stderr
    r = run("discover", "--mock", "2xT4", "-o", "xml")
    assert r.returncode == 2


@require_tool(PROMETHEUS, "prometheus")
def test_prometheus_scrapes_exporter(exporter, tmp_path):
    _, port = exporter("--mock", "8xH100-80GB", "--interval", "200ms")
    prom_port = free_port()
    (tmp_path / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: gpu\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{port}']\n")
    prom = subprocess.Popen(
        [PROMETHEUS, f"--config.file={tmp_path / 'prometheus.yml'}", f"--storage.tsdb.path={tmp_path / 'data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        query = urllib.parse.urlencode({"query": "DCGM_FI_DEV_GPU_UTIL"})
        url = f"http://127.0.0.1:{prom_port}/api/v1/query?{query}"

        def eight_series():
            if prom.poll() is not None:
                return None
            try:
                status, _, body = get(url, timeout=2)
            except OSError:
                return None
            if status != 200:
                return None
            result = json.loads(body)["data"]["result"]
            return result if len(result) == 8 else None

        result = wait_until(eight_series, timeout=60, step=0.5)
        assert result, f"prometheus never returned 8 series (exit {prom.poll()})"
        assert sorted(int(r["metric"]["gpu"]) for r in result) == list(range(8))
        for r in result:
            m = r["metric"]
            assert m["job"] == "gpu"
            assert m["modelName"] == "NVIDIA H100 80GB HBM3"
            for key in DCGM_LABELS:
                assert key in m
            assert 0 <= float(r["value"][1]) <= 100
        targets = json.loads(get(f"http://127.0.0.1:{prom_port}/api/v1/targets")[2])
        assert targets["data"]["activeTargets"][0]["health"] == "up"
    finally:
        prom.terminate()
        try:
            prom.wait(timeout=15)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait()
        shutil.rmtree(tmp_path / "data", ignore_errors=True)
