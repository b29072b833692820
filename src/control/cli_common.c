/*
 * cli_common.c - flags, connection, manifests and table output shared by the
 * client commands; see cli_common.h. This is CLI code living in the library
 * (so the commands stay short and tests can call it); it prints only where
 * its callers ask it to.
 */
#include "control/cli_common.h"

#include <ctype.h>
#include <dirent.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const char gs_cli_common_help[] =
    "  -n, --namespace NS          namespace (default \"default\")\n"
    "  -A, --all-namespaces        every namespace\n"
    "  -o, --output FORMAT         wide|json|yaml|name\n"
    "  -l, --selector SEL          label selector (app=web,tier in (a,b))\n"
    "      --field-selector SEL    field selector (spec.nodeName=n1)\n"
    "  -f, --filename PATH         manifest file, directory or - (repeatable)\n"
    "      --server URL[,URL...]   API server (else $GPUSCHED_SERVER, else the kubeconfig); with\n"
    "                              several (replicas), the next is used when one does not answer\n"
    "      --token TOKEN           bearer token (else $GPUSCHED_TOKEN, else the kubeconfig)\n"
    "      --kubeconfig FILE       kubeconfig (else $KUBECONFIG, else ./gpusched-data/kubeconfig)\n"
    "      --certificate-authority FILE   CA to verify the server with\n"
    "      --insecure-skip-tls-verify     do not verify the server's certificate\n";

