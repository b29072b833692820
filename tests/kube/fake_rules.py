"""The rules of the fake kube-apiserver that need no server: the resources it serves, Status
errors, label and field selectors, the two shapes of Events, and the patch formats.

Part of fake_apiserver.py (see its header); kept apart so the HTTP side stays readable. Each
rule is written from the Kubernetes API conventions: the Status object and its reasons,
selector syntax and the field labels kube-apiserver supports per resource, RFC 7386 merge
patch, RFC 6902 JSON patch, and the strategic-merge subset built-in kinds use.
"""
import datetime
import json
import re

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
    ("resource.k8s.io", "resourceslices"): {"spec.nodeName", "spec.driver"},
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
# metav1.Time decodes with Go's RFC 3339 layout (a fraction is accepted, not needed);
# metav1.MicroTime with "2006-01-02T15:04:05.000000Z07:00", whose fraction Go's parser
# requires to have exactly six digits.
TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
MICROTIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}(Z|[+-]\d{2}:\d{2})$")
LAYOUT = {"time": "2006-01-02T15:04:05Z07:00", "microtime": "2006-01-02T15:04:05.000000Z07:00"}

# Typed fields a Go client's decoder would refuse with another JSON type or time format; a
# refused body is a 400 (the object cannot be decoded), not a 422. Keyed by storage.
TYPED = {
    ("coordination.k8s.io", "leases"): {
        "spec.acquireTime": "microtime", "spec.renewTime": "microtime",
        "spec.leaseDurationSeconds": "int", "spec.leaseTransitions": "int",
        "spec.holderIdentity": "string"},
    ("", "events"): {
        "eventTime": "microtime", "series.lastObservedTime": "microtime", "series.count": "int",
        "firstTimestamp": "time", "lastTimestamp": "time", "count": "int"},
    ("", "pods"): {
        "spec.priority": "int", "spec.nodeName": "string", "status.nominatedNodeName": "string",
        "status.conditions[].lastTransitionTime": "time",
        "status.conditions[].lastProbeTime": "time"},
    ("", "nodes"): {
        "status.conditions[].lastTransitionTime": "time",
        "status.conditions[].lastHeartbeatTime": "time"},
    ("scheduling.k8s.io", "priorityclasses"): {"value": "int"},
}


def now_time():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


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


STALE = ("the object has been modified; please apply your changes to the latest version and "
         "try again")


def _typed_values(obj, path):
    """(field path with indexes, value) for each value at a dotted path; [] walks a list."""
    out = [("", obj)]
    for part in path.split("."):
        nxt = []
        for where, cur in out:
            key = part[:-2] if part.endswith("[]") else part
            if not isinstance(cur, dict) or cur.get(key) is None:
                continue
            val = cur[key]
            name = f"{where}.{key}" if where else key
            if part.endswith("[]"):
                if isinstance(val, list):
                    nxt += [(f"{name}[{i}]", v) for i, v in enumerate(val)]
            else:
                nxt.append((name, val))
        out = nxt
    return out


def check_types(res, obj):
    """400 when a typed field would not decode, naming the field, the value and the type."""
    for path, kind in TYPED.get(res.store, {}).items():
        for field, v in _typed_values(obj, path):
            if kind == "int":
                ok = isinstance(v, int) and not isinstance(v, bool)
            elif kind == "string":
                ok = isinstance(v, str)
            else:
                ok = isinstance(v, str) and (MICROTIME if kind == "microtime" else TIME).match(v)
            if not ok:
                what = f'parsing time {dumps(v)} as "{LAYOUT[kind]}"' if kind in LAYOUT else \
                    f"cannot unmarshal {dumps(v)} into a Go value of type " \
                    f"{'int' if kind == 'int' else 'string'}"
                raise bad_request(f'{res.kind} in version "{res.version}" cannot be handled as '
                                  f"a {res.kind}: {field}: {what}")


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


LABEL_KEY = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?"
                       r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")


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
