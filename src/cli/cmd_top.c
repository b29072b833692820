/*
 * cmd_top.c - `gpusched top nodes`: per node, how many GPUs the scheduler
 * has handed out (from the pods' gpusched.io/devices, shares counted in
 * thousandths) and how busy they are (the agent's DCGM-style metrics:
 * average GPU utilisation and framebuffer use). A node whose agent cannot
 * be reached shows "<unknown>" utilisation rather than failing the table.
 */
#include "agent/fetch.h"
#include "core/endpoint.h"
#include "cli/commands.h"
#include "control/cli_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] = "usage: gpusched top nodes\n\n"
                                 "GPU allocation (from the scheduler's choices) and utilisation (from each\n"
                                 "node agent's metrics) per node.\n\n";

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* Milli-GPUs allocated on node by unfinished pods. */
static long allocated_milli(const json_t *pods, const char *node, int *npods)
{
    long milli = 0;
    size_t i;
    json_t *p;
    *npods = 0;
    json_array_foreach(json_object_get(pods, "items"), i, p) {
        const char *nn = jstr(json_object_get(p, "spec"), "nodeName");
        const char *ph = jstr(json_object_get(p, "status"), "phase");
        if (!nn || strcmp(nn, node) || (ph && (!strcmp(ph, "Succeeded") || !strcmp(ph, "Failed")))) continue;
        (*npods)++;
        const char *dev = jstr(json_object_get(json_object_get(p, "metadata"), "annotations"), "gpusched.io/devices");
        if (!dev) continue;
        char buf[2048];
        snprintf(buf, sizeof buf, "%s", dev);
        for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            char *colon = strrchr(t, ':');
            milli += colon && strspn(colon + 1, "0123456789") == strlen(colon + 1) && colon[1] ? atol(colon + 1) : 1000;
        }
    }
    return milli;
}

/* Sum and count of one metric's samples in a Prometheus page. */
static void metric(const char *page, const char *name, double *sum, int *n)
{
    size_t nl = strlen(name);
    *sum = 0;
    *n = 0;
    for (const char *p = page; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, name, nl) || (p[nl] != '{' && p[nl] != ' ')) continue;
        const char *end = strchr(p, '\n');
        const char *sp = p + nl;
        if (*sp == '{') sp = strchr(sp, '}');
        if (!sp || (end && sp > end)) continue;
        *sum += atof(sp + 1);
        (*n)++;
    }
}

static void utilisation(const json_t *node, char *util, char *mem, char *mig, size_t len)
{
    char ep[512];
    snprintf(util, len, "<unknown>");
    snprintf(mem, len, "<unknown>");
    snprintf(mig, len, "-");
    gs_agent_endpoint(node, ep, sizeof ep);
    char *body = NULL, why[400];
    size_t bl;
    long code;
    if (ep[0] && gs_endpoint_check(ep, why, sizeof why)) { /* never follow file:// or a path someone wrote */
        snprintf(util, len, "<invalid endpoint>");
        return;
    }
    if (!ep[0] || gs_agent_get(ep, "/metrics", 3000, &body, &bl, &code) || code != 200) {
        free(body);
        return;
    }
    double su, used, fr;
    int nu, n1, n2;
    metric(body, "DCGM_FI_DEV_GPU_UTIL", &su, &nu);
    metric(body, "DCGM_FI_DEV_FB_USED", &used, &n1);
    metric(body, "DCGM_FI_DEV_FB_FREE", &fr, &n2);
    if (nu) snprintf(util, len, "%.0f%%", su / nu);
    if (n1 && n2 && used + fr > 0) snprintf(mem, len, "%.0f%%", 100 * used / (used + fr));
    double held; /* MIG instances held by pods / on the node (docs/DISCOVERY.md, "MIG instances") */
    int ninst;
    metric(body, "gpusched_mig_instance_allocated", &held, &ninst);
    if (ninst) snprintf(mig, len, "%.0f/%d", held, ninst);
    free(body);
}

static int top_nodes(struct gs_client *c)
{
    json_t *nodes = NULL, *pods = NULL;
    int err = gs_client_list(c, gs_api_resource_lookup("nodes"), NULL, NULL, NULL, false, &nodes);
    if (!err) err = gs_client_list(c, gs_api_resource_lookup("pods"), NULL, NULL, NULL, false, &pods);
    if (err) {
        gs_cli_report("top", err, pods ? pods : nodes);
        json_decref(nodes);
        json_decref(pods);
        return 1;
    }
    printf("%-20s %-9s %-5s %-9s %-7s %-9s %-9s %-5s %s\n", "NAME", "STATUS", "GPUS", "ALLOCATED", "ALLOC%",
           "GPU-UTIL", "GPU-MEM", "PODS", "MIG");
    size_t i;
    json_t *n;
    json_array_foreach(json_object_get(nodes, "items"), i, n) {
        const char *name = jstr(json_object_get(n, "metadata"), "name");
        size_t ngpu = json_array_size(json_object_get(json_object_get(n, "status"), "devices"));
        const char *status = "Unknown";
        size_t k;
        json_t *cond;
        json_array_foreach(json_object_get(json_object_get(n, "status"), "conditions"), k, cond)
            if (jstr(cond, "type") && !strcmp(jstr(cond, "type"), "Ready"))
                status = jstr(cond, "status") && !strcmp(jstr(cond, "status"), "True") ? "Ready" : "NotReady";
        int np;
        long milli = allocated_milli(pods, name ? name : "", &np);
        char alloc[32], pct[16], util[32], mem[32], mig[32];
        snprintf(alloc, sizeof alloc, milli % 1000 ? "%.1f" : "%.0f", milli / 1000.0);
        snprintf(pct, sizeof pct, "%.0f%%", ngpu ? milli / (10.0 * (double)ngpu) : 0.0);
        utilisation(n, util, mem, mig, sizeof util);
        printf("%-20s %-9s %-5zu %-9s %-7s %-9s %-9s %-5d %s\n", name ? name : "?", status, ngpu, alloc, pct, util, mem,
               np, mig);
    }
    json_decref(nodes);
    json_decref(pods);
    return 0;
}

int gs_cmd_top(int argc, char **argv)
{
    struct gs_cli cli;
    int rc = gs_cli_parse(argc, argv, usage_text, &cli);
    if (rc >= 0) return rc;
    if (cli.nargs != 1 || (strcmp(cli.args[0], "nodes") && strcmp(cli.args[0], "node") && strcmp(cli.args[0], "no"))) {
        fprintf(stderr, "%s%s", usage_text, gs_cli_common_help);
        gs_cli_free(&cli);
        return 2;
    }
    struct gs_client *c = gs_cli_connect(&cli, "top");
    rc = c ? top_nodes(c) : 1;
    gs_client_free(c);
    gs_cli_free(&cli);
    return rc;
}
