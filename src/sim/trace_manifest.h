/*
 * trace_manifest.h - the annotations and the duration syntax of a manifest
 * scenario (trace_manifest.c), shared with the snapshot writer
 * (snapshot.c) so that what `gpusched snapshot` writes is exactly what the
 * loader reads.
 *
 * Timing annotations on a Pod:
 *   sim.gpusched.io/arrival      when it arrives (default 0)
 *   sim.gpusched.io/duration     how long it runs once started (absent: forever);
 *                                for a pod running at the start, counted from
 *                                when it started
 *   sim.gpusched.io/running-for  a pod bound by spec.nodeName: how long it has
 *                                been running when the trace starts (default 0)
 * A bound pod's devices are the server's own annotation gpusched.io/devices
 * (GPU uuids or indices, ":<milli>" for a share); absent, the loader gives it
 * the lowest-numbered GPUs of its node that earlier bound pods left free.
 *
 * On a ClusterPolicy (or GPUCluster):
 *   sim.gpusched.io/step-durations  "driver=3m,toolkit=20s,mig=1m": how long
 *                                each validation step of the GPU stack takes
 *                                on a node; unnamed steps take GS_SIM_STEP_DEFAULT.
 */
#ifndef GS_SIM_TRACE_MANIFEST_H
#define GS_SIM_TRACE_MANIFEST_H

#define GS_ANN_SIM_RUNNING_FOR "sim.gpusched.io/running-for"
#define GS_ANN_SIM_STEP_DURATIONS "sim.gpusched.io/step-durations"
/* A step answered on the agent's next poll while governed (govern/agentstack.c). */
#define GS_SIM_STEP_DEFAULT 0.25

/* Seconds from a duration: a plain number of seconds ("90", "1.5") or a
 * Kubernetes/Go duration ("30s", "1m30s", "2h", "1.5h", "500ms"). Negative,
 * NaN or infinite values are refused. 0, or GS_EINVAL with *why (static
 * text) saying what is wrong. */
int gs_sim_duration_parse(const char *s, double *seconds, const char **why);

#endif
