"""The API on the etcd store backend, against a real three-member etcd
cluster on loopback ports (tests/integration/etcd.py; Debian's etcd-server).

The first test checks the cluster fixture itself: the other tests and the
HA chaos test (test_ha_chaos.py) lean on it killing, pausing and restarting
members the way machines fail. The others run one or two `gpusched server
--store etcd` replicas (each its own data directory and watch cache; one CA
and token file between them) and check what clients see: kubectl's
create/get/list/watch and the keys it leaves in etcd, 409 on a stale
update, a write through one replica on another's watch, bookmarks, 410 for
a watch older than the compaction and the relist after it, lists in pages,
an etcd member killed under a stream of writes, and a full restart of
servers and etcd.
"""
import base64
import json
import os
import re
import shutil
import subprocess
import threading
import time

import pytest

from stack import require_tool, start_replicas, wait_for


def test_etcd_cluster_fixture_kills_and_rejoins_members(etcd_cluster):
    c = etcd_cluster
    assert len(c.endpoints) == 3 and len(set(c.endpoints)) == 3
    assert all(c.healthy(i) for i in range(3))
    c.etcdctl("put", "/t/a", "1")
    lead = c.wait_leader()
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
    other = next(i for i in range(3) if i != c.wait_leader())
    c.pause(other)
    assert not c.healthy(other)
    c.resume(other)
    c.wait_healthy(timeout=15)
    c.stop()
    assert all(c.pid(i) is None for i in range(3))


# --- the API on etcd: `gpusched server --store etcd` against the cluster above ---

KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
PODS = "/api/v1/namespaces/default/pods"


def etcd_flags(cluster, *extra):
    return ["--store", "etcd", "--etcd-endpoints", ",".join(cluster.endpoints), *extra]


@pytest.fixture
def servers(gpusched_bin, tmp_path, etcd_cluster, request):
    """Replicas on the etcd cluster, started by the test (start(n, *extra)),
    stopped after it; their logs are printed when the test failed."""
    started = []

    def start(n=1, *extra, env=None):
        rs = start_replicas(gpusched_bin, tmp_path / "servers", n, etcd_flags(etcd_cluster, *extra), env=env)
        started.extend(rs)
        return rs

    yield start
    codes = [(s.name, s.stop()) for s in started]
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        for s in started:
            print(f"\n--- {s.name} ---\n" + "\n".join(s.log().splitlines()[-40:]))
    assert all(c in (0, None) for _, c in codes), f"servers did not stop cleanly: {codes}"


def pod(name, labels=None):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels or {"app": name}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]}}


def rv(obj):
    return int(obj["metadata"]["resourceVersion"])


def etcd_kv(cluster, key):
    """The key's record in etcd (etcdctl -w json; key and value are base64)."""
    out = json.loads(cluster.etcdctl("get", key, "-w", "json").stdout)
    kvs = out.get("kvs") or []
    if not kvs:
        return None
    kv = kvs[0]
    return {"value": json.loads(base64.b64decode(kv["value"])), "mod_revision": kv["mod_revision"],
            "create_revision": kv["create_revision"], "header_revision": out["header"]["revision"]}


class Watch:
    """A watch stream read on a thread: .events fills as they come."""

    def __init__(self, server, path, **params):
        self.events, self.status = [], None
        self.r = server.call("GET", path, params={"watch": "true", **params}, stream=True, timeout=60)
        self.status = self.r.status_code
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        try:
            for line in self.r.iter_lines():
                if line:
                    self.events.append(json.loads(line))
        except (OSError, ValueError, AttributeError):
            pass  # closed by close() (urllib3 drops its file object under the reader: AttributeError)

    def wait(self, pred, timeout, what):
        return wait_for(lambda: next((e for e in list(self.events) if pred(e)), None), timeout, what)

    def close(self):
        self.r.close()
        self.t.join(5)


