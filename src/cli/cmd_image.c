/*
 * cmd_image.c - `gpusched image import|ls|rm`: the node's local image store
 * (src/node/image.h), the way `ctr images import` fills containerd's.
 *
 * The store is the agent's: <state dir>/images, where the state dir is what
 * `gpusched agent --state-dir` says (default ./gpusched-data/agent/NODE, NODE
 * being --node-name or this host's name, as the agent picks it). --data-dir is
 * the same flag under the name the other subcommands use for their data
 * directory; --store names the store directory itself.
 */
#include "cli/commands.h"

#include "core/error.h"
#include "node/image.h"

#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: gpusched image import FILE.tar|DIR [flags]\n"
    "       gpusched image ls [flags]\n"
    "       gpusched image rm REF [flags]\n\n"
    "  import   copy an OCI image layout (a directory or a tar of one) into the store;\n"
    "           every blob's sha256 digest and size is checked\n"
    "  ls       list the images: reference, manifest digest, layer bytes, unpacked or not\n"
    "  rm       remove a reference (\"busybox\", a full name, NAME@sha256:..., or a bare\n"
    "           sha256:... digest, which removes every reference to it) and unused blobs\n\n"
    "flags:\n"
    "  --state-dir DIR   the agent's state directory; the store is DIR/images\n"
    "                    (default ./gpusched-data/agent/NODE)\n"
    "  --data-dir DIR    the same as --state-dir\n"
    "  --node-name NAME  NODE in the default state directory (default: this host's name)\n"
    "  --store DIR       the image store directory itself\n";

enum { O_STATE = 1000, O_NODE, O_STORE };

static int store_path(const char *store, const char *state, const char *node, char *out, size_t len)
{
    char host[256];
    int n;
    if (store) n = snprintf(out, len, "%s", store);
    else if (state) n = snprintf(out, len, "%s/images", state);
    else {
        if (!node) {
            if (gethostname(host, sizeof host) != 0) {
                fprintf(stderr, "gpusched image: cannot read this host's name; give --node-name or --store\n");
                return 2;
            }
            host[sizeof host - 1] = '\0';
            node = host;
        }
        n = snprintf(out, len, "gpusched-data/agent/%s/images", node);
    }
    if (n < 0 || (size_t)n >= len) {
        fprintf(stderr, "gpusched image: the store path is longer than %zu characters\n", len - 1);
        return 2;
    }
    return 0;
}

static void human(int64_t b, char *out, size_t len)
{
    if (b >= 10 * 1024 * 1024) snprintf(out, len, "%.1fMiB", (double)b / (1024.0 * 1024.0));
    else if (b >= 10 * 1024) snprintf(out, len, "%.1fKiB", (double)b / 1024.0);
    else snprintf(out, len, "%lldB", (long long)b);
}

static int do_ls(const char *store)
{
    struct gs_image *v;
    size_t n;
    char err[1024];
    int rc = gs_image_list(store, &v, &n, err, sizeof err);
    if (rc) {
        fprintf(stderr, "gpusched image ls: %s\n", err);
        return 1;
    }
    printf("%-48s %-19s %10s %s\n", "REFERENCE", "DIGEST", "SIZE", "UNPACKED");
    for (size_t i = 0; i < n; i++) {
        char sz[32];
        human(v[i].size, sz, sizeof sz);
        printf("%-48s %.19s %10s %s\n", v[i].ref, v[i].digest, sz, v[i].rootfs ? "yes" : "no");
    }
    gs_image_list_free(v, n);
    return 0;
}

int gs_cmd_image(int argc, char **argv)
{
    static const struct option opts[] = {
        {"state-dir", required_argument, 0, O_STATE}, {"data-dir", required_argument, 0, O_STATE},
        {"node-name", required_argument, 0, O_NODE},  {"store", required_argument, 0, O_STORE},
        {"help", no_argument, 0, 'h'},                {0, 0, 0, 0},
    };
    const char *state = NULL, *node = NULL, *store = NULL;
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(argc < 2 ? stderr : stdout, "%s", usage_text);
        return argc < 2 ? 2 : 0;
    }
    const char *sub = argv[1];
    if (strcmp(sub, "import") && strcmp(sub, "ls") && strcmp(sub, "rm")) {
        fprintf(stderr, "gpusched image: unknown subcommand \"%s\" (want import, ls or rm)\n%s", sub, usage_text);
        return 2;
    }
    optind = 1;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc - 1, argv + 1, ":h", opts, NULL)) != -1) {
        switch (c) {
        case O_STATE: state = optarg; break;
        case O_NODE: node = optarg; break;
        case O_STORE: store = optarg; break;
        case 'h': printf("%s", usage_text); return 0;
        case ':':
            fprintf(stderr, "gpusched image %s: %s needs a value\n", sub, argv[optind]);
            return 2;
        default:
            fprintf(stderr, "gpusched image %s: unknown flag \"%s\"\n%s", sub, argv[optind], usage_text);
            return 2;
        }
    }
    if (store && state) {
        fprintf(stderr, "gpusched image %s: give --store or --state-dir/--data-dir, not both\n", sub);
        return 2;
    }
    char **args = argv + 1 + optind;
    int nargs = argc - 1 - optind;
    int want = strcmp(sub, "ls") ? 1 : 0;
    if (nargs != want) {
        if (want) fprintf(stderr, "gpusched image %s: want one %s\n", sub, !strcmp(sub, "rm") ? "REF" : "FILE.tar|DIR");
        else fprintf(stderr, "gpusched image ls: unexpected argument \"%s\"\n", args[0]);
        return 2;
    }
    char path[PATH_MAX], err[1024];
    if (store_path(store, state, node, path, sizeof path)) return 2;
    if (!strcmp(sub, "ls")) return do_ls(path);
    if (!strcmp(sub, "rm")) {
        int rc = gs_image_remove(path, args[0], err, sizeof err);
        if (rc) {
            fprintf(stderr, "gpusched image rm: %s\n", err);
            return 1;
        }
        printf("removed %s\n", args[0]);
        return 0;
    }
    size_t n_refs = 0;
    int rc = gs_image_import(path, args[0], &n_refs, err, sizeof err);
    if (rc) {
        fprintf(stderr, "gpusched image import: %s\n", err);
        return 1;
    }
    printf("imported %zu image%s from %s into %s\n", n_refs, n_refs == 1 ? "" : "s", args[0], path);
    return 0;
}
