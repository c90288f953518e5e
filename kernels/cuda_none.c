/* Selected instead of kernels/cuda/ when the build has no CUDA toolkit: the selection table's
 * "cuda" row then fails with a clear message rather than at link time, and reports no devices. */
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
