/*
 * cmd_validate.c - `gpusched validate`: check manifests before applying them.
 *
 * Reads every document of every input (files, directories of *.yaml, *.yml
 * and *.json taken in name order, or "-" for stdin), decodes it with the
 * object model and prints one line per problem to stdout:
 *
 *   FILE:DOC: field.path: message
 *   FILE:DOC: line L column C: syntax problem
 *
 * DOC is the 1-based number of the document in its file. A summary line goes
 * to stderr so scripts can parse stdout alone. With -o json|yaml the valid
 * documents are printed back as decoded (unknown fields included), which is
 * how the round trip is tested from outside. Exit: 0 all valid, 1 some
 * document invalid, 2 usage error or unreadable input.
 */
#include "cli/commands.h"
#include "core/codec.h"
#include "core/object.h"
#include "sched/framework.h"

#include <dirent.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum out_fmt { OUT_NONE, OUT_JSON, OUT_YAML };

struct vstate {
    enum out_fmt fmt;
    json_t *out;        /* valid documents, kept for -o */
    size_t files, docs, invalid;
    bool read_error;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: gpusched validate -f FILE|DIR|- [-f ...] [-o json|yaml]\n\n"
               "Checks Kubernetes-style manifests (YAML or JSON, several documents per file)\n"
               "and prints every problem as FILE:DOC: field.path: message.\n\n"
               "options:\n"
               "  -f, --filename PATH  a file, a directory (its *.yaml, *.yml, *.json) or - for stdin\n"
               "  -o, --output FORMAT  print the valid documents back as json or yaml\n"
               "  -h, --help           show this help\n\n"
               "exit status: 0 all valid, 1 some document invalid, 2 usage error or unreadable input\n");
}

/*--- One file ---*/

/* Scheduler profiles are not API objects (no metadata), so the object model
 * does not know them; their own parser checks plugin names, points and args. */
static bool is_sched_config(const json_t *doc)
{
    const char *kind = json_string_value(json_object_get(doc, "kind"));
    return kind && !strcmp(kind, "KubeSchedulerConfiguration");
}

static int decode_doc(struct vstate *st, json_t *doc, struct gs_diags *d)
{
    if (is_sched_config(doc)) {
        struct gs_sched_config cfg = {0};
        int rc = gs_sched_config_parse(doc, &cfg, d);
        if (rc == 0) {
            gs_sched_config_free(&cfg);
            if (st->fmt != OUT_NONE) json_array_append(st->out, doc);
        }
        return rc;
    }
    struct gs_object *o = NULL;
    int rc = gs_object_decode(doc, &o, d);
    if (rc == 0) {
        if (st->fmt != OUT_NONE) json_array_append(st->out, gs_object_to_json(o));
        gs_object_free(o);
    }
    return rc;
}

static void report_doc(struct vstate *st, const char *name, size_t docno, json_t *doc)
{
    struct gs_diags d = {0};
    int rc = decode_doc(st, doc, &d);
    if (rc != 0) {
        st->invalid++;
        for (size_t i = 0; i < d.n; i++) {
            if (d.v[i].path[0]) printf("%s:%zu: %s: %s\n", name, docno, d.v[i].path, d.v[i].msg);
            else printf("%s:%zu: %s\n", name, docno, d.v[i].msg);
        }
        if (d.n == 0) printf("%s:%zu: %s\n", name, docno, gs_strerror(rc));
    }
    gs_diags_free(&d);
}

static void validate_file(struct vstate *st, const char *path)
{
    const char *name = strcmp(path, "-") ? path : "<stdin>";
    char *buf;
    size_t len;
    int rc = gs_read_file(path, &buf, &len);
    if (rc) {
        fprintf(stderr, "gpusched validate: cannot read %s: %s\n", name, rc == GS_ENOENT ? "no such file" : gs_strerror(rc));
        st->read_error = true;
        return;
    }
    st->files++;
    struct gs_docs docs = {0};
    struct gs_diags d = {0};
    size_t err_doc = 1;
    rc = gs_decode_stream(buf, len, &docs, &d, &err_doc);
    free(buf);
    if (rc) {
        st->docs++;
        st->invalid++;
        for (size_t i = 0; i < d.n; i++) printf("%s:%zu: %s\n", name, err_doc, d.v[i].msg);
        if (d.n == 0) printf("%s:%zu: %s\n", name, err_doc, gs_strerror(rc));
    }
    for (size_t i = 0; i < docs.n; i++) {
        st->docs++;
        report_doc(st, name, i + 1, docs.docs[i]);
    }
    gs_diags_free(&d);
    gs_docs_free(&docs);
}

