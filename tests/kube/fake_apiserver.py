#!/usr/bin/env python3
"""A strict fake kube-apiserver: the independent peer the Kubernetes transport is tested against.

Written from the Kubernetes API conventions (api-conventions.md, the API concepts page on
resource versions, watches and chunked lists) and not from our own server, so a client that
works here works because it follows Kubernetes, not because it shares our server's quirks.

Design. Every object lives in memory under one global integer resourceVersion counter, as in
etcd: each write takes the next number, and the write is appended to its resource's bounded
history (the last --history events of each, as kube-apiserver's watch cache keeps a window per
resource, so churn in one never expires watches on another). That history serves three things:
watches from a resourceVersion (events strictly after it; 410 Expired, sent as an ERROR watch
event carrying a Status, once the version is older than the compaction horizon), consistent
paged lists (a continue token holds the list's resourceVersion and the snapshot at that version
is rebuilt by undoing the newer events; 410 when the token's version has been compacted) and
the selector-aware watch rule (an object that stops matching a watch's selector is sent as
DELETED, one that starts matching as ADDED). Objects are never mutated in place once stored,
so readers need no copies.

Strictness, each as kube-apiserver does it: bearer token or client certificate (401 otherwise);
create sets uid, creationTimestamp, resourceVersion and generation and drops status where the
kind has a status subresource (pods start Pending; a Node keeps it); PUT needs a matching
metadata.resourceVersion (409 Conflict, 422 when missing); PUT and PATCH on the main resource
keep the stored status and on /status keep everything but status; pod updates may not change
spec fields other than the mutable few (nodeName only through pods/NAME/binding, scheduling
gates may only be removed); pods/binding answers 201, sets spec.nodeName and PodScheduled=True,
copies the Binding's annotations, checks its uid, 409 when already bound or being deleted;
DELETE honours DeleteOptions preconditions (uid, resourceVersion) and finalizers; bound pods
are deleted gracefully (deletionTimestamp first, gone after --pod-termination seconds, the
kubelet's part); merge-patch (RFC 7386), JSON patch (RFC 6902) and strategic-merge-patch for
built-in kinds (lists merged by their patch merge keys, e.g. conditions by type; 415 for custom
resources); core v1 Events and events.k8s.io/v1 Events are one stored resource seen through two
shapes; label and field selectors with kube's supported field labels (400 on others).

Fault injection, for the clients' retry paths: options at start and POST /fake/faults (JSON; no
token needed from 127.0.0.1) close watches at random, answer a fraction of requests 429 with
Retry-After or 500, compact the history now, make the next N Lease writes conflict, or pause all
answers. GET /fake/requests and /fake/state show what clients did. Every API request is logged
as one JSON line in DIR/requests.jsonl with the verb, resource and subresource derived as
Kubernetes RBAC derives them, so a test can check a client's requests against its ClusterRole
(rbac.py); each line names the user it authenticated as (--token-auth-file adds users with
their own tokens, so one component's requests can be told from the test's). Files:
fake_rules.py (resources, Status errors, selectors, patches, the two Event shapes),
fake_objects.py (the store and each verb's semantics), this one (HTTP, watches,
faults, the request log, certificates, start_fake).

Run: python3 tests/kube/fake_apiserver.py --port 0 --dir DIR [options]; it writes DIR/ca.crt,
DIR/kubeconfig (server, CA data, bearer token), DIR/kubeconfig-cert (client certificate
instead of a token), DIR/token and, once listening, DIR/port. From Python: start_fake(dir).
"""
import argparse
import base64
import collections
import datetime
import json
import os
import random
import secrets
import signal
import ssl
import subprocess
import sys
import threading
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

# Run as a script or imported from another folder: the sibling modules sit next to this file.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from fake_objects import Api, Store  # noqa: E402
from fake_rules import (BY_PATH, PREFERRED, RESOURCES, ApiError, bad_request, dumps,  # noqa: E402
                        invalid,
                        label_match, field_match, parse_field_selector, parse_label_selector,
                        split_top, to_view)


# --- Faults ----------------------------------------------------------------------------------

