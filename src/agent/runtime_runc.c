/*
 * runtime_runc.c - runc as a subprocess: bundles, run argv, state, kill,
 * delete, and the OOM verdict from the container's memory cgroup; see
 * runtime_runc.h.
 *
 * runc is spawned with posix_spawn (safe from a multi-threaded agent) with
 * stdin on /dev/null, stdout on a pipe when the answer is wanted (state) and
 * stderr discarded; its exit status decides. `runc state` prints JSON, read
 * with jansson.
 */
#include "agent/runtime_runc.h"
#include "agent/runtime.h"
#include "core/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define CGROUP_ROOT "/sys/fs/cgroup"
#define CGROUP_PARENT "gpusched"

/*--- Spawning runc ---*/

/* Runs argv; the exit code (or -1), stdout into out (may be NULL). */
static int run_cmd(char *const *argv, char *out, size_t outlen)
{
    int pfd[2] = {-1, -1};
    if (out && pipe2(pfd, O_CLOEXEC)) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    if (out) posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    else posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    pid_t pid;
    int rc = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    if (out) close(pfd[1]);
    if (rc) {
        if (out) close(pfd[0]);
        return -1;
    }
    size_t n = 0;
    if (out) {
        ssize_t k;
        while ((k = read(pfd[0], out + n, outlen - 1 - n)) > 0 || (k < 0 && errno == EINTR))
            if (k > 0 && (n += (size_t)k) >= outlen - 1) break;
        out[n] = 0;
        close(pfd[0]);
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static const char *bin(const struct gs_runc *r) { return r->bin ? r->bin : "runc"; }

/*--- Public ---*/

int gs_runc_id(const char *pod_uid, const char *ctr, char *out, size_t len)
{
    int n = snprintf(out, len, "%s-%s", pod_uid, ctr);
    if (n < 0 || (size_t)n >= len) return GS_ERANGE;
    for (char *p = out; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-' ||
              *p == '_' || *p == '.'))
            *p = '_';
    return 0;
}

int gs_runc_bundle_write(const char *bundle_dir, const json_t *spec, const char *id, char *err, size_t errlen)
{
    if (gs_mkdirs(bundle_dir)) {
        snprintf(err, errlen, "cannot create the bundle directory %s: %s", bundle_dir, strerror(errno));
        return GS_EIO;
    }
    json_t *doc = json_deep_copy(spec);
    json_t *linux_ = json_object_get(doc, "linux");
    if (!json_is_object(linux_)) json_object_set_new(doc, "linux", linux_ = json_object());
    char cg[300];
    snprintf(cg, sizeof cg, "/" CGROUP_PARENT "/%s", id);
    json_object_set_new(linux_, "cgroupsPath", json_string(cg));
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/config.json", bundle_dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int rc = json_dump_file(doc, tmp, JSON_INDENT(1)) || rename(tmp, path) ? GS_EIO : 0;
    json_decref(doc);
    if (rc) snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
    return rc;
}

char **gs_runc_run_argv(const struct gs_runc *r, const char *bundle_dir, const char *id)
{
    const char *v[] = {bin(r), "--root", r->root, "run", "--keep", "--bundle", bundle_dir, id};
    size_t n = sizeof v / sizeof v[0];
    char **out = calloc(n + 1, sizeof *out);
    for (size_t i = 0; out && i < n; i++)
        if (!(out[i] = strdup(v[i]))) {
            for (size_t k = 0; k < i; k++) free(out[k]);
            free(out);
            return NULL;
        }
    return out;
}

int gs_runc_state(const struct gs_runc *r, const char *id, char *status, size_t sl, pid_t *pid)
{
    char *argv[] = {(char *)bin(r), "--root", (char *)r->root, "state", (char *)id, NULL};
    char out[8192];
    int rc = run_cmd(argv, out, sizeof out);
    if (rc < 0) return GS_EIO;
    if (rc != 0) return GS_ENOENT; /* "container does not exist" */
    json_t *doc = json_loads(out, 0, NULL);
    const char *st = json_string_value(json_object_get(doc, "status"));
    if (!st) {
        json_decref(doc);
        return GS_EIO;
    }
    snprintf(status, sl, "%s", st);
    if (pid) *pid = (pid_t)json_integer_value(json_object_get(doc, "pid"));
    json_decref(doc);
    return 0;
}

int gs_runc_kill(const struct gs_runc *r, const char *id, int sig)
{
    char s[16];
    snprintf(s, sizeof s, "%d", sig);
    char *argv[] = {(char *)bin(r), "--root", (char *)r->root, "kill", "--all", (char *)id, s, NULL};
    return run_cmd(argv, NULL, 0) == 0 ? 0 : GS_EIO;
}

/* Reads "key N" lines of a cgroup file; N of key, or -1. */
static long long cg_key(const char *path, const char *key)
{
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    char line[256];
    long long v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ' ') v = atoll(line + kl + 1);
    fclose(f);
    return v;
}

bool gs_runc_oom_killed(const char *id)
{
    char path[600];
    /* cgroup v1 (also the memory controller of a hybrid layout) */
    snprintf(path, sizeof path, CGROUP_ROOT "/memory/" CGROUP_PARENT "/%s/memory.oom_control", id);
    if (cg_key(path, "oom_kill") > 0) return true;
    /* cgroup v2 */
    snprintf(path, sizeof path, CGROUP_ROOT "/" CGROUP_PARENT "/%s/memory.events", id);
    return cg_key(path, "oom_kill") > 0;
}

/* rmdir /sys/fs/cgroup/<h>/gpusched/<id> for every hierarchy h (and v2's
 * /sys/fs/cgroup/gpusched/<id>). The /gpusched parents stay, as kubelet's
 * kubepods does: removing one could race a container being created in it. */
static void cgroups_remove(const char *id)
{
    char path[700];
    snprintf(path, sizeof path, CGROUP_ROOT "/" CGROUP_PARENT "/%s", id);
    rmdir(path);
    DIR *d = opendir(CGROUP_ROOT);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || !strcmp(e->d_name, CGROUP_PARENT)) continue;
        snprintf(path, sizeof path, CGROUP_ROOT "/%s/" CGROUP_PARENT "/%s", e->d_name, id);
        rmdir(path);
    }
    closedir(d);
}

void gs_runc_delete(const struct gs_runc *r, const char *id)
{
    char *argv[] = {(char *)bin(r), "--root", (char *)r->root, "delete", "-f", (char *)id, NULL};
    run_cmd(argv, NULL, 0);
    cgroups_remove(id);
}

bool gs_runc_available(const struct gs_runc *r)
{
    char *argv[] = {(char *)bin(r), "--version", NULL};
    return run_cmd(argv, NULL, 0) == 0;
}
