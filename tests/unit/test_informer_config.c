/*
 * test_informer_config.c - where the kube source connects and as whom
 * (client.c): a kubeconfig whose user holds a client certificate and key as
 * files (relative to the kubeconfig) or as base64 data (held in memory
 * files, closed with the client), a tokenFile, a CA
 * file, each used for real against the in-process server over HTTPS (a
 * key that is not the certificate's fails, so the files really reach TLS);
 * the in-cluster configuration from KUBERNETES_SERVICE_HOST/PORT and
 * the service account folder (GPUSCHED_SERVICEACCOUNT_DIR); and the errors
 * for what is missing or unreadable, each naming the field and the file.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <cmocka.h>

#include "api_fixture.h"
#include "core/codec.h"
#include "informer/source_kube.h"

#include <dirent.h>
#include <gnutls/gnutls.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static const char tokens[] = "adm,admin,,,admin\n";

struct env {
    char dir[64];  /* the server's data folder: ca.crt, server.crt, server.key */
    char work[80]; /* kubeconfigs and service-account folders */
    struct gs_server *srv;
};

static int setup(void **state)
{
    struct env *e = calloc(1, sizeof *e);
    snprintf(e->dir, sizeof e->dir, "/tmp/gs-incfg-XXXXXX");
    assert_non_null(mkdtemp(e->dir));
    char tok[128];
    snprintf(tok, sizeof tok, "%s/tokens.csv", e->dir);
    FILE *f = fopen(tok, "w");
    fputs(tokens, f);
    fclose(f);
    snprintf(e->work, sizeof e->work, "%s/work", e->dir);
    assert_int_equal(mkdir(e->work, 0700), 0);
    struct gs_server_opts o = {.no_scheduler = true, .data_dir = e->dir, .listen = "127.0.0.1:0",
                               .tokens_file = tok, .qps = -1, .fail_qps = -1};
    struct gs_diags d = {0};
    assert_int_equal(gs_server_start(&o, &e->srv, &d), 0);
    unsetenv("KUBECONFIG");
    unsetenv("GPUSCHED_SERVER");
    unsetenv("GPUSCHED_TOKEN");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("GPUSCHED_SERVICEACCOUNT_DIR");
    *state = e;
    return 0;
}

static int teardown(void **state)
{
    struct env *e = *state;
    gs_server_stop(e->srv);
    fx_rm_tree(e->dir);
    free(e);
    return 0;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static char *b64_of_file(const char *path)
{
    char *buf = NULL;
    size_t len = 0;
    assert_int_equal(gs_read_file(path, &buf, &len), 0);
    gnutls_datum_t in = {(unsigned char *)buf, (unsigned)len}, out;
    assert_int_equal(gnutls_base64_encode2(&in, &out), 0);
    char *s = strndup((const char *)out.data, out.size);
    gnutls_free(out.data);
    free(buf);
    return s;
}

/* A kubeconfig at work/name with the given cluster and user fields (YAML lines, indented by the caller). */
static void kubeconfig(struct env *e, const char *name, const char *cluster, const char *user, char *path, size_t len)
{
    snprintf(path, len, "%s/%s", e->work, name);
    char text[16384];
    snprintf(text, sizeof text,
             "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
             "contexts:\n- name: c\n  context:\n    cluster: k\n    user: u\n"
             "clusters:\n- name: k\n  cluster:\n    server: https://127.0.0.1:%d\n%s"
             "users:\n- name: u\n  user:\n%s",
             gs_server_port(e->srv), cluster, user);
    write_text(path, text);
}

static int open_client(const char *kc, struct gs_client **c, struct gs_diags *d)
{
    struct gs_client_opts o = {.kubeconfig = kc, .timeout_ms = 5000};
    return gs_client_new(&o, c, d);
}

static int get_default_ns(struct gs_client *c)
{
    return gs_client_get(c, gs_api_resource_lookup("namespaces"), NULL, "default", NULL);
}

/* Open memory files holding credentials (the client's memfds). */
static int cred_memfds(void)
{
    DIR *d = opendir("/proc/self/fd");
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char p[300], target[256];
        snprintf(p, sizeof p, "/proc/self/fd/%s", e->d_name);
        ssize_t k = readlink(p, target, sizeof target - 1);
        if (k <= 0) continue;
        target[k] = 0;
        n += strstr(target, "memfd:gpusched-cred") != NULL;
    }
    closedir(d);
    return n;
}

