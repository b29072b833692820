/*
 * trace_openb.c - loads the openb CSVs (Alibaba cluster-trace-gpu-v2023, the
 * FGD paper's trace) into a struct gs_trace.
 *
 * Columns are found by header name, so the trimmed variants of the trace
 * (openb_pod_list_multigpu30.csv has only the five demand columns) load too;
 * unknown columns are ignored. Fields are plain or double-quoted CSV. Every
 * problem is reported as "FILE:LINE" with "column: message" and loading
 * continues to the end of the file, so one run lists every bad row.
 *
 * Pods become in-memory struct gs_pod objects (no document): namespace
 * "default", demand from the row (memory MiB -> bytes; gpu_milli clipped to
 * 1000 and 0 when the pod asks no GPU; gpu_spec "A|B" -> acceptable models).
 * arrival = creation_time, duration = deletion_time - creation_time (-1 when
 * either is missing). Nodes become struct gs_node_spec with the label
 * nvidia.com/gpu.product=<model>.
 *
 * The parsers work on memory buffers (gs__openb_parse_nodes/_pods) so the
 * fuzz target drives them without files.
 */
#include "sim/sim.h"

#include "core/error.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gs__openb_parse_nodes(const char *buf, size_t len, const char *fname, struct gs_trace *t, struct gs_diags *d);
int gs__openb_parse_pods(const char *buf, size_t len, const char *fname, struct gs_trace *t, struct gs_diags *d);

#define MAX_COLS 64

/*--- CSV ---*/

struct csv {
    const char *p, *end;
    const char *fname;
    int line;
    char *fields[MAX_COLS];
    int nfields;
    char *scratch;
    size_t scratch_cap;
};

/* Reads one record into c->fields (pointing into c->scratch). 1 = record,
 * 0 = end of input, <0 = error. Empty lines are skipped. */
static int csv_next(struct csv *c)
{
    for (;;) {
        if (c->p >= c->end) return 0;
        c->line++;
        size_t need = (size_t)(c->end - c->p) + 1;
        const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));
        if (nl) need = (size_t)(nl - c->p) + 1;
        if (need > c->scratch_cap) {
            char *ns = realloc(c->scratch, need);
            if (!ns) return GS_ENOMEM;
            c->scratch = ns;
            c->scratch_cap = need;
        }
        const char *e = nl ? nl : c->end;
        char *o = c->scratch;
        c->nfields = 0;
        c->fields[c->nfields++] = o;
        bool quoted = false;
        for (const char *s = c->p; s < e; s++) {
            if (quoted) {
                if (*s == '"' && s + 1 < e && s[1] == '"') *o++ = *s++;
                else if (*s == '"') quoted = false;
                else *o++ = *s;
            } else if (*s == '"') {
                quoted = true;
            } else if (*s == ',') {
                *o++ = 0;
                if (c->nfields == MAX_COLS) break;
                c->fields[c->nfields++] = o;
            } else if (*s != '\r' && *s != 0) {
                *o++ = *s;
            }
        }
        *o = 0;
        c->p = nl ? nl + 1 : c->end;
        if (c->nfields == 1 && !c->fields[0][0]) continue;
        return 1;
    }
}

static int col_index(const struct csv *c, const char *name)
{
    for (int i = 0; i < c->nfields; i++)
        if (!strcmp(c->fields[i], name)) return i;
    return -1;
}

static const char *field(const struct csv *c, int col)
{
    return col >= 0 && col < c->nfields ? c->fields[col] : NULL;
}

/* Integer field in [lo, hi]; a missing optional column gives def. */
static int int_field(struct csv *c, int col, const char *name, int64_t lo, int64_t hi, int64_t def, int64_t *out,
                     struct gs_diags *d)
{
    char path[512];
    snprintf(path, sizeof path, "%s:%d", c->fname, c->line);
    const char *s = field(c, col);
    if (col < 0) {
        *out = def;
        return 0;
    }
    if (!s) {
        gs_diags_add(d, path, "%s: missing (row has %d columns)", name, c->nfields);
        return GS_EINVAL;
    }
    if (!*s) {
        *out = def;
        return 0;
    }
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*end == '.') { /* "12.0": accept an integral decimal */
        char *e2;
        double dv = strtod(s, &e2);
        if (!*e2 && dv == (double)(long long)dv) {
            v = (long long)dv;
            end = e2;
        }
    }
    if (*end || errno) {
        gs_diags_add(d, path, "%s: expected an integer, got \"%.40s\"", name, s);
        return GS_EINVAL;
    }
    if (v < lo || v > hi) {
        gs_diags_add(d, path, "%s: %lld out of range %lld..%lld", name, v, (long long)lo, (long long)hi);
        return GS_EINVAL;
    }
    *out = v;
    return 0;
}

