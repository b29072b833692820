"""The agent's runc runtime (docs/NODE.md "Runtimes"), end to end against the real binary and Debian's runc.

- a pod lists /dev and sees exactly its GPU's device node (fake nodes made with mknod for the mock GPUs,
  named by a CDI spec in a temporary directory) plus the standard ones, and the CDI spec's env and mount;
- a container sees neither the agent's data directory nor another pod's files;
- a memory limit kills the container: OOMKilled, exit code 137;
- an image that is not in the node's store keeps the pod Pending with ErrImageNeverPull, and a
  RuntimeClass that does not exist with RuntimeClassNotFound;
- with the server and the agent as separate processes, a pod survives `kill -9` of its agent: the restarted
  agent re-adopts it, it stays Running and later Succeeds with its exit code; its runc container, bundle
  state and cgroup are gone afterwards;
- a container that ignores SIGTERM is killed when its grace period ends, and its runc container, directory
  and bundle go with the pod;
- a failing container under restartPolicy OnFailure restarts with back-off.
Needs root, runc and busybox-static (scripts/install-deps.sh); fails, not skips, without them.
"""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import time

import pytest

from stack import Stack, free_port, wait_for

ROOT = pathlib.Path(__file__).resolve().parents[2]
NODE = "gpu-node-1"


def need_tools():
    assert os.geteuid() == 0, "the runc runtime tests need root"
    assert shutil.which("runc"), "runc is missing: run scripts/install-deps.sh"
    assert os.path.exists("/bin/busybox"), "busybox-static is missing: run scripts/install-deps.sh"


def make_image(tmp):
    tar = tmp / "busybox.tar"
    subprocess.run(["bash", str(ROOT / "scripts" / "make-test-image.sh"), str(tar)], check=True, capture_output=True)
    return tar


def pod(name, cmd, gpus=0, memory=None, image="busybox", runtime_class=None, restart="Never"):
    c = {"name": "c", "image": image, "command": ["sh", "-c", cmd]}
    if gpus:
        c["resources"] = {"limits": {"nvidia.com/gpu": str(gpus)}}
    if memory:
        c.setdefault("resources", {}).setdefault("limits", {})["memory"] = memory
    spec = {"restartPolicy": restart, "containers": [c]}
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def phase(s, name):
    return ((s.pod(name) or {}).get("status") or {}).get("phase")


def ctr_status(s, name):
    cs = ((s.pod(name) or {}).get("status") or {}).get("containerStatuses") or [{}]
    return cs[0]


def ctr_state(s, name):
    return ctr_status(s, name).get("state") or {}


def runc_ids(state):
    r = subprocess.run(["runc", "--root", str(state.resolve() / "runc"), "list", "-q"], capture_output=True, text=True)
    return r.stdout.split()


