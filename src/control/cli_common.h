/*
 * cli_common.h - what the client commands (apply, get, describe, delete)
 * share: their common flags, the connection, reading manifests, and
 * kubectl-style output (aligned columns, "pod/web created").
 */
#ifndef GS_CONTROL_CLI_COMMON_H
#define GS_CONTROL_CLI_COMMON_H

#include "control/client.h"
#include "core/codec.h"

#include <stdbool.h>
#include <stdio.h>

struct gs_cli {
    struct gs_client_opts conn;
    const char *ns;         /* -n; NULL: "default" for namespaced kinds */
    bool all_ns;            /* -A */
    const char *output;     /* -o: NULL, "wide", "json", "yaml", "name" */
    const char *selector;   /* -l */
    const char *field_sel;  /* --field-selector */
    const char **files;     /* -f (repeatable) */
    size_t nfiles;
    char **args;            /* positional arguments */
    int nargs;
};

/* Parses argv (the command's own, argv[0] = command name). Returns -1 to go
 * on, or an exit code (0 after --help, 2 on a usage error) after printing
 * usage_text to the right stream. Free with gs_cli_free. */
int gs_cli_parse(int argc, char **argv, const char *usage_text, struct gs_cli *out);
void gs_cli_free(struct gs_cli *c);
/* Help text of the shared flags, for usage messages. */
extern const char gs_cli_common_help[];

/* Connects (prints problems to stderr). NULL on failure. */
struct gs_client *gs_cli_connect(struct gs_cli *c, const char *cmd);

/* Every document of every -f path (a file, a directory's *.yaml|*.yml|*.json
 * in name order, or "-" for stdin). Prints problems; 0 or an error. */
int gs_cli_read_manifests(struct gs_cli *c, const char *cmd, struct gs_docs *out);

/* Prints a Table (columns with priority 0, all when wide), with a NAMESPACE
 * column first when with_ns. Returns the number of rows. */
size_t gs_cli_print_table(FILE *f, const json_t *table, bool wide, bool with_ns, bool headers);
/* Prints a document as JSON (pretty) or YAML. */
int gs_cli_print_doc(FILE *f, const json_t *doc, bool yaml);
/* "cmd: <message of the Status or the error>" on stderr. */
void gs_cli_report(const char *cmd, int err, const json_t *status);

#endif
