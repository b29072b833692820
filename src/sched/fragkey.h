/*
 * fragkey.h - memoised fragmentation keys: the Score, NormalizeScore and
 * Reserve that FGDPack and FGDPlus share (fragkey.c). A plugin gives its key
 * function to gs_fragkey_new from its init and points its extension points
 * at the functions below; the state they take is the one gs_fragkey_new
 * made.
 *
 * A key is a larger-is-better integer for placing the pod on a node whose
 * fragmentation goes from f0 to f1; share is true for a pod asking part of
 * one GPU (evaluated per GPU, the best GPU's key is the node's).
 */
#ifndef GS_SCHED_FRAGKEY_H
#define GS_SCHED_FRAGKEY_H

#include "sched/frag.h"
#include "sched/plugin.h"

#include <stdbool.h>
#include <stdint.h>

typedef int64_t (*gs_fragkey_fn)(double f0, double f1, const struct gs_node_info *nd, bool share);

/* init: the target workload's model from args (as FGD), keys from key. */
int gs_fragkey_new(const struct gs_handle *h, const json_t *args, gs_fragkey_fn key, void **state,
                   struct gs_diags *d);
void gs_fragkey_free(void *state);

/* PreScore: observes the pod for the model; a new model forgets every key. */
struct gs_status gs_fragkey_pre_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                      struct gs_node_info *const *nodes, size_t n);
/* Score: the key of each node, from the memo when still valid. */
void gs_fragkey_score(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                      struct gs_node_info *const *nodes, size_t n, int64_t *scores);
/* NormalizeScore: the best key gets GS_MAX_SCORE, every other at most one less. */
void gs_fragkey_normalize(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                          struct gs_node_info *const *nodes, int64_t *scores, size_t n);
/* Reserve: the GPUs that reach the node's key (best fit without a model). */
struct gs_status gs_fragkey_reserve(void *state, struct gs_cycle_state *cs, const struct gs_pod *pod,
                                    struct gs_node_info *node, struct gs_assignment *a);

#endif
