/*
 * test_oci.c - the OCI runtime spec builder (node/oci.h): the process from
 * pod and image, resources as cgroup limits, Allocate's device specs and the
 * CDI containerEdits of fixture spec files in a temporary directory, and the
 * error messages of bad inputs.
 *
 * Device nodes are made with mknod in the temporary directory (char 195:N,
 * the NVIDIA major) when that is allowed, else they are symbolic links to
 * /dev/null, /dev/zero and /dev/full; every expected number is read back
 * with stat, so the test checks the builder, not the machine.
 */
#include "node/oci.h"

#include "core/codec.h"
#include "core/error.h"

#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

/*--- Fixtures ---*/

static char tmp[256];
static char cdi1[300], cdi2[300], fake[3][320];

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void make_node(const char *path, int k)
{
    static const char *const alt[] = {"/dev/null", "/dev/zero", "/dev/full"};
    if (mknod(path, S_IFCHR | 0666, makedev(195, (unsigned)k)) == 0) return;
    assert_int_equal(symlink(alt[k], path), 0);
}

static void rdev_of(const char *path, long long *maj, long long *min)
{
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    *maj = major(st.st_rdev);
    *min = minor(st.st_rdev);
}

static int setup(void **state)
{
    (void)state;
    snprintf(tmp, sizeof tmp, "/tmp/test_oci.XXXXXX");
    if (!mkdtemp(tmp)) return -1;
    snprintf(cdi1, sizeof cdi1, "%s/cdi1", tmp);
    snprintf(cdi2, sizeof cdi2, "%s/cdi2", tmp);
    mkdir(cdi1, 0755);
    mkdir(cdi2, 0755);
    for (int k = 0; k < 3; k++) {
        snprintf(fake[k], sizeof fake[k], "%s/nvidia%d", tmp, k);
        make_node(fake[k], k);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    return system(cmd) == 0 ? 0 : -1;
}

static void clear_cdi(void)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -f '%s'/* '%s'/*", cdi1, cdi2);
    assert_int_equal(system(cmd), 0);
}

static json_t *pod_of(const char *json)
{
    json_error_t e;
    json_t *p = json_loads(json, 0, &e);
    if (!p) fail_msg("fixture: %s", e.text);
    return p;
}

static json_t *ctr0(json_t *pod)
{
    return json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
}

static const char *env_get(json_t *spec, const char *name)
{
    size_t i, n = strlen(name);
    json_t *e;
    json_array_foreach(json_object_get(json_object_get(spec, "process"), "env"), i, e) {
        const char *s = json_string_value(e);
        if (!strncmp(s, name, n) && s[n] == '=') return s + n + 1;
    }
    return NULL;
}

static json_t *mount_at(json_t *spec, const char *dst)
{
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(spec, "mounts"), i, m) if (!strcmp(json_string_value(json_object_get(m, "destination")),
                                                                          dst)) return m;
    return NULL;
}

static json_t *device_at(json_t *spec, const char *path)
{
    size_t i;
    json_t *d;
    json_array_foreach(json_object_get(json_object_get(spec, "linux"), "devices"), i, d) if (
        !strcmp(json_string_value(json_object_get(d, "path")), path)) return d;
    return NULL;
}

static bool allowed(json_t *spec, long long maj, long long min)
{
    size_t i;
    json_t *r;
    json_array_foreach(json_object_get(json_object_get(json_object_get(spec, "linux"), "resources"), "devices"), i, r) {
        if (json_is_true(json_object_get(r, "allow")) && json_integer_value(json_object_get(r, "major")) == maj &&
            json_integer_value(json_object_get(r, "minor")) == min)
            return true;
    }
    return false;
}

static size_t n_allowed(json_t *spec)
{
    size_t i, n = 0;
    json_t *r;
    json_array_foreach(json_object_get(json_object_get(json_object_get(spec, "linux"), "resources"), "devices"), i, r)
        n += json_is_true(json_object_get(r, "allow"));
    return n;
}

static int build(json_t *pod, const struct gs_image_config *img, const struct gs_alloc_resp *alloc,
                 const char *const *cdi, size_t n_cdi, json_t **out, char *err, size_t el)
{
    const char *dirs[] = {cdi1, cdi2};
    struct gs_oci_input in = {.pod = pod, .container = ctr0(pod), .image = img, .rootfs = "/var/lib/rootfs/abc",
                              .alloc = alloc, .cdi_devices = cdi, .n_cdi = n_cdi, .cdi_dirs = dirs, .n_cdi_dirs = 2,
                              .scratch_dir = "/var/lib/pods/p/c/scratch", .default_pids_limit = 1024};
    return gs_oci_spec_build(&in, out, err, el);
}

/*--- The process, root, namespaces, mounts ---*/

static void process_from_pod(void **state)
{
    (void)state;
    json_t *pod = pod_of("{\"metadata\":{\"name\":\"train-0\",\"namespace\":\"ml\"},\"spec\":{"
                         "\"securityContext\":{\"runAsUser\":1000,\"supplementalGroups\":[44,45]},"
                         "\"containers\":[{\"name\":\"main\",\"command\":[\"/bin/sh\",\"-c\"],\"args\":[\"echo hi\"],"
                         "\"workingDir\":\"/work\",\"securityContext\":{\"runAsGroup\":2000},"
                         "\"env\":[{\"name\":\"A\",\"value\":\"pod\"},{\"name\":\"B\",\"value\":\"pod\"},"
                         "{\"name\":\"NVIDIA_VISIBLE_DEVICES\",\"value\":\"all\"}]}]}}");
    char *ienv[] = {"PATH=/bin", "A=image", NULL};
    char *ep[] = {"/entry", NULL}, *cmd[] = {"default", NULL};
    struct gs_image_config img = {.entrypoint = ep, .cmd = cmd, .env = ienv, .workdir = "/img", .user = "7:7"};
    char *extra[] = {"B=agent", "GPUSCHED_POD=train-0", NULL};
    const char *dirs[] = {cdi1};
    struct gs_oci_input in = {.pod = pod, .container = ctr0(pod), .image = &img, .rootfs = "/var/lib/rootfs/abc",
                              .cdi_dirs = dirs, .n_cdi_dirs = 1, .extra_env = extra, .hostname = NULL};
    json_t *s;
    char err[512];
    assert_int_equal(gs_oci_spec_build(&in, &s, err, sizeof err), 0);
    json_t *p = json_object_get(s, "process");
    assert_false(json_is_true(json_object_get(p, "terminal")));
    assert_true(json_is_true(json_object_get(p, "noNewPrivileges")));
    json_t *args = json_object_get(p, "args");
    assert_int_equal(json_array_size(args), 3);
    assert_string_equal(json_string_value(json_array_get(args, 0)), "/bin/sh");
    assert_string_equal(json_string_value(json_array_get(args, 2)), "echo hi");
    assert_string_equal(json_string_value(json_object_get(p, "cwd")), "/work");
    json_t *u = json_object_get(p, "user");
    assert_int_equal(json_integer_value(json_object_get(u, "uid")), 1000);
    assert_int_equal(json_integer_value(json_object_get(u, "gid")), 2000);
    assert_int_equal(json_array_size(json_object_get(u, "additionalGids")), 2);
    /* later wins: image < pod < agent; the pod cannot set a reserved name */
    assert_string_equal(env_get(s, "PATH"), "/bin");
    assert_string_equal(env_get(s, "A"), "pod");
    assert_string_equal(env_get(s, "B"), "agent");
    assert_null(env_get(s, "NVIDIA_VISIBLE_DEVICES"));
    assert_string_equal(json_string_value(json_object_get(s, "hostname")), "train-0");
    json_t *root = json_object_get(s, "root");
    assert_string_equal(json_string_value(json_object_get(root, "path")), "/var/lib/rootfs/abc");
    assert_true(json_is_true(json_object_get(root, "readonly")));
    /* namespaces: pid ipc uts mount cgroup, the host's network */
    json_t *ns = json_object_get(json_object_get(s, "linux"), "namespaces");
    size_t i;
    json_t *x;
    bool pid = false;
    json_array_foreach(ns, i, x) {
        const char *t = json_string_value(json_object_get(x, "type"));
        assert_string_not_equal(t, "network");
        pid |= !strcmp(t, "pid");
    }
    assert_true(pid);
    assert_int_equal(json_array_size(ns), 5);
    static const char *const std_mounts[] = {"/proc", "/dev", "/dev/pts", "/dev/shm", "/dev/mqueue", "/sys", "/tmp", NULL};
    for (int k = 0; std_mounts[k]; k++) assert_non_null(mount_at(s, std_mounts[k]));
    assert_null(mount_at(s, GS_OCI_SCRATCH_PATH)); /* no scratch dir given */
    assert_string_equal(json_string_value(json_object_get(mount_at(s, "/tmp"), "type")), "tmpfs");
    json_t *sys = mount_at(s, "/sys");
    bool ro = false;
    json_array_foreach(json_object_get(sys, "options"), i, x) ro |= !strcmp(json_string_value(x), "ro");
    assert_true(ro);
    json_t *masked = json_object_get(json_object_get(s, "linux"), "maskedPaths");
    assert_string_equal(json_string_value(json_array_get(masked, 2)), "/proc/kcore");
    assert_int_equal(json_array_size(json_object_get(json_object_get(s, "linux"), "readonlyPaths")), 5);
    /* no devices but the standard ones allowed */
    assert_int_equal(json_array_size(json_object_get(json_object_get(s, "linux"), "devices")), 0);
    assert_int_equal(n_allowed(s), 6);
    assert_true(allowed(s, 1, 3));
    assert_null(json_object_get(s, "hooks"));
    json_decref(s);
    json_decref(pod);
}

/* Kubernetes' rule for command/args against the image's entrypoint/cmd. */
static void command_rules(void **state)
{
    (void)state;
    char *ep[] = {"/ep", NULL}, *cmd[] = {"c1", "c2", NULL};
    struct gs_image_config img = {.entrypoint = ep, .cmd = cmd};
    struct {
        const char *ctr;
        const char *want;
    } cases[] = {
        {"{\"name\":\"a\"}", "/ep c1 c2"},
        {"{\"name\":\"a\",\"args\":[\"x\"]}", "/ep x"},
        {"{\"name\":\"a\",\"command\":[\"/bin/true\"]}", "/bin/true"},
        {"{\"name\":\"a\",\"command\":[\"/bin/echo\"],\"args\":[\"y\",\"z\"]}", "/bin/echo y z"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char text[512];
        snprintf(text, sizeof text, "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[%s]}}", cases[k].ctr);
        json_t *pod = pod_of(text), *s;
        char err[256];
        assert_int_equal(build(pod, &img, NULL, NULL, 0, &s, err, sizeof err), 0);
        char got[256] = "";
        size_t i;
        json_t *a;
        json_array_foreach(json_object_get(json_object_get(s, "process"), "args"), i, a) {
            size_t l = strlen(got);
            snprintf(got + l, sizeof got - l, "%s%s", i ? " " : "", json_string_value(a));
        }
        assert_string_equal(got, cases[k].want);
        /* no workingDir anywhere: the scratch dir, mounted read-write */
        assert_string_equal(json_string_value(json_object_get(json_object_get(s, "process"), "cwd")), GS_OCI_SCRATCH_PATH);
        assert_string_equal(json_string_value(json_object_get(mount_at(s, GS_OCI_SCRATCH_PATH), "source")),
                            "/var/lib/pods/p/c/scratch");
        /* the image's numeric user is absent: root */
        assert_int_equal(json_integer_value(json_object_get(json_object_get(json_object_get(s, "process"), "user"), "uid")), 0);
        json_decref(s);
        json_decref(pod);
    }
}

/*--- Resources ---*/

static void resources_as_cgroup_limits(void **state)
{
    (void)state;
    json_t *pod = pod_of("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\",\"command\":[\"x\"],"
                         "\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"32Mi\"},"
                         "\"limits\":{\"cpu\":\"2\",\"memory\":\"64Mi\"}}}]}}");
    json_t *s;
    char err[256];
    assert_int_equal(build(pod, NULL, NULL, NULL, 0, &s, err, sizeof err), 0);
    json_t *r = json_object_get(json_object_get(s, "linux"), "resources");
    json_t *cpu = json_object_get(r, "cpu");
    assert_int_equal(json_integer_value(json_object_get(cpu, "shares")), 512);
    assert_int_equal(json_integer_value(json_object_get(cpu, "quota")), 200000);
    assert_int_equal(json_integer_value(json_object_get(cpu, "period")), 100000);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "memory"), "limit")), 64LL << 20);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "pids"), "limit")), 1024);
    json_decref(s);
    json_decref(pod);

    /* best effort: kubelet's minimum shares, no quota, no memory limit */
    pod = pod_of("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\",\"command\":[\"x\"]}]}}");
    assert_int_equal(build(pod, NULL, NULL, NULL, 0, &s, err, sizeof err), 0);
    r = json_object_get(json_object_get(s, "linux"), "resources");
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "cpu"), "shares")), 2);
    assert_null(json_object_get(json_object_get(r, "cpu"), "quota"));
    assert_null(json_object_get(r, "memory"));
    json_decref(s);
    json_decref(pod);
}

