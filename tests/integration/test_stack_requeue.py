"""Requeue on cluster events, end to end under `gpusched up`: pods waiting
for GPUs start when the pods holding them finish, not when their backoff
runs out. 40 one-second pods on 8 GPUs are 5 waves; the whole run must stay
within 1.2x of 5 times one wave measured in the same stack (one wave carries
the start, report and scheduling overhead the ideal includes)."""
import json
import time

import pytest

from stack import Stack, phase, pod_manifest, wait_for

MOCK = "1x8xH100-80GB"


@pytest.fixture(scope="module")
def stack(gpusched_bin, tmp_path_factory):
    s = Stack(gpusched_bin, tmp_path_factory.mktemp("stack_requeue"))
    s.up(MOCK)
    yield s
    rc = s.stop("up")
    assert rc == 0, s.log("up")


def run_pods(stack, prefix, n):
    """Applies n one-GPU `sleep 1` pods; seconds until every one Succeeded."""
    names = [f"{prefix}-{i}" for i in range(n)]
    docs = "\n".join(json.dumps(pod_manifest(p, "sleep 1", gpus=1)) for p in names)
    t0 = time.monotonic()
    stack.cli("apply", "-f", "-", input=docs)

    def done():
        pods = {p["metadata"]["name"]: p for p in stack.pods() or []}
        bad = [x for x in names if phase(pods.get(x)) == "Failed"]
        assert not bad, [pods[x]["status"] for x in bad]
        return all(phase(pods.get(x)) == "Succeeded" for x in names)
    wait_for(done, 120, f"{n} pods to succeed", step=0.05)
    took = time.monotonic() - t0
    for p in names:
        stack.cli("delete", "pod", p, check=False)
    wait_for(lambda: not any(p["metadata"]["name"].startswith(prefix + "-") for p in stack.pods() or []),
             30, f"{prefix} pods deleted")
    return took


def test_forty_pods_on_eight_gpus_run_in_five_waves(stack, capsys):
    wave = run_pods(stack, "wave", 8)
    total = run_pods(stack, "many", 40)
    with capsys.disabled():
        print(f"\nrequeue: one wave {wave:.2f} s, 40 pods {total:.2f} s, ideal 5 x wave {5 * wave:.2f} s, "
              f"ratio {total / (5 * wave):.2f}")
    assert wave > 1.0
    assert total <= 1.2 * 5 * wave, (wave, total)