class Faults:
    FIELDS = {"watch_close_prob": float, "watch_close_period": float, "watch_close_abrupt": bool,
              "error_rate": float, "error_code": int, "retry_after": int, "error_verbs": list,
              "error_resources": list, "lease_conflicts": int, "pause": bool,
              "bookmark_interval": float}

    def __init__(self, seed):
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.watch_close_prob = 0.0
        self.watch_close_period = 0.0
        self.watch_close_abrupt = False
        self.error_rate = 0.0
        self.error_code = 429
        self.retry_after = 1
        self.error_verbs = []
        self.error_resources = []
        self.lease_conflicts = 0
        self.pause = False
        self.bookmark_interval = 1.0
        self.pause_cond = threading.Condition()
        self.injected = collections.Counter()

    def apply(self, body, store):
        """Applies a /fake/faults body. Unknown keys and wrong types are errors, never ignored."""
        if not isinstance(body, dict):
            raise bad_request("/fake/faults: the body must be a JSON object")
        for k, v in body.items():
            if k == "compact":
                continue
            if k == "history":
                if not isinstance(v, int) or v < 1:
                    raise bad_request(f"/fake/faults: history {v!r}: must be an integer >= 1")
                continue
            if k == "seed":
                continue
            t = self.FIELDS.get(k)
            if t is None:
                raise bad_request(f"/fake/faults: unknown key {k!r}; known: "
                                  f"{sorted(list(self.FIELDS) + ['compact', 'history', 'seed'])}")
            ok = isinstance(v, t) and not (t is int and isinstance(v, bool))
            if t is float and isinstance(v, int) and not isinstance(v, bool):
                ok = True
            if not ok:
                raise bad_request(f"/fake/faults: {k} {v!r}: must be {t.__name__}")
            if k in ("error_rate", "watch_close_prob") and not 0 <= v <= 1:
                raise bad_request(f"/fake/faults: {k} {v!r}: must lie in [0, 1]")
            if k in ("retry_after", "lease_conflicts", "watch_close_period") and v < 0:
                raise bad_request(f"/fake/faults: {k} {v!r}: must not be negative")
            if k == "bookmark_interval" and v <= 0:
                raise bad_request(f"/fake/faults: bookmark_interval {v!r}: must be positive")
            if k == "error_code" and v not in (429, 500, 503, 504):
                raise bad_request(f"/fake/faults: error_code {v!r}: must be 429, 500, 503 or 504")
        with self.lock:
            if "seed" in body:
                self.rng.seed(body["seed"])
            for k, v in body.items():
                if k in self.FIELDS and k not in ("lease_conflicts", "pause"):
                    setattr(self, k, v)
        if "lease_conflicts" in body:
            with store.cond:
                store.lease_conflicts = body["lease_conflicts"]
        if "pause" in body:
            with self.pause_cond:
                self.pause = body["pause"]
                self.pause_cond.notify_all()
        if "history" in body:
            store.set_history(body["history"])
        if body.get("compact"):
            store.compact()

    def view(self, store):
        with self.lock:
            out = {k: getattr(self, k) for k in self.FIELDS if k != "lease_conflicts"}
            out["injected"] = dict(self.injected)
        out["lease_conflicts"] = store.lease_conflicts
        return out

    def roll(self, p):
        with self.lock:
            return p > 0 and self.rng.random() < p

    def should_fail(self, info):
        with self.lock:
            if self.error_rate <= 0:
                return None
            if self.error_verbs and info["verb"] not in self.error_verbs:
                return None
            if self.error_resources and info["resource"] not in self.error_resources:
                return None
            if self.rng.random() >= self.error_rate:
                return None
            self.injected[self.error_code] += 1
            return self.error_code, self.retry_after

    def wait_unpaused(self):
        with self.pause_cond:
            while self.pause:
                self.pause_cond.wait(0.5)


# --- The request log -------------------------------------------------------------------------

class RequestLog:
    """In memory for /fake/requests, and written to DIR/requests.jsonl in batches by one thread
    so no request waits on the disk."""

    def __init__(self, path):
        self.lock = threading.Lock()
        self.entries = []
        self.pending = []
        self.path = path
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def add(self, entry):
        with self.lock:
            self.entries.append(entry)
            self.pending.append(entry)

    def flush(self):
        with self.lock:
            batch, self.pending = self.pending, []
        if batch:
            with open(self.path, "a") as f:
                f.write("".join(dumps(e) + "\n" for e in batch))

    def _run(self):
        while not self.stop.wait(0.2):
            self.flush()
        self.flush()


def request_info(method, path, query):
    """Verb, API group, resource, subresource, namespace and name as Kubernetes' RequestInfo
    resolves them for RBAC (apiserver/pkg/endpoints/request/requestinfo.go)."""
    info = {"verb": method.lower(), "method": method, "path": path, "apiGroup": "",
            "resource": "", "subresource": "", "namespace": "", "name": "", "resourceRequest":
            False}
    parts = [p for p in path.strip("/").split("/") if p]
    # /api/v1 and /apis/G/V (discovery) are non-resource requests: a resource needs one more.
    if len(parts) < 3 or parts[0] not in ("api", "apis"):
        return info
    if parts[0] == "apis":
        if len(parts) < 4:
            return info
        info["apiGroup"], parts = parts[1], parts[2:]
    else:
        parts = parts[1:]
    info["apiVersion"], parts = parts[0], parts[1:]
    info["resourceRequest"] = True
    verb = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch",
            "DELETE": "delete"}.get(method, "")
    if parts and parts[0] == "watch":
        verb, parts = "watch", parts[1:]
    if parts and parts[0] == "namespaces" and len(parts) > 1:
        info["namespace"] = parts[1]
        if len(parts) > 2 and parts[2] not in ("status", "finalize"):
            parts = parts[2:]
    if len(parts) >= 3:
        info["subresource"] = parts[2]
    if len(parts) >= 2:
        info["name"] = parts[1]
    if parts:
        info["resource"] = parts[0]
    if not info["name"] and verb == "get":
        w = (query.get("watch") or [""])[0].lower()
        verb = "watch" if w not in ("", "false", "0") else "list"
        fs = (query.get("fieldSelector") or [""])[0]
        for part in split_top(fs):
            f, sep, v = part.partition("=")
            if sep and f.strip() == "metadata.name" and not v.startswith("="):
                info["name"] = v.strip()
            elif sep and f.strip() == "metadata.name" and v.startswith("="):
                info["name"] = v[1:].strip()
    if not info["name"] and verb == "delete":
        verb = "deletecollection"
    info["verb"] = verb
    return info


