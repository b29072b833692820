/*
 * cmd_logs.c - `gpusched logs POD [-c CONTAINER] [--tail N] [-f]`: a pod's
 * log through the API server's pods/log subresource, which proxies to the
 * agent of the pod's node (src/control/api_logs.c), the path `kubectl logs`
 * takes too. With --follow the answer is a stream printed as it arrives; it
 * ends when the container stops running.
 */
#include "cli/commands.h"
#include "control/cli_common.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage_text[] =
    "usage: gpusched logs POD [-n NS] [-c CONTAINER] [--tail N] [--limit-bytes N] [-f]\n\n"
    "Prints the pod's log (stdout and stderr of its container), which the API server\n"
    "fetches from the agent of the pod's node.\n"
    "  -c, --container NAME  container (required when the pod has several)\n"
    "  --tail N              the last N lines (-1, the default: all)\n"
    "  --limit-bytes N       at most N bytes\n"
    "  -f, --follow          keep printing new lines until the container stops\n\n";

struct lopts {
    const char *container;
    long long tail;  /* -1: all */
    long long limit; /* 0: none */
    bool follow;
};

static int number(const char *flag, const char *v, long long min, long long *out)
{
    char *end = NULL;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || n < min) {
        fprintf(stderr, "logs: %s \"%s\": must be an integer >= %lld\n", flag, v, min);
        return 2;
    }
    *out = n;
    return 0;
}

/* Takes our own flags out of argv; the rest goes to gs_cli_parse. 0 or 2. */
static int own_flags(int *argc, char **argv, struct lopts *o)
{
    int w = 0, rc = 0;
    for (int i = 0; i < *argc && !rc; i++) {
        const char *a = argv[i];
        bool has_next = i + 1 < *argc;
        if ((!strcmp(a, "-c") || !strcmp(a, "--container")) && has_next) o->container = argv[++i];
        else if (!strncmp(a, "--container=", 12)) o->container = a + 12;
        else if (!strcmp(a, "--tail") && has_next) rc = number("--tail", argv[++i], -1, &o->tail);
        else if (!strncmp(a, "--tail=", 7)) rc = number("--tail", a + 7, -1, &o->tail);
        else if (!strcmp(a, "--limit-bytes") && has_next) rc = number("--limit-bytes", argv[++i], 1, &o->limit);
        else if (!strncmp(a, "--limit-bytes=", 14)) rc = number("--limit-bytes", a + 14, 1, &o->limit);
        else if (!strcmp(a, "--follow") || !strcmp(a, "-f") || !strcmp(a, "--follow=true")) o->follow = true;
        else argv[w++] = argv[i];
    }
    *argc = w;
    return rc;
}

static int print_chunk(const char *data, size_t n, void *arg)
{
    (void)arg;
    if (fwrite(data, 1, n, stdout) != n) return GS_EIO;
    fflush(stdout); /* a follower reads each line as it comes */
    return 0;
}

static int fetch(struct gs_client *c, const char *ns, const char *name, const struct lopts *o)
{
    char *e_ns = curl_easy_escape(NULL, ns, 0), *e_name = curl_easy_escape(NULL, name, 0),
         *e_c = o->container ? curl_easy_escape(NULL, o->container, 0) : NULL;
    char path[2048];
    int n = snprintf(path, sizeof path, "/api/v1/namespaces/%s/pods/%s/log?follow=%s", e_ns ? e_ns : "",
                     e_name ? e_name : "", o->follow ? "true" : "false");
    if (e_c) n += snprintf(path + n, sizeof path - (size_t)n, "&container=%s", e_c);
    if (o->tail >= 0) n += snprintf(path + n, sizeof path - (size_t)n, "&tailLines=%lld", o->tail);
    if (o->limit > 0) snprintf(path + n, sizeof path - (size_t)n, "&limitBytes=%lld", o->limit);
    curl_free(e_ns);
    curl_free(e_name);
    curl_free(e_c);
    json_t *status = NULL;
    int err = gs_client_stream(c, path, print_chunk, NULL, &status);
    if (err) gs_cli_report("logs", err, status);
    json_decref(status);
    return err ? 1 : 0;
}

int gs_cmd_logs(int argc, char **argv)
{
    struct lopts lo = {.tail = -1};
    int rc = own_flags(&argc, argv, &lo);
    if (rc) return rc;
    struct gs_cli cli;
    rc = gs_cli_parse(argc, argv, usage_text, &cli);
    if (rc >= 0) return rc;
    if (cli.nargs != 1) {
        fprintf(stderr, "%s%s", usage_text, gs_cli_common_help);
        gs_cli_free(&cli);
        return 2;
    }
    struct gs_client *c = gs_cli_connect(&cli, "logs");
    rc = c ? fetch(c, cli.ns ? cli.ns : "default", cli.args[0], &lo) : 1;
    gs_client_free(c);
    gs_cli_free(&cli);
    return rc;
}
