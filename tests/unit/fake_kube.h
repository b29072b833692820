/*
 * fake_kube.h - a scripted loopback API server for the informer tests: each
 * request (method, path with query, body) goes to the test's handler, which
 * writes the whole answer to the socket itself, so it can page, answer 410
 * or 429 with Retry-After, stream watch events slowly, cut a stream inside
 * an event, or hold a watch open until the test ends. One thread per
 * connection; every answer closes its connection. The server also records
 * each request line for the tests that check what was asked. Static
 * functions: each test executable includes its own copy.
 */
#ifndef GS_TEST_FAKE_KUBE_H
#define GS_TEST_FAKE_KUBE_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct fake_kube;

struct fk_req {
    char method[16];
    char path[4096]; /* with the query */
    char body[8192];
    char agent[128]; /* the User-Agent header */
    int seq;         /* 0 for the first request the server got */
};

/* Writes the answer to fd. Runs on the connection's thread; may block
 * (check fk_stopping) and is called concurrently for parallel requests. */
typedef void (*fk_handler)(struct fake_kube *f, int fd, const struct fk_req *r);

struct fake_kube {
    int fd, port;
    pthread_t th;
    fk_handler handler;
    void *arg;             /* the test's state */
    pthread_mutex_t mu;    /* log and the test's state */
    char log[256][160];    /* "METHOD path" of each request */
    atomic_int requests, active;
    atomic_bool stop;
};

struct fk_conn {
    struct fake_kube *f;
    int fd;
};

__attribute__((unused)) static bool fk_stopping(struct fake_kube *f) { return atomic_load(&f->stop); }

__attribute__((unused)) static void fk_write(int fd, const char *s, size_t n)
{
    while (n) {
        ssize_t k = send(fd, s, n, MSG_NOSIGNAL);
        if (k <= 0) return;
        s += k;
        n -= (size_t)k;
    }
}

/* A whole answer: status line, optional extra header lines ("Retry-After: 1\r\n"), JSON body. */
__attribute__((unused)) static void fk_reply(int fd, int code, const char *extra, const char *body)
{
    char head[512];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %d X\r\nContent-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n%s\r\n",
                     code, strlen(body), extra ? extra : "");
    fk_write(fd, head, (size_t)n);
    fk_write(fd, body, strlen(body));
}

/* A Status answer with code and reason. */
__attribute__((unused)) static void fk_status(int fd, int code, const char *extra, const char *reason, const char *msg)
{
    char body[1024];
    snprintf(body, sizeof body,
             "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"code\":%d,\"reason\":\"%s\","
             "\"message\":\"%s\"}",
             code, reason, msg);
    fk_reply(fd, code, extra, body);
}

/* The head of a streamed watch answer (then fk_line per event). */
__attribute__((unused)) static void fk_stream_head(int fd)
{
    const char *h = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n";
    fk_write(fd, h, strlen(h));
}

__attribute__((unused)) static void fk_line(int fd, const char *line)
{
    fk_write(fd, line, strlen(line));
    fk_write(fd, "\n", 1);
}

/* Holds a watch open for up to secs seconds, until the client goes or the server stops. */
__attribute__((unused)) static void fk_hold(struct fake_kube *f, int fd, double secs)
{
    for (int i = 0; i < (int)(secs * 20) && !fk_stopping(f); i++) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) > 0) {
            char b[256];
            if (recv(fd, b, sizeof b, MSG_DONTWAIT) == 0) return;
        }
    }
}

/* The value of query parameter key in path ("" when absent; not unescaped). */
__attribute__((unused)) static const char *fk_query(const char *path, const char *key, char *buf, size_t len)
{
    buf[0] = 0;
    const char *q = strchr(path, '?');
    size_t kl = strlen(key);
    while (q) {
        q++;
        if (!strncmp(q, key, kl) && q[kl] == '=') {
            snprintf(buf, len, "%.*s", (int)strcspn(q + kl + 1, "&"), q + kl + 1);
            return buf;
        }
        q = strchr(q, '&');
    }
    return buf;
}

