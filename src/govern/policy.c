/*
 * policy.c - the typed view of a ClusterPolicy; see policy.h.
 *
 * Parsing is lenient where the GPU Operator is (absent keys take their
 * defaults, unknown keys are left to the document) and strict where a wrong
 * value would silently change what runs: an `enabled` that is not a boolean,
 * an unknown MIG strategy, a layout that needs more than seven slices.
 */
#include "govern/policy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/*--- Components ---*/

static const struct {
    const char *key, *operand;
    bool def;
} comps[GS_COMP_COUNT] = {
    [GS_COMP_DRIVER] = {"driver", "driver", true},
    [GS_COMP_TOOLKIT] = {"toolkit", "container-toolkit", true},
    [GS_COMP_DEVICE_PLUGIN] = {"devicePlugin", "device-plugin", true},
    [GS_COMP_DCGM] = {"dcgm", "dcgm", true},
    [GS_COMP_DCGM_EXPORTER] = {"dcgmExporter", "dcgm-exporter", true},
    [GS_COMP_GFD] = {"gfd", "gpu-feature-discovery", true},
    [GS_COMP_MIG_MANAGER] = {"migManager", "mig-manager", true},
    [GS_COMP_NODE_STATUS_EXPORTER] = {"nodeStatusExporter", "node-status-exporter", false},
    [GS_COMP_VALIDATOR] = {"validator", "operator-validator", true},
    [GS_COMP_DRA_DRIVER] = {"draDriver", "dra-driver", false},
};

const char *gs_comp_key(enum gs_comp c) { return c < GS_COMP_COUNT ? comps[c].key : "?"; }
const char *gs_comp_operand(enum gs_comp c) { return c < GS_COMP_COUNT ? comps[c].operand : "?"; }
bool gs_comp_default(enum gs_comp c) { return c < GS_COMP_COUNT && comps[c].def; }

const char *gs_mig_strategy_name(enum gs_mig_strategy s)
{
    return s == GS_MIG_SINGLE ? "single" : s == GS_MIG_MIXED ? "mixed" : "none";
}

/*--- Layout text ---*/

int gs_mig_layout_text(const struct gs_mig_layout *l, char *buf, size_t len)
{
    int w = 0;
    if (len) buf[0] = 0;
    for (int i = 0; l->enabled && i < l->n; i++) {
        int r = l->v[i].count > 1 ? snprintf(buf + w, len > (size_t)w ? len - w : 0, "%s%s*%d", w ? "+" : "",
                                              l->v[i].profile, l->v[i].count)
                                  : snprintf(buf + w, len > (size_t)w ? len - w : 0, "%s%s", w ? "+" : "", l->v[i].profile);
        if (r < 0) return r;
        w += r;
    }
    return w;
}

static bool profile_ok(const char *p)
{
    unsigned g, gb;
    int used = 0;
    return sscanf(p, "%ug.%ugb%n", &g, &gb, &used) == 2 && !p[used] && g >= 1 && g <= 8 && gb >= 1 && gb <= 1024;
}

/* Adds count of profile, merging with an entry already there. */
static int layout_add(struct gs_mig_layout *l, const char *profile, long count)
{
    if (!profile_ok(profile) || strlen(profile) >= sizeof l->v[0].profile || count < 0 || count > 7) return GS_EINVAL;
    if (count == 0) return 0;
    for (int i = 0; i < l->n; i++)
        if (!strcmp(l->v[i].profile, profile)) {
            l->v[i].count += (int)count;
            return 0;
        }
    if (l->n == GS_MIG_LAYOUT_MAX) return GS_ERANGE;
    snprintf(l->v[l->n].profile, sizeof l->v[l->n].profile, "%s", profile);
    l->v[l->n++].count = (int)count;
    return 0;
}

int gs_mig_layout_slices(const struct gs_mig_layout *l)
{
    int s = 0;
    for (int i = 0; l->enabled && i < l->n; i++) s += atoi(l->v[i].profile) * l->v[i].count;
    return s;
}

int gs_mig_layout_devices(const struct gs_mig_layout *l)
{
    int n = 0;
    for (int i = 0; l->enabled && i < l->n; i++) n += l->v[i].count;
    return n;
}

