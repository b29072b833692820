"""MIG devices on the node side, end to end.

Part 1: `gpusched device-plugin --mig-strategy mixed|single` against the
Python kubelet peer (dp_peers.py): one registration per MIG resource, each on
its own socket, ListAndWatch lists MIG UUIDs with the parent GPU's NUMA node,
Allocate answers NVIDIA_VISIBLE_DEVICES with those UUIDs, MIG-enabled GPUs are
not offered whole.

Part 2: `gpusched up --mock` with a ClusterPolicy whose migManager layout
partitions the mock GPUs: pods asking for nvidia.com/mig-<profile> (mixed) or
nvidia.com/gpu (single) run with NVIDIA_VISIBLE_DEVICES set to MIG UUIDs the
node agent chose, two pods never share an instance, and the pod status lists
the instances.
"""
import pathlib
import shutil
import signal
import subprocess
import tempfile
import threading
import time

import pytest

from stack import Stack, apply, phase, pod_manifest, wait_for

# --- Part 1: the device plugin -----------------------------------------------------------

MOCK_MIG = "2xA100-80GB,numa=2,mig=1g.10gb*2+2g.20gb+3g.40gb"


@pytest.fixture(scope="module")
def stubs():
    pytest.importorskip("grpc")
    pytest.importorskip("grpc_tools")
    import dp_peers as P
    d = tempfile.mkdtemp(prefix="gsstub", dir="/tmp")
    yield P.load_stubs(d)
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def tmp():
    d = pathlib.Path(tempfile.mkdtemp(prefix="gsmig", dir="/tmp"))
    yield d
    shutil.rmtree(d, ignore_errors=True)


def make_kubelet(plugin_dir, pb, pbg):
    """FakeKubelet that also remembers which resource each list came from."""
    import grpc
    import dp_peers as P

    class Kubelet(P.FakeKubelet):
        def __init__(self, *a):
            super().__init__(*a)
            self.by_res = {}

        def Register(self, req, ctx):
            r = super().Register(req, ctx)
            ch = grpc.insecure_channel(P.unix(self.dir / req.endpoint))
            threading.Thread(target=self._watch_res, args=(req.resource_name, ch), daemon=True).start()
            return r

        def _watch_res(self, res, ch):
            try:
                for resp in self.pbg.DevicePluginStub(ch).ListAndWatch(self.pb.Empty()):
                    devs = [(d.ID, d.health, [n.ID for n in d.topology.nodes]) for d in resp.devices]
                    with self.lock:
                        self.by_res[res] = devs
                        self.lock.notify_all()
            except grpc.RpcError:
                pass
            finally:
                ch.close()

        def wait_lists(self, names, timeout=10):
            with self.lock:
                return self.lock.wait_for(lambda: set(names) <= set(self.by_res), timeout)

    return Kubelet(plugin_dir, pb, pbg).start()


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(5)
        raise


def plugin(gpusched_bin, tmp, mock, *extra):
    return subprocess.Popen([gpusched_bin, "device-plugin", "--mock", mock, "--plugin-dir", str(tmp / "dp"),
                             "--cdi-spec-dir", str(tmp / "cdi"), "--log-level", "warn", *extra])


