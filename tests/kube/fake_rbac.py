"""RBAC rule matching for the fake kube-apiserver's request log: is every request a client
made allowed by a ClusterRole, and does the role grant anything never used?

The matching is Kubernetes' RBAC authorizer's (a rule allows a request when its verbs, API
groups, resources - "pods/binding" for a subresource, "*/status" for any resource's status -
and resourceNames all match; a non-resource request matches nonResourceURLs, where a trailing
"*" is a prefix), applied to the log's entries (fake_apiserver.py writes verb, apiGroup,
resource, subresource, name and path exactly as RBAC sees them). The discovery and health paths
every authenticated user may read (the bootstrap roles system:discovery and
system:public-info-viewer) are allowed unless defaults=False.

    from fake_rbac import load_rules, denied, unused
    rules = load_rules("deploy/rbac.yaml", name="gpusched-scheduler")
    assert denied(fake.requests(), rules) == []
"""
import yaml

DEFAULT_RULES = [
    {"verbs": ["get"], "nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz",
                                           "/livez", "/openapi", "/openapi/*", "/readyz",
                                           "/version", "/version/"]},
]


def load_rules(path_or_text, name=None, kinds=("ClusterRole",)):
    """The rules of the ClusterRole called name (any, when None) in a YAML file or text with
    one or more documents. A missing role is an error, never an empty list."""
    text = path_or_text
    if "\n" not in path_or_text:
        with open(path_or_text) as f:
            text = f.read()
    found = []
    for doc in yaml.safe_load_all(text):
        if isinstance(doc, dict) and doc.get("kind") in kinds and \
                (name is None or (doc.get("metadata") or {}).get("name") == name):
            found.append(doc)
    if not found:
        raise ValueError(f"no {'/'.join(kinds)} named {name!r} in {path_or_text[:80]!r}")
    return [r for doc in found for r in doc.get("rules") or []]


def _resource_matches(rule, resource, subresource):
    combined = f"{resource}/{subresource}" if subresource else resource
    for r in rule.get("resources") or []:
        if r == "*" or r == combined:
            return True
        if subresource and r == f"*/{subresource}":
            return True
    return False


def _url_matches(rule, path):
    for u in rule.get("nonResourceURLs") or []:
        if u == "*" or u == path or (u.endswith("*") and path.startswith(u[:-1])):
            return True
    return False


def rule_allows(rule, e):
    verbs = rule.get("verbs") or []
    if "*" not in verbs and e["verb"] not in verbs:
        return False
    if not e["resource"]:
        return _url_matches(rule, e["path"])
    groups = rule.get("apiGroups") or []
    if "*" not in groups and e["apiGroup"] not in groups:
        return False
    if not _resource_matches(rule, e["resource"], e["subresource"]):
        return False
    names = rule.get("resourceNames") or []
    return not names or e["name"] in names


def denied(entries, rules, defaults=True):
    """The log entries no rule allows (each once, by verb/group/resource/subresource/name or
    verb/path)."""
    rules = list(rules) + (DEFAULT_RULES if defaults else [])
    out, seen = [], set()
    for e in entries:
        key = (e["verb"], e["apiGroup"], e["resource"], e["subresource"], e["name"],
               "" if e["resource"] else e["path"])
        if key in seen:
            continue
        seen.add(key)
        if not any(rule_allows(r, e) for r in rules):
            out.append(e)
    return out


def unused(entries, rules):
    """(apiGroup, resource, verb) granted by rules that no entry used: what least privilege
    would drop. Wildcards are reported as written."""
    used = {(e["apiGroup"], e["resource"] + (f"/{e['subresource']}" if e["subresource"] else ""),
             e["verb"]) for e in entries if e["resource"]}
    out = []
    for rule in rules:
        for g in rule.get("apiGroups") or []:
            for res in rule.get("resources") or []:
                for v in rule.get("verbs") or []:
                    hit = any(g in ("*", ug) and v in ("*", uv) and
                              (res in ("*", ur) or (res.startswith("*/") and "/" in ur and
                                                    ur.split("/", 1)[1] == res[2:]))
                              for ug, ur, uv in used)
                    if not hit:
                        out.append((g, res, v))
    return out
