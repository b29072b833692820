"""Dynamic Resource Allocation through our server, under `gpusched up`: a
pod naming a ResourceClaim is bound with the claim's allocation and
reservedFor written as Kubernetes writes them, the devices it got are its
GPUs, the claim is deallocated once the pod has ended, a claim from a
ResourceClaimTemplate is created for the pod and deleted with it, and an
impossible claim is explained by the claim, request and selector."""
import json

import pytest

from stack import Stack, apply, delete, phase, pod_manifest, wait_for

MOCK = "2x4xH100-80GB"
API = "resource.k8s.io/v1beta1"  # the version every build serves; the scheduler decodes v1 and v1beta2 alike


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("dra_sched"))
    s.up(MOCK)
    nodes = [n["name"] for n in s.info["nodes"]]
    wait_for(lambda: all(s.node(n) for n in nodes), 20, "nodes registered")
    docs = [{"apiVersion": API, "kind": "DeviceClass", "metadata": {"name": "test-gpu"},
             "spec": {"selectors": [{"cel": {"expression":
                                             "device.driver == 'gpu.nvidia.com' && "
                                             "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}]
    for n in nodes:
        devs = [{"name": f"gpu-{g}", "basic": {
            "attributes": {"type": {"string": "gpu"}, "productName": {"string": "NVIDIA H100 80GB HBM3"},
                           "uuid": {"string": f"GPU-dra-{n}-{g}"}},
            "capacity": {"memory": {"value": "80Gi"}}}} for g in range(4)]
        docs.append({"apiVersion": API, "kind": "ResourceSlice", "metadata": {"name": f"{n}-gpu.nvidia.com-0"},
                     "spec": {"driver": "gpu.nvidia.com", "nodeName": n,
                              "pool": {"name": n, "generation": 1, "resourceSliceCount": 1}, "devices": devs}})
    apply(s, *docs)
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def claim_doc(name, count=1, selector=None):
    req = {"name": "gpus", "deviceClassName": "test-gpu", "count": count}
    if selector:
        req["selectors"] = [{"cel": {"expression": selector}}]
    return {"apiVersion": API, "kind": "ResourceClaim", "metadata": {"name": name, "namespace": "default"},
            "spec": {"devices": {"requests": [req]}}}


def get_claim(stack, name):
    r = stack.cli("get", "resourceclaims", name, "-n", "default", "-o", "json", check=False)
    return json.loads(r.stdout) if r.returncode == 0 else None


def claims(stack):
    r = stack.cli("get", "resourceclaims", "-n", "default", "-o", "json", check=False)
    return json.loads(r.stdout).get("items", []) if r.returncode == 0 else []


def claim_pod(name, cmd, entry):
    p = pod_manifest(name, cmd)
    p["spec"]["resourceClaims"] = [entry]
    return p


def test_pod_bound_with_allocation_then_deallocated(stack):
    apply(stack, claim_doc("two-gpus", count=2))
    apply(stack, claim_pod("dra-a", "sleep 2", {"name": "gpu", "resourceClaimName": "two-gpus"}))
    p = wait_for(lambda: (stack.pod("dra-a") or {}).get("spec", {}).get("nodeName") and stack.pod("dra-a"), 30,
                 "dra-a bound")
    node = p["spec"]["nodeName"]
    c = get_claim(stack, "two-gpus")
    alloc = c["status"]["allocation"]
    results = alloc["devices"]["results"]
    assert len(results) == 2
    assert {r["driver"] for r in results} == {"gpu.nvidia.com"}
    assert {r["pool"] for r in results} == {node}
    assert all(r["request"] == "gpus" for r in results)
    term = alloc["nodeSelector"]["nodeSelectorTerms"][0]["matchFields"][0]
    assert term["key"] == "metadata.name" and term["values"] == [node]
    reserved = c["status"]["reservedFor"]
    assert reserved == [{"resource": "pods", "name": "dra-a", "uid": p["metadata"]["uid"]}]
    # The claim's GPUs are the pod's: two of the node's GPU slots, named in its devices annotation.
    assert len(p["metadata"]["annotations"]["gpusched.io/devices"].split(",")) == 2
    # Once the pod has ended its claim keeps no consumer and no devices.
    wait_for(lambda: phase(stack.pod("dra-a")) in ("Succeeded", "Failed"), 30, "dra-a to end")
    wait_for(lambda: not (get_claim(stack, "two-gpus").get("status") or {}).get("allocation"), 20,
             "two-gpus deallocated")
    c = get_claim(stack, "two-gpus")
    assert not (c.get("status") or {}).get("reservedFor")
    assert "resource.kubernetes.io/delete-protection" not in c["metadata"].get("finalizers", [])
    delete(stack, "dra-a")


def test_claim_gpus_not_given_to_device_plugin_pods(stack):
    # Each node has 4 GPUs: two claims of 3 take 3 on each node; a plain 2-GPU pod then fits nowhere.
    apply(stack, claim_doc("three-a", count=3), claim_doc("three-b", count=3))
    apply(stack, claim_pod("dra-b", "sleep 30", {"name": "gpu", "resourceClaimName": "three-a"}),
          claim_pod("dra-c", "sleep 30", {"name": "gpu", "resourceClaimName": "three-b"}))
    wait_for(lambda: all((stack.pod(n) or {}).get("spec", {}).get("nodeName") for n in ("dra-b", "dra-c")), 30,
             "dra-b and dra-c bound")
    assert stack.pod("dra-b")["spec"]["nodeName"] != stack.pod("dra-c")["spec"]["nodeName"]
    apply(stack, pod_manifest("plain-2", "sleep 1", gpus=2))

    def unschedulable():
        conds = {c["type"]: c for c in ((stack.pod("plain-2") or {}).get("status") or {}).get("conditions", [])}
        c = conds.get("PodScheduled")
        return c and c.get("reason") == "Unschedulable" and c
    c = wait_for(unschedulable, 20, "plain-2 unschedulable")
    assert "nvidia.com/gpu" in c["message"]
    delete(stack, "dra-b", "dra-c", "plain-2")


def test_impossible_claim_explained(stack):
    apply(stack, claim_doc("b200", selector="device.attributes['gpu.nvidia.com'].productName == 'B200'"))
    apply(stack, claim_pod("dra-x", "sleep 1", {"name": "gpu", "resourceClaimName": "b200"}))

    def diagnosed():
        conds = {c["type"]: c for c in ((stack.pod("dra-x") or {}).get("status") or {}).get("conditions", [])}
        c = conds.get("PodScheduled")
        return c and c.get("reason") == "Unschedulable" and c
    c = wait_for(diagnosed, 20, "dra-x unschedulable")
    assert "0/2 nodes are available" in c["message"]
    assert "claim b200 request gpus" in c["message"], c["message"]
    ex = stack.cli("explain", "dra-x").stdout
    assert "claim b200 request gpus" in ex and "B200" in ex, ex
    assert not (get_claim(stack, "b200").get("status") or {}).get("allocation")
    delete(stack, "dra-x")


def test_missing_claim_named(stack):
    apply(stack, claim_pod("dra-missing", "sleep 1", {"name": "gpu", "resourceClaimName": "nope"}))

    def diagnosed():
        conds = {c["type"]: c for c in ((stack.pod("dra-missing") or {}).get("status") or {}).get("conditions", [])}
        c = conds.get("PodScheduled")
        return c and c.get("reason") == "Unschedulable" and c
    c = wait_for(diagnosed, 20, "dra-missing unschedulable")
    assert 'resourceclaim "nope" not found' in c["message"], c["message"]
    # The claim appears: the pod is bound.
    apply(stack, claim_doc("nope"))
    wait_for(lambda: (stack.pod("dra-missing") or {}).get("spec", {}).get("nodeName"), 30, "dra-missing bound")
    delete(stack, "dra-missing")


def test_claim_from_template_created_and_deleted_with_pod(stack):
    apply(stack, {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                  "metadata": {"name": "one-gpu", "namespace": "default"},
                  "spec": {"spec": {"devices": {"requests": [
                      {"name": "gpus", "exactly": {"deviceClassName": "test-gpu"}}]}}}})
    apply(stack, claim_pod("dra-t", "sleep 2", {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}))

    def generated():
        for c in claims(stack):
            md = c["metadata"]
            if md.get("annotations", {}).get("resource.kubernetes.io/pod-claim-name") == "gpu" and \
                    any(o.get("name") == "dra-t" for o in md.get("ownerReferences", [])):
                return c
    c = wait_for(generated, 20, "the claim of dra-t")
    name = c["metadata"]["name"]
    assert name.startswith("dra-t-gpu-") and len(name) == len("dra-t-gpu-") + 5
    p = wait_for(lambda: (stack.pod("dra-t") or {}).get("spec", {}).get("nodeName") and stack.pod("dra-t"), 30,
                 "dra-t bound")
    assert p["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": name}]
    alloc = get_claim(stack, name)["status"]["allocation"]
    assert alloc["devices"]["results"][0]["pool"] == p["spec"]["nodeName"]
    delete(stack, "dra-t")
    wait_for(lambda: get_claim(stack, name) is None, 20, "the generated claim deleted with its pod")
