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
 *
 * The spec it builds (docs/NODE.md "Containers with runc: the OCI spec"):
 *  - process: terminal false; argv as Kubernetes combines command/args with
 *    the image's entrypoint/cmd; env merged by name, later wins: image,
 *    container env, the agent's extra_env, Allocate env, CDI env; cwd from
 *    workingDir, else the image's, else GS_OCI_SCRATCH_PATH when a scratch
 *    dir is given, else "/"; user from securityContext runAsUser/runAsGroup,
 *    else the image's numeric user, else 0 (a named image user is refused:
 *    names are not looked up in the image); supplementalGroups and CDI
 *    additionalGids as additional gids; runc's default capabilities and
 *    RLIMIT_NOFILE, noNewPrivileges unless allowPrivilegeEscalation is true.
 *  - root: the rootfs, read-only. hostname: in->hostname, spec.hostname or
 *    the pod's name.
 *  - namespaces pid, ipc, uts, mount, cgroup. The network namespace is the
 *    host's (like hostNetwork): pods reach the node's loopback.
 *  - mounts: /proc, /dev (tmpfs), /dev/pts, /dev/shm, /dev/mqueue, /sys and
 *    /sys/fs/cgroup read-only, a tmpfs /tmp, the scratch dir read-write at
 *    GS_OCI_SCRATCH_PATH, then CDI mounts; sorted parents first.
 *  - linux.devices: Allocate's device specs and CDI deviceNodes (type,
 *    major, minor read with stat when the spec leaves them out);
 *    linux.resources.devices denies all, then allows /dev/null, zero, full,
 *    random, urandom, tty and exactly those nodes.
 *  - linux.resources: cpu shares from requests.cpu (else limits.cpu; 2 when
 *    neither, as kubelet), quota/period 100000 from limits.cpu, memory limit
 *    from limits.memory, pids limit from default_pids_limit.
 *  - hooks: CDI hooks by their hookName (prestart, createRuntime,
 *    createContainer, startContainer, poststart, poststop).
 *  - maskedPaths / readonlyPaths: runc's spec defaults.
 * linux.cgroupsPath is left to the caller.
 *
 * CDI specs are the *.json, *.yaml and *.yml files of cdi_dirs (a missing
 * directory is skipped; a device defined in a later directory wins, as in
 * the CDI library). Every spec file is checked when a CDI device is asked
 * for: one that does not parse or validate fails the build naming the file.
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
    const char *scratch_dir;           /* host dir mounted read-write at GS_OCI_SCRATCH_PATH for
                                          emptyDir-like scratch, the cwd when none is set (may be NULL) */
    long default_pids_limit;           /* 0: none */
};

/* Builds config.json. 0 and *out (caller owns, json_decref); GS_EINVAL with
 * err naming the field, the value and why (bad quantity, unknown CDI device,
 * a CDI spec that does not parse, no command in pod or image); GS_EIO for an
 * unreadable CDI directory or device node. */
int gs_oci_spec_build(const struct gs_oci_input *in, json_t **out, char *err, size_t errlen);

/* Where the scratch dir appears inside the container. */
#define GS_OCI_SCRATCH_PATH "/scratch"

/* Parses and validates one CDI spec file's text (JSON or YAML): cdiVersion,
 * kind "vendor/class", devices with valid names and containerEdits, every
 * edit's field types. 0 and *out (caller owns); GS_EINVAL with err starting
 * with `file` and naming the field, the value and why. */
int gs_cdi_spec_parse(const char *text, size_t len, const char *file, json_t **out, char *err, size_t errlen);

#endif
