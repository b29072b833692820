/*
 * dm_admit.c - pod admission and the allocation checkpoint of the device
 * manager (devicemanager.h).
 *
 * Admission runs under admit_mu (one pod at a time, as kubelet admits) and
 * takes the state mutex only to read and to commit, never across a call to a
 * plugin. A pod's records are built in a scratch array and committed at the
 * end, so a refusal leaves nothing behind.
 *
 * Device choice for a count request follows kubelet's devicesToAllocate:
 * when the NUMA-aligned free devices can hold the request, the plugin's
 * preferred choice among them (if it offers one) comes first and the aligned
 * ones fill up; otherwise every aligned device is taken and the plugin may
 * choose the rest among all free ones; devices in ascending ID order fill
 * whatever is still missing.
 */
#include "core/error.h"
#include "core/log.h"
#include "deviceplugin/v1beta1/api.pb-c.h"
#include "node/dm_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*--- Checkpoint ---*/

int gs__dm_load(struct gs_dm *dm, char *err, size_t errlen)
{
    json_error_t je;
    json_t *root = json_load_file(dm->checkpoint, 0, &je);
    if (!root) {
        if (access(dm->checkpoint, F_OK)) {
            dm->allocs = json_array();
            return dm->allocs ? 0 : GS_ENOMEM;
        }
        snprintf(err, errlen, "checkpoint %s: %s", dm->checkpoint, je.text);
        return GS_EPARSE;
    }
    json_t *a = json_object_get(root, "allocations");
    if (!json_is_array(a)) {
        snprintf(err, errlen, "checkpoint %s: no \"allocations\" list", dm->checkpoint);
        json_decref(root);
        return GS_EPARSE;
    }
    dm->allocs = json_incref(a);
    json_decref(root);
    return 0;
}

int gs__dm_save(struct gs_dm *dm)
{
    char tmp[400];
    snprintf(tmp, sizeof tmp, "%s.tmpXXXXXX", dm->checkpoint);
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) return GS_EIO;
    json_t *root = json_pack("{s:i, s:O}", "version", 1, "allocations", dm->allocs);
    char *text = json_dumps(root, JSON_INDENT(1));
    json_decref(root);
    int rc = text ? 0 : GS_ENOMEM;
    size_t n = text ? strlen(text) : 0, off = 0;
    while (!rc && off < n) {
        ssize_t w = write(fd, text + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) rc = GS_EIO;
        else off += (size_t)w;
    }
    free(text);
    if (!rc && fsync(fd)) rc = GS_EIO;
    if (close(fd) && !rc) rc = GS_EIO;
    if (!rc && rename(tmp, dm->checkpoint)) rc = GS_EIO;
    if (rc) unlink(tmp);
    return rc;
}

/*--- Queries under mu ---*/

static bool has_id(json_t *arr, const char *id)
{
    size_t i;
    json_t *v;
    json_array_foreach(arr, i, v) if (json_is_string(v) && !strcmp(json_string_value(v), id)) return true;
    return false;
}

static bool rec_is(json_t *rec, const char *key, const char *val)
{
    const char *s = json_string_value(json_object_get(rec, key));
    return s && !strcmp(s, val);
}

bool gs__dm_taken(struct gs_dm *dm, const char *resource, const char *id, const char *pod)
{
    size_t i;
    json_t *r;
    json_array_foreach(dm->allocs, i, r) {
        if (pod && rec_is(r, "pod", pod)) continue;
        if (rec_is(r, "resource", resource) && has_id(json_object_get(r, "devices"), id)) return true;
    }
    return false;
}

/*--- One admission ---*/

struct adm {
    struct gs_dm *dm;
    const char *pod;
    json_t *scratch;       /* records of this pod so far */
    char *why;
    size_t whylen;
};

static bool taken(struct adm *a, const char *resource, const char *id)
{
    if (gs__dm_taken(a->dm, resource, id, a->pod)) return true;
    size_t i;
    json_t *r;
    json_array_foreach(a->scratch, i, r) if (rec_is(r, "resource", resource) &&
                                             has_id(json_object_get(r, "devices"), id)) return true;
    return false;
}

