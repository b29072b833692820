/*
 * test_client_failover.c - a client given several servers (client.h,
 * "Several servers") against loopback fakes: a refused connection and a
 * 503 move a read to the next server, which stays in use; a binding that
 * may have reached a failing server is not sent again; a create retried
 * after a 503 whose AlreadyExists names our own object is a success, and
 * one that names someone else's is not; a watch that cannot start on one
 * server starts on the next from the same resourceVersion; the list's
 * errors (an empty entry) name the setting; a kubeconfig's
 * gpusched.io/servers extension gives the list.
 *
 * Each fake answers its connections with the replies it was given in
 * order (the last one again once they run out) and records each request
 * line, so a test sees exactly which server got what.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/client.h"
#include "control/resources.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/*--- A fake with a sequence of replies ---*/

struct fake {
    int fd, port;
    pthread_t th;
    pthread_mutex_t mu;
    char *replies[8];
    size_t nreplies, next;
    char lines[16][256]; /* request lines seen */
    atomic_int requests;
    atomic_bool stop;
};

static void *fake_main(void *arg)
{
    struct fake *f = arg;
    while (!atomic_load(&f->stop)) {
        int c = accept(f->fd, NULL, NULL);
        if (c < 0) continue;
        if (atomic_load(&f->stop)) {
            close(c);
            break;
        }
        char req[16384];
        size_t n = 0;
        ssize_t k;
        while (n < sizeof req - 1 && (k = read(c, req + n, sizeof req - 1 - n)) > 0) {
            n += (size_t)k;
            req[n] = 0;
            char *end = strstr(req, "\r\n\r\n");
            if (!end) continue;
            const char *cl = strcasestr(req, "Content-Length:");
            size_t want = cl && cl < end ? (size_t)atol(cl + 15) : 0;
            if (n >= (size_t)(end + 4 - req) + want) break;
        }
        pthread_mutex_lock(&f->mu);
        int i = atomic_fetch_add(&f->requests, 1);
        if (i < 16) snprintf(f->lines[i], sizeof f->lines[i], "%.*s", (int)strcspn(req, "\r"), req);
        const char *r = f->replies[f->next < f->nreplies ? f->next : f->nreplies - 1];
        if (f->next < f->nreplies) f->next++;
        if (write(c, r, strlen(r)) != (ssize_t)strlen(r)) perror("fake: write");
        pthread_mutex_unlock(&f->mu);
        shutdown(c, SHUT_WR);
        while (read(c, req, sizeof req) > 0) {}
        close(c);
    }
    return NULL;
}

static char *reply(int code, const char *reason, const char *body)
{
    char *r = NULL;
    assert_true(asprintf(&r, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                             "Connection: close\r\n\r\n%s", code, reason, strlen(body), body) > 0);
    return r;
}

/* A fake answering with replies (NULL-terminated, at least one; taken). */
static struct fake *fake_start(char *first, ...)
{
    struct fake *f = calloc(1, sizeof *f);
    pthread_mutex_init(&f->mu, NULL);
    va_list ap;
    va_start(ap, first);
    for (char *r = first; r && f->nreplies < 8; r = va_arg(ap, char *)) f->replies[f->nreplies++] = r;
    va_end(ap);
    f->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    assert_int_equal(bind(f->fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(f->fd, 16), 0);
    assert_int_equal(getsockname(f->fd, (struct sockaddr *)&sa, &sl), 0);
    f->port = ntohs(sa.sin_port);
    pthread_create(&f->th, NULL, fake_main, f);
    return f;
}

static void fake_stop(struct fake *f)
{
    atomic_store(&f->stop, true);
    int c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)f->port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(c, (struct sockaddr *)&sa, sizeof sa)) perror("fake: connect");
    close(c);
    pthread_join(f->th, NULL);
    close(f->fd);
    pthread_mutex_destroy(&f->mu);
    for (size_t i = 0; i < f->nreplies; i++) free(f->replies[i]);
    free(f);
}

/* A loopback port nothing listens on: connections are refused. */
static int dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    close(fd);
    return ntohs(sa.sin_port);
}

static struct gs_client *client_for(const char *servers)
{
    struct gs_client_opts o = {.server = servers, .token = "t", .timeout_ms = 5000};
    struct gs_client *c = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_client_new(&o, &c, &d), 0);
    gs_diags_free(&d);
    return c;
}

#define POD "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\",\"namespace\":\"default\"," \
            "\"resourceVersion\":\"7\"},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}}"
#define STATUS_503 "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"code\":503,\"message\":\"down\"}"
#define EXISTS "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"reason\":\"AlreadyExists\",\"code\":409}"

static const struct gs_api_resource *pods(void) { return gs_api_resource_find("", "v1", "pods"); }

