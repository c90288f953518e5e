/* Rotary position embeddings: the inverse-frequency table the attention op rotates q and k
 * with (backend.h, attention's rope_inv_freq), computed once at set-up, with the Llama 3.1
 * frequency scaling of Hugging Face's rope_type "llama3". Host code, no backend. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* config.json's rope_scaling for rope_type "llama3". */
typedef struct {
    double factor;                        // divides the low frequencies (8 for Llama 3.1)
    double low_freq_factor;               // 1 for Llama 3.1
    double high_freq_factor;              // 4 for Llama 3.1
    int original_max_position_embeddings; // 8192 for Llama 3.1
} rope_llama3;

/* NULL when s is usable, else what is wrong, naming the key ("rope_scaling.factor must be >
 * 0"), so a config reader can refuse it before any compute. Usable: factor > 0,
 * 0 < low_freq_factor < high_freq_factor, original_max_position_embeddings > 0 (the rule
 * divides by each of them and by high - low). */
const char *rope_llama3_problem(const rope_llama3 *s);

/* inv_freq (head_dim / 2) = theta^(-2i / head_dim), i = 0 .. head_dim / 2 - 1, then, when
 * scaling is not NULL, Hugging Face's _compute_llama3_parameters rule with
 * wavelen = 2 pi / inv_freq:
 *   wavelen < orig / high_freq_factor  kept;
 *   wavelen > orig / low_freq_factor   divided by factor;
 *   otherwise (both bounds included)   (1 - s) inv_freq / factor + s inv_freq with
 *                                      s = (orig / wavelen - low) / (high - low).
 * Computed in double and rounded once to float (Hugging Face works in float32, so its table
 * may differ by one float ulp). head_dim even and > 0, theta > 0, scaling usable (above):
 * checked, a violation is a programming error. */
void rope_inv_freq_fill(float *inv_freq, int head_dim, double theta, const rope_llama3 *scaling);

#ifdef __cplusplus
}
#endif
