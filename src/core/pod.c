/*
 * pod.c - decoding a Pod and computing what it asks of a node.
 *
 * Besides the fields the scheduler reads (node selector, affinity,
 * tolerations, spread constraints, priority, pod group and queue), the
 * decoder computes struct gs_demand once, following Kubernetes exactly so a
 * manifest gets the same answer here as from kube-scheduler:
 *
 *  - a container's request for a resource defaults to its limit;
 *  - the pod's effective request is max(sum over containers, max over init
 *    containers) per resource, plus spec.overhead;
 *  - extended resources (domain-prefixed names outside kubernetes.io, such as
 *    nvidia.com/gpu) must be whole numbers and, when both are set, request
 *    must equal limit; for cpu and memory the request may not exceed the limit.
 *
 * Fractional GPUs come from annotations: gpusched.io/gpu-milli (1..1000) or
 * KAI's gpu-fraction ("0.5" -> 500), and a per-GPU memory amount from
 * gpusched.io/gpu-memory or KAI's gpu-memory (MiB). A pod with such an
 * annotation wants nvidia.com/gpu devices (1 when it gives no count), each
 * shared at that fraction. A memory-only share has no compute fraction; it
 * gets gpu_milli = 1 (the smallest share) so that the memory amount decides
 * where it fits. gpusched.io/gpu-model restricts the GPU models.
 *
 * Gang membership, in this order: spec.schedulingGroup.podGroupName (native
 * scheduling.k8s.io PodGroup), the label scheduling.x-k8s.io/pod-group
 * (scheduler-plugins), the annotation scheduling.k8s.io/group-name (Volcano);
 * pod_group holds the group key object.h describes.
 */
#include "core/decode.h"
#include "core/pod_security.h"
#include "core/quantity.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*--- Clearing ---*/

static void container_clear(struct gs_container *c)
{
    free(c->name);
    free(c->image);
    gs__strv_free(c->command, c->ncommand);
    gs__strv_free(c->args, c->nargs);
    gs_resources_free(&c->requests);
    gs_resources_free(&c->limits);
}

static void containers_free(struct gs_container *v, size_t n)
{
    for (size_t i = 0; i < n; i++) container_clear(&v[i]);
    free(v);
}

static void spread_free(struct gs_spread_constraint *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i].topology_key);
        gs_selector_free(&v[i].label_selector);
    }
    free(v);
}

void gs_pod_clear(struct gs_pod *p)
{
    gs_meta_clear(&p->meta);
    json_decref(p->doc);
    free(p->node_name);
    free(p->scheduler_name);
    free(p->priority_class_name);
    containers_free(p->containers, p->ncontainers);
    containers_free(p->init_containers, p->ninit_containers);
    gs_labels_free(&p->node_selector);
    gs_node_affinity_free(&p->node_affinity);
    for (size_t i = 0; i < p->ntolerations; i++) gs_toleration_free(&p->tolerations[i]);
    free(p->tolerations);
    spread_free(p->spread, p->nspread);
    free(p->pod_group);
    free(p->queue_name);
    free(p->phase);
    gs__strv_free(p->demand.gpu_models, p->demand.ngpu_models);
    gs_resources_free(&p->demand.extended);
    memset(p, 0, sizeof *p);
}

/*--- Containers ---*/

/* Kubernetes' IsExtendedResourceName: domain-prefixed and not in kubernetes.io. */
static bool is_extended(const char *name)
{
    const char *slash = strchr(name, '/');
    if (!slash || !strncmp(name, "requests.", 9)) return false;
    size_t dl = (size_t)(slash - name);
    static const char k8s[] = "kubernetes.io";
    size_t kl = sizeof k8s - 1;
    return !(dl >= kl && !memcmp(slash - kl, k8s, kl) && (dl == kl || slash[-(long)kl - 1] == '.'));
}

static void fmt_q(int64_t milli, char *buf, size_t len)
{
    if (milli % 1000) gs__milli_text(milli, buf, len);
    else gs_quantity_format(milli, buf, len);
}

