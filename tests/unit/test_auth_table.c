/*
 * test_auth_table.c - the authorization table of docs/CONTROL_PLANE.md is the
 * one the server enforces: the markdown table and auth.c's rules[] agree
 * row by row, and every cell (role x resource/subresource x verb) is tried
 * against an in-process server with a token of that role. Allowed cells must
 * not answer 401/403, denied ones 403 (401 without a token); a narrowed cell
 * is tried inside its scope (not 401/403) and, where it has an outside, there
 * too (403): another namespace for a tenant, another node's pod, Node, Lease,
 * NodeResourceTopology, Event, ResourceSlice or ResourceClaim for a node, a Lease outside kube-system for
 * the scheduler.
 *
 * Requests go over a raw socket so a watch is judged by its status line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "control/auth.h"
#include "control/resources.h"
#include "core/codec.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define DOC GS_TEST_DATA "/../../docs/CONTROL_PLANE.md"

static const char tokens[] = "adm,admin,,,admin\n"
                             "ten,alice,,team-a,tenant\n"
                             "nod,system:node:n1,,,node\n"
                             "sch,system:gpusched-scheduler,,,scheduler\n";

/*--- The markdown table ---*/

struct mrow {
    char res[64], sub[32], cell[5][8]; /* admin tenant node scheduler unauthenticated */
};

static char *cell_text(char *s)
{
    while (*s == ' ' || *s == '`') s++;
    char *e = s + strlen(s);
    while (e > s && (e[-1] == ' ' || e[-1] == '`')) *--e = 0;
    return s;
}

/* The rows of the "### Authorization table" section; returns their count. */
static size_t read_doc(struct mrow *rows, size_t max)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(gs_read_file(DOC, &text, &len), 0);
    char *sec = strstr(text, "### Authorization table");
    assert_non_null(sec);
    size_t n = 0;
    bool in_table = false;
    for (char *save = NULL, *line = strtok_r(sec, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (!strncmp(line, "### ", 4) && line != sec) break;
        if (!strncmp(line, "|---", 4)) continue;
        if (strncmp(line, "| ", 2)) {
            if (in_table) break;
            continue;
        }
        in_table = true;
        if (strstr(line, "| resource |")) continue;
        char *f[8];
        int nf = 0;
        for (char *s2 = NULL, *t = strtok_r(line, "|", &s2); t && nf < 8; t = strtok_r(NULL, "|", &s2)) f[nf++] = t;
        assert_int_equal(nf, 7);
        assert_true(n < max);
        snprintf(rows[n].res, sizeof rows[n].res, "%s", cell_text(f[0]));
        const char *sub = cell_text(f[1]);
        snprintf(rows[n].sub, sizeof rows[n].sub, "%s", strcmp(sub, "-") ? sub : "");
        for (int i = 0; i < 5; i++) {
            const char *c = cell_text(f[2 + i]);
            assert_int_equal(strlen(c), 7);
            snprintf(rows[n].cell[i], sizeof rows[n].cell[i], "%s", c);
        }
        n++;
    }
    free(text);
    return n;
}

static void doc_and_code_agree(void **state)
{
    (void)state;
    struct mrow rows[64];
    size_t n = read_doc(rows, 64), nt;
    const struct gs_auth_rule *t = gs_auth_table(&nt);
    assert_int_equal(n, nt);
    for (size_t i = 0; i < n; i++) {
        const struct gs_auth_rule *r = gs_auth_rule_find(rows[i].res, rows[i].sub);
        if (!r) fail_msg("docs row %s/%s is not in auth.c", rows[i].res, rows[i].sub);
        assert_string_equal(rows[i].cell[0], r->admin);
        assert_string_equal(rows[i].cell[1], r->tenant);
        assert_string_equal(rows[i].cell[2], r->node);
        assert_non_null(r->scheduler);
        assert_string_equal(rows[i].cell[3], r->scheduler);
        for (int v = 0; v < 7; v++) /* unauthenticated: refused wherever the verb is served */
            assert_int_equal(rows[i].cell[4][v], r->admin[v] == '-' ? '-' : 'D');
    }
    for (size_t i = 0; i < nt; i++) assert_non_null(gs_auth_rule_find(t[i].resource, t[i].sub));
}

/*--- Requests ---*/

static int port;

