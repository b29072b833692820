"""The simulator decides what the server decides: one workload run through
`gpusched up` (the real server, mock agents, pods running as processes for
their duration) and through `gpusched sim --experiment replay` with the same
manifests, the same Node and NodeResourceTopology documents and the
server's seed, gives every pod the same node and the same GPUs.

The workload, in phases the server sees one after the other (and the
simulator at 10 s intervals): a plain pod; a gang of two whose members come
2 s apart (PodGroup minMember 2: neither may start alone); three pods of a
LocalQueue whose ClusterQueue has a quota of 2 GPUs, the first of them short,
so the third waits for admission until it ends; then a plain pod again.

Differences the comparison allows, each with its cause:
  - times: the server runs on a wall clock (processes start and exit, agents
    report), the simulator on trace times; only the order that admission
    forces (the third queued pod starts after the first one ended) is checked;
  - node names: the mock nodes are identical, so which of them is first in
    the scheduler's cache (the order the agents registered in) decides the
    first placement; placements are compared up to one renaming of the nodes.
"""
import json
import time

import yaml

from stack import Stack, apply, pod_manifest, wait_for

MOCK = "2x4xH100-80GB"
GROUP_LABEL = "scheduling.x-k8s.io/pod-group"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
LONG = 120  # seconds: runs past the end of the test on the server

