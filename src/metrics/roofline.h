/* Machine ceilings measured in the same run as a benchmark, so its throughput can be read
 * against what this machine's sgemm and memory system deliver right now (bench.roofline). */
#pragma once
#include "model/model.h"
#include "metrics/run_metrics.h"

typedef struct {
    double model_flops;         /* prefill FLOPs of the whole model for the batch */
    double sgemm_gflops_before; /* the model's products as bare cblas_sgemm, before the run */
    double sgemm_gflops_after;  /* the same, after it: the pair shows drift in machine speed */
    double stream_gbs;          /* read bandwidth streaming a buffer larger than the caches */
    double weight_bytes;        /* bytes of weights one decode step reads (whole model) */
    double kv_bytes_per_pos;    /* fp32 KV cache bytes per cached position, batch included:
                                 * 2 x layers x kv_heads x head_dim x 4 x batch (GQA: kv_heads) */
    int heads, kv_heads;        /* for the GQA saving printed beside it */
} roofline;

/* Times the model's prefill products (batch prompts of T tokens) as bare sgemm calls on this
 * rank's BLAS threads: the median of 5 passes, as the run's TTFT is a median too. Returns
 * GFLOP/s and sets r->model_flops and the KV cache's size per position. Called before and after
 * the run. */
double roofline_sgemm(roofline *r, const model_config *cfg, int batch, int T);

/* Measures the read bandwidth (after the run). */
void roofline_bandwidth(roofline *r, double weight_bytes);

/* Prints the comparison lines under the result table. */
void roofline_print(const roofline *r, const run_metrics *rm, int batch, int T, int new_tokens);
