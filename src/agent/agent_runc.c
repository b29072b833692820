/*
 * agent_runc.c - which runtime runs a pod, and the runc runtime's side of a
 * container's life: its OCI bundle, signals through runc, the OOM verdict,
 * cleanup and re-adoption. agent_pods.c calls these where the process
 * runtime signals a process group.
 *
 * The runtime is chosen the Kubernetes way: spec.runtimeClassName names a
 * RuntimeClass (node.k8s.io/v1) whose handler is "runc" or "process"; a pod
 * naming none gets the node's --default-runtime. A RuntimeClass that does not
 * exist, or a handler this node lacks, keeps the pod Pending with the reason
 * (RuntimeClassNotFound, RuntimeHandlerNotFound) and kubelet's message, and
 * the agent looks again every few seconds - never a silent fallback.
 *
 * A runc container's config.json comes from gs_oci_spec_build (node/oci.h)
 * with the image the pod names, resolved in the node's image store
 * (<state_dir>/images, node/image.h). An image that is not there keeps the
 * pod Pending with ErrImageNeverPull, as kubelet does under imagePullPolicy
 * Never (no registry is reachable from a node): import it and the pod starts.
 * Device nodes come from the CDI specs (the toolkit's CDI mode): the Allocate
 * answer's CDI names are applied, its plain device specs are not, so the
 * container sees exactly the nodes the CDI spec of its GPUs lists.
 */
#include "agent/agent_int.h"
#include "core/log.h"
#include "node/image.h"
#include "node/oci.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RETRY_NS (3LL * 1000000000)

static void wait_for(struct gs__pod *p, const char *reason, const char *msg)
{
    if (strcmp(p->wait_reason, reason) || strcmp(p->wait_msg, msg)) p->dirty = true;
    snprintf(p->wait_reason, sizeof p->wait_reason, "%s", reason);
    snprintf(p->wait_msg, sizeof p->wait_msg, "%s", msg);
}

/*--- The runtime of a pod ---*/

/* Does this node run handler h? */
static bool have_handler(const struct gs_agent *a, const char *h)
{
    return !strcmp(h, "process") || (!strcmp(h, "runc") && a->runc_ok);
}

int gs__runtime_pick(struct gs_agent *a, struct gs__pod *p)
{
    const char *rc = gs__jstr(json_object_get(p->obj, "spec"), "runtimeClassName");
    const char *handler = a->o.default_runtime ? a->o.default_runtime : "process";
    char msg[512];
    if (rc && *rc) {
        char path[400];
        snprintf(path, sizeof path, "/apis/node.k8s.io/v1/runtimeclasses/%.200s", rc);
        json_t *out = NULL;
        long code = 0;
        int err = gs_client_call(a->cl, "GET", path, NULL, NULL, NULL, &out, &code);
        const char *h = err ? NULL : gs__jstr(out, "handler");
        if (err == GS_ENOENT || code == 404) {
            json_decref(out);
            snprintf(msg, sizeof msg, "RuntimeClass \"%.200s\" not found", rc);
            wait_for(p, "RuntimeClassNotFound", msg);
            return 1;
        }
        if (!h) {
            json_decref(out);
            snprintf(msg, sizeof msg, "cannot read RuntimeClass \"%.200s\": %s", rc,
                     err ? gs_strerror(err) : "it has no handler");
            wait_for(p, "RuntimeClassError", msg);
            return 1;
        }
        snprintf(msg, sizeof msg, "%.200s", h);
        json_decref(out);
        handler = msg;
    }
    if (!have_handler(a, handler)) {
        char m2[512];
        snprintf(m2, sizeof m2, "no runtime for handler \"%.200s\" on node %.100s", handler, a->node);
        wait_for(p, "RuntimeHandlerNotFound", m2);
        return 1;
    }
    p->runc = !strcmp(handler, "runc");
    return 0;
}

/*--- Building a runc container ---*/

/* The agent's env for the spec: without PATH and HOME, which are the
 * image's (or the OCI builder's defaults) inside a container. NULL-terminated,
 * borrowed pointers into env. */
static char **spec_env(char *const *env)
{
    size_t n = 0;
    while (env && env[n]) n++;
    char **v = calloc(n + 1, sizeof *v);
    size_t k = 0;
    for (size_t i = 0; v && i < n; i++)
        if (strncmp(env[i], "PATH=", 5) && strncmp(env[i], "HOME=", 5)) v[k++] = env[i];
    return v;
}

/* The CDI spec directories, split into dirs (pointers into buf). */
static size_t cdi_dirs(const struct gs_agent *a, char *buf, size_t bl, const char **dirs, size_t max)
{
    if (a->o.cdi_dirs) snprintf(buf, bl, "%s", a->o.cdi_dirs);
    else snprintf(buf, bl, "%s/cdi:/etc/cdi:/var/run/cdi", a->state_dir);
    size_t n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ":", &save); t && n < max; t = strtok_r(NULL, ":", &save))
        dirs[n++] = t;
    return n;
}

