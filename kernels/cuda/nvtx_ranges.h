/* Phase ranges for Nsight Systems: every recorded phase is also an NVTX range in the domain
 * "tripar", named as in the run file (qkv_gemm, tp_wait, ...) with the layer as its integer
 * payload (-1 outside layers), so `nsys profile` shows the phases `tripar trace` shows.
 * Header-only NVTX3 (shipped with CUDA): with no profiler attached each call is a test of a
 * function pointer; docs/cuda.md ("NVTX ranges") gives the measured cost. */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* backend_ops.range_start / range_end of the cuda backend. Ranges are start/end ranges, not
 * push/pop: they need not nest (a TP all-reduce spans the compute it overlaps). name must
 * stay valid for the process (the phase names are static), since its registered handle is
 * cached by address. ctx is unused: the domain belongs to the process. */
uint64_t cuda_nvtx_range_start(void *ctx, const char *name, int payload);
void cuda_nvtx_range_end(void *ctx, uint64_t id);

#ifdef __cplusplus
}
#endif
