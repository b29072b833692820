/*
 * test_auth.c - tokens file parsing (with line numbers for mistakes), bearer
 * authentication, the role rules for admin, tenant and node, and the
 * per-token rate limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "control/auth.h"

#include <string.h>

static const char tokens[] = "# token,user,groups,namespaces,role\n"
                             "adm,admin,system:masters,,admin\n"
                             "ten,alice,dev;ml,team-a;team-b,tenant\n"
                             "\n"
                             "nod,system:node:gpu-1,,,node\n";

static void parses_tokens(void **state)
{
    (void)state;
    struct gs_auth a;
    struct gs_diags d = {0};
    assert_int_equal(gs_auth_parse(tokens, &a, &d), 0);
    assert_int_equal(d.n, 0);
    assert_int_equal(a.n, 3);
    assert_int_equal(a.v[1].role, GS_ROLE_TENANT);
    assert_int_equal(a.v[1].ngroups, 2);
    assert_string_equal(a.v[1].namespaces[1], "team-b");
    assert_string_equal(a.v[2].node, "gpu-1");
    gs_auth_free(&a);
}

static void reports_bad_lines(void **state)
{
    (void)state;
    struct gs_auth a;
    struct gs_diags d = {0};
    assert_int_equal(gs_auth_parse("ok,u,,,admin\nx,y,,,boss\nt,u2,,,tenant\nonlytoken\n", &a, &d), GS_EINVAL);
    assert_int_equal(d.n, 3);
    assert_string_equal(d.v[0].path, "line 2");
    assert_non_null(strstr(d.v[0].msg, "boss"));
    assert_string_equal(d.v[1].path, "line 3"); /* tenant without namespaces */
    assert_string_equal(d.v[2].path, "line 4");
    assert_int_equal(a.n, 1); /* the good line is kept */
    gs_diags_free(&d);
    gs_auth_free(&a);
}

static void authenticates_bearer_tokens(void **state)
{
    (void)state;
    struct gs_auth a;
    struct gs_diags d = {0};
    gs_auth_parse(tokens, &a, &d);
    assert_string_equal(gs_auth_authenticate(&a, "Bearer ten")->user, "alice");
    assert_string_equal(gs_auth_authenticate(&a, "bearer adm")->user, "admin");
    assert_null(gs_auth_authenticate(&a, "Bearer te"));
    assert_null(gs_auth_authenticate(&a, "Bearer tenx"));
    assert_null(gs_auth_authenticate(&a, "Basic ten"));
    assert_null(gs_auth_authenticate(&a, NULL));
    gs_auth_free(&a);
}

static enum gs_authz decide(struct gs_principal *p, const char *verb, const char *plural, const char *sub,
                            const char *ns, const char *name)
{
    const char *why;
    const struct gs_api_resource *r = gs_api_resource_lookup(plural);
    struct gs_authz_req q = {verb, r, sub, ns, name};
    enum gs_authz res = gs_authorize(p, &q, &why);
    if (res == GS_AUTHZ_DENY) assert_true(strlen(why) > 0);
    return res;
}