/*--- Allocate ---*/

static void allocate_devices_and_env(void **state)
{
    (void)state;
    struct gs_alloc_resp *a = calloc(1, sizeof *a);
    assert_non_null(a);
    a->n_env = 1;
    snprintf(a->env[0].key, sizeof a->env[0].key, "NVIDIA_VISIBLE_DEVICES");
    snprintf(a->env[0].value, sizeof a->env[0].value, "GPU-1");
    a->n_dev = 2;
    snprintf(a->dev[0].container_path, sizeof a->dev[0].container_path, "/dev/nvidia0");
    snprintf(a->dev[0].host_path, sizeof a->dev[0].host_path, "%.60s", fake[0]);
    snprintf(a->dev[0].permissions, sizeof a->dev[0].permissions, "rw");
    snprintf(a->dev[1].container_path, sizeof a->dev[1].container_path, "/dev/nvidiactl");
    snprintf(a->dev[1].host_path, sizeof a->dev[1].host_path, "%.60s", fake[1]);
    snprintf(a->dev[1].permissions, sizeof a->dev[1].permissions, "rwm");
    json_t *pod = pod_of("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\",\"command\":[\"x\"],"
                         "\"env\":[{\"name\":\"X\",\"value\":\"1\"}]}]}}");
    json_t *s;
    char err[256];
    assert_int_equal(build(pod, NULL, a, NULL, 0, &s, err, sizeof err), 0);
    assert_string_equal(env_get(s, "NVIDIA_VISIBLE_DEVICES"), "GPU-1");
    assert_string_equal(env_get(s, "X"), "1");
    long long maj, min;
    rdev_of(fake[0], &maj, &min);
    json_t *d = device_at(s, "/dev/nvidia0");
    assert_non_null(d);
    assert_string_equal(json_string_value(json_object_get(d, "type")), "c");
    assert_int_equal(json_integer_value(json_object_get(d, "major")), maj);
    assert_int_equal(json_integer_value(json_object_get(d, "minor")), min);
    assert_true(allowed(s, maj, min));
    assert_non_null(device_at(s, "/dev/nvidiactl"));
    assert_int_equal(json_array_size(json_object_get(json_object_get(s, "linux"), "devices")), 2);
    /* the deny-all rule comes first */
    json_t *first = json_array_get(json_object_get(json_object_get(json_object_get(s, "linux"), "resources"), "devices"), 0);
    assert_false(json_is_true(json_object_get(first, "allow")));
    json_decref(s);

    /* a device node that is not there */
    snprintf(a->dev[1].host_path, sizeof a->dev[1].host_path, "%.50s/missing", tmp);
    assert_int_equal(build(pod, NULL, a, NULL, 0, &s, err, sizeof err), GS_EIO);
    assert_non_null(strstr(err, "/dev/nvidiactl"));
    assert_non_null(strstr(err, "missing"));
    assert_null(s);
    json_decref(pod);
    free(a);
}

