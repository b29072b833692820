#!/usr/bin/env python3
"""Writes a gang-heavy replay scenario for the throughput number in
bench/RESULTS.md: NODES 8-GPU nodes (two 4-GPU NVLink islands, two NUMA
zones, racks of 8 nodes) and GROUPS pod groups of 2-8 members (1, 2 or 4 GPUs
each, a third with a required rack), plus single pods, arriving over time
with finite durations so the queue keeps retrying.

usage: gen_gang_workload.py OUTDIR [NODES] [GROUPS] [SEED]"""
import json
import os
import random
import sys


def main():
    out = sys.argv[1]
    nodes = int(sys.argv[2]) if len(sys.argv) > 2 else 256
    groups = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    rnd = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 42)
    os.makedirs(out, exist_ok=True)
    docs = []
    for i in range(nodes):
        devs = [{"index": g, "model": "A100", "memoryMiB": 81920, "numaNode": g // 4,
                 "nvlinkPeers": [h for h in range(g // 4 * 4, g // 4 * 4 + 4) if h != g]} for g in range(8)]
        docs.append({"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": "n%04d" % i, "labels": {"topology.gpusched.io/rack": "r%03d" % (i // 8)}},
                     "status": {"allocatable": {"cpu": "128", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": "8"},
                                "devices": devs}})
    with open(os.path.join(out, "nodes.yaml"), "w") as f:
        f.write("# bench/gen_gang_workload.py (JSON documents as YAML)\n" + "\n---\n".join(json.dumps(d) for d in docs) + "\n")
    docs = []
    t = 0.0
    for k in range(groups):
        t += rnd.expovariate(1.0)
        size, gpus = rnd.choice([2, 4, 8]), rnd.choice([1, 2, 4])
        ann = {"gpusched.io/required-topology": "topology.gpusched.io/rack"} if k % 3 == 0 else {}
        docs.append({"apiVersion": "scheduling.x-k8s.io/v1alpha1", "kind": "PodGroup",
                     "metadata": {"name": "g%05d" % k, "namespace": "default", "annotations": ann},
                     "spec": {"minMember": size, "scheduleTimeoutSeconds": 30}})
        dur = rnd.randint(60, 1200)
        for m in range(size):
            res = {"cpu": "4", "memory": "16Gi", "nvidia.com/gpu": str(gpus)}
            docs.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "g%05d-%d" % (k, m), "labels": {"scheduling.x-k8s.io/pod-group": "g%05d" % k},
                                      "annotations": {"sim.gpusched.io/arrival": "%.3f" % t,
                                                      "sim.gpusched.io/duration": str(dur)}},
                         "spec": {"priority": rnd.choice([0, 0, 10]),
                                  "containers": [{"name": "w", "image": "w", "resources": {"limits": res}}]}})
        if k % 2 == 0:
            res = {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}
            docs.append({"apiVersion": "v1", "kind": "Pod",
                         "metadata": {"name": "s%05d" % k, "annotations": {"sim.gpusched.io/arrival": "%.3f" % t,
                                                                         "sim.gpusched.io/duration": str(rnd.randint(30, 600))}},
                         "spec": {"containers": [{"name": "s", "image": "s", "resources": {"limits": res}}]}})
    with open(os.path.join(out, "workload.yaml"), "w") as f:
        f.write("# bench/gen_gang_workload.py (JSON documents as YAML)\n" + "\n---\n".join(json.dumps(d) for d in docs) + "\n")


if __name__ == "__main__":
    main()