def kubectl(server, home, *args, input=None):
    env = dict(os.environ, HOME=str(home), KUBECONFIG=server.kubeconfig)
    return subprocess.run([KUBECTL, *args], capture_output=True, text=True, timeout=60, env=env, input=input)


@require_tool(KUBECTL, "kubectl")
def test_kubectl_on_etcd_and_the_keys_it_leaves(servers, etcd_cluster, tmp_path):
    (s,) = servers(1, "--no-scheduler")
    out_path = tmp_path / "kubectl-watch.out"
    out_f = open(out_path, "w")
    watch = subprocess.Popen([KUBECTL, "get", "pods", "--watch", "-o", "json", "--output-watch-events"],
                             stdout=out_f, stderr=subprocess.STDOUT, text=True,
                             env=dict(os.environ, HOME=str(tmp_path), KUBECONFIG=s.kubeconfig))

    def seen():
        """The watch events kubectl printed so far (JSON values one after another)."""
        text, out, i, dec = out_path.read_text(), [], 0, json.JSONDecoder()
        while (i := text.find("{", i)) >= 0:
            try:
                e, i = dec.raw_decode(text, i)
            except ValueError:
                break  # a value still being written
            out.append((e["type"], e["object"]["metadata"]["name"]))
        return out
    try:
        assert s.call("POST", PODS, json=pod("pre")).status_code == 201
        wait_for(lambda: ("ADDED", "pre") in seen(), 15, "kubectl's watch to start")
        r = kubectl(s, tmp_path, "create", "-f", "-", input=json.dumps(pod("web")))
        assert r.returncode == 0 and "pod/web created" in r.stdout, r.stderr
        r = kubectl(s, tmp_path, "get", "pod", "web", "-o", "json")
        assert r.returncode == 0, r.stderr
        web = json.loads(r.stdout)
        # kube-apiserver's layout: <prefix>/<resource>/<namespace>/<name>, the object's JSON as the value,
        # resourceVersion = the key's mod_revision.
        kv = etcd_kv(etcd_cluster, "/registry/pods/default/web")
        assert kv is not None, etcd_cluster.etcdctl("get", "/registry/", "--prefix", "--keys-only").stdout
        assert kv["value"]["metadata"]["name"] == "web" and kv["value"]["metadata"]["uid"] == web["metadata"]["uid"]
        assert kv["mod_revision"] == rv(web)
        r = kubectl(s, tmp_path, "label", "pod", "web", "tier=front")
        assert r.returncode == 0, r.stderr
        kv2 = etcd_kv(etcd_cluster, "/registry/pods/default/web")
        assert kv2["mod_revision"] > kv["mod_revision"] and kv2["create_revision"] == kv["create_revision"]
        assert kv2["value"]["metadata"]["labels"]["tier"] == "front"
        r = kubectl(s, tmp_path, "get", "pods", "-o", "json")
        items = {p["metadata"]["name"]: p for p in json.loads(r.stdout)["items"]}
        assert sorted(items) == ["pre", "web"]
        assert rv(items["web"]) == kv2["mod_revision"]
        r = kubectl(s, tmp_path, "get", "pods", "-l", "tier=front", "-o", "name")
        assert r.stdout.split() == ["pod/web"], r.stderr
        r = kubectl(s, tmp_path, "delete", "pod", "web", "--grace-period=0", "--force")
        assert r.returncode == 0, r.stderr
        assert etcd_kv(etcd_cluster, "/registry/pods/default/web") is None
        assert s.call("GET", PODS + "/web").status_code == 404
        # kubectl's watch saw it all, in order.
        wait_for(lambda: ("DELETED", "web") in seen(), 15, f"kubectl's watch to show the delete: {seen()}")
        ev = seen()
        assert ev.index(("ADDED", "web")) < ev.index(("MODIFIED", "web")) < ev.index(("DELETED", "web")), ev
    finally:
        watch.terminate()
        watch.wait(10)
        out_f.close()


