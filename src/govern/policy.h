/*
 * policy.h - the ClusterPolicy (nvidia.com/v1), or its DRA counterpart the
 * GPUCluster (nvidia.com/v1alpha1), as the operator and the node agent read
 * it: which GPU stack components are wanted, and which MIG layout each node
 * gets.
 *
 * The document keeps every field (the store holds it verbatim); this is a
 * typed view of the few that drive layer 4. Component keys and their
 * `enabled` defaults are the GPU Operator's (docs/GOVERNANCE.md has the
 * table). Each component also has the operand name used in the node label
 * `nvidia.com/gpu.deploy.<operand>`, so a node can be switched out of one
 * component by its label as with the GPU Operator.
 *
 * MIG layouts are mig-parted's named configurations, chosen per node by the
 * label `nvidia.com/mig.config` (default: migManager.config.default, else
 * "all-disabled"). Built in: all-disabled, all-enabled, all-1g.10gb,
 * all-2g.20gb, all-3g.40gb, all-7g.80gb, all-balanced (1g.10gb*2 + 2g.20gb +
 * 3g.40gb). A policy may add or override layouts inline under
 * migManager.config.migConfigs in mig-parted's own shape:
 *
 *     migConfigs:
 *       all-1g.20gb:
 *         - devices: all
 *           mig-enabled: true
 *           mig-devices: {"1g.20gb": 7}
 *
 * A value object: no allocation, copyable with `=`.
 */
#ifndef GS_GOVERN_POLICY_H
#define GS_GOVERN_POLICY_H

#include "core/error.h"
#include "discovery/outputs.h" /* enum gs_mig_strategy */

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

enum gs_comp {
    GS_COMP_DRIVER,
    GS_COMP_TOOLKIT,
    GS_COMP_DEVICE_PLUGIN,
    GS_COMP_DCGM,
    GS_COMP_DCGM_EXPORTER,
    GS_COMP_GFD,
    GS_COMP_MIG_MANAGER,
    GS_COMP_NODE_STATUS_EXPORTER,
    GS_COMP_VALIDATOR,
    GS_COMP_DRA_DRIVER,      /* NVIDIA's DRA kubelet plugin: off under a ClusterPolicy unless draDriver.enabled */
    GS_COMP_COUNT
};

/* ClusterPolicy spec key ("devicePlugin"), deploy-label operand ("device-plugin"). */
const char *gs_comp_key(enum gs_comp c);
const char *gs_comp_operand(enum gs_comp c);
bool gs_comp_default(enum gs_comp c);

const char *gs_mig_strategy_name(enum gs_mig_strategy s);

#define GS_MIG_LAYOUT_MAX 8   /* profiles in one layout */
#define GS_POLICY_LAYOUTS 24  /* named layouts in one policy */

struct gs_mig_want {
    char profile[32]; /* "1g.10gb"; as long as discovery's gs_disc_mig.profile */
    int count;
};

/* One named layout applied to every MIG-capable GPU of a node. */
struct gs_mig_layout {
    char name[64];   /* "all-1g.10gb" */
    bool enabled;    /* MIG mode on */
    int n;
    struct gs_mig_want v[GS_MIG_LAYOUT_MAX];
};

struct gs_policy {
    char name[128];
    bool dra;                    /* a GPUCluster (nvidia.com/v1alpha1): the DRA model, no device plugin */
    int64_t generation;          /* the document's resourceVersion: a new one re-drives every node */
    bool enabled[GS_COMP_COUNT];
    enum gs_mig_strategy strategy;
    char mig_default[64];        /* layout for nodes without nvidia.com/mig.config */
    int nlayouts;
    struct gs_mig_layout layouts[GS_POLICY_LAYOUTS];
    int64_t drain_timeout_ms;    /* migManager.drainTimeoutSeconds (default 60) */
    int64_t backoff_initial_ms;  /* validator.retry.initialBackoffSeconds (default 1) */
    int64_t backoff_max_ms;      /* validator.retry.maxBackoffSeconds (default 60) */
    int64_t answer_timeout_ms;   /* validator.retry.answerTimeoutSeconds (default 60) */
};

#define GS_LABEL_MIG_CONFIG "nvidia.com/mig.config"
#define GS_LABEL_DEPLOY_PREFIX "nvidia.com/gpu.deploy."
#define GS_LABEL_DEPLOY_OPERANDS "nvidia.com/gpu.deploy.operands"

/* Defaults of a policy with an empty spec, plus the built-in layouts. */
void gs_policy_defaults(struct gs_policy *p);
/* Reads a ClusterPolicy document. Problems (wrong types, unknown strategy,
 * bad layouts) go to d with the field's path; GS_EINVAL then. */
int gs_policy_parse(const json_t *doc, struct gs_policy *p, struct gs_diags *d);

/* Reads a GPUCluster (nvidia.com/v1alpha1), NVIDIA's DRA counterpart of the
 * ClusterPolicy: the same stack walked with the DRA kubelet plugin
 * (spec.draDriver, on by default) instead of the device plugin, and no MIG
 * manager (DRA drivers partition MIG themselves). What it reads:
 * draDriver.enabled, dcgm.enabled, dcgmExporter.enabled, gfd.enabled (default true),
 * validator.retry as in a ClusterPolicy; devicePlugin, migManager, mig
 * and driver.enabled: false are refused by name, since a GPUCluster does not
 * manage them (GPUs are surfaced through DRA, the driver is pre-installed).
 * Sets p->dra. GS_EINVAL with d filled. */
int gs_gpucluster_parse(const json_t *doc, struct gs_policy *p, struct gs_diags *d);

/* The layout named name, or NULL. */
const struct gs_mig_layout *gs_policy_layout(const struct gs_policy *p, const char *name);
/* The layout a node with these labels gets (labels may be NULL); never NULL
 * for a parsed policy: an unknown name resolves to NULL so the caller can
 * say so. */
const struct gs_mig_layout *gs_policy_layout_for(const struct gs_policy *p, const json_t *labels, const char **name);
/* Whether comp runs on a node with these labels: the policy enables it and
 * neither nvidia.com/gpu.deploy.<operand> nor .operands says "false". */
bool gs_policy_node_enabled(const struct gs_policy *p, const json_t *labels, enum gs_comp c);

/* "1g.10gb*7", "1g.10gb*2+2g.20gb+3g.40gb", "" when MIG is off. Returns snprintf's length. */
int gs_mig_layout_text(const struct gs_mig_layout *l, char *buf, size_t len);
/* The inverse; "" and "disabled" mean MIG off. GS_EINVAL on a bad profile or count. */
int gs_mig_layout_parse(const char *text, struct gs_mig_layout *l);
/* Number of MIG devices the layout makes on one GPU. */
int gs_mig_layout_devices(const struct gs_mig_layout *l);
/* Compute slices the layout needs ("3g.40gb" is 3); a GPU has 7. */
int gs_mig_layout_slices(const struct gs_mig_layout *l);

#endif
