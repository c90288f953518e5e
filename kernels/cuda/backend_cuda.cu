/* The CUDA compute backend: device selection, the compute stream, cuBLAS, memory, timing marks
 * and the ops table, with the optional entries the cpu lacks (stream, CUDA graphs, pinned host
 * memory, device memory info). The op kernels live one family per file beside this one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/cuda/cuda_common.cuh"
#include "kernels/backend_devices.h"
#include "kernels/cuda_module.h"
#include "kernels/cuda/nvtx_ranges.h"

/* cuBLAS gets a fixed workspace so it never allocates inside a captured graph. */
#define CUBLAS_WORKSPACE_BYTES ((size_t)32 << 20)

static double host_monotonic_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* --- memory ops --------------------------------------------------------------------------- */

static void *cuda_alloc(void *vctx, size_t bytes) {
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    void *ptr = cuda_device_alloc(ctx, bytes);
    CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, ctx->stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    if (ctx->n_allocs == ctx->cap_allocs) {
        int cap = ctx->cap_allocs ? 2 * ctx->cap_allocs : 64;
        cuda_allocation *grown =
            (cuda_allocation *)realloc(ctx->allocs, sizeof(cuda_allocation) * (size_t)cap);
        CHECK(grown != NULL, "backend: cuda: out of host memory tracking allocations");
        ctx->allocs = grown;
        ctx->cap_allocs = cap;
    }
    ctx->allocs[ctx->n_allocs].ptr = ptr;
    ctx->allocs[ctx->n_allocs].bytes = bytes ? bytes : 1;
    ctx->n_allocs++;
    return ptr;
}

static void cuda_release(void *vctx, void *ptr) {
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (!ptr) return;
    for (int i = 0; i < ctx->n_allocs; i++) {
        if (ctx->allocs[i].ptr != ptr) continue;
        ctx->bytes_now -= ctx->allocs[i].bytes;
        ctx->allocs[i] = ctx->allocs[--ctx->n_allocs];
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        CUDA_CHECK(cudaFree(ptr));
        return;
    }
    tripar_dief(__FILE__, __LINE__, "backend: cuda: release of %p, which alloc did not return",
                ptr);
}

/* Default copy kind: UVA tells host from device, so a device-to-device copy also works. */
static void cuda_copy_to_device(void *vctx, void *dst, const void *src, size_t bytes) {
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (bytes == 0) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx->stream));
    // src is pageable host memory the caller may free or reuse on return
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
}

static void cuda_copy_to_host(void *vctx, void *dst, const void *src, size_t bytes) {
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (bytes == 0) return;
    CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, ctx->stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
}

static void cuda_memset_zero(void *vctx, void *dst, size_t bytes) {
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    if (bytes) CUDA_CHECK(cudaMemsetAsync(dst, 0, bytes, ctx->stream));
}

static void cuda_synchronize(void *vctx) {
    CUDA_CHECK(cudaStreamSynchronize(((cuda_ctx *)vctx)->stream));
}

static size_t cuda_peak_memory(void *vctx) { return ((cuda_ctx *)vctx)->bytes_peak; }

/* --- ops: thin adapters from the table to the launchers ----------------------------------- */

static void cuda_embed(void *vctx, float *out, const int32_t *tokens, const float *wte,
                       const float *wpe, int rows, int C, int n_new, int pos0, int vocab_begin,
                       int vocab_end) {
    embed_forward(out, tokens, wte, wpe, rows, C, n_new, pos0, vocab_begin, vocab_end,
                  ((cuda_ctx *)vctx)->stream);
}

static void cuda_layernorm(void *vctx, float *out, const float *in, const float *gamma,
                           const float *beta, int rows, int C, float eps) {
    layernorm_forward(out, in, gamma, beta, rows, C, eps, ((cuda_ctx *)vctx)->stream);
}

static void cuda_residual_layernorm(void *vctx, float *residual, float *norm_out,
                                    const float *delta, const float *gamma, const float *beta,
                                    int rows, int C, float eps) {
    residual_layernorm_forward(residual, norm_out, delta, gamma, beta, rows, C, eps,
                               ((cuda_ctx *)vctx)->stream);
}

static void cuda_matmul(void *vctx, float *out, const float *in, weight_view w,
                        const float *bias, int rows, int in_dim, int out_dim) {
    matmul_forward((cuda_ctx *)vctx, out, in, w, bias, rows, in_dim, out_dim);
}

