/*
 * cache_feed.c - PodDisruptionBudgets and Namespaces into the scheduler's
 * cache; see cache_feed.h.
 *
 * The store key names the object (deletions carry nothing else), so a
 * budget's namespace and name are taken from it.
 */
#include "sched/cache_feed.h"

#include "core/log.h"
#include "sched/cache_dra.h" /* the DRA kinds */

#include <stdlib.h>
#include <string.h>

/* "NS/NAME" after the prefix into ns and name (both within rest). */
static bool split(const char *rest, char *ns, size_t nslen, const char **name)
{
    const char *slash = strchr(rest, '/');
    if (!slash || (size_t)(slash - rest) >= nslen || !slash[1]) return false;
    memcpy(ns, rest, (size_t)(slash - rest));
    ns[slash - rest] = 0;
    *name = slash + 1;
    return true;
}

static int feed_pdb(struct gs_cache *c, const char *key, const char *rest, const json_t *doc)
{
    char ns[256];
    const char *name;
    if (!split(rest, ns, sizeof ns, &name)) return GS_EINVAL;
    gs_cache_remove_pdb(c, ns, name);
    if (!doc) return 0;
    struct gs_pdb_budget *b = calloc(1, sizeof *b);
    if (!b) return GS_ENOMEM;
    struct gs_diags d = {0};
    int rc = gs_pdb_budget_decode(doc, b, &d);
    if (rc) {
        gs_log(GS_LOG_WARN, "scheduler: cannot decode PodDisruptionBudget; preemption ignores it", "object", key,
               "field", d.n ? d.v[0].path : "", "error", d.n ? d.v[0].msg : "", NULL);
        gs_diags_free(&d);
        free(b);
        return rc;
    }
    gs_diags_free(&d);
    /* The key names the object: a document that says otherwise does not move it. */
    char *kns = strdup(ns), *kname = strdup(name);
    if (!kns || !kname) {
        free(kns), free(kname);
        gs_pdb_budget_free(b);
        return GS_ENOMEM;
    }
    free(b->ns), free(b->name);
    b->ns = kns, b->name = kname;
    return gs_cache_put_pdb(c, b);
}

static int feed_namespace(struct gs_cache *c, const char *name, const json_t *doc)
{
    if (!*name || strchr(name, '/')) return GS_EINVAL;
    if (!doc) return gs_cache_set_namespace_labels(c, name, NULL);
    struct gs_labels l = {0};
    const json_t *labels = json_object_get(json_object_get(doc, "metadata"), "labels");
    const char *k;
    const json_t *v;
    int rc = 0;
    json_object_foreach((json_t *)labels, k, v)
        if (json_is_string(v) && (rc = gs_labels_set(&l, k, json_string_value(v))) != 0) break;
    if (!rc) rc = gs_cache_set_namespace_labels(c, name, &l);
    gs_labels_free(&l);
    return rc;
}

int gs_cache_feed(struct gs_cache *c, const char *key, const json_t *doc)
{
    size_t np = strlen(GS_CACHE_FEED_PDB), nn = strlen(GS_CACHE_FEED_NAMESPACE);
    if (!strncmp(key, GS_CACHE_FEED_PDB, np)) return feed_pdb(c, key, key + np, doc);
    if (!strncmp(key, GS_CACHE_FEED_NAMESPACE, nn)) return feed_namespace(c, key + nn, doc);
    if (gs_cache_dra_key(key)) return gs_cache_dra_feed(c, key, doc);
    return GS_ENOENT;
}
