/*
 * gpus.c - the node GPU table (gpus.h): device IDs, replica names, NVLink
 * islands.
 *
 * Islands are connected components of the "has at least one NVLink" graph: on
 * an NVSwitch machine every GPU lands in one island, on a hybrid cube-mesh
 * with two boards each board is one. That is what GetPreferredAllocation
 * keeps a multi-GPU request inside.
 */
#include "node/gpus.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*--- Islands ---*/

static void flood(struct gs_node_gpus *g, int i, int island)
{
    g->gpu[i].island = island;
    for (int j = 0; j < g->n; j++)
        if (g->gpu[j].island < 0 && (g->nvlink[i][j] || g->nvlink[j][i])) flood(g, j, island);
}

void gs_node_gpus_finish(struct gs_node_gpus *g)
{
    if (g->replicas < 1) g->replicas = 1;
    if (g->replicas > GS_NODE_MAX_REPLICAS) g->replicas = GS_NODE_MAX_REPLICAS;
    if (g->n > GS_NODE_MAX_GPUS) g->n = GS_NODE_MAX_GPUS;
    for (int i = 0; i < g->n; i++) g->gpu[i].island = -1;
    int next = 0;
    for (int i = 0; i < g->n; i++)
        if (g->gpu[i].island < 0) flood(g, i, next++);
}

/*--- IDs ---*/

int gs_node_gpus_ndev(const struct gs_node_gpus *g)
{
    return g->n * (g->replicas < 1 ? 1 : g->replicas);
}

int gs_node_gpus_id(const struct gs_node_gpus *g, int i, char *buf, size_t len)
{
    int r = g->replicas < 1 ? 1 : g->replicas;
    int slot = i / r;
    if (r == 1)
        snprintf(buf, len, "%s", g->gpu[slot].uuid);
    else
        snprintf(buf, len, "%s::%d", g->gpu[slot].uuid, i % r);
    return slot;
}

static int parse_replica(const char *s, int max)
{
    if (!*s) return -1;
    int v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > max) return -1;
        v = v * 10 + (*s - '0');
    }
    return v < max ? v : -1;
}

int gs_node_gpus_find(const struct gs_node_gpus *g, const char *id, int *replica)
{
    const char *sep = strstr(id, "::");
    size_t ulen = sep ? (size_t)(sep - id) : strlen(id);
    int r = g->replicas < 1 ? 1 : g->replicas;
    int rep = 0;
    if (r == 1 && sep) return -1;
    if (r > 1) {
        if (!sep) return -1;
        rep = parse_replica(sep + 2, r);
        if (rep < 0) return -1;
    }
    for (int i = 0; i < g->n; i++) {
        if (strlen(g->gpu[i].uuid) == ulen && !memcmp(g->gpu[i].uuid, id, ulen)) {
            if (replica) *replica = rep;
            return i;
        }
    }
    return -1;
}

bool gs_node_gpus_set_health(struct gs_node_gpus *g, int slot, bool healthy)
{
    if (slot < 0 || slot >= g->n || g->gpu[slot].healthy == healthy) return false;
    g->gpu[slot].healthy = healthy;
    return true;
}

bool gs_node_gpus_set_parent_health(struct gs_node_gpus *g, int parent, bool healthy)
{
    bool changed = false;
    for (int i = 0; i < g->n; i++)
        if (g->gpu[i].parent == parent) changed |= gs_node_gpus_set_health(g, i, healthy);
    return changed;
}

/*--- Mock tables ---*/

void gs_node_gpus_mock(struct gs_node_gpus *g, int n, int numa, int island, int replicas)
{
    memset(g, 0, sizeof *g);
    if (n > GS_NODE_MAX_GPUS) n = GS_NODE_MAX_GPUS;
    if (numa < 1) numa = 1;
    g->n = n;
    g->replicas = replicas;
    for (int i = 0; i < n; i++) {
        struct gs_node_gpu *d = &g->gpu[i];
        snprintf(d->uuid, sizeof d->uuid, "GPU-00000000-0000-0000-0000-0000000000%02d", i);
        d->index = i;
        d->minor = i;
        d->parent = i;
        d->numa = i * numa / (n ? n : 1);
        d->healthy = true;
        for (int j = 0; j < n; j++)
            if (island > 0 && i != j && i / island == j / island) g->nvlink[i][j] = 12;
    }
    gs_node_gpus_finish(g);
}
