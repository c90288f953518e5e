/* Rotary position embeddings on the CPU (Hugging Face "rotate half"), for the attention op:
 * a table of the new positions' cos/sin, shared by every head of those positions, and the
 * turn of one head vector. */
#include <math.h>

#include "kernels/cpu/backend_cpu.h"

void cpu_rope_table(float *cs, const float *inv_freq, int hd, int pos0, int n) {
    const int half = hd / 2;
    for (int t = 0; t < n; t++)
        for (int i = 0; i < half; i++) {
            // The angle in double: at position 1e5 a float angle is off by ~4e-3 rad.
            double a = (double)(pos0 + t) * (double)inv_freq[i];
            cs[(long)t * hd + i] = (float)cos(a);
            cs[(long)t * hd + half + i] = (float)sin(a);
        }
}

void cpu_rope_rotate(float *dst, const float *src, const float *cs, int hd) {
    const int half = hd / 2;
    for (int i = 0; i < half; i++) {
        const float x1 = src[i], x2 = src[i + half], c = cs[i], s = cs[half + i];
        dst[i] = x1 * c - x2 * s;
        dst[i + half] = x2 * c + x1 * s;
    }
}
