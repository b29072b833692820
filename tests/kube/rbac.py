"""Kubernetes RBAC, decided as kube-apiserver's RBAC authorizer decides it, to check
the requests gpusched's components make against the roles in deploy/.

The contract: every request a component sends must be allowed by the roles
bound to its ServiceAccount, and the roles should grant nothing it never
uses. `check_log` reads a request log - the JSON lines the fake
kube-apiserver writes (tests/kube/fake_apiserver.py: one object per request
with verb, apiGroup, resource, subresource, namespace, name, code; method
and path too), or the "METHOD PATH CODE" lines of `gpusched scheduler
--request-log` - and returns every request the roles do not allow;
`unused_rules` says which granted (verb, group, resource) no request used.

The rules follow Kubernetes (pkg/apis/rbac/v1/evaluation_helpers.go and
plugin/pkg/auth/authorizer/rbac/rbac.go):
  - a rule allows a resource request when its verbs, apiGroups, resources
    and resourceNames all match: "*" matches any verb, group or resource;
    a subresource is named "pods/binding" and matched only by exactly that,
    by "*", or by "*/binding" (never by "pods" alone); resourceNames, when
    given, must contain the request's name (so they never match a create or
    a list, whose URL names no object);
  - a non-resource request (/api, /healthz) matches nonResourceURLs exactly,
    by "*", or by a prefix ending in "*";
  - a ClusterRole bound by a ClusterRoleBinding applies everywhere, cluster-
    scoped resources included; a Role, or a ClusterRole bound by a
    RoleBinding, applies only to requests in that binding's namespace and
    never to non-resource requests;
  - every authenticated subject also holds system:discovery (the bootstrap
    role: get on /api, /apis, /healthz, /livez, /readyz, /version, /openapi).
Request attributes come from the URL as the apiserver's RequestInfoFactory
derives them (`request_info`): list vs get vs watch, deletecollection, the
namespace of a Namespace object being its own name, and a list or watch
with fieldSelector metadata.name=N carrying the name N.
"""
import collections
import json
import pathlib
import subprocess
import urllib.parse

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
KUBECTL = "/usr/bin/kubectl"

RBAC_GROUP = "rbac.authorization.k8s.io"
ROLE_KINDS = ("Role", "ClusterRole")
BINDING_KINDS = ("RoleBinding", "ClusterRoleBinding")

# system:discovery, bound to system:authenticated by kube-apiserver's bootstrap policy.
DISCOVERY_URLS = ("/livez", "/readyz", "/healthz", "/version", "/version/", "/openapi", "/openapi/*",
                  "/api", "/api/*", "/apis", "/apis/*")

Request = collections.namedtuple("Request", "verb api_group resource subresource namespace name path")
Request.__new__.__defaults__ = ("", "", "", "", "", "")
Violation = collections.namedtuple("Violation", "line request reason")


class RBACError(ValueError):
    """A role, binding or request log that cannot be read; the message names the object and field."""


# --- Request attributes ---

