/* Device memory that the backend and the op kernels share: every cudaMalloc of tripar goes
 * through cuda_device_alloc (which counts the bytes for the peak and names the device when it
 * fails), and the grow-once workspaces the kernels reserve. Apart from backend_cuda.cu so that
 * the kernel files and the backend call into it, never into each other. */
#include "kernels/cuda/cuda_common.cuh"

static void bytes_add(cuda_ctx *ctx, size_t bytes) {
    ctx->bytes_now += bytes;
    if (ctx->bytes_now > ctx->bytes_peak) ctx->bytes_peak = ctx->bytes_now;
}

void *cuda_device_alloc(cuda_ctx *ctx, size_t bytes) {
    void *ptr = NULL;
    if (bytes == 0) bytes = 1;
    cudaError_t rc = cudaMalloc(&ptr, bytes);
    if (rc != cudaSuccess) {
        size_t free_b = 0, total_b = 0;
        (void)cudaGetLastError(); // clear the sticky-free error so MemGetInfo reports
        cudaMemGetInfo(&free_b, &total_b);
        tripar_dief(__FILE__, __LINE__,
                    "backend: cuda: cudaMalloc of %zu bytes failed on device %d (%s); %zu of "
                    "%zu bytes free, %zu allocated by tripar",
                    bytes, ctx->device, cudaGetErrorString(rc), free_b, total_b, ctx->bytes_now);
    }
    bytes_add(ctx, bytes);
    return ptr;
}

void *cuda_workspace_reserve(cuda_ctx *ctx, cuda_workspace *ws, size_t bytes) {
    if (bytes <= ws->bytes) return ws->ptr;
    CHECK(!ctx->capturing,
          "backend: cuda: a workspace must grow to %zu bytes inside a CUDA-graph capture; run "
          "the same shapes once before capturing",
          bytes);
    if (ws->ptr) {
        // the old buffer may still be read by queued kernels
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        CUDA_CHECK(cudaFree(ws->ptr));
        ctx->bytes_now -= ws->bytes;
    }
    // round up so a slowly growing shape does not reallocate at every call
    size_t rounded = (bytes + ((size_t)1 << 20) - 1) & ~(((size_t)1 << 20) - 1);
    ws->ptr = cuda_device_alloc(ctx, rounded);
    ws->bytes = rounded;
    return ws->ptr;
}