/* Fills a topology resource from an endpoint's devices (under mu). */
static void topo_res(struct adm *a, struct dm_endpoint *e, struct gs_topo_resource *r)
{
    memset(r, 0, sizeof *r);
    r->name = e->resource;
    size_t i;
    json_t *d;
    json_array_foreach(e->devices, i, d) {
        json_int_t numa = json_integer_value(json_object_get(d, "numa"));
        if (numa < 0 || numa >= GS_TOPO_MAX_NUMA) r->no_topology = true;
        if (numa < 0 || numa >= GS_TOPO_MAX_NUMA || !json_is_true(json_object_get(d, "healthy"))) continue;
        r->total[numa]++;
        if (!taken(a, e->resource, json_string_value(json_object_get(d, "id")))) r->avail[numa]++;
    }
}

static void cpu_res(struct adm *a, struct gs_topo_resource *r)
{
    memset(r, 0, sizeof *r);
    r->name = "cpu";
    for (int i = 0; i < a->dm->cfg.topo.n_numa; i++) r->total[i] = r->avail[i] = a->dm->cfg.cpus_per_numa;
    size_t k;
    json_t *rec;
    json_array_foreach(a->dm->allocs, k, rec) {
        json_t *per = json_object_get(rec, "cpus_per_numa");
        for (int i = 0; i < a->dm->cfg.topo.n_numa && json_is_array(per); i++)
            r->avail[i] -= (int)json_integer_value(json_array_get(per, (size_t)i));
    }
}

/* Runs the topology manager over the pod; affinity[c] per container. */
static int topology(struct adm *a, const struct gs_dm_container *ctrs, size_t n, struct gs_topo_hint *affinity)
{
    struct gs_topo_resource res[GS_TOPO_MAX_RES * 4];
    struct gs_topo_container tc[64];
    size_t nres = 0;
    if (n > 64) return GS_ERANGE;
    pthread_mutex_lock(&a->dm->mu);
    for (size_t c = 0; c < n; c++) {
        tc[c] = (struct gs_topo_container){.name = ctrs[c].name};
        for (int j = 0; j < ctrs[c].n && j < GS_TOPO_MAX_RES; j++) {
            if (ctrs[c].exact[j]) continue; /* the scheduler already chose: nothing to align */
            tc[c].res[tc[c].n] = ctrs[c].resource[j];
            tc[c].count[tc[c].n++] = ctrs[c].count[j];
            bool have = false;
            for (size_t r = 0; r < nres; r++) have = have || !strcmp(res[r].name, ctrs[c].resource[j]);
            if (have || nres >= GS_TOPO_MAX_RES * 4) continue;
            struct dm_endpoint *e = gs__dm_find(a->dm, ctrs[c].resource[j]);
            if (e) topo_res(a, e, &res[nres++]);
            else if (!strcmp(ctrs[c].resource[j], "cpu") && a->dm->cfg.cpus_per_numa > 0) cpu_res(a, &res[nres++]);
        }
    }
    pthread_mutex_unlock(&a->dm->mu);
    if (gs_tmgr_admit(&a->dm->cfg.topo, res, nres, tc, n, affinity, a->why, a->whylen)) return 0;
    return GS_EPERM;
}

/* Free healthy devices of e, split by the affinity (under mu). */
static void free_devices(struct adm *a, struct dm_endpoint *e, uint32_t mask, json_t *aligned, json_t *other)
{
    size_t i;
    json_t *d;
    json_array_foreach(e->devices, i, d) {
        const char *id = json_string_value(json_object_get(d, "id"));
        json_int_t numa = json_integer_value(json_object_get(d, "numa"));
        if (!id || !json_is_true(json_object_get(d, "healthy")) || taken(a, e->resource, id)) continue;
        bool in = mask == 0 || (numa >= 0 && numa < 32 && (mask & (1u << numa)));
        json_array_append_new(in ? aligned : other, json_string(id));
    }
}

