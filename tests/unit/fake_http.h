/*
 * fake_http.h - a loopback HTTP "server" that answers every request with
 * bytes the test chose (garbage, a body cut short, a stream that stops
 * inside an event), for the tests of what clients do with answers a real
 * server would not send. One thread; each connection gets the canned reply
 * and is closed. Static functions: each test executable includes its own copy.
 */
#ifndef GS_TEST_FAKE_HTTP_H
#define GS_TEST_FAKE_HTTP_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct fake_http {
    int fd, port;
    pthread_t th;
    pthread_mutex_t mu;
    char *reply; /* the whole answer, status line included */
    size_t len;
    atomic_int requests;
    atomic_bool stop;
};

static void *fake_http_main(void *arg)
{
    struct fake_http *f = arg;
    while (!atomic_load(&f->stop)) {
        int c = accept(f->fd, NULL, NULL);
        if (c < 0) continue;
        if (atomic_load(&f->stop)) {
            close(c);
            break;
        }
        char req[8192];
        size_t n = 0;
        ssize_t k;
        while (n < sizeof req - 1 && (k = read(c, req + n, sizeof req - 1 - n)) > 0) { /* up to the blank line */
            n += (size_t)k;
            req[n] = 0;
            if (strstr(req, "\r\n\r\n")) break;
        }
        atomic_fetch_add(&f->requests, 1);
        pthread_mutex_lock(&f->mu);
        if (f->reply && write(c, f->reply, f->len) != (ssize_t)f->len) perror("fake_http: write");
        pthread_mutex_unlock(&f->mu);
        shutdown(c, SHUT_WR);
        while (read(c, req, sizeof req) > 0) {} /* let the client see the end before the close */
        close(c);
    }
    return NULL;
}

/* The answer to every following request: a status line plus headers plus body, as given. */
__attribute__((unused)) static void fake_http_set(struct fake_http *f, const char *reply, size_t len)
{
    pthread_mutex_lock(&f->mu);
    free(f->reply);
    f->reply = malloc(len);
    memcpy(f->reply, reply, len);
    f->len = len;
    pthread_mutex_unlock(&f->mu);
}

/* A 200 with Content-Type JSON, Content-Length the body's length, and body. */
__attribute__((unused)) static void fake_http_set_body(struct fake_http *f, const char *body)
{
    size_t bl = strlen(body);
    char *r = malloc(bl + 200);
    int hl = snprintf(r, 200, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                              "Connection: close\r\n\r\n", bl);
    memcpy(r + hl, body, bl);
    fake_http_set(f, r, (size_t)hl + bl);
    free(r);
}

__attribute__((unused)) static struct fake_http *fake_http_start(void)
{
    struct fake_http *f = calloc(1, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (bind(f->fd, (struct sockaddr *)&sa, sizeof sa) || listen(f->fd, 16) ||
        getsockname(f->fd, (struct sockaddr *)&sa, &sl)) {
        perror("fake_http");
        abort();
    }
    f->port = ntohs(sa.sin_port);
    pthread_create(&f->th, NULL, fake_http_main, f);
    return f;
}

__attribute__((unused)) static void fake_http_stop(struct fake_http *f)
{
    atomic_store(&f->stop, true);
    int c = socket(AF_INET, SOCK_STREAM, 0); /* wakes accept() */
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(c, (struct sockaddr *)&sa, sizeof sa)) perror("fake_http: connect");
    close(c);
    pthread_join(f->th, NULL);
    close(f->fd);
    pthread_mutex_destroy(&f->mu);
    free(f->reply);
    free(f);
}

#endif