/*--- CDI ---*/

static void cdi_edits_applied(void **state)
{
    (void)state;
    clear_cdi();
    char spec[4096], path[400];
    snprintf(spec, sizeof spec,
             "{\"cdiVersion\":\"0.5.0\",\"kind\":\"nvidia.com/gpu\","
             "\"devices\":[{\"name\":\"GPU-a\",\"containerEdits\":{"
             "\"deviceNodes\":[{\"path\":\"/dev/nvidia0\",\"hostPath\":\"%s\"}],"
             "\"env\":[\"GPU_A=1\"],"
             "\"hooks\":[{\"hookName\":\"createContainer\",\"path\":\"/usr/bin/hook\",\"args\":[\"hook\",\"cc\"]}]}},"
             "{\"name\":\"GPU-b\",\"containerEdits\":{\"deviceNodes\":[{\"path\":\"/dev/nvidia1\",\"hostPath\":\"%s\"}]}}],"
             "\"containerEdits\":{\"env\":[\"NVIDIA_VISIBLE_DEVICES=void\"],"
             "\"deviceNodes\":[{\"path\":\"/dev/nvidiactl\",\"type\":\"c\",\"major\":195,\"minor\":255,"
             "\"hostPath\":\"/nonexistent/ctl\"}],"
             "\"mounts\":[{\"hostPath\":\"/usr/lib/libfoo.so\",\"containerPath\":\"/usr/lib/libfoo.so\","
             "\"options\":[\"ro\",\"nosuid\",\"nodev\",\"bind\"]},"
             "{\"hostPath\":\"/opt/drv\",\"containerPath\":\"/opt\"}],"
             "\"hooks\":[{\"hookName\":\"createRuntime\",\"path\":\"/usr/bin/ldconfig-hook\",\"timeout\":5},"
             "{\"hookName\":\"poststop\",\"path\":\"/usr/bin/cleanup\",\"env\":[\"K=V\"]}],"
             "\"additionalGids\":[39]}}",
             fake[0], fake[1]);
    snprintf(path, sizeof path, "%s/nvidia.com-gpu.json", cdi1);
    write_text(path, spec);
    /* a YAML spec of another kind in the second directory */
    snprintf(spec, sizeof spec,
             "cdiVersion: 0.6.0\nkind: example.com/nic\ndevices:\n- name: nic0\n  containerEdits:\n"
             "    env: [NIC=0]\n    deviceNodes:\n    - path: /dev/nic0\n      hostPath: %s\n      permissions: rw\n"
             "    hooks:\n    - hookName: startContainer\n      path: /bin/start\n"
             "    - hookName: poststart\n      path: /bin/after\n",
             fake[2]);
    snprintf(path, sizeof path, "%s/nic.yaml", cdi2);
    write_text(path, spec);

    const char *names[] = {"nvidia.com/gpu=GPU-a", "nvidia.com/gpu=GPU-b", "example.com/nic=nic0"};
    json_t *pod = pod_of("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\",\"command\":[\"x\"],"
                         "\"env\":[{\"name\":\"GPU_A\",\"value\":\"pod\"}]}]}}");
    json_t *s;
    char err[512];
    assert_int_equal(build(pod, NULL, NULL, names, 3, &s, err, sizeof err), 0);
    /* env: the CDI edits win over the pod's */
    assert_string_equal(env_get(s, "GPU_A"), "1");
    assert_string_equal(env_get(s, "NIC"), "0");
    assert_string_equal(env_get(s, "NVIDIA_VISIBLE_DEVICES"), "void");
    /* device nodes: stat'ed when numbers are missing, taken as given otherwise */
    long long maj, min;
    rdev_of(fake[1], &maj, &min);
    json_t *d1 = device_at(s, "/dev/nvidia1");
    assert_non_null(d1);
    assert_int_equal(json_integer_value(json_object_get(d1, "major")), maj);
    assert_int_equal(json_integer_value(json_object_get(d1, "minor")), min);
    assert_true(allowed(s, maj, min));
    json_t *ctl = device_at(s, "/dev/nvidiactl");
    assert_int_equal(json_integer_value(json_object_get(ctl, "minor")), 255);
    assert_true(allowed(s, 195, 255));
    assert_non_null(device_at(s, "/dev/nic0"));
    assert_int_equal(json_array_size(json_object_get(json_object_get(s, "linux"), "devices")), 4);
    /* the spec-wide edits once, though two of its devices are asked for */
    assert_int_equal(n_allowed(s), 6 + 4);
    /* mounts: bind, with rbind added where no bind option is given; parents first */
    json_t *m = mount_at(s, "/opt");
    assert_non_null(m);
    assert_string_equal(json_string_value(json_object_get(m, "type")), "bind");
    assert_string_equal(json_string_value(json_array_get(json_object_get(m, "options"), 0)), "rbind");
    json_t *lib = mount_at(s, "/usr/lib/libfoo.so");
    assert_string_equal(json_string_value(json_object_get(lib, "source")), "/usr/lib/libfoo.so");
    json_t *mounts = json_object_get(s, "mounts");
    size_t i, last_depth = 0;
    json_t *x;
    json_array_foreach(mounts, i, x) {
        const char *dst = json_string_value(json_object_get(x, "destination"));
        size_t dep = 0;
        for (const char *p = dst; *p; p++) dep += (*p == '/');
        assert_true(dep >= last_depth);
        last_depth = dep;
    }
    /* hooks by stage */
    json_t *hooks = json_object_get(s, "hooks");
    assert_int_equal(json_array_size(json_object_get(hooks, "createRuntime")), 1);
    assert_int_equal(json_integer_value(json_object_get(json_array_get(json_object_get(hooks, "createRuntime"), 0),
                                                        "timeout")), 5);
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(hooks, "createContainer"), 0),
                                                          "path")), "/usr/bin/hook");
    assert_int_equal(json_array_size(json_object_get(hooks, "startContainer")), 1);
    assert_int_equal(json_array_size(json_object_get(hooks, "poststart")), 1);
    assert_int_equal(json_array_size(json_object_get(hooks, "poststop")), 1);
    json_t *gids = json_object_get(json_object_get(json_object_get(s, "process"), "user"), "additionalGids");
    assert_int_equal(json_integer_value(json_array_get(gids, 0)), 39);
    json_decref(s);

    /* the second directory overrides the first for the same device */
    snprintf(spec, sizeof spec,
             "{\"cdiVersion\":\"0.5.0\",\"kind\":\"nvidia.com/gpu\",\"devices\":[{\"name\":\"GPU-b\","
             "\"containerEdits\":{\"env\":[\"OVERRIDE=yes\"]}}]}");
    snprintf(path, sizeof path, "%s/override.json", cdi2);
    write_text(path, spec);
    assert_int_equal(build(pod, NULL, NULL, names + 1, 1, &s, err, sizeof err), 0);
    assert_string_equal(env_get(s, "OVERRIDE"), "yes");
    assert_null(device_at(s, "/dev/nvidia1"));
    json_decref(s);
    json_decref(pod);
}

