/*
 * cdi.c - CDI spec generation and atomic file replacement (cdi.h).
 */
#include "node/cdi.h"

#include "core/error.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*--- Building the JSON ---*/

static json_t *dev_node(const char *path)
{
    return json_pack("{s:s, s:s, s:s}", "path", path, "hostPath", path, "permissions", "rw");
}

static json_t *gpu_node(const struct gs_node_gpu *d)
{
    char path[64];
    snprintf(path, sizeof path, "/dev/nvidia%d", d->minor);
    return dev_node(path);
}

static json_t *device(const char *name, json_t *nodes)
{
    return json_pack("{s:s, s:{s:o}}", "name", name, "containerEdits", "deviceNodes", nodes);
}

static json_t *devices(const struct gs_node_gpus *g)
{
    json_t *v = json_array(), *all = json_array();
    for (int i = 0; i < g->n; i++) {
        char idx[16];
        snprintf(idx, sizeof idx, "%d", g->gpu[i].index);
        json_array_append_new(v, device(g->gpu[i].uuid, json_pack("[o]", gpu_node(&g->gpu[i]))));
        json_array_append_new(v, device(idx, json_pack("[o]", gpu_node(&g->gpu[i]))));
        json_array_append_new(all, gpu_node(&g->gpu[i]));
    }
    json_array_append_new(v, device("all", all));
    return v;
}

static json_t *common_edits(const struct gs_cdi_opts *o)
{
    json_t *mounts = json_array();
    for (size_t i = 0; o && i < o->n_mounts; i++) {
        const struct gs_cdi_mount *m = &o->mounts[i];
        json_array_append_new(mounts, json_pack("{s:s, s:s, s:[s,s,s,s]}", "hostPath", m->host_path,
                                                "containerPath", m->container_path ? m->container_path : m->host_path,
                                                "options", "ro", "nosuid", "nodev", "bind"));
    }
    return json_pack("{s:[s], s:[o,o,o], s:o}", "env", "NVIDIA_VISIBLE_DEVICES=void", "deviceNodes",
                     dev_node("/dev/nvidiactl"), dev_node("/dev/nvidia-uvm"), dev_node("/dev/nvidia-uvm-tools"),
                     "mounts", mounts);
}

int gs_cdi_spec_json(const struct gs_node_gpus *g, const struct gs_cdi_opts *o, char **out)
{
    const char *kind = o && o->kind ? o->kind : "nvidia.com/gpu";
    json_t *spec = json_pack("{s:s, s:s, s:o, s:o}", "cdiVersion", GS_CDI_VERSION, "kind", kind, "devices",
                             devices(g), "containerEdits", common_edits(o));
    *out = spec ? json_dumps(spec, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
    json_decref(spec);
    return *out ? 0 : GS_ENOMEM;
}

/*--- Writing the file ---*/

void gs_cdi_file_name(const char *kind, char *buf, size_t len)
{
    snprintf(buf, len, "%s.json", kind ? kind : "nvidia.com/gpu");
    for (char *p = buf; *p; p++)
        if (*p == '/') *p = '-';
}

static int mkdirs(const char *dir)
{
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0755) && errno != EEXIST) return GS_EIO;
        *p = '/';
    }
    return mkdir(tmp, 0755) && errno != EEXIST ? GS_EIO : 0;
}

static int write_all(int fd, const char *s, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, s, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return GS_EIO;
        s += w, n -= (size_t)w;
    }
    return 0;
}

int gs_cdi_write_text(const char *dir, const char *name, const char *text, char *path, size_t pathlen)
{
    char final[4096], tmp[4096];
    snprintf(final, sizeof final, "%s/%s", dir, name);
    /* A leading dot and no .json suffix: CDI scanners skip the temporary file. */
    snprintf(tmp, sizeof tmp, "%s/.%s.tmpXXXXXX", dir, name);
    int fd = mkdirs(dir) ? -1 : mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) return GS_EIO;
    int rc = write_all(fd, text, strlen(text));
    if (!rc) rc = write_all(fd, "\n", 1);
    if (!rc && (fchmod(fd, 0644) || fsync(fd))) rc = GS_EIO;
    if (close(fd) && !rc) rc = GS_EIO;
    if (!rc && rename(tmp, final)) rc = GS_EIO;
    if (rc) unlink(tmp);
    if (!rc && path) snprintf(path, pathlen, "%s", final);
    return rc;
}

int gs_cdi_write(const char *dir, const struct gs_node_gpus *g, const struct gs_cdi_opts *o, char *path,
                 size_t pathlen)
{
    char name[256];
    char *text;
    int rc = gs_cdi_spec_json(g, o, &text);
    if (rc) return rc;
    gs_cdi_file_name(o ? o->kind : NULL, name, sizeof name);
    rc = gs_cdi_write_text(dir, name, text, path, pathlen);
    free(text);
    return rc;
}
