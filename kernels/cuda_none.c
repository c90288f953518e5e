/* Selected instead of kernels/cuda/ when the build has no CUDA toolkit: the selection table's
 * "cuda" row then fails with a clear message rather than at link time, and reports no devices. */
#include <stdlib.h>

#include "kernels/backend.h"
#include "kernels/backend_devices.h"
#include "base/check.h"

int backend_cuda_init(backend *be, const backend_options *opt) {
    (void)be;
    (void)opt;
    error_set("backend: cuda: this tripar was built without CUDA (no nvcc or NCCL at configure "
              "time); rebuild on a machine with the CUDA toolkit or use backend: cpu");
    return -1;
}

int backend_cuda_device_count(void) { return 0; }
void backend_cuda_pci_bus_id(int device, char *out, int len) {
    (void)device;
    if (len > 0) out[0] = '\0';
}

/* No-op versions of kernels/cuda_extra.h: without CUDA there is no stream and no graph. */
#include "kernels/cuda_extra.h"

void *backend_cuda_stream(const backend *be) {
    (void)be;
    return NULL;
}

int backend_cuda_graph_begin(backend *be) {
    (void)be;
    error_set("backend: cuda: CUDA graphs need a build with CUDA");
    return -1;
}

int backend_cuda_graph_end_and_launch(backend *be, void **graph_exec) {
    (void)be;
    *graph_exec = NULL;
    error_set("backend: cuda: CUDA graphs need a build with CUDA");
    return -1;
}

void backend_cuda_graph_launch(backend *be, void *graph_exec) {
    (void)be;
    (void)graph_exec;
}

void backend_cuda_graph_destroy(backend *be, void *graph_exec) {
    (void)be;
    (void)graph_exec;
}

void backend_cuda_memory_info(const backend *be, size_t *free_bytes, size_t *total_bytes) {
    (void)be;
    *free_bytes = 0;
    *total_bytes = 0;
}

/* Without CUDA there is nothing to pin: ordinary zeroed host memory. */
void *backend_cuda_host_alloc(size_t bytes) { return xcalloc(1, bytes ? bytes : 1); }
void backend_cuda_host_free(void *ptr) { free(ptr); }
