/*
 * mock.c - the mock backend: a node's GPUs described by a spec or a file.
 *
 * Lets the whole stack (labels, topology, health, exporter, scheduler demos,
 * tests) run on machines without GPUs. A spec string is
 *
 *     8xH100-80GB
 *     4xA100-40GB,numa=2,nvlink=pairs,mig=3g.20gb+2g.10gb*2
 *     2xA100-80GB+2xT4,driver=535.104.05,host=node7,xid=79@gpu3@t=5s
 *
 * and a YAML/JSON file (gs_disc_open_mock with a path) says the same with
 * per-GPU overrides and an explicit NVLink matrix; docs/DISCOVERY.md has the
 * grammar. Both forms fill one struct mock_cfg, which build() turns into an
 * inventory, so the two can never disagree on defaults.
 *
 * Values are deterministic functions of the GPU index and the seconds since
 * open, so tests can predict them. Time is the caller's clock: with a
 * simulated clock the tests move time and faults fire exactly when scripted.
 */
#include "discovery/discovery.h"

#include "core/codec.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

/*--- Models ---*/

struct model {
    const char *key;   /* spec name */
    const char *name;  /* NVML name */
    uint64_t mem_mib;
    int major, minor;
    bool mig;
    unsigned sms, pci_id, max_w, links;
};

static const struct model models[] = {
    {"H100-80GB", "NVIDIA H100 80GB HBM3", 81559, 9, 0, true, 132, 0x2330, 700, 18},
    {"H100-PCIE", "NVIDIA H100 PCIe", 81559, 9, 0, true, 114, 0x2331, 350, 0},
    {"H200", "NVIDIA H200", 143771, 9, 0, true, 132, 0x2335, 700, 18},
    {"B200", "NVIDIA B200", 183359, 10, 0, true, 148, 0x2901, 1000, 18},
    {"A100-40GB", "NVIDIA A100-SXM4-40GB", 40960, 8, 0, true, 108, 0x20b0, 400, 12},
    {"A100-80GB", "NVIDIA A100-SXM4-80GB", 81920, 8, 0, true, 108, 0x20b2, 400, 12},
    {"A10", "NVIDIA A10", 23028, 8, 6, false, 72, 0x2236, 150, 0},
    {"L4", "NVIDIA L4", 23034, 8, 9, false, 58, 0x27b8, 72, 0},
    {"L40S", "NVIDIA L40S", 46068, 8, 9, false, 142, 0x26b9, 350, 0},
    {"T4", "Tesla T4", 15360, 7, 5, false, 40, 0x1eb8, 70, 0},
    {"V100-16GB", "Tesla V100-SXM2-16GB", 16384, 7, 0, false, 80, 0x1db1, 300, 6},
    {"V100M16", "Tesla V100-SXM2-16GB", 16384, 7, 0, false, 80, 0x1db1, 300, 6},
    {"V100-32GB", "Tesla V100-SXM2-32GB", 32768, 7, 0, false, 80, 0x1db5, 300, 6},
    {"V100M32", "Tesla V100-SXM2-32GB", 32768, 7, 0, false, 80, 0x1db5, 300, 6},
    {"P100", "Tesla P100-PCIE-16GB", 16280, 6, 0, false, 56, 0x15f8, 250, 0},
};

/* Looks a model up by spec name (case-insensitive). An unknown "NAME-<N>GB"
 * becomes a generic Ampere-class GPU with N GiB, so new models need no code. */
static int model_lookup(const char *key, struct model *out, char *namebuf, size_t namelen)
{
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (!strcasecmp(models[i].key, key)) {
            *out = models[i];
            return 0;
        }
    const char *dash = strrchr(key, '-');
    if (!dash || dash == key) return GS_EINVAL;
    char *end;
    errno = 0;
    unsigned long gb = strtoul(dash + 1, &end, 10);
    if (errno || end == dash + 1 || strcasecmp(end, "GB") || gb == 0 || gb > 4096) return GS_EINVAL;
    for (const char *p = key; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') return GS_EINVAL;
    snprintf(namebuf, namelen, "NVIDIA %s", key);
    *out = (struct model){key, namebuf, (uint64_t)gb * 1024, 8, 0, false, 80, 0, 300, 0};
    return 0;
}

/*--- Faults ---*/

static int errf(char *err, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int errf(char *err, size_t len, const char *fmt, ...)
{
    if (err && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, len, fmt, ap);
        va_end(ap);
    }
    return GS_EINVAL;
}

/* Parses a non-negative decimal integer filling the whole of s. */
static int parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    if (!isdigit((unsigned char)*s)) return GS_EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || *end || v > max) return GS_EINVAL;
    *out = v;
    return 0;
}

static int fault_kind(const char *s, size_t len, struct gs_fault *f, char *err, size_t errlen)
{
    char kind[32];
    if (len >= sizeof kind) return errf(err, errlen, "fault kind too long");
    memcpy(kind, s, len);
    kind[len] = 0;
    char *eq = strchr(kind, '=');
    if (eq) *eq++ = 0;
    if (!strcmp(kind, "xid")) {
        f->kind = GS_EV_XID;
        if (!eq || parse_uint(eq, 65535, &f->value) || f->value == 0)
            return errf(err, errlen, "xid needs a code 1..65535, as in xid=79");
    } else if (!strcmp(kind, "dbe")) {
        f->kind = GS_EV_ECC_DBE;
        f->value = 1;
        if (eq && (parse_uint(eq, 1000000, &f->value) || f->value == 0))
            return errf(err, errlen, "dbe count must be 1..1000000");
    } else if (!strcmp(kind, "lost")) {
        f->kind = GS_EV_LOST;
        if (eq) return errf(err, errlen, "lost takes no value; use @for=DURATION");
    } else {
        return errf(err, errlen, "unknown fault \"%s\" (want xid=N, dbe or lost)", kind);
    }
    return 0;
}

