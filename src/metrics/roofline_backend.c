/* Same-run ceilings on a device backend (roofline.h): the model's prefill products through the
 * backend's own matmul (cuBLAS on cuda) and a read-bandwidth probe of device memory, so the
 * ceilings a GPU run is judged against are the GPU's, not the host CPU's. Backend-generic: it
 * uses only the backend table (alloc, matmul, argmax, synchronize). */
#include <stdint.h>

#include "base/stats.h"
#include "metrics/roofline.h"
#include "metrics/timing.h"

static double backend_gemm_pass(const backend *be, float *out, const float *in, weight_view w,
                                const long shapes[4][2], int layers, int rows) {
    be->ops->synchronize(be->ctx);
    double t0 = timer_host_seconds();
    for (int l = 0; l < layers; l++)
        for (int s = 0; s < 4; s++)
            be->ops->matmul(be->ctx, out, in, w, NULL, rows, (int)shapes[s][0], (int)shapes[s][1]);
    be->ops->synchronize(be->ctx);
    return timer_host_seconds() - t0;
}

double roofline_backend_gemm(roofline *r, const backend *be, const model_config *cfg, int batch,
                             int T) {
    enum { PASSES = 5 };
    long shapes[4][2], max_in, max_out;
    roofline_model_shapes(cfg, shapes, &max_in, &max_out);
    const long rows = (long)batch * T;
    /* zeroed buffers: a GEMM's speed does not depend on its values */
    float *in = be->ops->alloc(be->ctx, (size_t)rows * max_in * sizeof(float));
    float *wt = be->ops->alloc(be->ctx, (size_t)max_out * max_in * sizeof(float));
    float *out = be->ops->alloc(be->ctx, (size_t)rows * max_out * sizeof(float));
    const weight_view w = {.type = DTYPE_F32, .data = wt, .scale = NULL};
    const double flops = roofline_model_counts(r, cfg, batch, T);
    backend_gemm_pass(be, out, in, w, shapes, 1, (int)rows); /* library set-up, heuristics */
    double seconds[PASSES];
    for (int p = 0; p < PASSES; p++)
        seconds[p] = backend_gemm_pass(be, out, in, w, shapes, cfg->layers, (int)rows);
    stats_sort(seconds, PASSES);
    be->ops->release(be->ctx, out);
    be->ops->release(be->ctx, wt);
    be->ops->release(be->ctx, in);
    return flops / stats_percentile(seconds, PASSES, 50) / 1e9;
}

void roofline_backend_bandwidth(roofline *r, const backend *be, double weight_bytes) {
    /* as roofline_bandwidth: four times the weights, within [512 MiB, 2 GiB], as rows of 4096
     * floats so every row is one long coalesced read */
    enum { COLS = 4096 };
    size_t n = (size_t)(weight_bytes * 4 / sizeof(float));
    if (n < (512u << 20) / sizeof(float)) n = (512u << 20) / sizeof(float);
    if (n > ((size_t)2 << 30) / sizeof(float)) n = ((size_t)2 << 30) / sizeof(float);
    const int rows = (int)(n / COLS);
    n = (size_t)rows * COLS;
    float *buf = be->ops->alloc(be->ctx, n * sizeof(float));
    float *max_val = be->ops->alloc(be->ctx, (size_t)rows * sizeof(float));
    int32_t *max_idx = be->ops->alloc(be->ctx, (size_t)rows * sizeof(int32_t));
    double best = 1e30;
    for (int rep = 0; rep < 4; rep++) { /* the first pass is a warm-up */
        be->ops->synchronize(be->ctx);
        double t0 = timer_host_seconds();
        be->ops->argmax(be->ctx, max_val, max_idx, buf, rows, COLS);
        be->ops->synchronize(be->ctx);
        double t = timer_host_seconds() - t0;
        if (rep > 0 && t < best) best = t;
    }
    r->stream_gbs = (double)n * sizeof(float) / best / 1e9;
    r->weight_bytes = weight_bytes;
    be->ops->release(be->ctx, max_idx);
    be->ops->release(be->ctx, max_val);
    be->ops->release(be->ctx, buf);
}
