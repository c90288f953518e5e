/* Machine ceilings measured in the same run as a benchmark, so its throughput can be read
 * against what this machine's sgemm and memory system deliver right now (bench.roofline). */
#pragma once
#include "model.h"
#include "runfile.h"

typedef struct {
    double model_flops;       /* prefill FLOPs of the whole model for the batch */
    double sgemm_seconds;     /* the same products' shapes timed in bare cblas_sgemm */
    double sgemm_gflops;      /* their FLOP rate */
    double stream_gbs;        /* read bandwidth streaming a buffer larger than the caches */
    double weight_bytes;      /* bytes of weights one decode step reads (whole model) */
} roofline;

/* Measures on this rank with its BLAS threads; T = prompt length, batch = prompts. */
void roofline_measure(roofline *r, const model_config *cfg, int batch, int T, double weight_bytes);

/* Prints the comparison lines under the result table. */
void roofline_print(const roofline *r, const run_metrics *rm, int batch, int T, int new_tokens);