static int fault_part(const char *p, struct gs_fault *f, bool *have_t, char *err, size_t errlen)
{
    if (!strcmp(p, "all") || !strcmp(p, "gpu*")) {
        f->gpu = -1;
        return 0;
    }
    uint64_t v;
    if (!strncmp(p, "gpu", 3)) {
        const char *n = p[3] == '=' ? p + 4 : p + 3;
        if (parse_uint(n, GS_DISC_MAX_GPUS - 1, &v)) return errf(err, errlen, "bad GPU \"%s\"", p);
        f->gpu = (int)v;
        return 0;
    }
    if (!strncmp(p, "t=", 2)) {
        if (gs_duration_parse(p + 2, &f->at_ns)) return errf(err, errlen, "bad time \"%s\"", p + 2);
        *have_t = true;
        return 0;
    }
    if (!strncmp(p, "for=", 4)) {
        if (f->kind != GS_EV_LOST) return errf(err, errlen, "only lost takes @for=");
        if (gs_duration_parse(p + 4, &f->for_ns)) return errf(err, errlen, "bad duration \"%s\"", p + 4);
        return 0;
    }
    return errf(err, errlen, "unknown fault part \"%s\" (want gpuN, all, t=TIME, for=TIME)", p);
}

int gs_fault_parse(const char *s, struct gs_fault *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->gpu = -2;
    const char *at = strchr(s, '@');
    if (!at) return errf(err, errlen, "fault \"%.40s\" needs @gpuN", s);
    int rc = fault_kind(s, (size_t)(at - s), f, err, errlen);
    if (rc) return rc;
    bool have_t = false;
    while (at) {
        const char *p = at + 1;
        at = strchr(p, '@');
        size_t len = at ? (size_t)(at - p) : strlen(p);
        char part[48];
        if (len == 0 || len >= sizeof part) return errf(err, errlen, "empty or too long fault part");
        memcpy(part, p, len);
        part[len] = 0;
        if ((rc = fault_part(part, f, &have_t, err, errlen))) return rc;
    }
    if (f->gpu == -2) return errf(err, errlen, "fault needs @gpuN or @all");
    (void)have_t; /* no @t= means at once */
    return 0;
}

/* Stable, so faults scripted for the same instant fire in the order written. */
static void sort_by_time(struct gs_fault *v, size_t n)
{
    for (size_t i = 1; i < n; i++) {
        struct gs_fault f = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1].at_ns > f.at_ns; j--) v[j] = v[j - 1];
        v[j] = f;
    }
}

static int fault_push(struct gs_fault **v, size_t *n, const struct gs_fault *f)
{
    if (*n >= 4096) return GS_ERANGE;
    struct gs_fault *nv = realloc(*v, (*n + 1) * sizeof *nv);
    if (!nv) return GS_ENOMEM;
    nv[(*n)++] = *f;
    *v = nv;
    return 0;
}

int gs_fault_script_parse(const char *s, struct gs_fault **v, size_t *n, char *err, size_t errlen)
{
    *v = NULL;
    *n = 0;
    const char *seps = ";, \t\r\n";
    while (*s) {
        s += strspn(s, seps);
        size_t len = strcspn(s, seps);
        if (!len) break;
        char item[128];
        if (len >= sizeof item) {
            free(*v), *v = NULL, *n = 0;
            return errf(err, errlen, "fault too long");
        }
        memcpy(item, s, len);
        item[len] = 0;
        s += len;
        struct gs_fault f;
        int rc = gs_fault_parse(item, &f, err, errlen);
        if (!rc) rc = fault_push(v, n, &f);
        if (rc) {
            free(*v), *v = NULL, *n = 0;
            return rc == GS_ERANGE ? errf(err, errlen, "too many faults") : rc;
        }
    }
    sort_by_time(*v, *n);
    return 0;
}

/*--- Configuration (what the spec or the file says) ---*/

struct group {
    struct model m;
    char name[96];   /* NVML name (the model's, or the file's override) */
    int count;
    int numa;        /* -1 = spread evenly */
    char mig[160];   /* layout for these GPUs, "" = the node-wide one */
};

struct mock_cfg {
    struct group groups[GS_DISC_MAX_GPUS];
    int ngroups, ngpus;
    int numa, cpus;
    char nvlink[32];
    bool has_matrix;
    uint8_t matrix[GS_DISC_MAX_GPUS][GS_DISC_MAX_GPUS];
    char mig[160];
    char driver[32], host[64], machine[64];
    int cuda;
    struct gs_fault *faults;
    size_t nfaults;
};

static void cfg_init(struct mock_cfg *c)
{
    memset(c, 0, sizeof *c);
    c->numa = 1;
    c->cpus = 32;
    snprintf(c->driver, sizeof c->driver, "550.54.15");
    c->cuda = 12040;
}