# --- The HTTP side ---------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver"
    sys_version = ""
    # Small answers on keep-alive connections: without this, Nagle's algorithm and the peer's
    # delayed ACK hold every answer ~40 ms.
    disable_nagle_algorithm = True

    def log_message(self, fmt, *args):  # the request log is ours; keep stderr quiet
        pass

    # ---- plumbing
    def _body(self):
        """The request body, read once (so every answer leaves the connection reusable)."""
        if self.raw is None:
            self.raw = self._read_body()
        return self.raw

    def _read_body(self):
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def _json_body(self, required=True):
        raw = self._body()
        ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if self.command in ("POST", "PUT") and raw and ctype != "application/json":
            raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an "
                           f"unknown format ({ctype or 'no Content-Type'}) - accepted media "
                           "types include: application/json")
        if not raw:
            if required:
                raise bad_request("the request body is empty; a JSON object is required")
            return None
        try:
            return json.loads(raw)
        except ValueError as e:
            raise bad_request(f"the request body is not valid JSON: {e}")

    def _send(self, code, obj, headers=None, ctype="application/json"):
        data = obj if isinstance(obj, bytes) else dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        # Headers and body leave in one write (one TLS record) rather than two.
        self._headers_buffer.append(b"\r\n")
        if self.command != "HEAD":
            self._headers_buffer.append(data)
        self.flush_headers()
        self.code = code

    def _chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def _authenticated(self):
        """The user name the request authenticates as ("" when it does not): the bearer token's
        user (--token is ADMIN_USER, --token-auth-file names the others), or a client
        certificate's common name, as kube-apiserver's x509 authenticator takes it."""
        fake = self.server.fake
        auth = self.headers.get("Authorization", "")
        user = fake.users.get(auth[len("Bearer "):], "") if auth.startswith("Bearer ") else ""
        if user:
            return user
        try:
            cert = self.connection.getpeercert()
        except (ValueError, AttributeError, ssl.SSLError):
            cert = None
        for rdn in (cert or {}).get("subject", ()):
            for k, v in rdn:
                if k == "commonName":
                    return v
        return "fake-client" if cert else ""

    def _local(self):
        return self.client_address[0] in ("127.0.0.1", "::1")

    def do_GET(self):
        self._handle()

    def do_HEAD(self):
        self._handle()

    def do_POST(self):
        self._handle()

    def do_PUT(self):
        self._handle()

    def do_PATCH(self):
        self._handle()

    def do_DELETE(self):
        self._handle()

    def _handle(self):
        fake = self.server.fake
        url = urllib.parse.urlsplit(self.path)
        query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
        path = url.path
        self.code = 0
        self.raw = None
        self.user = ""
        self._body()
        if path.startswith("/fake/"):
            try:
                if not self._local() and not self._authenticated():
                    raise ApiError(401, "Unauthorized", "Unauthorized")
                self._fake_endpoint(path, query)
            except ApiError as e:
                self._send(e.code, e.status())
            return
        info = request_info(self.command, path, query)
        try:
            fake.faults.wait_unpaused()
            if path in ("/healthz", "/readyz", "/livez"):
                self._send(200, b"ok", ctype="text/plain; charset=utf-8")
                return
            self.user = self._authenticated()
            if not self.user:
                raise ApiError(401, "Unauthorized", "Unauthorized")
            injected = fake.faults.should_fail(info)
            if injected:
                code, after = injected
                if code == 429:
                    raise ApiError(429, "TooManyRequests",
                                   "Too many requests, please try again later.",
                                   {"retryAfterSeconds": after},
                                   {"Retry-After": str(after)})
                reason = {500: "InternalError", 503: "ServiceUnavailable", 504: "Timeout"}[code]
                raise ApiError(code, reason, f"an error on the server (injected {code}) has "
                               "prevented the request from succeeding")
            self._route(info, path, query)
        except ApiError as e:
            self._send(e.code, e.status(), e.headers)
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True
        except Exception as e:  # a bug in the fake: say so, as kube does for a panic
            traceback.print_exc()
            self._send(500, ApiError(500, "InternalError", f"fake apiserver bug: {e!r}").status())
        finally:
            entry = {k: info[k] for k in ("verb", "method", "path", "apiGroup", "resource",
                                          "subresource", "namespace", "name")}
            entry |= {"code": self.code, "user": self.user}
            if self.command == "DELETE" and self.raw:  # what a uid precondition test looks at
                try:
                    entry["preconditions"] = (json.loads(self.raw) or {}).get("preconditions")
                except (ValueError, AttributeError):
                    pass
            fake.log.add(entry)

    # ---- control endpoints
    def _fake_endpoint(self, path, query):
        fake = self.server.fake
        if path == "/fake/faults" and self.command == "POST":
            fake.faults.apply(self._json_body(), fake.store)
            self._send(200, fake.faults.view(fake.store))
        elif path == "/fake/faults" and self.command == "GET":
            self._send(200, fake.faults.view(fake.store))
        elif path == "/fake/requests" and self.command == "GET":
            with fake.log.lock:
                entries = list(fake.log.entries)
            self._send(200, {"requests": entries})
        elif path == "/fake/requests" and self.command == "DELETE":
            with fake.log.lock:
                fake.log.entries.clear()
            self._send(200, {"requests": []})
        elif path == "/fake/state" and self.command == "GET":
            want = set((query.get("resource") or [""])[0].split(",")) - {""}
            st = fake.store
            with st.cond:
                objects = {}
                for r in RESOURCES:
                    if r.group == "events.k8s.io":
                        continue
                    name = repr(r)
                    if want and r.plural not in want and name not in want:
                        continue
                    objects[name] = [o for _, o in sorted(st.objs[r.store].items())]
                out = {"resourceVersion": str(st.rv),
                       "historyLength": {repr(r): len(st.logs[r.store]) for r in RESOURCES},
                       "compactedResourceVersion": {repr(r): str(st.compacted(r.store))
                                                    for r in RESOURCES},
                       "objects": objects}
            out["faults"] = fake.faults.view(st)
            self._send(200, out)
        else:
            raise ApiError(404, "NotFound", f"no fake endpoint {self.command} {path}")

    # ---- discovery and routing
    def _route(self, info, path, query):
        parts = [p for p in path.strip("/").split("/") if p]
        if path == "/version":
            return self._send(200, {"major": "1", "minor": "32", "gitVersion": "v1.32.0-fake",
                                    "platform": "linux/amd64"})
        if path == "/openapi/v2":
            return self._send(200, b"", ctype="application/octet-stream")
        if path == "/api":
            return self._send(200, {"kind": "APIVersions", "versions": ["v1"],
                                    "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0",
                                                                    "serverAddress": "127.0.0.1"}]})
        if path == "/apis":
            return self._send(200, {"kind": "APIGroupList", "apiVersion": "v1",
                                    "groups": [self._group(g) for g in self._groups()]})
        if len(parts) == 2 and parts[0] == "apis":
            if parts[1] not in self._groups():
                raise ApiError(404, "NotFound", f"the server could not find the requested "
                               f"resource (group {parts[1]!r} is not served)")
            return self._send(200, self._group(parts[1]))
        if parts == ["api", "v1"] or (len(parts) == 3 and parts[0] == "apis"):
            group = "" if parts[0] == "api" else parts[1]
            version = parts[-1]
            rs = [r for r in RESOURCES if r.group == group and r.version == version]
            if not rs:
                raise ApiError(404, "NotFound", f"the server could not find the requested "
                               f"resource ({group or 'core'}/{version} is not served)")
            return self._send(200, self._resource_list(group, version, rs))
        if not info["resourceRequest"]:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource "
                           f"({self.command} {path})")
        api = self.server.fake.api
        if (info["apiGroup"], info["apiVersion"], info["resource"]) == ("", "v1", "bindings") \
                and info["verb"] == "create" and info["namespace"]:
            body = self._json_body()
            return self._send(201, api.bind(info["namespace"], ((body or {}).get("metadata") or
                                                                {}).get("name"), body))
        res = BY_PATH.get((info["apiGroup"], info["apiVersion"], info["resource"]))
        if res is None:
            raise ApiError(404, "NotFound", f"the server could not find the requested resource "
                           f"({info['resource']!r} in {info['apiGroup'] or 'core'}/"
                           f"{info['apiVersion']} is not served)")
        ns = info["namespace"] if res.namespaced else ""
        if res.plural == "namespaces":
            ns = ""
        if res.namespaced and not ns and self.command != "GET":
            raise ApiError(404, "NotFound", f"{res!r} is namespaced: {self.command} needs a "
                           "namespaces/NS/ path")
        if not res.namespaced and info["namespace"] and res.plural != "namespaces":
            raise ApiError(404, "NotFound", f"the server could not find the requested resource "
                           f"({res!r} is cluster-scoped: no namespaces/NS/ path)")
        name = info["name"] if len(self._res_parts(path)) >= 2 else ""
        if not name and self.command in ("PUT", "PATCH"):
            raise ApiError(405, "MethodNotAllowed", f"{self.command} needs an object's path, "
                           f"not the {res.plural} collection")
        sub = info["subresource"]
        if sub and not ((sub == "status" and res.status) or
                        (sub == "binding" and res.plural == "pods" and not res.group)):
            raise ApiError(404, "NotFound", f"the server could not find the requested resource "
                           f"({res!r} has no subresource {sub!r})")
        verb = info["verb"]
        if verb == "watch":
            return self._watch(res, ns, name, query)
        # kubectl get asks for a server-side Table (Accept ...;as=Table;g=meta.k8s.io).
        table = "as=Table" in (self.headers.get("Accept") or "")
        if verb == "list":
            out = api.list(res, ns, query)
            return self._send(200, as_table(res, out["items"], out["metadata"]) if table else out)
        if verb == "get":
            out = api.get(res, ns, name)
            return self._send(200, as_table(res, [out], {"resourceVersion": out["metadata"]
                                                          ["resourceVersion"]}) if table else out)
        if verb == "create":
            body = self._json_body()
            if sub == "binding":
                return self._send(201, api.bind(ns, name, body))
            if name:
                raise ApiError(405, "MethodNotAllowed", f"POST is not supported on a named "
                               f"{res.kind}; POST to the collection")
            dry = "All" in query.get("dryRun", [])
            return self._send(201, api.create(res, ns, body, dry))
        if verb == "update":
            return self._send(200, api.update(res, ns, name, self._json_body(), sub))
        if verb == "patch":
            ctype = (self.headers.get("Content-Type") or "").split(";")[0].strip()
            return self._send(200, api.patch(res, ns, name, ctype, self._json_body(), sub))
        if verb == "delete":
            return self._send(200, api.delete(res, ns, name, self._json_body(required=False),
                                              query))
        if verb == "deletecollection":
            return self._send(200, api.delete_collection(res, ns, query))
        raise ApiError(405, "MethodNotAllowed", f"{self.command} is not allowed on {path}")

    @staticmethod
    def _res_parts(path):
        parts = [p for p in path.strip("/").split("/") if p]
        parts = parts[2:] if parts[0] == "api" else parts[3:]
        if parts and parts[0] == "watch":
            parts = parts[1:]
        if parts and parts[0] == "namespaces" and len(parts) > 2 and parts[2] not in (
                "status", "finalize"):
            parts = parts[2:]
        return parts

    @staticmethod
    def _groups():
        out = []
        for r in RESOURCES:
            if r.group and r.group not in out:
                out.append(r.group)
        return out

    @staticmethod
    def _group(g):
        versions = []
        for r in RESOURCES:
            if r.group == g and r.version not in versions:
                versions.append(r.version)
        pref = PREFERRED.get(g, versions[0])
        gv = lambda v: {"groupVersion": f"{g}/{v}", "version": v}  # noqa: E731
        return {"kind": "APIGroup", "apiVersion": "v1", "name": g,
                "versions": [gv(v) for v in versions], "preferredVersion": gv(pref)}

    @staticmethod
    def _resource_list(group, version, rs):
        verbs = ["create", "delete", "deletecollection", "get", "list", "patch", "update",
                 "watch"]
        out = []
        for r in rs:
            sing = r.kind.lower()
            out.append({"name": r.plural, "singularName": sing, "namespaced": r.namespaced,
                        "kind": r.kind, "verbs": verbs, "shortNames": list(r.short)})
            if r.status:
                out.append({"name": f"{r.plural}/status", "singularName": "", "namespaced":
                            r.namespaced, "kind": r.kind, "verbs": ["get", "patch", "update"]})
            if r.plural == "pods" and not group:
                out.append({"name": "pods/binding", "singularName": "", "namespaced": True,
                            "kind": "Binding", "verbs": ["create"]})
        if not group:
            out.append({"name": "bindings", "singularName": "binding", "namespaced": True,
                        "kind": "Binding", "verbs": ["create"]})
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{group}/{version}" if group else version, "resources": out}

    # ---- watch
    def _watch(self, res, ns, name, query):
        fake = self.server.fake
        st, faults = fake.store, fake.faults
        labels = parse_label_selector((query.get("labelSelector") or [""])[0])
        fields = parse_field_selector((query.get("fieldSelector") or [""])[0], res)
        if name:  # /watch/namespaces/NS/pods/NAME (deprecated form): one object
            fields = fields + [("metadata.name", "=", name)]
        rv_text = (query.get("resourceVersion") or [""])[0]
        if query.get("sendInitialEvents"):
            raise invalid(res, "", [{"field": "sendInitialEvents", "reason":
                                     "FieldValueForbidden", "message": "Forbidden: "
                                     "sendInitialEvents is forbidden for watch unless the "
                                     "WatchList feature gate is enabled"}])
        bookmarks = (query.get("allowWatchBookmarks") or [""])[0].lower() in ("true", "1")
        try:
            timeout = float((query.get("timeoutSeconds") or ["1800"])[0])
        except ValueError:
            raise bad_request(f"timeoutSeconds {query.get('timeoutSeconds')[0]!r}: not a number")
        if rv_text not in ("", "0"):
            if not rv_text.isdigit():
                raise bad_request(f"resourceVersion {rv_text!r}: not a valid resource version "
                                  "(an integer)")
        start = time.monotonic()
        deadline = start + timeout
        if faults.watch_close_period > 0:
            deadline = min(deadline, start + faults.rng.uniform(0, faults.watch_close_period))
        view = 1 if res.group == "events.k8s.io" else 0

        def matches(obj):
            v = to_view(res, obj)
            return (not ns or obj["metadata"].get("namespace") == ns) and \
                label_match(labels, v) and field_match(fields, v)

        def line(etype, obj):
            return dumps({"type": etype, "object": to_view(res, obj)}).encode() + b"\n"

        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.code = 200
        initial = []
        with st.cond:
            if rv_text in ("", "0"):
                last = st.rv
                initial = [line("ADDED", o) for _, o in sorted(st.objs[res.store].items())
                           if matches(o)]
                expired = False
            else:
                last = int(rv_text)
                compacted = st.compacted(res.store)
                expired = last < compacted
        try:
            if expired:
                self._chunk(self._expired_line(last, compacted))
                return self._end_watch()
            for i in range(0, len(initial), 256):  # big chunks: a relist of 50,000 pods
                self._chunk(b"".join(initial[i:i + 256]))
            next_bookmark = time.monotonic() + faults.bookmark_interval
            while True:
                now = time.monotonic()
                if now >= deadline:
                    return self._end_watch(faults.watch_close_abrupt and now < start + timeout)
                with st.lock:
                    if st.latest[res.store] <= last:
                        wake = min(deadline, next_bookmark if bookmarks else deadline)
                        st.conds[res.store].wait(max(0.0, min(wake - now, 1.0)))
                    evs = st.events_after(res.store, last)
                    if evs is None:  # this watcher fell behind the compaction horizon
                        compacted = st.compacted(res.store)
                    else:
                        out = []
                        for ev in evs:
                            t = self._transition(ev, matches)
                            if t:
                                cache = st.lines.setdefault(ev.rv, {})
                                ln = cache.get((view, t))
                                if ln is None:
                                    ln = cache[(view, t)] = line(t, ev.obj)
                                out.append(ln)
                        last = st.rv
                if evs is None:
                    self._chunk(self._expired_line(last, compacted))
                    return self._end_watch()
                faults.wait_unpaused()
                if out and faults.watch_close_prob <= 0:
                    self._chunk(b"".join(out))
                for ln in out if faults.watch_close_prob > 0 else ():
                    self._chunk(ln)
                    if faults.roll(faults.watch_close_prob):
                        return self._end_watch(faults.watch_close_abrupt)
                if bookmarks and time.monotonic() >= next_bookmark:
                    self._chunk(dumps({"type": "BOOKMARK", "object": {
                        "kind": res.kind, "apiVersion": res.api_version,
                        "metadata": {"resourceVersion": str(last)}}}).encode() + b"\n")
                    next_bookmark = time.monotonic() + faults.bookmark_interval
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True

    @staticmethod
    def _transition(ev, matches):
        """The event a selector-filtered watch sees for ev, or None."""
        now = matches(ev.obj)
        if ev.type == "ADDED":
            return "ADDED" if now else None
        if ev.type == "DELETED":
            return "DELETED" if now else None
        before = ev.old is not None and matches(ev.old)
        if before and now:
            return "MODIFIED"
        if now:
            return "ADDED"
        if before:
            return "DELETED"
        return None

    @staticmethod
    def _expired_line(rv, compacted):
        return dumps({"type": "ERROR", "object": {
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": f"too old resource version: {rv} ({compacted})", "reason": "Expired",
            "code": 410}}).encode() + b"\n"

    def _end_watch(self, abrupt=False):
        if abrupt:  # the stream breaks without its last chunk, like a dropped connection
            self.close_connection = True
            try:
                self.connection.shutdown(2)
            except OSError:
                pass
            return
        self.wfile.write(b"0\r\n\r\n")