def test_mixed_registers_one_resource_per_profile(gpusched_bin, tmp, stubs):
    pb, pbg = stubs
    k = make_kubelet(tmp / "dp", pb, pbg)
    p = plugin(gpusched_bin, tmp, MOCK_MIG, "--mig-strategy", "mixed")
    want = ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"]
    try:
        assert k.wait_registered(3, 15), "not every MIG resource registered"
        assert k.wait_lists(want, 10), f"lists: {sorted(k.by_res)}"
        regs = {r.resource_name: r for r in k.registrations}
        # Each resource has its own socket; no whole GPU is offered (both GPUs are partitioned).
        assert sorted(regs) == want
        assert len({r.endpoint for r in regs.values()}) == 3
        assert all((tmp / "dp" / r.endpoint).is_socket() for r in regs.values())
        assert all(r.version == "v1beta1" for r in regs.values())
        one = k.by_res["nvidia.com/mig-1g.10gb"]
        assert len(one) == 4 and len(k.by_res["nvidia.com/mig-2g.20gb"]) == 2
        assert all(d.startswith("MIG-") and len(d) <= 63 and h == "Healthy" for d, h, _ in one)
        # NUMA of the parent GPU: GPU 0 on node 0, GPU 1 on node 1, two 1g instances each.
        assert sorted(n[0] for _, _, n in one) == [0, 0, 1, 1]
        # Allocate hands out exactly those UUIDs.
        ids = [d for d, _, _ in one][:2]
        r = k.stub("nvidia.com/mig-1g.10gb").Allocate(
            pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)]))
        c = r.container_responses[0]
        assert c.envs["NVIDIA_VISIBLE_DEVICES"] == ",".join(ids)
        # Both instances live on GPU 0: its device node once, after the three control nodes, then the
        # capability nodes of each instance's GPU instance and compute instance. The mock's 1g.10gb
        # instances of GPU 0 are GI 1 and 2 (CI 0); mock minors follow the driver's layout, where
        # gpu0/gi1/access is 12 and gpu0/gi1/ci0/access 13.
        assert [d.host_path for d in c.devices] == ["/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                                    "/dev/nvidia0",
                                                    "/dev/nvidia-caps/nvidia-cap12", "/dev/nvidia-caps/nvidia-cap13",
                                                    "/dev/nvidia-caps/nvidia-cap21", "/dev/nvidia-caps/nvidia-cap22"]
        assert all(d.container_path == d.host_path and d.permissions == "rw" for d in c.devices)
        # An ID of another resource is not this plugin's.
        other = k.by_res["nvidia.com/mig-3g.40gb"][0][0]
        import grpc
        with pytest.raises(grpc.RpcError) as e:
            k.stub("nvidia.com/mig-1g.10gb").Allocate(
                pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=[other])]))
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
    finally:
        assert stop(p) == 0
        k.stop()
    # Every socket went away with the plugin.
    assert not [s for s in (tmp / "dp").iterdir() if s.is_socket() and s.name != "kubelet.sock"]


def test_mixed_keeps_whole_gpus_that_are_not_partitioned(gpusched_bin, tmp, stubs):
    pb, pbg = stubs
    k = make_kubelet(tmp / "dp", pb, pbg)
    # GPU 0..1 partitioned, the two T4s are not MIG-capable.
    p = plugin(gpusched_bin, tmp, "2xA100-80GB+2xT4,mig=1g.10gb*7", "--mig-strategy", "mixed")
    try:
        assert k.wait_registered(2, 15)
        assert k.wait_lists(["nvidia.com/gpu", "nvidia.com/mig-1g.10gb"], 10), sorted(k.by_res)
        whole = k.by_res["nvidia.com/gpu"]
        assert len(whole) == 2 and all(d.startswith("GPU-") for d, _, _ in whole)
        assert len(k.by_res["nvidia.com/mig-1g.10gb"]) == 14
    finally:
        assert stop(p) == 0
        k.stop()