static void *fk_conn_main(void *arg)
{
    struct fk_conn *c = arg;
    struct fake_kube *f = c->f;
    char buf[16384];
    size_t n = 0;
    ssize_t k;
    char *end = NULL;
    while (n < sizeof buf - 1 && (k = recv(c->fd, buf + n, sizeof buf - 1 - n, 0)) > 0) {
        n += (size_t)k;
        buf[n] = 0;
        if ((end = strstr(buf, "\r\n\r\n"))) break;
    }
    if (end) {
        struct fk_req *r = calloc(1, sizeof *r);
        sscanf(buf, "%15s %4095s", r->method, r->path);
        const char *ua = strcasestr(buf, "\r\nUser-Agent: ");
        if (ua && ua < end) snprintf(r->agent, sizeof r->agent, "%.*s", (int)strcspn(ua + 14, "\r"), ua + 14);
        const char *cl = strcasestr(buf, "Content-Length:");
        size_t blen = cl && cl < end ? (size_t)atol(cl + 15) : 0, have = n - (size_t)(end + 4 - buf);
        if (blen >= sizeof r->body) blen = sizeof r->body - 1;
        memcpy(r->body, end + 4, have < blen ? have : blen);
        while (have < blen && (k = recv(c->fd, r->body + have, blen - have, 0)) > 0) have += (size_t)k;
        r->seq = atomic_fetch_add(&f->requests, 1);
        pthread_mutex_lock(&f->mu);
        if (r->seq < 256) snprintf(f->log[r->seq], sizeof f->log[0], "%s %.140s", r->method, r->path);
        pthread_mutex_unlock(&f->mu);
        f->handler(f, c->fd, r);
        free(r);
    }
    shutdown(c->fd, SHUT_WR);
    close(c->fd);
    free(c);
    atomic_fetch_sub(&f->active, 1);
    return NULL;
}

static void *fk_main(void *arg)
{
    struct fake_kube *f = arg;
    while (!atomic_load(&f->stop)) {
        struct pollfd p = {.fd = f->fd, .events = POLLIN};
        if (poll(&p, 1, 50) <= 0) continue;
        int c = accept(f->fd, NULL, NULL);
        if (c < 0) continue;
        struct fk_conn *cn = malloc(sizeof *cn);
        cn->f = f;
        cn->fd = c;
        atomic_fetch_add(&f->active, 1);
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &a, fk_conn_main, cn)) {
            close(c);
            free(cn);
            atomic_fetch_sub(&f->active, 1);
        }
        pthread_attr_destroy(&a);
    }
    return NULL;
}

__attribute__((unused)) static struct fake_kube *fk_start(fk_handler h, void *arg)
{
    struct fake_kube *f = calloc(1, sizeof *f);
    f->handler = h;
    f->arg = arg;
    pthread_mutex_init(&f->mu, NULL);
    f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (bind(f->fd, (struct sockaddr *)&sa, sizeof sa) || listen(f->fd, 64) ||
        getsockname(f->fd, (struct sockaddr *)&sa, &sl)) {
        perror("fake_kube");
        abort();
    }
    f->port = ntohs(sa.sin_port);
    pthread_create(&f->th, NULL, fk_main, f);
    return f;
}

/* Stops accepting, waits for every connection's thread to end, frees. */
__attribute__((unused)) static void fk_stop(struct fake_kube *f)
{
    atomic_store(&f->stop, true);
    pthread_join(f->th, NULL);
    while (atomic_load(&f->active) > 0) usleep(10 * 1000);
    close(f->fd);
    pthread_mutex_destroy(&f->mu);
    free(f);
}

/* How many logged requests contain text. */
__attribute__((unused)) static int fk_count(struct fake_kube *f, const char *text)
{
    int n = 0, total = atomic_load(&f->requests);
    pthread_mutex_lock(&f->mu);
    for (int i = 0; i < total && i < 256; i++) n += strstr(f->log[i], text) != NULL;
    pthread_mutex_unlock(&f->mu);
    return n;
}

#endif
