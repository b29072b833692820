#!/usr/bin/env python3
"""A strict fake kube-apiserver: the independent peer the Kubernetes transport is tested against.

Written from the Kubernetes API conventions (api-conventions.md, the API concepts page on
resource versions, watches and chunked lists) and not from our own server, so a client that
works here works because it follows Kubernetes, not because it shares our server's quirks.

Design. Every object lives in memory under one global integer resourceVersion counter, as in
etcd: each write takes the next number, and the write is appended to one bounded history (the
last --history events over all resources). That history serves three things: watches from a
resourceVersion (events strictly after it; 410 Expired, sent as an ERROR watch event carrying a
Status, once the version is older than the compaction horizon), consistent paged lists (a
continue token holds the list's resourceVersion and the snapshot at that version is rebuilt by
undoing the newer events; 410 when the token's version has been compacted) and the
selector-aware watch rule (an object that stops matching a watch's selector is sent as DELETED,
one that starts matching as ADDED). Objects are never mutated in place once stored, so readers
need no copies.

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
Kubernetes RBAC derives them, so a test can check a client's requests against its ClusterRole.

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
import re
import secrets
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


# --- Resources served ------------------------------------------------------------------------

class Res:
    """One served resource: where it lives in the URL space and how strict its rules are."""

    def __init__(self, group, version, plural, kind, namespaced, status=False, short=(),
                 builtin=True, store=None, create_status=False):
        self.group, self.version, self.plural, self.kind = group, version, plural, kind
        self.namespaced, self.status, self.short, self.builtin = namespaced, status, short, builtin
        self.create_status = create_status  # create keeps status (a kubelet registers its Node)
        self.api_version = f"{group}/{version}" if group else version
        # Two resources may share one storage (core v1 and events.k8s.io/v1 Events).
        self.store = store or (group, plural)

    def __repr__(self):
        return f"{self.plural}.{self.group or 'core'}"


RESOURCES = [
    Res("", "v1", "namespaces", "Namespace", False, status=True, short=("ns",)),
    Res("", "v1", "nodes", "Node", False, status=True, short=("no",), create_status=True),
    Res("", "v1", "pods", "Pod", True, status=True, short=("po",)),
    Res("", "v1", "events", "Event", True, short=("ev",)),
    Res("events.k8s.io", "v1", "events", "Event", True, short=("ev",), store=("", "events")),
    Res("coordination.k8s.io", "v1", "leases", "Lease", True),
    Res("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", True, status=True,
        short=("pdb",)),
    Res("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, short=("pc",)),
    Res("scheduling.k8s.io", "v1beta1", "workloads", "Workload", True),
    Res("scheduling.k8s.io", "v1beta1", "podgroups", "PodGroup", True, status=True),
    Res("scheduling.x-k8s.io", "v1alpha1", "podgroups", "PodGroup", True, status=True,
        short=("pg", "pgs"), builtin=False),
    Res("scheduling.volcano.sh", "v1beta1", "podgroups", "PodGroup", True, status=True,
        short=("pg", "podgroup-v1beta1"), builtin=False),
    Res("topology.node.k8s.io", "v1alpha2", "noderesourcetopologies", "NodeResourceTopology",
        False, short=("node-res-topo",), builtin=False),
    Res("kueue.x-k8s.io", "v1beta2", "clusterqueues", "ClusterQueue", False, status=True,
        short=("cq",), builtin=False),
    Res("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue", True, status=True,
        short=("lq", "queue", "queues"), builtin=False),
    Res("kueue.x-k8s.io", "v1beta2", "resourceflavors", "ResourceFlavor", False,
        short=("flavor", "flavors", "rf"), builtin=False),
    Res("kueue.x-k8s.io", "v1beta2", "workloads", "Workload", True, status=True,
        short=("wl",), builtin=False),
    Res("resource.k8s.io", "v1", "resourceslices", "ResourceSlice", False),
    Res("resource.k8s.io", "v1", "deviceclasses", "DeviceClass", False),
    Res("resource.k8s.io", "v1", "resourceclaims", "ResourceClaim", True, status=True),
]
BY_PATH = {(r.group, r.version, r.plural): r for r in RESOURCES}
PREFERRED = {"scheduling.k8s.io": "v1"}

# Field labels kube-apiserver accepts in fieldSelector, beyond metadata.name/metadata.namespace.
FIELD_LABELS = {
    ("", "pods"): {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
                   "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
                   "status.nominatedNodeName"},
    ("", "nodes"): {"spec.unschedulable"},
    ("", "namespaces"): {"status.phase"},
    ("", "events"): {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
                     "involvedObject.uid", "involvedObject.apiVersion",
                     "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
                     "reportingComponent", "source", "type"},
    ("events.k8s.io", "events"): {"regarding.kind", "regarding.namespace", "regarding.name",
                                  "regarding.uid", "regarding.apiVersion",
                                  "regarding.resourceVersion", "regarding.fieldPath", "reason",
                                  "reportingController", "type"},
}

# Strategic merge: list fields merged by a key (patchMergeKey) and primitive lists merged as sets.
MERGE_KEYS = {"conditions": "type", "containers": "name", "initContainers": "name",
              "ephemeralContainers": "name", "volumes": "name", "env": "name",
              "volumeMounts": "mountPath", "ports": "containerPort", "schedulingGates": "name",
              "ownerReferences": "uid", "addresses": "type", "imagePullSecrets": "name",
              "resourceClaims": "name", "hostAliases": "ip", "topologySpreadConstraints":
              "topologyKey"}
MERGE_PRIMITIVES = {"finalizers"}

# Pod spec fields an update may change (kube's pod update validation); all else is immutable.
POD_MUTABLE_SPEC = {"activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds",
                    "schedulingGates"}

DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
MICROTIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})$")


def now_time():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def clone(o):
    return json.loads(json.dumps(o))


def dumps(o):
    return json.dumps(o, separators=(",", ":"))


class ApiError(Exception):
    """An answer other than success: becomes a meta/v1 Status with this code and reason."""

    def __init__(self, code, reason, message, details=None, headers=None):
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message
        self.details, self.headers = details, headers or {}

    def status(self):
        s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
             "message": self.message, "reason": self.reason, "code": self.code}
        if self.details:
            s["details"] = self.details
        return s


def invalid(res, name, causes):
    """422 Invalid naming each field, the value and why, as kube's field.ErrorList prints."""
    text = "; ".join(f"{c['field']}: {c['message']}" for c in causes)
    return ApiError(422, "Invalid", f'{res.kind} "{name}" is invalid: {text}',
                    {"name": name, "group": res.group, "kind": res.kind,
                     "causes": [{"reason": c.get("reason", "FieldValueInvalid"),
                                 "message": c["message"], "field": c["field"]} for c in causes]})


