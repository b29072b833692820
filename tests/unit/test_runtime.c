/*
 * test_runtime.c - the agent's process runner: exit codes through the shim,
 * environment, working directory and log, SIGTERM reaching the whole group,
 * SIGKILL after the grace period, identity by start time, adoption by a
 * process that is not the parent, no inherited descriptor reaching the
 * command (nor the shim), the uid/gid choice and the switch to it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "agent/runtime.h"
#include "core/error.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct fx {
    char dir[256], work[300], log[300], exitp[300], pidp[300];
};

static void fx_init(struct fx *f)
{
    snprintf(f->dir, sizeof f->dir, "/tmp/gs-test-runtime-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->work, sizeof f->work, "%s/work/sub", f->dir);
    snprintf(f->log, sizeof f->log, "%s/log", f->dir);
    snprintf(f->exitp, sizeof f->exitp, "%s/exit", f->dir);
    snprintf(f->pidp, sizeof f->pidp, "%s/shim.pid", f->dir);
}

static void fx_clean(struct fx *f)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    assert_int_equal(system(cmd), 0);
}

static int run_sh(struct fx *f, const char *script, struct gs_proc *p)
{
    char *argv[] = {"sh", "-c", (char *)script, NULL};
    char *env[] = {"PATH=/usr/bin:/bin", "GREETING=hello", NULL};
    struct gs_proc_spec s = {argv, env, f->work, f->log, f->exitp, f->pidp, false, 0, 0};
    return gs_proc_start(&s, p);
}

static int wait_exit(struct gs_proc *p, const char *exitp, int ms)
{
    for (int t = 0; t < ms; t += 10) {
        bool done;
        int code;
        assert_int_equal(gs_proc_poll(p, exitp, &done, &code), 0);
        if (done) return code;
        usleep(10000);
    }
    fail_msg("process did not exit in %d ms", ms);
    return -1;
}

static char *slurp(const char *path)
{
    static char buf[4096];
    FILE *fp = fopen(path, "r");
    assert_non_null(fp);
    size_t n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = 0;
    return buf;
}

static void test_exit_code_env_cwd_log(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f);
    struct gs_proc p;
    assert_int_equal(run_sh(&f, "echo $GREETING; pwd; echo err >&2; exit 7", &p), 0);
    assert_true(p.pid > 0 && p.child && p.start_ticks > 0);
    assert_int_equal(wait_exit(&p, f.exitp, 5000), 7);
    char want[400];
    snprintf(want, sizeof want, "hello\n%s\nerr\n", f.work);
    assert_string_equal(slurp(f.log), want);
    long long v;
    assert_int_equal(gs_read_int_file(f.exitp, &v), 0);
    assert_int_equal(v, 7);
    assert_int_equal(gs_read_int_file(f.pidp, &v), 0);
    assert_int_equal(v, p.pid);
    fx_clean(&f);
}

static void test_missing_command_exits_127(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f);
    char *argv[] = {"/nonexistent/gpusched-no-such-binary", NULL};
    char *env[] = {NULL};
    struct gs_proc_spec s = {argv, env, f.work, f.log, f.exitp, NULL, false, 0, 0};
    struct gs_proc p;
    assert_int_equal(gs_proc_start(&s, &p), 0);
    assert_int_equal(wait_exit(&p, f.exitp, 5000), 127);
    assert_non_null(strstr(slurp(f.log), "cannot run"));
    fx_clean(&f);
}

static void test_sigterm_reaches_the_group(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f);
    struct gs_proc p;
    char script[512];
    /* The trap is set before the child file appears, so a SIGTERM sent as soon
     * as the file exists always finds it. */
    snprintf(script, sizeof script, "trap 'exit 9' TERM; sleep 60 & echo $! > %s/child; wait", f.dir);
    assert_int_equal(run_sh(&f, script, &p), 0);
    char cpath[300];
    snprintf(cpath, sizeof cpath, "%s/child", f.dir);
    long long child = 0;
    for (int t = 0; t < 500 && gs_read_int_file(cpath, &child); t++) usleep(10000);
    assert_true(child > 0);
    assert_true(gs_proc_alive((pid_t)child, 0));
    assert_true(gs_proc_stop(&p, 3000));
    assert_false(gs_proc_alive((pid_t)child, 0));
    long long v;
    assert_int_equal(gs_read_int_file(f.exitp, &v), 0);
    assert_int_equal(v, 9); /* the shell's trap ran: it got SIGTERM, not SIGKILL */
    fx_clean(&f);
}

