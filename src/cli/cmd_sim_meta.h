/*
 * cmd_sim_meta.h - the metadata the CLI gives the simulator's reports (version,
 * the exact command line, the date): the parts only the command knows, read
 * once when it starts. The report writers (sim/output.h, the tenants report)
 * print them; the library itself never reads the wall clock for them.
 */
#ifndef GS_CLI_SIM_META_H
#define GS_CLI_SIM_META_H

#include "sim/output.h"

struct gs_cli_meta {
    struct gs_sim_meta m; /* version, command and date filled; the caller adds the rest */
    char *command;        /* owned */
    char date[32];
};

/* argv[0] is the subcommand ("sim"), as main() passes it. */
void gs_cli_meta_init(struct gs_cli_meta *cm, int argc, char *const *argv);
void gs_cli_meta_free(struct gs_cli_meta *cm);

#endif