static int add_group(struct mock_cfg *c, const char *model, long count, char *err, size_t errlen)
{
    if (c->ngroups >= GS_DISC_MAX_GPUS || count < 1 || c->ngpus + count > GS_DISC_MAX_GPUS)
        return errf(err, errlen, "at most %d GPUs per node", GS_DISC_MAX_GPUS);
    struct group *g = &c->groups[c->ngroups];
    char namebuf[96];
    if (model_lookup(model, &g->m, namebuf, sizeof namebuf))
        return errf(err, errlen, "unknown GPU model \"%.40s\" (known: H100-80GB, A100-40GB, T4, ...; "
                                 "or NAME-<N>GB)", model);
    snprintf(g->name, sizeof g->name, "%s", g->m.name);
    g->m.name = NULL;
    g->m.key = NULL;
    g->count = (int)count;
    g->numa = -1;
    c->ngroups++;
    c->ngpus += (int)count;
    return 0;
}

/* "8xH100-80GB" or "T4". */
static int spec_group(struct mock_cfg *c, const char *s, char *err, size_t errlen)
{
    long count = 1;
    const char *x = s;
    while (isdigit((unsigned char)*x)) x++;
    if (x > s && (*x == 'x' || *x == 'X')) {
        errno = 0;
        count = strtol(s, NULL, 10);
        if (errno || count < 1 || count > GS_DISC_MAX_GPUS)
            return errf(err, errlen, "GPU count must be 1..%d", GS_DISC_MAX_GPUS);
        s = x + 1;
    }
    return add_group(c, s, count, err, errlen);
}

/* Letters, digits and "-_.:/" (and spaces where `spaces`), 1..max-1 bytes. */
static bool plain_name(const char *s, size_t max, bool spaces)
{
    size_t n = strlen(s);
    if (!n || n >= max) return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("-_.:/", *s) && !(spaces && *s == ' ')) return false;
    return true;
}

static int parse_cuda(const char *s, int *out)
{
    unsigned major = 0, minor = 0;
    char tail;
    if (sscanf(s, "%u.%u%c", &major, &minor, &tail) != 2 || major > 99 || minor > 99) return GS_EINVAL;
    *out = (int)(major * 1000 + minor * 10);
    return 0;
}

static int spec_option(struct mock_cfg *c, const char *key, const char *val, char *err, size_t errlen)
{
    uint64_t v;
    if (!strcmp(key, "numa")) {
        if (parse_uint(val, GS_DISC_MAX_NUMA, &v) || v == 0) return errf(err, errlen, "numa must be 1..%d", GS_DISC_MAX_NUMA);
        c->numa = (int)v;
    } else if (!strcmp(key, "cpus")) {
        if (parse_uint(val, 4096, &v) || v == 0) return errf(err, errlen, "cpus (per NUMA node) must be 1..4096");
        c->cpus = (int)v;
    } else if (!strcmp(key, "nvlink")) {
        if (strlen(val) >= sizeof c->nvlink) return errf(err, errlen, "bad nvlink mode");
        snprintf(c->nvlink, sizeof c->nvlink, "%s", val);
    } else if (!strcmp(key, "mig")) {
        if (strlen(val) >= sizeof c->mig) return errf(err, errlen, "MIG layout too long");
        snprintf(c->mig, sizeof c->mig, "%s", val);
    } else if (!strcmp(key, "driver")) {
        if (!plain_name(val, sizeof c->driver, false) || !isdigit((unsigned char)*val))
            return errf(err, errlen, "driver must look like 550.54.15");
        snprintf(c->driver, sizeof c->driver, "%s", val);
    } else if (!strcmp(key, "cuda")) {
        if (parse_cuda(val, &c->cuda)) return errf(err, errlen, "cuda must look like 12.4");
    } else if (!strcmp(key, "host") || !strcmp(key, "hostname")) {
        if (!plain_name(val, sizeof c->host, false)) return errf(err, errlen, "bad host name");
        snprintf(c->host, sizeof c->host, "%s", val);
    } else if (!strcmp(key, "machine")) {
        if (!plain_name(val, sizeof c->machine, true)) return errf(err, errlen, "bad machine name");
        snprintf(c->machine, sizeof c->machine, "%s", val);
    } else {
        return errf(err, errlen, "unknown mock option \"%.32s\"", key);
    }
    return 0;
}

static int spec_fault(struct mock_cfg *c, const char *item, char *err, size_t errlen)
{
    struct gs_fault f;
    int rc = gs_fault_parse(item, &f, err, errlen);
    if (!rc) rc = fault_push(&c->faults, &c->nfaults, &f);
    return rc == GS_ERANGE ? errf(err, errlen, "too many faults") : rc;
}

static int spec_item(struct mock_cfg *c, char *item, bool first, char *err, size_t errlen)
{
    if (first) {
        for (char *save = NULL, *g = strtok_r(item, "+", &save); g; g = strtok_r(NULL, "+", &save)) {
            int rc = spec_group(c, g, err, errlen);
            if (rc) return rc;
        }
        return c->ngroups ? 0 : errf(err, errlen, "spec needs GPUs first, as in 8xH100-80GB");
    }
    if (strchr(item, '@')) return spec_fault(c, item, err, errlen);
    char *eq = strchr(item, '=');
    if (!eq) return errf(err, errlen, "expected key=value, got \"%.40s\"", item);
    *eq = 0;
    return spec_option(c, item, eq + 1, err, errlen);
}

static int spec_parse(struct mock_cfg *c, const char *spec, char *err, size_t errlen)
{
    size_t len = strlen(spec);
    if (len == 0 || len > 4096) return errf(err, errlen, "empty or overlong mock spec");
    char *buf = strdup(spec);
    if (!buf) return GS_ENOMEM;
    int rc = 0;
    bool first = true;
    for (char *save = NULL, *it = strtok_r(buf, ",", &save); it && !rc; it = strtok_r(NULL, ",", &save)) {
        while (isspace((unsigned char)*it)) it++;
        for (char *e = it + strlen(it); e > it && isspace((unsigned char)e[-1]); *--e = 0) {}
        rc = spec_item(c, it, first, err, errlen);
        first = false;
    }
    if (!rc && first) rc = errf(err, errlen, "empty mock spec");
    free(buf);
    return rc;
}