static void test_sigkill_after_grace(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f);
    struct gs_proc p;
    assert_int_equal(run_sh(&f, "trap '' TERM; while :; do sleep 0.05; done", &p), 0);
    usleep(100000);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    assert_true(gs_proc_stop(&p, 300));
    clock_gettime(CLOCK_MONOTONIC, &b);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    assert_true(s >= 0.29 && s < 3.0);
    assert_false(gs_proc_alive(p.pid, p.start_ticks));
    fx_clean(&f);
}

static void test_identity_by_start_time(void **state)
{
    (void)state;
    uint64_t me = gs_proc_start_ticks(getpid());
    assert_true(me > 0);
    assert_true(gs_proc_alive(getpid(), me));
    assert_false(gs_proc_alive(getpid(), me + 1)); /* same pid, another process */
    assert_false(gs_proc_alive(0, 0));
    assert_int_equal(gs_proc_start_ticks(-5), 0);
}

/* A process that is not our child (as after an agent restart) is polled
 * through /proc and its exit code read from the shim's file. */
static void test_adopted_process(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f);
    struct gs_proc p;
    assert_int_equal(run_sh(&f, "sleep 0.3; exit 4", &p), 0);
    struct gs_proc adopted = {.pid = p.pid, .start_ticks = p.start_ticks, .child = false};
    bool done;
    int code;
    assert_int_equal(gs_proc_poll(&adopted, f.exitp, &done, &code), 0);
    assert_false(done);
    /* The real parent reaps, as init would. */
    assert_int_equal(wait_exit(&p, f.exitp, 5000), 4);
    assert_int_equal(gs_proc_poll(&adopted, f.exitp, &done, &code), 0);
    assert_true(done);
    assert_int_equal(code, 4);
    fx_clean(&f);
}

static void test_mkdirs(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f);
    char deep[400];
    snprintf(deep, sizeof deep, "%s/a/b/c", f.dir);
    assert_int_equal(gs_mkdirs(deep), 0);
    assert_int_equal(gs_mkdirs(deep), 0);
    struct stat st;
    assert_int_equal(stat(deep, &st), 0);
    assert_true(S_ISDIR(st.st_mode));
    assert_int_equal(gs_mkdirs("/proc/gs-cannot/x"), GS_EIO);
    fx_clean(&f);
}


/* A descriptor of the agent (a plain one and a listening socket, neither
 * CLOEXEC) reaches neither the command nor the shim, which lives as long. */
static void test_no_inherited_descriptors(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f);
    int plain = open("/dev/null", O_RDONLY); /* deliberately without O_CLOEXEC */
    int sock = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(plain >= 3 && sock >= 3);
    struct gs_proc p;
    assert_int_equal(run_sh(&f, "ls /proc/self/fd; echo end; sleep 5", &p), 0);
    for (int t = 0; t < 500 && (access(f.log, F_OK) || !strstr(slurp(f.log), "end")); t++) usleep(10000);
    /* ls lists 0 1 2 and its own directory descriptor (3): nothing else. */
    char *out = slurp(f.log);
    int n = 0, fds[16];
    for (char *tok = strtok(out, "\n"); tok && n < 16 && strcmp(tok, "end"); tok = strtok(NULL, "\n"))
        fds[n++] = atoi(tok);
    assert_true(n >= 3 && n <= 4);
    for (int i = 0; i < n; i++) assert_true(fds[i] <= 3);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)p.pid, plain);
    assert_int_equal(access(path, F_OK), -1); /* the shim closed them too */
    snprintf(path, sizeof path, "/proc/%d/fd/%d", (int)p.pid, sock);
    assert_int_equal(access(path, F_OK), -1);
    gs_proc_stop(&p, 1000);
    close(plain);
    close(sock);
    fx_clean(&f);
}

