/* Page-locked host memory for staging device buffers through MPI (kernels/cuda_extra.h). A C
 * file of the CUDA build: kernels/cuda_none.c holds the plain-memory twin. */
#include <cuda_runtime_api.h>
#include <string.h>

#include "base/check.h"
#include "kernels/cuda_extra.h"

#define CUDA_CHECK(call)                                                                     \
    TRIPAR_CHECK_GEN(call, cudaError_t, rc_ == cudaSuccess, cudaGetErrorString(rc_))

void *backend_cuda_host_alloc(size_t bytes) {
    void *ptr = NULL;
    // portable: pinned for every device of the process, not only the current one
    CUDA_CHECK(cudaHostAlloc(&ptr, bytes ? bytes : 1, cudaHostAllocPortable));
    memset(ptr, 0, bytes);
    return ptr;
}

void backend_cuda_host_free(void *ptr) {
    if (ptr) CUDA_CHECK(cudaFreeHost(ptr));
}