static void client_certificate_files_are_used(void **state)
{
    struct env *e = *state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cp %s/ca.crt %s/ca.key %s/server.crt %s/server.key %s/", e->dir, e->dir, e->dir,
             e->dir, e->work);
    assert_int_equal(system(cmd), 0);
    char tf[160];
    snprintf(tf, sizeof tf, "%s/token", e->work);
    write_text(tf, "adm\n");
    char kc[256];
    /* Relative paths are relative to the kubeconfig's folder. */
    kubeconfig(e, "kc-files", "    certificate-authority: ca.crt\n",
               "    client-certificate: server.crt\n    client-key: server.key\n    tokenFile: token\n", kc, sizeof kc);
    struct gs_client *c = NULL;
    struct gs_diags d = {0};
    assert_int_equal(open_client(kc, &c, &d), 0);
    assert_int_equal(get_default_ns(c), 0);
    gs_client_free(c);
    /* A key that is not the certificate's fails before anything is sent: the files really reach TLS. */
    kubeconfig(e, "kc-bad", "    certificate-authority: ca.crt\n",
               "    client-certificate: server.crt\n    client-key: ca.key\n    token: adm\n", kc, sizeof kc);
    assert_int_equal(open_client(kc, &c, &d), 0);
    assert_int_equal(get_default_ns(c), GS_EIO);
    gs_client_free(c);
    /* The same as base64 data. */
    char srv_crt[160], srv_key[160], ca[160];
    snprintf(srv_crt, sizeof srv_crt, "%s/server.crt", e->dir);
    snprintf(srv_key, sizeof srv_key, "%s/server.key", e->dir);
    snprintf(ca, sizeof ca, "%s/ca.crt", e->dir);
    char *cd = b64_of_file(srv_crt), *kd = b64_of_file(srv_key), *cad = b64_of_file(ca);
    char cl[8192], us[16384];
    snprintf(cl, sizeof cl, "    certificate-authority-data: %s\n", cad);
    snprintf(us, sizeof us, "    client-certificate-data: %s\n    client-key-data: %s\n    token: adm\n", cd, kd);
    kubeconfig(e, "kc-data", cl, us, kc, sizeof kc);
    free(cd);
    free(kd);
    free(cad);
    assert_int_equal(cred_memfds(), 0);
    assert_int_equal(open_client(kc, &c, &d), 0);
    assert_int_equal(cred_memfds(), 3); /* CA, certificate and key in memory: nothing on disk to leave behind */
    assert_int_equal(get_default_ns(c), 0);
    gs_client_free(c);
    assert_int_equal(cred_memfds(), 0);
    assert_int_equal(d.n, 0);
    /* The kube source takes the same kubeconfig. */
    const char *const follow[] = {"namespaces/", NULL};
    struct gs_source_kube_opts so = {.client = {.kubeconfig = kc}, .follow = follow};
    struct gs_source *s = NULL;
    assert_int_equal(gs_source_kube_new(&so, &s, &d), 0);
    assert_true(gs_source_kube_wait_synced(s, 10000));
    json_t *ns = NULL;
    assert_int_equal(gs_source_get(s, "namespaces/default", &ns, NULL), 0);
    json_decref(ns);
    gs_source_free(s);
}

/* The one diagnostic of a refused kubeconfig contains want. */
static void refused_with(const char *kc, int err, const char *want)
{
    struct gs_client *c = NULL;
    struct gs_diags d = {0};
    assert_int_equal(open_client(kc, &c, &d), err);
    assert_null(c);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, kc);
    if (!strstr(d.v[0].msg, want)) fail_msg("\"%s\" does not say \"%s\"", d.v[0].msg, want);
    gs_diags_free(&d);
}

static void refused(const char *kc, const char *want) { refused_with(kc, GS_EINVAL, want); }

