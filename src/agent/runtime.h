/*
 * runtime.h - the node agent's process runner: a container is a process
 * group on this machine, not a namespace sandbox.
 *
 * Each container runs under a small shim: a forked copy of the agent that
 * starts its own session (so the container is one process group the agent
 * can signal as a whole), forks the command with the container's
 * environment, working directory and log file (stdout and stderr appended),
 * waits for it and writes its exit code to a file before exiting with the
 * same code. The shim is what makes an agent restart harmless: a process
 * whose parent died is reaped by init, and its exit code would be lost; the
 * shim leaves it on disk for whichever agent comes next.
 *
 * Identity across restarts is (pid, start time in clock ticks since boot,
 * from /proc/<pid>/stat): a pid reused by another process has another start
 * time, so a stale checkpoint never adopts a stranger.
 *
 * Not thread-safe per container; different containers may be driven from
 * different threads. Only async-signal-safe calls run between fork and exec.
 */
#ifndef GS_AGENT_RUNTIME_H
#define GS_AGENT_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct gs_proc_spec {
    char *const *argv;      /* argv[0] is looked up in PATH */
    char *const *env;       /* full environment, "K=V", NULL-terminated */
    const char *workdir;    /* created when absent */
    const char *log_path;   /* stdout+stderr, appended */
    const char *exit_path;  /* the shim writes the exit code here */
    const char *pid_path;   /* the shim writes its pid here first thing (may be NULL) */
    bool set_ids;           /* run the command as uid/gid (workdir chowned to them) */
    uid_t uid;
    gid_t gid;
};

struct gs_proc {
    pid_t pid;              /* the shim: leader of the container's process group */
    uint64_t start_ticks;   /* its start time; 0 when unknown */
    bool child;             /* ours to reap with waitpid (false once adopted) */
};

/* Starts a container. 0, or GS_EIO (fork failed, directory not creatable).
 * A command that cannot be exec'd exits 127 with the reason in its log. */
int gs_proc_start(const struct gs_proc_spec *s, struct gs_proc *out);

/* Has it ended? 0 with *done false while it runs; *done true and *code its
 * exit code (128+signal when killed; read from exit_path when the shim was
 * not our child; -1 when nobody knows). */
int gs_proc_poll(struct gs_proc *p, const char *exit_path, bool *done, int *code);

/* Sends sig to the whole process group. */
void gs_proc_signal(const struct gs_proc *p, int sig);

/* SIGTERM to the group, then SIGKILL after grace_ms if anything is left;
 * waits (polling) until the group is gone or another grace_ms passed.
 * Returns true when it is gone. */
bool gs_proc_stop(struct gs_proc *p, int grace_ms);

/* Is pid alive with this start time (start 0: any)? */
bool gs_proc_alive(pid_t pid, uint64_t start_ticks);
/* Start time of pid in clock ticks since boot, or 0. */
uint64_t gs_proc_start_ticks(pid_t pid);

/* Closes every descriptor >= 3 (close_range, else a walk of /proc/self/fd).
 * Async-signal-safe; the shim calls it first thing after fork. */
void gs_proc_close_inherited(void);

/* Who a container runs as: what the pod asks (-1: not asked), the agent's
 * default for pods (used when the agent is root) and the agent's own ids. */
struct gs_ids_req {
    long long run_as_user, run_as_group; /* securityContext; -1 when absent */
    bool run_as_non_root;                /* securityContext.runAsNonRoot */
    uid_t default_uid;                   /* --pod-uid (65534) */
    gid_t default_gid;                   /* --pod-gid (65534) */
    uid_t self_uid;                      /* geteuid() of the agent */
    gid_t self_gid;
};

/* Picks the uid/gid of a container. A root agent runs it as asked, else as
 * the default; an agent that is not root can only run it as itself, so
 * another uid or gid is refused. runAsNonRoot with uid 0 is refused.
 * 0, or -1 with why filled. */
int gs_proc_pick_ids(const struct gs_ids_req *r, uid_t *uid, gid_t *gid, char *why, size_t wl);

/* mkdir -p. 0, GS_ERANGE (too long) or GS_EIO. */
int gs_mkdirs(const char *path);

/* Reads the first integer of a small file; GS_ENOENT / GS_EPARSE. */
int gs_read_int_file(const char *path, long long *out);

#endif
