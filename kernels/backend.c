/* Backend selection by name: one row per backend kind, so the runner and the device mapping
 * ask the table instead of testing the kind. Both rows are always compiled in; a build
 * without CUDA gets kernels/cuda_none.c, whose init says so. */
#include <stdio.h>
#include <string.h>

#include "kernels/backend.h"
#include "kernels/backend_devices.h"
#include "base/check.h"

typedef struct {
    const char *name;
    int (*init)(backend *be, const backend_options *opt);
    int (*device_count)(void);                          /* NULL: the backend has no devices */
    void (*pci_bus_id)(int device, char *out, int len); /* NULL: the backend has no devices */
} backend_entry;

static const backend_entry backends[] = {
    {"cpu", backend_cpu_init, NULL, NULL},
    {"cuda", backend_cuda_init, backend_cuda_device_count, backend_cuda_pci_bus_id},
};
enum { N_BACKENDS = sizeof backends / sizeof backends[0] };

static const backend_entry *backend_lookup(const char *name) {
    for (int i = 0; name && i < N_BACKENDS; i++)
        if (!strcmp(backends[i].name, name)) return &backends[i];
    return NULL;
}

int backend_init(backend *be, const char *name, const backend_options *opt) {
    be->ops = NULL;
    be->ctx = NULL;
    const backend_entry *entry = backend_lookup(name);
    if (entry) return entry->init(be, opt);
    char known[128] = "";
    for (int i = 0; i < N_BACKENDS; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "",
                 backends[i].name);
    error_set("backend: unknown kind '%s' (known: %s)", name ? name : "(none)", known);
    return -1;
}

void backend_free(backend *be) {
    if (!be || !be->ops) return;
    be->ops->free(be->ctx);
    be->ops = NULL;
    be->ctx = NULL;
}

int backend_drives_devices(const char *name) {
    const backend_entry *entry = backend_lookup(name);
    return entry && entry->device_count;
}

int backend_device_count(const char *name) {
    const backend_entry *entry = backend_lookup(name);
    return entry && entry->device_count ? entry->device_count() : 0;
}

void backend_pci_bus_id(const char *name, int device, char *out, int len) {
    if (len <= 0) return;
    out[0] = '\0';
    const backend_entry *entry = backend_lookup(name);
    if (entry && entry->pci_bus_id) entry->pci_bus_id(device, out, len);
}