def test_stale_update_is_a_409_on_etcd(servers):
    a, b = servers(2, "--no-scheduler")
    r = a.call("POST", PODS, json=pod("p"))
    assert r.status_code == 201, r.text
    cur = r.json()
    assert a.call("POST", PODS, json=pod("p")).json()["reason"] == "AlreadyExists"
    assert b.call("POST", PODS, json=pod("p")).json()["reason"] == "AlreadyExists"
    stale = json.loads(json.dumps(cur))
    cur["metadata"]["labels"]["v"] = "2"
    r = b.call("PUT", PODS + "/p", json=cur)  # through the other replica
    assert r.status_code == 200, r.text
    assert rv(r.json()) > rv(stale)
    stale["metadata"]["labels"]["v"] = "3"
    r = a.call("PUT", PODS + "/p", json=stale)
    assert r.status_code == 409 and r.json()["reason"] == "Conflict", r.text
    got = a.call("GET", PODS + "/p").json()
    assert got["metadata"]["labels"]["v"] == "2"
    # Two writers racing on one version: exactly one wins.
    results = []

    def put(s, v):
        body = json.loads(json.dumps(got))
        body["metadata"]["labels"]["v"] = v
        results.append(s.call("PUT", PODS + "/p", json=body).status_code)

    ts = [threading.Thread(target=put, args=(s, v)) for s, v in ((a, "a"), (b, "b"))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(results) == [200, 409], results


def test_watch_on_one_replica_sees_writes_through_another(servers):
    a, b = servers(2, "--no-scheduler")
    start = a.call("GET", PODS).json()["metadata"]["resourceVersion"]
    w = Watch(a, PODS, resourceVersion=start)
    try:
        created = b.call("POST", PODS, json=pod("from-b"))
        assert created.status_code == 201, created.text
        ev = w.wait(lambda e: e["type"] == "ADDED" and e["object"]["metadata"]["name"] == "from-b", 10,
                    "the create made through b on a's watch")
        assert rv(ev["object"]) == rv(created.json())
        assert b.call("DELETE", PODS + "/from-b", params={"gracePeriodSeconds": "0"}).status_code == 200
        w.wait(lambda e: e["type"] == "DELETED" and e["object"]["metadata"]["name"] == "from-b", 10,
               "the delete made through b on a's watch")
        # Versions on the stream only go up.
        rvs = [rv(e["object"]) for e in w.events if e["type"] != "BOOKMARK"]
        assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs), rvs
    finally:
        w.close()
    # And a's reads see b's writes (its watch cache is fed by etcd, not by b).
    b.call("POST", PODS, json=pod("again"))
    wait_for(lambda: a.call("GET", PODS + "/again").status_code == 200, 10, "b's create readable on a")


def test_bookmarks_carry_the_revision_of_writes_elsewhere(servers):
    a, b = servers(2, "--no-scheduler")
    base = int(a.call("GET", PODS).json()["metadata"]["resourceVersion"])
    w = Watch(a, "/api/v1/pods", resourceVersion=str(base), allowWatchBookmarks="true", timeoutSeconds="4",
              labelSelector="never=matches")
    try:
        node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "elsewhere"}}
        r = b.call("POST", "/api/v1/nodes", json=node)  # another resource, through another replica
        assert r.status_code == 201, r.text
        # No pod changed, yet the pods watch learns that the store moved past the node's revision.
        bm = w.wait(lambda e: e["type"] == "BOOKMARK" and rv(e["object"]) >= rv(r.json()), 10,
                    "a bookmark at or past the node's revision")
        assert bm["object"]["kind"] == "Pod"
        assert not [e for e in w.events if e["type"] != "BOOKMARK"], w.events
    finally:
        w.close()