int gs_mig_layout_parse(const char *text, struct gs_mig_layout *l)
{
    memset(l, 0, sizeof *l);
    if (!text[0] || !strcmp(text, "disabled")) return 0;
    l->enabled = true;
    if (!strcmp(text, "enabled")) return 0;
    char buf[256];
    if (snprintf(buf, sizeof buf, "%s", text) >= (int)sizeof buf) return GS_EINVAL;
    for (char *save = NULL, *p = strtok_r(buf, "+", &save); p; p = strtok_r(NULL, "+", &save)) {
        long count = 1;
        char *star = strchr(p, '*');
        if (star) {
            char *end;
            *star = 0;
            count = strtol(star + 1, &end, 10);
            if (end == star + 1 || *end || count < 1) return GS_EINVAL;
        }
        int err = layout_add(l, p, count);
        if (err) return GS_EINVAL;
    }
    return gs_mig_layout_slices(l) > 7 ? GS_EINVAL : 0;
}

/*--- Defaults ---*/

static void builtin(struct gs_policy *p, const char *name, const char *text)
{
    struct gs_mig_layout *l = &p->layouts[p->nlayouts++];
    gs_mig_layout_parse(text, l);
    snprintf(l->name, sizeof l->name, "%s", name);
}

void gs_policy_defaults(struct gs_policy *p)
{
    memset(p, 0, sizeof *p);
    for (int c = 0; c < GS_COMP_COUNT; c++) p->enabled[c] = comps[c].def;
    p->strategy = GS_MIG_MIXED;
    snprintf(p->mig_default, sizeof p->mig_default, "all-disabled");
    builtin(p, "all-disabled", "");
    builtin(p, "all-enabled", "enabled");
    builtin(p, "all-1g.10gb", "1g.10gb*7");
    builtin(p, "all-2g.20gb", "2g.20gb*3");
    builtin(p, "all-3g.40gb", "3g.40gb*2");
    builtin(p, "all-7g.80gb", "7g.80gb");
    builtin(p, "all-balanced", "1g.10gb*2+2g.20gb+3g.40gb");
    p->drain_timeout_ms = 60000;
    p->backoff_initial_ms = 1000;
    p->backoff_max_ms = 60000;
    p->answer_timeout_ms = 60000;
}

/*--- Parsing ---*/

static int want_bool(const json_t *o, const char *k, bool *out, const char *path, struct gs_diags *d)
{
    json_t *v = json_object_get(o, k);
    if (!v) return 0;
    if (!json_is_boolean(v)) {
        gs_diags_add(d, path, "%s: want true or false", k);
        return GS_EINVAL;
    }
    *out = json_is_true(v);
    return 0;
}

/* A number of seconds (integer or real) into milliseconds, within [lo, hi] s. */
static int want_seconds(const json_t *o, const char *k, int64_t *ms, double lo, double hi, const char *path,
                        struct gs_diags *d)
{
    json_t *v = json_object_get(o, k);
    if (!v) return 0;
    if (!json_is_number(v) || json_number_value(v) < lo || json_number_value(v) > hi) {
        gs_diags_add(d, path, "%s: want a number of seconds between %g and %g", k, lo, hi);
        return GS_EINVAL;
    }
    *ms = (int64_t)(json_number_value(v) * 1000);
    return 0;
}

static struct gs_mig_layout *layout_slot(struct gs_policy *p, const char *name)
{
    for (int i = 0; i < p->nlayouts; i++)
        if (!strcmp(p->layouts[i].name, name)) return &p->layouts[i];
    if (p->nlayouts == GS_POLICY_LAYOUTS) return NULL;
    return &p->layouts[p->nlayouts++];
}

/* One mig-parted entry: {devices: all, mig-enabled: bool, mig-devices: {profile: count}}. */
static int parse_entry(const json_t *e, struct gs_mig_layout *l, const char *path, struct gs_diags *d)
{
    if (!json_is_object(e)) return gs_diags_add(d, path, "want an object"), GS_EINVAL;
    json_t *dev = json_object_get(e, "devices");
    if (dev && !(json_is_string(dev) && !strcmp(json_string_value(dev), "all")))
        return gs_diags_add(d, path, "devices: only \"all\" is supported"), GS_EINVAL;
    bool en = false;
    if (want_bool(e, "mig-enabled", &en, path, d)) return GS_EINVAL;
    l->enabled = l->enabled || en;
    json_t *md = json_object_get(e, "mig-devices");
    if (md && !json_is_object(md)) return gs_diags_add(d, path, "mig-devices: want a map of profile to count"), GS_EINVAL;
    const char *prof;
    json_t *cnt;
    json_object_foreach(md, prof, cnt) {
        if (!json_is_integer(cnt) || layout_add(l, prof, (long)json_integer_value(cnt)))
            return gs_diags_add(d, path, "mig-devices.%s: want a profile like 1g.10gb and a count 0..7", prof), GS_EINVAL;
    }
    return 0;
}