int gs_cli_parse(int argc, char **argv, const char *usage_text, struct gs_cli *out)
{
    static const struct option opts[] = {
        {"namespace", required_argument, 0, 'n'},      {"all-namespaces", no_argument, 0, 'A'},
        {"output", required_argument, 0, 'o'},         {"selector", required_argument, 0, 'l'},
        {"field-selector", required_argument, 0, 'F'}, {"filename", required_argument, 0, 'f'},
        {"server", required_argument, 0, 's'},         {"token", required_argument, 0, 't'},
        {"kubeconfig", required_argument, 0, 'k'},     {"certificate-authority", required_argument, 0, 'c'},
        {"insecure-skip-tls-verify", no_argument, 0, 'I'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    memset(out, 0, sizeof *out);
    optind = 1;
    int ch;
    while ((ch = getopt_long(argc, argv, "n:Ao:l:f:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'n': out->ns = optarg; break;
        case 'A': out->all_ns = true; break;
        case 'o': out->output = optarg; break;
        case 'l': out->selector = optarg; break;
        case 'F': out->field_sel = optarg; break;
        case 'f': {
            const char **nf = realloc(out->files, (out->nfiles + 1) * sizeof *nf);
            if (!nf) return 1;
            out->files = nf;
            out->files[out->nfiles++] = optarg;
            break;
        }
        case 's': out->conn.server = optarg; break;
        case 't': out->conn.token = optarg; break;
        case 'k': out->conn.kubeconfig = optarg; break;
        case 'c': out->conn.ca_file = optarg; break;
        case 'I': out->conn.insecure_skip_verify = true; break;
        case 'h':
            fputs(usage_text, stdout);
            fputs(gs_cli_common_help, stdout);
            gs_cli_free(out);
            return 0;
        default:
            fputs(usage_text, stderr);
            gs_cli_free(out);
            return 2;
        }
    }
    const char *o = out->output;
    if (o && strcmp(o, "wide") && strcmp(o, "json") && strcmp(o, "yaml") && strcmp(o, "name")) {
        fprintf(stderr, "%s: unknown output format \"%s\" (want wide, json, yaml or name)\n", argv[0], o);
        gs_cli_free(out);
        return 2;
    }
    out->args = argv + optind;
    out->nargs = argc - optind;
    return -1;
}

void gs_cli_free(struct gs_cli *c)
{
    free(c->files);
    c->files = NULL;
    c->nfiles = 0;
}

struct gs_client *gs_cli_connect(struct gs_cli *c, const char *cmd)
{
    struct gs_client *cl = NULL;
    struct gs_diags d = {0};
    if (gs_client_new(&c->conn, &cl, &d)) {
        for (size_t i = 0; i < d.n; i++) fprintf(stderr, "%s: %s: %s\n", cmd, d.v[i].path, d.v[i].msg);
        if (!d.n) fprintf(stderr, "%s: cannot set up the client\n", cmd);
    }
    gs_diags_free(&d);
    return cl;
}

void gs_cli_report(const char *cmd, int err, const json_t *status)
{
    const char *m = gs_client_status_message(status);
    if (*m) fprintf(stderr, "%s: %s\n", cmd, m);
    else if (err == GS_EIO && !status) fprintf(stderr, "%s: cannot reach the server\n", cmd);
    else fprintf(stderr, "%s: %s\n", cmd, gs_strerror(err));
}

/*--- Manifests ---*/

static int append_docs(struct gs_docs *all, struct gs_docs *more)
{
    size_t n = all->n + more->n;
    json_t **d = realloc(all->docs, n * sizeof *d);
    if (d) all->docs = d;
    int *l = d ? realloc(all->lines, n * sizeof *l) : NULL;
    if (l) all->lines = l;
    if (!d || !l) return GS_ENOMEM;
    for (size_t i = 0; i < more->n; i++) {
        all->docs[all->n + i] = more->docs[i];
        all->lines[all->n + i] = more->lines[i];
    }
    all->n = n;
    more->n = 0;
    return 0;
}

static int read_one(const char *cmd, const char *path, struct gs_docs *all)
{
    char *buf = NULL;
    size_t len = 0;
    int err = gs_read_file(path, &buf, &len);
    if (err) {
        fprintf(stderr, "%s: %s: %s\n", cmd, path, gs_strerror(err));
        return err;
    }
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    size_t bad = 0;
    err = gs_decode_stream(buf, len, &docs, &d, &bad);
    free(buf);
    for (size_t i = 0; i < d.n; i++) fprintf(stderr, "%s: %s: document %zu: %s\n", cmd, path, bad, d.v[i].msg);
    gs_diags_free(&d);
    if (!err) err = append_docs(all, &docs);
    gs_docs_free(&docs);
    return err;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int read_dir(const char *cmd, const char *dir, struct gs_docs *all)
{
    DIR *d = opendir(dir);
    if (!d) return GS_EIO;
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    int err = 0;
    while ((e = readdir(d)) && !err) {
        const char *dot = strrchr(e->d_name, '.');
        if (!dot || (strcmp(dot, ".yaml") && strcmp(dot, ".yml") && strcmp(dot, ".json"))) continue;
        char **nn = realloc(names, (n + 1) * sizeof *nn);
        if (!nn || asprintf(&nn[n], "%s/%s", dir, e->d_name) < 0) err = GS_ENOMEM;
        if (nn) names = nn;
        if (!err) n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        if (!err) err = read_one(cmd, names[i], all);
        free(names[i]);
    }
    free(names);
    return err;
}

int gs_cli_read_manifests(struct gs_cli *c, const char *cmd, struct gs_docs *out)
{
    memset(out, 0, sizeof *out);
    int err = 0;
    for (size_t i = 0; i < c->nfiles && !err; i++) {
        struct stat st;
        if (strcmp(c->files[i], "-") && stat(c->files[i], &st) == 0 && S_ISDIR(st.st_mode))
            err = read_dir(cmd, c->files[i], out);
        else err = read_one(cmd, c->files[i], out);
    }
    return err;
}

/*--- Output ---*/

static char *cell_text(const json_t *v)
{
    if (json_is_string(v)) return strdup(json_string_value(v));
    if (json_is_null(v) || !v) return strdup("<none>");
    return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
}

static void upper(char *s)
{
    for (; *s; s++) *s = *s == ' ' ? '-' : (char)toupper((unsigned char)*s);
}

size_t gs_cli_print_table(FILE *f, const json_t *table, bool wide, bool with_ns, bool headers)
{
    const json_t *cols = json_object_get(table, "columnDefinitions"), *rows = json_object_get(table, "rows");
    size_t nc = json_array_size(cols), nr = json_array_size(rows), tot = nc + (with_ns ? 1 : 0);
    if (!nr) return 0;
    bool *show = calloc(tot, sizeof *show);
    size_t *w = calloc(tot, sizeof *w);
    char **cells = calloc((nr + 1) * tot, sizeof *cells);
    if (!show || !w || !cells) goto out;
    for (size_t j = 0; j < tot; j++) {
        const json_t *cd = with_ns ? (j ? json_array_get(cols, j - 1) : NULL) : json_array_get(cols, j);
        show[j] = !cd || wide || json_integer_value(json_object_get(cd, "priority")) == 0;
        cells[j] = strdup(cd ? json_string_value(json_object_get(cd, "name")) : "namespace");
        if (cells[j]) upper(cells[j]);
    }
    for (size_t i = 0; i < nr; i++) {
        const json_t *row = json_array_get(rows, i), *rc = json_object_get(row, "cells");
        for (size_t j = 0; j < tot; j++) {
            const json_t *v = with_ns ? (j ? json_array_get(rc, j - 1)
                                           : json_object_get(json_object_get(json_object_get(row, "object"),
                                                                             "metadata"), "namespace"))
                                      : json_array_get(rc, j);
            cells[(i + 1) * tot + j] = cell_text(v);
        }
    }
    for (size_t i = 0; i <= nr; i++)
        for (size_t j = 0; j < tot; j++) {
            size_t l = cells[i * tot + j] ? strlen(cells[i * tot + j]) : 0;
            if (l > w[j]) w[j] = l;
        }
    for (size_t i = headers ? 0 : 1; i <= nr; i++) {
        size_t last = 0;
        for (size_t j = 0; j < tot; j++)
            if (show[j]) last = j;
        for (size_t j = 0; j < tot; j++) {
            if (!show[j]) continue;
            const char *t = cells[i * tot + j] ? cells[i * tot + j] : "";
            if (j == last) fprintf(f, "%s", t);
            else fprintf(f, "%-*s   ", (int)w[j], t);
        }
        fputc('\n', f);
    }
out:
    for (size_t i = 0; cells && i < (nr + 1) * tot; i++) free(cells[i]);
    free(cells);
    free(show);
    free(w);
    return nr;
}

int gs_cli_print_doc(FILE *f, const json_t *doc, bool yaml)
{
    char *text = yaml ? gs_yaml_encode(doc) : gs_json_encode(doc, 1);
    if (!text) return GS_ENOMEM;
    fputs(text, f);
    if (!yaml) fputc('\n', f);
    free(text);
    return 0;
}
