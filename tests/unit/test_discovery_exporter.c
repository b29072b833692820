/*
 * test_discovery_exporter.c - the DCGM-compatible exporter: the page is parsed
 * back (HELP/TYPE before series, label names and order, numeric values) and
 * checked against the mock's samples; faults reach the Xid metric and health;
 * the HTTP endpoint and the collector thread start and stop cleanly.
 */
#include "discovery/exporter.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <cmocka.h>

/*--- Parsing the Prometheus text back ---*/

#define MAXS 1024
#define MAXL 16

struct series {
    char name[64];
    int nlabels;
    char key[MAXL][40];
    char val[MAXL][200];
    double value;
};

struct page {
    int n;
    struct series s[MAXS];
    char types[64][2][64]; /* name, type */
    int ntypes;
};

static const char *type_of(const struct page *p, const char *name)
{
    for (int i = 0; i < p->ntypes; i++)
        if (!strcmp(p->types[i][0], name)) return p->types[i][1];
    return NULL;
}

static void parse_labels(const char **pp, struct series *s)
{
    const char *p = *pp;
    while (*p != '}') {
        assert_true(s->nlabels < MAXL);
        size_t k = strcspn(p, "=");
        assert_true(k > 0 && k < sizeof s->key[0]);
        memcpy(s->key[s->nlabels], p, k);
        s->key[s->nlabels][k] = 0;
        p += k;
        assert_int_equal(p[0], '=');
        assert_int_equal(p[1], '"');
        p += 2;
        size_t o = 0;
        for (; *p != '"'; p++) {
            assert_true(*p && *p != '\n');
            char c = *p;
            if (c == '\\') {
                p++;
                assert_true(*p == '\\' || *p == '"' || *p == 'n');
                c = *p == 'n' ? '\n' : *p;
            }
            assert_true(o + 1 < sizeof s->val[0]);
            s->val[s->nlabels][o++] = c;
        }
        s->val[s->nlabels][o] = 0;
        s->nlabels++;
        p++;
        if (*p == ',') p++;
    }
    *pp = p + 1;
}

static void parse_page(const char *text, struct page *pg)
{
    memset(pg, 0, sizeof *pg);
    char help_for[64] = "";
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        assert_non_null(end); /* every line ends in \n */
        char name[64], type[64];
        if (!strncmp(line, "# HELP ", 7)) {
            assert_int_equal(sscanf(line + 7, "%63s", help_for), 1);
        } else if (!strncmp(line, "# TYPE ", 7)) {
            assert_int_equal(sscanf(line + 7, "%63s %63s", name, type), 2);
            assert_string_equal(name, help_for); /* HELP then TYPE, same metric */
            assert_true(!strcmp(type, "gauge") || !strcmp(type, "counter"));
            assert_null(type_of(pg, name)); /* each metric once */
            snprintf(pg->types[pg->ntypes][0], 64, "%s", name);
            snprintf(pg->types[pg->ntypes][1], 64, "%s", type);
            pg->ntypes++;
        } else {
            assert_true(pg->n < MAXS);
            struct series *s = &pg->s[pg->n++];
            size_t k = strcspn(line, "{ ");
            memcpy(s->name, line, k);
            s->name[k] = 0;
            assert_non_null(type_of(pg, s->name));
            const char *p = line + k;
            if (*p == '{') {
                p++;
                parse_labels(&p, s);
            }
            assert_int_equal(*p, ' ');
            char *vend;
            s->value = strtod(p + 1, &vend);
            assert_ptr_equal(vend, end);
        }
        line = end + 1;
    }
}

static const char *label(const struct series *s, const char *key)
{
    for (int i = 0; i < s->nlabels; i++)
        if (!strcmp(s->key[i], key)) return s->val[i];
    return NULL;
}

static const struct series *find(const struct page *p, const char *name, int gpu)
{
    char g[16];
    snprintf(g, sizeof g, "%d", gpu);
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->s[i].name, name) && label(&p->s[i], "gpu") && !strcmp(label(&p->s[i], "gpu"), g)) return &p->s[i];
    return NULL;
}