/*--- File form (YAML or JSON, through core/codec.h) ---*/

/* A scalar as text: strings as they are, integers and reals printed. */
static int scalar_text(const json_t *v, char *buf, size_t len)
{
    if (json_is_string(v)) snprintf(buf, len, "%s", json_string_value(v));
    else if (json_is_integer(v)) snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else if (json_is_real(v)) snprintf(buf, len, "%g", json_real_value(v));
    else return GS_EINVAL;
    return 0;
}

/* "a+b*2" from either a string or a list of strings. */
static int mig_text(const json_t *v, char *buf, size_t len)
{
    if (json_is_string(v)) return scalar_text(v, buf, len);
    if (!json_is_array(v)) return GS_EINVAL;
    buf[0] = 0;
    size_t i;
    json_t *it;
    json_array_foreach(v, i, it) {
        if (!json_is_string(it)) return GS_EINVAL;
        size_t used = strlen(buf);
        if (snprintf(buf + used, len - used, "%s%s", i ? "+" : "", json_string_value(it)) >= (int)(len - used))
            return GS_EINVAL;
    }
    return 0;
}

static int doc_int(const json_t *v, long lo, long hi, long *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) return GS_EINVAL;
    *out = (long)json_integer_value(v);
    return 0;
}

static int doc_group(struct mock_cfg *c, size_t idx, const json_t *g, char *err, size_t errlen)
{
    const json_t *model = json_object_get(g, "model");
    long count = 1, v;
    if (!json_is_object(g) || !json_is_string(model))
        return errf(err, errlen, "gpus[%zu]: needs a model", idx);
    if (json_object_get(g, "count") && doc_int(json_object_get(g, "count"), 1, GS_DISC_MAX_GPUS, &count))
        return errf(err, errlen, "gpus[%zu].count: must be 1..%d", idx, GS_DISC_MAX_GPUS);
    int rc = add_group(c, json_string_value(model), count, err, errlen);
    if (rc) return rc;
    struct group *grp = &c->groups[c->ngroups - 1];
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)g, key, val) {
        if (!strcmp(key, "model") || !strcmp(key, "count")) continue;
        if (!strcmp(key, "numa")) {
            if (doc_int(val, 0, GS_DISC_MAX_NUMA - 1, &v)) return errf(err, errlen, "gpus[%zu].numa: bad node", idx);
            grp->numa = (int)v;
        } else if (!strcmp(key, "memoryMiB")) {
            if (doc_int(val, 1, 1L << 40, &v)) return errf(err, errlen, "gpus[%zu].memoryMiB: must be > 0", idx);
            grp->m.mem_mib = (uint64_t)v;
        } else if (!strcmp(key, "name")) {
            if (!json_is_string(val) || !*json_string_value(val) || strlen(json_string_value(val)) >= sizeof grp->name)
                return errf(err, errlen, "gpus[%zu].name: must be a short string", idx);
            snprintf(grp->name, sizeof grp->name, "%s", json_string_value(val));
        } else if (!strcmp(key, "mig")) {
            if (mig_text(val, grp->mig, sizeof grp->mig)) return errf(err, errlen, "gpus[%zu].mig: bad layout", idx);
        } else if (!strcmp(key, "computeCapability")) {
            unsigned a, b;
            char t[16];
            if (scalar_text(val, t, sizeof t) || sscanf(t, "%u.%u", &a, &b) != 2 || a > 99 || b > 9)
                return errf(err, errlen, "gpus[%zu].computeCapability: want \"9.0\"", idx);
            grp->m.major = (int)a, grp->m.minor = (int)b;
        } else if (!strcmp(key, "migCapable")) {
            if (!json_is_boolean(val)) return errf(err, errlen, "gpus[%zu].migCapable: want true/false", idx);
            grp->m.mig = json_is_true(val);
        } else {
            return errf(err, errlen, "gpus[%zu]: unknown field \"%.32s\"", idx, key);
        }
    }
    return 0;
}

static int doc_matrix(struct mock_cfg *c, const json_t *m, char *err, size_t errlen)
{
    size_t i, j;
    json_t *row, *cell;
    if (json_array_size(m) > GS_DISC_MAX_GPUS) return errf(err, errlen, "nvlink: matrix too large");
    json_array_foreach(m, i, row) {
        if (!json_is_array(row) || json_array_size(row) != json_array_size(m))
            return errf(err, errlen, "nvlink[%zu]: rows must be as long as the matrix", i);
        json_array_foreach(row, j, cell) {
            long v;
            if (doc_int(cell, 0, 64, &v)) return errf(err, errlen, "nvlink[%zu][%zu]: links must be 0..64", i, j);
            c->matrix[i][j] = (uint8_t)v;
        }
    }
    c->has_matrix = true;
    snprintf(c->nvlink, sizeof c->nvlink, "matrix:%zu", json_array_size(m));
    return 0;
}

