"""`gpusched dra-plugin` against an independent kubelet (fake_kubelet.py, grpcio from the public
protos) and the strict fake kube-apiserver: registration, per-claim Prepare / Unprepare with
their errors, idempotency, a restart between Prepare and Unprepare (the checkpoint), the
published ResourceSlices, and a health stream update after a mock GPU fails.

Needs $GPUSCHED_BIN (the built binary) and Debian's python3-grpcio / python3-grpc-tools.
"""
import json
import os
import pathlib
import signal
import subprocess
import sys
import time

import pytest

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from fake_apiserver import start_fake  # noqa: E402
from fake_kubelet import FakeKubelet, Stubs, wait_until  # noqa: E402

DRIVER = "gpu.nvidia.com"
NODE = "node-a"
KIND = "k8s.gpu.nvidia.com/claim"
V1 = "/apis/resource.k8s.io/v1"


def binary():
    b = os.environ.get("GPUSCHED_BIN")
    if not b or not os.access(b, os.X_OK):
        raise AssertionError("GPUSCHED_BIN must name the built gpusched binary")
    return b


class Env:
    def __init__(self, tmp, fake):
        self.tmp, self.fake = tmp, fake
        self.plugins, self.registry, self.cdi = tmp / "plugins", tmp / "registry", tmp / "cdi"
        self.proc = None
        self.api = fake.session()

    def start(self, mock="4xH100-80GB"):
        self.log = open(self.tmp / "plugin.log", "a")
        self.proc = subprocess.Popen([binary(), "dra-plugin", "--mock", mock, "--node-name", NODE,
                                      "--plugins-dir", str(self.plugins), "--registry-dir", str(self.registry),
                                      "--cdi-dir", str(self.cdi), "--kubeconfig", self.fake.kubeconfig,
                                      "--log-level", "debug"], stdout=self.log, stderr=self.log)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise AssertionError("dra-plugin did not stop on SIGTERM")
            self.log.close()
            return rc
        return None

    def claim(self, name, results=None, node=NODE, ns="default"):
        """Creates a claim; with results [(request, pool, device)] also its allocation."""
        body = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": ns},
                "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                                                "count": 2}}]}}}
        r = self.api.post(f"{self.fake.url}{V1}/namespaces/{ns}/resourceclaims", json=body, timeout=10)
        assert r.status_code == 201, r.text
        obj = r.json()
        if results is not None:
            self.allocate(obj, results, node)
        return obj["metadata"]["uid"]

    def allocate(self, obj_or_name, results, node=NODE, ns="default"):
        name = obj_or_name if isinstance(obj_or_name, str) else obj_or_name["metadata"]["name"]
        obj = self.api.get(f"{self.fake.url}{V1}/namespaces/{ns}/resourceclaims/{name}", timeout=10).json()
        obj["status"] = {"allocation": {
            "devices": {"results": [{"request": q, "driver": DRIVER, "pool": p, "device": d} for q, p, d in results]},
            "nodeSelector": {"nodeSelectorTerms": [{"matchFields": [
                {"key": "metadata.name", "operator": "In", "values": [node]}]}]}}}
        r = self.api.put(f"{self.fake.url}{V1}/namespaces/{ns}/resourceclaims/{name}/status", json=obj, timeout=10)
        assert r.status_code == 200, r.text

    def slices(self):
        r = self.api.get(f"{self.fake.url}{V1}/resourceslices", timeout=10)
        assert r.status_code == 200, r.text
        return r.json()["items"]


@pytest.fixture
def env(tmp_path):
    fake = start_fake(str(tmp_path / "fake"))
    e = Env(tmp_path, fake)
    yield e
    e.stop()
    fake.stop()


@pytest.fixture(scope="module")
def stubs(tmp_path_factory):
    return Stubs(tmp_path_factory.mktemp("stubs"))


def uuid_of(slices, device):
    for s in slices:
        for d in s["spec"]["devices"]:
            if d["name"] == device:
                a = d["attributes"]
                return (a.get("uuid") or a.get(f"{DRIVER}/uuid"))["string"]
    raise AssertionError(f"device {device} not in the published slices")


