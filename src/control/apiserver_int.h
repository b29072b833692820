/*
 * apiserver_int.h - what apiserver.c (HTTP plumbing) and api_objects.c
 * (object handlers) share. Internal to src/control.
 */
#ifndef GS_CONTROL_APISERVER_INT_H
#define GS_CONTROL_APISERVER_INT_H

#include "control/admit_defaults.h"
#include "control/api.h"
#include "control/apiserver.h"
#include "control/netguard.h"

#include <microhttpd.h>
#include <stdarg.h>
#include <stdatomic.h>

struct gs_apiserver {
    struct MHD_Daemon *d;
    int fd, port;
    struct gs_store *store;
    struct gs_auth *auth;
    size_t max_body;
    atomic_bool stopping;
    char *(*metrics)(void *arg); /* /metrics hook (govern/metrics) */
    void *metrics_arg;
    char *(*ready_note)(void *arg); /* /readyz text (replicas) */
    int (*explain)(void *ctx, const char *ns, const char *name, char **text);
    void *explain_ctx;
    int64_t watch_keepalive_ns; /* an idle watch gets a keep-alive this often */
    char agent_token[128];        /* sent to agents by the log proxy; "" none */
    struct gs_netguard *guard;    /* connection limits and pre-auth rate limit (netguard.c) */
    struct gs_admit_defaults admit_defaults; /* default tolerations at pod create (admit_defaults.c) */
    _Atomic(struct gs__fields_cache *) fields_cache; /* api_fields.c: namespaces and classes seen lately */
    struct gs_ui_history *ui_history; /* api_ui.c: queue usage samples for the console */
    struct gs_gridview *gridview;     /* gridview.c: the console's GPU grid, fed by the change stream */
    char ui_reports[1024];            /* ui.c: simulator runs served under /ui/reports/; "" none */
};

struct gs__fields_cache;
void gs__fields_cache_free(struct gs__fields_cache *c);

enum gs__field_validation { GS_FV_WARN = 0, GS_FV_STRICT, GS_FV_IGNORE };

/* One request in flight. */
struct gs__req {
    struct gs_apiserver *s;
    struct MHD_Connection *c;
    const char *url, *method;
    char *body;
    size_t len, cap;
    bool too_big, answered;
    struct gs_principal *who;
    /* Route. */
    const struct gs_api_resource *res;
    const char *ns, *name, *sub; /* sub "" when none */
    bool if_bound;               /* node principal: only objects bound to its node */
    bool if_named;               /* node principal: only an object named after its node (its Lease) */
    /* Write options (api_options.c): dryRun=All, fieldValidation, and the
     * Warning headers the answer carries (an array of texts, or NULL). */
    bool dry_run;
    enum gs__field_validation fv;
    json_t *warnings;
};

/* What a list or watch keeps: selectors plus the caller's visibility. */
struct gs__filter {
    const struct gs_api_resource *res;
    struct gs_selector labels;
    struct gs__field_sel fields;
    const struct gs_principal *who; /* tenant: its namespaces; node (if_bound): its pods */
    bool if_bound;
};
bool gs__filter_needs_object(const struct gs__filter *f);
bool gs__filter_matches(const struct gs__filter *f, const json_t *obj);
void gs__filter_free(struct gs__filter *f);

