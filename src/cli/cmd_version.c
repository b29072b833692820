/*
 * cmd_version.c - `gpusched version`: the version and the libraries built in.
 */
#include "cli/commands.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

int gs_cmd_version(int argc, char **argv)
{
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: gpusched version\n");
        return 0;
    }
    if (argc > 1) {
        fprintf(stderr, "gpusched version: unexpected argument \"%s\"\n", argv[1]);
        return 2;
    }
    printf("gpusched %s (jansson %s, libyaml %s)\n", GS_VERSION, JANSSON_VERSION, yaml_get_version_string());
    return 0;
}