_METHOD_VERBS = {"POST": "create", "GET": "get", "HEAD": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
_NAMESPACE_SUBRESOURCES = {"status", "finalize"}
_TRUE = {"1", "t", "T", "TRUE", "true", "True"}


def request_info(method, path, query=""):
    """The authorization attributes of an HTTP request, as kube-apiserver derives them."""
    if "?" in path and not query:
        path, query = path.split("?", 1)
    q = urllib.parse.parse_qs(query)
    parts = [p for p in path.strip("/").split("/") if p]
    verb = _METHOD_VERBS.get(method.upper())
    if verb is None:
        raise RBACError(f"method {method!r}: not a Kubernetes API method")
    # A non-resource request's verb is the lower-cased HTTP method ("get", "post").
    plain = Request(verb=method.lower(), path=path)
    if not parts or parts[0] not in ("api", "apis"):
        return plain
    if parts[0] == "api":
        group, rest = "", parts[2:]
        if len(parts) < 2:
            return plain
    else:
        if len(parts) < 3:
            return plain
        group, rest = parts[1], parts[3:]
    if not rest:  # /api/v1, /apis/g/v: discovery
        return plain
    watch_prefix = rest[0] == "watch"
    if watch_prefix:
        rest = rest[1:]
    namespace = ""
    if rest and rest[0] == "namespaces":
        if len(rest) > 1:
            namespace = rest[1]
            if len(rest) > 2 and rest[2] not in _NAMESPACE_SUBRESOURCES:
                rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    sub = rest[2] if len(rest) > 2 else ""
    if watch_prefix:
        verb = "watch"
    elif not name:
        if verb == "get":
            verb = "watch" if q.get("watch", [""])[-1] in _TRUE else "list"
        elif verb == "delete":
            verb = "deletecollection"
    if verb in ("list", "watch") and not name:
        for sel in q.get("fieldSelector", []):
            for term in sel.split(","):
                k, eq, v = term.partition("=")
                if eq and k.strip() == "metadata.name" and not k.endswith("!"):
                    name = v[1:].strip() if v.startswith("=") else v.strip()  # "=" and "==" both exact
    return Request(verb=verb, api_group=group, resource=resource, subresource=sub, namespace=namespace, name=name)


# --- Roles and bindings ---

class Rule:
    def __init__(self, d, where, namespaced):
        if not isinstance(d, dict):
            raise RBACError(f"{where}: want a mapping, got {type(d).__name__}")
        self.verbs = _strings(d, "verbs", where, required=True)
        self.api_groups = _strings(d, "apiGroups", where)
        self.resources = _strings(d, "resources", where)
        self.resource_names = _strings(d, "resourceNames", where)
        self.urls = _strings(d, "nonResourceURLs", where)
        if self.urls and namespaced:
            raise RBACError(f"{where}.nonResourceURLs: a Role cannot grant non-resource URLs")
        if self.urls and self.resources:
            raise RBACError(f"{where}: resources and nonResourceURLs cannot be in one rule")
        if not self.urls and not self.resources:
            raise RBACError(f"{where}: a rule needs resources or nonResourceURLs")
        if self.resources and not self.api_groups and "apiGroups" not in d:
            raise RBACError(f"{where}.apiGroups: required with resources ('' is the core group)")
        if self.resource_names and not self.resources:
            raise RBACError(f"{where}.resourceNames: only with resources")

    def allows(self, r):
        if "*" not in self.verbs and r.verb not in self.verbs:
            return False
        if not r.resource:
            return any(u == "*" or u == r.path or (u.endswith("*") and r.path.startswith(u.rstrip("*")))
                       for u in self.urls)
        if not self.resources:
            return False
        if "*" not in self.api_groups and r.api_group not in self.api_groups:
            return False
        combined = f"{r.resource}/{r.subresource}" if r.subresource else r.resource
        if not any(x == "*" or x == combined or (r.subresource and x == "*/" + r.subresource)
                   for x in self.resources):
            return False
        return not self.resource_names or r.name in self.resource_names


def _strings(d, key, where, required=False):
    v = d.get(key)
    if v is None:
        if required:
            raise RBACError(f"{where}.{key}: required")
        return []
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise RBACError(f"{where}.{key}: want a list of strings, got {v!r}")
    if required and not v:
        raise RBACError(f"{where}.{key}: must not be empty")
    return v


class Role:
    def __init__(self, doc):
        self.kind = doc["kind"]
        md = doc.get("metadata") or {}
        self.name = md.get("name")
        if not self.name:
            raise RBACError(f"{self.kind}: metadata.name: required")
        self.namespace = md.get("namespace", "") if self.kind == "Role" else ""
        where = f"{self.kind} {self.name}"
        if self.kind == "Role" and not self.namespace:
            raise RBACError(f"{where}: metadata.namespace: required for a Role")
        if doc.get("aggregationRule"):
            raise RBACError(f"{where}: aggregationRule is not supported here: list the rules")
        rules = doc.get("rules") or []
        if not isinstance(rules, list):
            raise RBACError(f"{where}: rules: want a list")
        self.rules = [Rule(r, f"{where}: rules[{i}]", self.kind == "Role") for i, r in enumerate(rules)]


class Binding:
    def __init__(self, doc):
        self.kind = doc["kind"]
        md = doc.get("metadata") or {}
        self.name = md.get("name", "")
        where = f"{self.kind} {self.name}"
        self.namespace = md.get("namespace", "") if self.kind == "RoleBinding" else ""
        if self.kind == "RoleBinding" and not self.namespace:
            raise RBACError(f"{where}: metadata.namespace: required for a RoleBinding")
        ref = doc.get("roleRef") or {}
        if ref.get("kind") not in ROLE_KINDS or not ref.get("name"):
            raise RBACError(f"{where}: roleRef: want kind Role or ClusterRole and a name, got {ref!r}")
        if ref["kind"] == "Role" and self.kind == "ClusterRoleBinding":
            raise RBACError(f"{where}: roleRef: a ClusterRoleBinding can only refer to a ClusterRole")
        self.role_kind, self.role_name = ref["kind"], ref["name"]
        self.subjects = doc.get("subjects") or []

    def binds(self, subject):
        kind, ns, name = subject
        for s in self.subjects:
            if s.get("kind") == "ServiceAccount" and kind == "ServiceAccount":
                if s.get("name") == name and (s.get("namespace") or self.namespace) == ns:
                    return True
            elif s.get("kind") == "User" and kind == "User" and s.get("name") == name:
                return True
            elif s.get("kind") == "Group" and s.get("name") in _groups(subject):
                return True
        return False


def _groups(subject):
    kind, ns, name = subject
    g = {"system:authenticated"}
    if kind == "ServiceAccount":
        g |= {"system:serviceaccounts", f"system:serviceaccounts:{ns}"}
    return g


def parse_subject(s):
    """"system:serviceaccount:NS:NAME" -> ("ServiceAccount", NS, NAME); another string is a User."""
    if isinstance(s, tuple):
        return s
    p = s.split(":")
    if len(p) == 4 and p[:2] == ["system", "serviceaccount"] and p[2] and p[3]:
        return ("ServiceAccount", p[2], p[3])
    return ("User", "", s)


class Policy:
    """What a set of roles (and bindings) allows. Without a subject every ClusterRole counts as bound
    cluster-wide and every Role in its namespace; with one, only what its bindings grant."""

    def __init__(self, docs, subject=None, discovery=True):
        roles, bindings = {}, []
        for d in docs:
            if not isinstance(d, dict) or d.get("kind") not in ROLE_KINDS + BINDING_KINDS:
                continue
            api = d.get("apiVersion", "")
            if not api.startswith(RBAC_GROUP + "/"):
                raise RBACError(f"{d['kind']} {(d.get('metadata') or {}).get('name')}: apiVersion {api!r} "
                                f"is not {RBAC_GROUP}/v1")
            if d["kind"] in ROLE_KINDS:
                r = Role(d)
                roles[(r.kind, r.namespace, r.name)] = r
            else:
                bindings.append(Binding(d))
        self.grants = []  # (namespace or None for cluster-wide, Rule, role)
        if subject is None:
            for (kind, ns, _), r in roles.items():
                self.grants += [(ns if kind == "Role" else None, rule, r) for rule in r.rules]
        else:
            subject = parse_subject(subject)
            for b in bindings:
                if not b.binds(subject):
                    continue
                key = (b.role_kind, b.namespace if b.role_kind == "Role" else "", b.role_name)
                r = roles.get(key)
                if r is None:
                    raise RBACError(f"{b.kind} {b.name}: roleRef {b.role_kind} {b.role_name} not found "
                                    f"among the roles given")
                scope = None if b.kind == "ClusterRoleBinding" else b.namespace
                self.grants += [(scope, rule, r) for rule in r.rules]
        if discovery:
            d = Role({"kind": "ClusterRole", "metadata": {"name": "system:discovery"},
                      "rules": [{"verbs": ["get"], "nonResourceURLs": list(DISCOVERY_URLS)}]})
            self.grants += [(None, rule, d) for rule in d.rules]

    def rule_for(self, r):
        """The (scope, rule, role) that allows request r, or None."""
        for scope, rule, role in self.grants:
            if scope is not None and (not r.resource or r.namespace != scope):
                continue
            if rule.allows(r):
                return scope, rule, role
        return None

    def allows(self, r):
        return self.rule_for(r) is not None


def load_docs(source):
    """Objects from a YAML/JSON file path, YAML text, or a list of dicts (List objects are opened)."""
    if isinstance(source, list):
        docs = source
    else:
        is_file = isinstance(source, pathlib.Path) or ("\n" not in source and pathlib.Path(source).is_file())
        text = pathlib.Path(source).read_text() if is_file else source
        docs = [d for d in yaml.safe_load_all(text) if d]
    out = []
    for d in docs:
        if isinstance(d, dict) and d.get("kind") == "List":
            out += d.get("items") or []
        else:
            out.append(d)
    return out


def render(kustomization):
    """`kubectl kustomize DIR` as a list of objects (kubectl is required, and its absence a failure)."""
    if not pathlib.Path(KUBECTL).exists():
        raise RuntimeError(f"kubectl not found at {KUBECTL}: install it (scripts/install-deps.sh)")
    r = subprocess.run([KUBECTL, "kustomize", str(kustomization)], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {kustomization}: {r.stderr.strip()}")
    return load_docs(r.stdout)


def deploy_policy(subject, dirs=("deploy", "deploy/extender")):
    """The Policy that deploy/'s rendered manifests grant to subject, e.g.
    "system:serviceaccount:gpusched:gpusched-scheduler"."""
    docs = []
    for d in dirs:
        docs += render(ROOT / d)
    return Policy(docs, subject)


def _as_policy(roles, subject):
    if isinstance(roles, Policy):
        return roles
    return Policy(load_docs(roles), subject)


def read_log(path):
    """(line number, entry dict, Request) per line of a request log: JSON lines (the fake
    kube-apiserver's), or "METHOD PATH CODE" lines (`gpusched scheduler --request-log`)."""
    out = []
    for n, line in enumerate(pathlib.Path(path).read_text().splitlines(), 1):
        if not line.strip():
            continue
        if not line.lstrip().startswith("{"):
            parts = line.split()
            if len(parts) != 3 or not parts[2].isdigit() or not parts[1].startswith("/"):
                raise RBACError(f"{path}:{n}: want METHOD PATH CODE or a JSON object, got {line.strip()[:80]!r}")
            e = {"method": parts[0], "path": parts[1], "code": int(parts[2])}
            out.append((n, e, request_info(parts[0], parts[1])))
            continue
        try:
            e = json.loads(line)
        except json.JSONDecodeError as err:
            raise RBACError(f"{path}:{n}: not JSON: {err.msg}") from None
        if not isinstance(e, dict):
            raise RBACError(f"{path}:{n}: want a JSON object per line")
        if e.get("verb"):
            for k in ("apiGroup", "resource", "subresource", "namespace", "name"):
                if e.get(k) is not None and not isinstance(e[k], str):
                    raise RBACError(f"{path}:{n}: {k}: want a string, got {e[k]!r}")
            path_only = (e.get("path") or "").split("?")[0]
            r = Request(verb=e["verb"], api_group=e.get("apiGroup") or "", resource=e.get("resource") or "",
                        subresource=e.get("subresource") or "", namespace=e.get("namespace") or "",
                        name=e.get("name") or "", path="" if e.get("resource") else path_only)
        elif e.get("method") and e.get("path"):
            r = request_info(e["method"], e["path"])
        else:
            raise RBACError(f"{path}:{n}: want verb (with apiGroup, resource, ...) or method and path")
        out.append((n, e, r))
    return out


def describe(r):
    if not r.resource:
        return f"{r.verb} {r.path}"
    res = f"{r.resource}/{r.subresource}" if r.subresource else r.resource
    group = r.api_group or "core"
    where = f" in namespace {r.namespace}" if r.namespace else " (cluster-wide)"
    name = f" {r.name}" if r.name else ""
    return f"{r.verb} {res}{name} ({group}){where}"


def check_log(path, roles, subject=None):
    """Every request in the log at path that roles (a Policy, a YAML file or text, or a list of
    objects; bound to subject when given) do not allow, as Violations in log order."""
    policy = _as_policy(roles, subject)
    return [Violation(n, e, f"line {n}: {describe(r)}: no rule allows it")
            for n, e, r in read_log(path) if not policy.allows(r)]


def unused_rules(path, roles, subject=None):
    """(role name, verb, group, resource) granted by roles but used by no request in the log:
    candidates for removal under least privilege. Non-resource and wildcard grants are left out."""
    policy = _as_policy(roles, subject)
    granted = set()
    for _, rule, role in policy.grants:
        if role.name == "system:discovery":
            continue
        for v in rule.verbs:
            for g in rule.api_groups:
                for res in rule.resources:
                    if "*" not in (v, g) and "*" not in res:
                        granted.add((role.name, v, g, res))
    used = set()
    for _, _, r in read_log(path):
        hit = policy.rule_for(r)
        if hit and r.resource:
            res = f"{r.resource}/{r.subresource}" if r.subresource else r.resource
            used.add((hit[2].name, r.verb, r.api_group, res))
    return sorted(granted - used)
