/*
 * agent_pods.c - the life of a pod on its node: admission against the
 * devices the scheduler chose, processes, restarts, status reports, stop
 * and cleanup, and recovery from the on-disk checkpoint after a restart.
 *
 * Everything here runs on the agent's sync loop, so the pod table needs no
 * lock against itself; a->mu is taken only around changes to the table (and
 * to the fields the HTTP thread reads), never around a call to the server.
 *
 * The checkpoint is the pod directory itself: pod.json (identity, devices,
 * each container's argv and env, the final phase once there is one) is
 * written before any process starts, and each container's proc file (shim
 * pid, its start time, restarts) right after its fork - the shim writes its
 * own pid even earlier, which closes the window in which a crash would
 * leave a process nobody knows about.
 */
#include "agent/agent_int.h"
#include "control/api.h"
#include "loops/nodelifecycle.h"
#include "control/resources.h"
#include "core/log.h"
#include "core/pod_security.h"
#include "node/allocate.h"

#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RESTART_BACKOFF_MAX_NS (10LL * 1000000000)

static const char *phase_names[] = {"Pending", "Running", "Succeeded", "Failed"};
const char *gs__phase_name(enum gs__phase p) { return phase_names[p]; }

static bool terminal(enum gs__phase p) { return p == GS_P_SUCCEEDED || p == GS_P_FAILED; }

static const struct gs_api_resource *pods_res(void) { return gs_api_resource_lookup("pods"); }

/*--- Memory ---*/

static void strv_free(char **v)
{
    for (size_t i = 0; v && v[i]; i++) free(v[i]);
    free(v);
}

void gs__pod_free(struct gs__pod *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->nc; i++) {
        free(p->c[i].name);
        strv_free(p->c[i].argv);
        strv_free(p->c[i].env);
        free(p->c[i].reason);
        free(p->c[i].runc_id);
    }
    free(p->c);
    free(p->ns);
    free(p->name);
    free(p->uid);
    free(p->key);
    free(p->devices);
    free(p->restart_policy);
    free(p->mig); /* MIG (agent_mig.c) */
    gs__dra_free(p); /* resource claims (agent_dra.c) */
    json_decref(p->obj);
    free(p);
}

static void set_reason(struct gs__ctr *c, const char *r)
{
    free(c->reason);
    c->reason = r ? strdup(r) : NULL;
}

static char **strv_from_json(const json_t *arr)
{
    size_t n = json_array_size(arr), i;
    char **v = calloc(n + 1, sizeof *v);
    json_t *e;
    if (!v) return NULL;
    json_array_foreach(arr, i, e) v[i] = strdup(json_is_string(e) ? json_string_value(e) : "");
    return v;
}

static json_t *strv_to_json(char *const *v)
{
    json_t *a = json_array();
    for (size_t i = 0; v && v[i]; i++) json_array_append_new(a, json_string(v[i]));
    return a;
}

/*--- Paths and checkpoint files ---*/

static void ctr_path(const struct gs__pod *p, const struct gs__ctr *c, const char *leaf, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s/%s", p->dir, c->name, leaf);
}

static int write_json_atomic(const char *path, json_t *doc)
{
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    if (json_dump_file(doc, tmp, JSON_COMPACT)) return GS_EIO;
    return rename(tmp, path) ? GS_EIO : 0;
}

static void save_pod(const struct gs__pod *p)
{
    json_t *ctrs = json_array();
    for (size_t i = 0; i < p->nc; i++)
        json_array_append_new(ctrs, json_pack("{s:s,s:o,s:o,s:b,s:I,s:I,s:s?}", "name", p->c[i].name, "argv",
                                              strv_to_json(p->c[i].argv), "env", strv_to_json(p->c[i].env),
                                              "setIds", p->c[i].set_ids, "uid", (json_int_t)p->c[i].uid, "gid",
                                              (json_int_t)p->c[i].gid, "runcId", p->c[i].runc_id));
    json_t *doc = json_pack("{s:s,s:s,s:s,s:s?,s:s,s:i,s:o,s:s,s:s,s:s,s:I}", "namespace", p->ns, "name", p->name, "uid",
                            p->uid, "devices", p->devices, "restartPolicy", p->restart_policy, "milli", p->milli,
                            "containers", ctrs, "phase", gs__phase_name(p->phase), "reason", p->reason, "message",
                            p->message, "startTime", (json_int_t)p->start_time);
    json_object_set_new(doc, "runtime", json_string(p->runc ? "runc" : "process"));
    gs__mig_save(p, doc); /* MIG instances (agent_mig.c) */
    gs__dra_save(p, doc); /* resource claims (agent_dra.c) */
    char path[4096];
    snprintf(path, sizeof path, "%s/pod.json", p->dir);
    gs_mkdirs(p->dir);
    if (!doc || write_json_atomic(path, doc))
        gs_log(GS_LOG_WARN, "agent: cannot write the pod checkpoint", "path", path, NULL);
    json_decref(doc);
}

static void save_proc(const struct gs__pod *p, const struct gs__ctr *c)
{
    char path[4096];
    ctr_path(p, c, "proc.json", path, sizeof path);
    json_t *doc = json_pack("{s:i,s:I,s:i,s:I}", "pid", (int)c->proc.pid, "start", (json_int_t)c->proc.start_ticks,
                            "restarts", c->restarts, "started", (json_int_t)c->started);
    if (doc) write_json_atomic(path, doc);
    json_decref(doc);
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    (void)st;
    (void)flag;
    (void)f;
    remove(path);
    return 0;
}

static void remove_dir(const char *dir)
{
    nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/*--- Devices ---*/

/* Parses the annotation into slots; false with why when a device is unknown. */
static bool parse_devices(struct gs_agent *a, struct gs__pod *p, char *why, size_t wl)
{
    p->nslots = 0;
    p->milli = 1000;
    if (!p->devices || !*p->devices) return true;
    char buf[2048];
    snprintf(buf, sizeof buf, "%s", p->devices);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        char *colon = strrchr(t, ':');
        if (colon && colon[1] && strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
            *colon = 0;
            p->milli = atoi(colon + 1);
        }
        if (gs__mig_slot_token(a, t)) continue; /* single strategy: a MIG instance (agent_mig.c) */
        int slot = gs_node_gpus_find(&a->gpus, t, NULL);
        if (slot < 0 && t[0] && strspn(t, "0123456789") == strlen(t) && atoi(t) < a->gpus.n) slot = atoi(t);
        if (slot < 0 || p->nslots == GS_NODE_MAX_GPUS) {
            snprintf(why, wl, "device %s chosen by the scheduler is not on node %s", t, a->node);
            return false;
        }
        p->slots[p->nslots++] = slot;
    }
    if (p->milli < 1 || p->milli > 1000) p->milli = 1000;
    return true;
}

