/* The planner's GPU efficiency models (docs/planner.md "GPU efficiency models"): how long a
 * compute phase takes on a GPU when no calibration run says, from tile and wave quantization
 * of its GEMMs, flash-attention's and split-KV decode's reach, HBM's achievable share and the
 * kernels tripar's CUDA forward pass launches. Pure arithmetic over plan_gpu_efficiency. */
#pragma once
#include "analysis/plan_cost.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The fraction of peak a tensor-core GEMM with an (M, N) output and depth K reaches: M and N
 * rounded up to the tile (tile quantization), the tiles, times the K splits, spread over the
 * SMs in whole waves (wave quantization), times gemm_ceiling. When the tiles leave SMs idle the
 * best of 1 .. split_k_max splits of K (each at least PLAN_GPU_SPLIT_K_MIN deep) is taken, as
 * cuBLAS's heuristics split K for a small output grid. */
enum { PLAN_GPU_SPLIT_K_MIN = 256 };
double plan_gpu_gemm_efficiency(const plan_gpu_efficiency *e, double M, double N, double K);

/* Prefill flash-attention's fraction of peak: attn_ceiling x ctx / (ctx + attn_half_ctx) (short
 * sequences spend more of each block's time on its prologue and softmax), times the wave fill of
 * its blocks, one per (sequence, head, tile_m query rows). */
double plan_gpu_attention_efficiency(const plan_gpu_efficiency *e, int seqs, int heads, int n_new,
                                     int ctx);

/* Split-KV decode's share of the SMs streaming the cache: its blocks, (sequence, kv head,
 * split) with tripar's split rule (kernels/cuda/attention.cu: about two blocks per SM, chunks
 * of 64 to 4096 keys), over the SMs, at most 1. */
double plan_gpu_decode_fill(const plan_gpu_efficiency *e, int seqs, int kv_heads, int ctx);

/* The kernels tripar's CUDA backend launches for phase p of one stage in one step
 * (src/engine/forward.c with kernels/cuda: matmul's convert + cuBLAS + bias, or one GEMV at
 * most 8 rows; attention's KV append + kernel, or + split + combine in decode). */
int plan_gpu_phase_kernels(const model_config *cfg, const phase_step *s, phase p);

/* A phase's seconds on a GPU (c->gpu.given): its GEMMs' FLOPs at their efficiencies, its
 * attention at the models above, its bytes at hbm_fraction of k->bw, the larger of the two,
 * plus its kernels' launch cost (graph_launch in a decode step replayed from a CUDA graph).
 * pc is phase_cost_compute's for the same step. *memory_bound: whether the bytes bound it. */
double plan_gpu_phase_time(const plan_cluster *c, const plan_ceilings *k, const plan_model *m,
                           const phase_step *s, phase p, const phase_cost *pc, int *memory_bound);

#ifdef __cplusplus
}
#endif
