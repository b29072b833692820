/*
 * admit_defaults.c - default NoExecute tolerations at pod create and the
 * terminal-phase rule of pod writes; see admit_defaults.h.
 *
 * Both run inside the API server's create and write paths on the request's
 * JSON, before validation, so a pod that the defaulting leaves malformed is
 * refused by the usual decoder with the usual messages.
 */
#include "control/admit_defaults.h"
#include "loops/nodelifecycle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void gs_admit_defaults_init(struct gs_admit_defaults *d, const struct gs_admit_defaults *from)
{
    if (from) *d = *from;
    else d->not_ready_s = d->unreachable_s = GS_DEFAULT_TOLERATION_S;
}

int gs_admit_seconds_parse(const char *flag, const char *text, int64_t *out, char *err, size_t errlen)
{
    char *end = NULL;
    errno = 0;
    bool digits = text && ((text[0] >= '0' && text[0] <= '9') || (text[0] == '-' && text[1] >= '0' && text[1] <= '9'));
    long long v = digits ? strtoll(text, &end, 10) : 0;
    if (!digits || *end || errno) {
        snprintf(err, errlen, "--%s: \"%.64s\" is not a whole number of seconds", flag, text ? text : "");
        return GS_EINVAL;
    }
    if (v < 0) {
        snprintf(err, errlen, "--%s: %lld must be 0 or more seconds", flag, v);
        return GS_EINVAL;
    }
    *out = v;
    return 0;
}

static const char *jstr(const json_t *o, const char *k) { return json_string_value(json_object_get(o, k)); }

/* Kubernetes' rule: a toleration of this key (or of every key) with effect
 * NoExecute (or every effect) already covers it, whatever its seconds. */
static bool covers(const json_t *tols, const char *key)
{
    size_t i;
    json_t *t;
    json_array_foreach(tols, i, t) {
        const char *k = jstr(t, "key"), *e = jstr(t, "effect");
        if ((!k || !*k || !strcmp(k, key)) && (!e || !*e || !strcmp(e, "NoExecute"))) return true;
    }
    return false;
}

void gs_admit_default_tolerations(const struct gs_admit_defaults *d, json_t *obj)
{
    const char *kind = jstr(obj, "kind"), *api = jstr(obj, "apiVersion");
    json_t *spec = json_object_get(obj, "spec");
    if (!kind || strcmp(kind, "Pod") || (api && strcmp(api, "v1")) || !json_is_object(spec)) return;
    json_t *tols = json_object_get(spec, "tolerations");
    if (tols && !json_is_array(tols)) return;
    const char *keys[2] = {GS_TAINT_NOT_READY, GS_TAINT_UNREACHABLE};
    int64_t secs[2] = {d->not_ready_s, d->unreachable_s};
    for (int i = 0; i < 2; i++) {
        if (covers(tols, keys[i])) continue;
        if (!tols) json_object_set_new(spec, "tolerations", tols = json_array());
        json_array_append_new(tols, json_pack("{s:s,s:s,s:s,s:I}", "key", keys[i], "operator", "Exists", "effect",
                                              "NoExecute", "tolerationSeconds", (json_int_t)secs[i]));
    }
}

static bool is_terminal(const char *phase)
{
    return phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"));
}

void gs_admit_phase_check(const json_t *cur, const json_t *next, struct gs_diags *diags)
{
    const char *was = jstr(json_object_get(cur, "status"), "phase");
    const char *now = jstr(json_object_get(next, "status"), "phase");
    if (!is_terminal(was) || (now && !strcmp(now, was))) return;
    gs_diags_add(diags, "status.phase", "Invalid value: \"%s\": the pod is in the terminal phase %s, which cannot change",
                 now ? now : "", was);
}