static void cuda_bias_gelu(void *vctx, float *inout, const float *bias, int rows, int cols) {
    bias_gelu_forward(inout, bias, rows, cols, ((cuda_ctx *)vctx)->stream);
}

static void cuda_rmsnorm(void *vctx, float *out, const float *in, const float *w, int rows, int C,
                         float eps) {
    rmsnorm_forward(out, in, w, rows, C, eps, ((cuda_ctx *)vctx)->stream);
}

static void cuda_residual_rmsnorm(void *vctx, float *residual, float *norm_out,
                                  const float *delta, const float *w, int rows, int C,
                                  float eps) {
    residual_rmsnorm_forward(residual, norm_out, delta, w, rows, C, eps,
                             ((cuda_ctx *)vctx)->stream);
}

static void cuda_swiglu(void *vctx, float *out, const float *gate_up, int rows, int cols) {
    swiglu_forward(out, gate_up, rows, cols, ((cuda_ctx *)vctx)->stream);
}

static void cuda_gather_rows(void *vctx, float *out, const float *in, const int32_t *idx, int n,
                             int C) {
    gather_rows_forward(out, in, idx, n, C, ((cuda_ctx *)vctx)->stream);
}

static void cuda_scatter_add_rows(void *vctx, float *out, const float *in, const int32_t *idx,
                                  const float *weight, int n, int C) {
    scatter_add_rows_forward(out, in, idx, weight, n, C, ((cuda_ctx *)vctx)->stream);
}

static void cuda_attention(void *vctx, float *out, const float *qkv, kv_view cache,
                           const float *rope_inv_freq, int seq0, int batch, int n_new, int pos0) {
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    // Sized for a decode of this batch at any position below max_ctx, and reserved at every
    // call: the prefill (never captured) grows it, so decode steps and graph captures do not.
    size_t ws_floats = attention_workspace_floats(batch, cache.heads, cache.kv_heads,
                                                  cache.head_dim, cache.max_ctx, ctx->sm_count);
    float *ws = (float *)cuda_workspace_reserve(ctx, &ctx->attn_split, sizeof(float) * ws_floats);
    kv_append_forward(cache, qkv, rope_inv_freq, seq0, batch, n_new, pos0, ctx->stream);
    if (n_new == 1)
        attention_decode_forward(out, ws, ws_floats, qkv, cache, rope_inv_freq, seq0, batch, pos0,
                                 ctx->sm_count, ctx->stream);
    else
        attention_forward(out, qkv, cache, rope_inv_freq, seq0, batch, n_new, pos0, ctx->stream);
}

static void cuda_argmax(void *vctx, float *max_val, int32_t *max_idx, const float *logits,
                        int rows, int cols) {
    argmax_forward(max_val, max_idx, logits, rows, cols, ((cuda_ctx *)vctx)->stream);
}

/* --- timing marks -------------------------------------------------------------------------- */

static void cuda_mark(void *vctx, int slot) {
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    CHECK(slot >= 0 && slot < ctx->max_marks, "backend: cuda: mark slot %d outside [0, %d)", slot,
          ctx->max_marks);
    // inside a capture a plain record only orders streams; External makes it a graph node
    if (ctx->capturing)
        CUDA_CHECK(cudaEventRecordWithFlags(ctx->marks[slot], ctx->stream, cudaEventRecordExternal));
    else
        CUDA_CHECK(cudaEventRecord(ctx->marks[slot], ctx->stream));
}

static double cuda_mark_seconds(void *vctx, int slot) {
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    CHECK(slot >= 0 && slot < ctx->max_marks, "backend: cuda: mark slot %d outside [0, %d)", slot,
          ctx->max_marks);
    float ms = 0.0f;
    CUDA_CHECK(cudaEventSynchronize(ctx->marks[slot]));
    CUDA_CHECK(cudaEventElapsedTime(&ms, ctx->anchor, ctx->marks[slot]));
    return ctx->anchor_host + 1e-3 * (double)ms;
}

static void cuda_free(void *vctx) {
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    CUDA_CHECK(cudaSetDevice(ctx->device));
    CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
    for (int i = 0; i < ctx->n_allocs; i++) CUDA_CHECK(cudaFree(ctx->allocs[i].ptr));
    free(ctx->allocs);
    if (ctx->convert.ptr) CUDA_CHECK(cudaFree(ctx->convert.ptr));
    if (ctx->attn_split.ptr) CUDA_CHECK(cudaFree(ctx->attn_split.ptr));
    for (int i = 0; i < ctx->max_marks; i++) CUDA_CHECK(cudaEventDestroy(ctx->marks[i]));
    free(ctx->marks);
    CUDA_CHECK(cudaEventDestroy(ctx->anchor));
    CUBLAS_CHECK(cublasDestroy(ctx->cublas));
    CUDA_CHECK(cudaFree(ctx->cublas_ws));
    CUDA_CHECK(cudaStreamDestroy(ctx->stream));
    free(ctx);
}