static void kubeconfig_problems_name_field_and_file(void **state)
{
    struct env *e = *state;
    char kc[256], want[512];
    kubeconfig(e, "kc1", "", "    client-certificate: missing.crt\n    client-key: missing.key\n", kc, sizeof kc);
    snprintf(want, sizeof want, "users[u].user.client-certificate: cannot read \"%s/missing.crt\": No such file", e->work);
    refused(kc, want);
    char crt[160];
    snprintf(crt, sizeof crt, "%s/only.crt", e->work);
    write_text(crt, "x");
    kubeconfig(e, "kc2", "", "    client-certificate: only.crt\n", kc, sizeof kc);
    refused(kc, "users[u].user: client-certificate is given without client-key");
    kubeconfig(e, "kc3", "", "    client-key-data: '%%%not base64'\n    client-certificate-data: QUJD\n", kc, sizeof kc);
    refused(kc, "users[u].user.client-key-data: not base64");
    kubeconfig(e, "kc4", "", "    tokenFile: /nonexistent/token\n", kc, sizeof kc);
    refused(kc, "users[u].user.tokenFile: cannot read \"/nonexistent/token\"");
    char empty[160];
    snprintf(empty, sizeof empty, "%s/empty-token", e->work);
    write_text(empty, "\n");
    kubeconfig(e, "kc5", "", "    tokenFile: empty-token\n", kc, sizeof kc);
    refused(kc, "the file is empty");
    kubeconfig(e, "kc6", "    certificate-authority: /nonexistent/ca.crt\n", "    token: adm\n", kc, sizeof kc);
    refused(kc, "clusters[k].cluster.certificate-authority: cannot read \"/nonexistent/ca.crt\"");
    kubeconfig(e, "kc7", "    certificate-authority-data: '***'\n", "    token: adm\n", kc, sizeof kc);
    refused(kc, "clusters[k].cluster.certificate-authority-data: not base64");
    snprintf(kc, sizeof kc, "%s/nothing-here", e->work);
    refused_with(kc, GS_ENOENT, "cannot read the kubeconfig");
}

static void in_cluster_config_from_the_service_account(void **state)
{
    struct env *e = *state;
    char sa[160], p[256], port[16];
    snprintf(sa, sizeof sa, "%s/sa", e->work);
    assert_int_equal(mkdir(sa, 0700), 0);
    snprintf(p, sizeof p, "%s/token", sa);
    write_text(p, "adm");
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cp %s/ca.crt %s/ca.crt", e->dir, sa);
    assert_int_equal(system(cmd), 0);
    snprintf(port, sizeof port, "%d", gs_server_port(e->srv));
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", port, 1);
    setenv("GPUSCHED_SERVICEACCOUNT_DIR", sa, 1);
    struct gs_client_opts o = {.timeout_ms = 5000};
    struct gs_client *c = NULL;
    struct gs_diags d = {0};
    assert_int_equal(gs_client_new(&o, &c, &d), 0);
    char url[64];
    snprintf(url, sizeof url, "https://127.0.0.1:%s", port);
    assert_string_equal(gs_client_server(c), url);
    assert_int_equal(get_default_ns(c), 0); /* the CA verified the server, the token was accepted */
    gs_client_free(c);
    /* The kube source with nothing configured takes the in-cluster config. */
    const char *const follow[] = {"namespaces/", NULL};
    struct gs_source_kube_opts so = {.follow = follow};
    struct gs_source *s = NULL;
    assert_int_equal(gs_source_kube_new(&so, &s, &d), 0);
    assert_true(gs_source_kube_wait_synced(s, 10000));
    gs_source_free(s);
    /* An IPv6 service address is bracketed. */
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    assert_int_equal(gs_client_new(&o, &c, &d), 0);
    assert_non_null(strstr(gs_client_server(c), "https://[fd00::1]:"));
    gs_client_free(c);
    /* What is missing is named. */
    unlink(p);
    assert_int_equal(gs_client_new(&o, &c, &d), GS_EINVAL);
    assert_int_equal(d.n, 1);
    assert_string_equal(d.v[0].path, p);
    assert_non_null(strstr(d.v[0].msg, "in-cluster config: cannot read the service account token"));
    gs_diags_free(&d);
    write_text(p, "adm");
    snprintf(p, sizeof p, "%s/ca.crt", sa);
    unlink(p);
    assert_int_equal(gs_client_new(&o, &c, &d), GS_EINVAL);
    assert_string_equal(d.v[0].path, p);
    assert_non_null(strstr(d.v[0].msg, "the service account CA: cannot read"));
    gs_diags_free(&d);
    unsetenv("KUBERNETES_SERVICE_PORT");
    assert_int_equal(gs_client_new(&o, &c, &d), GS_EINVAL);
    assert_string_equal(d.v[0].path, "KUBERNETES_SERVICE_PORT");
    gs_diags_free(&d);
    /* A kubeconfig given wins over the in-cluster config. */
    char kc[256];
    kubeconfig(e, "kc-wins", "    insecure-skip-tls-verify: true\n", "    token: adm\n", kc, sizeof kc);
    assert_int_equal(open_client(kc, &c, &d), 0);
    assert_int_equal(get_default_ns(c), 0);
    gs_client_free(c);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("GPUSCHED_SERVICEACCOUNT_DIR");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(client_certificate_files_are_used, setup, teardown),
        cmocka_unit_test_setup_teardown(kubeconfig_problems_name_field_and_file, setup, teardown),
        cmocka_unit_test_setup_teardown(in_cluster_config_from_the_service_account, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