/* One HTTP/1.1 request; returns the status code, msg (if given) gets the start of the body. */
static int http(const char *token, const char *method, const char *path, const char *ctype, const char *body,
                char *msg, size_t msglen)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    char req[8192], auth[128] = "";
    if (token) snprintf(auth, sizeof auth, "Authorization: Bearer %s\r\n", token);
    size_t bl = body ? strlen(body) : 0;
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: t\r\n%sContent-Type: %s\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s", method, path, auth, ctype ? ctype : "application/json", bl,
                     body ? body : "");
    assert_int_equal(write(fd, req, (size_t)n), n);
    char resp[4096];
    size_t got = 0;
    for (ssize_t k; got < sizeof resp - 1 && (k = read(fd, resp + got, sizeof resp - 1 - got)) > 0;) {
        got += (size_t)k;
        if (!msg && memchr(resp, '\n', got)) break; /* the status line is enough (watches stream on) */
        if (msg && strstr(resp, "\r\n\r\n") && got > (size_t)(strstr(resp, "\r\n\r\n") - resp) + 200) break;
    }
    resp[got] = 0;
    close(fd);
    int code = 0;
    sscanf(resp, "HTTP/1.%*d %d", &code);
    if (msg) {
        const char *b = strstr(resp, "\r\n\r\n");
        snprintf(msg, msglen, "%s", b ? b + 4 : "");
    }
    return code;
}

static const struct gs_api_resource *served(const char *plural)
{
    size_t n;
    const struct gs_api_resource *t = gs_api_resources(&n);
    for (size_t i = 0; i < n; i++)
        if (!strcmp(t[i].plural, plural)) return &t[i];
    return NULL;
}

/* Where a cell is tried: in scope, or outside it. */
struct target {
    const char *ns, *name;
    bool outside;
};

static int seq;

static void body_for(const struct gs_api_resource *res, const char *verb, const char *sub, const struct target *t,
                     const char *role, char *buf, size_t len)
{
    char gv[128];
    gs_api_resource_gv(res, gv, sizeof gv);
    if (!strcmp(sub, "binding")) {
        snprintf(buf, len, "{\"target\":{\"name\":\"n9\"}}");
        return;
    }
    if (!strcmp(verb, "patch")) {
        snprintf(buf, len, !strcmp(sub, "status") ? "{\"status\":{\"phase\":\"Running\"}}"
                                                  : "{\"metadata\":{\"labels\":{\"touched\":\"yes\"}}}");
        return;
    }
    char name[64];
    if (!strcmp(verb, "create") && !strcmp(role, "node")) snprintf(name, sizeof name, "%s", t->outside ? "n2" : "n1");
    else if (!strcmp(verb, "create")) snprintf(name, sizeof name, "t-%d", ++seq);
    else snprintf(name, sizeof name, "%s", t->name);
    int n = snprintf(buf, len, "{\"apiVersion\":\"%s\",\"kind\":\"%s\",\"metadata\":{\"name\":\"%s\"}", gv, res->kind,
                     name);
    if (!strcmp(res->plural, "events"))
        n += snprintf(buf + n, len - (size_t)n, ",\"involvedObject\":{\"kind\":\"Node\",\"name\":\"%s\"}",
                      t->outside ? "n2" : "n1");
    if (!strcmp(res->plural, "resourceslices") && !strcmp(role, "node") && strcmp(sub, "status"))
        n += snprintf(buf + n, len - (size_t)n, ",\"spec\":{\"nodeName\":\"%s\"}", t->outside ? "n2" : "n1");
    if (!strcmp(res->plural, "pods") && !strcmp(verb, "create"))
        n += snprintf(buf + n, len - (size_t)n, ",\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"i\"}]}");
    if (!strcmp(sub, "status")) n += snprintf(buf + n, len - (size_t)n, ",\"status\":{}");
    snprintf(buf + n, len - (size_t)n, "}");
}

