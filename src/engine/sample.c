/* Greedy and top-k/temperature sampling on host logits (see sample.h). */
#include "engine/sample.h"

#include <math.h>
#include <string.h>

#include "model/model.h"

double sample_uniform(uint64_t seed, long sequence, long position) {
    uint64_t h = synthetic_hash64(synthetic_hash64(seed ^ 0x73616d706c65ull) + (uint64_t)sequence);
    h = synthetic_hash64(h + (uint64_t)position);
    return (double)(h >> 11) * (1.0 / 9007199254740992.0); /* 53 bits */
}

int32_t sample_argmax(const float *logits, int vocab) {
    int32_t best = 0;
    for (int i = 1; i < vocab; i++)
        if (isnan(logits[i]) ? !isnan(logits[best]) : logits[i] > logits[best]) best = i;
    return best;
}

/* k-th largest value by quickselect on a scratch copy (Hoare partition, deterministic pivot). */
static float kth_largest(float *v, int n, int k) {
    int lo = 0, hi = n - 1, target = k - 1;
    while (lo < hi) {
        float pivot = v[lo + (hi - lo) / 2];
        int i = lo, j = hi;
        while (i <= j) {
            while (v[i] > pivot)
                i++;
            while (v[j] < pivot)
                j--;
            if (i <= j) {
                float t = v[i];
                v[i] = v[j];
                v[j] = t;
                i++;
                j--;
            }
        }
        if (target <= j)
            hi = j;
        else if (target >= i)
            lo = i;
        else
            break;
    }
    return v[target];
}

int32_t sample_top_k(const float *logits, int vocab, float temperature, int top_k, double u,
                     float *scratch) {
    if (sample_is_greedy(temperature)) return sample_argmax(logits, vocab);
    float threshold = -INFINITY;
    if (top_k > 0 && top_k < vocab) {
        memcpy(scratch, logits, (size_t)vocab * sizeof(float));
        threshold = kth_largest(scratch, vocab, top_k);
    }
    float max = logits[sample_argmax(logits, vocab)];
    double total = 0.0;
    for (int i = 0; i < vocab; i++)
        if (logits[i] >= threshold) total += exp((double)(logits[i] - max) / temperature);
    double target = u * total, cumulative = 0.0;
    int32_t last = 0;
    for (int i = 0; i < vocab; i++) {
        if (logits[i] < threshold) continue;
        cumulative += exp((double)(logits[i] - max) / temperature);
        last = i;
        if (cumulative > target) return i;
    }
    return last;
}