QUEUES = [
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "team-cq"},
     "spec": {"namespaceSelector": {}, "resourceGroups": [
         {"coveredResources": ["nvidia.com/gpu"],
          "flavors": [{"name": "default-flavor", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": 2}]}]}]}},
    {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
     "metadata": {"name": "team", "namespace": "default"}, "spec": {"clusterQueue": "team-cq"}},
]
GANG = {"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
        "metadata": {"name": "g", "namespace": "default"}, "spec": {"minMember": 2}}


def pod(name, seconds, gpus, labels=None):
    p = pod_manifest(name, f"sleep {seconds}", gpus=gpus)
    if labels:
        p["metadata"]["labels"] = labels
    return p


# (phase, pod): what arrives when; the gang's second member 2 s after the first.
WORKLOAD = [
    (0, pod("plain-a", LONG, 1)),
    (10, pod("g-0", LONG, 2, {GROUP_LABEL: "g"})),
    (12, pod("g-1", LONG, 2, {GROUP_LABEL: "g"})),
    (20, pod("q-1", 4, 1, {QUEUE_LABEL: "team"})),
    (21, pod("q-2", LONG, 1, {QUEUE_LABEL: "team"})),
    (22, pod("q-3", LONG, 1, {QUEUE_LABEL: "team"})),
    (40, pod("plain-b", LONG, 1)),
]


def seconds_of(p):
    return int(p["spec"]["containers"][0]["command"][2].split()[1])


def bound(stack, name):
    p = stack.pod(name) or {}
    node = (p.get("spec") or {}).get("nodeName")
    return (node, p) if node else None


def devices_of(stack, p, uuids):
    """GPU indices of a bound pod, from the devices annotation the scheduler wrote (UUIDs)."""
    ann = (p["metadata"].get("annotations") or {}).get("gpusched.io/devices", "")
    node = p["spec"]["nodeName"]
    return sorted(uuids[node][d.split(":")[0]] for d in ann.split(",") if d)


def run_server(stack):
    """Applies the workload phase by phase; returns {pod: (node, [gpu indices])} and the server's view of q-1/q-3."""
    apply(stack, *QUEUES, GANG)
    placed = {}
    for t, p in WORKLOAD:
        name = p["metadata"]["name"]
        apply(stack, p)
        if name == "g-0":  # alone it must not start: the gang waits for its second member
            time.sleep(2)
            assert not bound(stack, "g-0"), "a gang member started alone"
            continue
        if name == "q-3":  # over the quota: held until q-1 ends
            time.sleep(1)
            assert not bound(stack, "q-3"), "q-3 started over its queue's quota"
            wait_for(lambda: bound(stack, "q-3"), 40, "q-3 to be admitted once q-1 ended")
            q1 = stack.pod("q-1")
            assert (q1.get("status") or {}).get("phase") == "Succeeded", "q-3 started before q-1 ended"
            continue
        wait_for(lambda: bound(stack, name), 30, f"{name} to bind")
        if name == "g-1":
            assert bound(stack, "g-0"), "the gang did not start whole"
    uuids = {}
    for n in json.loads(stack.cli("get", "nodes", "-o", "json").stdout)["items"]:
        uuids[n["metadata"]["name"]] = {d["uuid"]: d["index"] for d in n["status"]["devices"]}
    for _, p in WORKLOAD:
        name = p["metadata"]["name"]
        node, doc = bound(stack, name)
        placed[name] = (node, devices_of(stack, doc, uuids))
    return placed


def cluster_docs(stack):
    """The server's Node and NodeResourceTopology documents: what its scheduler saw."""
    docs = []
    for kind in ("nodes", "noderesourcetopologies"):
        docs += json.loads(stack.cli("get", kind, "-o", "json").stdout)["items"]
    return docs


def run_sim(run, tmp_path, docs):
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump_all(docs))
    work = [dict(d) for d in QUEUES] + [GANG]
    for t, p in WORKLOAD:
        p = json.loads(json.dumps(p))
        p["metadata"]["annotations"] = {"sim.gpusched.io/arrival": f"{t}s",
                                        "sim.gpusched.io/duration": f"{seconds_of(p)}s"}
        work.append(p)
    (tmp_path / "workload.yaml").write_text(yaml.safe_dump_all(work))
    out = tmp_path / "out"
    # --seed 0: the server's scheduler runs with seed 0; no --policy: the server's profile.
    r = run("sim", "--cluster", str(tmp_path / "cluster.yaml"), "--workload", str(tmp_path / "workload.yaml"),
            "--experiment", "replay", "--seed", "0", "--out", str(out), "--json", "-q")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "warning" not in r.stderr, r.stderr  # the server's profile runs every feature used
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    placed, times = {}, {}
    for e in events:
        name = e["pod"].split("/", 1)[1]
        if e["event"] == "scheduled":
            placed[name] = (e["node"], sorted(e["gpus"]))
            times.setdefault(name, e["t"])
        if e["event"] == "completed":
            times[name + ":end"] = e["t"]
    return placed, times


def differences(server, sim):
    """Each pod whose placement differs, after renaming the simulator's nodes to the server's
    (the renaming the first placement fixes: identical nodes, see the top)."""
    rename = {}
    for name in server:
        if name in sim and sim[name][0] not in rename and server[name][0] not in rename.values():
            rename[sim[name][0]] = server[name][0]
    diffs = []
    for name in server:
        if name not in sim:
            diffs.append(f"{name}: bound to {server[name]} on the server, never scheduled in the simulator")
            continue
        node, gpus = sim[name]
        if (rename.get(node, node), gpus) != server[name]:
            diffs.append(f"{name}: server {server[name]}, simulator {(node, gpus)} (nodes renamed {rename})")
    for name in sim:
        if name not in server:
            diffs.append(f"{name}: scheduled in the simulator only")
    return diffs


def test_same_placements_as_the_server(gpusched_bin, run, tmp_path):
    stack = Stack(gpusched_bin, tmp_path / "stack")
    stack.dir.mkdir()
    stack.up(MOCK)
    try:
        docs = cluster_docs(stack)
        server = run_server(stack)
    finally:
        rc = stack.stop("up")
    assert rc == 0, stack.log("up")
    sim, times = run_sim(run, tmp_path, docs)
    diffs = differences(server, sim)
    assert not diffs, "placements differ:\n" + "\n".join(diffs)
    # What the test asserts beyond equality: the workload exercised gang and admission in both.
    assert len(server) == len(WORKLOAD)
    assert times["g-0"] == times["g-1"] == 12  # the gang started whole when its second member came
    assert times["q-3"] == times["q-1:end"]  # admitted when q-1 gave its quota back
