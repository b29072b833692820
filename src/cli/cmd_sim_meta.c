/*
 * cmd_sim_meta.c - the command line and the date for the simulator's reports
 * (cmd_sim_meta.h).
 */
#include "cli/cmd_sim_meta.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

void gs_cli_meta_init(struct gs_cli_meta *cm, int argc, char *const *argv)
{
    memset(cm, 0, sizeof *cm);
    cm->command = gs_sim_command_line(argc, argv);
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(cm->date, sizeof cm->date, "%Y-%m-%dT%H:%M:%SZ", &tm);
    cm->m.version = GS_VERSION;
    cm->m.command = cm->command;
    cm->m.date = cm->date[0] ? cm->date : NULL;
}

void gs_cli_meta_free(struct gs_cli_meta *cm)
{
    free(cm->command);
    cm->command = NULL;
    cm->m.command = NULL;
}
