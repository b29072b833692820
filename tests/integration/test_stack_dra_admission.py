"""Admission with DRA claims in the server, end to end under `gpusched up`: a pod's ResourceClaim
counts as devices of its DeviceClass against the ClusterQueue's quota, through the server's
--dra-device-class-mapping (Kueue's deviceClassMappings), and a claim no node could satisfy
keeps its pod Inadmissible with a reason naming the claim and the request, until a
ResourceSlice with such devices is published."""
import pytest

from stack import Stack, apply, pod_manifest, wait_for

MOCK = "1x8xH100-80GB"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
CLASS = "example-gpu"  # not one of the server's default classes
DRA = "resource.k8s.io/v1beta1"


def slice_doc(node, product, n):
    return {"apiVersion": DRA, "kind": "ResourceSlice", "metadata": {"name": f"{node}-gpu.nvidia.com-0"},
            "spec": {"driver": "gpu.nvidia.com", "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{i}", "basic": {
                         "attributes": {"type": {"string": "gpu"}, "productName": {"string": product}},
                         "capacity": {"memory": {"value": "80Gi"}}}} for i in range(n)]}}


def claim_doc(name, count, selector=None):
    req = {"name": "gpus", "deviceClassName": CLASS, "allocationMode": "ExactCount", "count": count}
    if selector:
        req["selectors"] = [{"cel": {"expression": selector}}]
    return {"apiVersion": DRA, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [req]}}}


def claim_pod(name, claim):
    p = pod_manifest(name, "sleep 30")
    p["metadata"]["labels"] = {QUEUE_LABEL: "team-d"}
    p["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    p["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    return p


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("stack_dra_admission"))
    s.up(MOCK, "--dra-device-class-mapping", f"example.com/gpus={CLASS}")
    apply(s,
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "default-flavor"}},
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "team-d-cq"},
           "spec": {"namespaceSelector": {}, "resourceGroups": [
               {"coveredResources": ["example.com/gpus"],
                "flavors": [{"name": "default-flavor",
                             "resources": [{"name": "example.com/gpus", "nominalQuota": 2}]}]}]}},
          {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "LocalQueue",
           "metadata": {"name": "team-d", "namespace": "default"}, "spec": {"clusterQueue": "team-d-cq"}},
          {"apiVersion": DRA, "kind": "DeviceClass", "metadata": {"name": CLASS},
           "spec": {"selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com'"}}]}},
          slice_doc("dra-node-a", "NVIDIA H100", 4))
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def quota_reserved(stack, name):
    p = stack.pod(name) or {}
    return {c["type"]: c for c in (p.get("status") or {}).get("conditions", [])}.get("QuotaReserved")


def test_claims_count_against_the_mapped_quota(stack):
    apply(stack, claim_doc("two", 2), claim_doc("one", 1), claim_pod("dra-a", "two"))
    c = wait_for(lambda: (quota_reserved(stack, "dra-a") or {}).get("status") == "True" and quota_reserved(stack, "dra-a"),
                 20, "dra-a's claim of 2 to reserve the quota of 2")
    assert c["message"] == "quota reserved in team-d-cq", c
    apply(stack, claim_pod("dra-b", "one"))

    def waiting():
        c = quota_reserved(stack, "dra-b")
        return c if c and c["status"] == "False" else None
    c = wait_for(waiting, 20, "dra-b to wait for quota")
    assert c["reason"] == "Pending", c
    assert "waiting for quota in ClusterQueue team-d-cq: example.com/gpus 1 > 0 available" in c["message"], c


def test_an_impossible_claim_is_inadmissible_until_devices_exist(stack):
    apply(stack, claim_doc("b200", 1, "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'"),
          claim_pod("dra-c", "b200"))

    def inadmissible():
        c = quota_reserved(stack, "dra-c")
        return c if c and c["reason"] == "Inadmissible" else None
    c = wait_for(inadmissible, 20, "dra-c to be Inadmissible")
    assert c["status"] == "False"
    assert ("pod default/dra-c claim gpu (ResourceClaim b200) request gpus cannot be satisfied on any node"
            in c["message"]), c
    assert "NVIDIA B200" in c["message"], c  # the selector that matched nothing
    # A node publishes B200s: the claim can be satisfied now, and it waits for quota like the others.
    apply(stack, slice_doc("dra-node-b", "NVIDIA B200", 2))

    def pending():
        c = quota_reserved(stack, "dra-c")
        return c if c and c["reason"] == "Pending" else None
    c = wait_for(pending, 20, "dra-c to become pending once B200s exist")
    assert "example.com/gpus 1 > 0 available" in c["message"], c
