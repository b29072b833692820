# Writes the scenario manifests of this directory (run once after editing; the
# outputs are committed). JSON documents are valid YAML.
import json, os
ROOT = os.path.dirname(os.path.abspath(__file__))

def node(name, gpus, cpu="32", mem="128Gi", labels=None, numa=None, islands=None, model="A100"):
    devs = []
    for i in range(gpus):
        d = {"index": i, "model": model, "memoryMiB": 81920}
        if numa: d["numaNode"] = numa[i]
        if islands:
            for isl in islands:
                if i in isl: d["nvlinkPeers"] = [j for j in isl if j != i]
        devs.append(d)
    lab = {"nvidia.com/gpu.product": model}
    lab.update(labels or {})
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": lab},
            "status": {"allocatable": {"cpu": cpu, "memory": mem, "pods": "110", "nvidia.com/gpu": str(gpus)},
                       "devices": devs}}

def pod(name, gpus, t=0, dur=None, cpu="1", prio=None, group=None, labels=None, ann=None, extra=None, model=None):
    a = {"sim.gpusched.io/arrival": str(t)}
    if dur is not None: a["sim.gpusched.io/duration"] = str(dur)
    if model: a["gpusched.io/gpu-model"] = model
    a.update(ann or {})
    lab = dict(labels or {})
    if group: lab["scheduling.x-k8s.io/pod-group"] = group
    res = {"cpu": cpu, "memory": "4Gi"}
    if gpus: res["nvidia.com/gpu"] = str(gpus)
    spec = {"containers": [{"name": "main", "image": "worker", "resources": {"limits": res, "requests": res}}]}
    if prio is not None: spec["priority"] = prio
    spec.update(extra or {})
    m = {"name": name, "annotations": a}
    if lab: m["labels"] = lab
    return {"apiVersion": "v1", "kind": "Pod", "metadata": m, "spec": spec}

def pg(name, minm, timeout=None, ann=None, volcano=False):
    spec = {"minMember": minm}
    if timeout: spec["scheduleTimeoutSeconds"] = timeout
    m = {"name": name, "namespace": "default"}
    if ann: m["annotations"] = ann
    return {"apiVersion": "scheduling.volcano.sh/v1beta1" if volcano else "scheduling.x-k8s.io/v1alpha1",
            "kind": "PodGroup", "metadata": m, "spec": spec}

def nrt(name, policy, scope, zones):
    return {"apiVersion": "topology.node.k8s.io/v1alpha2", "kind": "NodeResourceTopology",
            "metadata": {"name": name},
            "attributes": [{"name": "topologyManagerPolicy", "value": policy},
                           {"name": "topologyManagerScope", "value": scope}],
            "zones": [{"name": "node-%d" % i, "type": "Node",
                       "resources": [{"name": "cpu", "capacity": str(c), "allocatable": str(c), "available": str(c)},
                                     {"name": "nvidia.com/gpu", "capacity": str(g), "allocatable": str(g), "available": str(g)}]}
                      for i, (c, g) in enumerate(zones)]}

def dump(docs):
    # JSON is YAML: one document per "---".
    return "\n---\n".join(json.dumps(d, indent=1) for d in docs) + "\n"

def write(name, comment, nodes, work, expected, config=None):
    d = os.path.join(ROOT, name); os.makedirs(d, exist_ok=True)
    hdr = "".join("# " + l + "\n" for l in comment.strip().splitlines())
    open(os.path.join(d, "nodes.yaml"), "w").write(hdr + dump(nodes))
    open(os.path.join(d, "workload.yaml"), "w").write(hdr + dump(work))
    if config: open(os.path.join(d, "config.yaml"), "w").write(config)
    open(os.path.join(d, "expected.json"), "w").write(json.dumps(expected, indent=1) + "\n")

# 1. two competing gangs
w = [pg("gang-a", 4), pg("gang-b", 4)]
w += [pod("a-%d" % i, 2, 0, 100, group="gang-a") for i in range(4)]
w += [pod("b-%d" % i, 2, 0, 100, group="gang-b") for i in range(4)]
write("two-competing-gangs", """Two gangs of 4 x 2 GPUs arrive together on 8 GPUs: exactly one runs whole
(gang-a: same creation time, name order), the other holds nothing and runs
completely when the first finishes. Never half of each (the deadlock).""",
      [node("n1", 4), node("n2", 4)], w,
      {"events": [{"t": 0, "event": "scheduled", "pod": "default/a-%d" % i} for i in range(4)] +
                 [{"t": 100, "event": "scheduled", "pod": "default/b-%d" % i} for i in range(4)],
       "absent": [{"event": "scheduled", "pod": "default/b-%d" % i, "t_lt": 100} for i in range(4)],
       "counts": {"scheduled": 8, "preempted": 0}})