/* Kubernetes' rules between one container's requests and limits. */
static void check_requests_limits(struct gs_dec *dc, const struct gs_container *c)
{
    size_t m = gs__dec_key(dc, "resources");
    for (int pass = 0; pass < 2; pass++) {
        const struct gs_resources *r = pass ? &c->limits : &c->requests;
        for (size_t i = 0; i < r->n; i++) {
            int64_t units;
            if (is_extended(r->v[i].name) && gs_quantity_whole(r->v[i].milli, &units)) {
                char q[64];
                fmt_q(r->v[i].milli, q, sizeof q);
                size_t m2 = gs__dec_key(dc, pass ? "limits" : "requests");
                gs__dec_err_at(dc, r->v[i].name, "invalid quantity \"%s\": extended resource %s must be a whole number",
                               q, r->v[i].name);
                gs__dec_pop(dc, m2);
            }
        }
    }
    for (size_t i = 0; i < c->requests.n; i++) {
        const char *name = c->requests.v[i].name;
        int64_t req = c->requests.v[i].milli;
        bool has_lim = false;
        int64_t lim = 0;
        for (size_t j = 0; j < c->limits.n; j++)
            if (!strcmp(c->limits.v[j].name, name)) has_lim = true, lim = c->limits.v[j].milli;
        if (!has_lim) continue;
        char rq[64], lq[64];
        fmt_q(req, rq, sizeof rq);
        fmt_q(lim, lq, sizeof lq);
        size_t m2 = gs__dec_key(dc, "requests");
        if (is_extended(name) && req != lim)
            gs__dec_err_at(dc, name, "request \"%s\" must equal the limit \"%s\" for extended resource %s", rq, lq, name);
        else if (!is_extended(name) && req > lim)
            gs__dec_err_at(dc, name, "request \"%s\" must be less than or equal to the limit \"%s\"", rq, lq);
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

static void dec_container(struct gs_dec *dc, const json_t *c, struct gs_container *out)
{
    if (!gs__dec_is(dc, c, JSON_OBJECT)) return;
    const char *why;
    out->name = gs__dec_strdup(dc, c, "name");
    if (!out->name && !json_object_get(c, "name")) gs__dec_err_at(dc, "name", "is required");
    else if (out->name && (why = gs__dns_check(out->name, true)))
        gs__dec_err_at(dc, "name", "invalid name \"%s\": %s", out->name, why);
    out->image = gs__dec_strdup(dc, c, "image");
    out->command = gs__dec_strv(dc, c, "command", &out->ncommand);
    out->args = gs__dec_strv(dc, c, "args", &out->nargs);
    json_t *res = gs__dec_get(dc, c, "resources", JSON_OBJECT);
    if (!res) return;
    size_t m = gs__dec_key(dc, "resources");
    gs__dec_resources(dc, res, "requests", &out->requests);
    gs__dec_resources(dc, res, "limits", &out->limits);
    gs__dec_pop(dc, m);
    check_requests_limits(dc, out);
}

static struct gs_container *dec_containers(struct gs_dec *dc, const json_t *spec, const char *key, size_t *n)
{
    json_t *arr = gs__dec_get(dc, spec, key, JSON_ARRAY);
    *n = 0;
    if (!arr || !json_array_size(arr)) return NULL;
    struct gs_container *v = calloc(json_array_size(arr), sizeof *v);
    if (!v) { dc->oom = true; return NULL; }
    size_t m = gs__dec_key(dc, key), i;
    json_t *c;
    json_array_foreach(arr, i, c) {
        size_t m2 = gs__dec_idx(dc, i);
        dec_container(dc, c, &v[i]);
        gs__dec_pop(dc, m2);
    }
    *n = i;
    gs__dec_pop(dc, m);
    return v;
}

static void check_unique_names(struct gs_dec *dc, const struct gs_pod *p)
{
    size_t total = p->ncontainers + p->ninit_containers;
    for (size_t i = 0; i < total; i++) {
        bool init_i = i >= p->ncontainers;
        const char *a = init_i ? p->init_containers[i - p->ncontainers].name : p->containers[i].name;
        for (size_t j = 0; a && j < i; j++) {
            const char *b = j >= p->ncontainers ? p->init_containers[j - p->ncontainers].name : p->containers[j].name;
            if (!b || strcmp(a, b)) continue;
            size_t m = gs__dec_key(dc, "spec");
            gs__dec_key(dc, init_i ? "initContainers" : "containers");
            gs__dec_idx(dc, init_i ? i - p->ncontainers : i);
            gs__dec_err_at(dc, "name", "duplicate container name \"%s\"", a);
            gs__dec_pop(dc, m);
            break;
        }
    }
}

/*--- Scheduling constraints ---*/

static void dec_affinity(struct gs_dec *dc, const json_t *spec, struct gs_node_affinity *out)
{
    json_t *aff = gs__dec_get(dc, spec, "affinity", JSON_OBJECT);
    size_t m = gs__dec_key(dc, "affinity");
    json_t *na = gs__dec_get(dc, aff, "nodeAffinity", JSON_OBJECT);
    gs__dec_key(dc, "nodeAffinity");
    json_t *req = gs__dec_get(dc, na, "requiredDuringSchedulingIgnoredDuringExecution", JSON_OBJECT);
    if (req) {
        size_t m2 = gs__dec_key(dc, "requiredDuringSchedulingIgnoredDuringExecution");
        out->has_required = true;
        json_t *terms = gs__dec_get(dc, req, "nodeSelectorTerms", JSON_ARRAY);
        if (!json_object_get(req, "nodeSelectorTerms") || (terms && !json_array_size(terms)))
            gs__dec_err_at(dc, "nodeSelectorTerms", "must have at least one node selector term");
        size_t nt = json_array_size(terms), i;
        out->required = nt ? calloc(nt, sizeof *out->required) : NULL;
        if (nt && !out->required) dc->oom = true;
        json_t *t;
        gs__dec_key(dc, "nodeSelectorTerms");
        json_array_foreach(terms, i, t) {
            if (!out->required) break;
            size_t m3 = gs__dec_idx(dc, i);
            gs__dec_node_term(dc, t, &out->required[out->nrequired++]);
            gs__dec_pop(dc, m3);
        }
        gs__dec_pop(dc, m2);
    }
    json_t *pref = gs__dec_get(dc, na, "preferredDuringSchedulingIgnoredDuringExecution", JSON_ARRAY);
    size_t np = json_array_size(pref), i;
    out->preferred = np ? calloc(np, sizeof *out->preferred) : NULL;
    if (np && !out->preferred) dc->oom = true;
    gs__dec_key(dc, "preferredDuringSchedulingIgnoredDuringExecution");
    json_t *p;
    json_array_foreach(pref, i, p) {
        if (!out->preferred) break;
        size_t m3 = gs__dec_idx(dc, i);
        struct gs_preferred_term *pt = &out->preferred[out->npreferred++];
        int64_t w = 0;
        if (gs__dec_is(dc, p, JSON_OBJECT)) {
            if (!gs__dec_int(dc, p, "weight", 1, 100, &w) && !json_object_get(p, "weight"))
                gs__dec_err_at(dc, "weight", "is required");
            pt->weight = (int32_t)w;
            json_t *pref_term = json_object_get(p, "preference");
            size_t m4 = gs__dec_key(dc, "preference");
            if (!pref_term) gs__dec_err(dc, "is required");
            else gs__dec_node_term(dc, pref_term, &pt->term);
            gs__dec_pop(dc, m4);
        }
        gs__dec_pop(dc, m3);
    }
    gs__dec_pop(dc, m);
}

static void dec_spread_one(struct gs_dec *dc, const json_t *c, struct gs_spread_constraint *out)
{
    if (!gs__dec_is(dc, c, JSON_OBJECT)) return;
    int64_t v = 0;
    if (!gs__dec_int(dc, c, "maxSkew", 1, INT32_MAX, &v) && !json_object_get(c, "maxSkew"))
        gs__dec_err_at(dc, "maxSkew", "is required");
    out->max_skew = (int32_t)v;
    out->topology_key = gs__dec_strdup(dc, c, "topologyKey");
    if (!out->topology_key || !*out->topology_key) gs__dec_err_at(dc, "topologyKey", "is required");
    static const char *const whens[] = {"DoNotSchedule", "ScheduleAnyway", NULL};
    const char *when = NULL;
    if (!json_object_get(c, "whenUnsatisfiable")) gs__dec_err_at(dc, "whenUnsatisfiable", "is required");
    else gs__dec_enum(dc, c, "whenUnsatisfiable", whens, &when);
    out->when_unsatisfiable = when && !strcmp(when, "ScheduleAnyway") ? GS_SCHEDULE_ANYWAY : GS_DO_NOT_SCHEDULE;
    gs__dec_label_selector(dc, c, "labelSelector", &out->label_selector);
    if (gs__dec_int(dc, c, "minDomains", 1, INT32_MAX, &v)) {
        out->min_domains = (int32_t)v;
        if (out->when_unsatisfiable != GS_DO_NOT_SCHEDULE)
            gs__dec_err_at(dc, "minDomains", "can only be set when whenUnsatisfiable is DoNotSchedule");
    }
}

static void dec_spread(struct gs_dec *dc, const json_t *spec, struct gs_pod *p)
{
    json_t *arr = gs__dec_get(dc, spec, "topologySpreadConstraints", JSON_ARRAY);
    if (!arr || !json_array_size(arr)) return;
    p->spread = calloc(json_array_size(arr), sizeof *p->spread);
    if (!p->spread) { dc->oom = true; return; }
    p->nspread = json_array_size(arr);
    size_t m = gs__dec_key(dc, "topologySpreadConstraints"), i;
    json_t *c;
    json_array_foreach(arr, i, c) {
        size_t m2 = gs__dec_idx(dc, i);
        dec_spread_one(dc, c, &p->spread[i]);
        gs__dec_pop(dc, m2);
    }
    gs__dec_pop(dc, m);
}

/*--- Demand ---*/

static void add_effective(struct gs_dec *dc, const struct gs_container *c, struct gs_resources *eff)
{
    for (size_t i = 0; i < c->limits.n; i++)
        if (gs_resources_set(eff, c->limits.v[i].name, c->limits.v[i].milli)) dc->oom = true;
    for (size_t i = 0; i < c->requests.n; i++)
        if (gs_resources_set(eff, c->requests.v[i].name, c->requests.v[i].milli)) dc->oom = true;
}

static int64_t sat_add(int64_t a, int64_t b)
{
    return a > INT64_MAX - b ? INT64_MAX : a + b;
}

/* max(sum over containers, max over init containers) + overhead, per resource. */
static void pod_requests(struct gs_dec *dc, const struct gs_pod *p, const struct gs_resources *overhead,
                         struct gs_resources *total)
{
    for (size_t i = 0; i < p->ncontainers; i++) {
        struct gs_resources eff = {0};
        add_effective(dc, &p->containers[i], &eff);
        for (size_t k = 0; k < eff.n; k++)
            if (gs_resources_set(total, eff.v[k].name, sat_add(gs_resources_get(total, eff.v[k].name), eff.v[k].milli)))
                dc->oom = true;
        gs_resources_free(&eff);
    }
    for (size_t i = 0; i < p->ninit_containers; i++) {
        struct gs_resources eff = {0};
        add_effective(dc, &p->init_containers[i], &eff);
        for (size_t k = 0; k < eff.n; k++)
            if (eff.v[k].milli > gs_resources_get(total, eff.v[k].name) &&
                gs_resources_set(total, eff.v[k].name, eff.v[k].milli))
                dc->oom = true;
        gs_resources_free(&eff);
    }
    for (size_t k = 0; k < overhead->n; k++)
        if (gs_resources_set(total, overhead->v[k].name,
                             sat_add(gs_resources_get(total, overhead->v[k].name), overhead->v[k].milli)))
            dc->oom = true;
}

/* Strict decimal integer in [min, max]. */
static bool parse_uint(const char *s, int64_t min, int64_t max, int64_t *out)
{
    if (!*s || strlen(s) > 18) return false;
    int64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return false;
        v = v * 10 + (*p - '0');
    }
    if (v < min || v > max) return false;
    *out = v;
    return true;
}

static void ann_err(struct gs_dec *dc, const char *key, const char *fmt, const char *val)
{
    size_t m = gs__dec_key(dc, "metadata");
    gs__dec_key(dc, "annotations");
    gs__dec_key(dc, key);
    char msg[512];
    snprintf(msg, sizeof msg, fmt, val);
    gs__dec_err(dc, "%s", msg);
    gs__dec_pop(dc, m);
}

/* Reads the GPU-sharing annotations into d; *fractional says one was given. */
static void gpu_annotations(struct gs_dec *dc, const struct gs_labels *ann, struct gs_demand *d, bool *fractional)
{
    const char *s;
    int64_t v;
    if ((s = gs_labels_get(ann, GS_ANN_GPU_MILLI))) {
        if (parse_uint(s, 1, 1000, &v)) d->gpu_milli = (int32_t)v, *fractional = true;
        else ann_err(dc, GS_ANN_GPU_MILLI, "invalid value \"%s\": must be an integer from 1 to 1000", s);
    } else if ((s = gs_labels_get(ann, GS_ANN_KAI_GPU_FRACTION))) {
        const char *why = NULL;
        bool digits = strspn(s, "0123456789.") == strlen(s);
        if (!digits || gs_quantity_parse(s, &v, &why) || v <= 0 || v > 1000)
            ann_err(dc, GS_ANN_KAI_GPU_FRACTION, "invalid value \"%s\": must be a decimal fraction in (0, 1] "
                                                 "with at most 3 decimals", s);
        else d->gpu_milli = (int32_t)v, *fractional = true;
    }
    const char *mkey = gs_labels_get(ann, GS_ANN_GPU_MEMORY) ? GS_ANN_GPU_MEMORY : GS_ANN_KAI_GPU_MEMORY;
    if ((s = gs_labels_get(ann, mkey))) {
        if (parse_uint(s, 1, INT64_MAX / 2, &v)) d->gpu_mem_mib = v, *fractional = true;
        else ann_err(dc, mkey, "invalid value \"%s\": must be a positive integer number of MiB", s);
    }
    if ((s = gs_labels_get(ann, GS_ANN_GPU_MODEL))) {
        size_t n = 1;
        for (const char *p = s; *p; p++) n += *p == '|';
        d->gpu_models = calloc(n, sizeof *d->gpu_models);
        if (!d->gpu_models) { dc->oom = true; return; }
        for (const char *p = s;; p++) {
            const char *e = strchr(p, '|');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len == 0) {
                ann_err(dc, GS_ANN_GPU_MODEL, "invalid value \"%s\": empty model name", s);
                break;
            }
            if (!(d->gpu_models[d->ngpu_models++] = strndup(p, len))) dc->oom = true;
            if (!e) break;
            p = e;
        }
    }
}