static int count(const struct page *p, const char *name)
{
    int n = 0;
    for (int i = 0; i < p->n; i++) n += !strcmp(p->s[i].name, name);
    return n;
}

static void snapshot(struct gs_exporter *e, struct page *pg)
{
    struct gs_metrics_text *t = gs_exporter_text(e);
    assert_non_null(t);
    assert_int_equal(strlen(t->data), t->len);
    parse_page(t->data, pg);
    gs_metrics_text_unref(t);
}

/*--- Fixture ---*/

struct fx {
    struct gs_clock clock;
    struct gs_disc d;
    struct gs_exporter *e;
    struct page pg;
};

static struct fx *open_fx(const char *spec, const struct gs_exporter_config *cfg)
{
    struct fx *f = calloc(1, sizeof *f);
    assert_non_null(f);
    gs_clock_init_sim(&f->clock, 0);
    assert_int_equal(gs_disc_open_mock(&f->d, spec, &f->clock), 0);
    assert_int_equal(gs_exporter_create(&f->d, cfg, &f->e), 0);
    return f;
}

static void close_fx(struct fx *f)
{
    gs_exporter_free(f->e);
    gs_disc_close(&f->d);
    free(f);
}

/*--- Tests ---*/

static void test_page_matches_samples(void **state)
{
    (void)state;
    struct fx *f = open_fx("8xH100-80GB,host=node1", NULL);
    assert_null(gs_exporter_text(f->e));
    gs_clock_advance(&f->clock, 7 * GS_NS_PER_SEC);
    assert_int_equal(gs_exporter_collect(f->e), 0);
    snapshot(f->e, &f->pg);
    static const char *names[] = {
        "DCGM_FI_DEV_SM_CLOCK", "DCGM_FI_DEV_MEM_CLOCK", "DCGM_FI_DEV_MEMORY_TEMP", "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_MEM_COPY_UTIL", "DCGM_FI_DEV_ENC_UTIL", "DCGM_FI_DEV_DEC_UTIL",
        "DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE", "gpusched_gpu_healthy",
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) assert_int_equal(count(&f->pg, names[i]), 8);
    assert_string_equal(type_of(&f->pg, "DCGM_FI_DEV_GPU_UTIL"), "gauge");
    assert_string_equal(type_of(&f->pg, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"), "counter");
    assert_string_equal(type_of(&f->pg, "DCGM_FI_DEV_XID_ERRORS"), "gauge");
    assert_int_equal(count(&f->pg, "gpusched_exporter_collections_total"), 1);
    static const char *order[] = {"gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"};
    struct gs_inventory inv;
    gs_disc_inventory(&f->d, &inv);
    for (int g = 0; g < 8; g++) {
        const struct series *s = find(&f->pg, "DCGM_FI_DEV_GPU_UTIL", g);
        assert_non_null(s);
        assert_int_equal(s->nlabels, 7);
        for (int k = 0; k < 7; k++) assert_string_equal(s->key[k], order[k]);
        assert_string_equal(label(s, "UUID"), inv.gpus[g].uuid);
        assert_string_equal(label(s, "pci_bus_id"), inv.gpus[g].pci_bus_id);
        assert_string_equal(label(s, "modelName"), "NVIDIA H100 80GB HBM3");
        assert_string_equal(label(s, "Hostname"), "node1");
        assert_string_equal(label(s, "DCGM_FI_DRIVER_VERSION"), "550.54.15");
        char dev[16];
        snprintf(dev, sizeof dev, "nvidia%d", g);
        assert_string_equal(label(s, "device"), dev);
        struct gs_sample smp;
        assert_int_equal(f->d.ops->sample(&f->d, g, &smp), 0); /* same time, same values */
        assert_int_equal((unsigned)s->value, smp.util_gpu);
        double used = find(&f->pg, "DCGM_FI_DEV_FB_USED", g)->value, free_ = find(&f->pg, "DCGM_FI_DEV_FB_FREE", g)->value,
               res = find(&f->pg, "DCGM_FI_DEV_FB_RESERVED", g)->value;
        assert_int_equal((uint64_t)(used + free_ + res), inv.gpus[g].memory_mib);
        double w = find(&f->pg, "DCGM_FI_DEV_POWER_USAGE", g)->value;
        assert_true(w > smp.power_w - 0.001 && w < smp.power_w + 0.001);
        const struct series *x = find(&f->pg, "DCGM_FI_DEV_XID_ERRORS", g);
        assert_string_equal(label(x, "err_code"), "0");
        assert_int_equal(x->value, 0);
        assert_int_equal(find(&f->pg, "gpusched_gpu_healthy", g)->value, 1);
    }
    close_fx(f);
}

static void test_xid_reaches_metric_and_health(void **state)
{
    (void)state;
    struct fx *f = open_fx("4xA100-40GB,xid=79@gpu3@t=5s,xid=13@gpu1@t=5s", NULL);
    assert_int_equal(gs_exporter_collect(f->e), 0);
    snapshot(f->e, &f->pg);
    assert_int_equal(find(&f->pg, "gpusched_gpu_healthy", 3)->value, 1);
    gs_clock_advance(&f->clock, 5 * GS_NS_PER_SEC);
    assert_int_equal(gs_exporter_collect(f->e), 0);
    snapshot(f->e, &f->pg);
    const struct series *x = find(&f->pg, "DCGM_FI_DEV_XID_ERRORS", 3);
    assert_int_equal(x->value, 79);
    assert_string_equal(label(x, "err_code"), "79");
    assert_string_equal(label(x, "err_msg"), "GPU has fallen off the bus");
    assert_int_equal(find(&f->pg, "gpusched_gpu_healthy", 3)->value, 0);
    /* Xid 13 is an application error: shown, but the GPU stays healthy */
    assert_int_equal(find(&f->pg, "DCGM_FI_DEV_XID_ERRORS", 1)->value, 13);
    assert_int_equal(find(&f->pg, "gpusched_gpu_healthy", 1)->value, 1);
    struct gs_health_gpu h;
    gs_health_get(gs_exporter_health(f->e), 3, &h);
    assert_string_equal(h.reason, "Xid 79: GPU has fallen off the bus");
    close_fx(f);
}

static void test_lost_gpu_and_recovery(void **state)
{
    (void)state;
    struct gs_health_config hc;
    gs_health_config_default(&hc);
    hc.recovery_ns = 3 * GS_NS_PER_SEC;
    struct gs_exporter_config cfg = {.health = &hc};
    struct fx *f = open_fx("2xT4,lost@gpu1@t=1s@for=2s", &cfg);
    gs_clock_advance(&f->clock, GS_NS_PER_SEC);
    assert_int_equal(gs_exporter_collect(f->e), 0);
    snapshot(f->e, &f->pg);
    assert_int_equal(count(&f->pg, "DCGM_FI_DEV_GPU_UTIL"), 1); /* no stale values for a silent GPU */
    assert_null(find(&f->pg, "DCGM_FI_DEV_GPU_UTIL", 1));
    assert_int_equal(find(&f->pg, "gpusched_gpu_healthy", 1)->value, 0);
    int k;
    for (k = 0; k < f->pg.n && strcmp(f->pg.s[k].name, "gpusched_exporter_sample_errors_total"); k++) {}
    assert_int_equal(f->pg.s[k].value, 1);
    gs_clock_advance(&f->clock, 2 * GS_NS_PER_SEC); /* answering again at t=3s, window from t=1s */
    gs_exporter_collect(f->e);
    snapshot(f->e, &f->pg);
    assert_int_equal(count(&f->pg, "DCGM_FI_DEV_GPU_UTIL"), 2);
    assert_int_equal(find(&f->pg, "gpusched_gpu_healthy", 1)->value, 0); /* lost again at 1s..3s: window not over */
    gs_clock_advance(&f->clock, 2 * GS_NS_PER_SEC);
    gs_exporter_collect(f->e);
    snapshot(f->e, &f->pg);
    assert_int_equal(find(&f->pg, "gpusched_gpu_healthy", 1)->value, 1);
    close_fx(f);
}

static void test_pod_labels_escaping_and_bounds(void **state)
{
    (void)state;
    char longhost[300];
    memset(longhost, 'h', sizeof longhost - 1);
    longhost[sizeof longhost - 1] = 0;
    struct gs_exporter_config cfg = {.hostname = longhost};
    struct fx *f = open_fx("2xT4", &cfg);
    assert_int_equal(gs_exporter_set_pod(f->e, 1, "team-a", "tr\"ain\\er\n", "main"), 0);
    assert_int_equal(gs_exporter_set_pod(f->e, 2, "x", "y", "z"), GS_EINVAL);
    gs_exporter_collect(f->e);
    snapshot(f->e, &f->pg);
    const struct series *s = find(&f->pg, "DCGM_FI_DEV_GPU_UTIL", 1);
    assert_int_equal(s->nlabels, 10);
    assert_string_equal(s->key[7], "pod");
    assert_string_equal(label(s, "pod"), "tr\"ain\\er\n");
    assert_string_equal(label(s, "namespace"), "team-a");
    assert_string_equal(label(s, "container"), "main");
    assert_int_equal(strlen(label(s, "Hostname")), 128); /* values are bounded */
    assert_null(label(find(&f->pg, "DCGM_FI_DEV_GPU_UTIL", 0), "pod"));
    const struct series *x = find(&f->pg, "DCGM_FI_DEV_XID_ERRORS", 1);
    assert_string_equal(x->key[8], "err_msg");
    assert_string_equal(x->key[9], "pod");
    assert_int_equal(gs_exporter_set_pod(f->e, 1, NULL, NULL, NULL), 0);
    gs_exporter_collect(f->e);
    snapshot(f->e, &f->pg);
    assert_null(label(find(&f->pg, "DCGM_FI_DEV_GPU_UTIL", 1), "pod"));
    close_fx(f);
    cfg = (struct gs_exporter_config){.no_hostname = true};
    f = open_fx("1xT4", &cfg);
    gs_exporter_collect(f->e);
    snapshot(f->e, &f->pg);
    assert_null(label(find(&f->pg, "DCGM_FI_DEV_GPU_UTIL", 0), "Hostname"));
    close_fx(f);
}

/* The series of MIG instance uuid of metric name, or NULL. */
static const struct series *find_mig(const struct page *p, const char *name, const char *uuid)
{
    for (int i = 0; i < p->n; i++)
        if (!strcmp(p->s[i].name, name) && label(&p->s[i], "mig_uuid") && !strcmp(label(&p->s[i], "mig_uuid"), uuid))
            return &p->s[i];
    return NULL;
}

static void test_mig_instances_and_pods(void **state)
{
    (void)state;
    struct fx *f = open_fx("2xA100-80GB,mig=1g.10gb*2+2g.20gb", NULL);
    static struct gs_inventory inv;
    assert_int_equal(gs_disc_inventory(&f->d, &inv), 0);
    const struct gs_disc_mig *m1 = &inv.gpus[1].mig[1]; /* GPU 1's second 1g.10gb */
    assert_int_equal(gs_exporter_set_mig_pod(f->e, m1->uuid, "team-a", "train", "main"), 0);
    assert_int_equal(gs_exporter_set_mig_pod(f->e, "", "x", "y", "z"), GS_EINVAL);
    gs_exporter_collect(f->e);
    snapshot(f->e, &f->pg);
    assert_int_equal(count(&f->pg, "gpusched_mig_instance_allocated"), 6);
    assert_int_equal(count(&f->pg, "gpusched_mig_instance_fb_total"), 6);
    assert_string_equal(type_of(&f->pg, "gpusched_mig_instance_allocated"), "gauge");
    const struct series *s = find_mig(&f->pg, "gpusched_mig_instance_allocated", m1->uuid);
    assert_non_null(s);
    assert_true(s->value == 1);
    /* The parent GPU's labels first, then dcgm-exporter's MIG labels, then the pod. */
    assert_string_equal(s->key[0], "gpu");
    assert_string_equal(label(s, "gpu"), "1");
    assert_string_equal(label(s, "UUID"), inv.gpus[1].uuid);
    assert_string_equal(label(s, "GPU_I_PROFILE"), "1g.10gb");
    char gi[16];
    snprintf(gi, sizeof gi, "%u", m1->gi_id);
    assert_string_equal(label(s, "GPU_I_ID"), gi);
    assert_string_equal(label(s, "pod"), "train");
    assert_string_equal(label(s, "namespace"), "team-a");
    assert_string_equal(label(s, "container"), "main");
    assert_string_equal(s->key[s->nlabels - 3], "pod");
    const struct series *fb = find_mig(&f->pg, "gpusched_mig_instance_fb_total", m1->uuid);
    assert_true(fb->value == (double)m1->memory_mib);
    assert_string_equal(label(fb, "pod"), "train");
    /* Every other instance is free, without pod labels. */
    const struct gs_disc_mig *free0 = &inv.gpus[0].mig[2];
    s = find_mig(&f->pg, "gpusched_mig_instance_allocated", free0->uuid);
    assert_true(s->value == 0);
    assert_null(label(s, "pod"));
    assert_string_equal(label(s, "GPU_I_PROFILE"), "2g.20gb");
    /* Whole-GPU series are not attributed to the MIG pod. */
    assert_null(label(find(&f->pg, "DCGM_FI_DEV_GPU_UTIL", 1), "pod"));
    /* Cleared: free again. */
    assert_int_equal(gs_exporter_set_mig_pod(f->e, m1->uuid, NULL, NULL, NULL), 0);
    assert_int_equal(gs_exporter_set_mig_pod(f->e, m1->uuid, NULL, NULL, NULL), 0); /* idempotent */
    gs_exporter_collect(f->e);
    snapshot(f->e, &f->pg);
    s = find_mig(&f->pg, "gpusched_mig_instance_allocated", m1->uuid);
    assert_true(s->value == 0);
    assert_null(label(s, "pod"));
    /* A new layout replaces the instances; MIG off on both GPUs: no MIG series or headers. */
    inv.gpus[0].mig_enabled = inv.gpus[1].mig_enabled = false;
    gs_exporter_set_mig(f->e, &inv);
    gs_exporter_collect(f->e);
    snapshot(f->e, &f->pg);
    assert_int_equal(count(&f->pg, "gpusched_mig_instance_allocated"), 0);
    assert_null(type_of(&f->pg, "gpusched_mig_instance_allocated"));
    close_fx(f);
}

/*--- HTTP ---*/

/* GET/POST path over loopback; returns the status code, body in buf. */
static int http(int port, const char *method, const char *path, char *buf, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char req[256];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.0\r\nHost: x\r\n\r\n", method, path);
    assert_int_equal(write(fd, req, (size_t)n), n);
    size_t got = 0;
    for (ssize_t r; got + 1 < len && (r = read(fd, buf + got, len - 1 - got)) > 0;) got += (size_t)r;
    buf[got] = 0;
    close(fd);
    int status = 0;
    assert_int_equal(sscanf(buf, "HTTP/1.%*d %d", &status), 1);
    char *body = strstr(buf, "\r\n\r\n");
    assert_non_null(body);
    memmove(buf, body + 4, strlen(body + 4) + 1);
    return status;
}

static void test_http_endpoint(void **state)
{
    (void)state;
    static char buf[1 << 17];
    struct fx *f = open_fx("8xH100-80GB", NULL);
    struct gs_http *h;
    char err[200];
    assert_int_equal(gs_http_start("127.0.0.1:0", f->e, &h, err, sizeof err), 0);
    int port = gs_http_port(h);
    assert_true(port > 0);
    assert_int_equal(http(port, "GET", "/metrics", buf, sizeof buf), 503);
    assert_int_equal(http(port, "GET", "/healthz", buf, sizeof buf), 503);
    gs_exporter_collect(f->e);
    assert_int_equal(http(port, "GET", "/metrics", buf, sizeof buf), 200);
    struct gs_metrics_text *t = gs_exporter_text(f->e);
    assert_string_equal(buf, t->data);
    gs_metrics_text_unref(t);
    parse_page(buf, &f->pg);
    assert_int_equal(count(&f->pg, "DCGM_FI_DEV_GPU_UTIL"), 8);
    assert_int_equal(http(port, "GET", "/healthz", buf, sizeof buf), 200);
    assert_string_equal(buf, "ok\n");
    assert_int_equal(http(port, "GET", "/health", buf, sizeof buf), 200);
    assert_int_equal(http(port, "GET", "/nope", buf, sizeof buf), 404);
    assert_int_equal(http(port, "POST", "/metrics", buf, sizeof buf), 405);
    gs_clock_advance(&f->clock, 100 * GS_NS_PER_SEC); /* 3+ intervals without a collection */
    assert_int_equal(http(port, "GET", "/healthz", buf, sizeof buf), 503);
    gs_http_stop(h);
    gs_http_stop(NULL);
    const char *bad[] = {"nonsense", "127.0.0.1:", "[::1:9400", "300.1.1.1:80", "127.0.0.1:http"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        assert_int_equal(gs_http_start(bad[i], f->e, &h, err, sizeof err), GS_EINVAL);
        assert_true(strlen(err) > 0);
    }
    /* a port already in use */
    struct gs_http *h2;
    assert_int_equal(gs_http_start("127.0.0.1:0", f->e, &h, err, sizeof err), 0);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", gs_http_port(h));
    assert_int_equal(gs_http_start(addr, f->e, &h2, err, sizeof err), GS_EIO);
    gs_http_stop(h);
    close_fx(f);
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void test_thread_and_events(void **state)
{
    (void)state;
    struct gs_disc d;
    struct gs_exporter *e;
    struct gs_exporter_config cfg = {.interval_ns = 60 * GS_NS_PER_SEC}; /* only the first collection */
    assert_int_equal(gs_disc_open_mock(&d, "2xT4,xid=48@gpu0@t=300ms", NULL), 0);
    assert_int_equal(gs_exporter_create(&d, &cfg, &e), 0);
    assert_int_equal(gs_exporter_start(e), 0);
    assert_int_equal(gs_exporter_start(e), GS_ESTATE);
    bool seen = false;
    for (int i = 0; i < 100 && !seen; i++) {
        sleep_ms(20);
        struct gs_metrics_text *t = gs_exporter_text(e);
        seen = t && strstr(t->data, "err_code=\"48\"");
        gs_metrics_text_unref(t);
    }
    assert_true(seen); /* the event re-rendered the page before the next collection */
    assert_int_equal(gs_exporter_collections(e, NULL), 1);
    assert_true(gs_exporter_fresh(e));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    gs_exporter_stop(e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_true((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 1000);
    gs_exporter_stop(e);
    assert_int_equal(gs_exporter_start(e), 0); /* restartable */
    gs_exporter_free(e);
    gs_disc_close(&d);
}

static void test_fast_interval(void **state)
{
    (void)state;
    struct gs_disc d;
    struct gs_exporter *e;
    struct gs_exporter_config cfg = {.interval_ns = 20 * GS_NS_PER_MS};
    assert_int_equal(gs_disc_open_mock(&d, "4xA100-40GB", NULL), 0);
    assert_int_equal(gs_exporter_create(&d, &cfg, &e), 0);
    assert_int_equal(gs_exporter_start(e), 0);
    for (int i = 0; i < 200 && gs_exporter_collections(e, NULL) < 5; i++) sleep_ms(10);
    assert_true(gs_exporter_collections(e, NULL) >= 5);
    gs_exporter_free(e); /* stops the running thread */
    gs_disc_close(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_page_matches_samples),
        cmocka_unit_test(test_xid_reaches_metric_and_health),
        cmocka_unit_test(test_lost_gpu_and_recovery),
        cmocka_unit_test(test_pod_labels_escaping_and_bounds),
        cmocka_unit_test(test_mig_instances_and_pods),
        cmocka_unit_test(test_http_endpoint),
        cmocka_unit_test(test_thread_and_events),
        cmocka_unit_test(test_fast_interval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