/*--- Errors ---*/

static void error_messages(void **state)
{
    (void)state;
    clear_cdi();
    struct {
        const char *ctr;
        const char *want[3];
    } cases[] = {
        {"{\"name\":\"a\",\"command\":[\"x\"],\"resources\":{\"limits\":{\"memory\":\"1Gb\"}}}",
         {"spec.containers[0].resources.limits.memory", "\"1Gb\"", "not a quantity"}},
        {"{\"name\":\"a\",\"command\":[\"x\"],\"resources\":{\"requests\":{\"cpu\":\"-1\"}}}",
         {"spec.containers[0].resources.requests.cpu", "\"-1\"", "negative"}},
        {"{\"name\":\"a\",\"command\":[\"x\"],\"resources\":{\"limits\":{\"memory\":\"1500m\"}}}",
         {"limits.memory", "whole number of bytes", NULL}},
        {"{\"name\":\"a\"}", {"spec.containers[0]", "no command", NULL}},
        {"{\"name\":\"a\",\"command\":\"/bin/sh\"}", {"spec.containers[0].command", "list of strings", NULL}},
        {"{\"name\":\"a\",\"command\":[\"x\"],\"securityContext\":{\"runAsNonRoot\":true}}",
         {"runAsNonRoot", "uid 0", NULL}},
        {"{\"name\":\"a\",\"command\":[\"x\"],\"securityContext\":{\"privileged\":true}}",
         {"securityContext.privileged", "not supported", NULL}},
        {"{\"name\":\"a\",\"command\":[\"x\"],\"workingDir\":\"rel\"}", {"workingDir", "\"rel\"", "absolute"}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char text[512];
        snprintf(text, sizeof text, "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[%s]}}", cases[k].ctr);
        json_t *pod = pod_of(text), *s = (json_t *)1;
        char err[512];
        assert_int_equal(build(pod, NULL, NULL, NULL, 0, &s, err, sizeof err), GS_EINVAL);
        assert_null(s);
        for (int w = 0; w < 3 && cases[k].want[w]; w++)
            if (!strstr(err, cases[k].want[w])) fail_msg("case %zu: \"%s\" lacks \"%s\"", k, err, cases[k].want[w]);
        json_decref(pod);
    }

    json_t *pod = pod_of("{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"a\",\"command\":[\"x\"]}]}}");
    json_t *s;
    char err[512];
    /* a named image user */
    struct gs_image_config img = {.user = "nobody"};
    assert_int_equal(build(pod, &img, NULL, NULL, 0, &s, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "\"nobody\""));
    assert_non_null(strstr(err, "runAsUser"));
    /* unknown CDI device: names it and the directories */
    const char *unknown[] = {"nvidia.com/gpu=GPU-zzz"};
    assert_int_equal(build(pod, NULL, NULL, unknown, 1, &s, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "unknown CDI device \"nvidia.com/gpu=GPU-zzz\""));
    assert_non_null(strstr(err, cdi1));
    const char *unqualified[] = {"GPU-zzz"};
    assert_int_equal(build(pod, NULL, NULL, unqualified, 1, &s, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, "vendor/class=name"));
    /* a spec that does not parse, and one that does not validate: named by file */
    char path[400];
    snprintf(path, sizeof path, "%s/broken.json", cdi1);
    write_text(path, "{\"cdiVersion\": \"0.5.0\", \"kind\": ");
    assert_int_equal(build(pod, NULL, NULL, unknown, 1, &s, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "does not parse"));
    write_text(path, "{\"cdiVersion\":\"0.5.0\",\"kind\":\"nvidia.com/gpu\",\"devices\":[{\"name\":\"g\","
                     "\"containerEdits\":{\"hooks\":[{\"hookName\":\"prestop\",\"path\":\"/x\"}]}}]}");
    assert_int_equal(build(pod, NULL, NULL, unknown, 1, &s, err, sizeof err), GS_EINVAL);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "devices[0].containerEdits.hooks[0].hookName"));
    assert_non_null(strstr(err, "\"prestop\""));
    /* without CDI devices the directories are not read */
    assert_int_equal(build(pod, NULL, NULL, NULL, 0, &s, err, sizeof err), 0);
    json_decref(s);
    json_decref(pod);
    clear_cdi();
}

