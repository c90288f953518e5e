/* Machine ceilings measured in the same run as a benchmark, so its throughput can be read
 * against what this machine's sgemm and memory system deliver right now (bench.roofline). */
#pragma once
#include "model/model.h"
#include "metrics/run_metrics.h"

typedef struct {
    double model_flops;         /* prefill FLOPs of the whole model for the batch */
    double sgemm_gflops_before; /* the model's products as bare cblas_sgemm, before the run */
    double sgemm_gflops_after;  /* the same, after it: the pair shows drift in machine speed */
    double stream_gbs;          /* read bandwidth streaming a buffer larger than the caches,
                                 * on the run's threads (the best of the probes) */
    double stream_gbs_one;      /* the same on one thread (cpu) */
    int stream_threads;         /* the run's threads per rank, as stream_gbs was measured */
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

/* Measures the read bandwidth (after the run) on huge pages, as the cpu backend places the
 * weights: the best of 3 passes of OpenBLAS's sasum and of tripar's own OpenMP read, on the
 * run's threads (stream_gbs) and on one (stream_gbs_one). */
void roofline_bandwidth(roofline *r, double weight_bytes, int threads);

/* The per-layer products (in, out) of the model: qkv, attention out, fc1 (Llama: gate|up), fc2,
 * and the widest input and output among them (what the probes' buffers must hold). */
void roofline_model_shapes(const model_config *cfg, long shapes[4][2], long *max_in, long *max_out);
/* Sets r->model_flops and the KV figures for a prefill of batch x T; returns the FLOPs of the
 * per-layer products alone (what the sgemm probes time). */
double roofline_model_counts(roofline *r, const model_config *cfg, int batch, int T);

/* The same two ceilings on a backend whose memory is not host memory (cuda): the model's
 * prefill products through the backend's own matmul on backend buffers (cuBLAS), the median of
 * 5 passes after a warm-up, in GFLOP/s; and the read bandwidth of backend memory, the best of
 * 3 row-wise argmax passes over a buffer larger than the caches (each element read once), set
 * in r->stream_gbs. Both synchronise the backend around the timed passes. */
double roofline_backend_gemm(roofline *r, const backend *be, const model_config *cfg, int batch,
                             int T);
void roofline_backend_bandwidth(roofline *r, const backend *be, double weight_bytes);

/* Whether the backend drives devices (cuda), so its ceilings must be measured through the
 * backend: the host's sgemm and stream say nothing about a GPU. */
static inline int roofline_backend_is_device(const backend *be) {
    return backend_drives_devices(be->ops->name);
}

/* The probes' names, as /metrics/roofline records them (docs/schema.md). */
#define ROOFLINE_PROBE_SGEMM "cblas_sgemm on the model's shapes"
/* at most 63 characters: the run file's reader keeps 64 (a static assert in run_roofline.c) */
#define ROOFLINE_PROBE_STREAM "best of sasum, OpenMP reads (also prefetching), huge pages"
#define ROOFLINE_PROBE_BACKEND_GEMM "backend matmul on the model's shapes"
#define ROOFLINE_PROBE_BACKEND_STREAM "backend argmax stream"

/* Prints the comparison lines under the result table. */
void roofline_print(const roofline *r, const run_metrics *rm, int batch, int T, int new_tokens);
