/* CUDA-only extras of the compute backend that the ops table does not cover: the compute
 * stream (for NCCL) and CUDA-graph capture of decode steps. Plain C; no-op versions live in
 * kernels/cuda_none.c so callers build without CUDA. See docs/cuda.md. */
#pragma once
#include <stddef.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The backend's cudaStream_t as void * (pass it to comm_nccl_init); NULL without CUDA. */
void *backend_cuda_stream(const backend *be);

/* Starts capturing everything queued on the compute stream into a graph. Returns 0, or
 * non-zero with error_message() set. Between begin and end no op may synchronise, copy to the
 * host, grow a workspace (run the same shapes once uncaptured first) or use MPI comm. */
int backend_cuda_graph_begin(backend *be);

/* Ends the capture, instantiates it into *graph_exec and launches it once. If *graph_exec
 * already holds an executable graph of the same topology it is updated in place (cheap: e.g. the
 * next decode step, whose position argument differs); otherwise it is replaced. Start with
 * *graph_exec = NULL. Returns 0, or non-zero with error_message() set. */
int backend_cuda_graph_end_and_launch(backend *be, void **graph_exec);

/* Replays an executable graph on the compute stream with the arguments it was captured with. */
void backend_cuda_graph_launch(backend *be, void *graph_exec);

/* Frees an executable graph (NULL is fine). */
void backend_cuda_graph_destroy(backend *be, void *graph_exec);

/* Device-wide free and total bytes (cudaMemGetInfo), 0 and 0 without CUDA. Counts memory of
 * every process and library (NCCL, cuBLAS), unlike peak_memory which counts tripar's allocs. */
void backend_cuda_memory_info(const backend *be, size_t *free_bytes, size_t *total_bytes);

/* Page-locked host memory (cudaHostAlloc), zeroed, for staging device buffers through MPI:
 * copies from it run at full PCIe/NVLink speed. Plain zeroed host memory without CUDA. Set-up
 * paths only; free with backend_cuda_host_free (NULL is fine). */
void *backend_cuda_host_alloc(size_t bytes);
void backend_cuda_host_free(void *ptr);

#ifdef __cplusplus
}
#endif
