/* Opens libtripar_cuda.so on the first CUDA request and forwards the selection table's cuda row
 * to it (see cuda_module.h). Selected instead of kernels/cuda_none.c when the build has CUDA. */
#include "kernels/cuda_module.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/backend_devices.h"
#include "base/check.h"

#ifndef TRIPAR_CUDA_MODULE_BUILT
#error "CMake defines TRIPAR_CUDA_MODULE_BUILT, the module's path in the build tree"
#endif

static struct {
    pthread_once_t once;
    void *handle;
    char error[1536]; /* why the module is not open, said on every later request */
} module = {.once = PTHREAD_ONCE_INIT};

/* The folder of the running executable, with its trailing '/', or "" when /proc says nothing. */
static void executable_folder(char *out, size_t len) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    out[0] = '\0';
    if (n <= 0) return;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (!slash) return;
    slash[1] = '\0';
    snprintf(out, len, "%s", exe);
}

/* The first existing file of: $TRIPAR_CUDA_MODULE (alone, when set), the executable's folder,
 * the build tree it was built in (tests run from their own folders). */
static void module_open(void) {
    char candidates[3][PATH_MAX + 32];
    int n = 0;
    const char *forced = getenv("TRIPAR_CUDA_MODULE");
    if (forced && forced[0]) {
        snprintf(candidates[n++], sizeof candidates[0], "%s", forced);
    } else {
        char folder[PATH_MAX];
        executable_folder(folder, sizeof folder);
        if (folder[0])
            snprintf(candidates[n++], sizeof candidates[0], "%s%s", folder, TRIPAR_CUDA_MODULE_FILE);
        snprintf(candidates[n++], sizeof candidates[0], "%s", TRIPAR_CUDA_MODULE_BUILT);
    }
    if (forced && forced[0] && access(forced, F_OK) != 0) {
        snprintf(module.error, sizeof module.error,
                 "backend: cuda: TRIPAR_CUDA_MODULE=%s: no such file; unset it to use the %s "
                 "beside the executable", forced, TRIPAR_CUDA_MODULE_FILE);
        return;
    }
    for (int i = 0; i < n; i++) {
        if (access(candidates[i], F_OK) != 0) continue;
        // RTLD_LOCAL: cudart, cuBLAS and NCCL stay private to the module
        module.handle = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (!module.handle)
            snprintf(module.error, sizeof module.error, "backend: cuda: cannot load the CUDA module: %s",
                     dlerror());
        return;
    }
    int at = snprintf(module.error, sizeof module.error,
                      "backend: cuda: the CUDA module %s is not in", TRIPAR_CUDA_MODULE_FILE);
    for (int i = 0; i < n && at < (int)sizeof module.error; i++)
        at += snprintf(module.error + at, sizeof module.error - (size_t)at, "%s %s",
                       i ? "," : "", candidates[i]);
    if (at < (int)sizeof module.error)
        snprintf(module.error + at, sizeof module.error - (size_t)at,
                 "; set TRIPAR_CUDA_MODULE to its path, or use backend: cpu");
}

const void *cuda_module_symbol(const char *name) {
    pthread_once(&module.once, module_open);
    if (!module.handle) {
        error_set("%s", module.error);
        return NULL;
    }
    const void *symbol = dlsym(module.handle, name);
    if (!symbol) error_set("backend: cuda: the CUDA module has no %s: %s", name, dlerror());
    return symbol;
}

/* The backend table of the module, checked once against this build's layouts; NULL (with the
 * reason in error_set) when it cannot be used. */
static const cuda_backend_module *backend_module(void) {
    const cuda_backend_module *m = cuda_module_symbol("tripar_cuda_backend");
    if (!m) return NULL;
    if (m->abi != TRIPAR_CUDA_MODULE_ABI || m->backend_size != sizeof(backend) ||
        m->options_size != sizeof(backend_options) || m->ops_size != sizeof(backend_ops)) {
        error_set("backend: cuda: the CUDA module comes from another build of tripar (interface "
                  "%d, this executable's %d); use the %s built with this executable",
                  m->abi, TRIPAR_CUDA_MODULE_ABI, TRIPAR_CUDA_MODULE_FILE);
        return NULL;
    }
    return m;
}

int backend_cuda_init(backend *be, const backend_options *opt) {
    const cuda_backend_module *m = backend_module();
    return m ? m->init(be, opt) : -1;
}

int backend_cuda_device_count(void) {
    const cuda_backend_module *m = backend_module();
    return m ? m->device_count() : 0; // backend_cuda_init then says why there is none
}

void backend_cuda_pci_bus_id(int device, char *out, int len) {
    const cuda_backend_module *m = backend_module();
    if (m) {
        m->pci_bus_id(device, out, len);
    } else if (len > 0) {
        out[0] = '\0';
    }
}