static int doc_faults(struct mock_cfg *c, const json_t *v, char *err, size_t errlen)
{
    if (json_is_string(v)) {
        struct gs_fault *f;
        size_t n;
        int rc = gs_fault_script_parse(json_string_value(v), &f, &n, err, errlen);
        for (size_t i = 0; !rc && i < n; i++) rc = fault_push(&c->faults, &c->nfaults, &f[i]);
        free(f);
        return rc;
    }
    if (!json_is_array(v)) return errf(err, errlen, "faults: want a list of strings");
    size_t i;
    json_t *it;
    json_array_foreach(v, i, it) {
        if (!json_is_string(it)) return errf(err, errlen, "faults[%zu]: want a string", i);
        int rc = spec_fault(c, json_string_value(it), err, errlen);
        if (rc) return rc;
    }
    return 0;
}

static int doc_key(struct mock_cfg *c, const char *key, const json_t *val, char *err, size_t errlen)
{
    char text[160];
    if (!strcmp(key, "gpus")) {
        size_t i;
        json_t *g;
        if (!json_is_array(val) || !json_array_size(val)) return errf(err, errlen, "gpus: want a non-empty list");
        json_array_foreach(val, i, g) {
            int rc = doc_group(c, i, g, err, errlen);
            if (rc) return rc;
        }
        return 0;
    }
    if (!strcmp(key, "nvlink") && json_is_array(val)) return doc_matrix(c, val, err, errlen);
    if (!strcmp(key, "faults")) return doc_faults(c, val, err, errlen);
    if (!strcmp(key, "mig") && json_is_array(val)) {
        if (mig_text(val, c->mig, sizeof c->mig)) return errf(err, errlen, "mig: bad layout");
        return 0;
    }
    const char *opt = !strcmp(key, "cpusPerNuma") ? "cpus" : key;
    if (scalar_text(val, text, sizeof text)) return errf(err, errlen, "%.32s: want a scalar", key);
    return spec_option(c, opt, text, err, errlen);
}

static int doc_parse(struct mock_cfg *c, const json_t *doc, char *err, size_t errlen)
{
    if (!json_is_object(doc)) return errf(err, errlen, "mock file: want a mapping");
    if (!json_object_get(doc, "gpus")) return errf(err, errlen, "mock file: needs gpus");
    /* gpus first, so faults and the matrix can be checked against them in build(). */
    int rc = doc_key(c, "gpus", json_object_get(doc, "gpus"), err, errlen);
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)doc, key, val) {
        if (rc) break;
        if (strcmp(key, "gpus")) rc = doc_key(c, key, val, err, errlen);
    }
    return rc;
}

/*--- Building the inventory ---*/

/* "Ng.Mgb". The memory and
 * engine counts are approximations of NVIDIA's tables: enough for labels and
 * scheduling, not a catalogue. */
static int mig_profile(const char *p, unsigned sms, struct gs_disc_mig *m)
{
    unsigned g = 0, gb = 0;
    int used = 0;
    if (sscanf(p, "%ug.%ugb%n", &g, &gb, &used) != 2 || g == 0 || g > 8 || gb == 0 || gb > 1024) return GS_EINVAL;
    if (p[used]) return GS_EINVAL;
    snprintf(m->profile, sizeof m->profile, "%s", p);
    m->memory_mib = (uint64_t)gb * 1024;
    m->slices_gi = m->slices_ci = g;
    m->multiprocessors = sms * g / 8;
    m->engines_copy = g;
    m->engines_decoder = g / 2;
    m->engines_jpeg = m->engines_ofa = g == 7 ? 1 : 0;
    return 0;
}

/* "3g.40gb+2g.20gb*2" onto GPU g; at most 7 slices, like A100/H100. */
static int build_mig(struct gs_disc_gpu *g, const char *layout, unsigned sms, char *err, size_t errlen)
{
    char buf[160];
    snprintf(buf, sizeof buf, "%s", layout);
    unsigned slices = 0;
    for (char *save = NULL, *p = strtok_r(buf, "+", &save); p; p = strtok_r(NULL, "+", &save)) {
        uint64_t times = 1;
        char *star = strchr(p, '*');
        if (star) {
            *star = 0;
            if (parse_uint(star + 1, GS_DISC_MAX_MIG, &times) || !times) return errf(err, errlen, "bad MIG count in \"%s\"", layout);
        }
        for (uint64_t k = 0; k < times; k++) {
            if (g->n_mig >= GS_DISC_MAX_MIG) return errf(err, errlen, "too many MIG instances on GPU %d", g->index);
            struct gs_disc_mig *m = &g->mig[g->n_mig];
            if (mig_profile(p, sms, m)) return errf(err, errlen, "bad MIG profile \"%.20s\" (want like 1g.10gb)", p);
            slices += m->slices_gi;
            m->gi_id = (unsigned)g->n_mig + 1;
            snprintf(m->uuid, sizeof m->uuid, "MIG-%.36s-%u", g->uuid + 4, m->gi_id);
            g->n_mig++;
        }
    }
    if (slices > 7) return errf(err, errlen, "MIG layout \"%s\" needs %u slices; a GPU has 7", layout, slices);
    g->mig_enabled = g->n_mig > 0;
    return 0;
}