/* The request of one cell; returns its status code. */
static int try_cell(const char *token, const char *role, const struct gs_api_resource *res, const char *sub, int verb,
                    const struct target *t, char *msg, size_t msglen)
{
    static const char *const verbs[] = {"get", "list", "watch", "create", "update", "patch", "delete"};
    static const char *const methods[] = {"GET", "GET", "GET", "POST", "PUT", "PATCH", "DELETE"};
    bool collection = (verb == 1 || verb == 2 || (verb == 3 && !sub[0]));
    char path[512];
    gs_api_path(res, res->namespaced ? t->ns : NULL, collection ? NULL : t->name, path, sizeof path);
    if (sub[0]) snprintf(path + strlen(path), sizeof path - strlen(path), "/%s", sub);
    if (verb == 2) snprintf(path + strlen(path), sizeof path - strlen(path), "?watch=true&timeoutSeconds=1");
    char body[1024] = "";
    if (verb >= 3 && verb <= 5) body_for(res, verbs[verb], sub, t, role, body, sizeof body);
    const char *ctype = verb == 5 ? "application/merge-patch+json" : "application/json";
    if (verb == 2) msg[0] = 0; /* a watch: its status line only, the stream is not waited for */
    return http(token, methods[verb], path, ctype, body[0] ? body : NULL, verb == 2 ? NULL : msg, msglen);
}

/* The in-scope and outside targets of a narrowed cell for role on res. */
static void targets(const char *role, const struct gs_api_resource *res, const char *sub, struct target *in,
                    struct target *out, bool *has_out)
{
    *in = (struct target){"team-a", "x", false};
    *out = (struct target){"team-b", "x", true};
    *has_out = true;
    (void)sub;
    if (!strcmp(role, "node")) {
        out->ns = "team-a";
        if (!strcmp(res->plural, "pods")) {
            in->name = "bound";
            out->name = "other";
        } else {
            in->name = "n1";
            out->name = "n2";
        }
        if (!strcmp(res->plural, "leases")) in->ns = out->ns = GS_NODE_LEASE_NS;
    }
    if (!strcmp(role, "scheduler") && !strcmp(res->plural, "leases")) in->ns = GS_SCHEDULER_LEASE_NS;
    if (!strcmp(role, "admin")) *has_out = false;
}

static bool pending(const char *res, const char *sub)
{
    /* Rows listed ahead of their handlers (another change adds them), and
     * "reports" and "gpugrid": the console's, not stored resources, walked by test_ui.c. */
    return !strcmp(res, "poddisruptionbudgets") || !strcmp(sub, "eviction") || !strcmp(res, "reports") ||
           !strcmp(res, "gpugrid");
}

