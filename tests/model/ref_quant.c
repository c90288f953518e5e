/* The reference models' int8w rounding (ref_quant.h). */
#include "ref_quant.h"

#include <math.h>

void ref_round_int8_weights(double *w, long rows, long cols, int group) {
    const long width = group > 0 ? group : cols;
    for (long r = 0; r < rows; r++)
        for (long c0 = 0; c0 < cols; c0 += width) {
            double *v = w + r * cols + c0;
            const long n = cols - c0 < width ? cols - c0 : width;
            float absmax = 0.0f;
            for (long i = 0; i < n; i++)
                absmax = fmaxf(absmax, fabsf((float)v[i]));
            const float scale = absmax / 127.0f;
            for (long i = 0; i < n; i++)
                v[i] = scale > 0 ? (double)nearbyintf((float)v[i] / scale) * scale : 0.0;
        }
}

void ref_round_int8_activations(double *out, const double *x, long n, int block) {
    for (long c0 = 0; c0<n; c0 += block> 0 ? block : n) {
        const long len = block <= 0 ? n : n - c0 < block ? n - c0 : block;
        float amax = 0.0f;
        for (long i = 0; i < len; i++)
            amax = fmaxf(amax, fabsf((float)x[c0 + i]));
        const float d = amax / 127.0f, inv = d > 0.0f ? 1.0f / d : 0.0f;
        for (long i = 0; i < len; i++) {
            if (block <= 0) {
                out[c0 + i] = x[c0 + i];
                continue;
            }
            float q = nearbyintf((float)x[c0 + i] * inv);
            q = q > 127.0f ? 127.0f : q < -127.0f ? -127.0f : q;
            out[c0 + i] = (double)q * d;
        }
    }
}