static int parse_layouts(const json_t *cfgs, struct gs_policy *p, struct gs_diags *d)
{
    const char *name;
    json_t *v;
    char path[160];
    json_object_foreach((json_t *)cfgs, name, v) {
        snprintf(path, sizeof path, "spec.migManager.config.migConfigs.%.60s", name);
        struct gs_mig_layout *l = layout_slot(p, name);
        if (!l || strlen(name) >= sizeof l->name) return gs_diags_add(d, path, "too many layouts or name too long"), GS_EINVAL;
        memset(l, 0, sizeof *l);
        snprintf(l->name, sizeof l->name, "%s", name);
        if (!json_is_array(v)) return gs_diags_add(d, path, "want a list of device entries"), GS_EINVAL;
        size_t i;
        json_t *e;
        json_array_foreach(v, i, e) if (parse_entry(e, l, path, d)) return GS_EINVAL;
        if (gs_mig_layout_slices(l) > 7)
            return gs_diags_add(d, path, "needs %d compute slices; a GPU has 7", gs_mig_layout_slices(l)), GS_EINVAL;
    }
    return 0;
}

static int parse_mig(const json_t *spec, struct gs_policy *p, struct gs_diags *d)
{
    const char *st = json_string_value(json_object_get(json_object_get(spec, "mig"), "strategy"));
    if (st) {
        if (!strcmp(st, "none")) p->strategy = GS_MIG_NONE;
        else if (!strcmp(st, "single")) p->strategy = GS_MIG_SINGLE;
        else if (!strcmp(st, "mixed")) p->strategy = GS_MIG_MIXED;
        else return gs_diags_add(d, "spec.mig.strategy", "\"%s\": want none, single or mixed", st), GS_EINVAL;
    }
    json_t *mm = json_object_get(spec, "migManager");
    if (want_seconds(mm, "drainTimeoutSeconds", &p->drain_timeout_ms, 0, 86400, "spec.migManager", d)) return GS_EINVAL;
    json_t *cfg = json_object_get(mm, "config");
    const char *def = json_string_value(json_object_get(cfg, "default"));
    if (def) snprintf(p->mig_default, sizeof p->mig_default, "%s", def);
    json_t *cfgs = json_object_get(cfg, "migConfigs");
    if (cfgs && !json_is_object(cfgs))
        return gs_diags_add(d, "spec.migManager.config.migConfigs", "want a map of layout names"), GS_EINVAL;
    if (cfgs && parse_layouts(cfgs, p, d)) return GS_EINVAL;
    if (!gs_policy_layout(p, p->mig_default))
        return gs_diags_add(d, "spec.migManager.config.default", "no layout named \"%s\"", p->mig_default), GS_EINVAL;
    return 0;
}

static int parse_retry(const json_t *spec, struct gs_policy *p, struct gs_diags *d)
{
    json_t *r = json_object_get(json_object_get(spec, "validator"), "retry");
    const char *path = "spec.validator.retry";
    if (want_seconds(r, "initialBackoffSeconds", &p->backoff_initial_ms, 0.01, 3600, path, d) ||
        want_seconds(r, "maxBackoffSeconds", &p->backoff_max_ms, 0.01, 86400, path, d) ||
        want_seconds(r, "answerTimeoutSeconds", &p->answer_timeout_ms, 0.1, 86400, path, d))
        return GS_EINVAL;
    if (p->backoff_max_ms < p->backoff_initial_ms) p->backoff_max_ms = p->backoff_initial_ms;
    return 0;
}

int gs_policy_parse(const json_t *doc, struct gs_policy *p, struct gs_diags *d)
{
    gs_policy_defaults(p);
    json_t *md = json_object_get(doc, "metadata");
    snprintf(p->name, sizeof p->name, "%s", json_string_value(json_object_get(md, "name")) ?: "");
    const char *rv = json_string_value(json_object_get(md, "resourceVersion"));
    p->generation = rv ? atoll(rv) : 0;
    json_t *spec = json_object_get(doc, "spec");
    if (spec && !json_is_object(spec)) return gs_diags_add(d, "spec", "want an object"), GS_EINVAL;
    int err = 0;
    for (int c = 0; c < GS_COMP_COUNT; c++) {
        json_t *o = json_object_get(spec, comps[c].key);
        char path[64];
        snprintf(path, sizeof path, "spec.%s", comps[c].key);
        if (o && !json_is_object(o)) {
            gs_diags_add(d, path, "want an object");
            err = GS_EINVAL;
        } else if (want_bool(o, "enabled", &p->enabled[c], path, d)) err = GS_EINVAL;
    }
    if (parse_mig(spec, p, d) || parse_retry(spec, p, d)) err = GS_EINVAL;
    return err;
}