static int cmp_str(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

/* Appends ids from `from` (ascending) until `out` has `want`. */
static void fill(json_t *out, json_t *from, size_t want)
{
    size_t n = json_array_size(from);
    const char **v = calloc(n ? n : 1, sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = json_string_value(json_array_get(from, i));
    qsort(v, n, sizeof *v, cmp_str);
    for (size_t i = 0; i < n && json_array_size(out) < want; i++)
        if (!has_id(out, v[i])) json_array_append_new(out, json_string(v[i]));
    free(v);
}

/* Asks the plugin for its preferred set among avail, keeping `must`. */
static json_t *ask_preferred(struct dm_endpoint *e, json_t *avail, json_t *must, int size)
{
    size_t na = json_array_size(avail), nm = json_array_size(must);
    char **av = calloc(na ? na : 1, sizeof *av), **mv = calloc(nm ? nm : 1, sizeof *mv);
    for (size_t i = 0; i < na; i++) av[i] = (char *)json_string_value(json_array_get(avail, i));
    for (size_t i = 0; i < nm; i++) mv[i] = (char *)json_string_value(json_array_get(must, i));
    V1beta1__ContainerPreferredAllocationRequest cr = V1BETA1__CONTAINER_PREFERRED_ALLOCATION_REQUEST__INIT;
    cr.n_available_deviceids = na, cr.available_deviceids = av;
    cr.n_must_include_deviceids = nm, cr.must_include_deviceids = mv;
    cr.allocation_size = size;
    V1beta1__ContainerPreferredAllocationRequest *crp = &cr;
    V1beta1__PreferredAllocationRequest req = V1BETA1__PREFERRED_ALLOCATION_REQUEST__INIT;
    req.n_container_requests = 1, req.container_requests = &crp;
    size_t len = protobuf_c_message_get_packed_size(&req.base), rlen = 0;
    uint8_t *buf = malloc(len ? len : 1), *resp = NULL;
    protobuf_c_message_pack(&req.base, buf);
    char err[256];
    int rc = gs_rpc_unary(e->conn, "/v1beta1.DevicePlugin/GetPreferredAllocation", buf, len, &resp, &rlen, 10000,
                          false, NULL, err, sizeof err);
    free(buf), free(av), free(mv);
    json_t *v = rc ? NULL : gs_dm_parse_preferred(resp, rlen);
    free(resp);
    if (rc) gs_log(GS_LOG_WARN, "GetPreferredAllocation failed", "resource", e->resource, "error", err, NULL);
    return v;
}

/* Takes preferred IDs that are really available, up to want. */
static void take_preferred(json_t *out, json_t *pref, json_t *avail, size_t want)
{
    size_t i;
    json_t *v;
    json_array_foreach(pref, i, v) {
        const char *id = json_string_value(v);
        if (json_array_size(out) < want && id && has_id(avail, id) && !has_id(out, id))
            json_array_append_new(out, json_string(id));
    }
}

static int choose(struct adm *a, struct dm_endpoint *e, bool preferred, int count, uint32_t mask, json_t **out)
{
    json_t *aligned = json_array(), *other = json_array(), *all, *pick = json_array();
    pthread_mutex_lock(&a->dm->mu);
    free_devices(a, e, mask, aligned, other);
    pthread_mutex_unlock(&a->dm->mu);
    all = json_deep_copy(aligned);
    json_array_extend(all, other);
    size_t want = (size_t)count;
    int rc = 0;
    if (json_array_size(all) < want) {
        snprintf(a->why, a->whylen, "insufficient %s: want %d, %zu free and healthy", e->resource, count,
                 json_array_size(all));
        rc = GS_EBUSY;
    } else if (json_array_size(aligned) >= want) {
        json_t *p = preferred ? ask_preferred(e, aligned, pick, count) : NULL;
        if (p) take_preferred(pick, p, aligned, want);
        json_decref(p);
        fill(pick, aligned, want);
    } else {
        fill(pick, aligned, json_array_size(aligned));
        json_t *p = preferred ? ask_preferred(e, all, pick, count) : NULL;
        if (p) take_preferred(pick, p, all, want);
        json_decref(p);
        fill(pick, other, want);
    }
    json_decref(aligned), json_decref(other), json_decref(all);
    if (rc) json_decref(pick);
    else *out = pick;
    return rc;
}

/* Checks IDs the scheduler chose: each known, healthy and free. */
static int check_exact(struct adm *a, struct dm_endpoint *e, const char *const *ids, size_t n, json_t **out)
{
    json_t *pick = json_array();
    int rc = 0;
    pthread_mutex_lock(&a->dm->mu);
    for (size_t i = 0; i < n && !rc; i++) {
        json_t *dev = NULL, *d;
        size_t k;
        json_array_foreach(e->devices, k, d) if (rec_is(d, "id", ids[i])) dev = d;
        if (!dev) rc = GS_ENOENT, snprintf(a->why, a->whylen, "%s: unknown device %s", e->resource, ids[i]);
        else if (!json_is_true(json_object_get(dev, "healthy")))
            rc = GS_ESTATE, snprintf(a->why, a->whylen, "%s: device %s is unhealthy", e->resource, ids[i]);
        else if (taken(a, e->resource, ids[i]) || has_id(pick, ids[i]))
            rc = GS_ESTATE, snprintf(a->why, a->whylen, "%s: device %s is already allocated", e->resource, ids[i]);
        else json_array_append_new(pick, json_string(ids[i]));
    }
    pthread_mutex_unlock(&a->dm->mu);
    if (rc) json_decref(pick);
    else *out = pick;
    return rc;
}

static json_t *call_allocate(struct adm *a, struct dm_endpoint *e, json_t *ids)
{
    size_t n = json_array_size(ids);
    char **v = calloc(n ? n : 1, sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = (char *)json_string_value(json_array_get(ids, i));
    V1beta1__ContainerAllocateRequest cr = V1BETA1__CONTAINER_ALLOCATE_REQUEST__INIT;
    cr.n_devices_ids = n, cr.devices_ids = v;
    V1beta1__ContainerAllocateRequest *crp = &cr;
    V1beta1__AllocateRequest req = V1BETA1__ALLOCATE_REQUEST__INIT;
    req.n_container_requests = 1, req.container_requests = &crp;
    size_t len = protobuf_c_message_get_packed_size(&req.base), rlen = 0;
    uint8_t *buf = malloc(len ? len : 1), *resp = NULL;
    protobuf_c_message_pack(&req.base, buf);
    char err[256] = "";
    int rc = gs_rpc_unary(e->conn, "/v1beta1.DevicePlugin/Allocate", buf, len, &resp, &rlen, 10000, false, NULL, err,
                          sizeof err);
    free(buf), free(v);
    json_t *r = rc ? NULL : gs_dm_parse_allocate(resp, rlen);
    free(resp);
    if (!r) snprintf(a->why, a->whylen, "%s: Allocate refused: %s", e->resource, err[0] ? err : "malformed answer");
    return r;
}

static json_t *affinity_json(struct gs_topo_hint h)
{
    json_t *v = json_array();
    for (int i = 0; i < 32; i++)
        if (h.mask & (1u << i)) json_array_append_new(v, json_integer(i));
    return v;
}

/* CPUs are only counted: take them per NUMA node, affinity first. */
static json_t *take_cpus(struct adm *a, int count, uint32_t mask)
{
    struct gs_topo_resource r;
    pthread_mutex_lock(&a->dm->mu);
    cpu_res(a, &r);
    pthread_mutex_unlock(&a->dm->mu);
    json_t *per = json_array();
    int left = count;
    int took[GS_TOPO_MAX_NUMA] = {0};
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < a->dm->cfg.topo.n_numa && left > 0; i++) {
            bool in = mask == 0 || (mask & (1u << i));
            if (in != (pass == 0)) continue;
            int t = r.avail[i] - took[i] < left ? r.avail[i] - took[i] : left;
            if (t > 0) took[i] += t, left -= t;
        }
    for (int i = 0; i < a->dm->cfg.topo.n_numa; i++) json_array_append_new(per, json_integer(took[i]));
    return per;
}

static int admit_resource(struct adm *a, const struct gs_dm_container *c, int j, struct gs_topo_hint aff)
{
    const char *res = c->resource[j];
    json_t *rec;
    if (!strcmp(res, "cpu") && a->dm->cfg.cpus_per_numa > 0) {
        rec = json_pack("{s:s, s:s?, s:s, s:i, s:o, s:o}", "pod", a->pod, "container", c->name, "resource", "cpu",
                        "count", c->count[j], "cpus_per_numa", take_cpus(a, c->count[j], aff.mask), "affinity",
                        affinity_json(aff));
        json_array_append_new(a->scratch, rec);
        return 0;
    }
    pthread_mutex_lock(&a->dm->mu);
    struct dm_endpoint *e = gs__dm_find(a->dm, res);
    bool preferred = e && e->preferred;
    pthread_mutex_unlock(&a->dm->mu);
    if (!e) {
        snprintf(a->why, a->whylen, "no device plugin serves %s", res);
        return GS_ENOENT;
    }
    json_t *ids;
    int rc = c->exact[j] ? check_exact(a, e, c->exact[j], c->n_exact[j], &ids)
                         : choose(a, e, preferred, c->count[j], aff.mask, &ids);
    if (rc) return rc;
    json_t *resp = call_allocate(a, e, ids);
    if (!resp) {
        json_decref(ids);
        return GS_EIO;
    }
    rec = json_pack("{s:s, s:s?, s:s, s:o, s:o, s:o}", "pod", a->pod, "container", c->name, "resource", res,
                    "devices", ids, "response", resp, "affinity", affinity_json(aff));
    json_array_append_new(a->scratch, rec);
    return 0;
}

static json_t *pod_records(struct gs_dm *dm, const char *pod)
{
    json_t *v = json_array(), *r;
    size_t i;
    json_array_foreach(dm->allocs, i, r) if (rec_is(r, "pod", pod)) json_array_append(v, r);
    return v;
}

int gs_dm_admit(struct gs_dm *dm, const char *pod, const struct gs_dm_container *ctrs, size_t n, json_t **result,
                char *why, size_t whylen)
{
    struct adm a = {.dm = dm, .pod = pod, .why = why, .whylen = whylen};
    struct gs_topo_hint aff[64];
    pthread_mutex_lock(&dm->admit_mu);
    pthread_mutex_lock(&dm->mu);
    json_t *existing = pod_records(dm, pod);
    pthread_mutex_unlock(&dm->mu);
    if (json_array_size(existing)) {
        pthread_mutex_unlock(&dm->admit_mu);
        *result = existing;
        return 0;
    }
    json_decref(existing);
    a.scratch = json_array();
    int rc = topology(&a, ctrs, n, aff);
    for (size_t c = 0; !rc && c < n; c++)
        for (int j = 0; !rc && j < ctrs[c].n; j++)
            if (ctrs[c].count[j] > 0 || ctrs[c].exact[j]) rc = admit_resource(&a, &ctrs[c], j, aff[c]);
    if (!rc) {
        pthread_mutex_lock(&dm->mu);
        json_array_extend(dm->allocs, a.scratch);
        if (gs__dm_save(dm)) gs_log(GS_LOG_ERROR, "cannot write the checkpoint", "path", dm->checkpoint, NULL);
        pthread_mutex_unlock(&dm->mu);
        *result = a.scratch;
    } else {
        json_decref(a.scratch);
    }
    pthread_mutex_unlock(&dm->admit_mu);
    return rc;
}

int gs_dm_remove_pod(struct gs_dm *dm, const char *pod)
{
    pthread_mutex_lock(&dm->admit_mu);
    pthread_mutex_lock(&dm->mu);
    size_t before = json_array_size(dm->allocs);
    for (size_t i = json_array_size(dm->allocs); i-- > 0;)
        if (rec_is(json_array_get(dm->allocs, i), "pod", pod)) json_array_remove(dm->allocs, i);
    bool removed = json_array_size(dm->allocs) != before;
    if (removed && gs__dm_save(dm)) gs_log(GS_LOG_ERROR, "cannot write the checkpoint", "path", dm->checkpoint, NULL);
    pthread_mutex_unlock(&dm->mu);
    pthread_mutex_unlock(&dm->admit_mu);
    return removed ? 0 : GS_ENOENT;
}