# --- Tables for kubectl get ------------------------------------------------------------------

def _age(ts):
    try:
        t = datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%SZ").replace(
            tzinfo=datetime.timezone.utc)
    except (TypeError, ValueError):
        return "<unknown>"
    s = int((datetime.datetime.now(datetime.timezone.utc) - t).total_seconds())
    return f"{s}s" if s < 120 else f"{s // 60}m" if s < 7200 else f"{s // 3600}h"


def _pod_row(p):
    spec, st = p.get("spec") or {}, p.get("status") or {}
    cs = st.get("containerStatuses") or []
    phase = st.get("phase", "")
    if p["metadata"].get("deletionTimestamp"):
        phase = "Terminating"
    elif phase == "Pending" and spec.get("schedulingGates"):
        phase = "SchedulingGated"
    return [f"{sum(1 for c in cs if c.get('ready'))}/{len(spec.get('containers') or [])}", phase,
            sum(c.get("restartCount", 0) for c in cs), _age(p["metadata"].get(
                "creationTimestamp")), st.get("podIP") or "<none>", spec.get("nodeName") or
            "<none>", st.get("nominatedNodeName") or "<none>"]


def _node_row(n):
    ready = next((c.get("status") for c in (n.get("status") or {}).get("conditions") or []
                  if c.get("type") == "Ready"), None)
    status = "Ready" if ready == "True" else "NotReady" if ready else "Unknown"
    if (n.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    return [status, _age(n["metadata"].get("creationTimestamp"))]


def as_table(res, items, list_meta):
    """A meta.k8s.io/v1 Table as kube-apiserver's printers give kubectl: the pod and node
    columns kubectl users know (-o wide adds the priority-1 ones), Name and Age for the rest."""
    col = lambda name, typ="string", prio=0: {"name": name, "type": typ, "format": "name" if  # noqa
                                               name == "Name" else "", "description": "",
                                               "priority": prio}
    if res.plural == "pods" and not res.group:
        cols = [col("Name"), col("Ready"), col("Status"), col("Restarts", "integer"), col("Age"),
                col("IP", prio=1), col("Node", prio=1), col("Nominated Node", prio=1)]
        cells = _pod_row
    elif res.plural == "nodes" and not res.group:
        cols, cells = [col("Name"), col("Status"), col("Age")], _node_row
    else:
        cols = [col("Name"), col("Age")]
        cells = lambda o: [_age(o["metadata"].get("creationTimestamp"))]  # noqa: E731
    rows = [{"cells": [o["metadata"]["name"], *cells(o)], "object": {
        "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
        "metadata": o["metadata"]}} for o in items]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": dict(list_meta),
            "columnDefinitions": cols, "rows": rows}