static uint64_t fnv1a(const char *s, uint64_t h)
{
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

static void make_uuid(const char *host, int index, char *out, size_t len)
{
    char key[96];
    snprintf(key, sizeof key, "%s/%d", host, index);
    uint64_t a = fnv1a(key, 0xcbf29ce484222325ULL), b = fnv1a(key, a ^ 0x9e3779b97f4a7c15ULL);
    snprintf(out, len, "GPU-%08x-%04x-%04x-%04x-%012llx", (unsigned)(a >> 32), (unsigned)(a >> 16) & 0xffff,
             (unsigned)a & 0xffff, (unsigned)(b >> 48), (unsigned long long)(b & 0xffffffffffffULL));
}

/* Links between GPUs i and j in a mode; `links` is the model's per-GPU total. */
static int nvlink_mode(struct mock_cfg *c, struct gs_inventory *inv, char *err, size_t errlen)
{
    int n = inv->n_gpus;
    const char *mode = c->nvlink;
    unsigned links = c->groups[0].m.links ? c->groups[0].m.links : 12;
    int island = 0;
    if (!*mode) mode = c->groups[0].m.links ? "all" : "none";
    if (!strcmp(mode, "none")) return 0;
    if (!strcmp(mode, "all")) island = n;
    else if (!strcmp(mode, "pairs")) island = 2;
    else if (!strncmp(mode, "islands:", 8)) {
        uint64_t k;
        if (parse_uint(mode + 8, GS_DISC_MAX_GPUS, &k) || k < 1) return errf(err, errlen, "islands:K needs K >= 1");
        island = (int)k;
    } else {
        return errf(err, errlen, "nvlink must be all, pairs, islands:K or none, not \"%s\"", mode);
    }
    unsigned per = island > 1 ? links / (unsigned)(island - 1) : 0;
    if (per == 0) per = 1;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++)
            if (i != j && i / island == j / island) inv->gpus[i].nvlink[j] = (uint8_t)per;
    return 0;
}

static int build_nvlink(struct mock_cfg *c, struct gs_inventory *inv, char *err, size_t errlen)
{
    if (!c->has_matrix) return nvlink_mode(c, inv, err, errlen);
    size_t dim = strtoul(c->nvlink + 7, NULL, 10);
    if (dim != (size_t)inv->n_gpus) return errf(err, errlen, "nvlink matrix is %zux%zu but there are %d GPUs", dim, dim, inv->n_gpus);
    for (int i = 0; i < inv->n_gpus; i++)
        for (int j = 0; j < inv->n_gpus; j++) {
            if (c->matrix[i][j] != c->matrix[j][i]) return errf(err, errlen, "nvlink matrix not symmetric at [%d][%d]", i, j);
            inv->gpus[i].nvlink[j] = i == j ? 0 : c->matrix[i][j];
        }
    return 0;
}

static int build_gpu(struct mock_cfg *c, const struct group *grp, int i, struct gs_disc_gpu *g, char *err, size_t errlen)
{
    memset(g, 0, sizeof *g);
    g->index = i;
    make_uuid(c->host[0] ? c->host : "mock", i, g->uuid, sizeof g->uuid);
    snprintf(g->name, sizeof g->name, "%s", grp->name);
    snprintf(g->pci_bus_id, sizeof g->pci_bus_id, "00000000:%02X:00.0", 0x18 + i * 7);
    g->pci_device_id = grp->m.pci_id << 16 | 0x10de;
    g->minor = i;
    g->numa_node = grp->numa >= 0 ? grp->numa : i * c->numa / c->ngpus;
    if (g->numa_node >= c->numa) return errf(err, errlen, "GPU %d is on NUMA node %d but numa=%d", i, g->numa_node, c->numa);
    g->cc_major = grp->m.major;
    g->cc_minor = grp->m.minor;
    g->memory_mib = grp->m.mem_mib;
    g->mig_capable = grp->m.mig;
    const char *layout = grp->mig[0] ? grp->mig : c->mig;
    if (!*layout || !strcmp(layout, "none")) return 0;
    if (!g->mig_capable) {
        if (!grp->mig[0]) return 0; /* a node-wide layout applies to the MIG-capable GPUs only */
        return errf(err, errlen, "GPU %d (%s) is not MIG-capable", i, g->name);
    }
    return build_mig(g, layout, grp->m.sms, err, errlen);
}

static int build(struct mock_cfg *c, struct gs_inventory *inv, unsigned *max_w, char *err, size_t errlen)
{
    memset(inv, 0, sizeof *inv);
    snprintf(inv->backend, sizeof inv->backend, "mock");
    int i = 0;
    for (int k = 0; k < c->ngroups; k++)
        for (int n = 0; n < c->groups[k].count; n++, i++) {
            int rc = build_gpu(c, &c->groups[k], i, &inv->gpus[i], err, errlen);
            if (rc) return rc;
            if (max_w) max_w[i] = c->groups[k].m.max_w;
        }
    inv->n_gpus = i;
    int rc = build_nvlink(c, inv, err, errlen);
    if (rc) return rc;
    for (size_t f = 0; f < c->nfaults; f++)
        if (c->faults[f].gpu >= inv->n_gpus)
            return errf(err, errlen, "fault names GPU %d but there are %d", c->faults[f].gpu, inv->n_gpus);
    inv->n_numa = c->numa;
    for (int a = 0; a < c->numa; a++) {
        inv->numa_cpus[a] = c->cpus;
        for (int b = 0; b < c->numa; b++) inv->numa_distance[a][b] = a == b ? 10 : 20;
    }
    snprintf(inv->driver_version, sizeof inv->driver_version, "%s", c->driver);
    inv->cuda_version = c->cuda;
    snprintf(inv->hostname, sizeof inv->hostname, "%s", c->host);
    snprintf(inv->machine, sizeof inv->machine, "%s", c->machine);
    gs__inventory_defaults(inv);
    return 0;
}