/*--- Per node ---*/

const struct gs_mig_layout *gs_policy_layout(const struct gs_policy *p, const char *name)
{
    for (int i = 0; name && i < p->nlayouts; i++)
        if (!strcmp(p->layouts[i].name, name)) return &p->layouts[i];
    return NULL;
}

const struct gs_mig_layout *gs_policy_layout_for(const struct gs_policy *p, const json_t *labels, const char **name)
{
    const char *n = json_string_value(json_object_get(labels, GS_LABEL_MIG_CONFIG));
    if (!n) n = p->mig_default;
    if (name) *name = n;
    return gs_policy_layout(p, n);
}

static bool label_false(const json_t *labels, const char *key)
{
    const char *v = json_string_value(json_object_get(labels, key));
    return v && !strcmp(v, "false");
}

bool gs_policy_node_enabled(const struct gs_policy *p, const json_t *labels, enum gs_comp c)
{
    if (c >= GS_COMP_COUNT || !p->enabled[c] || label_false(labels, GS_LABEL_DEPLOY_OPERANDS)) return false;
    char key[96];
    snprintf(key, sizeof key, GS_LABEL_DEPLOY_PREFIX "%s", comps[c].operand);
    return !label_false(labels, key);
}

/*--- GPUCluster ---*/

int gs_gpucluster_parse(const json_t *doc, struct gs_policy *p, struct gs_diags *d)
{
    gs_policy_defaults(p);
    p->dra = true;
    json_t *md = json_object_get(doc, "metadata");
    snprintf(p->name, sizeof p->name, "%s", json_string_value(json_object_get(md, "name")) ?: "");
    const char *rv = json_string_value(json_object_get(md, "resourceVersion"));
    p->generation = rv ? atoll(rv) : 0;
    json_t *spec = json_object_get(doc, "spec");
    if (spec && !json_is_object(spec)) return gs_diags_add(d, "spec", "want an object"), GS_EINVAL;
    /* GPUs reach pods through DRA: no device plugin, no node-wide MIG layout. */
    p->enabled[GS_COMP_DEVICE_PLUGIN] = false;
    p->enabled[GS_COMP_MIG_MANAGER] = false;
    p->enabled[GS_COMP_DRA_DRIVER] = true;
    int err = 0;
    static const char *const refused[] = {"devicePlugin", "migManager", "mig"};
    for (size_t i = 0; i < sizeof refused / sizeof *refused; i++)
        if (json_object_get(spec, refused[i])) {
            char path[64];
            snprintf(path, sizeof path, "spec.%s", refused[i]);
            gs_diags_add(d, path, "not managed by a GPUCluster: GPUs and MIG devices reach pods through DRA "
                         "(spec.draDriver); use a ClusterPolicy for the device-plugin model");
            err = GS_EINVAL;
        }
    static const enum gs_comp read[] = {GS_COMP_DRA_DRIVER, GS_COMP_DCGM, GS_COMP_DCGM_EXPORTER, GS_COMP_DRIVER,
                                       GS_COMP_GFD};
    for (size_t i = 0; i < sizeof read / sizeof *read; i++) {
        enum gs_comp c = read[i];
        json_t *o = json_object_get(spec, comps[c].key);
        char path[64];
        snprintf(path, sizeof path, "spec.%s", comps[c].key);
        if (o && !json_is_object(o)) {
            gs_diags_add(d, path, "want an object");
            err = GS_EINVAL;
        } else if (want_bool(o, "enabled", &p->enabled[c], path, d)) {
            err = GS_EINVAL;
        }
    }
    if (!p->enabled[GS_COMP_DRIVER]) {
        gs_diags_add(d, "spec.driver.enabled", "false: a GPUCluster does not install the driver, it only checks it "
                     "(pre-installed or from an NVIDIADriver); leave it out");
        err = GS_EINVAL;
        p->enabled[GS_COMP_DRIVER] = true;
    }
    if (parse_retry(spec, p, d)) err = GS_EINVAL;
    return err;
}
