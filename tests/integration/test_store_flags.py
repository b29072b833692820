"""`gpusched server --store`/`--etcd-*`: every bad value is refused before the server starts,
naming the flag, the value and why, and an unreachable etcd is refused after a bounded wait
with the endpoints and the error (never a silent fallback to SQLite). No etcd is needed here;
the store on a real etcd is tested in tests/unit/test_store_etcd.c."""
import socket
import subprocess
import time

import pytest


def server(gpusched_bin, tmp_path, *args, timeout=30):
    return subprocess.run([gpusched_bin, "server", "--data-dir", str(tmp_path / "data"), "--insecure", "--no-auth",
                           "--listen", "127.0.0.1:0", *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("args, says", [
    (["--store", "etcd"], "--store etcd needs --etcd-endpoints"),
    (["--store", "mysql"], '--store "mysql": want sqlite or etcd'),
    (["--store", "etcd", "--etcd-endpoints", "127.0.0.1:2379"], 'endpoint "127.0.0.1:2379": want http://HOST:PORT'),
    (["--store", "etcd", "--etcd-endpoints", "http://a:0"], "the port must be a number from 1 to 65535"),
    (["--store", "etcd", "--etcd-endpoints", "http://a:1,,http://b:2"], "an empty endpoint"),
    (["--etcd-endpoints", "http://a:1"], "--etcd-endpoints is for --store etcd"),
    (["--store", "sqlite", "--etcd-prefix", "/x"], "--etcd-prefix is for --store etcd"),
    (["--store", "etcd", "--etcd-endpoints", "https://a:1", "--etcd-cafile", "/nonexistent/ca.pem"],
     '--etcd-cafile "/nonexistent/ca.pem": cannot read it'),
    (["--store", "etcd", "--etcd-endpoints", "http://a:1", "--etcd-cafile", "/etc/hostname"],
     "no --etcd-endpoints URL is https://"),
    (["--store", "etcd", "--etcd-endpoints", "https://a:1", "--etcd-keyfile", "/etc/hostname"],
     "--etcd-keyfile needs --etcd-certfile"),
    (["--store", "etcd", "--etcd-endpoints", "http://a:1", "--etcd-prefix", "registry/"], '--etcd-prefix "registry/"'),
    (["--store", "etcd", "--etcd-endpoints", "http://a:1", "--etcd-compaction-interval", "often"],
     '--etcd-compaction-interval "often"'),
])
def test_bad_store_flags_are_refused(gpusched_bin, tmp_path, args, says):
    r = server(gpusched_bin, tmp_path, *args)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr
    assert not (tmp_path / "data" / "store.db").exists()  # nothing fell back to SQLite


def test_unreachable_etcd_refuses_to_start(gpusched_bin, tmp_path):
    socks = [socket.socket() for _ in range(2)]
    for s in socks:
        s.bind(("127.0.0.1", 0))  # bound, never listening: connections are refused
    urls = ",".join(f"http://127.0.0.1:{s.getsockname()[1]}" for s in socks)
    t0 = time.monotonic()
    r = server(gpusched_bin, tmp_path, "--store", "etcd", "--etcd-endpoints", urls)
    took = time.monotonic() - t0
    for s in socks:
        s.close()
    assert r.returncode == 1, r.stderr
    assert f"cannot use etcd at {urls}" in r.stderr
    assert "Connection refused" in r.stderr or "failed to connect" in r.stderr
    assert 5 < took < 25  # a bounded wait, not an immediate give-up nor a hang
    assert not (tmp_path / "data" / "store.db").exists()


def test_help_lists_the_store_flags(gpusched_bin):
    r = subprocess.run([gpusched_bin, "server", "--help"], capture_output=True, text=True, timeout=10)
    assert r.returncode == 0
    for flag in ("--store sqlite|etcd", "--etcd-endpoints", "--etcd-cafile", "--etcd-certfile", "--etcd-keyfile",
                 "--etcd-prefix", "--etcd-compaction-interval"):
        assert flag in r.stdout