# 2. gang timeout and retry (member by member, as the anchors do)
cfg = """apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    queueSort: {enabled: [{name: Coscheduling}], disabled: [{name: "*"}]}
    preFilter: {enabled: [{name: Coscheduling}]}
    filter: {enabled: [{name: Coscheduling}]}
    postFilter: {enabled: [{name: Coscheduling}]}
    reserve: {enabled: [{name: Coscheduling}]}
    permit: {enabled: [{name: Coscheduling}]}
  pluginConfig:
  - name: Coscheduling
    args: {wholeGroupPlan: false, podGroupRejectPercentage: 100, permitWaitingTimeSeconds: 10}
"""
w = [pod("blocker", 2, 0, 30, prio=-1, model="A100"), pg("train", 3)]
w += [pod("train-a", 1, 1, 50, group="train"), pod("train-b", 1, 1, 50, group="train"),
      pod("train-c", 1, 1, 50, group="train", model="A100")]
write("gang-timeout-retry", """Member-by-member gang (wholeGroupPlan off, as Coscheduling does): train-a and
train-b reserve T4 GPUs and wait; train-c needs an A100, all held by blocker.
At t=11 the 10 s wait times out: both are unreserved (failed events) and the
group goes back to the queue. blocker ends at t=30 and the whole group starts.""",
      [node("t4", 2, model="T4"), node("a100", 2, model="A100")], w,
      {"events": [{"t": 11, "event": "failed", "pod": "default/train-a", "reason_contains": "timeout"},
                  {"t": 11, "event": "failed", "pod": "default/train-b", "reason_contains": "gang member"}] +
                 [{"t": 30, "event": "scheduled", "pod": "default/train-%s" % x} for x in "abc"],
       "absent": [{"event": "scheduled", "pod": "default/train-a", "t_lt": 30}],
       "counts": {"scheduled": 4}}, cfg)

# 3. single-numa-node
numa = [0, 0, 0, 0, 1, 1, 1, 1]
w = [pod("p1", 4, 0, cpu="8"), pod("p2", 2, 1, cpu="12"), pod("p3", 2, 2, cpu="6")]
write("single-numa-node", """One node, two NUMA zones of 16 CPUs and 4 GPUs, TopologyManager
single-numa-node (pod scope) from its NodeResourceTopology. p1 (4 GPUs, 8 CPUs)
takes zone 0; p2 (2 GPUs, 12 CPUs) fits only zone 1; p3 (2 GPUs, 6 CPUs) fits
the node (2 GPUs, 12 CPUs free) but no single zone (zone 1 has 4 CPUs left).""",
      [node("numa-node", 8, numa=numa), nrt("numa-node", "single-numa-node", "pod", [(16, 4), (16, 4)])], w,
      {"events": [{"event": "scheduled", "pod": "default/p1", "gpus": [0, 1, 2, 3]},
                  {"event": "scheduled", "pod": "default/p2", "gpus_within": [4, 5, 6, 7]},
                  {"event": "failed", "pod": "default/p3", "reason_contains": "single NUMA zone"}],
       "absent": [{"event": "scheduled", "pod": "default/p3"}]})

# 4. NVLink island choice
isl = [[0, 1, 2, 3], [4, 5, 6, 7]]
w = [pod("p1", 3, 0), pod("p2", 2, 1), pod("p3", 1, 2), pod("p4", 2, 3)]
write("nvlink-island", """One 8-GPU node with two 4-GPU NVLink islands (0-3, 4-7). p1 (3 GPUs) takes
island 0; p2 (2 GPUs) takes island 1 rather than GPUs 3+4 across islands;
p3 (1 GPU) takes the last GPU of island 0 instead of splitting island 1
further; p4 (2 GPUs) gets the rest of island 1, still NVLink-connected.""",
      [node("dgx", 8, numa=[0, 0, 0, 0, 1, 1, 1, 1], islands=isl)], w,
      {"events": [{"event": "scheduled", "pod": "default/p1", "gpus": [0, 1, 2]},
                  {"event": "scheduled", "pod": "default/p2", "gpus": [4, 5]},
                  {"event": "scheduled", "pod": "default/p3", "gpus": [3]},
                  {"event": "scheduled", "pod": "default/p4", "gpus": [6, 7]}]})