int gs__runc_ctr_build(struct gs_agent *a, struct gs__pod *p, struct gs__ctr *c, const json_t *cs,
                       const struct gs_alloc_resp *r, char *why, size_t wl)
{
    const char *ref = gs__jstr(cs, "image");
    if (!ref || !*ref) {
        snprintf(why, wl, "container %.60s has no image (the runc runtime runs images)", c->name);
        return -1;
    }
    struct gs_image img = {0};
    char err[512];
    int rc = gs_image_resolve(a->image_dir, ref, &img, err, sizeof err);
    if (rc == GS_ENOENT) {
        char msg[512];
        snprintf(msg, sizeof msg, "Container image \"%.200s\" is not present with pull policy of Never: %.250s", ref,
                 err);
        wait_for(p, "ErrImageNeverPull", msg);
        return 1;
    }
    if (rc) {
        snprintf(why, wl, "container %.60s: image \"%.100s\": %.300s", c->name, ref, err);
        return -1;
    }
    char id[300], dir[4096], bundle[4200], scratch[4200];
    if (gs_runc_id(p->uid, c->name, id, sizeof id)) {
        gs_image_free(&img);
        snprintf(why, wl, "container %.60s: name too long for a runc container id", c->name);
        return -1;
    }
    snprintf(dir, sizeof dir, "%s/%s/scratch", p->dir, c->name);
    /* Scratch space only this container mounts; whichever uid it runs as may write. */
    char abs[PATH_MAX];
    if (gs_mkdirs(dir) || chmod(dir, 01777) || !realpath(dir, abs)) {
        gs_image_free(&img);
        snprintf(why, wl, "cannot create %.300s: %s", dir, strerror(errno));
        return -1;
    }
    /* Absolute paths: the shim runs runc from the container's directory. */
    snprintf(scratch, sizeof scratch, "%s", abs);
    snprintf(bundle, sizeof bundle, "%.*s/bundle", (int)(strlen(abs) - strlen("/scratch")), abs);
    /* Device nodes from the CDI specs of the GPUs, not the plain device specs. */
    struct gs_alloc_resp *cr = calloc(1, sizeof *cr);
    const char *names[GS_NODE_MAX_GPUS], *dirs[16];
    char dbuf[4096];
    if (!cr) {
        gs_image_free(&img);
        return -1;
    }
    *cr = *r;
    cr->n_dev = 0;
    for (int k = 0; k < r->n_cdi; k++) names[k] = r->cdi[k];
    char **env = spec_env(c->env);
    struct gs_oci_input in = {
        .pod = p->obj, .container = cs, .image = &img.config, .rootfs = img.rootfs, .alloc = cr,
        .cdi_devices = names, .n_cdi = (size_t)r->n_cdi, .cdi_dirs = dirs,
        .n_cdi_dirs = cdi_dirs(a, dbuf, sizeof dbuf, dirs, 16), .extra_env = env, .hostname = p->name,
        .scratch_dir = scratch, .default_pids_limit = 1024,
    };
    json_t *spec = NULL;
    rc = gs_oci_spec_build(&in, &spec, err, sizeof err);
    free(env);
    free(cr);
    gs_image_free(&img);
    if (rc) {
        snprintf(why, wl, "container %.60s: OCI spec: %.400s", c->name, err);
        return -1;
    }
    rc = gs_runc_bundle_write(bundle, spec, id, err, sizeof err);
    json_decref(spec);
    if (rc) {
        snprintf(why, wl, "container %.60s: %.400s", c->name, err);
        return -1;
    }
    /* The shim runs runc, as root, with the agent's PATH; the container's
     * user and environment are in config.json. */
    for (size_t i = 0; c->argv && c->argv[i]; i++) free(c->argv[i]);
    free(c->argv);
    for (size_t i = 0; c->env && c->env[i]; i++) free(c->env[i]);
    free(c->env);
    c->argv = gs_runc_run_argv(&a->runc, bundle, id);
    c->env = calloc(2, sizeof *c->env);
    if (c->env) c->env[0] = strdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    c->set_ids = false;
    free(c->runc_id);
    c->runc_id = strdup(id);
    return c->argv && c->env && c->env[0] && c->runc_id ? 0 : -1;
}

/*--- Life of a runc container ---*/

void gs__runc_ctr_prestart(struct gs_agent *a, const struct gs__ctr *c)
{
    if (c->runc_id) gs_runc_delete(&a->runc, c->runc_id); /* the stopped one a previous run kept */
}

void gs__ctr_signal(struct gs_agent *a, const struct gs__ctr *c, int sig)
{
    if (!c->runc_id) {
        gs_proc_signal(&c->proc, sig);
        return;
    }
    gs_runc_kill(&a->runc, c->runc_id, sig);
}

const char *gs__runc_ctr_finish(struct gs_agent *a, const struct gs__ctr *c, int code)
{
    if (!c->runc_id) return NULL;
    bool oom = code == 137 && gs_runc_oom_killed(c->runc_id);
    gs_runc_delete(&a->runc, c->runc_id);
    if (oom) gs_log(GS_LOG_INFO, "agent: container OOM-killed", "container", c->runc_id, NULL);
    return oom ? "OOMKilled" : NULL;
}

bool gs__runc_ctr_adopt(struct gs_agent *a, struct gs__ctr *c)
{
    if (!c->runc_id) return false;
    char st[32];
    pid_t pid = 0;
    if (gs_runc_state(&a->runc, c->runc_id, st, sizeof st, &pid) || pid <= 0) return false;
    if (strcmp(st, "running") && strcmp(st, "paused") && strcmp(st, "created")) return false;
    /* The shim is gone but runc's container runs: follow its init process;
     * its exit code will be unknown (Lost), as for a process without a shim. */
    c->proc.pid = pid;
    c->proc.start_ticks = gs_proc_start_ticks(pid);
    c->proc.child = false;
    gs_log(GS_LOG_WARN, "agent: re-adopted a runc container through runc state", "container", c->runc_id, NULL);
    return true;
}