static void compute_demand(struct gs_dec *dc, struct gs_pod *p, const struct gs_resources *overhead)
{
    struct gs_demand *d = &p->demand;
    struct gs_resources total = {0};
    pod_requests(dc, p, overhead, &total);
    for (size_t i = 0; i < total.n; i++) {
        const char *name = total.v[i].name;
        int64_t milli = total.v[i].milli;
        if (!strcmp(name, GS_RES_CPU)) d->cpu_milli = milli;
        else if (!strcmp(name, GS_RES_MEMORY)) d->mem_bytes = milli / 1000 + (milli % 1000 != 0);
        else if (!strcmp(name, GS_RES_GPU)) d->gpu_count = milli / 1000 > INT32_MAX ? INT32_MAX : (int32_t)(milli / 1000);
        else if (milli > 0 && gs_resources_set(&d->extended, name, milli)) dc->oom = true;
    }
    gs_resources_free(&total);
    bool fractional = false;
    gpu_annotations(dc, &p->meta.annotations, d, &fractional);
    if (fractional) {
        if (d->gpu_count == 0) d->gpu_count = 1;
        if (d->gpu_milli == 0) d->gpu_milli = 1;
    } else if (d->gpu_count > 0) {
        d->gpu_milli = 1000;
    }
}

/*--- The pod ---*/

