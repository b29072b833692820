/*
 * sim.c - gs_sim_run(): checks the options every experiment shares and
 * dispatches to the experiment (fgd_experiment.c, replay.c).
 *
 * Kept apart from both experiments so the CLI and tests have one entry point
 * and an experiment never has to repeat the argument checks.
 */
#include "sim/sim.h"

#include <math.h>
#include <string.h>

static int check_opts(const struct gs_trace *t, const struct gs_sim_opts *o, struct gs_diags *d)
{
    if (!t || !o) return GS_EINVAL;
    if (o->mode == GS_SIM_FGD && (!isfinite(o->tune) || o->tune <= 0)) {
        gs_diags_add(d, "tune", "must be a positive number, got %g", o->tune);
        return GS_EINVAL;
    }
    if (o->mode != GS_SIM_FGD && o->mode != GS_SIM_REPLAY) {
        gs_diags_add(d, "mode", "unknown experiment %d", (int)o->mode);
        return GS_EINVAL;
    }
    return 0;
}

int gs_sim_run(const struct gs_trace *t, const struct gs_sim_opts *o, const struct gs_sim_sink *sink,
               struct gs_sim_result *res, struct gs_diags *d)
{
    int rc = check_opts(t, o, d);
    if (rc) return rc;
    static const struct gs_sim_sink none = {0}; /* experiments never see a NULL sink */
    if (!sink) sink = &none;
    memset(res, 0, sizeof *res);
    return o->mode == GS_SIM_FGD ? gs_sim_run_fgd(t, o, sink, res, d) : gs_sim_run_replay(t, o, sink, res, d);
}
