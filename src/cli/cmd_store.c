/*
 * cmd_store.c - `gpusched store migrate`: copies every object of a stopped
 * server's SQLite store into etcd, for moving a control plane onto several
 * replicas (docs/CONTROL_PLANE.md "Running highly available").
 *
 *   gpusched store migrate --from sqlite:DATA_DIR --to etcd:URL[,URL...]
 *       [--etcd-prefix /registry] [--etcd-cafile F] [--etcd-certfile F --etcd-keyfile F]
 *       [--force] [--no-advance]
 *
 * The server must be stopped: a running one holds DATA_DIR/store.lock
 * (server.c), and the copy refuses to start while it is held, since writes
 * after the copy began would be lost. A target prefix that already holds
 * objects is refused unless --force (which writes over the keys it copies
 * and leaves other keys alone).
 *
 * resourceVersions: etcd numbers versions with its own revision, so every
 * copied object gets a new one. Before copying, the command moves etcd's
 * revision above the SQLite store's last version (one small write per
 * revision on a scratch key, deleted afterwards), so versions stay
 * monotonic: a client that resumes a watch from a version it got from the
 * old server gets 410 Expired from the new one and relists, never a watch
 * that silently waits for a version etcd has not reached. --no-advance
 * skips that (for a large gap): then every client must relist, and the
 * command says so.
 */
#include "cli/commands.h"
#include "cli/cmd_server_store.h" /* the --etcd-* flags, parsed as the server parses them */
#include "control/server.h"
#include "control/store.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#define CMD "gpusched store migrate"
/* Beyond this many revisions to skip, --no-advance is asked for (minutes of writes). */
#define ADVANCE_MAX 2000000
#define BUMP_KEY "gpusched.io-migrate/revision" /* under no served resource's prefix */

static void usage(FILE *f)
{
    fprintf(f, "usage: gpusched store migrate --from sqlite:DATA_DIR --to etcd:URL[,URL...] [options]\n\n"
               "Copies every object of a stopped server's SQLite store into etcd, under a key\n"
               "prefix, for `gpusched server --store etcd` replicas (docs/CONTROL_PLANE.md,\n"
               "\"Running highly available\").\n\n"
               "  --from sqlite:DIR     the data directory of the stopped server (holds store.db)\n"
               "  --to etcd:URL[,URL]   etcd members, http(s)://HOST:PORT\n"
               "  --etcd-prefix PATH    key prefix (default /registry)\n"
               "  --etcd-cafile FILE --etcd-certfile FILE --etcd-keyfile FILE  TLS to etcd\n"
               "  --force               copy even though the prefix already holds objects (writes over\n"
               "                        the keys copied, leaves the others)\n"
               "  --no-advance          do not move etcd's revision above the SQLite store's last\n"
               "                        resourceVersion first: every client must then relist\n");
}

struct count_ctx {
    size_t n;
    char first[512];
};

static int count_fn(const char *key, json_t *obj, void *arg)
{
    (void)obj;
    struct count_ctx *c = arg;
    if (!c->n++) snprintf(c->first, sizeof c->first, "%s", key);
    return 0;
}

struct copy_ctx {
    struct gs_store *to;
    bool force;
    size_t copied, replaced;
    int err;
    char failed[512];
    json_t *per; /* resource -> count */
};

static int copy_fn(const char *key, json_t *obj, void *arg)
{
    struct copy_ctx *c = arg;
    int64_t rv = 0;
    int err = gs_store_create(c->to, key, obj, &rv);
    if (err == GS_EEXIST && c->force) {
        err = gs_store_update(c->to, key, obj, 0, &rv);
        if (!err) c->replaced++;
    }
    if (err) {
        c->err = err;
        snprintf(c->failed, sizeof c->failed, "%s", key);
        return 1;
    }
    c->copied++;
    char res[256];
    snprintf(res, sizeof res, "%.*s", (int)strcspn(key, "/"), key);
    json_object_set_new(c->per, res, json_integer(json_integer_value(json_object_get(c->per, res)) + 1));
    return 0;
}

/* Moves the target's revision past want with writes to a scratch key,
 * deleted at the end (one more revision). 0 or the store's error. */