static void every_cell_against_the_server(void **state)
{
    struct api_env *e = *state;
    port = gs_server_port(e->srv);
    char msg[4096];
    /* Namespaces and two bound pods: one on the node token's node, one elsewhere. */
    assert_int_equal(http("adm", "POST", "/api/v1/namespaces", NULL, "{\"metadata\":{\"name\":\"team-a\"}}", NULL, 0),
                     201);
    assert_int_equal(http("adm", "POST", "/api/v1/namespaces", NULL, "{\"metadata\":{\"name\":\"team-b\"}}", NULL, 0),
                     201);
    const char *pod = "{\"metadata\":{\"name\":\"%s\"},\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"c\","
                      "\"image\":\"i\"}]}}";
    char b[512];
    snprintf(b, sizeof b, pod, "bound", "n1");
    assert_int_equal(http("adm", "POST", "/api/v1/namespaces/team-a/pods", NULL, b, NULL, 0), 201);
    snprintf(b, sizeof b, pod, "other", "n2");
    assert_int_equal(http("adm", "POST", "/api/v1/namespaces/team-a/pods", NULL, b, NULL, 0), 201);
    /* An Event about the other node: what the node token may not update or patch. */
    assert_int_equal(http("adm", "POST", "/api/v1/namespaces/team-a/events", NULL,
                          "{\"metadata\":{\"name\":\"n2\"},\"involvedObject\":{\"kind\":\"Node\",\"name\":\"n2\"},"
                          "\"reason\":\"R\",\"message\":\"m\",\"type\":\"Normal\"}", NULL, 0),
                     201);

    /* Two ResourceSlices: one of the node token's node, one of another (a node writes only its own). */
    const char *slice = "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":"
                        "\"%s\"},\"spec\":{\"driver\":\"gpu.nvidia.com\",\"nodeName\":\"%s\",\"pool\":{\"name\":"
                        "\"%s\",\"generation\":1,\"resourceSliceCount\":1},\"devices\":[{\"name\":\"gpu-0\"}]}}";
    snprintf(b, sizeof b, slice, "n1", "n1", "n1");
    assert_int_equal(http("adm", "POST", "/apis/resource.k8s.io/v1/resourceslices", NULL, b, msg, sizeof msg), 201);
    snprintf(b, sizeof b, slice, "n2", "n2", "n2");
    assert_int_equal(http("adm", "POST", "/apis/resource.k8s.io/v1/resourceslices", NULL, b, NULL, 0), 201);

    /* Two ResourceClaims, allocated on the node token's node and on another (a node reads only its own). */
    const char *claim = "{\"apiVersion\":\"resource.k8s.io/v1\",\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":"
                        "\"%s\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"g\",\"exactly\":{\"deviceClassName\":"
                        "\"gpu.nvidia.com\"}}]}}}";
    const char *alloc = "{\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":\"g\",\"driver\":"
                        "\"gpu.nvidia.com\",\"pool\":\"%s\",\"device\":\"gpu-0\"}]},\"nodeSelector\":{"
                        "\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\","
                        "\"values\":[\"%s\"]}]}]}}}}";
    for (int k = 1; k <= 2; k++) {
        char n[8], path[160];
        snprintf(n, sizeof n, "n%d", k);
        snprintf(b, sizeof b, claim, n);
        assert_int_equal(http("adm", "POST", "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims", NULL, b,
                              NULL, 0), 201);
        snprintf(b, sizeof b, alloc, n, n);
        snprintf(path, sizeof path, "/apis/resource.k8s.io/v1/namespaces/team-a/resourceclaims/%s/status", n);
        assert_int_equal(http("adm", "PATCH", path, "application/merge-patch+json", b, NULL, 0), 200);
    }

    size_t nt, cells = 0, outside = 0, skipped = 0;
    const struct gs_auth_rule *t = gs_auth_table(&nt);
    const char *roles[] = {"admin", "tenant", "node", "scheduler", "unauthenticated"};
    const char *toks[] = {"adm", "ten", "nod", "sch", NULL};
    for (size_t i = 0; i < nt; i++) {
        const struct gs_api_resource *res = served(t[i].resource);
        if (!res) {
            if (!pending(t[i].resource, t[i].sub)) fail_msg("row %s is not a served resource", t[i].resource);
            skipped++;
            continue;
        }
        for (int role = 0; role < 5; role++) {
            const char *codes = role == 0   ? t[i].admin
                                : role == 1 ? t[i].tenant
                                : role == 2 ? t[i].node
                                : role == 3 ? t[i].scheduler
                                            : NULL;
            for (int v = 0; v < 7; v++) {
                char c = codes ? codes[v] : t[i].admin[v] == '-' ? '-' : 'D';
                if (c == '-') continue;
                struct target in, out;
                bool has_out;
                targets(roles[role], res, t[i].sub, &in, &out, &has_out);
                int code = try_cell(toks[role], roles[role], res, t[i].sub, v, &in, msg, sizeof msg);
                if (code == 404 && strstr(msg, "no subresource") && pending(t[i].resource, t[i].sub)) {
                    skipped++;
                    break;
                }
                cells++;
                bool ok = c == 'D' ? code == (toks[role] ? 403 : 401) : code != 401 && code != 403 && code > 0;
                if (!ok)
                    fail_msg("%s %s %s%s%s (cell %c): %d %s", roles[role], (const char *[]){"get", "list", "watch",
                             "create", "update", "patch", "delete"}[v], t[i].resource, t[i].sub[0] ? "/" : "",
                             t[i].sub, c, code, msg);
                /* A list or watch across namespaces is narrowed, never refused; no outside to try. */
                if (c != 'N' || !has_out || ((v == 1 || v == 2) && role == 2)) continue;
                code = try_cell(toks[role], roles[role], res, t[i].sub, v, &out, msg, sizeof msg);
                outside++;
                if (code != 403)
                    fail_msg("%s outside its scope: %s %s%s%s in %s name %s: %d %s", roles[role],
                             (const char *[]){"get", "list", "watch", "create", "update", "patch", "delete"}[v],
                             t[i].resource, t[i].sub[0] ? "/" : "", t[i].sub, out.ns, out.name, code, msg);
            }
        }
    }
    print_message("authorization table: %zu cells, %zu outside their scope, %zu pending rows\n", cells, outside,
                  skipped);
    assert_true(cells > 300);
    assert_true(outside > 50);
}

static int setup(void **state)
{
    return api_env_start(state, "/tmp/gs-authtable-XXXXXX", tokens, true, (struct gs_server_opts){.no_scheduler = true});
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(doc_and_code_agree),
        cmocka_unit_test_setup_teardown(every_cell_against_the_server, setup, api_env_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