static int need_cols(struct csv *c, const char *const *names, int *idx, size_t n, struct gs_diags *d)
{
    int rc = 0;
    char path[512];
    snprintf(path, sizeof path, "%s:%d", c->fname, c->line);
    for (size_t i = 0; i < n; i++) {
        idx[i] = col_index(c, names[i]);
        if (idx[i] < 0 && names[i][0] != '?') {
            gs_diags_add(d, path, "%s: required column missing from the header", names[i]);
            rc = GS_EINVAL;
        } else if (names[i][0] == '?') {
            idx[i] = col_index(c, names[i] + 1);
        }
    }
    return rc;
}

/*--- Nodes ---*/

static int64_t model_mem_mib(const char *model)
{
    static const struct { const char *m; int64_t mib; } t[] = {
        {"P100", 16280}, {"T4", 15109}, {"V100M16", 16160}, {"V100M32", 32510},
        {"A10", 22731}, {"G1", 10000}, {"G2", 20000}, {"G3", 30000}, {"A100", 81251},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (!strcmp(t[i].m, model)) return t[i].mib;
    return 0;
}

static int push_node(struct gs_trace *t, size_t *cap, const char *name, int64_t cpu, int64_t mem, int64_t gpus,
                     const char *model)
{
    if (t->nnodes == *cap) {
        size_t nc = *cap ? *cap * 2 : 256;
        struct gs_node_spec *nn = realloc(t->nodes, nc * sizeof *nn);
        if (!nn) return GS_ENOMEM;
        t->nodes = nn;
        struct gs_labels *nl = realloc(t->node_labels, nc * sizeof *nl);
        if (!nl) return GS_ENOMEM;
        t->node_labels = nl;
        *cap = nc;
    }
    struct gs_node_spec *s = &t->nodes[t->nnodes];
    struct gs_labels *l = &t->node_labels[t->nnodes];
    memset(s, 0, sizeof *s);
    memset(l, 0, sizeof *l);
    t->nnodes++; /* counted now so gs_trace_free releases a half-built entry */
    s->name = strdup(name);
    if (!s->name) return GS_ENOMEM;
    s->cpu_milli = cpu;
    s->mem_bytes = mem << 20;
    s->pods = 110;
    s->ngpus = (int32_t)gpus;
    if (gpus > 0 && model && *model) {
        s->gpu_model = strdup(model);
        l->v = calloc(1, sizeof *l->v);
        if (!s->gpu_model || !l->v) return GS_ENOMEM;
        l->v[0].key = strdup(GS_LABEL_GPU_PRODUCT);
        l->v[0].value = strdup(model);
        l->n = 1;
        if (!l->v[0].key || !l->v[0].value) return GS_ENOMEM;
        s->gpu_mem_mib = model_mem_mib(model);
    }
    return 0;
}

int gs__openb_parse_nodes(const char *buf, size_t len, const char *fname, struct gs_trace *t, struct gs_diags *d)
{
    struct csv c = {.p = buf, .end = buf + len, .fname = fname};
    static const char *const names[] = {"sn", "cpu_milli", "memory_mib", "gpu", "?model"};
    int col[5], rc = csv_next(&c);
    if (rc <= 0) {
        if (!rc) gs_diags_add(d, fname, "empty file: expected a header sn,cpu_milli,memory_mib,gpu,model");
        free(c.scratch);
        return rc < 0 ? rc : GS_EINVAL;
    }
    rc = need_cols(&c, names, col, 5, d);
    size_t cap = t->nnodes;
    while (!rc || rc == GS_EINVAL) {
        int r = csv_next(&c);
        if (r <= 0) {
            if (r < 0) rc = r;
            break;
        }
        if (col[0] < 0) continue; /* header already reported */
        int64_t cpu, mem, gpus;
        const char *name = field(&c, col[0]);
        int bad = 0;
        if (!name || !*name) {
            char path[512];
            snprintf(path, sizeof path, "%s:%d", fname, c.line);
            bad = gs_diags_add(d, path, "sn: empty node name") <= 0;
        }
        bad |= int_field(&c, col[1], "cpu_milli", 0, INT64_MAX / 2, 0, &cpu, d) < 0;
        bad |= int_field(&c, col[2], "memory_mib", 0, (int64_t)1 << 40, 0, &mem, d) < 0;
        bad |= int_field(&c, col[3], "gpu", 0, GS_MAX_GPUS_PER_NODE, 0, &gpus, d) < 0;
        if (bad) {
            rc = GS_EINVAL;
            continue;
        }
        int pr = push_node(t, &cap, name, cpu, mem, gpus, field(&c, col[4]));
        if (pr < 0) rc = pr;
    }
    for (size_t i = 0; i < t->nnodes; i++) t->nodes[i].labels = &t->node_labels[i]; /* arrays may have moved */
    free(c.scratch);
    return rc;
}

/*--- Pods ---*/

static void pod_free(struct gs_pod *p)
{
    if (!p) return;
    gs_pod_clear(p);
    free(p);
}

static int split_models(const char *spec, struct gs_demand *dm)
{
    if (!spec || !*spec) return 0;
    size_t n = 1;
    for (const char *s = spec; *s; s++) n += *s == '|';
    dm->gpu_models = calloc(n, sizeof *dm->gpu_models);
    if (!dm->gpu_models) return GS_ENOMEM;
    const char *s = spec;
    for (;;) {
        const char *e = strchr(s, '|');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        if (l) {
            char *m = strndup(s, l);
            if (!m) return GS_ENOMEM;
            dm->gpu_models[dm->ngpu_models++] = m;
        }
        if (!e) break;
        s = e + 1;
    }
    if (!dm->ngpu_models) {
        free(dm->gpu_models);
        dm->gpu_models = NULL;
    }
    return 0;
}

struct pod_row {
    const char *name, *spec;
    int64_t cpu, mem, ngpu, milli, ctime, dtime;
};

static int make_pod(const struct pod_row *r, struct gs_trace_pod *out)
{
    struct gs_pod *p = calloc(1, sizeof *p);
    if (!p) return GS_ENOMEM;
    out->pod = p;
    p->meta.name = strdup(r->name);
    p->meta.namespace_ = strdup("default");
    p->scheduler_name = strdup(GS_DEFAULT_SCHEDULER);
    if (!p->meta.name || !p->meta.namespace_ || !p->scheduler_name) return GS_ENOMEM;
    struct gs_demand *dm = &p->demand;
    dm->cpu_milli = r->cpu;
    dm->mem_bytes = r->mem << 20;
    bool gpu = r->ngpu > 0 && r->milli > 0;
    dm->gpu_count = gpu ? (int32_t)r->ngpu : 0;
    dm->gpu_milli = gpu ? (int32_t)(r->milli > GS_GPU_MILLI ? GS_GPU_MILLI : r->milli) : 0;
    if (split_models(r->spec, dm) < 0) return GS_ENOMEM;
    out->arrival = r->ctime >= 0 ? (double)r->ctime : 0.0;
    out->duration = r->ctime >= 0 && r->dtime >= r->ctime ? (double)(r->dtime - r->ctime) : -1.0;
    return 0;
}

static int push_pod(struct gs_trace *t, size_t *cap, const struct pod_row *r)
{
    if (t->npods == *cap) {
        size_t nc = *cap ? *cap * 2 : 1024;
        struct gs_trace_pod *np = realloc(t->pods, nc * sizeof *np);
        if (!np) return GS_ENOMEM;
        t->pods = np;
        *cap = nc;
    }
    struct gs_trace_pod *tp = &t->pods[t->npods++];
    memset(tp, 0, sizeof *tp);
    return make_pod(r, tp);
}

int gs__openb_parse_pods(const char *buf, size_t len, const char *fname, struct gs_trace *t, struct gs_diags *d)
{
    struct csv c = {.p = buf, .end = buf + len, .fname = fname};
    static const char *const names[] = {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli",
                                        "?gpu_spec", "?creation_time", "?deletion_time"};
    int col[8], rc = csv_next(&c);
    if (rc <= 0) {
        if (!rc) gs_diags_add(d, fname, "empty file: expected a header name,cpu_milli,memory_mib,num_gpu,gpu_milli,...");
        free(c.scratch);
        return rc < 0 ? rc : GS_EINVAL;
    }
    rc = need_cols(&c, names, col, 8, d);
    size_t cap = t->npods;
    while (!rc || rc == GS_EINVAL) {
        int r = csv_next(&c);
        if (r <= 0) {
            if (r < 0) rc = r;
            break;
        }
        if (col[0] < 0) continue;
        struct pod_row row = {.name = field(&c, col[0]), .spec = field(&c, col[5])};
        int bad = 0;
        if (!row.name || !*row.name) {
            char path[512];
            snprintf(path, sizeof path, "%s:%d", fname, c.line);
            bad = gs_diags_add(d, path, "name: empty pod name") <= 0;
        }
        bad |= int_field(&c, col[1], "cpu_milli", 0, INT64_MAX / 2, 0, &row.cpu, d) < 0;
        bad |= int_field(&c, col[2], "memory_mib", 0, (int64_t)1 << 40, 0, &row.mem, d) < 0;
        bad |= int_field(&c, col[3], "num_gpu", 0, GS_MAX_GPUS_PER_NODE, 0, &row.ngpu, d) < 0;
        bad |= int_field(&c, col[4], "gpu_milli", 0, INT32_MAX, 0, &row.milli, d) < 0;
        bad |= int_field(&c, col[6], "creation_time", 0, INT64_MAX / 4, -1, &row.ctime, d) < 0;
        bad |= int_field(&c, col[7], "deletion_time", 0, INT64_MAX / 4, -1, &row.dtime, d) < 0;
        if (bad) {
            rc = GS_EINVAL;
            continue;
        }
        int pr = push_pod(t, &cap, &row);
        if (pr < 0) rc = pr;
    }
    free(c.scratch);
    return rc;
}

/*--- Files ---*/

static int read_file(const char *path, char **buf, size_t *len, struct gs_diags *d)
{
    FILE *f = fopen(path, "rbe");
    if (!f) {
        gs_diags_add(d, path, "cannot open: %s", strerror(errno));
        return GS_ENOENT;
    }
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t r = fread(b + n, 1, cap - n, f);
        n += r;
        if (n < cap) break;
        char *nb = realloc(b, cap * 2);
        if (!nb) {
            free(b);
            b = NULL;
            break;
        }
        b = nb;
        cap *= 2;
    }
    int err = ferror(f);
    fclose(f);
    if (!b) return GS_ENOMEM;
    if (err) {
        free(b);
        gs_diags_add(d, path, "read error");
        return GS_EIO;
    }
    *buf = b;
    *len = n;
    return 0;
}

