/*
 * cache_feed.h - the objects that only inform the scheduler's cache:
 * PodDisruptionBudgets (preemption's victim order) and Namespaces (their
 * labels, for pod affinity's namespaceSelector).
 *
 * A control loop hands each change of such an object here, by store key
 * ("poddisruptionbudgets.policy/NS/NAME", "namespaces/NAME") with its
 * document, or NULL when it was deleted; this decodes it and updates the
 * cache. Nothing is requeued: a budget only orders victims, and a
 * namespace's labels only matter to the next cycle that reads them.
 */
#ifndef GS_SCHED_CACHE_FEED_H
#define GS_SCHED_CACHE_FEED_H

#include "sched/cache.h"

#include <jansson.h>
#include <stdbool.h>

/* The store-key prefixes handled here. */
#define GS_CACHE_FEED_PDB "poddisruptionbudgets.policy/"
#define GS_CACHE_FEED_NAMESPACE "namespaces/"

/* Applies one change. 0; GS_EINVAL for a document that does not decode (the
 * problem is logged with the key and field, and an older version of the
 * object is dropped so a broken budget cannot keep steering preemption);
 * GS_ENOENT for a key of another kind; GS_ENOMEM. doc is borrowed. */
int gs_cache_feed(struct gs_cache *c, const char *key, const json_t *doc);

#endif