# --- The server ------------------------------------------------------------------------------

def openssl(*args):
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_certs(d):
    """A self-signed CA, a server certificate for 127.0.0.1/localhost and a client one."""
    ca_key, ca_crt = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
    if not os.path.exists(ca_crt):
        openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                "-nodes", "-keyout", ca_key, "-out", ca_crt, "-days", "30", "-subj",
                "/CN=fake-kube-apiserver-ca")
    for who, subj, ext in (
            ("server", "/CN=fake-kube-apiserver",
             "subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost\nextendedKeyUsage=serverAuth"),
            ("client", "/O=system:masters/CN=fake-admin", "extendedKeyUsage=clientAuth")):
        key, crt = os.path.join(d, f"{who}.key"), os.path.join(d, f"{who}.crt")
        if os.path.exists(crt):
            continue
        csr, extf = os.path.join(d, f"{who}.csr"), os.path.join(d, f"{who}.ext")
        with open(extf, "w") as f:
            f.write(ext + "\n")
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                "-keyout", key, "-out", csr, "-subj", subj)
        openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial",
                "-out", crt, "-days", "30", "-extfile", extf)
    return ca_crt


def b64file(path):
    with open(path, "rb") as f:
        return base64.b64encode(f.read()).decode()


def write_kubeconfigs(d, port, token, host):
    server = f"https://{host}:{port}"
    for fname, user in (("kubeconfig", f"    token: {token}\n"),
                        ("kubeconfig-cert",
                         f"    client-certificate-data: {b64file(os.path.join(d, 'client.crt'))}\n"
                         f"    client-key-data: {b64file(os.path.join(d, 'client.key'))}\n")):
        text = ("apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n  cluster:\n"
                f"    server: {server}\n"
                f"    certificate-authority-data: {b64file(os.path.join(d, 'ca.crt'))}\n"
                "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n"
                "    namespace: default\ncurrent-context: fake\nusers:\n- name: fake\n  user:\n"
                + user)
        tmp = os.path.join(d, fname + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
        os.replace(tmp, os.path.join(d, fname))


ADMIN_USER = "fake-admin"  # the --token's user, and the client certificate's common name


def read_token_file(path):
    """kube-apiserver's --token-auth-file: CSV lines token,user,uid[,"group1,group2"]. A
    malformed line is an error naming the file and line, never skipped."""
    import csv
    out = {}
    with open(path, newline="") as f:
        for n, row in enumerate(csv.reader(f), 1):
            if not row or not "".join(row).strip() or row[0].startswith("#"):
                continue
            if len(row) < 3 or not row[0].strip() or not row[1].strip():
                raise ValueError(f"{path}:{n}: want token,user,uid[,groups], got {','.join(row)!r}")
            tok, user = row[0].strip(), row[1].strip()
            if tok in out:
                raise ValueError(f"{path}:{n}: token of user {user!r} already given to "
                                 f"{out[tok]!r}")
            out[tok] = user
    return out


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A client killed mid-request (the failover tests kill -9 schedulers) is routine.
        if isinstance(sys.exc_info()[1], (ConnectionError, ssl.SSLError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class Fake:
    def __init__(self, args):
        self.args = args
        self.token = args.token or secrets.token_hex(16)
        self.users = {self.token: ADMIN_USER}  # bearer token -> user name
        if args.token_auth_file:
            self.users.update(read_token_file(args.token_auth_file))
        self.store = Store(args.history, args.pod_termination)
        self.faults = Faults(args.seed)
        self.faults.apply({"watch_close_prob": args.watch_close_prob,
                           "watch_close_period": args.watch_close_period,
                           "error_rate": args.error_rate, "error_code": args.error_code,
                           "retry_after": args.retry_after,
                           "lease_conflicts": args.lease_conflicts,
                           "bookmark_interval": args.bookmark_interval}, self.store)
        self.log = RequestLog(os.path.join(args.dir, "requests.jsonl"))
        self.api = Api(self)

    def kubelet_delete(self, res, ns, name, uid):
        """The kubelet's part of a graceful pod delete: the pod goes once its containers
        stopped, here after --pod-termination seconds."""
        def finish():
            with self.store.cond:
                cur = self.store.objs[res.store].get((ns, name))
                if cur is not None and cur["metadata"]["uid"] == uid and \
                        not cur["metadata"].get("finalizers"):
                    self.store.commit(res.store, "DELETED", cur, cur)
        t = threading.Timer(self.store.pod_termination, finish)
        t.daemon = True
        t.start()

    def serve(self):
        a = self.args
        os.makedirs(a.dir, exist_ok=True)
        make_certs(a.dir)
        with open(os.path.join(a.dir, "token"), "w") as f:
            f.write(self.token + "\n")
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(os.path.join(a.dir, "server.crt"), os.path.join(a.dir, "server.key"))
        ctx.load_verify_locations(os.path.join(a.dir, "ca.crt"))
        ctx.verify_mode = ssl.CERT_OPTIONAL  # a client certificate authenticates like a token
        ctx.set_alpn_protocols(["http/1.1"])  # no HTTP/2 here: say so in the handshake
        httpd = Server((a.host, a.port), Handler)
        # The handshake runs in the request's thread, so a slow client never blocks accept().
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True,
                                       do_handshake_on_connect=False)
        httpd.fake = self
        port = httpd.server_address[1]
        write_kubeconfigs(a.dir, port, self.token, a.host)
        tmp = os.path.join(a.dir, "port.tmp")
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.replace(tmp, os.path.join(a.dir, "port"))

        def stop(*_):
            threading.Thread(target=httpd.shutdown, daemon=True).start()
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        try:
            httpd.serve_forever(poll_interval=0.2)
        finally:
            self.log.stop.set()
            self.log.thread.join(2)


def parse_args(argv):
    p = argparse.ArgumentParser(description="A strict fake kube-apiserver for tests.")
    p.add_argument("--dir", required=True, help="certificates, kubeconfig, port, request log")
    p.add_argument("--port", type=int, default=0, help="0: any free port (written to DIR/port)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--token", default="", help="the bearer token (default: random)")
    p.add_argument("--token-auth-file", default="",
                   help="more users: CSV token,user,uid[,groups] as kube-apiserver reads it")
    p.add_argument("--history", type=int, default=10000,
                   help="events kept per resource; older resourceVersions are compacted (410)")
    p.add_argument("--bookmark-interval", type=float, default=1.0,
                   help="seconds between BOOKMARK events on watches that allow them")
    p.add_argument("--pod-termination", type=float, default=0.0,
                   help="seconds a gracefully deleted bound pod stays Terminating")
    p.add_argument("--watch-close-prob", type=float, default=0.0,
                   help="probability per event that a watch is closed after it")
    p.add_argument("--watch-close-period", type=float, default=0.0,
                   help="close each watch after a random time up to this many seconds")
    p.add_argument("--error-rate", type=float, default=0.0,
                   help="fraction of requests answered with --error-code")
    p.add_argument("--error-code", type=int, default=429, choices=(429, 500, 503, 504))
    p.add_argument("--retry-after", type=int, default=1, help="Retry-After seconds of a 429")
    p.add_argument("--lease-conflicts", type=int, default=0,
                   help="the first N Lease writes answer 409 Conflict")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args(argv)
    if a.history < 1:
        p.error(f"--history {a.history}: must be at least 1")
    for name in ("error_rate", "watch_close_prob"):
        v = getattr(a, name)
        if not 0 <= v <= 1:
            p.error(f"--{name.replace('_', '-')} {v}: must lie in [0, 1]")
    return a


# --- Starting it from tests ------------------------------------------------------------------

class FakeHandle:
    """A running fake in a child process: url, token, kubeconfig, and helpers for tests."""

    def __init__(self, proc, d, port, token):
        self.proc, self.dir, self.port, self.token = proc, d, port, token
        self.url = f"https://127.0.0.1:{port}"
        self.kubeconfig = os.path.join(d, "kubeconfig")
        self.kubeconfig_cert = os.path.join(d, "kubeconfig-cert")
        self.ca = os.path.join(d, "ca.crt")

    def session(self, token=True):
        import requests
        s = requests.Session()
        s.trust_env = False  # no proxy, and no CA bundle from the environment overriding ours
        s.verify = self.ca
        if token:
            s.headers["Authorization"] = f"Bearer {self.token}"
        return s

    def _control(self, method, path, body=None):
        with self.session(token=False) as s:
            r = s.request(method, self.url + path, json=body, timeout=10)
        if r.status_code != 200:
            raise RuntimeError(f"{method} {path}: {r.status_code} {r.text}")
        return r.json()

    def add_kubeconfig(self, path, token):
        """A kubeconfig like DIR/kubeconfig that authenticates with another token (one of
        --token-auth-file's users)."""
        with open(self.kubeconfig) as f:
            text = f.read()
        text = text.replace(f"token: {self.token}\n", f"token: {token}\n")
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, 0o600)
        return path

    def faults(self, **kw):
        return self._control("POST", "/fake/faults", kw)

    def requests(self, user=None):
        """The request log; with user, only the requests made as that user."""
        out = self._control("GET", "/fake/requests")["requests"]
        return out if user is None else [e for e in out if e.get("user") == user]

    def state(self, resource=""):
        return self._control("GET", "/fake/state" + (f"?resource={resource}" if resource else ""))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def start_fake(d, *args, timeout=30):
    """Starts the fake on a free port with DIR d and extra command-line args; returns a
    FakeHandle once it listens. The caller stops it (handle.stop() or a with block)."""
    os.makedirs(d, exist_ok=True)
    port_file = os.path.join(d, "port")
    if os.path.exists(port_file):
        os.unlink(port_file)
    token = secrets.token_hex(16)
    err = open(os.path.join(d, "fake_apiserver.stderr"), "w")
    proc = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--port", "0", "--dir", d,
                             "--token", token, *[str(a) for a in args]], stderr=err,
                            stdout=subprocess.DEVNULL)
    err.close()
    end = time.monotonic() + timeout
    while not os.path.exists(port_file):
        if proc.poll() is not None or time.monotonic() > end:
            proc.kill()
            proc.wait()
            with open(os.path.join(d, "fake_apiserver.stderr")) as f:
                raise RuntimeError(f"fake apiserver did not start: {f.read()}")
        time.sleep(0.05)
    with open(port_file) as f:
        port = int(f.read())
    return FakeHandle(proc, d, port, token)


if __name__ == "__main__":
    try:
        main_fake = Fake(parse_args(sys.argv[1:]))
    except ApiError as e:  # an option's value refused by the faults' own checks
        sys.exit(f"fake_apiserver.py: {e.message.replace('/fake/faults: ', 'option ')}")
    except (OSError, ValueError) as e:  # --token-auth-file
        sys.exit(f"fake_apiserver.py: --token-auth-file: {e}")
    main_fake.serve()
