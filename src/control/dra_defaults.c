/*
 * dra_defaults.c - the default DeviceClasses; see dra_defaults.h.
 */
#include "control/dra_defaults.h"

#include "control/apiserver.h" /* gs_apiserver_prepare_new */
#include "core/error.h"

#include <stdio.h>

static int ensure_class(struct gs_store *st, const char *name, const char *type)
{
    char key[256], cel[256];
    snprintf(key, sizeof key, "deviceclasses.resource.k8s.io/%s", name);
    snprintf(cel, sizeof cel, "device.driver == \"%s\" && device.attributes[\"%s\"].type == \"%s\"", GS_DRA_DRIVER,
             GS_DRA_DRIVER, type);
    json_t *obj = json_pack("{s:s, s:s, s:{s:s, s:{s:s}}, s:{s:[{s:{s:s}}]}}", "apiVersion", "resource.k8s.io/v1",
                            "kind", "DeviceClass", "metadata", "name", name, "labels", "app.kubernetes.io/managed-by",
                            "gpusched", "spec", "selectors", "cel", "expression", cel);
    int err = obj && !gs_apiserver_prepare_new(obj) ? gs_store_create(st, key, obj, NULL) : GS_ENOMEM;
    json_decref(obj);
    return err == GS_EEXIST ? 0 : err; /* present: left as it is */
}

int gs_dra_default_classes(struct gs_store *st)
{
    int err = ensure_class(st, GS_DRA_CLASS_GPU, "gpu");
    return err ? err : ensure_class(st, GS_DRA_CLASS_MIG, "mig");
}