def test_gpu_fault_marks_its_mig_devices_in_every_resource(gpusched_bin, tmp, stubs):
    pb, pbg = stubs
    k = make_kubelet(tmp / "dp", pb, pbg)
    p = plugin(gpusched_bin, tmp, MOCK_MIG + ",xid=79@gpu1@t=2s", "--mig-strategy", "mixed")
    want = ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-3g.40gb"]
    try:
        assert k.wait_registered(3, 15) and k.wait_lists(want, 10)
        first = {r: [d for d, _, _ in k.by_res[r]] for r in want}

        def flipped():
            with k.lock:
                return all(any(h == "Unhealthy" for _, h, _ in k.by_res[r]) for r in want) and dict(k.by_res)

        lists = poll(flipped, 10)
        assert lists, "the Xid on GPU 1 never reached every resource"
        for r in want:
            bad = [d for d, h, _ in lists[r] if h == "Unhealthy"]
            # GPU 1's instances: the second half of each list (GPU order), nothing of GPU 0.
            assert bad == first[r][len(first[r]) // 2:], (r, bad)
    finally:
        assert stop(p) == 0
        k.stop()


def poll(pred, timeout):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    return pred()


def test_single_offers_mig_devices_as_gpus(gpusched_bin, tmp, stubs):
    pb, pbg = stubs
    k = make_kubelet(tmp / "dp", pb, pbg)
    p = plugin(gpusched_bin, tmp, "2xA100-80GB,mig=2g.20gb*3", "--mig-strategy", "single")
    try:
        assert k.wait_registered(1, 15)
        assert k.wait_lists(["nvidia.com/gpu"], 10)
        time.sleep(0.5)  # no other resource follows
        assert [r.resource_name for r in k.registrations] == ["nvidia.com/gpu"]
        devs = k.by_res["nvidia.com/gpu"]
        assert len(devs) == 6 and all(d.startswith("MIG-") for d, _, _ in devs)
        ids = [devs[0][0], devs[5][0]]
        r = k.stub("nvidia.com/gpu").Allocate(
            pb.AllocateRequest(container_requests=[pb.ContainerAllocateRequest(devices_ids=ids)]))
        assert r.container_responses[0].envs["NVIDIA_VISIBLE_DEVICES"] == ",".join(ids)
    finally:
        assert stop(p) == 0
        k.stop()


def test_allocate_reads_mig_minors_from_the_proc_root(gpusched_bin, tmp, stubs):
    """--proc-root makes even a mock node read the driver's file: its minors are what Allocate returns,
    and a missing file or line refuses the container, naming the file."""
    import grpc
    pb, pbg = stubs
    proc = tmp / "proc"
    k = make_kubelet(tmp / "dp", pb, pbg)
    p = plugin(gpusched_bin, tmp, "1xA100-80GB,mig=3g.40gb*2", "--mig-strategy", "mixed", "--proc-root", str(proc))
    res = "nvidia.com/mig-3g.40gb"
    try:
        assert k.wait_registered(1, 15) and k.wait_lists([res], 10)
        ids = [d for d, _, _ in k.by_res[res]]

        def allocate(i):
            return k.stub(res).Allocate(pb.AllocateRequest(
                container_requests=[pb.ContainerAllocateRequest(devices_ids=[ids[i]])])).container_responses[0]

        with pytest.raises(grpc.RpcError) as e:
            allocate(0)
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert str(proc / "driver/nvidia-caps/mig-minors") in e.value.details()
        minors = proc / "driver" / "nvidia-caps" / "mig-minors"
        minors.parent.mkdir(parents=True)
        # The mock's instances are GI 1 and GI 2 of GPU 0, each with CI 0; GI 2's CI line is missing.
        minors.write_text("config 1\nmonitor 2\ngpu0/gi1/access 300\ngpu0/gi1/ci0/access 301\n"
                          "gpu0/gi2/access 310\n")
        c = allocate(0)
        assert [d.host_path for d in c.devices][3:] == ["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap300",
                                                        "/dev/nvidia-caps/nvidia-cap301"]
        with pytest.raises(grpc.RpcError) as e:
            allocate(1)
        assert e.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert 'has no line "gpu0/gi2/ci0/access"' in e.value.details() and ids[1] in e.value.details()
        # A malformed file is refused with its line.
        minors.write_text("config 1\ngpu0/gi1/access three\n")
        with pytest.raises(grpc.RpcError) as e:
            allocate(0)
        assert 'line 2 "gpu0/gi1/access three"' in e.value.details()
    finally:
        assert stop(p) == 0
        k.stop()


@pytest.mark.parametrize("mock,strategy,msg", [
    ("2xA100-80GB,mig=1g.10gb*7", "sometimes", "--mig-strategy"),
    ("2xA100-80GB+2xT4,mig=1g.10gb*7", "single", "same MIG"),
    ("2xA100-80GB,mig=1g.10gb*2+2g.20gb", "single", "one MIG profile"),
])
def test_bad_strategy_or_layout_is_refused(gpusched_bin, tmp, mock, strategy, msg):
    r = subprocess.run([gpusched_bin, "device-plugin", "--mock", mock, "--plugin-dir", str(tmp / "dp"),
                        "--cdi-spec-dir", str(tmp / "cdi"), "--mig-strategy", strategy],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode != 0
    assert msg in r.stderr, r.stderr
    if strategy == "sometimes":
        assert "sometimes" in r.stderr


def test_none_strategy_is_unchanged(gpusched_bin, tmp, stubs):
    pb, pbg = stubs
    k = make_kubelet(tmp / "dp", pb, pbg)
    p = plugin(gpusched_bin, tmp, "2xA100-80GB,mig=1g.10gb*7")
    try:
        assert k.wait_registered(1, 15)
        assert k.wait_lists(["nvidia.com/gpu"], 10)
        assert [d[0][:4] for d in k.by_res["nvidia.com/gpu"]] == ["GPU-", "GPU-"]
    finally:
        assert stop(p) == 0
        k.stop()


# --- Part 2: the whole stack -------------------------------------------------------------

NODE = "gpu-node-1"


def policy(strategy, layout):
    return {"apiVersion": "nvidia.com/v1", "kind": "ClusterPolicy", "metadata": {"name": "cluster-policy"},
            "spec": {"mig": {"strategy": strategy},
                     "migManager": {"enabled": True, "drainTimeoutSeconds": 30, "config": {"default": layout}},
                     "validator": {"retry": {"initialBackoffSeconds": 0.2, "maxBackoffSeconds": 1,
                                             "answerTimeoutSeconds": 20}}}}


def stack_state(stack):
    n = stack.node(NODE)
    return n["metadata"]["labels"].get("gpusched.io/gpu-stack-state") if n else None


def mig_pod(name, res, count, cmd):
    p = pod_manifest(name, cmd)
    p["spec"]["containers"][0]["resources"] = {"limits": {res: str(count)}}
    return p


SHOW = 'echo "nv=$NVIDIA_VISIBLE_DEVICES cuda=$CUDA_VISIBLE_DEVICES"; sleep 3'


def node_mig(stack):
    return {m["uuid"]: (d["index"], m["profile"]) for d in stack.node(NODE)["status"]["devices"]
            for m in (d.get("mig") or {}).get("instances", [])}


def run_two(stack, res):
    apply(stack, mig_pod("m1", res, 1, SHOW), mig_pod("m2", res, 2, SHOW))
    for n in ("m1", "m2"):
        wait_for(lambda: phase(stack.pod(n)) == "Succeeded", 30, f"{n} to succeed")
    seen = {}
    for n in ("m1", "m2"):
        log = stack.cli("logs", n).stdout.strip()
        nv, cuda = log.split()
        assert nv.startswith("nv=MIG-") and cuda == "cuda=" + nv[3:], log
        seen[n] = nv[3:].split(",")
    return seen


@pytest.fixture(scope="module")
def mixed(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("migmixed"))
    s.up("2xA100-80GB")
    apply(s, policy("mixed", "all-balanced"))
    wait_for(lambda: stack_state(s) == "ready" and node_mig(s), 60, "the node ready with its MIG layout")
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def test_mixed_pods_get_distinct_instances(mixed):
    inst = node_mig(mixed)
    assert sorted(p for _, p in inst.values()) == sorted(["1g.10gb"] * 4 + ["2g.20gb"] * 2 + ["3g.40gb"] * 2)
    seen = run_two(mixed, "nvidia.com/mig-1g.10gb")
    assert len(seen["m1"]) == 1 and len(seen["m2"]) == 2
    # Both ran at once (sleep 3), so the three instances are distinct, all of the profile asked for.
    allu = seen["m1"] + seen["m2"]
    assert len(set(allu)) == 3
    assert all(inst[u][1] == "1g.10gb" for u in allu)
    # The status lists the instances, with the parent GPU.
    devs = mixed.pod("m2")["status"]["devices"]
    assert sorted(d["uuid"] for d in devs) == sorted(seen["m2"])
    assert all(d["profile"] == "1g.10gb" and d["resource"] == "nvidia.com/mig-1g.10gb" and
               d["parentUUID"].startswith("GPU-") and d["index"] == inst[d["uuid"]][0] for d in devs)


def mig_series(stack, name):
    """{mig_uuid: line} of one per-instance metric on the node agent's /metrics."""
    port = [n["port"] for n in stack.info["nodes"] if n["name"] == NODE][0]
    page = stack.agent_get(port, "/metrics")
    out = {}
    for line in page.splitlines():
        if line.startswith(name + "{"):
            u = line.split('mig_uuid="', 1)[1].split('"', 1)[0]
            out[u] = line
    return out


def test_mixed_metrics_name_the_pod_of_each_instance(mixed):
    inst = node_mig(mixed)
    flag = pathlib.Path(tempfile.mkdtemp(prefix="gsmigm", dir="/tmp")) / "done"
    flag.parent.chmod(0o755)  # the pod runs as nobody and must see the flag
    try:
        apply(mixed, mig_pod("metered", "nvidia.com/mig-2g.20gb", 1,
                             f'echo "$NVIDIA_VISIBLE_DEVICES"; while [ ! -e {flag} ]; do sleep 0.2; done'))
        wait_for(lambda: phase(mixed.pod("metered")) == "Running", 30, "metered to run")
        held = wait_for(lambda: mixed.cli("logs", "metered").stdout.strip(), 10, "metered's log")
        assert inst[held][1] == "2g.20gb"

        def attributed():
            s = mig_series(mixed, "gpusched_mig_instance_allocated")
            return s if held in s and s[held].endswith(" 1") else None

        s = wait_for(attributed, 15, "the exporter to attribute the MIG instance")
        # One series per instance of the layout; only the held one names a pod.
        assert set(s) == set(inst)
        line = s[held]
        assert 'pod="metered"' in line and 'namespace="default"' in line and 'GPU_I_PROFILE="2g.20gb"' in line
        assert 'GPU_I_ID="' in line and f'gpu="{inst[held][0]}"' in line
        assert all(l.endswith(" 0") and "pod=" not in l for u, l in s.items() if u != held)
        assert set(mig_series(mixed, "gpusched_mig_instance_fb_total")) == set(inst)
        # `top nodes` sums the same series: instances held / on the node.
        top = mixed.cli("top", "nodes").stdout.splitlines()
        assert top[0].split()[-1] == "MIG"
        assert [l.split()[-1] for l in top[1:] if l.startswith(NODE)] == [f"1/{len(inst)}"]
        flag.touch()
        wait_for(lambda: phase(mixed.pod("metered")) == "Succeeded", 30, "metered to end")
        wait_for(lambda: mig_series(mixed, "gpusched_mig_instance_allocated")[held].endswith(" 0"), 15,
                 "the instance to show free again")
    finally:
        flag.touch()
        shutil.rmtree(flag.parent, ignore_errors=True)


def test_mixed_lowest_gpu_first_and_released(mixed):
    inst = node_mig(mixed)
    # Nothing runs now: one 3g.40gb goes to GPU 0's instance, and again after the first ended.
    for n in ("big1", "big2"):
        apply(mixed, mig_pod(n, "nvidia.com/mig-3g.40gb", 1, 'echo "$NVIDIA_VISIBLE_DEVICES"'))
        wait_for(lambda: phase(mixed.pod(n)) == "Succeeded", 30, f"{n} to succeed")
    got = [mixed.cli("logs", n).stdout.strip() for n in ("big1", "big2")]
    assert got[0] == got[1] and inst[got[0]] == (0, "3g.40gb")


def test_mixed_more_than_the_node_has_stays_pending(mixed):
    # 4 instances of 1g.10gb on the node: the scheduler keeps a pod asking for 5 off it.
    apply(mixed, mig_pod("greedy", "nvidia.com/mig-1g.10gb", 5, "true"))
    wait_for(lambda: (mixed.pod("greedy") or {}).get("status", {}).get("conditions"), 20, "a verdict")
    assert not mixed.pod("greedy")["spec"].get("nodeName")
    mixed.cli("delete", "pod", "greedy")


def test_single_strategy_gpu_pods_get_mig_devices(gpusched_bin, tmp_path):
    s = Stack(gpusched_bin, tmp_path)
    s.up("2xA100-80GB")
    try:
        apply(s, policy("single", "all-2g.20gb"))
        wait_for(lambda: stack_state(s) == "ready" and s.node(NODE)["metadata"]["labels"].get(
            "nvidia.com/mig.strategy") == "single", 60, "the node ready under the single strategy")
        n = s.node(NODE)
        assert n["status"]["capacity"]["nvidia.com/gpu"] == "6"
        inst = node_mig(s)
        seen = run_two(s, "nvidia.com/gpu")
        allu = seen["m1"] + seen["m2"]
        assert len(set(allu)) == 3 and all(u in inst for u in allu)
        devs = s.pod("m2")["status"]["devices"]
        assert sorted(d["uuid"] for d in devs) == sorted(seen["m2"])
        labels = s.node(NODE)["metadata"]["labels"]
        assert labels.get("nvidia.com/gpu.slices.gi") and labels.get("nvidia.com/gpu.product", "").endswith(
            "-MIG-2g.20gb")
        # Back to migStrategy none with MIG off: the MIG strategy label and the single strategy's MIG
        # attributes on nvidia.com/gpu go, and the product is the whole GPU's again.
        apply(s, policy("none", "all-disabled"))

        def whole_again():
            n = s.node(NODE)
            lb = n["metadata"]["labels"]
            return (stack_state(s) == "ready" and n["status"]["capacity"].get("nvidia.com/gpu") == "2" and
                    "nvidia.com/mig.strategy" not in lb and lb)

        lb = wait_for(whole_again, 90, "the node back to whole GPUs without MIG labels")
        stale = [k for k in lb if k.startswith("nvidia.com/mig-") or k in (
            "nvidia.com/gpu.slices.gi", "nvidia.com/gpu.slices.ci", "nvidia.com/gpu.multiprocessors",
            "nvidia.com/gpu.engines.copy")]
        assert not stale, stale
        assert not lb["nvidia.com/gpu.product"].endswith("-MIG-2g.20gb")
        assert lb.get("nvidia.com/mig.capable") == "true"
    finally:
        rc = s.stop("up")
        assert rc == 0, s.log("up")


def test_restarted_agent_readopts_its_instances(gpusched_bin, tmp_path):
    # The layout is the mock's own, so a restart finds the same MIG UUIDs.
    s = Stack(gpusched_bin, tmp_path)
    mock = "2xA100-80GB,mig=1g.10gb*7"

    def ready():
        n = s.node(NODE)
        return (stack_state(s) == "ready" and n and
                n["status"].get("allocatable", {}).get("nvidia.com/mig-1g.10gb") == "14")

    s.up(mock, "--keep-pods")
    try:
        apply(s, policy("mixed", "all-1g.10gb"))
        wait_for(ready, 60, "the node ready under the mixed strategy")
        flag = pathlib.Path(tempfile.mkdtemp(prefix="gsmigl", dir="/tmp")) / "let-long-finish"
        flag.parent.chmod(0o755)  # the pod runs as nobody and must see the flag
        apply(s, mig_pod("long", "nvidia.com/mig-1g.10gb", 1,
                         f'echo "$NVIDIA_VISIBLE_DEVICES"; while [ ! -e {flag} ]; do sleep 0.2; done'))
        wait_for(lambda: phase(s.pod("long")) == "Running", 30, "long to run")
        held = wait_for(lambda: s.cli("logs", "long").stdout.strip(), 10, "long's log")
        s.stop("up", signal.SIGKILL)
        s.up(mock, "--keep-pods")
        wait_for(ready, 60, "the node ready again after the restart")
        # The re-adopted pod still holds its instance: the next pod gets another one.
        apply(s, mig_pod("next", "nvidia.com/mig-1g.10gb", 1, 'echo "$NVIDIA_VISIBLE_DEVICES"'))
        wait_for(lambda: phase(s.pod("next")) == "Succeeded", 30, "next to succeed")
        got = s.cli("logs", "next").stdout.strip()
        assert got.startswith("MIG-") and got != held
        assert phase(s.pod("long")) == "Running"
        flag.touch()
        p = wait_for(lambda: phase(s.pod("long")) == "Succeeded" and s.pod("long"), 30, "long to end")
        assert s.cli("logs", "long").stdout.split() == [held]  # adopted, not started again
        assert [d["uuid"] for d in p["status"]["devices"]] == [held]
    finally:
        s.stop_all()
        if "flag" in locals():
            shutil.rmtree(flag.parent, ignore_errors=True)