/* Replies: each queues a response and marks the request answered. */
enum MHD_Result gs__reply_text(struct gs__req *r, int code, const char *ctype, char *text /* taken */);
enum MHD_Result gs__reply_json(struct gs__req *r, int code, json_t *doc /* taken */);
/* A stored text (store.h) as the JSON reply, without encoding it again. */
enum MHD_Result gs__reply_stored(struct gs__req *r, int code, char *text /* taken: released */);
enum MHD_Result gs__reply_status(struct gs__req *r, int code, const char *reason, const char *name,
                                 const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* A store error as its Status (404, 409 AlreadyExists/Conflict, 403, 500). */
enum MHD_Result gs__reply_err(struct gs__req *r, int err, const char *name);

/* Input bounds of the handlers (api_objects.c), named in their 400s. */
#define GS__MAX_GRACE_SECONDS 31536000LL /* gracePeriodSeconds: a year, as spec.terminationGracePeriodSeconds */
#define GS__MAX_WATCH_SECONDS 86400LL    /* timeoutSeconds of a list or watch: a day */
#define GS__GENERATE_NAME_ATTEMPTS 8     /* names tried for one generateName create before 409 */
/* Where generated name suffixes come from (getrandom); tests swap it to force collisions. */
extern void (*gs__name_suffix_source)(unsigned char *b, size_t n);

const char *gs__arg(struct gs__req *r, const char *key);
const char *gs__header(struct gs__req *r, const char *key);
bool gs__wants_table(struct gs__req *r);
double gs__wall_now(void);

/* GET pods/NAME/explain (api_explain.c). */
enum MHD_Result gs__handle_explain(struct gs__req *r);
/* The web console (ui.c: /ui files; api_ui.c: its read-only routes). */
enum MHD_Result gs__handle_ui(struct gs__req *r);
bool gs__ui_api_resource(const struct gs_api_resource *res);
enum MHD_Result gs__handle_ui_api(struct gs__req *r, const char *verb);
bool gs__ui_gpugrid_path(const char *url); /* api_ui.c: the console's GPU grid, not a stored resource */
enum MHD_Result gs__handle_ui_gpugrid(struct gs__req *r);

/* Starts a watch stream (takes f's contents). */
enum MHD_Result gs__serve_watch(struct gs__req *r, struct gs__filter *f, const char *prefix);
/* A 200 answer streamed from read(arg) until it ends; done(arg) frees arg
 * in every case, also when the response cannot be made. */
enum MHD_Result gs__reply_stream(struct gs__req *r, const char *ctype, size_t block, MHD_ContentReaderCallback read,
                                 void *arg, MHD_ContentReaderFreeCallback done);

/* Handlers (api_objects.c). */
enum MHD_Result gs__handle_list(struct gs__req *r, bool watch);
enum MHD_Result gs__handle_get(struct gs__req *r);
enum MHD_Result gs__handle_create(struct gs__req *r);
enum MHD_Result gs__handle_update(struct gs__req *r);
enum MHD_Result gs__handle_patch(struct gs__req *r);
enum MHD_Result gs__handle_bind(struct gs__req *r);
enum MHD_Result gs__handle_delete(struct gs__req *r);

/*--- Write options, warnings, eviction (api_options.c, api_eviction.c) ---*/

/* dryRun and fieldValidation of a write (POST, PUT, PATCH, DELETE) into r;
 * answers 422 itself and returns GS_EINVAL for a value kube-apiserver refuses. */
int gs__write_options(struct gs__req *r);
/* Adds a Warning header text to the answer (kube's "299 - \"text\"" form is made when sent). */
void gs__warn(struct gs__req *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Adds r's warnings to a response. */
void gs__add_warnings(struct gs__req *r, struct MHD_Response *resp);
/* Unknown fields of a body (a whole object, or a patch when patch is set),
 * under r->fv: Ignore nothing, Warn one Warning each, Strict 400 (answered;
 * GS_EINVAL returned). */
int gs__check_fields(struct gs__req *r, const json_t *body, bool patch);
/* A JSON body that failed to parse (d) only for a duplicate key: under
 * Strict answered 400 (NULL returned, r->answered); under Warn and Ignore
 * the body parsed with the last value winning, Warn adding a warning.
 * NULL for any other failure. */
json_t *gs__body_with_duplicates(struct gs__req *r, const struct gs_diags *d);
/* Enum violations of obj that were not already in old (NULL: none), into d
 * (values stored before the check existed stay writable). */
int gs__check_enums(const json_t *obj, const json_t *old, struct gs_diags *d);
/* A DeleteOptions body (JSON, protobuf or empty; *opts NULL when empty) with
 * its kind, apiVersion, propagationPolicy and dryRun checked; a body
 * dryRun ["All"] sets r->dry_run. Answers 400 itself (GS_EINVAL). */
int gs__delete_options(struct gs__req *r, const char *body, size_t len, const char *ctype, json_t **opts);
/* The checks of gs__delete_options on a parsed object (an Eviction's deleteOptions). */
int gs__check_delete_options(struct gs__req *r, const json_t *opts);
/* Deletes r's object with the options (may be NULL): graceful for bound
 * pods, finalizers, preconditions, dry run. 0 with *out the answer's object,
 * or a store error; GS_EINVAL when it answered the request itself (400). */
int gs__delete_object(struct gs__req *r, const json_t *opts, json_t **out);
/* POST pods/NAME/eviction (policy/v1 Eviction). */
enum MHD_Result gs__handle_eviction(struct gs__req *r);

/*--- Pod logs (api_logs.c) ---*/

/* GET pods/NAME/log: proxied to the agent of the pod's node. */
enum MHD_Result gs__handle_log(struct gs__req *r);

/* The query of a log request, kube-apiserver's names. */
struct gs__log_query {
    const char *container;  /* NULL: the pod's only container */
    long long tail_lines;   /* -1: all */
    long long limit_bytes;  /* -1: no limit */
    bool follow, previous, timestamps;
};
typedef const char *(*gs__arg_fn)(void *ctx, const char *key);
/* Parses and validates (previous, sinceSeconds, sinceTime are refused);
 * GS_EINVAL with why naming the parameter and value. */
int gs__log_query_parse(gs__arg_fn get, void *ctx, struct gs__log_query *q, char *why, size_t len);
/* The container to show: want when the pod has it, else its only one;
 * GS_EINVAL with kube-apiserver's message otherwise. *name borrowed from pod. */
int gs__log_container(const json_t *pod, const char *want, const char **name, char *why, size_t len);
/* The agent's /logs path and query for a request. */
int gs__log_agent_path(const char *ns, const char *pod, const char *container, const struct gs__log_query *q,
                       char *buf, size_t len);

#endif