def conflict(res, name, why):
    plural = res.plural if not res.group else f"{res.plural}.{res.group}"
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {plural} "{name}": {why}',
                    {"name": name, "group": res.group, "kind": res.plural})


def not_found(res, name):
    plural = res.plural if not res.group else f"{res.plural}.{res.group}"
    return ApiError(404, "NotFound", f'{plural} "{name}" not found',
                    {"name": name, "group": res.group, "kind": res.plural})


def bad_request(msg):
    return ApiError(400, "BadRequest", msg)


STALE = "the object has been modified; please apply your changes to the latest version and try again"


# --- Selectors -------------------------------------------------------------------------------

def split_top(text):
    """Splits a selector at commas outside parentheses."""
    out, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [p.strip() for p in out if p.strip()]


LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


def parse_label_selector(text):
    """-> list of (key, op, values); op in = != in notin exists !exists. 400 on bad syntax."""
    reqs = []
    for part in split_top(text or ""):
        m = re.match(r"^(\S+)\s+(in|notin)\s+\((.*)\)$", part)
        if m:
            key, op, vals = m.group(1), m.group(2), [v.strip() for v in m.group(3).split(",")]
        elif part.startswith("!"):
            key, op, vals = part[1:].strip(), "!exists", []
        elif "!=" in part:
            key, _, v = part.partition("!=")
            key, op, vals = key.strip(), "!=", [v.strip()]
        elif "==" in part:
            key, _, v = part.partition("==")
            key, op, vals = key.strip(), "=", [v.strip()]
        elif "=" in part:
            key, _, v = part.partition("=")
            key, op, vals = key.strip(), "=", [v.strip()]
        else:
            key, op, vals = part, "exists", []
        if not LABEL_KEY.match(key) or any(re.search(r"[\s()!=]", v) for v in vals):
            raise bad_request(f"unable to parse requirement: labelSelector {text!r}: "
                              f"{part!r} is not a valid requirement")
        reqs.append((key, op, vals))
    return reqs


def label_match(reqs, obj):
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for key, op, vals in reqs:
        has, val = key in labels, labels.get(key)
        if op == "=" and val != vals[0]:
            return False
        if op == "!=" and has and val == vals[0]:
            return False
        if op == "in" and (not has or val not in vals):
            return False
        if op == "notin" and has and val in vals:
            return False
        if op == "exists" and not has:
            return False
        if op == "!exists" and has:
            return False
    return True


def parse_field_selector(text, res):
    allowed = {"metadata.name", "metadata.namespace"} | FIELD_LABELS.get((res.group, res.plural),
                                                                        set())
    reqs = []
    for part in split_top(text or ""):
        if "!=" in part:
            f, _, v = part.partition("!=")
            op = "!="
        elif "==" in part:
            f, _, v = part.partition("==")
            op = "="
        elif "=" in part:
            f, _, v = part.partition("=")
            op = "="
        else:
            raise bad_request(f"invalid selector: fieldSelector {text!r}: {part!r} has no operator")
        f = f.strip()
        if f not in allowed:
            raise bad_request(f'field label not supported: "{f}" (fieldSelector on {res!r})')
        reqs.append((f, op, v.strip()))
    return reqs


def field_value(obj, path):
    cur = obj
    for p in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(p)
    if cur is None:
        return "false" if path in ("spec.hostNetwork", "spec.unschedulable") else ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def field_match(reqs, obj):
    for f, op, v in reqs:
        got = field_value(obj, f)
        if (op == "=") != (got == v):
            return False
    return True


def selector_name(reqs):
    for f, op, v in reqs:
        if f == "metadata.name" and op == "=":
            return v
    return ""


# --- Events: one store, two shapes -----------------------------------------------------------

# events.k8s.io/v1 field <-> core v1 field (kube's conversion between the two Event APIs).
EV_MAP = [("regarding", "involvedObject"), ("note", "message"),
          ("reportingController", "reportingComponent"), ("deprecatedSource", "source"),
          ("deprecatedFirstTimestamp", "firstTimestamp"), ("deprecatedLastTimestamp",
                                                          "lastTimestamp"),
          ("deprecatedCount", "count")]


def to_view(res, obj):
    """The stored object as res shows it (only events.k8s.io differs from storage)."""
    if obj is None or res.group != "events.k8s.io":
        return obj
    out = {k: v for k, v in obj.items() if k not in {b for _, b in EV_MAP}}
    for new, old in EV_MAP:
        if old in obj:
            out[new] = obj[old]
    out["apiVersion"], out["kind"] = "events.k8s.io/v1", "Event"
    return out


def from_view(res, obj):
    if res.group != "events.k8s.io":
        return obj
    out = {k: v for k, v in obj.items() if k not in {a for a, _ in EV_MAP}}
    for new, old in EV_MAP:
        if new in obj:
            out[old] = obj[new]
    out["apiVersion"], out["kind"] = "v1", "Event"
    return out


# --- Patches ---------------------------------------------------------------------------------

