/* The activation family in portable C (kernels/cpu/activation_kernels.h): the twins the vector
 * levels are tested against, bit for bit. Compiled for baseline x86-64, which has no FMA, so
 * the compiler fuses nothing the vector code leaves unfused. */
#include <math.h>

#include "kernels/cpu/activation_kernels.h"
#include "kernels/cpu/attention_isa.h"

static void bias_gelu_scalar(float *x, const float *bias, int n) {
    for (int i = 0; i < n; i++) {
        float v = x[i];
        if (bias) v += bias[i]; // not + 0.0f without one, which would turn -0 into +0
        const float u = v * fmaf(0.044715f, v * v, 1.0f) * -1.5957691216057308f;
        x[i] = v / (1.0f + exp_poly_scalar(u));
    }
}

static void swiglu_scalar(float *o, const float *g, const float *u, int n) {
    for (int i = 0; i < n; i++)
        o[i] = g[i] / (1.0f + exp_poly_scalar(-g[i])) * u[i];
}

const cpu_activation_kernels cpu_activation_scalar = {
    .bias_gelu = bias_gelu_scalar,
    .swiglu = swiglu_scalar,
};