/* Seconds the agent and the API count with. Negative values make no sense
 * and absurd ones overflow the nanosecond arithmetic downstream or park a
 * pod for ever; Kubernetes bounds activeDeadlineSeconds the same way. */
#define GS_MAX_GRACE_SECONDS 31536000LL     /* one year */
#define GS_MAX_DEADLINE_SECONDS 2147483647LL /* as Kubernetes: a 32-bit count of seconds */

static void dec_seconds(struct gs_dec *dc, const json_t *spec, const char *key, int64_t min, int64_t max,
                        const char *bound)
{
    json_t *v = json_object_get(spec, key);
    if (!v || json_is_null(v)) return;
    if (!json_is_integer(v)) {
        gs__dec_err_at(dc, key, "expected an integer number of seconds, got %s", gs__json_type_name(v));
        return;
    }
    json_int_t x = json_integer_value(v);
    if (x < min || x > max)
        gs__dec_err_at(dc, key, "invalid value %lld: must be from %lld to %lld seconds (%s)", (long long)x,
                       (long long)min, (long long)max, bound);
}

/* Native gang membership (Kubernetes 1.36+): spec.schedulingGroup.podGroupName
 * names a scheduling.k8s.io PodGroup in the pod's namespace. */
static void dec_scheduling_group(struct gs_dec *dc, const json_t *spec, struct gs_pod *p)
{
    json_t *sg = gs__dec_get(dc, spec, "schedulingGroup", JSON_OBJECT);
    if (!sg) return;
    size_t m = gs__dec_key(dc, "schedulingGroup");
    const char *name = gs__dec_str(dc, sg, "podGroupName"), *why;
    if (!name && !json_object_get(sg, "podGroupName")) gs__dec_err_at(dc, "podGroupName", "is required");
    else if (name && (why = gs__dns_check(name, false)))
        gs__dec_err_at(dc, "podGroupName", "invalid name \"%s\": %s", name, why);
    else if (name && asprintf(&p->pod_group, "scheduling.k8s.io/%s", name) < 0)
        p->pod_group = NULL, dc->oom = true;
    gs__dec_pop(dc, m);
}

