/*
 * runtime.c - containers as process groups under a shim; see runtime.h.
 *
 * Between fork and exec the child of a multi-threaded process may only make
 * async-signal-safe calls, so the shim path below uses open/write/dup2/
 * setsid/fork/execvp/waitpid/_exit and formats numbers by hand. Everything
 * that allocates (building argv and env, making directories) happens in the
 * agent before the fork.
 *
 * The shim is a fork of the agent, so it starts with every descriptor the
 * agent (or `gpusched up`'s server) holds: listening sockets, the store and
 * its WAL, client connections. O_CLOEXEC alone does not help, the shim never
 * execs; so its first act is to close everything above stderr
 * (close_range, else a getdents64 walk of /proc/self/fd, both
 * async-signal-safe). Otherwise a pod outliving a killed `up` would keep
 * its port bound and could write the store through /proc/self/fd.
 *
 * The command drops to the container's uid/gid (supplementary groups
 * cleared) after entering its working directory and before exec; the
 * directory is made its own beforehand, since the path above it (the
 * agent's state, under the 0700 data directory) is not reachable for it.
 *
 * The shim ignores SIGTERM through a do-nothing handler rather than SIG_IGN:
 * handlers are reset by exec, ignored dispositions are inherited, and the
 * command must still die of the SIGTERM sent to its group. The shim itself
 * only dies of SIGKILL, after which the agent (its parent) reports 137.
 */
#include "agent/runtime.h"
#include "core/error.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <grp.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/*--- Small helpers ---*/

int gs_mkdirs(const char *path)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return GS_ERANGE;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) && errno != EEXIST) return GS_EIO;
        *p = '/';
    }
    if (mkdir(buf, 0755) && errno != EEXIST) return GS_EIO;
    return 0;
}

/* Async-signal-safe decimal formatting; returns the length. */
static int fmt_ll(char *out, long long v)
{
    char tmp[24];
    int n = 0, len = 0;
    unsigned long long u = v < 0 ? (unsigned long long)(-(v + 1)) + 1 : (unsigned long long)v;
    do tmp[n++] = (char)('0' + u % 10); while (u /= 10);
    if (v < 0) out[len++] = '-';
    while (n) out[len++] = tmp[--n];
    out[len++] = '\n';
    return len;
}

static void write_num(const char *path, long long v)
{
    char tmp[4096], buf[32];
    size_t pl = strlen(path);
    if (pl + 5 >= sizeof tmp) return;
    memcpy(tmp, path, pl);
    memcpy(tmp + pl, ".tmp", 5);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return;
    int n = fmt_ll(buf, v);
    ssize_t w = write(fd, buf, (size_t)n);
    close(fd);
    if (w == n) rename(tmp, path);
}

static void say(int fd, const char *a, const char *b)
{
    if (write(fd, a, strlen(a)) < 0 || write(fd, b, strlen(b)) < 0 || write(fd, "\n", 1) < 0) return;
}

/*--- The shim (runs in the forked child) ---*/

struct linux_dirent64 {
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* Closes every descriptor >= 3. Async-signal-safe: raw syscalls, a stack
 * buffer, no allocation. The walk restarts after each batch of closes,
 * since closing while reading a directory may skip entries. */
void gs_proc_close_inherited(void)
{
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 3u, ~0u, 0u) == 0) return;
#endif
    for (int round = 0; round < 64; round++) {
        int dfd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd < 0) break;
        char buf[4096];
        int closed = 0;
        long n;
        while ((n = syscall(SYS_getdents64, dfd, buf, sizeof buf)) > 0) {
            for (long off = 0; off < n;) {
                struct linux_dirent64 *e = (struct linux_dirent64 *)(buf + off);
                off += e->d_reclen;
                int fd = 0;
                const char *c = e->d_name;
                if (*c < '0' || *c > '9') continue;
                while (*c >= '0' && *c <= '9') fd = fd * 10 + (*c++ - '0');
                if (fd >= 3 && fd != dfd && close(fd) == 0) closed++;
            }
        }
        close(dfd);
        if (!closed) return;
    }
    /* /proc not mounted: the slow, sure way. */
    struct rlimit rl;
    long max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (long)rl.rlim_cur : 65536;
    for (long fd = 3; fd < max; fd++) close((int)fd);
}

