"""Independent peers for the device plugin API v1beta1, written with Debian's
python3-grpcio, to test both ends of gpusched against something that is not
gpusched:

- FakeKubelet: the kubelet side. Serves v1beta1.Registration on kubelet.sock;
  its Register handler dials the plugin back and asks for its options before
  answering (as kubelet does), then follows ListAndWatch on a thread.
- FakePlugin: the plugin side. Serves v1beta1.DevicePlugin, registers, and
  re-registers when kubelet.sock is created again.

The Python stubs are generated at test time from the repository's .proto with
grpc_tools, into a temporary directory: the proto is the single contract.
"""
import importlib
import os
import pathlib
import subprocess
import sys
import threading
import time
from concurrent import futures

import grpc

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTO = ROOT / "proto"


def load_stubs(outdir):
    """Generates api_pb2 / api_pb2_grpc into outdir and imports them."""
    os.makedirs(outdir, exist_ok=True)
    outdir = str(outdir)
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO}", f"--python_out={outdir}",
                    f"--grpc_python_out={outdir}", "deviceplugin/v1beta1/api.proto"], check=True)
    if outdir not in sys.path:
        sys.path.insert(0, outdir)
    pb = importlib.import_module("deviceplugin.v1beta1.api_pb2")
    pbg = importlib.import_module("deviceplugin.v1beta1.api_pb2_grpc")
    return pb, pbg


def wait_until(pred, timeout, step=0.02):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


def unix(path):
    return "unix://" + str(path)


class FakeKubelet:
    """kubelet's device-plugin manager, reduced to what a plugin can observe."""

    def __init__(self, plugin_dir, pb, pbg):
        self.dir = pathlib.Path(plugin_dir)
        self.pb, self.pbg = pb, pbg
        self.lock = threading.Condition()
        self.registrations = []      # RegisterRequest, in order
        self.options = {}            # resource -> DevicePluginOptions
        self.lists = []              # (monotonic time, [(ID, health, [numa])])
        self.channels = {}
        self.server = None
        self.stopping = False

    # --- Registration service ---
    def Register(self, req, ctx):
        if req.version != "v1beta1":
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "unsupported version")
        if "/" not in req.resource_name or req.resource_name.startswith("kubernetes.io/"):
            ctx.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad resource name")
        ch = grpc.insecure_channel(unix(self.dir / req.endpoint))
        grpc.channel_ready_future(ch).result(timeout=10)
        stub = self.pbg.DevicePluginStub(ch)
        opts = stub.GetDevicePluginOptions(self.pb.Empty(), timeout=10)
        with self.lock:
            self.registrations.append(req)
            self.options[req.resource_name] = opts
            old = self.channels.get(req.resource_name)
            self.channels[req.resource_name] = ch
            self.lock.notify_all()
        if old:
            old.close()
        threading.Thread(target=self._watch, args=(stub,), daemon=True).start()
        return self.pb.Empty()

    def _watch(self, stub):
        try:
            for resp in stub.ListAndWatch(self.pb.Empty()):
                devs = [(d.ID, d.health, [n.ID for n in d.topology.nodes]) for d in resp.devices]
                with self.lock:
                    self.lists.append((time.monotonic(), devs))
                    self.lock.notify_all()
        except grpc.RpcError:
            pass

    # --- life cycle ---
    def start(self):
        self.dir.mkdir(parents=True, exist_ok=True)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.pbg.add_RegistrationServicer_to_server(self, self.server)
        self.server.add_insecure_port(unix(self.dir / "kubelet.sock"))
        self.server.start()
        return self

    def stop(self):
        if self.server:
            self.server.stop(0).wait(5)
            self.server = None
        for ch in self.channels.values():
            ch.close()
        self.channels = {}
        try:
            (self.dir / "kubelet.sock").unlink()
        except FileNotFoundError:
            pass

    def restart(self):
        """What kubelet does on start: drop every socket in the directory."""
        self.stop()
        for p in self.dir.iterdir():
            if p.is_socket():
                p.unlink()
        time.sleep(0.2)
        return self.start()

    # --- queries ---
    def wait_registered(self, n, timeout=10):
        with self.lock:
            self.lock.wait_for(lambda: len(self.registrations) >= n, timeout)
            return len(self.registrations) >= n

    def latest(self):
        with self.lock:
            return self.lists[-1][1] if self.lists else None

    def wait_list(self, pred, timeout=5):
        with self.lock:
            ok = self.lock.wait_for(lambda: any(pred(l) for _, l in self.lists), timeout)
            for t, l in self.lists:
                if pred(l):
                    return t, l
            return None if not ok else None

    def stub(self, resource):
        return self.pbg.DevicePluginStub(self.channels[resource])