# 5. rack-local gang
nodes = [node("n1", 4, labels={"topology.gpusched.io/rack": "r1"}), node("n2", 4, labels={"topology.gpusched.io/rack": "r1"}),
         node("n3", 4, labels={"topology.gpusched.io/rack": "r2"}), node("n4", 4, labels={"topology.gpusched.io/rack": "r2"})]
w = [pod("other", 2, 0), pg("ring", 4, ann={"gpusched.io/required-topology": "topology.gpusched.io/rack"})]
w += [pod("ring-%d" % i, 2, 1, group="ring") for i in range(4)]
write("rack-local-gang", """Four 4-GPU nodes in two racks. "other" takes 2 GPUs in rack r1. The gang
ring (4 x 2 GPUs) requires one rack (PodGroup annotation
gpusched.io/required-topology): r1 has only 6 free GPUs, so all of it lands in
r2 (n3, n4) although bin packing alone would start on n1.""", nodes, w,
      {"events": [{"t": 1, "event": "scheduled", "pod": "default/ring-%d" % i, "node_in": ["n3", "n4"]} for i in range(4)],
       "counts": {"scheduled": 5}})

# 6. spread
nodes = [node("z%d" % i, 4, labels={"topology.kubernetes.io/zone": "zone-%d" % i}) for i in range(3)]
spread = {"topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
           "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": {"app": "web"}}}]}
w = [pod("web-%d" % i, 1, i, labels={"app": "web"}, extra=spread) for i in range(6)]
write("spread", """Six 1-GPU replicas with maxSkew 1 over three zones: two per zone, where bin
packing alone would fill one node first.""", nodes, w,
      {"events": [{"event": "scheduled", "pod": "default/web-%d" % i} for i in range(6)],
       "per_node": {"z0": 2, "z1": 2, "z2": 2}})

# 7. preemption of a single pod
w = [pod("low-1", 2, 0, 1000, prio=0), pod("low-2", 2, 0, 1000, prio=0), pod("high", 2, 10, 50, prio=100)]
write("preempt-single", """A 4-GPU node full of two low-priority 2-GPU pods; a priority-100 pod needing
2 GPUs arrives at t=10. One victim suffices (low-2: both cost the same and
low-1 is reprieved first); high runs on the nominated node after its backoff,
and low-2, requeued, runs again when high completes.""",
      [node("n1", 4)], w,
      {"events": [{"t": 10, "event": "preempted", "pod": "default/low-2", "node": "n1"},
                  {"t": 11, "event": "scheduled", "pod": "default/high", "node": "n1"},
                  {"t": 61, "event": "scheduled", "pod": "default/low-2"}],
       "absent": [{"event": "preempted", "pod": "default/low-1"}],
       "counts": {"preempted": 1}})

# 8. preemption of a gang
w = [pod("steady", 4, 0, 1000, prio=50), pg("batch", 2)]
w += [pod("batch-%d" % i, 2, 0, 1000, prio=0, group="batch") for i in range(2)]
w += [pod("urgent", 2, 10, 100, prio=100)]
write("preempt-gang", """Two 4-GPU nodes: steady (priority 50) holds one, the gang batch (2 x 2 GPUs,
priority 0) the other. urgent (priority 100, 2 GPUs) preempts: the gang's node
is cheaper (lowest victim priority), and evicting one member evicts the whole
gang, so both batch pods are preempted, never steady.""",
      [node("n1", 4), node("n2", 4)], w,
      {"events": [{"t": 10, "event": "preempted", "pod": "default/batch-0"},
                  {"t": 10, "event": "preempted", "pod": "default/batch-1"},
                  {"t": 11, "event": "scheduled", "pod": "default/urgent"}],
       "absent": [{"event": "preempted", "pod": "default/steady"}],
       "counts": {"preempted": 2}})

# 9. preemption that would not help
w = [pod("low-1", 2, 0, 1000, prio=0), pod("low-2", 2, 0, 1000, prio=0), pod("huge", 8, 10, 50, prio=100)]
write("preempt-no-help", """huge (priority 100) needs 8 GPUs on one node; the only node has 4. Evicting
both low-priority pods would not make it fit, so nothing is evicted.""",
      [node("n1", 4)], w,
      {"events": [{"t": 10, "event": "failed", "pod": "default/huge"}],
       "absent": [{"event": "preempted"}, {"event": "scheduled", "pod": "default/huge"}],
       "counts": {"preempted": 0, "scheduled": 2}})
