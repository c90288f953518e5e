/* The int8w rounding of the reference models (ref_model.c, ref_llama.c): weights per row or
 * per group, and activation rows in blocks, written from the definitions in docs/kernels.md
 * ("int8"), not from the kernels. */
#pragma once

/* w (rows, cols) replaced by its int8 rounding: per row (group 0) or per group of `group`
 * columns, scale = max|w| / 127 in float, value = rint(w / scale) * scale. */
void ref_round_int8_weights(double *w, long rows, long cols, int group);

/* out (n) = x (n) as the cpu quantises activations: blocks of `block` values (0: unchanged),
 * d = max|x| / 127 in float, q = rint(x * (1 / d)) to nearest even, out = q * d. The values
 * are taken as the float the engine would hold. out may be x. */
void ref_round_int8_activations(double *out, const double *x, long n, int block);
