/* The rotary inverse-frequency table, plain and with Llama 3.1 scaling (see rope.h). */
#include "kernels/rope.h"

#include <math.h>
#include <stddef.h>

#include "base/check.h"

const char *rope_llama3_problem(const rope_llama3 *s) {
    // Written so a NaN fails every test: each comparison is the usable case.
    if (!(s->factor > 0.0)) return "rope_scaling.factor must be > 0";
    if (!(s->low_freq_factor > 0.0)) return "rope_scaling.low_freq_factor must be > 0";
    if (!(s->high_freq_factor > s->low_freq_factor))
        return "rope_scaling.high_freq_factor must be > rope_scaling.low_freq_factor";
    if (!(s->original_max_position_embeddings > 0))
        return "rope_scaling.original_max_position_embeddings must be > 0";
    return NULL;
}

void rope_inv_freq_fill(float *inv_freq, int head_dim, double theta, const rope_llama3 *scaling) {
    CHECK(head_dim > 0 && head_dim % 2 == 0, "rope: head_dim %d is not even and positive",
          head_dim);
    CHECK(theta > 0.0, "rope: theta %g is not positive", theta);
    const char *problem = scaling ? rope_llama3_problem(scaling) : NULL;
    CHECK(!problem, "rope: %s", problem);
    for (int i = 0; i < head_dim / 2; i++) {
        double f = pow(theta, -2.0 * i / head_dim);
        if (scaling) {
            const double orig = scaling->original_max_position_embeddings;
            const double low = scaling->low_freq_factor, high = scaling->high_freq_factor;
            const double wavelen = 2.0 * M_PI / f;
            if (wavelen > orig / low) {
                f /= scaling->factor; // long wavelengths: interpolated positions
            } else if (!(wavelen < orig / high)) {
                // the band between: a linear blend of the scaled and the plain frequency
                const double s = (orig / wavelen - low) / (high - low);
                f = (1.0 - s) * f / scaling->factor + s * f;
            } // short wavelengths (below orig / high) keep their frequency
        }
        inv_freq[i] = (float)f;
    }
}
