"""Watches with a lifecycle and no silent empty reads, against the real binary.

- dropped watches (the agent's old pattern: a short client timeout and no
  timeoutSeconds; a selector that never matches) free the server's threads
  and descriptors (/proc/PID/task, /proc/PID/fd) once the clients are gone;
- a watch with timeoutSeconds=1 ends with a BOOKMARK; an idle watch gets
  keep-alive BOOKMARKs (GPUSCHED_WATCH_KEEPALIVE shortens the period);
- a pod nested 2,046 levels deep is refused with the limit in the message,
  so lists stay readable;
- `gpusched get -o json` against a server that answers garbage or cuts its
  answer short prints an error and exits non-zero.
"""
import http.server
import json
import os
import pathlib
import socket
import subprocess
import threading
import time

import pytest
import requests

TOKENS = "adm,admin,,,admin\n"


class Server:
    def __init__(self, binary, data_dir, env=None):
        self.binary, self.data, self.env = binary, pathlib.Path(data_dir), env or {}

    def start(self):
        self.data.mkdir(parents=True, exist_ok=True)
        (self.data / "tokens.csv").write_text(TOKENS)
        port_file = self.data / "port"
        self.proc = subprocess.Popen(
            [self.binary, "server", "--data-dir", str(self.data), "--listen", "127.0.0.1:0", "--insecure",
             "--port-file", str(port_file), "--tokens", str(self.data / "tokens.csv"), "--no-scheduler",
             "--log-level", "warn"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env={**os.environ, **self.env})
        for _ in range(500):
            if port_file.exists() and port_file.read_text().strip():
                break
            if self.proc.poll() is not None:
                raise RuntimeError("server exited: " + self.proc.stderr.read())
            time.sleep(0.02)
        self.port = int(port_file.read_text())
        self.url = f"http://127.0.0.1:{self.port}"
        return self

    def stop(self):
        self.proc.terminate()
        rc = self.proc.wait(timeout=20)
        self.proc.stderr.close()
        return rc

    def call(self, method, path, **kw):
        headers = {"Authorization": "Bearer adm", **kw.pop("headers", {})}
        return requests.request(method, self.url + path, headers=headers, timeout=20, **kw)

    def counts(self):
        return (len(os.listdir(f"/proc/{self.proc.pid}/task")), len(os.listdir(f"/proc/{self.proc.pid}/fd")))


@pytest.fixture
def server(gpusched_bin, tmp_path):
    s = Server(gpusched_bin, tmp_path / "data").start()
    yield s
    assert s.stop() == 0


def pod(name, extra=None):
    spec = {"containers": [{"name": "c", "image": "busybox"}]}
    if extra is not None:
        spec["x"] = extra
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def open_watch(port, path):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer adm\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(4096)
        assert chunk, f"no answer to {path}: {head!r}"
        head += chunk
    assert b" 200 " in head.split(b"\r\n")[0], head
    return s


def settle(server, threads0, fds0, timeout=30):
    """The server's thread and descriptor counts once back near the baseline, or at the deadline:
    how soon a dropped watch's thread sees its client gone depends on the machine's load, a leak
    never comes back down."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        threads, fds = server.counts()
        if threads <= threads0 + 2 and fds <= fds0 + 2:
            break
        time.sleep(0.1)
    return server.counts()


def test_dropped_watches_free_threads_and_descriptors(server):
    assert server.call("GET", "/api/v1/nodes").status_code == 200
    time.sleep(0.3)
    threads0, fds0 = server.counts()
    paths = ["/api/v1/pods?watch=true&labelSelector=never%3Dmatches",
             "/api/v1/namespaces/default/pods?watch=true&fieldSelector=spec.nodeName%3Dnowhere",
             "/api/v1/nodes?watch=true"]
    peak = 0
    for batch in range(5):
        socks = [open_watch(server.port, paths[i % 3]) for i in range(100)]
        peak = max(peak, server.counts()[0])
        for s in socks:
            s.close()
        threads, fds = settle(server, threads0, fds0)
        assert threads <= threads0 + 2 and fds <= fds0 + 2, \
            f"batch {batch}: {threads} threads (baseline {threads0}), {fds} descriptors (baseline {fds0})"
    assert peak >= threads0 + 50  # they were really open
    # The agent's old pattern: a client that gives up after a second, without timeoutSeconds.
    for _ in range(3):
        with pytest.raises((requests.exceptions.ReadTimeout, requests.exceptions.ConnectionError)):
            r = requests.get(server.url + "/api/v1/pods", params={"watch": "true", "labelSelector": "never=matches"},
                             headers={"Authorization": "Bearer adm"}, stream=True, timeout=1)
            for _ in r.iter_lines():
                pass
    threads, fds = settle(server, threads0, fds0)
    assert threads <= threads0 + 2 and fds <= fds0 + 2, (threads, threads0, fds, fds0)
    assert server.call("GET", "/api/v1/pods").status_code == 200


def test_timeout_ends_watch_with_a_bookmark(server):
    t0 = time.time()
    r = server.call("GET", "/api/v1/pods", params={"watch": "true", "timeoutSeconds": "1",
                                                   "allowWatchBookmarks": "true", "labelSelector": "never=matches"},
                    stream=True)
    events = [json.loads(line) for line in r.iter_lines() if line]
    assert 0.9 <= time.time() - t0 < 15  # ended by timeoutSeconds, not by the client's 20 s; room for load
    assert [e["type"] for e in events] == ["BOOKMARK"]
    obj = events[0]["object"]
    assert obj["kind"] == "Pod" and obj["apiVersion"] == "v1"
    assert list(obj["metadata"]) == ["resourceVersion"] and int(obj["metadata"]["resourceVersion"]) >= 0
    # Without allowWatchBookmarks the stream just ends.
    r = server.call("GET", "/api/v1/pods", params={"watch": "true", "timeoutSeconds": "1"}, stream=True)
    assert [line for line in r.iter_lines() if line] == []
    r = server.call("GET", "/api/v1/pods", params={"watch": "true", "timeoutSeconds": "-1"})
    assert r.status_code == 400 and "timeoutSeconds" in r.json()["message"]


def test_idle_watch_gets_keepalive_bookmarks(gpusched_bin, tmp_path):
    s = Server(gpusched_bin, tmp_path / "data", {"GPUSCHED_WATCH_KEEPALIVE": "0.5"}).start()
    try:
        r = s.call("GET", "/api/v1/pods", params={"watch": "true", "timeoutSeconds": "3",
                                                  "allowWatchBookmarks": "true"}, stream=True)
        types = [json.loads(line)["type"] for line in r.iter_lines() if line]
        assert len(types) >= 4 and set(types) == {"BOOKMARK"}, types
    finally:
        assert s.stop() == 0
    bad = Server(gpusched_bin, tmp_path / "bad", {"GPUSCHED_WATCH_KEEPALIVE": "often"})
    with pytest.raises(RuntimeError, match="GPUSCHED_WATCH_KEEPALIVE"):
        bad.start()


def test_too_deep_pod_is_refused_and_lists_stay_readable(server, gpusched_bin):
    k = 2046 - 2  # with the pod and its spec: 2,046 levels
    body = json.dumps(pod("deep", "@")).replace('"@"', "[" * k + "]" * k)
    r = server.call("POST", "/api/v1/namespaces/default/pods", data=body,
                    headers={"Content-Type": "application/json"})
    assert r.status_code == 422, r.text
    assert "limited to 64 levels of nesting" in r.json()["message"]
    assert server.call("POST", "/api/v1/namespaces/default/pods", json=pod("fine", [[["x"]]])).status_code == 201
    out = subprocess.run([gpusched_bin, "get", "pods", "-o", "json", "--server", server.url, "--token", "adm"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert [p["metadata"]["name"] for p in json.loads(out.stdout)["items"]] == ["fine"]


class Canned(http.server.BaseHTTPRequestHandler):
    reply = b""

    def do_GET(self):
        self.wfile.write(self.reply)
        self.close_connection = True

    def log_message(self, *args):
        pass


def answer(body, length=None):
    head = f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {length or len(body)}\r\n\r\n"
    return head.encode() + body


@pytest.mark.parametrize("reply", [
    answer(b"garbage{"),
    answer(b'{"kind":"PodList","items":[', length=400),
    answer(b'{"kind":"PodList"}'),
    answer(b"[" * 3000 + b"]" * 3000),
], ids=["garbage", "cut-short", "no-items", "too-deep"])
def test_get_json_fails_on_an_unreadable_answer(gpusched_bin, reply):
    handler = type("H", (Canned,), {"reply": reply})
    srv = http.server.HTTPServer(("127.0.0.1", 0), handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        out = subprocess.run([gpusched_bin, "get", "pods", "-o", "json", "--server",
                              f"http://127.0.0.1:{srv.server_port}", "--token", "x"],
                             capture_output=True, text=True, timeout=30)
    finally:
        srv.shutdown()
        srv.server_close()
    assert out.returncode != 0
    assert out.stdout == ""
    assert out.stderr.startswith("get: "), out.stderr