int gs_mock_parse(const char *spec, struct gs_inventory *inv, struct gs_fault **faults, size_t *nfaults,
                  char *err, size_t errlen)
{
    struct mock_cfg *c = malloc(sizeof *c);
    if (!c) return GS_ENOMEM;
    cfg_init(c);
    int rc = spec_parse(c, spec, err, errlen);
    if (!rc) rc = build(c, inv, NULL, err, errlen);
    if (!rc) sort_by_time(c->faults, c->nfaults);
    if (!rc && faults) {
        *faults = c->faults, *nfaults = c->nfaults;
        c->faults = NULL;
    }
    free(c->faults);
    free(c);
    return rc;
}

/*--- Backend ---*/

struct mock {
    struct gs_inventory inv;
    unsigned max_w[GS_DISC_MAX_GPUS];
    struct gs_fault *faults;
    size_t nfaults, applied, delivered; /* faults[0..applied) happened; [0..delivered) were polled */
    int64_t t0;
    struct gs_clock real;
    bool simulated;
    pthread_mutex_t mu;
    int64_t lost_from[GS_DISC_MAX_GPUS], lost_until[GS_DISC_MAX_GPUS]; /* lost while from <= t < until */
    uint64_t dbe[GS_DISC_MAX_GPUS];
};

static int64_t mock_now(struct gs_disc *d)
{
    struct mock *m = d->impl;
    return gs_clock_now(d->clock ? d->clock : &m->real) - m->t0;
}

static void apply_one(struct mock *m, const struct gs_fault *f)
{
    for (int g = 0; g < m->inv.n_gpus; g++) {
        if (f->gpu >= 0 && f->gpu != g) continue;
        if (f->kind == GS_EV_ECC_DBE) m->dbe[g] += f->value;
        if (f->kind == GS_EV_LOST) {
            m->lost_from[g] = f->at_ns;
            m->lost_until[g] = f->for_ns ? f->at_ns + f->for_ns : INT64_MAX;
        }
    }
}

/* Applies every fault whose time has come. Caller holds m->mu. */
static void advance(struct mock *m, int64_t t)
{
    while (m->applied < m->nfaults && m->faults[m->applied].at_ns <= t) apply_one(m, &m->faults[m->applied++]);
}