/*--- Directories ---*/

static bool manifest_name(const char *n)
{
    size_t l = strlen(n);
    if (n[0] == '.') return false;
    return (l > 5 && !strcmp(n + l - 5, ".yaml")) || (l > 4 && !strcmp(n + l - 4, ".yml")) ||
           (l > 5 && !strcmp(n + l - 5, ".json"));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void validate_dir(struct vstate *st, const char *dir)
{
    DIR *dp = opendir(dir);
    if (!dp) {
        fprintf(stderr, "gpusched validate: cannot read directory %s\n", dir);
        st->read_error = true;
        return;
    }
    char **names = NULL;
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(dp))) {
        if (!manifest_name(e->d_name)) continue;
        char **nn = realloc(names, (n + 1) * sizeof *nn);
        if (!nn) break;
        names = nn;
        if (asprintf(&names[n], "%s/%s", dir, e->d_name) < 0) break;
        n++;
    }
    closedir(dp);
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        validate_file(st, names[i]);
        free(names[i]);
    }
    free(names);
}

static void validate_path(struct vstate *st, const char *path)
{
    struct stat sb;
    if (strcmp(path, "-") && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) validate_dir(st, path);
    else validate_file(st, path);
}

/*--- Output and arguments ---*/

static void print_docs(struct vstate *st)
{
    if (st->fmt == OUT_JSON) {
        json_t *list = json_pack("{s:s,s:s,s:O}", "apiVersion", "v1", "kind", "List", "items", st->out);
        char *s = list ? gs_json_encode(list, 1) : NULL;
        if (s) printf("%s\n", s);
        free(s);
        json_decref(list);
        return;
    }
    size_t i;
    json_t *doc;
    json_array_foreach(st->out, i, doc) {
        char *s = gs_yaml_encode(doc);
        if (s) printf("%s%s", i ? "---\n" : "", s);
        free(s);
    }
}

static const char *opt_value(int argc, char **argv, int *i, const char *shortf, const char *longf)
{
    const char *a = argv[*i];
    size_t ll = strlen(longf);
    if (!strcmp(a, shortf) || !strcmp(a, longf)) return *i + 1 < argc ? argv[++*i] : NULL;
    if (!strncmp(a, longf, ll) && a[ll] == '=') return a + ll + 1;
    if (!strncmp(a, shortf, 2) && a[2]) return a + 2;
    return NULL;
}

static bool is_opt(const char *a, const char *shortf, const char *longf)
{
    size_t ll = strlen(longf);
    return !strncmp(a, shortf, 2) || !strcmp(a, longf) || (!strncmp(a, longf, ll) && a[ll] == '=');
}

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "gpusched validate: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n\n");
    usage(stderr);
    return 2;
}

int gs_cmd_validate(int argc, char **argv)
{
    struct vstate st = {0};
    const char **inputs = calloc((size_t)argc + 1, sizeof *inputs);
    size_t ninputs = 0;
    if (!inputs) return 2;
    int rc = 0;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            free(inputs);
            return 0;
        } else if (is_opt(a, "-f", "--filename")) {
            if (!(v = opt_value(argc, argv, &i, "-f", "--filename"))) rc = usage_error("%s needs a path", a);
            else inputs[ninputs++] = v;
        } else if (is_opt(a, "-o", "--output")) {
            v = opt_value(argc, argv, &i, "-o", "--output");
            if (v && !strcmp(v, "json")) st.fmt = OUT_JSON;
            else if (v && !strcmp(v, "yaml")) st.fmt = OUT_YAML;
            else rc = usage_error("-o takes json or yaml, got \"%s\"", v ? v : "");
        } else if (a[0] == '-' && a[1]) {
            rc = usage_error("unknown option \"%s\"", a);
        } else {
            rc = usage_error("unexpected argument \"%s\"; give inputs with -f", a);
        }
    }
    if (!rc && ninputs == 0) rc = usage_error("no input%s; give -f FILE, -f DIR or -f -", "");
    if (rc) {
        free(inputs);
        return rc;
    }
    st.out = json_array();
    for (size_t i = 0; i < ninputs; i++) validate_path(&st, inputs[i]);
    free(inputs);
    if (st.fmt != OUT_NONE) print_docs(&st);
    json_decref(st.out);
    fflush(stdout);
    fprintf(stderr, "validate: %zu file%s, %zu document%s, %zu invalid\n", st.files, st.files == 1 ? "" : "s", st.docs,
            st.docs == 1 ? "" : "s", st.invalid);
    if (st.read_error) return 2;
    return st.invalid ? 1 : 0;
}