/* Milli of slot held by live pods other than self. */
static int slot_used(struct gs_agent *a, const struct gs__pod *self, int slot, const struct gs__pod **by)
{
    int used = 0;
    for (size_t i = 0; i < a->npods; i++) {
        const struct gs__pod *q = a->pods[i];
        if (q == self || !q->holds_devices) continue;
        for (int k = 0; k < q->nslots; k++)
            if (q->slots[k] == slot) {
                used += q->milli;
                *by = q;
            }
        if (gs__dra_holds_slot(q, slot)) used += 1000, *by = q; /* through a claim (agent_dra.c) */
    }
    return used;
}

static long gpu_request(const json_t *pod)
{
    long n = 0;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(json_object_get(pod, "spec"), "containers"), i, c) {
        json_t *res = json_object_get(c, "resources");
        const char *v = gs__jstr(json_object_get(res, "limits"), "nvidia.com/gpu");
        if (!v) v = gs__jstr(json_object_get(res, "requests"), "nvidia.com/gpu");
        if (v) n += atol(v);
    }
    return n;
}

/* The admission decision: exactly the chosen devices, each healthy and with
 * room; fills the Allocate env. 0, -1 with why, or 1 when a chosen GPU is
 * still held by another pod here: the scheduler only chose it because that
 * pod was deleted or preempted, and its deletion may not have reached this
 * agent yet or its processes are in their grace period, so the new pod waits
 * (bounded, see start_pod) rather than failing - kubelet answers the same
 * race with UnexpectedAdmissionError. Two pods never share a GPU meanwhile. */
static int admit(struct gs_agent *a, struct gs__pod *p, struct gs_alloc_resp *resp, char *why, size_t wl)
{
    memset(resp, 0, sizeof *resp);
    if (!parse_devices(a, p, why, wl)) return -1;
    /* MIG instances (agent_mig.c) */
    int mig = gs__mig_admit(a, p, why, wl);
    if (mig) return mig;
    if (!p->nslots) {
        if (p->obj && gpu_request(p->obj) > 0 && !p->mig) {
            snprintf(why, wl, "the pod requests GPUs but carries no gpusched.io/devices annotation");
            return -1;
        }
        return 0;
    }
    const char *ids[GS_NODE_MAX_GPUS];
    int nids = 0;
    for (int k = 0; k < p->nslots; k++) {
        const struct gs__pod *by = NULL;
        int s = p->slots[k];
        if (!a->gpus.gpu[s].healthy) {
            snprintf(why, wl, "GPU %s became unhealthy", a->gpus.gpu[s].uuid);
            return -1;
        }
        if (slot_used(a, p, s, &by) + p->milli > 1000) {
            snprintf(why, wl, "GPU %s is in use by pod %s", a->gpus.gpu[s].uuid, by ? by->key : "?");
            return by ? 1 : -1;
        }
        bool dup = false;
        for (int j = 0; j < nids; j++) dup |= !strcmp(ids[j], a->gpus.gpu[s].uuid);
        if (!dup) ids[nids++] = a->gpus.gpu[s].uuid;
    }
    /* runc applies CDI specs (agent_runc.c): it needs the CDI names too. */
    struct gs_alloc_opts ao = {.strategy = p->runc ? GS_DLS_ENVVAR | GS_DLS_CDI_CRI : GS_DLS_ENVVAR};
    if (gs_alloc_container(&a->gpus, &ao, ids, (size_t)nids, resp, why, wl)) return -1;
    return 0;
}

/*--- Building containers ---*/

static void env_add(json_t *env, const char *k, const char *v) { json_object_set_new(env, k, json_string(v)); }