static void test_refused_then_next_server_stays(void **state)
{
    (void)state;
    struct fake *b = fake_start(reply(200, "OK", POD), NULL);
    char list[128], want[64];
    snprintf(list, sizeof list, "http://127.0.0.1:%d, http://127.0.0.1:%d/", dead_port(), b->port);
    snprintf(want, sizeof want, "http://127.0.0.1:%d", b->port);
    struct gs_client *c = client_for(list);
    assert_int_equal(gs_client_nservers(c), 2);
    json_t *out = NULL;
    assert_int_equal(gs_client_get(c, pods(), "default", "web", &out), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(out, "metadata"), "name")), "web");
    json_decref(out);
    assert_string_equal(gs_client_server(c), want); /* trailing '/' and spaces dropped */
    assert_int_equal(gs_client_get(c, pods(), "default", "web", NULL), 0);
    assert_int_equal(atomic_load(&b->requests), 2); /* the second went straight to b */
    gs_client_free(c);
    fake_stop(b);
}

static void test_503_moves_a_read_but_not_a_binding(void **state)
{
    (void)state;
    struct fake *a = fake_start(reply(503, "Service Unavailable", STATUS_503), NULL);
    struct fake *b = fake_start(reply(200, "OK", POD), NULL);
    char list[128];
    snprintf(list, sizeof list, "http://127.0.0.1:%d,http://127.0.0.1:%d", a->port, b->port);
    struct gs_client *c = client_for(list);
    assert_int_equal(gs_client_get(c, pods(), "default", "web", NULL), 0);
    assert_int_equal(atomic_load(&a->requests), 1);
    assert_int_equal(atomic_load(&b->requests), 1);
    gs_client_free(c);

    /* A binding may have landed on a: never sent twice; the next call starts at b. */
    c = client_for(list);
    json_t *out = NULL;
    assert_int_equal(gs_client_bind(c, "default", "web", "n1", NULL, &out), GS_EIO);
    json_decref(out);
    assert_int_equal(atomic_load(&a->requests), 2);
    assert_int_equal(atomic_load(&b->requests), 1);
    assert_int_equal(gs_client_get(c, pods(), "default", "web", NULL), 0);
    assert_int_equal(atomic_load(&b->requests), 2);
    gs_client_free(c);
    fake_stop(a);
    fake_stop(b);
}

static void test_create_retried_is_ours_or_not(void **state)
{
    (void)state;
    /* a fails after (maybe) storing; b says AlreadyExists, then shows the stored pod: ours (with a default added). */
    const char *stored_ours =
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\",\"namespace\":\"default\","
        "\"uid\":\"u1\",\"resourceVersion\":\"9\",\"labels\":{\"app\":\"x\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
        "\"image\":\"i\"}],\"tolerations\":[{\"key\":\"node.kubernetes.io/not-ready\"},{\"key\":\"k\"}]},"
        "\"status\":{\"phase\":\"Pending\"}}";
    const char *stored_other =
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\",\"namespace\":\"default\","
        "\"uid\":\"u2\",\"resourceVersion\":\"3\",\"labels\":{\"app\":\"y\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
        "\"image\":\"other\"}]}}";
    json_t *pod = json_loads("{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"web\",\"labels\":"
                             "{\"app\":\"x\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}],"
                             "\"tolerations\":[{\"key\":\"k\"}]}}",
                             0, NULL);
    for (int round = 0; round < 2; round++) {
        struct fake *a = fake_start(reply(503, "Service Unavailable", STATUS_503), NULL);
        struct fake *b = fake_start(reply(409, "Conflict", EXISTS), reply(200, "OK", round ? stored_other : stored_ours),
                                    NULL);
        char list[128];
        snprintf(list, sizeof list, "http://127.0.0.1:%d,http://127.0.0.1:%d", a->port, b->port);
        struct gs_client *c = client_for(list);
        json_t *out = NULL;
        int err = gs_client_create(c, pods(), "default", pod, &out);
        if (!round) {
            assert_int_equal(err, 0);
            assert_string_equal(json_string_value(json_object_get(json_object_get(out, "metadata"), "uid")), "u1");
        } else {
            assert_int_equal(err, GS_EEXIST); /* someone else's pod of that name */
        }
        json_decref(out);
        assert_int_equal(atomic_load(&b->requests), 2);
        assert_non_null(strstr(b->lines[0], "POST /api/v1/namespaces/default/pods "));
        assert_non_null(strstr(b->lines[1], "GET /api/v1/namespaces/default/pods/web "));
        gs_client_free(c);
        fake_stop(a);
        fake_stop(b);
    }
    json_decref(pod);

    /* A create refused by a live server (AlreadyExists at once) is not second-guessed. */
    struct fake *a = fake_start(reply(409, "Conflict", EXISTS), NULL);
    char one[64];
    snprintf(one, sizeof one, "http://127.0.0.1:%d", a->port);
    struct gs_client *c = client_for(one);
    json_t *p2 = json_loads("{\"metadata\":{\"name\":\"web\"}}", 0, NULL);
    assert_int_equal(gs_client_create(c, pods(), "default", p2, NULL), GS_EEXIST);
    assert_int_equal(atomic_load(&a->requests), 1);
    json_decref(p2);
    gs_client_free(c);
    fake_stop(a);
}

