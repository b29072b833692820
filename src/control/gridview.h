/*
 * gridview.h - the console's GPU grid kept in memory, fed by the store's
 * change stream (docs/CONSOLE.md "The GPU grid").
 *
 * GET /apis/ui.gpusched.io/v1/gpugrid needs every node's GPUs and who holds
 * each; built from the store, that read decodes every Pod (50,000 of them:
 * about two seconds) on each request. The view does what kube-apiserver's
 * watch cache does: it lists Nodes and Pods once, then follows the change
 * stream, decoding each changed Node or Pod once into a small record (a
 * node's GPUs without holders and its UUID-to-index map; a pod's
 * namespace, name, node, PodGroup, devices or devices annotation, and for a
 * pending pod the few fields the page lists), with its pieces of the
 * reply already encoded. A request concatenates those pieces, for the
 * principal asking; a node's whole entry is cached for principals who see
 * every namespace and dropped when the Node or a pod holding its GPUs
 * changes (gridview.c).
 *
 * What it promises:
 *  - The answer reflects the store at the resourceVersion it carries, and
 *    that version is at least the store's version when the request came:
 *    before answering, the view reads the change stream up to the store's
 *    current version (a write the client already saw is in it). It waits
 *    for that at most a bound; past it (or when the view cannot keep up, or
 *    lost its place in the stream and relists), gs_gridview_grid answers
 *    GS_ETIMEDOUT and the caller builds the grid from the store instead.
 *  - The document equals what gs_ui_gpugrid builds from the store at the
 *    same version (the same record and assembly code serve both).
 *  - Memory: one record per Node and per Pod, about the size of the fields
 *    above (measured in bench/RESULTS.md "Console"); finished pods keep a
 *    record of their key only.
 *
 * One thread follows the stream; requests may catch up on their own thread
 * too. Thread-safe.
 */
#ifndef GS_CONTROL_GRIDVIEW_H
#define GS_CONTROL_GRIDVIEW_H

#include "control/store.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

struct gs_gridview;
struct gs_principal;

/* Starts the view over store: lists, then follows on a thread of its own.
 * 0, GS_ENOMEM or GS_EIO (no thread). Free with gs_gridview_free. */
int gs_gridview_new(struct gs_store *store, struct gs_gridview **out);
/* Stops the thread and frees everything; NULL is fine. */
void gs_gridview_free(struct gs_gridview *v);

/* The GPUGrid document for who as the reply's bytes (NUL-terminated, *len
 * without the NUL; the caller frees it), at a version >= the store's
 * current one when called; waits for that at most wait_ms. The bytes are
 * those json_dumps(JSON_COMPACT) writes for gs_ui_gpugrid's document at the
 * same version. NULL with *err: GS_ETIMEDOUT (not caught up in time: build
 * it from the store), GS_ENOMEM. A principal who sees every namespace gets
 * each node's cached entry; a tenant's entries are encoded for it, from the
 * records' pieces, and never cached. */
char *gs_gridview_text(struct gs_gridview *v, const struct gs_principal *who, int wait_ms, size_t *len, int *err);

/* The same document parsed (new reference), for tests and tools. */
json_t *gs_gridview_grid(struct gs_gridview *v, const struct gs_principal *who, int wait_ms, int *err);

/* What the view holds, for the bench and the tests. bytes counts the pod
 * records' allocations (malloc_usable_size), the length of the node
 * records' encoded pieces and of the cached node entries (the node records'
 * JSON objects take somewhat more). */
struct gs_gridview_stats {
    size_t nodes, pods, bytes;
    int64_t rv;       /* the version the records reflect */
    size_t relists;   /* lists taken (1 at start, one more per lost place in the stream) */
    size_t cached;    /* node entries held encoded (for principals who see every namespace) */
};
void gs_gridview_stats(struct gs_gridview *v, struct gs_gridview_stats *out);

/* The GPUs a pod asks for (nvidia.com/gpu limits, else requests, summed
 * over containers); api_ui.c. */
double gs__ui_pod_gpus(const json_t *pod);

#endif
