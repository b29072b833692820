/*
 * api_fixture.h - an in-process API server for the unit tests that talk
 * HTTP to the control plane (apiserver, graceful deletion, logs): a scratch
 * data directory with a tokens file, the server on an ephemeral loopback
 * port, and clients holding a given token. Include after <cmocka.h>: the
 * helpers assert. Static functions: each test executable includes its own copy.
 */
#ifndef GS_TEST_API_FIXTURE_H
#define GS_TEST_API_FIXTURE_H

#include "control/client.h"
#include "control/server.h"
#include "tmpdir_fixture.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Makes dir from the mkdtemp template tmpl, writes tokens (CSV lines) to
 * dir/tokens.csv and starts a server there. o carries the test's own options;
 * the directory, listen address, token file, no TLS and no rate limit are set here. */
__attribute__((unused)) static struct gs_server *fx_server_start(char *dir, size_t len, const char *tmpl,
                                                                 const char *tokens, struct gs_server_opts o)
{
    snprintf(dir, len, "%s", tmpl);
    assert_non_null(mkdtemp(dir));
    char tok[128];
    snprintf(tok, sizeof tok, "%s/tokens.csv", dir);
    FILE *f = fopen(tok, "w");
    fputs(tokens, f);
    fclose(f);
    o.data_dir = dir;
    o.listen = "127.0.0.1:0";
    o.insecure = true;
    o.tokens_file = tok;
    o.qps = -1;
    o.fail_qps = -1; /* tests send many requests without a token on purpose */
    struct gs_server *srv = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_server_start(&o, &srv, &d), 0);
    return srv;
}

/* A client of srv sending token (NULL: anonymous). */
__attribute__((unused)) static struct gs_client *fx_client(struct gs_server *srv, const char *token)
{
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d", gs_server_port(srv));
    struct gs_client_opts o = {.server = url, .token = token, .timeout_ms = 10000};
    struct gs_client *c = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_client_new(&o, &c, &d), 0);
    return c;
}

/* The server and one client per role: admin "adm", node "nod" and, when the
 * test asks for it, tenant "ten" (NULL otherwise). */
struct api_env {
    char dir[64];
    struct gs_server *srv;
    struct gs_client *adm, *ten, *nod;
};

/* A cmocka setup body: the server in a directory from tmpl, with options o. */
__attribute__((unused)) static int api_env_start(void **state, const char *tmpl, const char *tokens, bool tenant,
                                                 struct gs_server_opts o)
{
    struct api_env *e = calloc(1, sizeof *e);
    e->srv = fx_server_start(e->dir, sizeof e->dir, tmpl, tokens, o);
    e->adm = fx_client(e->srv, "adm");
    if (tenant) e->ten = fx_client(e->srv, "ten");
    e->nod = fx_client(e->srv, "nod");
    *state = e;
    return 0;
}

__attribute__((unused)) static int api_env_teardown(void **state)
{
    struct api_env *e = *state;
    gs_client_free(e->adm);
    gs_client_free(e->ten);
    gs_client_free(e->nod);
    gs_server_stop(e->srv);
    fx_rm_tree(e->dir);
    free(e);
    return 0;
}

/* One request with a JSON body given as text (NULL: none); the status code,
 * and the answer in *out when out is not NULL. */
__attribute__((unused)) static long fx_req(struct gs_client *c, const char *method, const char *path, const char *ctype, const char *body,
                json_t **out)
{
    json_t *b = body ? json_loads(body, 0, NULL) : NULL;
    if (body && !b) fail_msg("bad JSON: %s", body);
    json_t *o = NULL;
    long code = 0;
    gs_client_call(c, method, path, ctype, b, NULL, &o, &code);
    json_decref(b);
    if (out) *out = o;
    else json_decref(o);
    return code;
}

/* The request answers code, and its message contains text (when not NULL). */
__attribute__((unused)) static void fx_expect(struct gs_client *c, const char *method, const char *path, const char *ctype, const char *body,
                   long code, const char *text)
{
    json_t *out = NULL;
    long got = fx_req(c, method, path, ctype, body, &out);
    const char *msg = json_string_value(json_object_get(out, "message"));
    if (got != code || (text && (!msg || !strstr(msg, text))))
        fail_msg("%s %s: %ld \"%s\", want %ld \"%s\"", method, path, got, msg ? msg : "", code, text ? text : "");
    json_decref(out);
}

#endif
