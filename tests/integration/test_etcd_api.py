"""The API on the etcd store backend, against a real three-member etcd
cluster on loopback ports (tests/integration/etcd.py; Debian's etcd-server).

The first test checks the cluster fixture itself: the other tests and the
HA chaos test (test_ha_chaos.py) lean on it killing, pausing and restarting
members the way machines fail.
"""
import time

from stack import wait_for


def test_etcd_cluster_fixture_kills_and_rejoins_members(etcd_cluster):
    c = etcd_cluster
    assert len(c.endpoints) == 3 and len(set(c.endpoints)) == 3
    assert all(c.healthy(i) for i in range(3))
    c.etcdctl("put", "/t/a", "1")
    lead = wait_for(lambda: c.leader(), 10, "an etcd leader")
    c.kill(lead)
    assert not c.healthy(lead)
    rest = [i for i in range(3) if i != lead]
    start = time.time()
    c.wait_healthy(rest, timeout=15)  # two of three keep a quorum and elect a new leader
    c.etcdctl("put", "/t/b", "2", endpoints=[c.endpoints[i] for i in rest])
    print(f"\netcd: a new leader {time.time() - start:.2f}s after its leader was killed")
    c.start(lead)  # rejoins from its data directory and catches up
    local = lambda: c.etcdctl("get", "/t/b", "--print-value-only", "--consistency", "s",  # noqa: E731
                              endpoints=[c.endpoints[lead]]).stdout.strip()
    wait_for(lambda: local() == "2", 10, "the rejoined member to hold the write made without it")
    # A paused member answers nothing; resumed, it is healthy again.
    other = next(i for i in range(3) if i != c.leader())
    c.pause(other)
    assert not c.healthy(other)
    c.resume(other)
    c.wait_healthy(timeout=15)
    c.stop()
    assert all(c.pid(i) is None for i in range(3))