def test_watch_older_than_compaction_gets_410_and_a_relist_works(servers, etcd_cluster):
    (a,) = servers(1, "--no-scheduler", "--etcd-compaction-interval", "1s")
    old = a.call("POST", PODS, json=pod("first")).json()
    for i in range(5):
        assert a.call("POST", PODS, json=pod(f"later{i}")).status_code == 201

    def compacted():
        r = etcd_cluster.etcdctl("get", "/registry/pods/default/first", f"--rev={rv(old)}", check=False)
        return r.returncode != 0 and "compacted" in (r.stdout + r.stderr)

    wait_for(compacted, 20, f"etcd to compact revision {rv(old)} (--etcd-compaction-interval 1s)", step=0.3)
    r = a.call("GET", PODS, params={"watch": "true", "resourceVersion": str(rv(old)), "timeoutSeconds": "5"},
               stream=True)
    if r.status_code == 410:
        assert r.json()["reason"] in ("Expired", "Gone"), r.text
    else:
        assert r.status_code == 200, r.text
        first = json.loads(next(line for line in r.iter_lines() if line))
        assert first["type"] == "ERROR" and first["object"]["code"] == 410, first
        assert first["object"]["reason"] in ("Expired", "Gone"), first
    r.close()
    # The relist: a list gives a version to watch from, and the watch from it works.
    lst = a.call("GET", PODS).json()
    assert sorted(p["metadata"]["name"] for p in lst["items"]) == ["first"] + [f"later{i}" for i in range(5)]
    w = Watch(a, PODS, resourceVersion=lst["metadata"]["resourceVersion"])
    try:
        assert w.status == 200
        a.call("POST", PODS, json=pod("after-relist"))
        w.wait(lambda e: e["type"] == "ADDED" and e["object"]["metadata"]["name"] == "after-relist", 10,
               "the create after the relist")
        assert not [e for e in w.events if e["type"] == "ERROR"], w.events
    finally:
        w.close()


def test_list_with_limit_and_continue(servers):
    (a,) = servers(1, "--no-scheduler")
    names = [f"pg{i:03d}" for i in range(40)]
    for n in names:
        assert a.call("POST", PODS, json=pod(n)).status_code == 201
    full = a.call("GET", PODS).json()
    assert sorted(p["metadata"]["name"] for p in full["items"]) == names
    # Every item exactly once over the pages (a server may also answer all of them in one page).
    got, token, pages = [], None, 0
    while True:
        params = {"limit": "7", **({"continue": token} if token else {})}
        r = a.call("GET", PODS, params=params)
        assert r.status_code == 200, r.text
        page = r.json()
        got += [p["metadata"]["name"] for p in page["items"]]
        pages += 1
        token = page["metadata"].get("continue")
        if not token:
            break
        assert len(page["items"]) == 7 and pages < 40
    assert sorted(got) == names and len(got) == len(names), got
    # Items are at or below the list's version.
    lrv = int(full["metadata"]["resourceVersion"])
    assert all(rv(p) <= lrv for p in full["items"])