static int mock_inventory(struct gs_disc *d, struct gs_inventory *inv)
{
    struct mock *m = d->impl;
    pthread_mutex_lock(&m->mu); /* the MIG manager may re-partition meanwhile */
    *inv = m->inv;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

static void fill_sample(const struct mock *m, int g, int64_t t, struct gs_sample *s)
{
    const struct gs_disc_gpu *gpu = &m->inv.gpus[g];
    uint64_t sec = (uint64_t)(t / GS_NS_PER_SEC);
    memset(s, 0, sizeof *s);
    s->have = GS_SF_UTIL | GS_SF_ENCDEC | GS_SF_MEMORY | GS_SF_TEMP | GS_SF_MEMTEMP | GS_SF_POWER | GS_SF_ENERGY |
              GS_SF_CLOCKS | GS_SF_ECC | GS_SF_PCIE_REPLAY | GS_SF_REMAP;
    s->util_gpu = (unsigned)((g * 17 + sec * 7) % 101);
    s->util_mem = s->util_gpu / 2;
    s->fb_reserved_mib = gpu->memory_mib / 128;
    s->fb_used_mib = (gpu->memory_mib - s->fb_reserved_mib) * s->util_gpu / 200;
    s->fb_free_mib = gpu->memory_mib - s->fb_reserved_mib - s->fb_used_mib;
    s->temp_c = 30 + s->util_gpu / 3;
    s->mem_temp_c = s->temp_c + 4;
    double idle = m->max_w[g] / 7.0;
    s->power_w = idle + (m->max_w[g] - idle) * s->util_gpu / 100.0;
    s->energy_mj = (uint64_t)((double)t / 1e6 * (idle + (m->max_w[g] - idle) * 0.5));
    s->sm_clock_mhz = s->util_gpu ? 1755 : 345;
    s->mem_clock_mhz = 2619;
    s->ecc_dbe_vol = s->ecc_dbe_agg = m->dbe[g];
    bool linked = false;
    for (int j = 0; j < m->inv.n_gpus; j++) linked |= gpu->nvlink[j] > 0;
    if (linked) {
        s->have |= GS_SF_NVLINK_BW;
        s->nvlink_bw_total = sec * 1000 * (uint64_t)(g + 1);
    }
}

static int mock_sample(struct gs_disc *d, int g, struct gs_sample *s)
{
    struct mock *m = d->impl;
    if (g < 0 || g >= m->inv.n_gpus) return GS_EINVAL;
    int64_t t = mock_now(d);
    pthread_mutex_lock(&m->mu);
    advance(m, t);
    int rc = 0;
    if (t >= m->lost_from[g] && t < m->lost_until[g]) {
        snprintf(d->err, sizeof d->err, "GPU %d is not answering (scripted)", g);
        rc = GS_EIO;
    } else {
        fill_sample(m, g, t, s);
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* Takes the next happened-but-unpolled fault as an event. Caller holds m->mu. */
static bool take_event(struct mock *m, struct gs_event *ev)
{
    if (m->delivered >= m->applied) return false;
    const struct gs_fault *f = &m->faults[m->delivered++];
    *ev = (struct gs_event){.kind = f->kind, .gpu = f->gpu, .value = f->value, .t_ns = f->at_ns};
    return true;
}

static int mock_poll_event(struct gs_disc *d, int timeout_ms, struct gs_event *ev)
{
    struct mock *m = d->impl;
    for (int round = 0; round < 2; round++) {
        int64_t t = mock_now(d);
        pthread_mutex_lock(&m->mu);
        advance(m, t);
        bool got = take_event(m, ev);
        int64_t next = m->applied < m->nfaults ? m->faults[m->applied].at_ns : INT64_MAX;
        pthread_mutex_unlock(&m->mu);
        if (got) return 0;
        /* A simulated clock only moves when the caller moves it: never sleep on it. */
        if (round || m->simulated || timeout_ms <= 0) break;
        int64_t wait = (int64_t)timeout_ms * GS_NS_PER_MS;
        if (next != INT64_MAX && next - t < wait) wait = next - t;
        struct timespec ts = {.tv_sec = wait / GS_NS_PER_SEC, .tv_nsec = wait % GS_NS_PER_SEC};
        nanosleep(&ts, NULL);
    }
    return GS_ETIMEDOUT;
}

static void mock_close(struct gs_disc *d)
{
    struct mock *m = d->impl;
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    free(m->faults);
    free(m);
}

static const struct gs_disc_ops mock_ops = {
    .name = "mock",
    .inventory = mock_inventory,
    .sample = mock_sample,
    .poll_event = mock_poll_event,
    .close = mock_close,
};

int gs_disc_mock_inject(struct gs_disc *d, const struct gs_fault *f)
{
    if (!d || d->ops != &mock_ops) return GS_EINVAL;
    struct mock *m = d->impl;
    if (f->gpu < -1 || f->gpu >= m->inv.n_gpus) return GS_EINVAL;
    pthread_mutex_lock(&m->mu);
    /* Insert after the applied prefix, keeping the not-yet-applied tail sorted. */
    int rc = fault_push(&m->faults, &m->nfaults, f);
    if (!rc) {
        size_t j = m->nfaults - 1;
        for (; j > m->applied && m->faults[j - 1].at_ns > f->at_ns; j--) m->faults[j] = m->faults[j - 1];
        m->faults[j] = *f;
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* MIG manager hook: re-partitions mock GPU gpu to layout ("" = MIG off),
 * as nvidia-smi mig would on a real one. Streaming multiprocessors come from
 * the model table by NVML name (108 when unknown). */
int gs_disc_mock_set_mig(struct gs_disc *d, int gpu, const char *layout, char *err, size_t errlen)
{
    if (!d || d->ops != &mock_ops) return GS_EINVAL;
    struct mock *m = d->impl;
    if (gpu < 0 || gpu >= m->inv.n_gpus) return errf(err, errlen, "no GPU %d", gpu);
    struct gs_disc_gpu g = m->inv.gpus[gpu];
    if (!g.mig_capable) return errf(err, errlen, "GPU %d (%s) is not MIG-capable", gpu, g.name);
    unsigned sms = 108;
    for (size_t i = 0; i < sizeof models / sizeof models[0]; i++)
        if (!strcmp(models[i].name, g.name)) sms = models[i].sms;
    memset(g.mig, 0, sizeof g.mig);
    g.n_mig = 0;
    g.mig_enabled = false;
    if (layout[0] && build_mig(&g, layout, sms, err, errlen)) return GS_EINVAL;
    if (layout[0]) g.mig_enabled = true;
    pthread_mutex_lock(&m->mu);
    m->inv.gpus[gpu] = g;
    pthread_mutex_unlock(&m->mu);
    return 0;
}

/* Reads a spec file when `spec` names one: YAML or JSON through core/codec.h. */
static int load_file(struct mock_cfg *c, const char *path, char *err, size_t errlen)
{
    char *buf;
    size_t len;
    if (gs_read_file(path, &buf, &len)) return errf(err, errlen, "cannot read %s", path);
    struct gs_docs docs = {0};
    struct gs_diags diags = {0};
    int rc = gs_decode_stream(buf, len, &docs, &diags, NULL);
    if (rc) errf(err, errlen, "%s: %s", path, diags.n ? diags.v[0].msg : gs_strerror(rc));
    else if (docs.n != 1) rc = errf(err, errlen, "%s: want exactly one document", path);
    else rc = doc_parse(c, docs.docs[0], err, errlen);
    gs_docs_free(&docs);
    gs_diags_free(&diags);
    free(buf);
    return rc ? GS_EINVAL : 0;
}

static bool is_file(const char *spec)
{
    struct stat st;
    return stat(spec, &st) == 0 && S_ISREG(st.st_mode);
}

int gs_disc_open_mock(struct gs_disc *d, const char *spec, const struct gs_clock *clock)
{
    memset(d, 0, sizeof *d);
    d->clock = clock;
    struct mock_cfg *c = malloc(sizeof *c);
    struct mock *m = calloc(1, sizeof *m);
    if (!c || !m) {
        free(c), free(m);
        return GS_ENOMEM;
    }
    cfg_init(c);
    int rc = is_file(spec) ? load_file(c, spec, d->err, sizeof d->err) : spec_parse(c, spec, d->err, sizeof d->err);
    if (!rc) rc = build(c, &m->inv, m->max_w, d->err, sizeof d->err);
    if (rc) {
        free(c->faults), free(c), free(m);
        return rc;
    }
    sort_by_time(c->faults, c->nfaults);
    m->faults = c->faults, m->nfaults = c->nfaults;
    free(c);
    gs_clock_init_real(&m->real);
    m->simulated = clock && clock->now != m->real.now;
    pthread_mutex_init(&m->mu, NULL);
    d->ops = &mock_ops;
    d->impl = m;
    m->t0 = mock_now(d);
    return 0;
}