static void test_pick_ids(void **state)
{
    (void)state;
    uid_t u;
    gid_t g;
    char why[300];
    /* A root agent: the pod's ids, else the default. */
    struct gs_ids_req r = {-1, -1, false, 65534, 65534, 0, 0};
    assert_int_equal(gs_proc_pick_ids(&r, &u, &g, why, sizeof why), 0);
    assert_int_equal(u, 65534);
    assert_int_equal(g, 65534);
    r.run_as_user = 1234, r.run_as_group = 77;
    assert_int_equal(gs_proc_pick_ids(&r, &u, &g, why, sizeof why), 0);
    assert_int_equal(u, 1234);
    assert_int_equal(g, 77);
    r.run_as_user = 0; /* root when asked, unless runAsNonRoot */
    assert_int_equal(gs_proc_pick_ids(&r, &u, &g, why, sizeof why), 0);
    assert_int_equal(u, 0);
    r.run_as_non_root = true;
    assert_int_equal(gs_proc_pick_ids(&r, &u, &g, why, sizeof why), -1);
    assert_non_null(strstr(why, "runAsNonRoot"));
    /* An agent that is not root: itself only. */
    struct gs_ids_req n = {-1, -1, false, 65534, 65534, 1000, 1000};
    assert_int_equal(gs_proc_pick_ids(&n, &u, &g, why, sizeof why), 0);
    assert_int_equal(u, 1000);
    assert_int_equal(g, 1000);
    n.run_as_user = 1000;
    assert_int_equal(gs_proc_pick_ids(&n, &u, &g, why, sizeof why), 0);
    n.run_as_user = 2000;
    assert_int_equal(gs_proc_pick_ids(&n, &u, &g, why, sizeof why), -1);
    assert_non_null(strstr(why, "runAsUser 2000"));
    assert_non_null(strstr(why, "uid 1000, not root"));
    n.run_as_user = -1, n.run_as_group = 5;
    assert_int_equal(gs_proc_pick_ids(&n, &u, &g, why, sizeof why), -1);
    assert_non_null(strstr(why, "runAsGroup 5"));
}

/* As root (CI), the command runs as the uid/gid asked, without supplementary
 * groups, in a working directory it owns. Not root: the switch is refused by
 * the kernel, and the command never runs as someone else. */
static void test_runs_as_uid(void **state)
{
    (void)state;
    struct fx f;
    fx_init(&f);
    char *argv[] = {"sh", "-c", "id -u; id -g; id -G; touch ./mine && echo wrote", NULL};
    char *env[] = {"PATH=/usr/bin:/bin", NULL};
    struct gs_proc_spec s = {argv, env, f.work, f.log, f.exitp, NULL, true, 65534, 65534};
    struct gs_proc p;
    if (geteuid() != 0) {
        assert_int_equal(gs_proc_start(&s, &p), GS_EIO); /* cannot chown the working directory */
        fx_clean(&f);
        return;
    }
    assert_int_equal(gs_proc_start(&s, &p), 0);
    assert_int_equal(wait_exit(&p, f.exitp, 5000), 0);
    assert_string_equal(slurp(f.log), "65534\n65534\n65534\nwrote\n");
    struct stat st;
    assert_int_equal(stat(f.work, &st), 0);
    assert_int_equal(st.st_uid, 65534);
    assert_int_equal(st.st_mode & 0777, 0700);
    fx_clean(&f);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_code_env_cwd_log), cmocka_unit_test(test_missing_command_exits_127),
        cmocka_unit_test(test_sigterm_reaches_the_group), cmocka_unit_test(test_sigkill_after_grace),
        cmocka_unit_test(test_identity_by_start_time), cmocka_unit_test(test_adopted_process),
        cmocka_unit_test(test_mkdirs), cmocka_unit_test(test_no_inherited_descriptors),
        cmocka_unit_test(test_pick_ids), cmocka_unit_test(test_runs_as_uid),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