def merge_patch(target, patch):
    """RFC 7386."""
    if not isinstance(patch, dict):
        return clone(patch)
    if not isinstance(target, dict):
        target = {}
    out = dict(target)
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def strategic_merge(target, patch):
    """A correct subset of strategic merge patch: maps merge recursively, null deletes, lists
    with a patch merge key merge by it ($patch: delete / replace honoured), finalizers merge as
    a set with $deleteFromPrimitiveList, other lists replace; $setElementOrder and $retainKeys
    directives are accepted and ignored (ordering only)."""
    if not isinstance(patch, dict):
        return clone(patch)
    if patch.get("$patch") == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") or k in ("$retainKeys", "$patch"):
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            out[field] = [x for x in out.get(field) or [] if x not in (v or [])]
            continue
        if v is None:
            out.pop(k, None)
        elif isinstance(v, list) and k in MERGE_KEYS:
            out[k] = merge_list(out.get(k) or [], v, MERGE_KEYS[k])
        elif isinstance(v, list) and k in MERGE_PRIMITIVES:
            cur = list(out.get(k) or [])
            out[k] = cur + [x for x in v if x not in cur]
        elif isinstance(v, dict):
            merged = strategic_merge(out.get(k), v)
            if merged is None:
                out.pop(k, None)
            else:
                out[k] = merged
        else:
            out[k] = clone(v)
    return out


