/*
 * cmd_delete.c - `gpusched delete KIND NAME...` or `delete -f FILE`.
 *
 * Like kubectl delete: a pod running on a node is deleted gracefully (the
 * server marks it Terminating, its agent stops the processes and then
 * removes it), and the command waits until each object is really gone
 * (--wait=false returns at once). --grace-period=N overrides the pod's
 * terminationGracePeriodSeconds; 0 removes the object at once, without
 * waiting for the node to confirm that its processes stopped.
 */
#include "cli/commands.h"
#include "control/cli_common.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: gpusched delete KIND NAME... [-n NS] | delete -f FILE|DIR|-\n"
    "  --wait[=true|false]   wait until the objects are gone (default true)\n"
    "  --grace-period=N      seconds a pod's processes get after SIGTERM (default: the pod's\n"
    "                        terminationGracePeriodSeconds, else 30); 0 removes it at once\n"
    "  --force               with --grace-period=0: do not wait for the node to confirm\n"
    "  --timeout=SECONDS     give up waiting after this long (default: the grace period + 60)\n\n";

/* An object deleted but not gone yet (Terminating, or held by finalizers). */
struct pending {
    const struct gs_api_resource *r;
    char ns[256], name[256], uid[128];
    double grace;
};

struct dopts {
    bool wait;
    long long grace;   /* -1: the server's default */
    double timeout_s;  /* 0: grace + 60 s */
    struct pending *pend; /* waited for once every object was deleted, as kubectl does */
    size_t npend;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Polls until the object (with this uid) is gone. 0, or 1 on timeout. */
static int wait_gone(struct gs_client *cl, const struct gs_api_resource *r, const char *ns, const char *name,
                     const char *uid, double timeout_s)
{
    double until = now_s() + timeout_s;
    for (;;) {
        json_t *cur = NULL;
        int err = gs_client_get(cl, r, ns, name, &cur);
        const char *u = json_string_value(json_object_get(json_object_get(cur, "metadata"), "uid"));
        bool gone = err == GS_ENOENT || (!err && uid && u && strcmp(u, uid));
        json_decref(cur);
        if (gone) return 0;
        if (now_s() > until) {
            fprintf(stderr, "delete: timed out waiting for %s \"%s\" to be deleted\n", r->singular, name);
            return 1;
        }
        usleep(200000);
    }
}

static int delete_one(struct gs_client *cl, const struct gs_api_resource *r, const char *ns, const char *name,
                      struct dopts *o)
{
    char path[1024];
    if (gs_api_path(r, r->namespaced ? ns : NULL, name, path, sizeof path - 40) < 0) {
        fprintf(stderr, "delete: name too long: %s\n", name);
        return 1;
    }
    json_t *body = json_pack("{s:s,s:s,s:s}", "kind", "DeleteOptions", "apiVersion", "v1", "propagationPolicy",
                             "Background");
    if (o->grace >= 0) {
        json_object_set_new(body, "gracePeriodSeconds", json_integer(o->grace));
        snprintf(path + strlen(path), 40, "?gracePeriodSeconds=%lld", o->grace);
    }
    json_t *out = NULL;
    int err = gs_client_call(cl, "DELETE", path, "application/json", body, NULL, &out, NULL);
    json_decref(body);
    if (err) {
        gs_cli_report("delete", err, out);
        json_decref(out);
        return 1;
    }
    printf("%s \"%s\" %sdeleted\n", r->singular, name, o->grace == 0 ? "force " : "");
    fflush(stdout);
    json_t *md = json_object_get(out, "metadata");
    struct pending *np = o->wait && json_object_get(md, "deletionTimestamp")
                             ? realloc(o->pend, (o->npend + 1) * sizeof *np) : NULL;
    if (np) {
        o->pend = np;
        struct pending *p = &np[o->npend++];
        const char *u = json_string_value(json_object_get(md, "uid"));
        p->r = r;
        snprintf(p->ns, sizeof p->ns, "%s", ns ? ns : "");
        snprintf(p->name, sizeof p->name, "%s", name);
        snprintf(p->uid, sizeof p->uid, "%s", u ? u : "");
        p->grace = (double)json_integer_value(json_object_get(md, "deletionGracePeriodSeconds"));
    }
    json_decref(out);
    return 0;
}

static int wait_all(struct gs_client *cl, struct dopts *o)
{
    int rc = 0;
    for (size_t i = 0; i < o->npend; i++) {
        struct pending *p = &o->pend[i];
        rc |= wait_gone(cl, p->r, p->r->namespaced ? p->ns : NULL, p->name, p->uid[0] ? p->uid : NULL,
                        o->timeout_s > 0 ? o->timeout_s : p->grace + 60);
    }
    free(o->pend);
    o->pend = NULL;
    o->npend = 0;
    return rc;
}

static int delete_files(struct gs_client *cl, struct gs_cli *c, struct dopts *o)
{
    struct gs_docs docs;
    if (gs_cli_read_manifests(c, "delete", &docs)) {
        gs_docs_free(&docs);
        return 1;
    }
    int rc = 0;
    for (size_t i = 0; i < docs.n; i++) {
        const json_t *d = docs.docs[i], *md = json_object_get(d, "metadata");
        const struct gs_api_resource *r = gs_api_resource_by_kind(json_string_value(json_object_get(d, "apiVersion")),
                                                                  json_string_value(json_object_get(d, "kind")));
        const char *name = json_string_value(json_object_get(md, "name"));
        const char *ns = json_string_value(json_object_get(md, "namespace"));
        if (!r || !name) {
            fprintf(stderr, "delete: document %zu: unknown kind or no name\n", i + 1);
            rc = 1;
            continue;
        }
        rc |= delete_one(cl, r, ns ? ns : c->ns ? c->ns : "default", name, o);
    }
    gs_docs_free(&docs);
    return rc;
}

/* Takes this command's own flags out of argv (the rest go to gs_cli_parse). 0, or 2 on a bad value. */
static int own_flags(int *argc, char **argv, struct dopts *o)
{
    int n = 0;
    bool force = false;
    for (int i = 0; i < *argc; i++) {
        const char *a = argv[i], *v = strchr(a, '=');
        char *end = NULL;
        if (i && !strcmp(a, "--")) { /* the rest is positional */
            while (i < *argc) argv[n++] = argv[i++];
            break;
        }
        if (i && (!strcmp(a, "--wait") || !strcmp(a, "--wait=true"))) o->wait = true;
        else if (i && !strcmp(a, "--wait=false")) o->wait = false;
        else if (i && !strcmp(a, "--force")) force = true;
        else if (i && !strncmp(a, "--grace-period=", 15)) {
            o->grace = strtoll(v + 1, &end, 10);
            if (!v[1] || *end || o->grace < -1) {
                fprintf(stderr, "delete: invalid --grace-period \"%s\": want seconds (>= 0, or -1 for the default)\n",
                        v + 1);
                return 2;
            }
        } else if (i && !strncmp(a, "--timeout=", 10)) {
            o->timeout_s = strtod(v + 1, &end);
            if (!v[1] || (*end && strcmp(end, "s")) || o->timeout_s < 0) {
                fprintf(stderr, "delete: invalid --timeout \"%s\": want seconds\n", v + 1);
                return 2;
            }
        } else argv[n++] = argv[i];
    }
    *argc = n;
    if (force && o->grace < 0) o->grace = 0;
    if (o->grace == 0)
        fputs("warning: Immediate deletion does not wait for confirmation that the running resource has been "
              "terminated. The resource may continue to run on the cluster indefinitely.\n", stderr);
    return 0;
}

int gs_cmd_delete(int argc, char **argv)
{
    struct dopts o = {.wait = true, .grace = -1};
    char **args = malloc(((size_t)argc + 1) * sizeof *args);
    if (!args) return 1;
    memcpy(args, argv, (size_t)argc * sizeof *args);
    int rc = own_flags(&argc, args, &o);
    args[argc] = NULL;
    struct gs_cli c;
    if (rc || (rc = gs_cli_parse(argc, args, usage_text, &c)) >= 0) {
        free(args);
        return rc;
    }
    const struct gs_api_resource *r = c.nargs ? gs_api_resource_lookup(c.args[0]) : NULL;
    if (!c.nfiles && (c.nargs < 2 || !r)) {
        if (c.nargs && !r) fprintf(stderr, "delete: unknown resource type \"%s\"\n", c.args[0]);
        else fputs(usage_text, stderr);
        gs_cli_free(&c);
        free(args);
        return 2;
    }
    struct gs_client *cl = gs_cli_connect(&c, "delete");
    rc = 1;
    if (cl && c.nfiles) rc = delete_files(cl, &c, &o);
    else if (cl) {
        rc = 0;
        for (int i = 1; i < c.nargs; i++) rc |= delete_one(cl, r, c.ns ? c.ns : "default", c.args[i], &o);
    }
    if (cl) rc |= wait_all(cl, &o);
    free(o.pend);
    gs_client_free(cl);
    gs_cli_free(&c);
    free(args);
    return rc;
}