int gs_trace_load_openb(const char *node_csv, const char *pod_csv, struct gs_trace *out, struct gs_diags *d)
{
    memset(out, 0, sizeof *out);
    char *buf = NULL;
    size_t len = 0;
    int rc = read_file(node_csv, &buf, &len, d);
    if (!rc) rc = gs__openb_parse_nodes(buf, len, node_csv, out, d);
    free(buf);
    buf = NULL;
    if (!rc) rc = read_file(pod_csv, &buf, &len, d);
    if (!rc) rc = gs__openb_parse_pods(buf, len, pod_csv, out, d);
    free(buf);
    if (rc) gs_trace_free(out);
    return rc;
}

void gs_trace_free(struct gs_trace *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->nnodes; i++) {
        free((char *)t->nodes[i].name);
        free((char *)t->nodes[i].gpu_model);
        free((void *)t->nodes[i].gpu_numa);
        free((void *)t->nodes[i].gpu_nvlink);
        struct gs_labels *l = &t->node_labels[i];
        for (size_t k = 0; k < l->n; k++) {
            free(l->v[k].key);
            free(l->v[k].value);
        }
        free(l->v);
    }
    free(t->nodes);
    free(t->node_labels);
    for (size_t i = 0; i < t->npods; i++) {
        pod_free(t->pods[i].pod);
        free(t->pods[i].node);
    }
    free(t->pods);
    for (size_t i = 0; i < t->nobjects; i++) gs_object_free(t->objects[i]);
    free(t->objects);
    for (size_t i = 0; i < t->ndra; i++) json_decref(t->dra[i]);
    free(t->dra);
    free(t->node_ready_at);
    memset(t, 0, sizeof *t);
}