def import_image(s, tar, store):
    r = subprocess.run([s.bin, "image", "import", str(tar), "--store", str(store)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def logs(s, name):
    return s.cli("logs", name).stdout


def fake_gpu_nodes(tmp, devices):
    """mknod'ed stand-ins for /dev/nvidia<minor> and a CDI spec naming them, one CDI device per GPU UUID."""
    dev = tmp / "dev"
    dev.mkdir()
    cdi = tmp / "cdi"
    cdi.mkdir()
    share = tmp / "share"
    share.mkdir()
    (share / "driver.txt").write_text("from-the-cdi-mount\n")
    for d in devices:
        os.mknod(dev / f"nvidia{d['index']}", 0o666 | 0o020000, os.makedev(195, d["index"]))
    os.mknod(dev / "nvidiactl", 0o666 | 0o020000, os.makedev(195, 255))
    spec = {
        "cdiVersion": "0.5.0", "kind": "nvidia.com/gpu",
        "containerEdits": {
            "env": ["CDI_TEST=applied"],
            "deviceNodes": [{"path": "/dev/nvidiactl", "hostPath": str(dev / "nvidiactl")}],
            "mounts": [{"hostPath": str(share), "containerPath": "/usr/share/cdi-test",
                        "options": ["ro", "nosuid", "nodev", "bind"]}],
        },
        "devices": [{"name": d["uuid"], "containerEdits": {"deviceNodes": [
            {"path": f"/dev/nvidia{d['index']}", "hostPath": str(dev / f"nvidia{d['index']}")}]}} for d in devices],
    }
    (cdi / "gpusched-test.json").write_text(json.dumps(spec))
    return cdi


@pytest.fixture(scope="module")
def up(gpusched_bin, tmp_path_factory):
    need_tools()
    tmp = tmp_path_factory.mktemp("runc")
    s = Stack(gpusched_bin, tmp)
    cdi = tmp / "cdi"
    s.up("1x2xH100-80GB", "--default-runtime", "runc", "--cdi-dir", str(cdi))
    node = wait_for(lambda: (s.node(NODE) or {}).get("status", {}).get("devices"), 20, "the node's GPUs")
    fake_gpu_nodes(tmp, node)
    import_image(s, make_image(tmp), s.data / "agent" / NODE / "images")
    s.tmp = tmp
    yield s
    s.stop_all()


def test_dev_lists_only_the_pods_gpu_and_cdi_edits_apply(up):
    up.cli("apply", "-f", "-", input=json.dumps(pod(
        "devs", "ls /dev; echo CDI_TEST=$CDI_TEST; echo NVD=$NVIDIA_VISIBLE_DEVICES; cat /usr/share/cdi-test/driver.txt",
        gpus=1)))
    wait_for(lambda: phase(up, "devs") == "Succeeded", 30, f"the pod to succeed: {up.pod('devs')}")
    out = logs(up, "devs")
    chosen = up.pod("devs")["metadata"]["annotations"]["gpusched.io/devices"]
    devs = {d["uuid"]: d["index"] for d in up.node(NODE)["status"]["devices"]}
    mine = devs[chosen.split(":")[0]]
    names = set(out.split())
    gpu_nodes = {n for n in names if n.startswith("nvidia")}
    assert gpu_nodes == {f"nvidia{mine}", "nvidiactl"}, out
    assert {"null", "zero", "urandom", "tty"} <= names, out
    assert "CDI_TEST=applied" in out, out
    assert f"NVD={chosen.split(':')[0]}" in out, out
    assert "from-the-cdi-mount" in out, out


def test_pod_sees_neither_the_data_dir_nor_another_pods_files(up):
    up.cli("apply", "-f", "-", input=json.dumps(pod(
        "keeper", "trap 'exit 0' TERM; echo secret-of-keeper > /scratch/secret; while true; do sleep 0.2; done")))
    wait_for(lambda: phase(up, "keeper") == "Running", 30, "the first pod")
    pods_dir = up.data / "agent" / NODE / "pods"
    secret = wait_for(lambda: next(pods_dir.glob("*/c/scratch/secret"), None), 10, "the first pod's file")
    data = str(up.data.resolve())
    up.cli("apply", "-f", "-", input=json.dumps(pod(
        "snoop", f"ls {data} && echo SAW-DATA; cat {secret.resolve()} && echo SAW-SECRET; "
                 "find / -xdev -name secret | grep . && echo SAW-FIND; echo done")))
    wait_for(lambda: phase(up, "snoop") in ("Succeeded", "Failed"), 60, "the second pod")
    out = logs(up, "snoop")
    assert "done" in out, out
    assert "SAW-DATA" not in out and "SAW-SECRET" not in out and "SAW-FIND" not in out, out
    # runc kill delivers SIGTERM to the container (its trap ends it), long before the 30 s grace period.
    t0 = time.time()
    up.cli("delete", "pod", "keeper")
    assert time.time() - t0 < 15


def test_memory_limit_kills_with_oomkilled(up):
    up.cli("apply", "-f", "-", input=json.dumps(pod(
        "hog", "x=aaaaaaaaaaaaaaaa; while true; do x=$x$x; done", memory="32Mi")))
    wait_for(lambda: phase(up, "hog") == "Failed", 60, f"the pod to be killed: {up.pod('hog')}")
    t = ctr_state(up, "hog").get("terminated") or {}
    assert t.get("reason") == "OOMKilled" and t.get("exitCode") == 137, t


def test_absent_image_waits_with_err_image_never_pull(up):
    up.cli("apply", "-f", "-", input=json.dumps(pod("noimg", "true", image="example.com/not/here:1")))
    w = wait_for(lambda: ctr_state(up, "noimg").get("waiting", {}).get("reason") == "ErrImageNeverPull"
                 and ctr_state(up, "noimg")["waiting"], 30, "ErrImageNeverPull")
    assert "example.com/not/here:1" in w["message"] and "pull policy of Never" in w["message"], w
    assert phase(up, "noimg") == "Pending"


def test_missing_runtime_class_is_reported_not_ignored(up):
    up.cli("apply", "-f", "-", input=json.dumps(pod("norc", "true", runtime_class="nope")))
    w = wait_for(lambda: ctr_state(up, "norc").get("waiting", {}).get("reason") == "RuntimeClassNotFound"
                 and ctr_state(up, "norc")["waiting"], 30, "RuntimeClassNotFound")
    assert w["message"] == 'RuntimeClass "nope" not found', w
    assert phase(up, "norc") == "Pending"


def test_runtime_class_with_a_handler_the_node_lacks(up):
    rc = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "sandboxed"},
          "handler": "kata"}
    up.cli("apply", "-f", "-", input=json.dumps(rc))
    up.cli("apply", "-f", "-", input=json.dumps(pod("nohandler", "true", runtime_class="sandboxed")))
    w = wait_for(lambda: ctr_state(up, "nohandler").get("waiting", {}).get("reason") == "RuntimeHandlerNotFound"
                 and ctr_state(up, "nohandler")["waiting"], 30, "RuntimeHandlerNotFound")
    assert 'no runtime for handler "kata"' in w["message"], w
    assert phase(up, "nohandler") == "Pending"
    # the class now names a handler the node has: the pod starts without being recreated
    rc["handler"] = "process"
    up.cli("delete", "runtimeclass", "sandboxed")
    up.cli("apply", "-f", "-", input=json.dumps(rc))
    wait_for(lambda: phase(up, "nohandler") == "Succeeded", 30, f"the pod to run under process: {up.pod('nohandler')}")


