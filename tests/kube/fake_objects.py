"""The fake kube-apiserver's objects and what each API verb does to them.

Part of fake_apiserver.py (see its header for the design): Store holds every object under one
global resourceVersion counter with the bounded history watches, paging and compaction use;
Api is the semantics of get, list, create, update, patch, bind and delete, each as
kube-apiserver behaves (preconditions, status subresource, immutable pod spec, pods/binding,
graceful deletion, finalizers, Priority admission, events.k8s.io validation).
"""
import base64
import bisect
import collections
import heapq
import itertools
import json
import random
import threading
import uuid

from fake_rules import (BY_PATH, DNS_LABEL, DNS_SUBDOMAIN, POD_MUTABLE_SPEC, STALE, ApiError,
                        bad_request, check_types, clone, conflict, dumps, field_match, from_view,
                        invalid, json_patch, label_match, merge_patch, not_found, now_time,
                        parse_field_selector, parse_label_selector, strategic_merge, to_view)

# --- The store -------------------------------------------------------------------------------

Event = collections.namedtuple("Event", "rv store ns name type obj old")


class Store:
    """All objects and the bounded history. One lock guards everything; each storage has its
    own condition on that lock so a write wakes only the watchers of its resource.

    The history is kept per storage (the last N events of each), as kube-apiserver's watch
    cache is per resource: churn in Leases never expires a watch on Pods."""

    def __init__(self, history, pod_termination):
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)  # any write (a list waiting for an rv)
        self.conds = collections.defaultdict(lambda: threading.Condition(self.lock))
        self.objs = collections.defaultdict(dict)  # storage -> {(ns, name): obj}
        self.keys = collections.defaultdict(list)  # storage -> sorted keys, for paging
        self.rv = 0
        self.history = history
        self.logs = collections.defaultdict(collections.deque)  # storage -> its last events
        self.horizon = collections.defaultdict(int)  # storage -> rv of its newest dropped event
        self.latest = collections.defaultdict(int)  # storage -> rv of its newest event
        self.pod_termination = pod_termination
        self.lease_conflicts = 0
        self.lines = {}  # rv -> {(view, type): watch line bytes}, shared by every watcher
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

    def compacted(self, store):
        """Watches and continue tokens of store from an rv below this get 410. Holds lock."""
        return self.horizon[store]

    def _trim(self, store):
        log = self.logs[store]
        while len(log) > self.history:
            ev = log.popleft()
            self.horizon[store] = ev.rv
            self.lines.pop(ev.rv, None)

    def commit(self, store, etype, obj, old):
        """Stamps the next resourceVersion on obj and records the change. Caller holds lock."""
        self.rv += 1
        md = dict(obj["metadata"])
        md["resourceVersion"] = str(self.rv)
        obj = dict(obj)
        obj["metadata"] = md
        key = (md.get("namespace", ""), md["name"])
        objs, keys = self.objs[store], self.keys[store]
        if etype == "DELETED":
            if objs.pop(key, None) is not None:
                del keys[bisect.bisect_left(keys, key)]
        else:
            if key not in objs:
                bisect.insort(keys, key)
            objs[key] = obj
        self.logs[store].append(Event(self.rv, store, key[0], key[1], etype, obj, old))
        self.latest[store] = self.rv
        self._trim(store)
        self.conds[store].notify_all()
        self.cond.notify_all()
        return obj

    def compact(self):
        """Forgets the whole history: a watch or continue token from before a storage's newest
        event gets 410; watchers that have seen everything go on undisturbed."""
        with self.lock:
            for log in self.logs.values():
                log.clear()
            self.lines.clear()
            for store, rv in self.latest.items():
                self.horizon[store] = rv

    def set_history(self, n):
        with self.lock:
            self.history = max(1, int(n))
            for store in list(self.logs):
                self._trim(store)

    def page(self, store, at_rv, ns, start_after, limit, keep):
        """One page of store as it was at at_rv (None: now): the objects after start_after
        (a key; None: from the first) in key order, in namespace ns ("" = all) that keep(obj)
        accepts, at most limit (0 = all). -> (items, last key when more remain, keys left
        after the page ignoring keep), or None when at_rv is compacted. Caller holds lock.

        The page costs its own length, not the storage's size: keys are kept sorted, and an
        older snapshot is the current objects overlaid with the state before each newer event
        (a relist of 50,000 pods is 100 cheap pages)."""
        cur, keys = self.objs[store], self.keys[store]
        overlay = {}  # key -> its object at at_rv, None when it did not exist then
        if at_rv is not None and at_rv < self.rv:
            if at_rv < self.compacted(store):
                return None
            for ev in reversed(self.logs[store]):  # newest first: the oldest event wins
                if ev.rv <= at_rv:
                    break
                overlay[(ev.ns, ev.name)] = None if ev.type == "ADDED" else ev.old or ev.obj
        extra = sorted(k for k, v in overlay.items() if v is not None and k not in cur)
        lo, hi = ((ns,), (ns + "\x00",)) if ns else ((), (chr(0x10FFFF),))
        if start_after is not None and start_after > lo:
            lo = start_after
        bounds = lambda ks: (bisect.bisect_right(ks, lo), bisect.bisect_left(ks, hi))  # noqa
        (a, b), (c, d) = bounds(keys), bounds(extra)
        items, last, left = [], None, 0
        for key in heapq.merge(itertools.islice(keys, a, b), itertools.islice(extra, c, d)):
            obj = overlay[key] if key in overlay else cur[key]
            if obj is None:
                continue
            if limit and len(items) == limit:
                gone = sum(1 for k, v in overlay.items()
                           if v is None and k in cur and key <= k < hi)
                left = (b - bisect.bisect_left(keys, key, a, b)) + \
                    (d - bisect.bisect_left(extra, key, c, d)) - gone
                return items, last, left
            if keep(obj):
                items.append(obj)
                last = key
        return items, None, 0

    def events_after(self, store, rv):
        """store's events with an rv above the given one, or None when some of them were
        compacted. Caller holds lock."""
        if rv < self.compacted(store):
            return None
        out = []
        for ev in reversed(self.logs[store]):
            if ev.rv <= rv:
                break
            out.append(ev)
        out.reverse()
        return out


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
                scope = tok["scope"]
            except (ValueError, KeyError, TypeError):
                raise bad_request(f"continue {cont!r}: not a continue token this server issued")
            if scope != [repr(res), ns]:
                raise bad_request(f"continue token for {scope[0]} in namespace {scope[1]!r} "
                                  f"used to list {res!r} in namespace {ns!r}")
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
            def keep(o):
                v = to_view(res, o)
                return label_match(labels, v) and field_match(fields, v)
            got = st.page(res.store, at, ns, start_after, limit, keep)
            if got is None:
                if cont:
                    raise ApiError(410, "Expired", "The provided continue parameter is too old "
                                   "to display a consistent list result. You can start a new "
                                   "list without the continue parameter.")
                raise ApiError(410, "Expired", f"too old resource version: {at} "
                               f"({st.compacted(res.store)})")
        items, next_key, remaining = got
        items = [to_view(res, o) for o in items]
        md = {"resourceVersion": str(list_rv)}
        if next_key is not None:
            token = {"rv": list_rv, "start": list(next_key), "scope": [repr(res), ns]}
            md["continue"] = base64.urlsafe_b64encode(dumps(token).encode()).decode()
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
        check_types(res, obj)
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
        if res.plural == "events":
            # Stored in the core shape; the field is named as the client's API names it.
            inv_ns = (obj.get("involvedObject") or {}).get("namespace")
            if inv_ns and inv_ns != obj["metadata"].get("namespace"):
                field = "regarding" if res.group else "involvedObject"
                causes.append({"field": f"{field}.namespace", "message": f'Invalid value: '
                               f'"{inv_ns}": does not match event.namespace'})
        if res.plural == "workloads" and res.group == "scheduling.k8s.io" and old is not None \
                and obj.get("spec") != old.get("spec"):
            causes.append({"field": "spec", "message": "Invalid value: the Workload spec: "
                           "field is immutable"})
        if res.group == "scheduling.k8s.io" and res.plural in ("workloads", "podgroups"):
            causes += self._validate_native_gang(res, obj.get("spec") or {})
        if causes:
            raise invalid(res, name, causes)

    @staticmethod
    def _validate_native_gang(res, spec):
        """scheduling.k8s.io/v1beta1 Workload and PodGroup: at most 8 templates, each policy
        exactly one of basic and gang, a gang's minCount at least 1."""
        causes = []

        def policy(field, p):
            if p is None:
                return
            if not isinstance(p, dict) or len([k for k in ("basic", "gang") if k in p]) != 1:
                causes.append({"field": field, "message": f"Invalid value: {dumps(p)}: exactly "
                               "one of basic and gang must be set"})
            elif "gang" in p:
                mc = (p["gang"] or {}).get("minCount")
                if not isinstance(mc, int) or isinstance(mc, bool) or mc < 1:
                    causes.append({"field": f"{field}.gang.minCount", "message":
                                   f"Invalid value: {dumps(mc)}: must be greater than or "
                                   "equal to 1"})
        if res.plural == "podgroups":
            policy("spec.schedulingPolicy", spec.get("schedulingPolicy"))
            return causes
        tpls = spec.get("podGroupTemplates") or []
        if not isinstance(tpls, list) or len(tpls) > 8:
            causes.append({"field": "spec.podGroupTemplates", "reason": "FieldValueTooMany",
                           "message": f"Too many: {len(tpls) if isinstance(tpls, list) else 1}:"
                           " must have at most 8 items"})
            return causes
        for i, t in enumerate(tpls):
            if not isinstance(t, dict) or not t.get("name"):
                causes.append({"field": f"spec.podGroupTemplates[{i}].name", "reason":
                               "FieldValueRequired", "message": "Required value"})
                continue
            policy(f"spec.podGroupTemplates[{i}].schedulingPolicy", t.get("schedulingPolicy"))
        return causes

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
        # Types and time formats were checked at decoding (check_types); these are the ranges.
        v = spec.get("leaseDurationSeconds")
        if v is not None and v <= 0:
            causes.append({"field": "spec.leaseDurationSeconds", "message":
                           f"Invalid value: {v}: must be greater than 0"})
        v = spec.get("leaseTransitions")
        if v is not None and v < 0:
            causes.append({"field": "spec.leaseTransitions", "message":
                           f"Invalid value: {v}: must be greater than or equal to 0"})
        return causes

    def _validate_event(self, ev):
        """events.k8s.io/v1 create rules (stored in core shape: from_view already applied)."""
        causes = []
        t = ev.get("eventTime")
        if not t:
            causes.append({"field": "eventTime", "reason": "FieldValueRequired",
                           "message": "Required value"})
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
        value = pc.get("value", 0) if pc is not None else 0
        if spec.get("priority") is not None and spec["priority"] != value:
            raise ApiError(403, "Forbidden", f'pods "{pod["metadata"]["name"]}" is forbidden: '
                           "the integer value of priority "
                           f"({spec['priority']}) must not be provided in pod spec; priority "
                           f"admission controller computed {value} from the given "
                           "PriorityClass name")
        spec["priority"] = value
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
        self._validate(res, obj, old)  # the stored (core) shape, as create validates
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
        def why(w):
            return ApiError(409, "Conflict", f'Operation cannot be fulfilled on pods/binding '
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
