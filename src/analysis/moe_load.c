/* The recorded expert load and its imbalance (analysis/moe_load.h). */
#include "analysis/moe_load.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/h5util.h"

static int attr_int(hid_t g, const char *name, int *out) {
    long long v;
    if (h5_attr_read_long(g, name, &v) != 0) return -1;
    *out = (int)v;
    return 0;
}

int moe_load_read(hid_t file, moe_load *out) {
    memset(out, 0, sizeof *out);
    if (!h5_exists(file, "moe/expert_load")) return 0;
    int ndims = 0;
    hsize_t dims[8];
    out->load = h5_dataset_read_all(file, "moe/expert_load", H5T_NATIVE_INT32, &ndims, dims, NULL);
    hid_t g = H5Gopen2(file, "moe", H5P_DEFAULT);
    int bad = !out->load || ndims != 4 || g < 0, experts = 0;
    if (!bad) {
        out->replicas = (int)dims[0], out->steps = (int)dims[1];
        out->layers = (int)dims[2], out->experts = (int)dims[3];
        bad = attr_int(g, "experts", &experts) || experts != out->experts ||
              attr_int(g, "top_k", &out->top_k) || attr_int(g, "shared_expert", &out->shared) ||
              attr_int(g, "ep", &out->ep) || attr_int(g, "iteration", &out->iteration) ||
              attr_int(g, "steps_run", &out->steps_run) || out->ep < 1 || out->experts % out->ep ||
              out->top_k < 1 || out->steps_run > out->steps;
    }
    if (g >= 0) H5Gclose(g);
    if (bad) {
        moe_load_free(out);
        error_set("/moe: not a (replicas, steps, layers, experts) load with its attributes "
                  "(docs/schema.md \"/moe\")");
        return -1;
    }
    return 1;
}

void moe_load_free(moe_load *l) {
    free(l->load);
    memset(l, 0, sizeof *l);
}

const char *moe_period_name(moe_period p) { return p == MOE_PREFILL ? "prefill" : "decode"; }

static const int32_t *load_row(const moe_load *l, int replica, int step, int layer) {
    return l->load + (((size_t)replica * l->steps + step) * l->layers + layer) * l->experts;
}

/* max/mean of n values summing to sum (> 0) */
static double max_over_mean(const int32_t *v, int n, int stride, int width, long long sum) {
    long long most = 0;
    for (int b = 0; b < n; b++) {
        long long s = 0;
        for (int x = 0; x < width; x++)
            s += v[b * stride + x];
        most = s > most ? s : most;
    }
    return (double)most * n / (double)sum;
}

void moe_imbalance_compute(const moe_load *l, moe_period p, int layer, moe_imbalance *out) {
    memset(out, 0, sizeof *out);
    out->ratio_mean = out->ratio_max = out->block_ratio_mean = out->hottest_share = NAN;
    out->hottest_layer = out->hottest_expert = out->hottest_block = -1;
    const int E = l->experts, ep = l->ep > 0 ? l->ep : 1;
    const int s0 = p == MOE_PREFILL ? 0 : 1, s1 = p == MOE_PREFILL ? 1 : l->steps_run;
    const int l0 = layer < 0 ? 0 : layer, l1 = layer < 0 ? l->layers : layer + 1;
    long long *total = xcalloc((size_t)l->layers * E + 1, sizeof(long long));
    double sum_ratio = 0, sum_block = 0, worst = 0;
    for (int r = 0; r < l->replicas; r++)
        for (int s = s0; s < s1 && s < l->steps; s++)
            for (int y = l0; y < l1; y++) {
                const int32_t *v = load_row(l, r, s, y);
                long long sum = 0;
                for (int x = 0; x < E; x++) {
                    sum += v[x];
                    total[(size_t)y * E + x] += v[x];
                }
                if (sum <= 0) continue;
                const double ratio = max_over_mean(v, E, 1, 1, sum);
                sum_ratio += ratio;
                sum_block += max_over_mean(v, ep, E / ep, E / ep, sum);
                worst = ratio > worst ? ratio : worst;
                out->rows += sum;
                out->samples++;
            }
    if (out->samples > 0) {
        out->ratio_mean = sum_ratio / out->samples;
        out->block_ratio_mean = sum_block / out->samples;
        out->ratio_max = worst;
        long long best = -1;
        for (int y = l0; y < l1; y++)
            for (int x = 0; x < E; x++)
                if (total[(size_t)y * E + x] > best)
                    best = total[(size_t)y * E + x], out->hottest_layer = y,
                    out->hottest_expert = x;
        long long in_layer = 0;
        for (int x = 0; x < E; x++)
            in_layer += total[(size_t)out->hottest_layer * E + x];
        out->hottest_share = in_layer > 0 ? (double)best / (double)in_layer : NAN;
        out->hottest_block = out->hottest_expert / (E / ep);
    }
    free(total);
}

int moe_worst_layer(const moe_load *l, moe_period p) {
    int worst = -1;
    double most = -1;
    for (int y = 0; y < l->layers; y++) {
        moe_imbalance m;
        moe_imbalance_compute(l, p, y, &m);
        if (m.samples > 0 && m.ratio_mean > most) most = m.ratio_mean, worst = y;
    }
    return worst;
}

void moe_load_counts_add(const moe_load *l, double *counts) {
    for (int r = 0; r < l->replicas; r++)
        for (int s = 0; s < l->steps_run; s++)
            for (int layer = 0; layer < l->layers; layer++) {
                const int32_t *row = load_row(l, r, s, layer);
                for (int e = 0; e < l->experts; e++)
                    counts[(size_t)layer * l->experts + e] += row[e];
            }
}

void moe_load_shares(const double *counts, int layers, int experts, float *share) {
    for (int layer = 0; layer < layers; layer++) {
        const double *c = counts + (size_t)layer * experts;
        double sum = 0;
        for (int e = 0; e < experts; e++) sum += c[e];
        for (int e = 0; e < experts; e++)
            share[(size_t)layer * experts + e] = sum > 0 ? (float)(c[e] / sum) : 1.0f / experts;
    }
}

int moe_load_counts_read(hid_t file, int layers, int experts, double *counts) {
    moe_load l;
    const int got = moe_load_read(file, &l);
    if (got <= 0) return got;
    const int same = l.layers == layers && l.experts == experts;
    if (same) moe_load_counts_add(&l, counts);
    moe_load_free(&l);
    return same;
}