def test_pod_survives_an_agent_restart(gpusched_bin, tmp_path):
    need_tools()
    s = Stack(gpusched_bin, tmp_path)
    port, aport = free_port(), free_port()
    s.node_tokens("solo")
    state = tmp_path / "agent"
    try:
        s.spawn("server", "server", "--data-dir", str(s.data), "--listen", f"127.0.0.1:{port}", "--log-level", "warn",
                env={"GPUSCHED_NODE_GRACE": "120"})
        wait_for(lambda: (s.data / "kubeconfig").exists() and s.cli("get", "nodes", check=False, timeout=5).returncode
                 == 0, 20, "the server")

        def agent():
            s.spawn("agent", "agent", *s.agent_args("solo"), "--node-name", "solo", "--mock", "1xH100-80GB",
                    "--state-dir", str(state), "--listen", f"127.0.0.1:{aport}", "--heartbeat-ms", "500",
                    "--default-runtime", "runc", "--agent-token-file", str(s.data / "agent.token"),
                    "--log-level", "warn")

        agent()
        wait_for(lambda: s.node("solo"), 20, "the node to register")
        import_image(s, make_image(tmp_path), state / "images")
        s.cli("apply", "-f", "-", input=json.dumps(pod("long", "echo started; sleep 8; echo finished; exit 0")))
        wait_for(lambda: phase(s, "long") == "Running", 30, "the pod to run")
        s.stop("agent", signal.SIGKILL)
        time.sleep(1)
        assert runc_ids(state), "the container died with its agent"
        agent()
        time.sleep(2)
        assert phase(s, "long") == "Running", s.pod("long")
        wait_for(lambda: phase(s, "long") == "Succeeded", 30, f"the pod to succeed: {s.pod('long')}")
        t = ctr_state(s, "long")["terminated"]
        assert t["exitCode"] == 0, t
        assert "finished" in s.cli("logs", "long").stdout
        wait_for(lambda: not runc_ids(state), 10, "runc delete")
        uid = s.pod("long")["metadata"]["uid"]
        assert not list(pathlib.Path("/sys/fs/cgroup").glob(f"*/gpusched/{uid}-c")), "cgroup left behind"
    finally:
        s.stop_all()


def test_container_ignoring_sigterm_is_killed_after_its_grace_and_cleaned_up(up):
    up.cli("apply", "-f", "-", input=json.dumps(pod(
        "stubborn", "trap '' TERM; echo started; while true; do sleep 0.2; done")))
    wait_for(lambda: phase(up, "stubborn") == "Running", 30, "stubborn to run")
    wait_for(lambda: "started" in logs(up, "stubborn"), 10, "the command to start")
    uid = up.pod("stubborn")["metadata"]["uid"]
    state = up.data / "agent" / NODE
    assert any(uid in i for i in runc_ids(state)), runc_ids(state)
    assert (state / "pods" / uid).is_dir()
    t0 = time.time()
    up.cli("delete", "pod", "stubborn", "--grace-period=1", "--wait=false")
    # The trap ignores SIGTERM: only the SIGKILL sent when the grace period ends lets the pod go.
    wait_for(lambda: up.pod("stubborn") is None, 20, "the pod to disappear")
    assert time.time() - t0 >= 0.9, "killed before its grace period ended"
    wait_for(lambda: not any(uid in i for i in runc_ids(state)), 10, "runc delete of the container")
    wait_for(lambda: not (state / "pods" / uid).exists(), 10, "the pod's directory and bundle to be removed")


def test_failing_container_restarts_with_back_off(up):
    t0 = time.time()
    up.cli("apply", "-f", "-", input=json.dumps(pod("crash", "echo run; exit 3", restart="OnFailure")))
    wait_for(lambda: (ctr_status(up, "crash").get("restartCount") or 0) >= 2, 60, f"two restarts: {up.pod('crash')}")
    # Back-off of 1 s after the first exit and 2 s after the second (agent_pods.c poll_ctr).
    assert time.time() - t0 >= 2.5, "restarted without back-off"
    assert phase(up, "crash") not in ("Succeeded", "Failed"), up.pod("crash")
    assert "run" in logs(up, "crash")
    uid = up.pod("crash")["metadata"]["uid"]
    # Each restart deletes the previous run's container first: one runc container at a time.
    assert sum(uid in i for i in runc_ids(up.data / "agent" / NODE)) <= 1
    up.cli("delete", "pod", "crash")
    wait_for(lambda: up.pod("crash") is None, 20, "the pod to go")