static void nothing(int sig) { (void)sig; }

static int wait_code(int st)
{
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return -1;
}

static void exec_command(const struct gs_proc_spec *s, int logfd)
{
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int nul = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nul >= 0) dup2(nul, 0);
    dup2(logfd, 1);
    dup2(logfd, 2);
    if (chdir(s->workdir) != 0) {
        say(2, "gpusched: cannot enter working directory ", s->workdir);
        _exit(126);
    }
    if (s->set_ids) {
        /* gid first: after setuid we may no longer change it. */
        if (setgroups(0, NULL) != 0 && getuid() == 0) {
            say(2, "gpusched: cannot clear supplementary groups", "");
            _exit(126);
        }
        if (setgid(s->gid) != 0 || setuid(s->uid) != 0) {
            say(2, "gpusched: cannot switch to the container's uid/gid", "");
            _exit(126);
        }
    }
    execvpe(s->argv[0], s->argv, s->env);
    say(2, "gpusched: cannot run ", s->argv[0]);
    _exit(errno == ENOENT ? 127 : 126);
}

static _Noreturn void shim(const struct gs_proc_spec *s)
{
    gs_proc_close_inherited();
    setsid();
    if (s->pid_path) write_num(s->pid_path, (long long)getpid());
    struct sigaction sa = {0};
    sa.sa_handler = nothing;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_DFL);
    int logfd = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (logfd < 0) _exit(125);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    pid_t c = fork();
    if (c < 0) _exit(125);
    if (c == 0) exec_command(s, logfd);
    close(logfd);
    int st = 0;
    while (waitpid(c, &st, 0) < 0 && errno == EINTR) {}
    int code = wait_code(st);
    write_num(s->exit_path, code);
    _exit(code < 0 ? 125 : code & 0xff);
}

/*--- Public ---*/

int gs_proc_start(const struct gs_proc_spec *s, struct gs_proc *out)
{
    memset(out, 0, sizeof *out);
    if (!s->argv || !s->argv[0]) return GS_EINVAL;
    if (gs_mkdirs(s->workdir)) return GS_EIO;
    if (s->set_ids && (chown(s->workdir, s->uid, s->gid) || chmod(s->workdir, 0700))) return GS_EIO;
    unlink(s->exit_path);
    pid_t pid = fork();
    if (pid < 0) return GS_EIO;
    if (pid == 0) shim(s);
    /* The group exists once the shim called setsid; wait for it so that a
     * signal sent right after start reaches the whole group. */
    for (int i = 0; i < 200 && getpgid(pid) != pid; i++) {
        struct timespec ts = {0, 250000};
        nanosleep(&ts, NULL);
    }
    out->pid = pid;
    out->child = true;
    out->start_ticks = gs_proc_start_ticks(pid);
    return 0;
}

int gs_read_int_file(const char *path, long long *out)
{
    FILE *f = fopen(path, "re");
    if (!f) return GS_ENOENT;
    long long v;
    int ok = fscanf(f, "%lld", &v) == 1;
    fclose(f);
    if (!ok) return GS_EPARSE;
    *out = v;
    return 0;
}

int gs_proc_poll(struct gs_proc *p, const char *exit_path, bool *done, int *code)
{
    *done = false;
    *code = -1;
    if (p->child) {
        int st = 0;
        pid_t r = waitpid(p->pid, &st, WNOHANG);
        if (r == 0) return 0;
        if (r == p->pid) {
            *done = true;
            long long v;
            /* The shim's own status mirrors the command's, unless the shim was
             * killed: then the command's code (if written) is the better answer. */
            if (WIFSIGNALED(st) && gs_read_int_file(exit_path, &v) == 0) *code = (int)v;
            else *code = wait_code(st);
            return 0;
        }
        if (errno != ECHILD) return GS_EIO;
        p->child = false; /* reaped elsewhere: fall through to the adopted path */
    }
    if (gs_proc_alive(p->pid, p->start_ticks)) return 0;
    *done = true;
    long long v;
    if (gs_read_int_file(exit_path, &v) == 0) *code = (int)v;
    return 0;
}