static void dec_pod_spec(struct gs_dec *dc, const json_t *spec, struct gs_pod *p, struct gs_resources *overhead)
{
    size_t m = gs__dec_key(dc, "spec");
    p->containers = dec_containers(dc, spec, "containers", &p->ncontainers);
    if (!p->ncontainers && (!json_object_get(spec, "containers") || json_is_array(json_object_get(spec, "containers"))))
        gs__dec_err_at(dc, "containers", "at least one container is required");
    p->init_containers = dec_containers(dc, spec, "initContainers", &p->ninit_containers);
    p->node_name = gs__dec_strdup(dc, spec, "nodeName");
    p->scheduler_name = gs__dec_strdup(dc, spec, "schedulerName");
    p->priority_class_name = gs__dec_strdup(dc, spec, "priorityClassName");
    int64_t prio;
    if (gs__dec_int(dc, spec, "priority", INT32_MIN, INT32_MAX, &prio)) p->priority = (int32_t)prio;
    const char *pp = gs__dec_str(dc, spec, "preemptionPolicy");
    if (pp && strcmp(pp, "Never") && strcmp(pp, "PreemptLowerPriority"))
        gs__dec_err_at(dc, "preemptionPolicy", "Unsupported value: \"%s\": supported values: \"Never\", "
                       "\"PreemptLowerPriority\"", pp);
    p->preempt_never = pp && !strcmp(pp, "Never");
    gs__dec_labels(dc, spec, "nodeSelector", &p->node_selector, false);
    dec_affinity(dc, spec, &p->node_affinity);
    gs__dec_tolerations(dc, spec, "tolerations", &p->tolerations, &p->ntolerations);
    dec_spread(dc, spec, p);
    gs__dec_resources(dc, spec, "overhead", overhead);
    dec_seconds(dc, spec, "terminationGracePeriodSeconds", 0, GS_MAX_GRACE_SECONDS, "at most one year");
    dec_seconds(dc, spec, "activeDeadlineSeconds", 1, GS_MAX_DEADLINE_SECONDS, "as in Kubernetes");
    gs__pod_check_security(dc, spec); /* reserved env, securityContext (pod_security.c) */
    dec_scheduling_group(dc, spec, p);
    gs__dec_pop(dc, m);
}

