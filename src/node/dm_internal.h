/*
 * dm_internal.h - state shared by devicemanager.c (registry, streams,
 * registration server) and dm_admit.c (admission, checkpoint).
 */
#ifndef GS_NODE_DM_INTERNAL_H
#define GS_NODE_DM_INTERNAL_H

#include "node/devicemanager.h"
#include "node/deviceplugin/rpc.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define DM_MAX_ENDPOINTS 16

struct dm_endpoint {
    char resource[128];
    char path[400];
    struct gs_rpc_conn *conn;
    bool preferred;            /* GetPreferredAllocation available */
    bool connected;            /* under dm->mu */
    json_t *devices;           /* [{id, healthy, numa}] under dm->mu */
    pthread_t thread;
    atomic_bool stop;
    struct gs_dm *dm;
};

struct gs_dm {
    struct gs_dm_config cfg;
    char dir[256], checkpoint[320], sock[320];
    pthread_mutex_t mu;        /* registry, device lists, allocations */
    pthread_mutex_t admit_mu;  /* serialises admissions and removals */
    struct dm_endpoint *ep[DM_MAX_ENDPOINTS];
    json_t *allocs;            /* array of records, under mu */
    struct gs_rpc_server *srv;
};

/* Under mu. The endpoint serving a resource, or NULL. */
struct dm_endpoint *gs__dm_find(struct gs_dm *dm, const char *resource);
/* Loads / writes the checkpoint (mu held for save). */
int gs__dm_load(struct gs_dm *dm, char *err, size_t errlen);
int gs__dm_save(struct gs_dm *dm);
/* Under mu: is the device allocated to any pod other than `pod` (NULL = any)? */
bool gs__dm_taken(struct gs_dm *dm, const char *resource, const char *id, const char *pod);

#endif
