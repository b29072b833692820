/*
 * health.h - per-GPU health: a two-state machine fed by device events.
 *
 *     Healthy --critical Xid / double-bit ECC / not answering--> Unhealthy
 *     Unhealthy --answers queries and no critical event for the recovery window--> Healthy
 *
 * Which Xids are critical is configuration. The default follows NVIDIA's
 * device plugin: every Xid is critical except 13, 31, 43, 45, 68 and 109,
 * which are application errors (a kernel's bad address, a preempted context)
 * that say nothing about the device. A transition keeps its reason ("Xid 79:
 * GPU has fallen off the bus"), and a recovery says what it recovered from.
 *
 * Other layers subscribe to transitions (the device manager marks a device
 * Unhealthy for the kubelet, the NRT marks it not allocatable, the exporter
 * shows it). Callbacks run on the thread that fed the event, after the state
 * has changed and with no lock held, so a callback may query the machine.
 */
#ifndef GS_DISCOVERY_HEALTH_H
#define GS_DISCOVERY_HEALTH_H

#include "discovery/discovery.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gs_health_state { GS_HEALTH_HEALTHY = 0, GS_HEALTH_UNHEALTHY = 1 };

struct gs_health_config {
    bool xid_critical[GS_XID_MAX]; /* by Xid code */
    bool other_xid_critical;       /* Xids >= GS_XID_MAX */
    bool dbe_critical;             /* double-bit ECC events */
    int64_t recovery_ns;           /* quiet window before recovering; < 0 = never recover by itself */
};

/* Defaults: all Xids critical but 13,31,43,45,68,109; DBE critical; 60 s window. */
void gs_health_config_default(struct gs_health_config *c);
/* Makes exactly the listed Xids critical: "79,48,94" or ranges "61-64"; "all" for every one. 0 or GS_EINVAL. */
int gs_health_config_set_critical(struct gs_health_config *c, const char *list);
/* Makes the listed Xids not critical (added to whatever is set). 0 or GS_EINVAL. */
int gs_health_config_set_ignored(struct gs_health_config *c, const char *list);
bool gs_health_xid_critical(const struct gs_health_config *c, uint64_t xid);
/* A short description of an Xid ("GPU has fallen off the bus"), or "" if we know none. */
const char *gs_xid_description(uint64_t xid);
const char *gs_health_state_name(enum gs_health_state s);

struct gs_health_change {
    int gpu;
    enum gs_health_state from, to;
    const char *reason; /* borrowed for the duration of the callback */
    int64_t t_ns;
};
typedef void (*gs_health_cb)(const struct gs_health_change *c, void *arg);

/* What is known about one GPU. */
struct gs_health_gpu {
    enum gs_health_state state;
    char reason[160];        /* of the latest transition; "" if none yet */
    int64_t since_ns;        /* time of the latest transition */
    int64_t last_critical_ns;
    uint64_t last_xid;       /* 0 if none yet */
    uint64_t xid_count;      /* all Xids seen, critical or not */
    bool answering;
};

struct gs_health;

/* A machine for n_gpus GPUs, all Healthy. Copies the config. 0, GS_EINVAL or GS_ENOMEM. */
int gs_health_create(const struct gs_health_config *c, int n_gpus, struct gs_health **out);
void gs_health_free(struct gs_health *h);
/* Adds a subscriber (at most 16). 0 or GS_ERANGE. Thread-safe. */
int gs_health_subscribe(struct gs_health *h, gs_health_cb cb, void *arg);
/* Feeds one device event (gpu -1 = every GPU) seen at now_ns. 0 or GS_EINVAL. */
int gs_health_event(struct gs_health *h, const struct gs_event *ev, int64_t now_ns);
/* Records whether GPU gpu answered its last query at now_ns; this is what
 * drives recovery once the window has passed. 0 or GS_EINVAL. */
int gs_health_observe(struct gs_health *h, int gpu, bool answering, int64_t now_ns);
/* Copies the state of one GPU. 0 or GS_EINVAL. Thread-safe. */
int gs_health_get(struct gs_health *h, int gpu, struct gs_health_gpu *out);
/* Bit i set: GPU i is Unhealthy. */
uint64_t gs_health_unhealthy_mask(struct gs_health *h);

#endif
