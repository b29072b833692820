/*
 * etcd_fixture.h - a real single-member etcd for unit tests of the etcd
 * store: started on free loopback ports with its data in a scratch
 * directory, killed (SIGKILL, as a crash) and restarted on the same ports
 * and data, and stopped in teardown. The binary is GS_ETCD_BIN or
 * /usr/bin/etcd (Debian's etcd-server); a missing binary fails the test,
 * it is never skipped. Static functions: each test includes its own copy.
 */
#ifndef GS_TEST_ETCD_FIXTURE_H
#define GS_TEST_ETCD_FIXTURE_H

#include "tmpdir_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct fx_etcd {
    char dir[64];
    int client_port, peer_port;
    char url[64];
    pid_t pid;
};

__attribute__((unused)) static int fx_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && !bind(fd, (struct sockaddr *)&a, sizeof a) && !getsockname(fd, (struct sockaddr *)&a, &len))
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

static const char *fx_etcd_bin(void)
{
    const char *b = getenv("GS_ETCD_BIN");
    return b && *b ? b : "/usr/bin/etcd";
}

static bool fx_port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = fd >= 0 && !connect(fd, (struct sockaddr *)&a, sizeof a);
    if (fd >= 0) close(fd);
    return ok;
}

/* Starts (or restarts) the member; waits until its client port accepts.
 * 0, or -1 with the reason on stderr. */
static int fx_etcd_run(struct fx_etcd *e)
{
    if (access(fx_etcd_bin(), X_OK)) {
        fprintf(stderr, "etcd fixture: %s is not an executable (%s): install Debian's etcd-server "
                "(scripts/install-deps.sh) or set GS_ETCD_BIN\n", fx_etcd_bin(), strerror(errno));
        return -1;
    }
    char data[128], log[128], cu[64], pu[64], cluster[96];
    snprintf(data, sizeof data, "%s/data", e->dir);
    snprintf(log, sizeof log, "%s/etcd.log", e->dir);
    snprintf(cu, sizeof cu, "http://127.0.0.1:%d", e->client_port);
    snprintf(pu, sizeof pu, "http://127.0.0.1:%d", e->peer_port);
    snprintf(cluster, sizeof cluster, "t=%s", pu);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* a test that dies leaves no etcd behind */
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execl(fx_etcd_bin(), fx_etcd_bin(), "--name", "t", "--data-dir", data, "--listen-client-urls", cu,
              "--advertise-client-urls", cu, "--listen-peer-urls", pu, "--initial-advertise-peer-urls", pu,
              "--initial-cluster", cluster, "--initial-cluster-state", "new", (char *)NULL);
        _exit(127);
    }
    e->pid = pid;
    for (int i = 0; i < 200; i++) { /* 10 s */
        if (fx_port_open(e->client_port)) return 0;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            fprintf(stderr, "etcd fixture: etcd exited at start (see %s)\n", log);
            e->pid = 0;
            return -1;
        }
        struct timespec ts = {0, 50000000};
        nanosleep(&ts, NULL);
    }
    fprintf(stderr, "etcd fixture: etcd did not listen on %s within 10 s (see %s)\n", cu, log);
    return -1;
}

/* A fresh member in a new scratch directory. */
__attribute__((unused)) static int fx_etcd_start(struct fx_etcd *e)
{
    memset(e, 0, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/gs-etcd-XXXXXX");
    if (!mkdtemp(e->dir)) return -1;
    e->client_port = fx_free_port();
    e->peer_port = fx_free_port();
    while (e->peer_port == e->client_port) e->peer_port = fx_free_port();
    snprintf(e->url, sizeof e->url, "http://127.0.0.1:%d", e->client_port);
    return fx_etcd_run(e);
}

/* kill -9, as a crash; the data stays for a restart. */
__attribute__((unused)) static void fx_etcd_kill(struct fx_etcd *e)
{
    if (e->pid > 0) {
        kill(e->pid, SIGKILL);
        waitpid(e->pid, NULL, 0);
    }
    e->pid = 0;
}

__attribute__((unused)) static int fx_etcd_restart(struct fx_etcd *e) { return fx_etcd_run(e); }

/* Kills the member and removes its directory. */
__attribute__((unused)) static void fx_etcd_stop(struct fx_etcd *e)
{
    fx_etcd_kill(e);
    if (e->dir[0]) fx_rm_tree(e->dir);
    e->dir[0] = 0;
}

#endif