static void role_rules(void **state)
{
    (void)state;
    struct gs_auth a;
    struct gs_diags d = {0};
    gs_auth_parse(tokens, &a, &d);
    struct gs_principal *adm = &a.v[0], *ten = &a.v[1], *nod = &a.v[2];
    assert_int_equal(decide(adm, "create", "pods", "binding", "x", "p"), GS_AUTHZ_ALLOW);
    assert_int_equal(decide(adm, "delete", "nodes", "", NULL, "n"), GS_AUTHZ_ALLOW);

    assert_int_equal(decide(ten, "create", "pods", "", "team-a", NULL), GS_AUTHZ_ALLOW);
    assert_int_equal(decide(ten, "get", "pods", "", "team-c", "p"), GS_AUTHZ_DENY);
    assert_int_equal(decide(ten, "create", "pods", "binding", "team-a", "p"), GS_AUTHZ_DENY);
    assert_int_equal(decide(ten, "list", "pods", "", NULL, NULL), GS_AUTHZ_ALLOW); /* narrowed later */
    assert_int_equal(decide(ten, "get", "nodes", "", NULL, "n"), GS_AUTHZ_ALLOW);
    assert_int_equal(decide(ten, "create", "nodes", "", NULL, NULL), GS_AUTHZ_DENY);
    assert_int_equal(decide(ten, "create", "podgroups", "", "team-b", NULL), GS_AUTHZ_ALLOW);
    assert_true(gs_auth_sees_namespace(ten, "team-b"));
    assert_false(gs_auth_sees_namespace(ten, "default"));

    assert_int_equal(decide(nod, "update", "nodes", "status", NULL, "gpu-1"), GS_AUTHZ_ALLOW);
    assert_int_equal(decide(nod, "create", "nodes", "", NULL, NULL), GS_AUTHZ_IF_NAMED); /* registers itself */
    assert_int_equal(decide(nod, "delete", "nodes", "", NULL, "gpu-1"), GS_AUTHZ_DENY);
    assert_int_equal(decide(nod, "patch", "nodes", "", NULL, "gpu-2"), GS_AUTHZ_DENY);
    assert_int_equal(decide(nod, "list", "nodes", "", NULL, NULL), GS_AUTHZ_ALLOW);
    assert_int_equal(decide(nod, "create", "pods", "binding", "x", "p"), GS_AUTHZ_DENY);
    assert_int_equal(decide(nod, "create", "pods", "", "x", NULL), GS_AUTHZ_DENY);
    assert_int_equal(decide(nod, "patch", "pods", "status", "x", "p"), GS_AUTHZ_IF_BOUND);
    assert_int_equal(decide(nod, "patch", "pods", "", "x", "p"), GS_AUTHZ_DENY);
    assert_int_equal(decide(nod, "get", "pods", "", "x", "p"), GS_AUTHZ_IF_BOUND);
    assert_int_equal(decide(nod, "watch", "pods", "", NULL, NULL), GS_AUTHZ_IF_BOUND);
    assert_int_equal(decide(nod, "create", "events", "", "x", NULL), GS_AUTHZ_IF_NAMED); /* about itself */
    assert_int_equal(decide(nod, "patch", "events", "", "x", "e"), GS_AUTHZ_IF_NAMED); /* its own, checked stored */
    assert_int_equal(decide(nod, "delete", "events", "", "x", "e"), GS_AUTHZ_DENY);
    assert_int_equal(decide(nod, "update", "noderesourcetopologies", "", NULL, "gpu-1"), GS_AUTHZ_ALLOW);
    assert_int_equal(decide(nod, "update", "noderesourcetopologies", "", NULL, "gpu-2"), GS_AUTHZ_DENY);
    assert_int_equal(decide(nod, "create", "leases", "", "default", NULL), GS_AUTHZ_DENY);
    assert_int_equal(decide(ten, "patch", "pods", "status", "team-a", "p"), GS_AUTHZ_DENY);
    assert_int_equal(decide(ten, "get", "pods", "status", "team-a", "p"), GS_AUTHZ_ALLOW);
    assert_int_equal(decide(ten, "create", "priorityclasses", "", NULL, NULL), GS_AUTHZ_DENY);
    assert_int_equal(decide(ten, "list", "priorityclasses", "", NULL, NULL), GS_AUTHZ_ALLOW);
    assert_int_equal(decide(nod, "create", "podgroups", "", "x", NULL), GS_AUTHZ_DENY);
    gs_auth_free(&a);
}

static void rate_limit_is_a_token_bucket(void **state)
{
    (void)state;
    struct gs_auth a;
    struct gs_diags d = {0};
    gs_auth_parse(tokens, &a, &d);
    a.qps = 10;
    a.burst = 2;
    struct gs_principal *p = &a.v[1], *q = &a.v[0];
    int64_t t = 1000000000;
    assert_true(gs_auth_rate_take(&a, p, t));
    assert_true(gs_auth_rate_take(&a, p, t));
    assert_false(gs_auth_rate_take(&a, p, t));
    assert_true(gs_auth_rate_take(&a, q, t));              /* buckets are per token */
    assert_false(gs_auth_rate_take(&a, p, t + 50000000));  /* half a token refilled */
    assert_true(gs_auth_rate_take(&a, p, t + 150000000));  /* a whole one */
    a.qps = 0;
    for (int i = 0; i < 100; i++) assert_true(gs_auth_rate_take(&a, p, t)); /* off */
    gs_auth_free(&a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(parses_tokens),
        cmocka_unit_test(reports_bad_lines),
        cmocka_unit_test(authenticates_bearer_tokens),
        cmocka_unit_test(role_rules),
        cmocka_unit_test(rate_limit_is_a_token_bucket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