static char **env_build(struct gs_agent *a, struct gs__pod *p, const char *ctr, const json_t *cspec,
                        const struct gs_alloc_resp *r, const char *workdir)
{
    json_t *env = json_object();
    env_add(env, "PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    env_add(env, "HOME", workdir);
    env_add(env, "HOSTNAME", p->name);
    /* The pod's own variables first: what the agent sets below wins. The
     * API refuses reserved names; a pod stored before that rule is filtered here. */
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(cspec, "env"), i, e) {
        const char *k = gs__jstr(e, "name"), *v = gs__jstr(e, "value");
        if (k && *k && !gs_pod_env_reserved(k)) env_add(env, k, v ? v : "");
    }
    env_add(env, "GPUSCHED_POD", p->name);
    env_add(env, "GPUSCHED_NAMESPACE", p->ns);
    env_add(env, "GPUSCHED_POD_UID", p->uid);
    env_add(env, "GPUSCHED_NODE", a->node);
    env_add(env, "GPUSCHED_CONTAINER", ctr);
    /* Processes run on the host: a pod without GPUs must see none. */
    env_add(env, "NVIDIA_VISIBLE_DEVICES", "void");
    env_add(env, "CUDA_VISIBLE_DEVICES", "");
    for (int k = 0; k < r->n_env; k++) env_add(env, r->env[k].key, r->env[k].value);
    const char *nvd = gs__jstr(env, "NVIDIA_VISIBLE_DEVICES");
    if (p->nslots && nvd) {
        /* UUIDs, not indices: CUDA's own order need not be NVML's. */
        env_add(env, "CUDA_VISIBLE_DEVICES", nvd);
        env_add(env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID");
        if (p->milli < 1000) {
            char m[16];
            snprintf(m, sizeof m, "%d", p->milli);
            env_add(env, "GPUSCHED_GPU_MILLI", m);
        }
    }
    gs__mig_env(p, env); /* MIG instances (agent_mig.c) */
    gs__dra_env(p, ctr, env); /* resource claims (agent_dra.c) */
    char **v = calloc(json_object_size(env) + 1, sizeof *v);
    size_t n = 0;
    const char *k;
    json_t *val;
    json_object_foreach(env, k, val) {
        if (!v) break;
        size_t len = strlen(k) + strlen(json_string_value(val)) + 2;
        if ((v[n] = malloc(len))) snprintf(v[n++], len, "%s=%s", k, json_string_value(val));
    }
    json_decref(env);
    return v;
}

static char **argv_build(const json_t *cspec)
{
    json_t *all = json_array();
    json_array_extend(all, json_object_get(cspec, "command"));
    json_array_extend(all, json_object_get(cspec, "args"));
    char **v = json_array_size(all) ? strv_from_json(all) : NULL;
    json_decref(all);
    return v;
}

/* The uid/gid container cs runs as (runtime.h gs_proc_pick_ids). -1 with why. */
static int pick_ids(struct gs_agent *a, struct gs__pod *p, const json_t *cs, struct gs__ctr *c, char *why, size_t wl)
{
    struct gs_run_as ra;
    gs_pod_run_as(json_object_get(p->obj, "spec"), cs, &ra);
    struct gs_ids_req q = {ra.user, ra.group, ra.non_root, a->o.pod_uid ? (uid_t)a->o.pod_uid : 65534,
                           a->o.pod_gid ? (gid_t)a->o.pod_gid : 65534, geteuid(), getegid()};
    char w[400];
    if (gs_proc_pick_ids(&q, &c->uid, &c->gid, w, sizeof w)) {
        snprintf(why, wl, "container %.40s: %.200s", c->name, w);
        return -1;
    }
    c->set_ids = q.self_uid == 0;
    return 0;
}

static void free_ctrs(struct gs__pod *p)
{
    for (size_t i = 0; i < p->nc; i++) {
        free(p->c[i].name);
        strv_free(p->c[i].argv);
        strv_free(p->c[i].env);
        free(p->c[i].reason);
        free(p->c[i].runc_id);
    }
    free(p->c);
    p->c = NULL;
    p->nc = 0;
}

/* Containers from the pod spec. 0; -1 with why when one has nothing to run;
 * 1 when the pod waits (runc: an image not in the store). */
static int build_containers(struct gs_agent *a, struct gs__pod *p, const struct gs_alloc_resp *r, char *why, size_t wl)
{
    json_t *ctrs = json_object_get(json_object_get(p->obj, "spec"), "containers");
    size_t n = json_array_size(ctrs), i;
    json_t *cs;
    if (!n) {
        snprintf(why, wl, "the pod has no containers");
        return -1;
    }
    p->c = calloc(n, sizeof *p->c);
    if (!p->c) return -1;
    json_array_foreach(ctrs, i, cs) {
        struct gs__ctr *c = &p->c[p->nc++];
        const char *name = gs__jstr(cs, "name");
        char nm[64];
        snprintf(nm, sizeof nm, "c%zu", i);
        c->name = strdup(name && *name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..") ? name : nm);
        char work[4096];
        snprintf(work, sizeof work, "%s/%s/work", p->dir, c->name);
        c->argv = argv_build(cs);
        c->env = env_build(a, p, c->name, cs, r, work);
        if (p->runc) { /* the user and the command may come from the image (agent_runc.c) */
            int rc = gs__runc_ctr_build(a, p, c, cs, r, why, wl);
            if (rc) return rc;
            continue;
        }
        if (pick_ids(a, p, cs, c, why, wl)) return -1;
        if (!c->argv) {
            snprintf(why, wl, "container %s has no command (this agent runs commands, not images)", c->name);
            return -1;
        }
    }
    return 0;
}

/*--- Processes ---*/

static int start_ctr(struct gs_agent *a, struct gs__pod *p, struct gs__ctr *c)
{
    gs__runc_ctr_prestart(a, c);
    char work[4096], logp[4096], exitp[4096], pidp[4096];
    snprintf(work, sizeof work, "%s/%s/work", p->dir, c->name);
    ctr_path(p, c, "log", logp, sizeof logp);
    ctr_path(p, c, "exit", exitp, sizeof exitp);
    ctr_path(p, c, "shim.pid", pidp, sizeof pidp);
    struct gs_proc_spec s = {c->argv, c->env, work, logp, exitp, pidp, c->set_ids, c->uid, c->gid};
    int err = gs_proc_start(&s, &c->proc);
    if (err) return err;
    c->state = GS_C_RUNNING;
    c->started = gs__wall_s();
    set_reason(c, NULL);
    save_proc(p, c);
    return 0;
}

static void attribute(struct gs_agent *a, struct gs__pod *p, bool on)
{
    if (!a->exp) return;
    for (int k = 0; k < p->nslots; k++)
        gs_exporter_set_pod(a->exp, a->inv.gpus[p->slots[k]].index, on ? p->ns : NULL, on ? p->name : NULL,
                            on && p->nc ? p->c[0].name : NULL);
    for (int k = 0; p->mig && k < p->mig->n; k++) /* MIG instances (agent_mig.c): per-instance series */
        gs_exporter_set_mig_pod(a->exp, p->mig->v[k].uuid, on ? p->ns : NULL, on ? p->name : NULL,
                                on && p->nc ? p->c[0].name : NULL);
}

static void release(struct gs_agent *a, struct gs__pod *p)
{
    gs__dra_release(a, p); /* resource claims (agent_dra.c) */
    if (!p->holds_devices) return;
    attribute(a, p, false);
    pthread_mutex_lock(&a->mu);
    p->holds_devices = false;
    pthread_mutex_unlock(&a->mu);
    a->nrt_dirty = true;
}

static void fail_pod(struct gs__pod *p, const char *reason, const char *msg)
{
    p->phase = GS_P_FAILED;
    snprintf(p->reason, sizeof p->reason, "%s", reason);
    snprintf(p->message, sizeof p->message, "%s", msg);
    p->dirty = true;
}

/*--- Status reports ---*/

static json_t *ctr_status(const struct gs__ctr *c)
{
    char t1[32], t2[32];
    gs__rfc3339(c->started, t1, sizeof t1);
    gs__rfc3339(c->finished, t2, sizeof t2);
    json_t *state;
    if (c->state == GS_C_RUNNING) state = json_pack("{s:{s:s}}", "running", "startedAt", t1);
    else if (c->state == GS_C_EXITED)
        state = json_pack("{s:{s:i,s:s,s:s,s:s}}", "terminated", "exitCode", c->exit_code, "reason",
                          c->reason ? c->reason : (c->exit_code ? "Error" : "Completed"), "startedAt", t1,
                          "finishedAt", t2);
    else state = json_pack("{s:{s:s}}", "waiting", "reason", c->restarts ? "CrashLoopBackOff" : "ContainerCreating");
    return json_pack("{s:s,s:o,s:b,s:i,s:s,s:b}", "name", c->name, "state", state, "ready",
                     c->state == GS_C_RUNNING, "restartCount", c->restarts, "image", "", "started",
                     c->state == GS_C_RUNNING);
}

static void fill_status(struct gs_agent *a, struct gs__pod *p, json_t *obj)
{
    json_t *st = json_object_get(obj, "status");
    if (!json_is_object(st)) json_object_set_new(obj, "status", st = json_object());
    json_object_set_new(st, "phase", json_string(gs__phase_name(p->phase)));
    if (p->reason[0]) json_object_set_new(st, "reason", json_string(p->reason));
    if (p->message[0]) json_object_set_new(st, "message", json_string(p->message));
    char ts[32];
    if (p->start_time) {
        gs__rfc3339(p->start_time, ts, sizeof ts);
        json_object_set_new(st, "startTime", json_string(ts));
    }
    json_object_set_new(st, "hostIP", json_string("127.0.0.1"));
    json_t *cs = json_array();
    bool all_ready = p->nc > 0;
    for (size_t i = 0; i < p->nc; i++) {
        json_array_append_new(cs, ctr_status(&p->c[i]));
        all_ready &= p->c[i].state == GS_C_RUNNING;
    }
    if (!p->nc && p->wait_reason[0]) { /* waiting before any container exists (agent_runc.c) */
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(json_object_get(obj, "spec"), "containers"), i, c)
            json_array_append_new(cs, json_pack("{s:s,s:{s:{s:s,s:s}},s:b,s:i,s:s,s:b}", "name",
                                                gs__jstr(c, "name") ? gs__jstr(c, "name") : "", "state", "waiting",
                                                "reason", p->wait_reason, "message", p->wait_msg, "ready", 0,
                                                "restartCount", 0, "image", gs__jstr(c, "image") ? gs__jstr(c, "image") : "",
                                                "started", 0));
        gs__pod_set_condition(obj, "PodReadyToStartContainers", "False", p->wait_reason, p->wait_msg);
    } else if (p->wait_reason[0] == 0 && p->nc) {
        gs__pod_set_condition(obj, "PodReadyToStartContainers", "True", NULL, NULL);
    }
    json_object_set_new(st, "containerStatuses", cs);
    const char *ready = all_ready && p->phase == GS_P_RUNNING ? "True" : "False";
    const char *why = terminal(p->phase) ? "PodCompleted" : NULL;
    gs__pod_set_condition(obj, "Initialized", "True", NULL, NULL);
    gs__pod_set_condition(obj, "ContainersReady", ready, why, NULL);
    gs__pod_set_condition(obj, "Ready", ready, why, NULL);
    gs__mig_status(p, st); /* MIG instances (agent_mig.c) */
    gs__dra_status(p, obj); /* resource claims (agent_dra.c) */
    (void)a;
}

static void begin_stop(struct gs_agent *a, struct gs__pod *p);

/* Is the server's object still this pod on this node? */
static bool still_ours(struct gs_agent *a, const struct gs__pod *p, const json_t *obj)
{
    const char *uid = gs__jstr(json_object_get(obj, "metadata"), "uid");
    const char *node = gs__jstr(json_object_get(obj, "spec"), "nodeName");
    return uid && !strcmp(uid, p->uid) && node && !strcmp(node, a->node);
}

/* Failed, reason Preempted: written by the scheduler (sched_loop.c), final. */
static bool preempted(const json_t *obj)
{
    json_t *st = json_object_get(obj, "status");
    const char *why = gs__jstr(st, "reason"), *ph = gs__jstr(st, "phase");
    return why && ph && !strcmp(why, "Preempted") && !strcmp(ph, "Failed");
}

static bool server_terminal(const json_t *obj)
{
    const char *ph = gs__jstr(json_object_get(obj, "status"), "phase");
    return ph && (!strcmp(ph, "Succeeded") || !strcmp(ph, "Failed"));
}

/* What the server's object says about this pod beyond its spec: evicted by
 * the node lifecycle (stop, then confirm), or finished there while it still
 * runs here (an orphan of a partition: stop it, never report over the
 * server's verdict). True when the pod is no longer reported. */
static bool server_verdict(struct gs_agent *a, struct gs__pod *p, const json_t *obj)
{
    if (gs_nodelc_eviction_pending_json(obj)) {
        if (!p->evicted) {
            gs_log(GS_LOG_WARN, "agent: pod evicted by the server, stopping it", "pod", p->key, NULL);
            a->reconcile_stops += p->phase == GS_P_RUNNING;
        }
        begin_stop(a, p);
        p->evicted = true;
        p->dirty = false;
        return true;
    }
    if (!server_terminal(obj)) return p->evicted;
    if (!terminal(p->phase) || p->terminating) {
        if (!p->gone) {
            gs_log(GS_LOG_WARN, "agent: pod finished on the server but running here, stopping it", "pod", p->key, NULL);
            a->reconcile_stops++;
        }
        begin_stop(a, p);
        p->gone = true;
    }
    p->dirty = false; /* a terminal phase is final: the server keeps its own */
    return true;
}

static void report(struct gs_agent *a, struct gs__pod *p)
{
    for (int attempt = 0; attempt < 2 && p->dirty && p->obj; attempt++) {
        if (preempted(p->obj)) {
            begin_stop(a, p);
            p->gone = true;
            p->dirty = false;
            return;
        }
        if (server_verdict(a, p, p->obj)) return;
        json_t *obj = json_deep_copy(p->obj), *out = NULL;
        fill_status(a, p, obj);
        int err = gs_client_update(a->cl, pods_res(), p->ns, p->name, "status", obj, &out);
        json_decref(obj);
        if (!err) {
            json_decref(p->obj);
            p->obj = out;
            p->dirty = false;
            return;
        }
        json_decref(out);
        out = NULL;
        /* 409: stale; 422: refused (a terminal phase on the server): read it again. */
        if (err == GS_ECONFLICT || err == GS_EINVAL) err = gs_client_get(a->cl, pods_res(), p->ns, p->name, &out);
        if (err == GS_ENOENT || (out && !still_ours(a, p, out))) {
            json_decref(out);
            begin_stop(a, p);
            p->gone = true;
            p->dirty = false;
            return;
        }
        if (!out) return; /* server away: retried next tick */
        json_decref(p->obj);
        p->obj = out;
    }
}

/*--- Start, stop ---*/

static bool add_pod(struct gs_agent *a, struct gs__pod *p)
{
    pthread_mutex_lock(&a->mu);
    struct gs__pod **v = realloc(a->pods, (a->npods + 1) * sizeof *v);
    if (v) {
        a->pods = v;
        a->pods[a->npods++] = p;
    }
    pthread_mutex_unlock(&a->mu);
    if (!v) gs__pod_free(p);
    return v != NULL;
}

static struct gs__pod *pod_new(struct gs_agent *a, const char *ns, const char *name, const char *uid)
{
    struct gs__pod *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    size_t kl = strlen(ns) + strlen(name) + 2;
    p->ns = strdup(ns);
    p->name = strdup(name);
    p->uid = strdup(uid);
    p->key = malloc(kl);
    if (!p->ns || !p->name || !p->uid || !p->key) {
        gs__pod_free(p);
        return NULL;
    }
    snprintf(p->key, kl, "%s/%s", ns, name);
    snprintf(p->dir, sizeof p->dir, "%s/pods/%s", a->state_dir, uid);
    p->milli = 1000;
    return p;
}

/* The pod waits before it starts (runtime, image): retried from the tick. */
static void start_later(struct gs_agent *a, struct gs__pod *p)
{
    free_ctrs(p);
    gs__dra_release(a, p);
    p->retry_at_ns = gs__mono_ns() + 3LL * 1000000000;
    if (p->dirty) gs_log(GS_LOG_INFO, "agent: pod waits", "pod", p->key, "reason", p->wait_reason, NULL);
    if (p->dirty && atomic_load(&a->registered)) report(a, p);
}

static void start_pod(struct gs_agent *a, struct gs__pod *p)
{
    char why[512] = "";
    p->retry_at_ns = 0;
    if (gs__runtime_pick(a, p)) { /* RuntimeClass (agent_runc.c) */
        start_later(a, p);
        return;
    }
    int dra = gs__dra_admit(a, p, why, sizeof why); /* resource claims (agent_dra.c) */
    if (dra == 1) return; /* retried by gs__pods_tick */
    struct gs_alloc_resp *r = dra ? NULL : calloc(1, sizeof *r);
    int adm = r ? admit(a, p, r, why, sizeof why) : -1;
    if (adm == 1) {
        int64_t now = gs__mono_ns();
        if (!p->wait_dev_until_ns) p->wait_dev_until_ns = now + 2LL * a->o.grace_ms * 1000000 + 10 * 1000000000LL;
        if (now < p->wait_dev_until_ns) {
            free(r);
            return; /* retried by gs__pods_tick */
        }
        adm = -1;
    }
    p->wait_dev_until_ns = 0;
    int built = adm ? -1 : build_containers(a, p, r, why, sizeof why);
    if (built == 1) { /* runc: the image is not in the store */
        free(r);
        start_later(a, p);
        return;
    }
    if (built) {
        free(r);
        gs__dra_release(a, p);
        gs_log(GS_LOG_WARN, "agent: pod refused", "pod", p->key, "why", why, NULL);
        fail_pod(p, "UnexpectedAdmissionError", why[0] ? why : "out of memory");
        gs__pod_event(a, p, NULL, "Warning", "UnexpectedAdmissionError", "Allocate failed: %s", p->message);
        return;
    }
    free(r);
    p->wait_reason[0] = p->wait_msg[0] = 0;
    pthread_mutex_lock(&a->mu);
    p->holds_devices = p->nslots > 0 || p->mig || gs__dra_slots(p); /* MIG (agent_mig.c), claims (agent_dra.c) */
    pthread_mutex_unlock(&a->mu);
    if (p->nslots) a->nrt_dirty = true;
    attribute(a, p, true);
    p->start_time = gs__wall_s();
    p->phase = GS_P_RUNNING;
    save_pod(p);
    for (size_t i = 0; i < p->nc; i++) {
        int err = start_ctr(a, p, &p->c[i]);
        if (err == 0) {
            gs__pod_event(a, p, &p->c[i], "Normal", "Started", "Started container %s", p->c[i].name);
            continue;
        }
        p->c[i].state = GS_C_EXITED;
        p->c[i].exit_code = 128;
        set_reason(&p->c[i], "StartError");
        gs__pod_event(a, p, &p->c[i], "Warning", "Failed", "Error: cannot start container %s: %s", p->c[i].name,
                      gs_strerror(err));
    }
    gs_log(GS_LOG_INFO, "agent: pod started", "pod", p->key, "devices", p->devices ? p->devices : "", NULL);
    p->dirty = true;
    /* Report Running now, before a quick command can finish within the tick. */
    if (atomic_load(&a->registered)) report(a, p);
}

static void begin_stop(struct gs_agent *a, struct gs__pod *p)
{
    if (p->terminating) return;
    p->terminating = true;
    p->kill_at_ns = gs__mono_ns() + (int64_t)a->o.grace_ms * 1000000;
    for (size_t i = 0; i < p->nc; i++) {
        if (p->c[i].state == GS_C_RUNNING)
            gs__pod_event(a, p, &p->c[i], "Normal", "Killing", "Stopping container %s", p->c[i].name);
        if (p->c[i].state == GS_C_RUNNING) gs__ctr_signal(a, &p->c[i], SIGTERM);
        else if (p->c[i].state == GS_C_WAITING) p->c[i].state = GS_C_EXITED;
    }
}

/* Graceful deletion (deletionTimestamp set): SIGTERM now, SIGKILL after the
 * pod's deletionGracePeriodSeconds (a later, shorter one moves the kill
 * closer), then, once every process is gone and the devices are released,
 * the pod is deleted with grace 0 (confirm_delete in the tick). */
static void begin_delete(struct gs_agent *a, struct gs__pod *p, const json_t *md)
{
    json_t *g = json_object_get(md, "deletionGracePeriodSeconds");
    int64_t grace_ns = json_is_integer(g) && json_integer_value(g) >= 0 ? json_integer_value(g) * 1000000000LL
                                                                         : (int64_t)a->o.grace_ms * 1000000;
    bool was = p->terminating;
    begin_stop(a, p);
    int64_t at = gs__mono_ns() + grace_ns;
    if (!was || at < p->kill_at_ns) p->kill_at_ns = at;
    if (!p->deleting) gs_log(GS_LOG_INFO, "agent: pod terminating", "pod", p->key, NULL);
    p->gone = p->deleting = true;
}

/* Deletes the stopped pod with grace 0 (uid as precondition, so a new pod of
 * the same name is safe). True when it is gone from the server. */
static bool confirm_delete(struct gs_agent *a, struct gs__pod *p, int64_t now)
{
    if (now < p->next_delete_ns) return false;
    char path[1024];
    if (gs_api_path(pods_res(), p->ns, p->name, path, sizeof path - 24) < 0) return true;
    strcat(path, "?gracePeriodSeconds=0");
    json_t *opts = json_pack("{s:s,s:s,s:i,s:{s:s}}", "kind", "DeleteOptions", "apiVersion", "v1",
                             "gracePeriodSeconds", 0, "preconditions", "uid", p->uid);
    json_t *out = NULL;
    long code = 0;
    int err = gs_client_call(a->cl, "DELETE", path, "application/json", opts, NULL, &out, &code);
    json_decref(opts);
    json_decref(out);
    /* 404: already gone; 409: the name now belongs to another pod. */
    if (!err || err == GS_ENOENT || err == GS_ECONFLICT) {
        gs_log(GS_LOG_INFO, "agent: pod deletion confirmed", "pod", p->key, NULL);
        return true;
    }
    p->next_delete_ns = now + 1000000000LL;
    return false;
}

static struct gs__pod *find_uid(struct gs_agent *a, const char *uid)
{
    for (size_t i = 0; i < a->npods; i++)
        if (!strcmp(a->pods[i]->uid, uid)) return a->pods[i];
    return NULL;
}

bool gs__pods_reconcile(struct gs_agent *a, const char *key, json_t *obj)
{
    (void)key;
    if (!obj) return true; /* the sweep in gs__pods_tick stops pods nobody wants */
    json_t *md = json_object_get(obj, "metadata"), *spec = json_object_get(obj, "spec");
    const char *uid = gs__jstr(md, "uid"), *ns = gs__jstr(md, "namespace"), *name = gs__jstr(md, "name");
    const char *node = gs__jstr(spec, "nodeName");
    if (!uid || !name || !node || strcmp(node, a->node)) return true;
    struct gs__pod *p = find_uid(a, uid);
    if (p) {
        json_decref(p->obj);
        p->obj = json_incref(obj);
        if (gs__jstr(md, "deletionTimestamp")) begin_delete(a, p, md);
        /* The scheduler preempted it: stop its processes, keep the server's verdict. */
        else if (preempted(obj)) {
            begin_stop(a, p);
            p->gone = true;
        } else server_verdict(a, p, obj); /* evicted, or finished on the server */
        return true;
    }
    bool evicted = gs_nodelc_eviction_pending_json(obj), deleting = gs__jstr(md, "deletionTimestamp") != NULL;
    if (server_terminal(obj) && !evicted) return true;
    /* Admissions wait for the reconcile; confirmations do not. */
    if (a->reconciling && !evicted && !deleting) return false;
    if (!(p = pod_new(a, ns ? ns : "default", name, uid))) return true;
    if (deleting || evicted) { /* never started here: nothing to stop, only to confirm */
        p->restart_policy = strdup("Never");
        p->obj = json_incref(obj);
        if (!add_pod(a, p)) return true;
        if (deleting) begin_delete(a, p, md);
        else {
            p->evicted = true;
            begin_stop(a, p);
        }
        return true;
    }
    const char *phase = gs__jstr(json_object_get(obj, "status"), "phase");
    p->obj = json_incref(obj);
    const char *dev = gs__jstr(json_object_get(md, "annotations"), "gpusched.io/devices");
    const char *rp = gs__jstr(spec, "restartPolicy");
    p->devices = dev ? strdup(dev) : NULL;
    p->restart_policy = strdup(rp ? rp : "Always");
    add_pod(a, p);
    if (phase && !strcmp(phase, "Running")) {
        /* Running on the server but unknown here: its state went with the agent's. */
        fail_pod(p, "Lost", "the node agent restarted without a record of this pod");
        save_pod(p);
        return true;
    }
    start_pod(a, p);
    return true;
}

/* Confirms an eviction once the pod's processes are gone: the condition
 * ProcessesStopped=True on the server's status (its phase kept), which lets
 * the node lifecycle release the devices and re-create the pod. True when
 * done - also when the server no longer waits for it. */
static bool confirm_evicted(struct gs_agent *a, struct gs__pod *p, int64_t now)
{
    if (now < p->next_confirm_ns) return false;
    for (int attempt = 0; attempt < 2; attempt++) {
        if (!p->obj || !still_ours(a, p, p->obj) || !gs_nodelc_eviction_pending_json(p->obj)) return true;
        json_t *obj = json_deep_copy(p->obj), *out = NULL;
        gs__pod_set_condition(obj, GS_COND_PROCESSES_STOPPED, "True", "StoppedByNode",
                              "the node agent stopped the pod's processes after its eviction");
        int err = gs_client_update(a->cl, pods_res(), p->ns, p->name, "status", obj, &out);
        json_decref(obj);
        if (!err) {
            json_decref(out);
            gs_log(GS_LOG_INFO, "agent: eviction confirmed, processes stopped", "pod", p->key, NULL);
            return true;
        }
        json_decref(out);
        out = NULL;
        if (err == GS_ENOENT) return true;
        if (err != GS_ECONFLICT || gs_client_get(a->cl, pods_res(), p->ns, p->name, &out)) {
            json_decref(out);
            break;
        }
        json_decref(p->obj);
        p->obj = out;
    }
    p->next_confirm_ns = now + 1000000000LL;
    return false;
}

int gs__pods_stopping(struct gs_agent *a)
{
    int n = 0;
    for (size_t i = 0; i < a->npods; i++) {
        const struct gs__pod *q = a->pods[i];
        /* Not graceful deletions: the server holds their GPUs until they confirm. */
        n += q->terminating && !q->deleting && (q->gone || q->evicted);
    }
    return n;
}

/*--- The tick ---*/

static bool wants_restart(const struct gs__pod *p, int code)
{
    if (!strcmp(p->restart_policy, "Always")) return true;
    return !strcmp(p->restart_policy, "OnFailure") && code != 0;
}

static void poll_ctr(struct gs_agent *a, struct gs__pod *p, struct gs__ctr *c, int64_t now)
{
    if (c->state == GS_C_WAITING && !p->terminating && now >= c->next_start_ns) {
        c->restarts++;
        if (start_ctr(a, p, c) == 0) {
            p->dirty = true;
            gs__pod_event(a, p, c, "Normal", "Started", "Started container %s", c->name);
        } else {
            c->next_start_ns = now + RESTART_BACKOFF_MAX_NS;
        }
        return;
    }
    if (c->state != GS_C_RUNNING) return;
    char exitp[4096];
    ctr_path(p, c, "exit", exitp, sizeof exitp);
    bool done = false;
    int code = -1;
    if (gs_proc_poll(&c->proc, exitp, &done, &code) || !done) return;
    gs_proc_signal(&c->proc, SIGKILL); /* what the command left behind in its group goes with it */
    const char *rt_reason = gs__runc_ctr_finish(a, c, code); /* runc: OOMKilled, delete (agent_runc.c) */
    c->exit_code = code;
    c->finished = gs__wall_s();
    p->dirty = true;
    if (code < 0) set_reason(c, "Lost");
    else if (rt_reason) set_reason(c, rt_reason);
    if (!p->terminating && wants_restart(p, code)) {
        int64_t backoff = 1000000000LL << (c->restarts < 4 ? c->restarts : 4);
        c->state = GS_C_WAITING;
        c->next_start_ns = now + (backoff < RESTART_BACKOFF_MAX_NS ? backoff : RESTART_BACKOFF_MAX_NS);
        gs__pod_event(a, p, c, "Warning", "BackOff", "Back-off restarting failed container %s in pod %s_%s(%s)",
                      c->name, p->name, p->ns, p->uid);
        return;
    }
    c->state = GS_C_EXITED;
}

/* After polling: has the pod ended? */
static void settle(struct gs_agent *a, struct gs__pod *p)
{
    if (p->phase != GS_P_RUNNING) return;
    bool failed = false;
    for (size_t i = 0; i < p->nc; i++) {
        if (p->c[i].state != GS_C_EXITED) return;
        failed |= p->c[i].exit_code != 0;
    }
    p->phase = failed ? GS_P_FAILED : GS_P_SUCCEEDED;
    bool lost = false;
    for (size_t i = 0; i < p->nc; i++) lost |= p->c[i].exit_code < 0;
    if (lost) snprintf(p->reason, sizeof p->reason, "Lost");
    if (lost) snprintf(p->message, sizeof p->message, "a process ended while no agent watched it; its exit code is unknown");
    release(a, p);
    save_pod(p);
    p->dirty = true;
    gs_log(GS_LOG_INFO, "agent: pod finished", "pod", p->key, "phase", gs__phase_name(p->phase), NULL);
}

static bool stopped(struct gs_agent *a, struct gs__pod *p, int64_t now)
{
    bool all = true;
    for (size_t i = 0; i < p->nc; i++) {
        struct gs__ctr *c = &p->c[i];
        if (c->state != GS_C_RUNNING) continue;
        char exitp[4096];
        ctr_path(p, c, "exit", exitp, sizeof exitp);
        bool done = false;
        int code;
        if (gs_proc_poll(&c->proc, exitp, &done, &code) == 0 && done) {
            const char *why = gs__runc_ctr_finish(a, c, code); /* runc (agent_runc.c) */
            if (why) set_reason(c, why);
            c->state = GS_C_EXITED;
            c->exit_code = code;
            c->finished = gs__wall_s();
            continue;
        }
        if (now >= p->kill_at_ns) gs__ctr_signal(a, c, SIGKILL);
        all = false;
    }
    return all;
}

static void remove_at(struct gs_agent *a, size_t i)
{
    struct gs__pod *p = a->pods[i];
    pthread_mutex_lock(&a->mu);
    a->pods[i] = a->pods[--a->npods];
    pthread_mutex_unlock(&a->mu);
    for (size_t k = 0; k < p->nc; k++)
        if (p->c[k].runc_id) gs_runc_delete(&a->runc, p->c[k].runc_id); /* runc: state and cgroups */
    remove_dir(p->dir); /* with the bundles */
    gs_log(GS_LOG_INFO, "agent: pod removed", "pod", p->key, NULL);
    gs__pod_free(p);
}

/* Pods that the server no longer has here (deleted, re-created elsewhere). */
static void sweep(struct gs_agent *a)
{
    pthread_mutex_lock(&a->wmu);
    bool synced = a->desired_synced;
    for (size_t i = 0; synced && i < a->npods; i++) {
        struct gs__pod *p = a->pods[i];
        json_t *want = json_object_get(a->desired, p->key);
        const char *uid = want ? gs__jstr(json_object_get(want, "metadata"), "uid") : NULL;
        if (!uid || strcmp(uid, p->uid)) p->gone = true;
    }
    pthread_mutex_unlock(&a->wmu);
}

void gs__pods_tick(struct gs_agent *a)
{
    int64_t now = gs__mono_ns();
    sweep(a);
    for (size_t i = 0; i < a->npods;) {
        struct gs__pod *p = a->pods[i];
        if (p->gone) begin_stop(a, p);
        if (p->terminating) {
            if (!stopped(a, p, now)) {
                i++;
                continue;
            }
            release(a, p);
            if (p->deleting && !confirm_delete(a, p, now)) {
                i++;
                continue;
            }
            if (p->evicted && !p->gone) {
                if (!confirm_evicted(a, p, now)) {
                    i++;
                    continue;
                }
                p->gone = true;
            }
            if (p->gone) {
                remove_at(a, i);
                continue;
            }
            p->terminating = false;
        }
        if ((p->wait_dev_until_ns || (gs__dra_waiting(p) && !p->terminating)) && p->phase == GS_P_PENDING)
            start_pod(a, p);
        else if (p->retry_at_ns && now >= p->retry_at_ns && !p->terminating && p->phase == GS_P_PENDING)
            start_pod(a, p); /* runtime or image (agent_runc.c) */
        for (size_t k = 0; k < p->nc; k++) poll_ctr(a, p, &p->c[k], now);
        settle(a, p);
        if (p->dirty && atomic_load(&a->registered)) report(a, p);
        i++;
    }
}

void gs__pods_kill_all(struct gs_agent *a)
{
    for (size_t i = 0; i < a->npods; i++) begin_stop(a, a->pods[i]);
    int64_t until = gs__mono_ns() + 2LL * a->o.grace_ms * 1000000 + 1000000000;
    for (;;) {
        int64_t now = gs__mono_ns();
        bool all = true;
        for (size_t i = 0; i < a->npods; i++) all &= stopped(a, a->pods[i], now);
        if (all || now > until) break;
        usleep(20000);
    }
}

uint64_t gs__pods_alloc_mask(struct gs_agent *a)
{
    uint64_t m = 0;
    for (size_t i = 0; i < a->npods; i++)
        if (a->pods[i]->holds_devices)
            for (int k = 0; k < a->pods[i]->nslots; k++) m |= 1ull << a->pods[i]->slots[k];
    for (size_t i = 0; i < a->npods; i++) m |= a->pods[i]->holds_devices ? gs__dra_slots(a->pods[i]) : 0;
    return m;
}

json_t *gs__pod_report(const struct gs__pod *p)
{
    json_t *devs = json_array(), *cs = json_array();
    for (int k = 0; p->holds_devices && k < p->nslots; k++) json_array_append_new(devs, json_integer(p->slots[k]));
    for (size_t i = 0; i < p->nc; i++) {
        const struct gs__ctr *c = &p->c[i];
        static const char *sn[] = {"waiting", "running", "exited"};
        json_array_append_new(cs, json_pack("{s:s,s:i,s:s,s:i,s:i}", "name", c->name, "pid", (int)c->proc.pid, "state",
                                            sn[c->state], "exitCode", c->exit_code, "restarts", c->restarts));
    }
    return json_pack("{s:s,s:s,s:s,s:s,s:o,s:i,s:b,s:o}", "namespace", p->ns, "name", p->name, "uid", p->uid, "phase",
                     gs__phase_name(p->phase), "gpus", devs, "milli", p->milli, "terminating", p->terminating,
                     "containers", cs);
}

/*--- Recovery after a restart ---*/

static void recover_ctr(struct gs_agent *a, struct gs__pod *p, struct gs__ctr *c)
{
    char path[4096];
    ctr_path(p, c, "proc.json", path, sizeof path);
    json_t *pj = json_load_file(path, 0, NULL);
    c->proc.pid = (pid_t)json_integer_value(json_object_get(pj, "pid"));
    c->proc.start_ticks = (uint64_t)json_integer_value(json_object_get(pj, "start"));
    c->restarts = (int)json_integer_value(json_object_get(pj, "restarts"));
    c->started = json_integer_value(json_object_get(pj, "started"));
    json_decref(pj);
    long long v;
    if (!c->proc.pid) {
        ctr_path(p, c, "shim.pid", path, sizeof path);
        if (gs_read_int_file(path, &v) == 0) c->proc.pid = (pid_t)v;
    }
    c->proc.child = false;
    if (terminal(p->phase)) {
        c->state = GS_C_EXITED;
    } else if (gs_proc_alive(c->proc.pid, c->proc.start_ticks)) {
        c->state = GS_C_RUNNING; /* adopted */
        return;
    } else if ((ctr_path(p, c, "exit", path, sizeof path), access(path, F_OK) != 0) && gs__runc_ctr_adopt(a, c)) {
        c->state = GS_C_RUNNING; /* no shim, but runc runs it (agent_runc.c) */
        return;
    }
    ctr_path(p, c, "exit", path, sizeof path);
    struct stat st;
    if (gs_read_int_file(path, &v) == 0) {
        c->exit_code = (int)v;
        c->finished = stat(path, &st) == 0 ? st.st_mtime : gs__wall_s();
    } else if (!c->proc.pid && !terminal(p->phase)) {
        /* No process record, no shim pid, no exit code: the agent stopped
         * between checkpointing the pod and starting this container (the shim
         * writes its pid before it runs the command), so the command never ran.
         * Start it now; poll_ctr counts the start as a restart, hence the -1. */
        c->state = GS_C_WAITING;
        c->next_start_ns = 0;
        c->restarts--;
        return;
    } else {
        c->exit_code = -1;
        c->finished = gs__wall_s();
        set_reason(c, "Lost");
    }
    /* Not terminal yet: poll_ctr decides on restart or end, as for a live exit. */
    c->state = terminal(p->phase) ? GS_C_EXITED : GS_C_RUNNING;
}

static struct gs__pod *recover_one(struct gs_agent *a, const char *uid)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/pods/%s/pod.json", a->state_dir, uid);
    json_t *doc = json_load_file(path, 0, NULL);
    const char *ns = gs__jstr(doc, "namespace"), *name = gs__jstr(doc, "name");
    struct gs__pod *p = ns && name ? pod_new(a, ns, name, uid) : NULL;
    if (!p) {
        json_decref(doc);
        return NULL;
    }
    const char *dev = gs__jstr(doc, "devices"), *rp = gs__jstr(doc, "restartPolicy"), *ph = gs__jstr(doc, "phase");
    p->devices = dev ? strdup(dev) : NULL;
    p->restart_policy = strdup(rp ? rp : "Always");
    for (int i = 0; i < 4; i++)
        if (ph && !strcmp(ph, phase_names[i])) p->phase = (enum gs__phase)i;
    snprintf(p->reason, sizeof p->reason, "%s", gs__jstr(doc, "reason") ? gs__jstr(doc, "reason") : "");
    snprintf(p->message, sizeof p->message, "%s", gs__jstr(doc, "message") ? gs__jstr(doc, "message") : "");
    p->start_time = json_integer_value(json_object_get(doc, "startTime"));
    p->runc = gs__jstr(doc, "runtime") && !strcmp(gs__jstr(doc, "runtime"), "runc");
    char why[256];
    parse_devices(a, p, why, sizeof why);
    gs__mig_recover(p, doc); /* MIG instances (agent_mig.c) */
    gs__dra_recover(p, doc); /* resource claims (agent_dra.c) */
    json_t *ctrs = json_object_get(doc, "containers");
    p->c = calloc(json_array_size(ctrs) + 1, sizeof *p->c);
    size_t i;
    json_t *c;
    json_array_foreach(ctrs, i, c) {
        struct gs__ctr *x = &p->c[p->nc++];
        x->name = strdup(gs__jstr(c, "name") ? gs__jstr(c, "name") : "c");
        x->argv = strv_from_json(json_object_get(c, "argv"));
        x->env = strv_from_json(json_object_get(c, "env"));
        x->set_ids = json_is_true(json_object_get(c, "setIds"));
        x->uid = (uid_t)json_integer_value(json_object_get(c, "uid"));
        x->gid = (gid_t)json_integer_value(json_object_get(c, "gid"));
        if (gs__jstr(c, "runcId")) x->runc_id = strdup(gs__jstr(c, "runcId"));
        recover_ctr(a, p, x);
    }
    json_decref(doc);
    p->holds_devices = p->phase == GS_P_RUNNING && (p->nslots > 0 || p->mig); /* MIG (agent_mig.c) */
    p->dirty = true;
    return p;
}

void gs__pods_recover(struct gs_agent *a)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/pods", a->state_dir);
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        struct gs__pod *p = recover_one(a, e->d_name);
        if (!p) {
            char path[4400];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            remove_dir(path); /* a pod directory without a readable pod.json never started anything */
            continue;
        }
        if (p->holds_devices) attribute(a, p, true);
        gs_log(GS_LOG_INFO, "agent: pod recovered", "pod", p->key, "phase", gs__phase_name(p->phase), NULL);
        add_pod(a, p);
    }
    closedir(d);
}
