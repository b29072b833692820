"""An independent kubelet for DRA plugins, written with Debian's python3-grpcio from the
public protos in proto/dra/ (stubs generated at test time with grpc_tools, so the .proto files
are the single contract):

- watches the plugin registry directory for `*.sock` (not dot files), as the kubelet's plugin
  watcher does;
- on a new socket calls pluginregistration.Registration/GetInfo, checks what a DRA plugin
  must say (type DRAPlugin, its driver name, an endpoint, a DRAPlugin version it knows), and
  answers NotifyRegistrationStatus (plugin_registered true, or false with the reason);
- calls NodePrepareResources / NodeUnprepareResources in the newest version both sides
  speak (v1.DRAPlugin before v1beta1.DRAPlugin), and follows
  v1.DRAResourceHealth/NodeWatchResources on a thread.

It is a peer for tests, not a kubelet: no pods, no CRI.
"""
import importlib
import os
import pathlib
import subprocess
import sys
import threading
import time

import grpc

ROOT = pathlib.Path(__file__).resolve().parents[2]
PROTO = ROOT / "proto"
FILES = ["dra/v1/api.proto", "dra/v1beta1/api.proto", "dra/health/v1/api.proto",
         "dra/pluginregistration/v1/api.proto"]


class Stubs:
    """The generated modules: v1, v1beta1, health, reg (each a (pb2, pb2_grpc) pair)."""

    def __init__(self, outdir):
        os.makedirs(outdir, exist_ok=True)
        outdir = str(outdir)
        # Debian's grpc_tools predates proto3 `optional` (v1's share_id): the copy compiled here
        # drops the word, which leaves the field and its number as they are.
        src = os.path.join(outdir, "proto")
        for f in FILES:
            os.makedirs(os.path.dirname(os.path.join(src, f)), exist_ok=True)
            text = (PROTO / f).read_text().replace("\toptional ", "\t")
            with open(os.path.join(src, f), "w") as out:
                out.write(text)
        subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{src}", f"--python_out={outdir}",
                        f"--grpc_python_out={outdir}", *FILES], check=True)
        if outdir not in sys.path:
            sys.path.insert(0, outdir)

        def load(mod):
            return importlib.import_module(mod + ".api_pb2"), importlib.import_module(mod + ".api_pb2_grpc")

        self.v1 = load("dra.v1")
        self.v1beta1 = load("dra.v1beta1")
        self.health = load("dra.health.v1")
        self.reg = load("dra.pluginregistration.v1")


def wait_until(pred, timeout, step=0.05):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return pred()


class Plugin:
    """One registered plugin as the kubelet keeps it."""

    def __init__(self, stubs, reg_sock, info):
        self.stubs, self.reg_sock, self.info = stubs, reg_sock, info
        self.version = "v1" if "v1.DRAPlugin" in info.supported_versions else "v1beta1"
        self.channel = grpc.insecure_channel("unix://" + info.endpoint)
        self.health = []          # every NodeWatchResourcesResponse seen, as [(pool, device, health, message)]
        self.health_error = None
        self._health_thread = None

    def _api(self, version=None):
        pb, pbg = getattr(self.stubs, version or self.version)
        return pb, pbg.DRAPluginStub(self.channel)

    def prepare(self, claims, version=None, timeout=10):
        """claims: [(namespace, uid, name)] -> {uid: NodePrepareResourceResponse}."""
        pb, stub = self._api(version)
        req = pb.NodePrepareResourcesRequest(claims=[pb.Claim(namespace=n, uid=u, name=m) for n, u, m in claims])
        return dict(stub.NodePrepareResources(req, timeout=timeout).claims)

    def unprepare(self, claims, version=None, timeout=10):
        pb, stub = self._api(version)
        req = pb.NodeUnprepareResourcesRequest(claims=[pb.Claim(namespace=n, uid=u, name=m) for n, u, m in claims])
        return dict(stub.NodeUnprepareResources(req, timeout=timeout).claims)

    def watch_health(self):
        pb, pbg = self.stubs.health
        stub = pbg.DRAResourceHealthStub(self.channel)

        def run():
            try:
                for resp in stub.NodeWatchResources(pb.NodeWatchResourcesRequest()):
                    self.health.append([(d.device.pool_name, d.device.device_name,
                                         pb.HealthStatus.Name(d.health), d.message) for d in resp.devices])
            except grpc.RpcError as e:  # the plugin went away, or close()
                self.health_error = e

        self._health_thread = threading.Thread(target=run, daemon=True)
        self._health_thread.start()

    def close(self):
        self.channel.close()
        if self._health_thread:
            self._health_thread.join(5)