def test_register_prepare_restart_unprepare(env, stubs):
    env.start()
    kubelet = FakeKubelet(env.registry, stubs)
    try:
        p = kubelet.plugin(DRIVER)
        assert p.info.type == "DRAPlugin" and p.info.name == DRIVER
        assert p.info.endpoint == str(env.plugins / DRIVER / "dra.sock")
        assert list(p.info.supported_versions) == ["v1.DRAPlugin", "v1beta1.DRAPlugin"]
        assert (env.registry / f"{DRIVER}-reg.sock").exists()

        slices = wait_until(lambda: env.slices(), 10)
        assert slices and all(s["spec"]["nodeName"] == NODE and s["spec"]["pool"]["name"] == NODE for s in slices)
        names = sorted(d["name"] for s in slices for d in s["spec"]["devices"])
        assert {"gpu-0", "gpu-1", "gpu-2", "gpu-3"} <= set(names)

        ok = env.claim("two", [("gpus", NODE, "gpu-1"), ("gpus", NODE, "gpu-2")])
        pending = env.claim("pending")
        elsewhere = env.claim("elsewhere", [("gpus", "node-b", "gpu-0")], node="node-b")
        missing_dev = env.claim("nodev", [("gpus", NODE, "gpu-9")])
        ans = p.prepare([("default", ok, "two"), ("default", pending, "pending"),
                         ("default", elsewhere, "elsewhere"), ("default", missing_dev, "nodev"),
                         ("default", "no-such-uid", "ghost"), ("default", "wrong-uid", "two")])
        assert set(ans) == {ok, pending, elsewhere, missing_dev, "no-such-uid", "wrong-uid"}
        assert ans[ok].error == ""
        got = [(list(d.request_names), d.pool_name, d.device_name, list(d.cdi_device_ids)) for d in ans[ok].devices]
        assert got == [(["gpus"], NODE, "gpu-1", [f"{KIND}={ok}-gpu-1"]),
                       (["gpus"], NODE, "gpu-2", [f"{KIND}={ok}-gpu-2"])]
        assert "not allocated" in ans[pending].error and not ans[pending].devices
        assert "allocated to node node-b" in ans[elsewhere].error
        assert "gpu-9 is not a device" in ans[missing_dev].error
        assert "not found" in ans["no-such-uid"].error
        assert "uid is" in ans["wrong-uid"].error and "wrong-uid" in ans["wrong-uid"].error

        spec_path = env.cdi / f"k8s.gpu.nvidia.com-claim_{ok}.json"
        spec = json.loads(spec_path.read_text())
        assert spec["kind"] == KIND
        devs = {d["name"]: d["containerEdits"] for d in spec["devices"]}
        assert set(devs) == {f"{ok}-gpu-1", f"{ok}-gpu-2"}
        assert devs[f"{ok}-gpu-1"]["env"] == [f"NVIDIA_VISIBLE_DEVICES={uuid_of(slices, 'gpu-1')}"]
        assert devs[f"{ok}-gpu-2"]["deviceNodes"][0]["path"] == "/dev/nvidia2"

        # Idempotent, in both versions; a changed claim is not read again once prepared.
        env.allocate("two", [("gpus", NODE, "gpu-3")])
        for version in ("v1", "v1beta1"):
            again = p.prepare([("default", ok, "two")], version=version)
            assert [list(d.cdi_device_ids) for d in again[ok].devices] == [[f"{KIND}={ok}-gpu-1"],
                                                                           [f"{KIND}={ok}-gpu-2"]]

        # A restart between Prepare and Unprepare: the checkpoint answers for the claim.
        before = kubelet.registrations
        assert env.stop() == 0
        assert not (env.registry / f"{DRIVER}-reg.sock").exists()
        assert not (env.plugins / DRIVER / "dra.sock").exists()
        assert wait_until(lambda: not env.slices(), 5) == True  # noqa: E712  (deleted on a clean exit)
        ckpt = json.loads((env.plugins / DRIVER / "checkpoint.json").read_text())
        assert ok in ckpt["claims"] and ckpt["node"] == NODE
        env.start()
        p = wait_until(lambda: kubelet.plugins.get(DRIVER) if kubelet.registrations > before else None, 20)
        assert p, "the restarted plugin did not register again"
        again = p.prepare([("default", ok, "two")])
        assert [d.device_name for d in again[ok].devices] == ["gpu-1", "gpu-2"]
        un = p.unprepare([("default", ok, "two"), ("default", "never-prepared", "x")])
        assert un[ok].error == "" and un["never-prepared"].error == ""
        assert not spec_path.exists()
        assert ok not in json.loads((env.plugins / DRIVER / "checkpoint.json").read_text())["claims"]
        assert p.unprepare([("default", ok, "two")])[ok].error == ""
        # Prepared again after the unprepare: the claim is read anew (now gpu-3).
        fresh = p.prepare([("default", ok, "two")])
        assert [d.device_name for d in fresh[ok].devices] == ["gpu-3"]
    finally:
        kubelet.stop()