/* --- optional entries: stream, CUDA graphs, pinned host memory, device memory ------------- */

static void *cuda_stream(void *vctx) { return (void *)((cuda_ctx *)vctx)->stream; }

static int cuda_graph_begin(void *vctx) {
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    // ThreadLocal: other threads (an MPI progress thread) may still call unsafe CUDA APIs
    cudaError_t rc = cudaStreamBeginCapture(ctx->stream, cudaStreamCaptureModeThreadLocal);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        error_set("backend: cuda: cudaStreamBeginCapture: %s", cudaGetErrorString(rc));
        return -1;
    }
    ctx->capturing = 1;
    return 0;
}

static int cuda_graph_end_and_launch(void *vctx, void **graph_exec) {
    cuda_ctx *ctx = (cuda_ctx *)vctx;
    cudaGraph_t graph = NULL;
    ctx->capturing = 0;
    cudaError_t rc = cudaStreamEndCapture(ctx->stream, &graph);
    if (rc != cudaSuccess) {
        (void)cudaGetLastError();
        error_set("backend: cuda: cudaStreamEndCapture: %s (an op synchronised or used another "
                  "stream without joining it back)",
                  cudaGetErrorString(rc));
        return -1;
    }
    cudaGraphExec_t exec = (cudaGraphExec_t)*graph_exec;
    if (exec) {
        // same topology, new kernel arguments (e.g. the next decode position): cheap update
        cudaGraphExecUpdateResultInfo info;
        if (cudaGraphExecUpdate(exec, graph, &info) != cudaSuccess) {
            (void)cudaGetLastError();
            CUDA_CHECK(cudaGraphExecDestroy(exec));
            exec = NULL;
        }
    }
    if (!exec) {
        rc = cudaGraphInstantiate(&exec, graph, 0);
        if (rc != cudaSuccess) {
            (void)cudaGetLastError();
            cudaGraphDestroy(graph);
            *graph_exec = NULL;
            error_set("backend: cuda: cudaGraphInstantiate: %s", cudaGetErrorString(rc));
            return -1;
        }
    }
    CUDA_CHECK(cudaGraphDestroy(graph));
    *graph_exec = (void *)exec;
    CUDA_CHECK(cudaGraphLaunch(exec, ctx->stream));
    return 0;
}

static void cuda_graph_launch(void *vctx, void *graph_exec) {
    CHECK(graph_exec != NULL, "backend: cuda: graph launch without a graph");
    CUDA_CHECK(cudaGraphLaunch((cudaGraphExec_t)graph_exec, ((cuda_ctx *)vctx)->stream));
}

static void cuda_graph_destroy(void *vctx, void *graph_exec) {
    if (!graph_exec) return;
    CUDA_CHECK(cudaStreamSynchronize(((cuda_ctx *)vctx)->stream));
    CUDA_CHECK(cudaGraphExecDestroy((cudaGraphExec_t)graph_exec));
}

static void *cuda_host_alloc(void *vctx, size_t bytes) {
    void *ptr = NULL;
    // portable: pinned for every device of the process, not only the current one
    CUDA_CHECK(cudaHostAlloc(&ptr, bytes ? bytes : 1, cudaHostAllocPortable));
    memset(ptr, 0, bytes);
    return ptr;
}

/* vctx may be NULL (backend.h): portable pinned memory belongs to the process. */
static void cuda_host_free(void *vctx, void *ptr) {
    if (ptr) CUDA_CHECK(cudaFreeHost(ptr));
}

static void cuda_memory_info(void *vctx, size_t *free_bytes, size_t *total_bytes) {
    *free_bytes = 0;
    *total_bytes = 0;
    if (cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) (void)cudaGetLastError();
}

