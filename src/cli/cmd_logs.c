/*
 * cmd_logs.c - `gpusched logs POD [-c CONTAINER] [--tail N] [--follow]`:
 * a pod's log, fetched from the agent of the node it runs on (the server
 * names the node and the node names its agent's endpoint).
 */
#include "agent/fetch.h"
#include "cli/commands.h"
#include "control/cli_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: gpusched logs POD [-n NS] [-c CONTAINER] [--tail N] [--follow]\n\n"
    "Prints the pod's log (stdout and stderr of its container) from its node's agent.\n"
    "  -c, --container NAME  container (default the first)\n"
    "  --tail N              the last N lines\n"
    "  --follow              keep printing until the pod finishes\n\n";

struct lopts {
    const char *container;
    long tail;
    bool follow;
};

/* Takes our own flags out of argv; the rest goes to gs_cli_parse. */
static int own_flags(int *argc, char **argv, struct lopts *o)
{
    int w = 0;
    for (int i = 0; i < *argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "-c") || !strcmp(a, "--container") || !strcmp(a, "--tail")) && i + 1 < *argc) {
            if (a[2] == 't') o->tail = atol(argv[++i]);
            else o->container = argv[++i];
        } else if (!strncmp(a, "--tail=", 7)) o->tail = atol(a + 7);
        else if (!strncmp(a, "--container=", 12)) o->container = a + 12;
        else if (!strcmp(a, "--follow") || !strcmp(a, "-F")) o->follow = true;
        else argv[w++] = argv[i];
    }
    *argc = w;
    return 0;
}

static const char *phase_of(const json_t *pod)
{
    const char *p = json_string_value(json_object_get(json_object_get(pod, "status"), "phase"));
    return p ? p : "";
}

static int fetch_log(struct gs_client *c, const char *ns, const char *name, const struct lopts *o, size_t skip,
                     size_t *printed, bool *done)
{
    json_t *pod = NULL, *node = NULL;
    int err = gs_client_get(c, gs_api_resource_lookup("pods"), ns, name, &pod);
    if (err) {
        gs_cli_report("logs", err, pod);
        json_decref(pod);
        return 1;
    }
    const char *nn = json_string_value(json_object_get(json_object_get(pod, "spec"), "nodeName"));
    *done = !strcmp(phase_of(pod), "Succeeded") || !strcmp(phase_of(pod), "Failed");
    if (!nn) {
        fprintf(stderr, "logs: pod %s is not scheduled yet (%s)\n", name, phase_of(pod));
        json_decref(pod);
        return 1;
    }
    err = gs_client_get(c, gs_api_resource_lookup("nodes"), NULL, nn, &node);
    char ep[512] = "", path[1024];
    if (!err) gs_agent_endpoint(node, ep, sizeof ep);
    json_decref(node);
    json_decref(pod);
    if (!ep[0]) {
        fprintf(stderr, "logs: node %s has no agent endpoint\n", nn);
        return 1;
    }
    snprintf(path, sizeof path, "/logs/%s/%s?tail=%ld%s%s", ns, name, o->follow ? 0 : o->tail,
             o->container ? "&container=" : "", o->container ? o->container : "");
    char *body = NULL;
    size_t len = 0;
    long code = 0;
    if (gs_agent_get(ep, path, 0, &body, &len, &code)) {
        fprintf(stderr, "logs: cannot reach the agent of node %s at %s\n", nn, ep);
        return 1;
    }
    int rc = 0;
    if (code != 200) {
        fprintf(stderr, "logs: %s", body);
        rc = 1;
    } else if (len > skip) {
        fwrite(body + skip, 1, len - skip, stdout);
        fflush(stdout);
    }
    *printed = len > skip ? len : skip;
    free(body);
    return rc;
}

int gs_cmd_logs(int argc, char **argv)
{
    struct lopts lo = {0};
    own_flags(&argc, argv, &lo);
    struct gs_cli cli;
    int rc = gs_cli_parse(argc, argv, usage_text, &cli);
    if (rc >= 0) return rc;
    if (cli.nargs != 1) {
        fprintf(stderr, "%s%s", usage_text, gs_cli_common_help);
        gs_cli_free(&cli);
        return 2;
    }
    struct gs_client *c = gs_cli_connect(&cli, "logs");
    const char *ns = cli.ns ? cli.ns : "default";
    size_t printed = 0;
    bool done = false;
    rc = c ? fetch_log(c, ns, cli.args[0], &lo, 0, &printed, &done) : 1;
    while (!rc && lo.follow && !done) {
        usleep(500000);
        rc = fetch_log(c, ns, cli.args[0], &lo, printed, &printed, &done);
    }
    gs_client_free(c);
    gs_cli_free(&cli);
    return rc;
}
