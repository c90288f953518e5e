/* The attention family in portable C (kernels/cpu/attention_kernels.h). */
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

const cpu_attention_kernels cpu_attention_scalar = {
    .exp_shift_sum = exp_shift_sum_scalar,
};
