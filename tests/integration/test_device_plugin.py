"""End-to-end tests of both ends of the kubelet device plugin API v1beta1.

Part 1: `gpusched device-plugin` against FakeKubelet (Python grpcio).
Part 2: `gpusched kubelet-sim` (our device manager) against FakePlugin.
The peers live in dp_peers.py; the Python stubs are generated from our .proto
into a temporary directory. Sockets live in short temporary directories under
/tmp (unix socket paths are limited to 107 bytes); every wait is bounded.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

grpc = pytest.importorskip("grpc")
pytest.importorskip("grpc_tools")

import dp_peers as P  # noqa: E402

MOCK8 = "8xH100-80GB,numa=2,nvlink=islands:2"
RES = "nvidia.com/gpu"


@pytest.fixture(scope="module")
def stubs():
    d = tempfile.mkdtemp(prefix="gsstub", dir="/tmp")
    yield P.load_stubs(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def tmp():
    d = pathlib.Path(tempfile.mkdtemp(prefix="gsdp", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def stop(proc, sig=signal.SIGTERM):
    if proc.poll() is None:
        proc.send_signal(sig)
    try:
        return proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
        raise


# --- Part 1: our device plugin, Python kubelet -------------------------------------------

class Plugin:
    def __init__(self, gpusched_bin, tmp, mock=MOCK8, extra=()):
        self.dir = tmp / "dp"
        self.cdi = tmp / "cdi"
        self.proc = subprocess.Popen(
            [gpusched_bin, "device-plugin", "--mock", mock, "--plugin-dir", str(self.dir),
             "--cdi-spec-dir", str(self.cdi), "--log-level", "warn", *extra])
        self.sock = self.dir / "gpusched-gpu.sock"

    def wait_socket(self, timeout=5):
        return P.wait_until(lambda: self.sock.exists(), timeout)


@pytest.fixture
def kubelet_and_plugin(gpusched_bin, tmp, stubs):
    pb, pbg = stubs
    started = []

    def make(mock=MOCK8, extra=()):
        k = P.FakeKubelet(tmp / "dp", pb, pbg).start()
        p = Plugin(gpusched_bin, tmp, mock, extra)
        started.append((k, p))
        assert k.wait_registered(1, 10), "plugin never registered"
        assert P.wait_until(k.latest, 5), "no ListAndWatch list"
        return k, p

    yield make
    for k, p in started:
        stop(p.proc)
        k.stop()


def test_registration_and_list(kubelet_and_plugin):
    k, p = kubelet_and_plugin()
    reg = k.registrations[0]
    assert reg.version == "v1beta1"
    assert reg.resource_name == RES
    assert reg.endpoint == "gpusched-gpu.sock"
    opts = k.options[RES]
    assert opts.get_preferred_allocation_available and not opts.pre_start_required
    devs = k.latest()
    assert len(devs) == 8
    assert all(h == "Healthy" for _, h, _ in devs)
    assert all(d.startswith("GPU-") and len(d) <= 63 for d, _, _ in devs)
    assert sorted(n[0] for _, _, n in devs) == [0, 0, 0, 0, 1, 1, 1, 1]
    # The CDI spec was written next to it, in the documented shape.
    spec = json.loads((p.cdi / "nvidia.com-gpu.json").read_text())
    assert spec["kind"] == RES and spec["cdiVersion"] == "0.5.0"
    names = {d["name"] for d in spec["devices"]}
    assert {d for d, _, _ in devs} <= names and "all" in names


def test_health_flip_within_a_second(gpusched_bin, tmp, stubs):
    pb, pbg = stubs
    k = P.FakeKubelet(tmp / "dp", pb, pbg).start()
    p = Plugin(gpusched_bin, tmp, MOCK8 + ",xid=79@gpu3@t=3s")
    try:
        assert p.wait_socket()
        t_ready = time.monotonic()  # the mock opened before the socket appeared
        assert k.wait_registered(1, 10)
        hit = k.wait_list(lambda l: any(h == "Unhealthy" for _, h, _ in l), 8)
        assert hit, "the Xid never reached ListAndWatch"
        t_seen, devs = hit
        assert t_seen - t_ready < 3.0 + 1.0
        bad = [d for d, h, _ in devs if h == "Unhealthy"]
        assert len(bad) == 1
        # An unhealthy device is refused by Allocate.
        with pytest.raises(grpc.RpcError) as e:
            k.stub(RES).Allocate(pb.AllocateRequest(
                container_requests=[pb.ContainerAllocateRequest(devices_ids=bad)]))
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    finally:
        stop(p.proc)
        k.stop()


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_allocate(kubelet_and_plugin, stubs, n):
    pb, _ = stubs
    k, _ = kubelet_and_plugin()
    ids = [d for d, _, _ in k.latest()][:n]
    r = k.stub(RES).Allocate(pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)]))
    c = r.container_responses[0]
    assert c.envs["NVIDIA_VISIBLE_DEVICES"] == ",".join(ids)
    paths = [d.host_path for d in c.devices]
    assert paths[:3] == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"]
    assert len(paths) == 3 + n
    assert all(d.permissions == "rw" for d in c.devices)


def test_allocate_cdi(kubelet_and_plugin, stubs):
    pb, _ = stubs
    k, _ = kubelet_and_plugin(extra=("--device-list-strategy", "cdi-cri,cdi-annotations"))
    ids = [d for d, _, _ in k.latest()][:2]
    r = k.stub(RES).Allocate(pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)]))
    c = r.container_responses[0]
    assert [d.name for d in c.cdi_devices] == [f"{RES}={i}" for i in ids]
    assert "NVIDIA_VISIBLE_DEVICES" not in c.envs and not c.devices
    (key, val), = c.annotations.items()
    assert key.startswith("cdi.k8s.io/") and val == ",".join(f"{RES}={i}" for i in ids)


def test_refuses_unknown_ids(kubelet_and_plugin, stubs):
    pb, _ = stubs
    k, _ = kubelet_and_plugin()
    with pytest.raises(grpc.RpcError) as e:
        k.stub(RES).Allocate(pb.AllocateRequest(
            container_requests=[pb.ContainerAllocateRequest(devices_ids=["GPU-not-on-this-node"])]))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    assert "GPU-not-on-this-node" in e.value.details()


def test_preferred_two_islands(kubelet_and_plugin, stubs):
    pb, _ = stubs
    k, _ = kubelet_and_plugin()
    ids = [d for d, _, _ in k.latest()]
    island = {d: i // 4 for i, d in enumerate(ids)}  # islands:2 on 8 GPUs = GPUs 0-3 and 4-7
    stub = k.stub(RES)

    def ask(avail, size, must=()):
        r = stub.GetPreferredAllocation(pb.PreferredAllocationRequest(container_requests=[
            pb.ContainerPreferredAllocationRequest(available_deviceIDs=avail, must_include_deviceIDs=list(must),
                                                   allocation_size=size)]))
        return list(r.container_responses[0].deviceIDs)

    four = ask(ids, 4)
    assert len(four) == 4 and len({island[d] for d in four}) == 1
    # Island 0 half used: a pair goes where it fits best, keeping island 1 whole.
    avail = ids[2:]
    pair = ask(avail, 2)
    assert set(pair) == set(ids[2:4])
    # Must-include in island 1 pulls the choice there.
    pair = ask(avail, 2, must=[ids[6]])
    assert ids[6] in pair and {island[d] for d in pair} == {1}
    assert len(ask(ids, 8)) == 8


def test_kubelet_restart_reregisters(kubelet_and_plugin):
    k, p = kubelet_and_plugin()
    k.restart()   # wipes every socket, recreates kubelet.sock
    assert k.wait_registered(2, 10), "no registration after the kubelet restart"
    assert p.sock.exists()
    n = len(k.lists)
    assert P.wait_until(lambda: len(k.lists) > n, 5), "no ListAndWatch after re-registration"


def test_sigterm_cleanup(kubelet_and_plugin):
    k, p = kubelet_and_plugin()
    assert p.sock.exists()
    t = time.monotonic()
    assert stop(p.proc) == 0
    assert time.monotonic() - t < 5
    assert not p.sock.exists()


def test_replicas(kubelet_and_plugin, stubs):
    pb, _ = stubs
    k, _ = kubelet_and_plugin(mock="2xA100-40GB", extra=("--replicas", "3"))
    ids = [d for d, _, _ in k.latest()]
    assert len(ids) == 6 and all("::" in d for d in ids)
    r = k.stub(RES).Allocate(pb.AllocateRequest(
        container_requests=[pb.ContainerAllocateRequest(devices_ids=ids[:2])]))
    assert r.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == ids[0].split("::")[0]


# --- Part 2: our device manager, Python device plugin -------------------------------------

class KubeletSim:
    def __init__(self, gpusched_bin, plugin_dir, *extra):
        self.proc = subprocess.Popen([gpusched_bin, "kubelet-sim", "--plugin-dir", str(plugin_dir),
                                      "--log-level", "warn", *extra],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        ready = json.loads(self.proc.stdout.readline())
        assert ready["ready"]

    def q(self, **req):
        self.proc.stdin.write(json.dumps(req) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def resource(self, name):
        return self.q(op="resources")["resources"].get(name)

    def admit(self, pod, requests, devices=None, name="main"):
        c = {"name": name, "requests": requests}
        if devices:
            c["devices"] = devices
        return self.q(op="admit", pod=pod, containers=[c])


FAKE = "example.com/gpu"


def fake_devices():
    return [(f"dev-{i}", i // 4) for i in range(8)]


@pytest.fixture
def sim_and_plugin(gpusched_bin, tmp, stubs):
    pb, pbg = stubs
    made = []

    def make(*extra):
        s = KubeletSim(gpusched_bin, tmp / "dp", *extra)
        f = P.FakePlugin(tmp / "dp", pb, pbg, resource=FAKE, devices=fake_devices()).start()
        made.append((s, f))
        assert P.wait_until(lambda: (s.resource(FAKE) or {}).get("connected"), 5)
        return s, f

    yield make
    for s, f in made:
        f.stop()
        stop(s.proc)


def test_dm_registration_and_health(sim_and_plugin):
    s, f = sim_and_plugin()
    r = s.resource(FAKE)
    assert sorted(r["healthy"]) == sorted(d for d, _ in fake_devices())
    assert r["preferred"] and r["numa"]["dev-5"] == 1
    # Pushed by ListAndWatch, not found by a later re-list: seen within a few seconds, a bound that
    # leaves a loaded machine's gRPC threads room where 1 s left little.
    f.set_health("dev-2", False)
    assert P.wait_until(lambda: s.resource(FAKE)["unhealthy"] == ["dev-2"], 5.0)


@pytest.mark.parametrize("n", [1, 2, 4, 8])
def test_dm_allocate(sim_and_plugin, n):
    s, f = sim_and_plugin()
    r = s.admit("pod", {FAKE: n})
    assert r["ok"], r
    rec, = r["allocations"]
    assert len(rec["devices"]) == n
    assert rec["response"]["envs"]["FAKE_DEVICES"] == ",".join(rec["devices"])
    assert f.allocate_calls[-1].container_requests[0].devices_ids == rec["devices"]
    # The plugin's preference (highest IDs first) was asked and used.
    assert f.preferred_calls and rec["devices"] == sorted(rec["devices"], reverse=True)


def test_dm_topology_and_refusals(sim_and_plugin):
    s, f = sim_and_plugin("--numa", "2", "--topology-policy", "single-numa-node")
    r = s.admit("a", {FAKE: 3})
    assert r["ok"]
    nodes = {int(d.split("-")[1]) // 4 for d in r["allocations"][0]["devices"]}
    assert len(nodes) == 1
    assert not s.admit("b", {FAKE: 5})["ok"]          # never on one node
    r = s.admit("c", {FAKE: 1}, devices={FAKE: ["dev-missing"]})
    assert not r["ok"] and "dev-missing" in r["error"]
    f.set_health("dev-7", False)
    assert P.wait_until(lambda: "dev-7" in s.resource(FAKE)["unhealthy"], 1.0)
    r = s.admit("d", {FAKE: 1}, devices={FAKE: ["dev-7"]})
    assert not r["ok"] and "unhealthy" in r["error"]
    r = s.admit("e", {FAKE: 1}, devices={FAKE: ["dev-6"]})
    assert r["ok"] and r["allocations"][0]["devices"] == ["dev-6"]


def test_dm_restart_keeps_allocations_and_plugin_reregisters(sim_and_plugin, gpusched_bin, tmp):
    s, f = sim_and_plugin()
    r = s.admit("keep", {FAKE: 2})
    assert r["ok"]
    kept = r["allocations"][0]["devices"]
    assert stop(s.proc) == 0
    assert not (tmp / "dp" / "kubelet.sock").exists()   # SIGTERM cleanup
    s2 = KubeletSim(gpusched_bin, tmp / "dp")
    try:
        allocs = s2.q(op="allocations")["allocations"]
        assert [a["devices"] for a in allocs] == [kept]
        assert P.wait_until(lambda: (s2.resource(FAKE) or {}).get("connected"), 5), "plugin did not re-register"
        assert f.registered >= 2
        assert sorted(s2.resource(FAKE)["allocated"]) == sorted(kept)
    finally:
        stop(s2.proc)
