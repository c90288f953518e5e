/* Selected instead of kernels/cuda/ when the build has no CUDA toolkit: backend: cuda then
 * fails with a clear message rather than at link time. */
#include "backend.h"
#include "check.h"

int backend_cuda_init(backend *be, const backend_options *opt) {
    (void)be;
    (void)opt;
    error_set("backend: cuda: this tripar was built without CUDA (no nvcc or NCCL at configure "
              "time); rebuild on a machine with the CUDA toolkit or use backend: cpu");
    return -1;
}

void backend_cuda_free(backend *be) { (void)be; }
int backend_cuda_device_count(void) { return 0; }
void backend_cuda_pci_bus_id(int device, char *out, int len) {
    (void)device;
    if (len > 0) out[0] = '\0';
}