/* The spec checker's messages, field by field. */
static void cdi_spec_checks(void **state)
{
    (void)state;
    struct {
        const char *text;
        const char *want;
    } cases[] = {
        {"{\"kind\":\"a.com/b\",\"devices\":[]}", "f.json: cdiVersion: must be a non-empty string"},
        {"{\"cdiVersion\":\"0.5.0\",\"kind\":\"gpu\",\"devices\":[]}", "kind: \"gpu\" is not of the form vendor/class"},
        {"{\"cdiVersion\":\"0.5.0\",\"kind\":\"a.com/b\",\"devices\":[]}", "devices: must be a non-empty list"},
        {"{\"cdiVersion\":\"0.5.0\",\"kind\":\"a.com/b\",\"devices\":[{\"name\":\"-x\",\"containerEdits\":{}}]}",
         "devices[0].name: \"-x\" is not a device name"},
        {"{\"cdiVersion\":\"0.5.0\",\"kind\":\"a.com/b\",\"devices\":[{\"name\":\"x\"}]}",
         "devices[0].containerEdits: is required"},
        {"{\"cdiVersion\":\"0.5.0\",\"kind\":\"a.com/b\",\"devices\":[{\"name\":\"x\",\"containerEdits\":{}},"
         "{\"name\":\"x\",\"containerEdits\":{}}]}",
         "devices[1].name: \"x\" is defined twice"},
        {"{\"cdiVersion\":\"0.5.0\",\"kind\":\"a.com/b\",\"devices\":[{\"name\":\"x\",\"containerEdits\":"
         "{\"env\":[\"NOEQ\"]}}]}",
         "devices[0].containerEdits.env[0]: \"NOEQ\" is not of the form NAME=VALUE"},
        {"{\"cdiVersion\":\"0.5.0\",\"kind\":\"a.com/b\",\"devices\":[{\"name\":\"x\",\"containerEdits\":"
         "{\"deviceNodes\":[{\"path\":\"dev/x\"}]}}]}",
         "devices[0].containerEdits.deviceNodes[0].path: must be an absolute path, got \"dev/x\""},
        {"{\"cdiVersion\":\"0.5.0\",\"kind\":\"a.com/b\",\"devices\":[{\"name\":\"x\",\"containerEdits\":"
         "{\"deviceNodes\":[{\"path\":\"/dev/x\",\"type\":\"q\"}]}}]}",
         "deviceNodes[0].type: must be one of"},
        {"{\"cdiVersion\":\"0.5.0\",\"kind\":\"a.com/b\",\"devices\":[{\"name\":\"x\",\"containerEdits\":"
         "{\"deviceNodes\":[{\"path\":\"/dev/x\",\"major\":-1}]}}]}",
         "deviceNodes[0].major: must be an integer"},
        {"{\"cdiVersion\":\"0.5.0\",\"kind\":\"a.com/b\",\"devices\":[{\"name\":\"x\",\"containerEdits\":"
         "{\"deviceNodes\":[{\"path\":\"/dev/x\",\"permissions\":\"rwx\"}]}}]}",
         "deviceNodes[0].permissions: must be made of the letters r, w, m, got \"rwx\""},
        {"{\"cdiVersion\":\"0.5.0\",\"kind\":\"a.com/b\",\"devices\":[{\"name\":\"x\",\"containerEdits\":"
         "{\"mounts\":[{\"hostPath\":\"/a\"}]}}]}",
         "mounts[0].containerPath: must be a string"},
        {"{\"cdiVersion\":\"0.5.0\",\"kind\":\"a.com/b\",\"devices\":[{\"name\":\"x\",\"containerEdits\":{}}],"
         "\"containerEdits\":{\"hooks\":[{\"hookName\":\"poststop\",\"path\":\"/h\",\"timeout\":0}]}}",
         "containerEdits.hooks[0].timeout: must be a positive integer"},
        {"cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: x\n  containerEdits:\n    additionalGids: [x]\n",
         "devices[0].containerEdits.additionalGids[0]: must be an integer"},
        {"- 1\n- 2\n", "f.json: must be one object"},
        {"{", "CDI spec f.json does not parse: line"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        json_t *s = (json_t *)1;
        char err[512];
        assert_int_equal(gs_cdi_spec_parse(cases[k].text, strlen(cases[k].text), "f.json", &s, err, sizeof err),
                         GS_EINVAL);
        assert_null(s);
        if (!strstr(err, cases[k].want)) fail_msg("case %zu: \"%s\" lacks \"%s\"", k, err, cases[k].want);
    }
    const char *ok = "cdiVersion: 0.5.0\nkind: a.com/b\ndevices:\n- name: \"0\"\n  containerEdits: {}\n";
    json_t *s;
    char err[256];
    assert_int_equal(gs_cdi_spec_parse(ok, strlen(ok), "f.yaml", &s, err, sizeof err), 0);
    assert_string_equal(json_string_value(json_object_get(s, "kind")), "a.com/b");
    json_decref(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(process_from_pod),
        cmocka_unit_test(command_rules),
        cmocka_unit_test(resources_as_cgroup_limits),
        cmocka_unit_test(allocate_devices_and_env),
        cmocka_unit_test(cdi_edits_applied),
        cmocka_unit_test(error_messages),
        cmocka_unit_test(cdi_spec_checks),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