static int on_event(const char *type, json_t *obj, void *arg)
{
    (void)obj;
    int *n = arg;
    if (!strcmp(type, "ADDED")) (*n)++;
    return 0;
}

static void test_watch_starts_on_the_next(void **state)
{
    (void)state;
    const char *stream = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n"
                         "{\"type\":\"ADDED\",\"object\":" POD "}\n";
    struct fake *b = fake_start(strdup(stream), NULL);
    char list[128];
    snprintf(list, sizeof list, "http://127.0.0.1:%d,http://127.0.0.1:%d", dead_port(), b->port);
    struct gs_client *c = client_for(list);
    int n = 0;
    assert_int_equal(gs_client_watch(c, pods(), NULL, NULL, NULL, "42", 5, on_event, &n), 0);
    assert_int_equal(n, 1);
    assert_non_null(strstr(b->lines[0], "resourceVersion=42")); /* resumed from the same version */
    gs_client_free(c);
    fake_stop(b);
}

static void test_all_down_is_an_error(void **state)
{
    (void)state;
    char list[128];
    snprintf(list, sizeof list, "http://127.0.0.1:%d,http://127.0.0.1:%d", dead_port(), dead_port());
    struct gs_client *c = client_for(list);
    assert_int_equal(gs_client_get(c, pods(), "default", "web", NULL), GS_EIO);
    gs_client_free(c);
}

static void test_list_errors(void **state)
{
    (void)state;
    struct gs_client_opts o = {.server = "http://a:1,,http://b:2", .token = "t"};
    struct gs_client *c = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_client_new(&o, &c, &d), GS_EINVAL);
    assert_null(c);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, "server");
    assert_string_equal(d.v[0].msg, "\"http://a:1,,http://b:2\": entry 2 of the comma-separated list is empty");
    gs_diags_free(&d);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_kubeconfig_extension(void **state)
{
    (void)state;
    struct fake *b = fake_start(reply(200, "OK", POD), NULL);
    char dir[] = "/tmp/gs-failover-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], text[1024];
    snprintf(path, sizeof path, "%s/kubeconfig", dir);
    int dead = dead_port();
    snprintf(text, sizeof text,
             "apiVersion: v1\nkind: Config\nclusters:\n- name: g\n  cluster:\n    server: http://127.0.0.1:%d\n"
             "    extensions:\n    - name: gpusched.io/servers\n      extension:\n        servers:\n"
             "        - http://127.0.0.1:%d\n        - http://127.0.0.1:%d\n"
             "contexts:\n- name: g\n  context: {cluster: g, user: u}\ncurrent-context: g\n"
             "users:\n- name: u\n  user: {token: t}\n", dead, dead, b->port);
    write_text(path, text);
    struct gs_client_opts o = {.kubeconfig = path};
    struct gs_client *c = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_client_new(&o, &c, &d), 0);
    assert_int_equal(gs_client_nservers(c), 2);
    assert_int_equal(gs_client_get(c, pods(), "default", "web", NULL), 0);
    gs_client_free(c);

    /* An extension without servers is an error naming it. */
    snprintf(text, sizeof text,
             "apiVersion: v1\nkind: Config\nclusters:\n- name: g\n  cluster:\n    server: http://127.0.0.1:1\n"
             "    extensions:\n    - name: gpusched.io/servers\n      extension: {servers: []}\n"
             "contexts:\n- name: g\n  context: {cluster: g, user: u}\ncurrent-context: g\n"
             "users:\n- name: u\n  user: {token: t}\n");
    write_text(path, text);
    assert_int_equal(gs_client_new(&o, &c, &d), GS_EINVAL);
    assert_int_equal(d.n, 1);
    assert_non_null(strstr(d.v[0].msg, "clusters[g].cluster.extensions[0] (gpusched.io/servers): extension.servers "
                                       "must be a non-empty list of URLs"));
    gs_diags_free(&d);
    unlink(path);
    rmdir(dir);
    fake_stop(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_then_next_server_stays),
        cmocka_unit_test(test_503_moves_a_read_but_not_a_binding),
        cmocka_unit_test(test_create_retried_is_ours_or_not),
        cmocka_unit_test(test_watch_starts_on_the_next),
        cmocka_unit_test(test_all_down_is_an_error),
        cmocka_unit_test(test_list_errors),
        cmocka_unit_test(test_kubeconfig_extension),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
