/*
 * oci.h - the OCI runtime spec (config.json) of one container, built the way
 * the CRI and the NVIDIA container toolkit build it.
 *
 * Inputs are the pod spec (command, args, env, workingDir, securityContext
 * user, resources as cgroup limits, a pids limit), the image's config, the
 * device plugin's Allocate answer (env, mounts, device specs) and the CDI
 * devices to inject, whose specs' containerEdits (deviceNodes, mounts, env,
 * hooks) are applied as the CDI library does. The result names only the
 * device nodes of the container's GPUs (in linux.devices and in the device
 * cgroup allow list) and mounts nothing of the host but what those inputs
 * mount. Pure: it reads CDI spec files and stats device nodes, nothing else.
 */
#ifndef GS_NODE_OCI_H
#define GS_NODE_OCI_H

#include <jansson.h>
#include <stddef.h>

#include "node/allocate.h"
#include "node/image.h"

struct gs_oci_input {
    const json_t *pod;                 /* the Pod object */
    const json_t *container;           /* its entry of spec.containers */
    const struct gs_image_config *image; /* may be NULL (no image config) */
    const char *rootfs;                /* absolute path, mounted read-only */
    const struct gs_alloc_resp *alloc; /* the device plugin's answer; may be NULL */
    const char *const *cdi_devices;    /* fully qualified CDI names "vendor/class=name" */
    size_t n_cdi;
    const char *const *cdi_dirs;       /* where CDI spec files are looked up */
    size_t n_cdi_dirs;
    char *const *extra_env;            /* "K=V" the agent adds (may be NULL) */
    const char *hostname;              /* the pod's hostname (may be NULL: pod name) */
    const char *scratch_dir;           /* host dir mounted read-write at the container's workingDir
                                          parent for emptyDir-like scratch (may be NULL) */
    long default_pids_limit;           /* 0: none */
};

/* Builds config.json. 0 and *out (caller owns, json_decref); GS_EINVAL with
 * err naming the field, the value and why (bad quantity, unknown CDI device,
 * a CDI spec that does not parse, no command in pod or image); GS_EIO for an
 * unreadable CDI directory or device node. */
int gs_oci_spec_build(const struct gs_oci_input *in, json_t **out, char *err, size_t errlen);

#endif
