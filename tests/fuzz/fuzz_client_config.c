/*
 * fuzz_client_config.c - fuzz target for the client's connection settings
 * (client.c): the first line is taken as a --server value (one URL or a
 * comma-separated list), the rest as a kubeconfig (with or without the
 * gpusched.io/servers extension). Either the client is made, with at least
 * one server and the one in use among them, or the problem is reported in
 * the diagnostics; never a crash, never an empty server.
 */
#include "control/client.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct gs_client_opts *o)
{
    struct gs_client *c = NULL;
    struct gs_diags d = {0};
    int err = gs_client_new(o, &c, &d);
    if (err) {
        if (c || !d.n) abort(); /* a refusal says why */
    } else {
        if (!c || gs_client_nservers(c) < 1 || !gs_client_server(c) || !*gs_client_server(c)) abort();
        gs_client_free(c);
    }
    gs_diags_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *nl = memchr(data, '\n', size);
    size_t first = nl ? (size_t)(nl - (const char *)data) : size;
    char *server = strndup((const char *)data, first);
    if (!server) return 0;
    if (!memchr(server, 0, first) && first) { /* a value with a NUL cannot come from argv */
        struct gs_client_opts o = {.server = server, .token = "t"};
        check(&o);
    }
    free(server);
    int fd = memfd_create("kubeconfig", 0);
    if (fd < 0) return 0;
    const uint8_t *kc = nl ? (const uint8_t *)nl + 1 : data + size;
    size_t kl = (size_t)(data + size - kc);
    if (write(fd, kc, kl) == (ssize_t)kl) {
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        struct gs_client_opts o = {.kubeconfig = path};
        check(&o);
    }
    close(fd);
    return 0;
}