/* Positional (designated initialisers are C++20): the order is struct backend_ops's. */
static const backend_ops cuda_ops = {
    "cuda",
    cuda_free,
    cuda_alloc,
    cuda_release,
    cuda_copy_to_device,
    cuda_copy_to_host,
    cuda_memset_zero,
    cuda_synchronize,
    cuda_peak_memory,
    cuda_embed,
    cuda_layernorm,
    cuda_residual_layernorm,
    cuda_matmul,
    cuda_bias_gelu,
    cuda_rmsnorm,
    cuda_residual_rmsnorm,
    cuda_swiglu,
    cuda_gather_rows,
    cuda_scatter_add_rows,
    cuda_attention,
    cuda_argmax,
    cuda_mark,
    cuda_mark_seconds,
    cuda_stream,
    cuda_graph_begin,
    cuda_graph_end_and_launch,
    cuda_graph_launch,
    cuda_graph_destroy,
    cuda_host_alloc,
    cuda_host_free,
    cuda_memory_info,
    cuda_nvtx_range_start,
    cuda_nvtx_range_end,
    NULL, // kernel_path: cuBLAS and the kernels here have no run-time choice to report
};

/* --- device queries (the selection table's) and init -------------------------------------- */

extern "C" int backend_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError(); // no driver or no device: not an error on a CPU machine
        return 0;
    }
    return n;
}

extern "C" void backend_cuda_pci_bus_id(int device, char *out, int len) {
    if (len <= 0) return;
    out[0] = '\0';
    if (cudaDeviceGetPCIBusId(out, len, device) != cudaSuccess) {
        (void)cudaGetLastError();
        out[0] = '\0';
    }
}

extern "C" int backend_cuda_init(backend *be, const backend_options *opt) {
    int n = 0;
    cudaError_t rc = cudaGetDeviceCount(&n);
    if (rc != cudaSuccess || n == 0) {
        (void)cudaGetLastError();
        error_set("backend: cuda: no CUDA device is visible (cudaGetDeviceCount: %s)",
                  rc != cudaSuccess ? cudaGetErrorString(rc) : "0 devices");
        return -1;
    }
    if (opt->device < 0 || opt->device >= n) {
        error_set("backend: cuda: device %d requested but %d CUDA device%s visible (check "
                  "CUDA_VISIBLE_DEVICES)",
                  opt->device, n, n == 1 ? " is" : "s are");
        return -1;
    }
    CUDA_CHECK(cudaSetDevice(opt->device));

    cuda_ctx *ctx = (cuda_ctx *)xcalloc(1, sizeof(cuda_ctx));
    ctx->device = opt->device;
    ctx->allow_tf32 = opt->allow_tf32;
    CUDA_CHECK(cudaDeviceGetAttribute(&ctx->sm_count, cudaDevAttrMultiProcessorCount, ctx->device));
    CUDA_CHECK(cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking));
    CUBLAS_CHECK(cublasCreate(&ctx->cublas));
    CUBLAS_CHECK(cublasSetStream(ctx->cublas, ctx->stream));
    ctx->cublas_ws_bytes = CUBLAS_WORKSPACE_BYTES;
    ctx->cublas_ws = cuda_device_alloc(ctx, ctx->cublas_ws_bytes);
    CUBLAS_CHECK(cublasSetWorkspace(ctx->cublas, ctx->cublas_ws, ctx->cublas_ws_bytes));
    // default math: TF32 is chosen per call through the compute type (matmul.cu), so fp32
    // products stay exact fp32 unless allow_tf32 was asked for
    CUBLAS_CHECK(cublasSetMathMode(ctx->cublas, CUBLAS_DEFAULT_MATH));

    ctx->max_marks = opt->max_marks > 0 ? opt->max_marks : 1;
    ctx->marks = (cudaEvent_t *)xcalloc((unsigned long)ctx->max_marks, sizeof(cudaEvent_t));
    for (int i = 0; i < ctx->max_marks; i++) CUDA_CHECK(cudaEventCreate(&ctx->marks[i]));
    CUDA_CHECK(cudaEventCreate(&ctx->anchor));
    // the anchor pairs stream time with host time: record, wait for it, read the host clock
    CUDA_CHECK(cudaEventRecord(ctx->anchor, ctx->stream));
    CUDA_CHECK(cudaEventSynchronize(ctx->anchor));
    ctx->anchor_host = host_monotonic_seconds();

    be->ops = &cuda_ops;
    be->ctx = ctx;
    return 0;
}


/* The module's entry for the core's selection table (kernels/cuda_module.c); everything else in
 * the module is hidden. */
extern "C" TRIPAR_MODULE_EXPORT const cuda_backend_module tripar_cuda_backend = {
    TRIPAR_CUDA_MODULE_ABI, sizeof(backend), sizeof(backend_options), sizeof(backend_ops),
    backend_cuda_init, backend_cuda_device_count, backend_cuda_pci_bus_id,
};