void gs_proc_signal(const struct gs_proc *p, int sig)
{
    if (p->pid > 0) kill(-p->pid, sig);
}

/* No live member left in the group? Zombies do not count: an orphan's
 * zombie waits for init to reap it, and some inits (a container's) never do. */
static bool group_gone(pid_t pgid)
{
    if (kill(-pgid, 0) != 0 && errno == ESRCH) return true;
    DIR *d = opendir("/proc");
    if (!d) return false;
    bool live = false;
    struct dirent *e;
    while (!live && (e = readdir(d))) {
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        char path[300], buf[512];
        snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
        FILE *f = fopen(path, "re");
        if (!f) continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = 0;
        char *p = strrchr(buf, ')'), state = 0;
        int ppid = 0, pgrp = 0;
        if (p && sscanf(p + 1, " %c %d %d", &state, &ppid, &pgrp) == 3 && pgrp == pgid)
            live = state != 'Z' && state != 'X';
    }
    closedir(d);
    return !live;
}

static void reap(struct gs_proc *p)
{
    if (p->child && waitpid(p->pid, NULL, WNOHANG) == p->pid) p->child = false;
}

static bool wait_gone(struct gs_proc *p, int ms)
{
    for (int t = 0; t <= ms; t += 10) {
        reap(p); /* an unreaped shim is a zombie, and a zombie keeps its group alive */
        if (group_gone(p->pid)) return true;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    return false;
}

bool gs_proc_stop(struct gs_proc *p, int grace_ms)
{
    if (p->pid <= 0) return true;
    if (!p->child && !gs_proc_alive(p->pid, p->start_ticks) && group_gone(p->pid)) return true;
    gs_proc_signal(p, SIGTERM);
    if (wait_gone(p, grace_ms)) return true;
    gs_proc_signal(p, SIGKILL);
    return wait_gone(p, grace_ms > 1000 ? grace_ms : 1000);
}

uint64_t gs_proc_start_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    /* comm may hold spaces and parentheses: fields resume after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p) return 0;
    p++;
    /* After ')': state is field 3; starttime is field 22. */
    for (int field = 2; field < 22 && p; field++) p = strchr(p + 1, ' ');
    return p ? strtoull(p + 1, NULL, 10) : 0;
}

bool gs_proc_alive(pid_t pid, uint64_t start_ticks)
{
    if (pid <= 0) return false;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X') return false; /* zombies are gone */
    return !start_ticks || gs_proc_start_ticks(pid) == start_ticks;
}

int gs_proc_pick_ids(const struct gs_ids_req *r, uid_t *uid, gid_t *gid, char *why, size_t wl)
{
    if (r->self_uid == 0) {
        *uid = r->run_as_user >= 0 ? (uid_t)r->run_as_user : r->default_uid;
        *gid = r->run_as_group >= 0 ? (gid_t)r->run_as_group : r->default_gid;
    } else {
        if (r->run_as_user >= 0 && (uid_t)r->run_as_user != r->self_uid) {
            snprintf(why, wl,
                     "securityContext.runAsUser %lld: the agent runs as uid %u, not root, and can only run "
                     "containers as itself",
                     r->run_as_user, (unsigned)r->self_uid);
            return -1;
        }
        if (r->run_as_group >= 0 && (gid_t)r->run_as_group != r->self_gid) {
            snprintf(why, wl,
                     "securityContext.runAsGroup %lld: the agent runs as gid %u, not root, and can only run "
                     "containers with its own group",
                     r->run_as_group, (unsigned)r->self_gid);
            return -1;
        }
        *uid = r->self_uid;
        *gid = r->self_gid;
    }
    if (r->run_as_non_root && *uid == 0) {
        snprintf(why, wl, "securityContext.runAsNonRoot is true but the container would run as uid 0 (root)");
        return -1;
    }
    return 0;
}