class FakeKubelet:
    """The kubelet's plugin watcher and DRA manager, reduced to what a plugin can observe."""

    KNOWN = ("v1.DRAPlugin", "v1beta1.DRAPlugin")

    def __init__(self, registry_dir, stubs):
        self.dir = pathlib.Path(registry_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.stubs = stubs
        self.plugins = {}         # driver -> Plugin
        self.refusals = []        # (socket, reason) for registrations refused
        self.seen = {}            # socket path -> (inode, ctime) registered
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.refuse_next = None   # a reason: the next registration is refused with it (once)
        self.registrations = 0    # successful ones so far
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self):
        while not self._stop.is_set():
            try:
                names = sorted(os.listdir(self.dir))
            except FileNotFoundError:
                names = []
            live = set()
            for n in names:
                if n.startswith(".") or not n.endswith(".sock"):
                    continue
                p = self.dir / n
                try:
                    st = p.stat()
                    ino = (st.st_ino, st.st_ctime_ns)  # a re-created socket may reuse the inode number
                except FileNotFoundError:
                    continue
                live.add(str(p))
                if self.seen.get(str(p)) != ino:
                    self._register(p, ino)
            for p in list(self.seen):
                if p not in live:  # removing the socket deregisters
                    del self.seen[p]
                    with self._lock:
                        for drv, pl in list(self.plugins.items()):
                            if pl.reg_sock == p:
                                pl.close()
                                del self.plugins[drv]
            time.sleep(0.05)

    def _register(self, path, ino):
        pb, pbg = self.stubs.reg
        try:
            with grpc.insecure_channel("unix://" + str(path)) as ch:
                stub = pbg.RegistrationStub(ch)
                info = stub.GetInfo(pb.InfoRequest(), timeout=5)
                why = self._validate(info)
                if not why and self.refuse_next:
                    why, self.refuse_next = self.refuse_next, None
                stub.NotifyRegistrationStatus(pb.RegistrationStatus(plugin_registered=not why, error=why or ""),
                                              timeout=5)
        except grpc.RpcError:
            return  # not answering yet: tried again on the next pass
        self.seen[str(path)] = ino
        if why:
            self.refusals.append((str(path), why))
            return
        with self._lock:
            old = self.plugins.get(info.name)
            if old:
                old.close()
            self.plugins[info.name] = Plugin(self.stubs, str(path), info)
            self.registrations += 1

    def _validate(self, info):
        if info.type != "DRAPlugin":
            return f"type {info.type!r} is not DRAPlugin"
        if not info.name:
            return "no driver name"
        if not info.endpoint:
            return "no endpoint"
        if not any(v in self.KNOWN for v in info.supported_versions):
            return f"none of {list(info.supported_versions)} is a DRAPlugin version this kubelet speaks"
        return None

    def plugin(self, driver, timeout=20):
        """The registered plugin of driver, waiting for it."""
        def get():
            with self._lock:
                return self.plugins.get(driver)
        p = wait_until(get, timeout)
        if not p:
            raise AssertionError(f"no DRA plugin {driver} registered in {self.dir} within {timeout}s "
                                 f"(refusals: {self.refusals})")
        return p

    def stop(self):
        self._stop.set()
        self._thread.join(5)
        with self._lock:
            for p in self.plugins.values():
                p.close()
            self.plugins.clear()
