/* The attention family in portable C (kernels/cpu/attention_kernels.h): the twins the vector
 * levels are tested against. */
#include <math.h>

#include "kernels/cpu/attention_isa.h"
#include "kernels/cpu/attention_kernels.h"

float exp_shift_sum_scalar(float *y, const float *x, float shift, int n) {
    float sum = 0.0f;
    for (int i = 0; i < n; i++) {
        y[i] = expf(x[i] - shift);
        sum += y[i];
    }
    return sum;
}

void dot_keys_scalar(float *s, const float *q, const float *k, int n, int hd, float scale) {
    for (int j = 0; j < n; j++) {
        float dot = 0.0f;
        for (int d = 0; d < hd; d++)
            dot += q[d] * k[(long)j * hd + d];
        s[j] = dot * scale;
    }
}

void weigh_values_scalar(float *o, const float *w, const float *v, int n, int hd) {
    for (int j = 0; j < n; j++)
        for (int d = 0; d < hd; d++)
            o[d] += w[j] * v[(long)j * hd + d];
}

const cpu_attention_kernels cpu_attention_scalar = {
    .exp_shift_sum = exp_shift_sum_scalar,
    .dot_keys = dot_keys_scalar,
    .weigh_values = weigh_values_scalar,
};