def test_refused_registration_is_retried(env, stubs):
    kubelet = FakeKubelet(env.registry, stubs)
    kubelet.refuse_next = "simulated: kubelet not ready"
    try:
        env.start()
        assert kubelet.plugin(DRIVER, timeout=30)
        assert kubelet.refusals and kubelet.refusals[0][1] == "simulated: kubelet not ready"
    finally:
        kubelet.stop()
    assert "refused the registration" in (env.tmp / "plugin.log").read_text()


def test_health_stream_follows_a_failing_gpu(env, stubs):
    env.start(mock="2xH100-80GB,xid=79@gpu1@t=2s")
    kubelet = FakeKubelet(env.registry, stubs)
    try:
        p = kubelet.plugin(DRIVER)
        p.watch_health()
        first = wait_until(lambda: p.health[0] if p.health else None, 10)
        assert first and sorted((d, h) for _, d, h, _ in first) == [("gpu-0", "HEALTHY"), ("gpu-1", "HEALTHY")]
        assert all(pool == NODE for pool, _, _, _ in first)

        def unhealthy():
            for resp in p.health:
                for _, d, h, msg in resp:
                    if d == "gpu-1" and h == "UNHEALTHY":
                        return msg or "?"
            return None
        msg = wait_until(unhealthy, 15)
        assert msg, f"no UNHEALTHY update for gpu-1: {p.health}"
        assert "79" in msg
        last = {d: h for _, d, h, _ in p.health[-1]}
        assert last == {"gpu-0": "HEALTHY", "gpu-1": "UNHEALTHY"}
    finally:
        kubelet.stop()


def test_bad_flags_name_the_flag():
    r = subprocess.run([binary(), "dra-plugin", "--mock", "1xH100-80GB"], capture_output=True, text=True)
    assert r.returncode == 2 and "--node-name is required" in r.stderr
    r = subprocess.run([binary(), "dra-plugin", "--node-name", "n"], capture_output=True, text=True)
    assert r.returncode == 2 and "--mock SPEC and --nvml" in r.stderr
    r = subprocess.run([binary(), "dra-plugin", "--node-name", "n", "--mock", "1xH100-80GB", "--driver", "x.io"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and '"x.io" is not served' in r.stderr


def test_token_file_errors(tmp_path):
    empty = tmp_path / "empty.token"
    empty.write_text("\n")
    base = [binary(), "dra-plugin", "--node-name", "n", "--mock", "1xH100-80GB"]
    r = subprocess.run(base + ["--token-file", str(empty), "--kubeconfig", "/nonexistent"], capture_output=True,
                       text=True)
    assert r.returncode == 2 and f'--token-file "{empty}": the file is empty' in r.stderr
    tok = tmp_path / "t.token"
    tok.write_text("abc\n")
    r = subprocess.run(base + ["--token-file", str(tok)], capture_output=True, text=True)
    assert r.returncode == 2 and "--token-file needs --kubeconfig" in r.stderr


def test_unreadable_checkpoint_is_refused(tmp_path):
    d = tmp_path / "plugins" / DRIVER
    d.mkdir(parents=True)
    (d / "checkpoint.json").write_text('{"version": 2}')
    r = subprocess.run([binary(), "dra-plugin", "--mock", "1xH100-80GB", "--node-name", NODE,
                        "--plugins-dir", str(tmp_path / "plugins"), "--registry-dir", str(tmp_path / "reg"),
                        "--cdi-dir", str(tmp_path / "cdi")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "checkpoint" in r.stderr and "version: want 1" in r.stderr


def test_removed_sockets_are_served_again(env, stubs):
    """A kubelet restart wipes its directories: the plugin serves both sockets again and registers anew."""
    env.start()
    kubelet = FakeKubelet(env.registry, stubs)
    try:
        kubelet.plugin(DRIVER)
        before = kubelet.registrations
        (env.registry / f"{DRIVER}-reg.sock").unlink()
        (env.plugins / DRIVER / "dra.sock").unlink()
        assert wait_until(lambda: kubelet.registrations > before, 10), "no new registration after the wipe"
        uid = env.claim("after-wipe", [("gpus", NODE, "gpu-0")])
        ans = kubelet.plugin(DRIVER).prepare([("default", uid, "after-wipe")])
        assert ans[uid].error == "" and [d.device_name for d in ans[uid].devices] == ["gpu-0"]
    finally:
        kubelet.stop()