def merge_list(cur, patch, key):
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [clone(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    out = [dict(x) if isinstance(x, dict) else x for x in cur]
    for p in patch:
        if not isinstance(p, dict) or key not in p:
            raise bad_request(f"strategic merge patch: an element of a list merged by {key!r} "
                              f"has no {key!r}: {dumps(p)}")
        idx = next((i for i, x in enumerate(out) if isinstance(x, dict) and x.get(key) == p[key]),
                   None)
        if p.get("$patch") == "delete":
            if idx is not None:
                out.pop(idx)
            continue
        if idx is None:
            out.append(clone({k: v for k, v in p.items() if v is not None}))
        else:
            out[idx] = strategic_merge(out[idx], p)
    return out


def json_patch(doc, ops):
    """RFC 6902: add, remove, replace, move, copy, test."""
    if not isinstance(ops, list):
        raise bad_request("json patch: the body must be an array of operations")
    doc = clone(doc)

    def walk(path):
        if not path.startswith("/"):
            raise bad_request(f"json patch: path {path!r} must start with /")
        parts = [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]
        cur = doc
        for p in parts[:-1]:
            cur = cur[int(p)] if isinstance(cur, list) else cur[p]
        return cur, parts[-1]

    for op in ops:
        try:
            kind, path = op["op"], op["path"]
            parent, last = walk(path)
            if kind in ("add", "replace"):
                val = clone(op["value"])
                if isinstance(parent, list):
                    i = len(parent) if last == "-" else int(last)
                    if kind == "add":
                        parent.insert(i, val)
                    else:
                        parent[i] = val
                else:
                    if kind == "replace" and last not in parent:
                        raise bad_request(f"json patch: replace of missing path {path!r}")
                    parent[last] = val
            elif kind == "remove":
                if isinstance(parent, list):
                    parent.pop(int(last))
                else:
                    del parent[last]
            elif kind == "test":
                got = parent[int(last)] if isinstance(parent, list) else parent.get(last)
                if got != op["value"]:
                    raise ApiError(422, "Invalid", f"json patch: test failed at {path!r}")
            elif kind in ("move", "copy"):
                sp, sl = walk(op["from"])
                val = sp[int(sl)] if isinstance(sp, list) else sp[sl]
                if kind == "move":
                    if isinstance(sp, list):
                        sp.pop(int(sl))
                    else:
                        del sp[sl]
                if isinstance(parent, list):
                    parent.insert(len(parent) if last == "-" else int(last), clone(val))
                else:
                    parent[last] = clone(val)
            else:
                raise bad_request(f"json patch: unknown op {kind!r}")
        except (KeyError, IndexError, ValueError, TypeError) as e:
            raise ApiError(422, "Invalid", f"json patch: cannot apply {dumps(op)}: {e!r}")
    return doc


# --- The store -------------------------------------------------------------------------------

Event = collections.namedtuple("Event", "rv store ns name type obj old")


class Store:
    """All objects and the bounded history, under one condition variable."""

    def __init__(self, history, pod_termination, clock=time.monotonic):
        self.cond = threading.Condition()
        self.objs = collections.defaultdict(dict)  # store -> {(ns, name): obj}
        self.rv = 0
        self.history = history
        self.log = collections.deque()
        self.compacted = 0  # watches and continue tokens from an rv below this get 410
        self.pod_termination = pod_termination
        self.lease_conflicts = 0
        self.lines = {}  # rv -> {(view, type): watch line bytes}, shared by every watcher
        self.clock = clock
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            with self.cond:
                self.commit(("", "namespaces"), "ADDED", self.new_meta({
                    "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns},
                    "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}), None)

    def new_meta(self, obj):
        md = obj.setdefault("metadata", {})
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = now_time()
        md["generation"] = 1
        return obj

    def commit(self, store, etype, obj, old):
        """Stamps the next resourceVersion on obj and records the change. Caller holds cond."""
        self.rv += 1
        md = dict(obj["metadata"])
        md["resourceVersion"] = str(self.rv)
        obj = dict(obj)
        obj["metadata"] = md
        key = (md.get("namespace", ""), md["name"])
        if etype == "DELETED":
            self.objs[store].pop(key, None)
        else:
            self.objs[store][key] = obj
        self.log.append(Event(self.rv, store, key[0], key[1], etype, obj, old))
        while len(self.log) > self.history:
            ev = self.log.popleft()
            self.compacted = ev.rv
            self.lines.pop(ev.rv, None)
        self.cond.notify_all()
        return obj

    def compact(self):
        with self.cond:
            self.log.clear()
            self.lines.clear()
            self.compacted = self.rv
            self.cond.notify_all()

    def set_history(self, n):
        with self.cond:
            self.history = max(1, int(n))
            while len(self.log) > self.history:
                self.compacted = self.log.popleft().rv

    def snapshot(self, store, at_rv):
        """The objects of store as they were at at_rv (None: now). Caller holds cond."""
        cur = dict(self.objs[store])
        if at_rv is None or at_rv >= self.rv:
            return cur
        if at_rv < self.compacted:
            return None
        for ev in reversed(self.log):
            if ev.rv <= at_rv:
                break
            if ev.store != store:
                continue
            key = (ev.ns, ev.name)
            if ev.type == "ADDED":
                cur.pop(key, None)
            elif ev.type == "MODIFIED":
                cur[key] = ev.old
            else:
                cur[key] = ev.old if ev.old is not None else ev.obj
        return cur

    def events_after(self, rv):
        """Events with rv > the given one, or None when some were compacted. Caller holds cond."""
        if rv < self.compacted:
            return None
        out = []
        for ev in reversed(self.log):
            if ev.rv <= rv:
                break
            out.append(ev)
        out.reverse()
        return out


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
    if len(parts) < 2 or parts[0] not in ("api", "apis"):
        return info
    if parts[0] == "apis":
        if len(parts) < 3:
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
        fake = self.server.fake
        auth = self.headers.get("Authorization", "")
        if auth == f"Bearer {fake.token}":
            return True
        try:
            cert = self.connection.getpeercert()
        except (ValueError, AttributeError, ssl.SSLError):
            cert = None
        return bool(cert)

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
            if not self._authenticated():
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
            self._send(500, ApiError(500, "InternalError", f"fake apiserver bug: {e!r}").status())
        finally:
            fake.log.add({k: info[k] for k in ("verb", "method", "path", "apiGroup",
                                               "resource", "subresource", "namespace",
                                               "name")} | {"code": self.code})

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
                out = {"resourceVersion": str(st.rv), "compactedResourceVersion":
                       str(st.compacted), "historyLength": len(st.log), "objects": objects}
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
        name = info["name"] if len(self._res_parts(path)) >= 2 else ""
        sub = info["subresource"]
        if sub and not ((sub == "status" and res.status) or
                        (sub == "binding" and res.plural == "pods" and not res.group)):
            raise ApiError(404, "NotFound", f"the server could not find the requested resource "
                           f"({res!r} has no subresource {sub!r})")
        verb = info["verb"]
        if verb == "watch":
            return self._watch(res, ns, name, query)
        if verb == "list":
            return self._send(200, api.list(res, ns, query))
        if verb == "get":
            return self._send(200, api.get(res, ns, name))
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
                expired = last < st.compacted
                compacted = st.compacted
        try:
            if expired:
                self._chunk(self._expired_line(last, compacted))
                return self._end_watch()
            for ln in initial:
                self._chunk(ln)
            next_bookmark = time.monotonic() + faults.bookmark_interval
            while True:
                now = time.monotonic()
                if now >= deadline:
                    return self._end_watch(faults.watch_close_abrupt and now < start + timeout)
                with st.cond:
                    if st.rv <= last:
                        wake = min(deadline, next_bookmark if bookmarks else deadline)
                        st.cond.wait(max(0.0, min(wake - now, 1.0)))
                    evs = st.events_after(last)
                    if evs is None:  # this watcher fell behind the compaction horizon
                        compacted = st.compacted
                    else:
                        out = []
                        for ev in evs:
                            if ev.store != res.store:
                                continue
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
                for ln in out:
                    faults.wait_unpaused()
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


# --- The API semantics -----------------------------------------------------------------------

class Api:
    def __init__(self, fake):
        self.fake = fake
        self.st = fake.store

    # ---- reads
    def get(self, res, ns, name):
        with self.st.cond:
            obj = self.st.objs[res.store].get((ns, name))
        if obj is None:
            raise not_found(res, name)
        return to_view(res, obj)

    def list(self, res, ns, query):
        st = self.st
        q = lambda k: (query.get(k) or [""])[0]  # noqa: E731
        labels = parse_label_selector(q("labelSelector"))
        fields = parse_field_selector(q("fieldSelector"), res)
        rv_text, match, cont = q("resourceVersion"), q("resourceVersionMatch"), q("continue")
        limit_text = q("limit")
        try:
            limit = int(limit_text) if limit_text else 0
        except ValueError:
            raise bad_request(f"limit {limit_text!r}: not an integer")
        if limit < 0:
            raise bad_request(f"limit {limit}: must not be negative")
        if match and not rv_text:
            raise bad_request(f"resourceVersionMatch {match!r}: only allowed with a "
                              "resourceVersion")
        if match not in ("", "NotOlderThan", "Exact"):
            raise bad_request(f"resourceVersionMatch {match!r}: must be NotOlderThan or Exact")
        if cont and rv_text:
            raise bad_request("specifying resource version is not allowed when using continue")
        if rv_text and rv_text != "0" and not rv_text.isdigit():
            raise bad_request(f"resourceVersion {rv_text!r}: not a valid resource version")
        if match == "Exact" and rv_text == "0":
            raise bad_request("resourceVersionMatch Exact: resourceVersion 0 is not allowed")
        start_after = None
        at = None
        if cont:
            try:
                tok = json.loads(base64.urlsafe_b64decode(cont.encode()))
                at, start_after = int(tok["rv"]), tuple(tok["start"])
            except (ValueError, KeyError, TypeError):
                raise bad_request(f"continue {cont!r}: not a continue token this server issued")
        elif rv_text == "0":
            limit = 0  # served from the watch cache: the whole list, no paging, as kube does
        elif rv_text and match == "Exact":
            at = int(rv_text)
        with st.cond:
            if rv_text and rv_text != "0" and int(rv_text) > st.rv:
                st.cond.wait_for(lambda: st.rv >= int(rv_text), 3.0)
                if int(rv_text) > st.rv:
                    raise ApiError(504, "Timeout", f"Too large resource version: {rv_text}, "
                                   f"current: {st.rv}", {"causes": [
                                       {"reason": "ResourceVersionTooLarge",
                                        "message": "Too large resource version"}],
                                       "retryAfterSeconds": 1}, {"Retry-After": "1"})
            list_rv = at if at is not None else st.rv
            snap = st.snapshot(res.store, at)
            if snap is None:
                if cont:
                    raise ApiError(410, "Expired", "The provided continue parameter is too old "
                                   "to display a consistent list result. You can start a new "
                                   "list without the continue parameter.")
                raise ApiError(410, "Expired", f"too old resource version: {at} "
                               f"({st.compacted})")
        keys = sorted(k for k in snap if (not ns or k[0] == ns))
        if start_after is not None:
            keys = [k for k in keys if k > start_after]
        items, last_key, next_key, remaining = [], None, None, 0
        for i, k in enumerate(keys):
            v = to_view(res, snap[k])
            if not (label_match(labels, v) and field_match(fields, v)):
                continue
            if limit and len(items) == limit:
                next_key, remaining = last_key, len(keys) - i
                break
            items.append(v)
            last_key = k
        md = {"resourceVersion": str(list_rv)}
        if next_key is not None:
            md["continue"] = base64.urlsafe_b64encode(dumps(
                {"rv": list_rv, "start": list(next_key)}).encode()).decode()
            if not labels and not fields:
                md["remainingItemCount"] = remaining
        return {"kind": f"{res.kind}List", "apiVersion": res.api_version, "metadata": md,
                "items": items}

    # ---- validation shared by writes
    def _check_meta(self, res, obj, ns, name_in_url=None):
        if not isinstance(obj, dict):
            raise bad_request(f"the {res.kind} must be a JSON object")
        av, kind = obj.get("apiVersion"), obj.get("kind")
        if av is not None and av != res.api_version:
            raise bad_request(f"the API version in the data ({av}) does not match the expected "
                              f"API version ({res.api_version})")
        if kind is not None and kind != res.kind:
            raise bad_request(f"{kind} in version {av or res.api_version} cannot be handled as "
                              f"a {res.kind}")
        md = obj.get("metadata")
        if md is None:
            md = obj["metadata"] = {}
        if not isinstance(md, dict):
            raise bad_request(f"metadata: must be an object, got {dumps(md)}")
        for field in ("labels", "annotations"):
            val = md.get(field)
            if val is None:
                continue
            if not isinstance(val, dict) or not all(isinstance(v, str) for v in val.values()):
                raise bad_request(f"metadata.{field}: must be a map of string to string, got "
                                  f"{dumps(val)}")
        if res.namespaced:
            body_ns = md.get("namespace")
            if body_ns and body_ns != ns:
                raise bad_request(f"the namespace of the provided object ({body_ns}) does not "
                                  f"match the namespace sent on the request ({ns})")
            md["namespace"] = ns
        elif md.get("namespace"):
            raise bad_request(f"metadata.namespace {md['namespace']!r}: {res.kind} is "
                              "cluster-scoped")
        if name_in_url is not None and md.get("name") not in (None, name_in_url):
            raise bad_request(f"the name of the object ({md.get('name')}) does not match the "
                              f"name on the URL ({name_in_url})")
        if name_in_url is not None:
            md["name"] = name_in_url
        obj["apiVersion"], obj["kind"] = res.api_version, res.kind
        return md

    def _validate(self, res, obj, old):
        name = obj["metadata"].get("name") or ""
        causes = []
        regex = DNS_LABEL if res.plural == "namespaces" else DNS_SUBDOMAIN
        limit = 63 if res.plural == "namespaces" else 253
        if not regex.match(name) or len(name) > limit:
            causes.append({"field": "metadata.name", "message":
                           f'Invalid value: "{name}": a lowercase RFC 1123 '
                           f'{"label" if limit == 63 else "subdomain"} must consist of lower '
                           "case alphanumeric characters, '-' or '.', and must start and end "
                           "with an alphanumeric character"})
        if res.plural == "pods" and not res.group:
            causes += self._validate_pod(obj, old)
        if res.plural == "leases":
            causes += self._validate_lease(obj)
        if res.plural == "events" and res.group == "events.k8s.io" and old is None:
            causes += self._validate_event(obj)
        if res.plural == "workloads" and res.group == "scheduling.k8s.io" and old is not None \
                and obj.get("spec") != old.get("spec"):
            causes.append({"field": "spec", "message": "Invalid value: the Workload spec: "
                           "field is immutable"})
        if causes:
            raise invalid(res, name, causes)

    def _validate_pod(self, pod, old):
        causes = []
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            return [{"field": "spec", "reason": "FieldValueRequired",
                     "message": "Required value"}]
        ctrs = spec.get("containers")
        if not isinstance(ctrs, list) or not ctrs:
            causes.append({"field": "spec.containers", "reason": "FieldValueRequired",
                           "message": "Required value"})
        else:
            for i, c in enumerate(ctrs):
                if not isinstance(c, dict) or not c.get("name"):
                    causes.append({"field": f"spec.containers[{i}].name", "reason":
                                   "FieldValueRequired", "message": "Required value"})
                if isinstance(c, dict) and not c.get("image") and old is None:
                    causes.append({"field": f"spec.containers[{i}].image", "reason":
                                   "FieldValueRequired", "message": "Required value"})
        if old is not None:
            o, n = old.get("spec") or {}, spec
            strip = lambda s: {k: v for k, v in s.items() if k not in POD_MUTABLE_SPEC}  # noqa
            images = lambda s: [{k: v for k, v in c.items() if k != "image"}  # noqa: E731
                                for c in s.get("containers") or [] if isinstance(c, dict)]
            if {**strip(o), "containers": images(o)} != {**strip(n), "containers": images(n)}:
                what = "spec.nodeName" if o.get("nodeName") != n.get("nodeName") else "spec"
                causes.append({"field": what, "reason": "FieldValueForbidden", "message":
                               "Forbidden: pod updates may not change fields other than "
                               "`spec.containers[*].image`, `spec.initContainers[*].image`, "
                               "`spec.activeDeadlineSeconds`, `spec.tolerations` (only "
                               "additions to existing tolerations), "
                               "`spec.terminationGracePeriodSeconds` (allow it to be set to 1 "
                               "if it was previously negative); spec.nodeName is set only by "
                               "pods/binding"})
            old_gates = {g.get("name") for g in o.get("schedulingGates") or []}
            for g in n.get("schedulingGates") or []:
                if g.get("name") not in old_gates:
                    causes.append({"field": "spec.schedulingGates", "reason":
                                   "FieldValueForbidden", "message": "Forbidden: only deletion "
                                   f"is allowed, but found new scheduling gate "
                                   f"'{g.get('name')}'"})
        return causes

    def _validate_lease(self, lease):
        causes = []
        spec = lease.get("spec") or {}
        if not isinstance(spec, dict):
            return [{"field": "spec", "message": f"Invalid value: {dumps(spec)}: must be an "
                     "object"}]
        for f in ("acquireTime", "renewTime"):
            v = spec.get(f)
            if v is not None and (not isinstance(v, str) or not MICROTIME.match(v)):
                causes.append({"field": f"spec.{f}", "message": f"Invalid value: {dumps(v)}: "
                               "must be an RFC 3339 MicroTime (2006-01-02T15:04:05.000000Z)"})
        for f in ("leaseDurationSeconds", "leaseTransitions"):
            v = spec.get(f)
            if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 0 or
                                  (f == "leaseDurationSeconds" and v == 0)):
                causes.append({"field": f"spec.{f}", "message": f"Invalid value: {dumps(v)}: "
                               f"must be {'greater than 0' if f == 'leaseDurationSeconds' else 'greater than or equal to 0'}"})  # noqa: E501
        v = spec.get("holderIdentity")
        if v is not None and not isinstance(v, str):
            causes.append({"field": "spec.holderIdentity", "message": f"Invalid value: "
                           f"{dumps(v)}: must be a string"})
        return causes

    def _validate_event(self, ev):
        """events.k8s.io/v1 create rules (stored in core shape: from_view already applied)."""
        causes = []
        t = ev.get("eventTime")
        if not t:
            causes.append({"field": "eventTime", "reason": "FieldValueRequired",
                           "message": "Required value"})
        elif not isinstance(t, str) or not MICROTIME.match(t):
            causes.append({"field": "eventTime", "message": f"Invalid value: {dumps(t)}: must "
                           "be an RFC 3339 MicroTime"})
        for new, old in (("reportingController", "reportingComponent"),
                         ("reportingInstance", "reportingInstance"), ("action", "action"),
                         ("reason", "reason")):
            if not ev.get(old):
                causes.append({"field": new, "reason": "FieldValueRequired",
                               "message": "Required value"})
        if ev.get("type") not in ("Normal", "Warning"):
            causes.append({"field": "type", "reason": "FieldValueNotSupported", "message":
                           f"Unsupported value: {dumps(ev.get('type'))}: supported values: "
                           '"Normal", "Warning"'})
        if len((ev.get("message") or "").encode()) > 1024:
            causes.append({"field": "note", "reason": "FieldValueTooLong",
                           "message": "Too long: may not be more than 1024 bytes"})
        return causes

    @staticmethod
    def _pod_decode_defaults(spec):
        """The defaults kube's decoder fills on every write, so an omitted one is no change."""
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")

    def _pod_defaults(self, pod):
        spec = pod["spec"]
        self._pod_decode_defaults(spec)
        tol = spec.setdefault("tolerations", [])
        for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"):
            if not any(t.get("key") == key for t in tol):
                tol.append({"key": key, "operator": "Exists", "effect": "NoExecute",
                            "tolerationSeconds": 300})
        # The Priority admission plugin: spec.priority from the class, or the global default.
        classes = self.st.objs[("scheduling.k8s.io", "priorityclasses")]
        pcn = spec.get("priorityClassName")
        if pcn:
            pc = classes.get(("", pcn))
            if pc is None:
                raise ApiError(403, "Forbidden", f'pods "{pod["metadata"]["name"]}" is '
                               f"forbidden: no PriorityClass with name {pcn} was found")
        else:
            pc = next((c for c in classes.values() if c.get("globalDefault")), None)
        if "priority" in spec and pc is not None and spec["priority"] != pc.get("value", 0):
            raise ApiError(403, "Forbidden", f'pods "{pod["metadata"]["name"]}" is forbidden: '
                           "the integer value of priority must not be provided in pod spec; "
                           "priority admission controller computed "
                           f"{pc.get('value', 0)} from the given PriorityClass name")
        spec["priority"] = pc.get("value", 0) if pc is not None else spec.get("priority", 0)
        if pc is not None:
            spec["priorityClassName"] = pc["metadata"]["name"]
        spec.setdefault("preemptionPolicy", (pc or {}).get("preemptionPolicy",
                                                            "PreemptLowerPriority"))

    # ---- writes
    def create(self, res, ns, body, dry_run=False):
        md = self._check_meta(res, body, ns)
        body = from_view(res, body)
        md = body["metadata"]
        if md.get("resourceVersion"):
            raise ApiError(500, "InternalError", "resourceVersion should not be set on objects "
                           "to be created")
        if not md.get("name"):
            gen = md.get("generateName")
            if not gen:
                raise invalid(res, "", [{"field": "metadata.name", "reason":
                                         "FieldValueRequired", "message": "Required value: name "
                                         "or generateName is required"}])
            md["name"] = gen + "".join(random.choice("bcdfghjklmnpqrstvwxz2456789")
                                       for _ in range(5))
        store_res = res
        if res.status and not res.create_status and "status" in body:
            del body["status"]  # create cannot set what the status subresource owns
        if res.plural == "pods" and not res.group:
            body["status"] = {"phase": "Pending"}
        if res.plural == "namespaces":
            body["status"] = {"phase": "Active"}
            body.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        self._validate(store_res, body, None)
        with self.st.cond:
            if res.namespaced and ("", ns) not in self.st.objs[("", "namespaces")]:
                raise ApiError(404, "NotFound", f'namespaces "{ns}" not found',
                               {"name": ns, "kind": "namespaces"})
            if (ns, md["name"]) in self.st.objs[res.store]:
                plural = res.plural if not res.group else f"{res.plural}.{res.group}"
                raise ApiError(409, "AlreadyExists", f'{plural} "{md["name"]}" already exists',
                               {"name": md["name"], "group": res.group, "kind": res.plural})
            if res.plural == "pods" and not res.group:
                self._pod_defaults(body)
            for k in ("deletionTimestamp", "deletionGracePeriodSeconds"):
                md.pop(k, None)
            self.st.new_meta(body)
            if dry_run:
                return to_view(res, body)
            obj = self.st.commit(res.store, "ADDED", body, None)
        return to_view(res, obj)

    def _lease_conflict(self, res, name):
        """The lease_conflicts fault: the next N Lease writes lose a race. Caller holds cond."""
        if res.plural == "leases" and self.st.lease_conflicts > 0:
            self.st.lease_conflicts -= 1
            raise conflict(res, name, STALE)

    def _merge_for(self, res, old, new, sub):
        """The object to store when new is written to the main resource or to /status."""
        if not res.status:
            return new
        if sub == "status":
            out = dict(old)
            out["status"] = new.get("status")
            if out["status"] is None:
                out.pop("status")
            return out
        out = dict(new)
        if "status" in old:
            out["status"] = old["status"]
        else:
            out.pop("status", None)
        return out

    def _finish_write(self, res, old, obj, sub):
        """Keeps what a write may not change, bumps generation, stores. Caller holds cond."""
        md = dict(obj["metadata"])
        omd = old["metadata"]
        for k in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds",
                  "generation", "namespace", "name"):
            if k in omd:
                md[k] = omd[k]
            else:
                md.pop(k, None)
        if sub == "status":  # ResetObjectMetaForStatus: a status write changes only status
            for k in ("labels", "annotations", "finalizers", "ownerReferences"):
                if k in omd:
                    md[k] = omd[k]
                else:
                    md.pop(k, None)
        obj = dict(obj)
        obj["metadata"] = md
        obj["apiVersion"], obj["kind"] = old["apiVersion"], old["kind"]
        body_of = lambda o: {k: v for k, v in o.items()  # noqa: E731
                             if k not in ("metadata", "status", "apiVersion", "kind")}
        if sub != "status" and body_of(obj) != body_of(old):
            md["generation"] = omd.get("generation", 1) + 1
        self._validate(res, to_view(res, obj) if res.group == "events.k8s.io" else obj, old)
        if md.get("deletionTimestamp") and not md.get("finalizers") and \
                omd.get("finalizers"):
            return self.st.commit(res.store, "DELETED", obj, old)
        if self._same(obj, old):
            return old  # a no-op write changes no resourceVersion, as in kube
        return self.st.commit(res.store, "MODIFIED", obj, old)

    @staticmethod
    def _same(a, b):
        strip = lambda o: {**o, "metadata": {k: v for k, v in o["metadata"].items()  # noqa
                                             if k != "resourceVersion"}}
        return strip(a) == strip(b)

    def update(self, res, ns, name, body, sub):
        self._check_meta(res, body, ns, name)
        body = from_view(res, body)
        md = body["metadata"]
        if res.plural == "pods" and not res.group and isinstance(body.get("spec"), dict):
            self._pod_decode_defaults(body["spec"])
        rv = md.get("resourceVersion")
        with self.st.cond:
            old = self.st.objs[res.store].get((ns, name))
            if old is None:
                raise not_found(res, name)
            if not rv:
                raise invalid(res, name, [{"field": "metadata.resourceVersion", "reason":
                                           "FieldValueInvalid", "message": "Invalid value: 0x0: "
                                           "must be specified for an update"}])
            if md.get("uid") and md["uid"] != old["metadata"]["uid"]:
                raise conflict(res, name, f"Precondition failed: UID in precondition: "
                               f"{md['uid']}, UID in object meta: {old['metadata']['uid']}")
            if rv != old["metadata"]["resourceVersion"]:
                raise conflict(res, name, STALE)
            self._lease_conflict(res, name)
            obj = self._finish_write(res, old, self._merge_for(res, old, body, sub), sub)
        return to_view(res, obj)

    def patch(self, res, ns, name, ctype, patch, sub):
        kinds = ("application/merge-patch+json", "application/strategic-merge-patch+json",
                 "application/json-patch+json")
        if ctype not in kinds:
            raise ApiError(415, "UnsupportedMediaType", f"the body of the request was in an "
                           f"unknown format - accepted media types include: {', '.join(kinds)}")
        if ctype == "application/strategic-merge-patch+json" and not res.builtin:
            raise ApiError(415, "UnsupportedMediaType", "strategic merge patch is not supported "
                           f"for custom resources ({res!r}); use application/merge-patch+json")
        with self.st.cond:
            old = self.st.objs[res.store].get((ns, name))
            if old is None:
                raise not_found(res, name)
            view = to_view(res, old)
            if ctype == "application/json-patch+json":
                new = json_patch(view, patch)
            else:
                if not isinstance(patch, dict):
                    raise bad_request("a merge patch must be a JSON object")
                pmd = patch.get("metadata") or {}
                if isinstance(pmd, dict) and pmd.get("resourceVersion") and \
                        pmd["resourceVersion"] != old["metadata"]["resourceVersion"]:
                    raise conflict(res, name, STALE)
                if isinstance(pmd, dict) and pmd.get("uid") and \
                        pmd["uid"] != old["metadata"]["uid"]:
                    raise conflict(res, name, f"Precondition failed: UID in precondition: "
                                   f"{pmd['uid']}, UID in object meta: {old['metadata']['uid']}")
                fn = strategic_merge if "strategic" in ctype else merge_patch
                new = fn(clone(view), patch)
            if not isinstance(new, dict) or not isinstance(new.get("metadata"), dict):
                raise bad_request("the patch leaves no object with metadata")
            if new["metadata"].get("name") != name or \
                    new["metadata"].get("namespace", "") != (ns if res.namespaced else ""):
                raise bad_request("a patch may not change metadata.name or metadata.namespace")
            self._check_meta(res, new, ns, name)
            new = from_view(res, new)
            self._lease_conflict(res, name)
            obj = self._finish_write(res, old, self._merge_for(res, old, new, sub), sub)
        return to_view(res, obj)

    def bind(self, ns, name, body):
        pods = BY_PATH[("", "v1", "pods")]
        binding = BY_PATH[("", "v1", "pods")]
        if not isinstance(body, dict):
            raise bad_request("the Binding must be a JSON object")
        if body.get("kind") not in (None, "Binding") or body.get("apiVersion") not in (None, "v1"):
            raise bad_request(f"{body.get('kind')} in version {body.get('apiVersion')} cannot "
                              "be handled as a Binding")
        md = body.get("metadata") or {}
        if md.get("name") != name:
            raise bad_request(f"name in URL ({name}) does not match name in Binding object "
                              f"({md.get('name')})")
        if md.get("namespace") not in (None, "", ns):
            raise bad_request(f"the namespace of the Binding ({md.get('namespace')}) does not "
                              f"match the namespace sent on the request ({ns})")
        target = body.get("target") or {}
        if target.get("kind") not in (None, "", "Node"):
            raise invalid(binding, name, [{"field": "target.kind", "reason":
                                           "FieldValueNotSupported", "message":
                                           f"Unsupported value: {dumps(target.get('kind'))}: "
                                           'supported values: "Node"'}])
        if not target.get("name"):
            raise invalid(binding, name, [{"field": "target.name", "reason":
                                           "FieldValueRequired", "message": "Required value"}])
        ann = md.get("annotations") or {}
        if not isinstance(ann, dict) or not all(isinstance(v, str) for v in ann.values()):
            raise bad_request(f"metadata.annotations: must be a map of string to string, got "
                              f"{dumps(ann)}")
        why = lambda w: ApiError(409, "Conflict", "Operation cannot be fulfilled on pods/binding "  # noqa
                                 f'"{name}": {w}', {"name": name, "kind": "pods/binding"})
        with self.st.cond:
            old = self.st.objs[pods.store].get((ns, name))
            if old is None:
                raise not_found(pods, name)
            if md.get("uid") and md["uid"] != old["metadata"]["uid"]:
                raise why(f"Precondition failed: UID in precondition: {md['uid']}, UID in "
                          f"object meta: {old['metadata']['uid']}")
            if md.get("resourceVersion") and \
                    md["resourceVersion"] != old["metadata"]["resourceVersion"]:
                raise why(STALE)
            if old["metadata"].get("deletionTimestamp"):
                raise why(f"pod {name} is being deleted, cannot be assigned to a host")
            if old["spec"].get("nodeName"):
                raise why(f"pod {name} is already assigned to node \"{old['spec']['nodeName']}\"")
            if old["spec"].get("schedulingGates"):
                raise why(f"pod {name} has non-empty .spec.schedulingGates")
            # Copies of only what changes: stored objects are never mutated in place.
            pod = dict(old, spec=dict(old["spec"], nodeName=target["name"]),
                       metadata=dict(old["metadata"]), status=dict(old["status"]))
            if ann:
                pod["metadata"]["annotations"] = {**(old["metadata"].get("annotations") or {}),
                                                  **ann}
            conds = [c for c in pod["status"].get("conditions") or []
                     if c.get("type") != "PodScheduled"]
            conds.append({"type": "PodScheduled", "status": "True", "lastProbeTime": None,
                          "lastTransitionTime": now_time()})
            pod["status"]["conditions"] = conds
            self.st.commit(pods.store, "MODIFIED", pod, old)
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success",
                "code": 201}

    def delete(self, res, ns, name, opts, query):
        opts = opts or {}
        if not isinstance(opts, dict):
            raise bad_request("DeleteOptions must be a JSON object")
        pre = opts.get("preconditions") or {}
        grace = opts.get("gracePeriodSeconds")
        if (query.get("gracePeriodSeconds") or [""])[0]:
            try:
                grace = int(query["gracePeriodSeconds"][0])
            except ValueError:
                raise bad_request(f"gracePeriodSeconds {query['gracePeriodSeconds'][0]!r}: not "
                                  "an integer")
        with self.st.cond:
            old = self.st.objs[res.store].get((ns, name))
            if old is None:
                raise not_found(res, name)
            omd = old["metadata"]
            if pre.get("uid") and pre["uid"] != omd["uid"]:
                raise conflict(res, name, f"Precondition failed: UID in precondition: "
                               f"{pre['uid']}, UID in object meta: {omd['uid']}")
            if pre.get("resourceVersion") and pre["resourceVersion"] != omd["resourceVersion"]:
                raise conflict(res, name, f"Precondition failed: ResourceVersion in precondition:"
                               f" {pre['resourceVersion']}, ResourceVersion in object meta: "
                               f"{omd['resourceVersion']}")
            if "All" in (opts.get("dryRun") or []) + query.get("dryRun", []):
                return to_view(res, old)
            if res.plural == "leases" and self.st.lease_conflicts > 0:
                self._lease_conflict(res, name)
            graceful = res.plural == "pods" and not res.group and old["spec"].get("nodeName") \
                and old["status"].get("phase") not in ("Succeeded", "Failed") and \
                (grace if grace is not None else
                 old["spec"].get("terminationGracePeriodSeconds", 30)) > 0
            if omd.get("finalizers") or graceful:
                if omd.get("deletionTimestamp"):
                    return to_view(res, old)
                obj = dict(old)
                obj["metadata"] = dict(omd, deletionTimestamp=now_time())
                if graceful:
                    obj["metadata"]["deletionGracePeriodSeconds"] = grace if grace is not None \
                        else old["spec"].get("terminationGracePeriodSeconds", 30)
                    self.fake.kubelet_delete(res, ns, name, omd["uid"])
                obj = self.st.commit(res.store, "MODIFIED", obj, old)
                return to_view(res, obj)
            obj = self.st.commit(res.store, "DELETED", old, old)
            if res.plural == "namespaces" and not res.group:
                for store, objs in self.st.objs.items():
                    for key in [k for k in objs if k[0] == name]:
                        self.st.commit(store, "DELETED", objs[key], objs[key])
        return to_view(res, obj)

    def delete_collection(self, res, ns, query):
        listed = self.list(res, ns, {k: v for k, v in query.items()
                                     if k in ("labelSelector", "fieldSelector")})
        for item in listed["items"]:
            try:
                self.delete(res, item["metadata"].get("namespace", ""), item["metadata"]["name"],
                            None, query)
            except ApiError as e:
                if e.code != 404:
                    raise
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}


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


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 1024
    allow_reuse_address = True


class Fake:
    def __init__(self, args):
        self.args = args
        self.token = args.token or secrets.token_hex(16)
        self.store = Store(args.history, args.pod_termination)
        self.faults = Faults(args.seed)
        self.faults.apply({"watch_close_prob": args.watch_close_prob,
                           "watch_close_period": args.watch_close_period,
                           "error_rate": args.error_rate, "error_code": args.error_code,
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
    p.add_argument("--history", type=int, default=10000,
                   help="events kept; older resourceVersions are compacted (410)")
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

    def faults(self, **kw):
        return self._control("POST", "/fake/faults", kw)

    def requests(self):
        return self._control("GET", "/fake/requests")["requests"]

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
    Fake(parse_args(sys.argv[1:])).serve()