int gs__pod_decode(json_t *doc, struct gs_pod *p, struct gs_dec *dc)
{
    gs__dec_meta(dc, doc, true, &p->meta);
    json_t *spec = json_object_get(doc, "spec");
    struct gs_resources overhead = {0};
    if (!spec || json_is_null(spec)) {
        size_t m = gs__dec_key(dc, "spec");
        gs__dec_err_at(dc, "containers", "at least one container is required");
        gs__dec_pop(dc, m);
    }
    else if ((spec = gs__dec_get(dc, doc, "spec", JSON_OBJECT))) dec_pod_spec(dc, spec, p, &overhead);
    check_unique_names(dc, p);
    if (!p->scheduler_name && !(p->scheduler_name = strdup(GS_DEFAULT_SCHEDULER))) dc->oom = true;
    /* Group key (object.h): the native field first, then the label, then Volcano's annotation. */
    const char *g = gs_labels_get(&p->meta.labels, GS_LABEL_POD_GROUP);
    const char *vg = g ? NULL : gs_labels_get(&p->meta.annotations, GS_ANN_VOLCANO_GROUP);
    if (!p->pod_group && g && !(p->pod_group = strdup(g))) dc->oom = true;
    if (!p->pod_group && vg && asprintf(&p->pod_group, "scheduling.volcano.sh/%s", vg) < 0)
        p->pod_group = NULL, dc->oom = true;
    const char *q = gs_labels_get(&p->meta.labels, GS_LABEL_QUEUE);
    if (q && !(p->queue_name = strdup(q))) dc->oom = true;
    json_t *status = gs__dec_get(dc, doc, "status", JSON_OBJECT);
    if (status) {
        size_t m = gs__dec_key(dc, "status");
        p->phase = gs__dec_strdup(dc, status, "phase");
        gs__dec_pop(dc, m);
    }
    compute_demand(dc, p, &overhead);
    gs_resources_free(&overhead);
    p->doc = json_incref(doc);
    return dc->oom ? GS_ENOMEM : 0;
}