class FakePlugin:
    """A device plugin with a scripted device list."""

    def __init__(self, plugin_dir, pb, pbg, resource="example.com/gpu", endpoint="fake-gpu.sock", devices=None):
        self.dir = pathlib.Path(plugin_dir)
        self.pb, self.pbg = pb, pbg
        self.resource, self.endpoint = resource, endpoint
        self.devices = devices or []     # [(ID, numa)]
        self.unhealthy = set()
        self.cond = threading.Condition()
        self.version = 0
        self.allocate_calls = []
        self.preferred_calls = []
        self.registered = 0
        self.server = None
        self.done = threading.Event()
        self.watcher = None

    # --- DevicePlugin service ---
    def GetDevicePluginOptions(self, req, ctx):
        return self.pb.DevicePluginOptions(get_preferred_allocation_available=True)

    def _list(self):
        out = []
        for dev_id, numa in self.devices:
            health = "Unhealthy" if dev_id in self.unhealthy else "Healthy"
            topo = self.pb.TopologyInfo(nodes=[self.pb.NUMANode(ID=numa)]) if numa is not None else None
            out.append(self.pb.Device(ID=dev_id, health=health, topology=topo))
        return self.pb.ListAndWatchResponse(devices=out)

    def ListAndWatch(self, req, ctx):
        seen = -1
        while ctx.is_active() and not self.done.is_set():
            with self.cond:
                self.cond.wait_for(lambda: self.version != seen or self.done.is_set(), 0.2)
                if self.version == seen:
                    continue
                seen = self.version
                msg = self._list()
            yield msg

    def GetPreferredAllocation(self, req, ctx):
        self.preferred_calls.append(req)
        out = []
        for cr in req.container_requests:
            # Prefer must-include, then the highest IDs: an order gpusched's own
            # fallback (lowest first) would never produce, so its use is visible.
            ids = list(cr.must_include_deviceIDs)
            for d in sorted(cr.available_deviceIDs, reverse=True):
                if len(ids) >= cr.allocation_size:
                    break
                if d not in ids:
                    ids.append(d)
            out.append(self.pb.ContainerPreferredAllocationResponse(deviceIDs=ids))
        return self.pb.PreferredAllocationResponse(container_responses=out)

    def Allocate(self, req, ctx):
        self.allocate_calls.append(req)
        out = []
        for cr in req.container_requests:
            for d in cr.devices_ids:
                if d not in dict(self.devices) or d in self.unhealthy:
                    ctx.abort(grpc.StatusCode.FAILED_PRECONDITION, f"bad device {d}")
            out.append(self.pb.ContainerAllocateResponse(
                envs={"FAKE_DEVICES": ",".join(cr.devices_ids)},
                devices=[self.pb.DeviceSpec(container_path=f"/dev/fake-{d}", host_path=f"/dev/fake-{d}",
                                            permissions="rw") for d in cr.devices_ids],
                cdi_devices=[self.pb.CDIDevice(name=f"example.com/gpu={d}") for d in cr.devices_ids]))
        return self.pb.AllocateResponse(container_responses=out)

    def PreStartContainer(self, req, ctx):
        return self.pb.PreStartContainerResponse()

    # --- control ---
    def set_health(self, dev_id, healthy):
        with self.cond:
            (self.unhealthy.discard if healthy else self.unhealthy.add)(dev_id)
            self.version += 1
            self.cond.notify_all()

    def serve(self):
        if self.server:
            self.server.stop(0).wait(5)
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
        self.pbg.add_DevicePluginServicer_to_server(self, self.server)
        self.server.add_insecure_port(unix(self.dir / self.endpoint))
        self.server.start()

    def register(self, timeout=10):
        ch = grpc.insecure_channel(unix(self.dir / "kubelet.sock"))
        try:
            self.pbg.RegistrationStub(ch).Register(self.pb.RegisterRequest(
                version="v1beta1", endpoint=self.endpoint, resource_name=self.resource,
                options=self.pb.DevicePluginOptions(get_preferred_allocation_available=True)),
                timeout=timeout, wait_for_ready=True)
            self.registered += 1
        finally:
            ch.close()

    def _watch_kubelet(self):
        def ino():
            try:
                return os.stat(self.dir / "kubelet.sock").st_ino
            except FileNotFoundError:
                return None
        last = ino()
        while not self.done.wait(0.1):
            now = ino()
            if now is None:
                last = None   # gone: whatever appears next is a new kubelet
                continue
            if now != last or not (self.dir / self.endpoint).exists():
                try:
                    self.serve()
                    self.register()
                    last = now
                except grpc.RpcError:
                    pass

    def start(self):
        self.serve()
        self.register()
        self.watcher = threading.Thread(target=self._watch_kubelet, daemon=True)
        self.watcher.start()
        return self

    def stop(self):
        self.done.set()
        with self.cond:
            self.cond.notify_all()
        if self.watcher:
            self.watcher.join(2)
        if self.server:
            self.server.stop(0).wait(5)
        try:
            (self.dir / self.endpoint).unlink()
        except FileNotFoundError:
            pass
