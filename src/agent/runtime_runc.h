/*
 * runtime_runc.h - the agent's runc driver: a container is an OCI bundle run
 * by runc (Debian's `runc`, a subprocess), under the same shim as the process
 * runtime (runtime.h).
 *
 * Per container the agent writes <pod dir>/<ctr>/bundle/config.json (from
 * gs_oci_spec_build, node/oci.h; the root file system is the image store's
 * unpacked rootfs, read-only) and hands the shim the command
 *
 *     runc --root <state_dir>/runc run --keep --bundle <bundle> <id>
 *
 * runc run stays in the foreground with the container's stdio on the shim's
 * log file and exits with the container's exit code (128+signal when it was
 * killed), which the shim writes to disk as for a process: the log, the exit
 * code on disk and the survival of an agent restart are the shim's. --keep
 * leaves the stopped container (and its cgroup) in place so the agent can
 * read whether the memory cgroup OOM-killed it before it deletes it with
 * `runc delete -f`, which also removes the cgroups; the bundle lives with the
 * pod directory and goes with it.
 *
 * Each container gets its own cgroup, linux.cgroupsPath = /gpusched/<id>,
 * so the agent knows where to look for the OOM counter (cgroup v1 memory
 * controller, memory.oom_control's oom_kill; cgroup v2 memory.events).
 * Signals go through `runc kill`, never to the shim's process group, since
 * the container's processes are in runc's pid namespace, not in that group.
 *
 * Container ids are "<pod uid>-<container name>" (runc wants [A-Za-z0-9_.+-]).
 * Thread: the agent's sync loop; runc commands are spawned with posix_spawn
 * and waited for (each takes some milliseconds).
 */
#ifndef GS_AGENT_RUNTIME_RUNC_H
#define GS_AGENT_RUNTIME_RUNC_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct gs_runc {
    const char *bin;   /* the runc binary; NULL: "runc" from PATH */
    const char *root;  /* runc's --root (its state directory), e.g. <state_dir>/runc */
};

/* The container id of pod uid's container ctr into out. 0, or GS_ERANGE. */
int gs_runc_id(const char *pod_uid, const char *ctr, char *out, size_t len);

/* Writes bundle_dir/config.json from spec (borrowed; linux.cgroupsPath is
 * set to /gpusched/<id> on a copy). 0, or GS_EIO with err naming the path. */
int gs_runc_bundle_write(const char *bundle_dir, const json_t *spec, const char *id, char *err, size_t errlen);

/* The shim's argv for `runc run`: NULL-terminated, caller frees each string
 * and the array. NULL when out of memory. */
char **gs_runc_run_argv(const struct gs_runc *r, const char *bundle_dir, const char *id);

/* `runc state <id>`: 0 with status ("created", "running", "paused",
 * "stopped") and the init pid; GS_ENOENT when runc knows no such container;
 * GS_EIO when runc could not be run or answered nonsense. */
int gs_runc_state(const struct gs_runc *r, const char *id, char *status, size_t sl, pid_t *pid);

/* `runc kill --all <id> <sig>`. 0, or GS_EIO (also when the container
 * is gone already: the caller polls the shim for the end). */
int gs_runc_kill(const struct gs_runc *r, const char *id, int sig);

/* Did the memory cgroup of container id OOM-kill a process? Read before
 * gs_runc_delete, which removes the cgroup. */
bool gs_runc_oom_killed(const char *id);

/* `runc delete -f <id>` and the container's cgroup directories (the
 * /gpusched parents stay). Idempotent. */
void gs_runc_delete(const struct gs_runc *r, const char *id);

/* Does the runc binary run? (`runc --version`.) */
bool gs_runc_available(const struct gs_runc *r);

#endif