int gs_pod_decode(json_t *doc, struct gs_pod *out, struct gs_diags *d)
{
    struct gs_dec dc;
    gs__dec_init(&dc, d);
    memset(out, 0, sizeof *out);
    if (!json_is_object(doc)) {
        gs__dec_err(&dc, "expected an object, got %s", doc ? gs__json_type_name(doc) : "nothing");
        return GS_EINVAL;
    }
    int rc = gs__pod_decode(doc, out, &dc);
    if (!rc && dc.nerr) rc = GS_EINVAL;
    if (rc) gs_pod_clear(out);
    return rc;
}

/*--- Synthesised document ---*/

static json_t *container_to_json(const struct gs_container *c)
{
    json_t *o = json_object();
    if (!o) return NULL;
    json_object_set_new(o, "name", json_string(c->name ? c->name : "main"));
    if (c->image) json_object_set_new(o, "image", json_string(c->image));
    json_t *res = json_object();
    if (c->requests.n) json_object_set_new(res, "requests", gs__resources_to_json(&c->requests));
    if (c->limits.n) json_object_set_new(res, "limits", gs__resources_to_json(&c->limits));
    json_object_set_new(o, "resources", res);
    return o;
}

json_t *gs__pod_to_json(const struct gs_pod *p)
{
    json_t *doc = json_object(), *spec = json_object(), *cs = json_array();
    if (!doc || !spec || !cs) {
        json_decref(doc), json_decref(spec), json_decref(cs);
        return NULL;
    }
    json_object_set_new(doc, "apiVersion", json_string("v1"));
    json_object_set_new(doc, "kind", json_string("Pod"));
    json_object_set_new(doc, "metadata", gs__meta_to_json(&p->meta));
    if (p->scheduler_name) json_object_set_new(spec, "schedulerName", json_string(p->scheduler_name));
    if (p->priority_class_name) json_object_set_new(spec, "priorityClassName", json_string(p->priority_class_name));
    if (p->priority) json_object_set_new(spec, "priority", json_integer(p->priority));
    if (p->preempt_never) json_object_set_new(spec, "preemptionPolicy", json_string("Never"));
    if (p->node_name) json_object_set_new(spec, "nodeName", json_string(p->node_name));
    for (size_t i = 0; i < p->ncontainers; i++) json_array_append_new(cs, container_to_json(&p->containers[i]));
    json_object_set_new(spec, "containers", cs);
    json_object_set_new(doc, "spec", spec);
    if (p->phase) json_object_set_new(doc, "status", json_pack("{s:s}", "phase", p->phase));
    return doc;
}