static int advance(struct gs_store *to, int64_t want)
{
    json_t *o = json_pack("{s:s}", "note", "gpusched store migrate: advancing the revision");
    if (!o) return GS_ENOMEM;
    int64_t rv = 0;
    int err = gs_store_create(to, BUMP_KEY, o, &rv);
    if (err == GS_EEXIST) err = 0;
    while (!err && gs_store_current_rv(to) <= want) err = gs_store_update(to, BUMP_KEY, o, 0, &rv);
    json_decref(o);
    if (!err) err = gs_store_delete(to, BUMP_KEY, 0, NULL, NULL);
    return err;
}

/* The running server's lock on the data directory (server.c): held here
 * for the whole copy so no server starts on it meanwhile. -1 when held. */
static int lock_dir(const char *dir)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/" GS_SERVER_LOCK_FILE, dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, CMD ": --from sqlite:%s: cannot open %s: %s\n", dir, path, strerror(errno));
        return -1;
    }
    if (flock(fd, LOCK_EX | LOCK_NB)) {
        fprintf(stderr, CMD ": --from sqlite:%s: the store is in use by a running gpusched server (it holds %s): "
                "stop the server first, or writes made during the copy are lost\n", dir, path);
        close(fd);
        return -1;
    }
    return fd;
}

static int migrate(int argc, char **argv)
{
    static const struct option base[] = {
        {"from", required_argument, 0, 'f'}, {"to", required_argument, 0, 't'},
        {"force", no_argument, 0, 'F'},      {"no-advance", no_argument, 0, 'N'},
        {"help", no_argument, 0, 'h'},       {0, 0, 0, 0},
    };
    struct option opts[32];
    size_t nb = 0;
    for (; base[nb].name; nb++) opts[nb] = base[nb];
    opts[nb] = (struct option){0};
    gs__store_options_append(opts, sizeof opts / sizeof opts[0]);
    struct gs_server_opts so = {0};
    struct gs__store_flags sf = {0};
    const char *from = NULL, *to = NULL;
    bool force = false, no_advance = false;
    int c, rc = 0;
    optind = 1;
    while (!rc && (c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'f': from = optarg; break;
        case 't': to = optarg; break;
        case 'F': force = true; break;
        case 'N': no_advance = true; break;
        case 'h': usage(stdout); return 0;
        case '?': usage(stderr); return 2;
        default: {
            const struct option *o = opts;
            while (o->name && o->val != c) o++;
            if (o->name && (!strcmp(o->name, "store") || !strcmp(o->name, "etcd-endpoints") ||
                            !strcmp(o->name, "etcd-compaction-interval"))) {
                fprintf(stderr, CMD ": --%s: not a migrate flag (the target is --to etcd:URL[,URL...])\n", o->name);
                rc = 2;
                break;
            }
            rc = gs__store_option(&sf, &so, c, optarg, CMD);
            if (rc < 0) rc = 2;
            break;
        }
        }
    }
    if (!rc && optind < argc) {
        fprintf(stderr, CMD ": unexpected argument \"%s\"\n", argv[optind]);
        rc = 2;
    }
    if (!rc && (!from || strncmp(from, "sqlite:", 7) || !from[7])) {
        fprintf(stderr, CMD ": --from \"%s\": want sqlite:DATA_DIR (the stopped server's data directory)\n",
                from ? from : "");
        rc = 2;
    }
    if (!rc && (!to || strncmp(to, "etcd:", 5) || !to[5])) {
        fprintf(stderr, CMD ": --to \"%s\": want etcd:URL[,URL...] (e.g. etcd:http://127.0.0.1:2379)\n", to ? to : "");
        rc = 2;
    }
    /* The endpoints and the rest as `server --store etcd` takes them. */
    const struct option *e = opts;
    while (e->name && strcmp(e->name, "etcd-endpoints")) e++;
    const struct option *k = opts;
    while (k->name && strcmp(k->name, "store")) k++;
    if (!rc && e->name && k->name) rc = gs__store_option(&sf, &so, k->val, "etcd", CMD);
    if (!rc && e->name) rc = gs__store_option(&sf, &so, e->val, to + 5, CMD) ? 2 : 0;
    if (!rc) rc = gs__store_flags_check(&sf, &so, CMD);
    if (rc) {
        gs__store_flags_free(&sf);
        return rc;
    }
    const char *dir = from + 7;
    char db[4200];
    snprintf(db, sizeof db, "%s/store.db", dir);
    struct stat st;
    if (stat(db, &st)) {
        fprintf(stderr, CMD ": --from sqlite:%s: no store there (%s: %s)\n", dir, db, strerror(errno));
        gs__store_flags_free(&sf);
        return 1;
    }
    int lock = lock_dir(dir);
    if (lock < 0) {
        gs__store_flags_free(&sf);
        return 1;
    }
    struct gs_diags d = {0};
    struct gs_store *src = NULL, *dst = NULL;
    struct gs_store_opts sqo = {.dir = dir, .diags = &d};
    int err = gs_store_open_sqlite(&sqo, &src);
    const char *stage = "cannot open the SQLite store";
    if (!err) {
        struct gs_store_etcd_opts eo = so.etcd;
        eo.compaction_interval_ms = -1; /* a copy compacts nothing */
        eo.diags = &d;
        stage = "cannot reach etcd";
        err = gs_store_open_etcd(&eo, &dst);
    }
    const char *prefix = so.etcd.prefix ? so.etcd.prefix : "/registry";
    struct count_ctx cc = {0};
    if (!err) {
        stage = "cannot list the target";
        err = gs_store_list(dst, "", count_fn, &cc, NULL);
    }
    if (!err && cc.n && !force) {
        fprintf(stderr, CMD ": --to %s: the prefix %s already holds %zu objects (%s/%s, ...): refusing to mix two "
                "clusters; --force copies over them\n", to, prefix, cc.n, prefix, cc.first);
        rc = 1;
    }
    int64_t src_rv = src ? gs_store_current_rv(src) : 0, start_rv = dst ? gs_store_current_rv(dst) : 0;
    bool advanced = false;
    if (!err && !rc && !no_advance && start_rv <= src_rv) {
        if (src_rv - start_rv > ADVANCE_MAX) {
            fprintf(stderr, CMD ": etcd's revision (%lld) is %lld below the SQLite store's last resourceVersion "
                    "(%lld): moving it up would take that many writes; give --no-advance and have every client "
                    "relist\n", (long long)start_rv, (long long)(src_rv - start_rv), (long long)src_rv);
            rc = 1;
        } else {
            stage = "cannot advance etcd's revision";
            err = advance(dst, src_rv);
            advanced = !err;
        }
    }
    struct copy_ctx cp = {.to = dst, .force = force, .per = json_object()};
    int64_t first_rv = dst ? gs_store_current_rv(dst) + 1 : 0;
    if (!err && !rc) {
        stage = "cannot list the SQLite store";
        err = gs_store_list(src, "", copy_fn, &cp, NULL);
        if (!err && cp.err) {
            fprintf(stderr, CMD ": cannot write %s/%s to etcd: %s (%zu objects copied before it; run again with "
                    "--force to finish)\n", prefix, cp.failed, gs_strerror(cp.err), cp.copied);
            rc = 1;
        }
    }
    if (err) {
        for (size_t i = 0; i < d.n; i++) fprintf(stderr, CMD ": %s: %s\n", d.v[i].path, d.v[i].msg);
        fprintf(stderr, CMD ": %s: %s\n", stage, gs_strerror(err));
        rc = 1;
    }
    if (!rc) {
        int64_t last_rv = gs_store_current_rv(dst);
        printf("copied %zu objects from sqlite:%s to etcd prefix %s", cp.copied, dir, prefix);
        if (cp.replaced) printf(" (%zu written over)", cp.replaced);
        printf(":");
        const char *r;
        json_t *v;
        json_object_foreach(cp.per, r, v) printf(" %s %lld", r, (long long)json_integer_value(v));
        printf("\n");
        if (advanced || start_rv > src_rv)
            printf("resourceVersions: the copies have %lld..%lld, above the SQLite store's last (%lld); a client "
                   "resuming an old watch gets 410 Expired and relists\n", (long long)first_rv, (long long)last_rv,
                   (long long)src_rv);
        else
            printf("resourceVersions: the copies have %lld..%lld, BELOW the SQLite store's last (%lld): restart "
                   "every client (agents, schedulers, kubectl watches) so each relists\n", (long long)first_rv,
                   (long long)last_rv, (long long)src_rv);
    }
    json_decref(cp.per);
    gs_diags_free(&d);
    gs_store_close(dst);
    gs_store_close(src);
    gs__store_flags_free(&sf);
    close(lock);
    return rc;
}

int gs_cmd_store(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "migrate")) return migrate(argc - 1, argv + 1);
    fprintf(stderr, "gpusched store: unknown subcommand \"%s\" (want migrate)\n", argv[1]);
    return 2;
}
