/*
 * affinity_hint.h - InterPodAffinity's queueing hint: can a pod arriving on
 * a node or leaving one help a pod that the plugin's Filter rejected?
 *
 * kube's plugin registers Pod Add/Delete and Node Add/label events with a
 * hint function per pod; this is that function for pod events, used by the
 * scheduler driver (scheduler.c) so that a bound or deleted pod wakes only
 * the pods whose terms it concerns. Node events wake them all (a new node or
 * label can open a domain). Implemented in plugins/interpodaffinity.c.
 */
#ifndef GS_SCHED_AFFINITY_HINT_H
#define GS_SCHED_AFFINITY_HINT_H

#include "core/object.h"
#include "sched/cache.h"

#include <stdbool.h>

/* arrived: changed now holds a node (bound or assumed); else it left one.
 * True when changed matches all of waiting's required affinity terms
 * (arrived), or one of waiting's required anti-affinity terms matches
 * changed, one of changed's matches waiting, or changed was a match of a
 * group whose terms waiting itself matches (left: the first-pod rule may
 * apply again). c gives namespace labels; borrowed. */
bool gs_affinity_pod_event_helps(const struct gs_cache *c, const struct gs_pod *waiting, const struct gs_pod *changed,
                                 bool arrived);

#endif