def test_one_etcd_member_killed_changes_nothing_for_clients(servers, etcd_cluster):
    a, b = servers(2, "--no-scheduler")
    lead = etcd_cluster.wait_leader()
    # A follower first (the first endpoint if it is one: the one the servers talk to first).
    victim = 0 if lead != 0 else 1
    stop, failures, acked = threading.Event(), [], []

    def writer(s, tag):
        i = 0
        while not stop.is_set():
            r = s.call("POST", PODS, json=pod(f"{tag}{i}"))
            if r.status_code == 201:
                acked.append(f"{tag}{i}")
            else:
                failures.append((tag, i, r.status_code, r.text[:200]))
            i += 1

    ts = [threading.Thread(target=writer, args=(s, t)) for s, t in ((a, "a"), (b, "b"))]
    for t in ts:
        t.start()
    try:
        time.sleep(1)
        etcd_cluster.kill(victim)
        time.sleep(2)
        n_during = len(acked)
        # Polled, not one second's count: a loaded machine's write can take longer than that.
        wait_for(lambda: len(acked) > n_during, 30, "writes to go on while one etcd follower is down")
        etcd_cluster.start(victim)
        time.sleep(1)
    finally:
        stop.set()
        for t in ts:
            t.join(30)
    assert not failures, failures[:5]
    # Every acknowledged write is there: in etcd, and read through either replica.
    keys = set(etcd_cluster.etcdctl("get", "/registry/pods/default/", "--prefix", "--keys-only").stdout.split())
    missing = [n for n in acked if f"/registry/pods/default/{n}" not in keys]
    assert not missing, f"acknowledged creates not in etcd: {missing[:10]}"
    for s in (a, b):
        def listed():
            return {p["metadata"]["name"] for p in s.call("GET", PODS).json()["items"]}
        try:
            wait_for(lambda: listed() >= set(acked), 10, f"{s.name} to list every write")
        except AssertionError as e:
            raise AssertionError(f"{e}: {len(acked)} acknowledged, not listed: {sorted(set(acked) - listed())[:10]}")
    # The etcd leader itself: writes pause for an election, then go on; nothing acknowledged is lost.
    lead = etcd_cluster.wait_leader()
    etcd_cluster.kill(lead)
    t0 = time.time()
    wait_for(lambda: a.call("POST", PODS, json=pod(f"after{int(time.time() * 1000)}")).status_code == 201, 20,
             "a write once etcd elected a new leader", step=0.2)
    print(f"\netcd leader killed: writes through the API again after {time.time() - t0:.2f}s")
    etcd_cluster.start(lead)
    have = {p["metadata"]["name"] for p in b.call("GET", PODS).json()["items"]}
    assert set(acked) <= have


def test_data_survives_a_full_restart_of_servers_and_etcd(servers, etcd_cluster):
    a, b = servers(2, "--no-scheduler")
    made = {}
    for i in range(10):
        r = (a, b)[i % 2].call("POST", PODS, json=pod(f"keep{i}"))
        assert r.status_code == 201, r.text
        made[f"keep{i}"] = (r.json()["metadata"]["uid"], rv(r.json()))
    top = max(v for _, v in made.values())
    for s in (a, b):
        assert s.stop() == 0
    etcd_cluster.stop()
    for i in range(etcd_cluster.n):
        etcd_cluster.start(i, wait=False)
    etcd_cluster.wait_healthy()
    for s in (a, b):
        s.start()
    for s in (a, b):
        items = {p["metadata"]["name"]: (p["metadata"]["uid"], rv(p)) for p in s.call("GET", PODS).json()["items"]}
        assert items == made, (s.name, items)
    r = a.call("POST", PODS, json=pod("new"))
    assert r.status_code == 201 and rv(r.json()) > top, r.text


def test_server_bench_on_etcd(gpusched_bin, etcd_cluster, tmp_path):
    """`gpusched server --bench --store etcd` (what bench/ha.py runs): every create answered and
    every watcher given every pod, from the revision its seed object got (not 1)."""
    r = subprocess.run([gpusched_bin, "server", "--bench", "--only", "api", "--pods", "300", "--watchers", "5",
                        "--dir", str(tmp_path), "--store", "etcd", "--etcd-endpoints", ",".join(etcd_cluster.endpoints)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(store etcd," in r.stdout.splitlines()[0], r.stdout
    assert re.search(r"creates +300 pods, 8 clients \(raw HTTP\): \d+ pods/s \(0 failed\)", r.stdout), r.stdout
    assert re.search(r"watch +5 watchers x 300 pods: 1500 events in", r.stdout), r.stdout + r.stderr
    # Each phase under its own prefix, next to nothing of the API's default one.
    keys = etcd_cluster.etcdctl("get", "/gs-bench/", "--prefix", "--keys-only").stdout.split()
    assert any("/pods/bench/p0" in k for k in keys) and not etcd_cluster.etcdctl(
        "get", "/registry/", "--prefix", "--keys-only").stdout.strip()
    bad = subprocess.run([gpusched_bin, "server", "--bench", "--store", "etcd"], capture_output=True, text=True)
    assert bad.returncode == 2 and "--store etcd needs --etcd-endpoints" in bad.stderr
