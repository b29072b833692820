/*
 * event_sink.h - where a standalone control loop's Events go: an Event sink
 * (control/events.h) that writes through a gs_source.
 *
 * The recorder (events.c) does the correlating, aggregating and rate
 * limiting and hands the sink whole core v1 Events. Against a Kubernetes
 * API server (a kube source) the sink writes them as events.k8s.io/v1, the
 * group kube-scheduler and every current controller use: regarding, note,
 * reason, action, type, reportingController, reportingInstance, eventTime
 * (MicroTime), series {count, lastObservedTime} once an Event aggregates,
 * deprecatedSource / deprecatedFirstTimestamp / deprecatedLastTimestamp /
 * deprecatedCount for core v1 readers such as `kubectl describe`. A create
 * is a POST of "events.events.k8s.io/NS/NAME"; an aggregation replaces the
 * named Event's fields (read-modify-write, keeping its metadata). Through the
 * in-process source the same Event is stored as core v1 under
 * "events/NS/NAME", the storage both groups are served from (events.h).
 */
#ifndef GS_KUBE_EVENT_SINK_H
#define GS_KUBE_EVENT_SINK_H

#include "control/events.h"

#include <jansson.h>
#include <stdint.h>

struct gs_source;

struct gs_kube_event_sink_opts {
    struct gs_source *source; /* borrowed; outlives the sink */
    const char *controller;   /* reportingController (copied); NULL: the recorder's component */
    const char *instance;     /* reportingInstance (copied); NULL: the recorder's host or component */
};

struct gs_kube_event_sink_stats {
    uint64_t created, updated, errors;
};

struct gs_kube_event_sink;

/* 0, GS_EINVAL (no source), GS_ENOMEM. */
int gs_kube_event_sink_new(const struct gs_kube_event_sink_opts *o, struct gs_kube_event_sink **out);
/* What gs_recorder_opts.sink takes; valid while s lives. */
struct gs_event_sink gs_kube_event_sink(struct gs_kube_event_sink *s);
void gs_kube_event_sink_stats(struct gs_kube_event_sink *s, struct gs_kube_event_sink_stats *out);
void gs_kube_event_sink_free(struct gs_kube_event_sink *s);

/* The events.k8s.io/v1 form of a recorder's core v1 Event (new reference;
 * NULL on ENOMEM), with controller / instance (NULL: kept) as reporter. */
json_t *gs_kube_event_v1(const json_t *core, const char *controller, const char *instance);

#endif
