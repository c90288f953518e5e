/* The roofline's model counts for both families, against hand counts: the prefill FLOPs the
 * achieved GFLOP/s divides (Llama: grouped-query QKV of width (heads + 2 kv_heads) x head_dim,
 * SwiGLU's gate|up of 2 x mlp and down from mlp; GPT-2: 3 x embd and mlp) and the KV cache bytes
 * a decode step reads per position (kv_heads, not heads). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "metrics/roofline.h"

static model_config shape(arch_kind arch, int heads, int kv_heads) {
    model_config c;
    memset(&c, 0, sizeof c);
    c.arch = arch;
    c.layers = 3, c.heads = heads, c.kv_heads = kv_heads, c.embd = 64, c.mlp = 96, c.vocab = 100;
    c.ctx = 64;
    return c;
}

/* hand count: per layer 2 x rows x (in x out) for each product, the causal attention's
 * QK^T and PV, and the LM head on the last row of each prompt */
static double hand_flops(long qkv, long up, int layers, int batch, int T) {
    const double C = 64, M = 96, rows = (double)batch * T;
    double products = layers * 2.0 * rows * (C * qkv + C * C + C * up + M * C);
    double attention = layers * 2.0 * 2.0 * batch * (double)T * T / 2.0 * C;
    return products + attention + 2.0 * batch * C * 100;
}

static void test_llama_gqa(void **state) {
    (void)state;
    roofline r;
    memset(&r, 0, sizeof r);
    model_config c = shape(ARCH_LLAMA, 8, 2); /* head_dim 8 */
    double gflops = roofline_sgemm(&r, &c, 2, 5);
    assert_true(gflops > 0);
    assert_true(fabs(r.model_flops - hand_flops((8 + 2 * 2) * 8, 2 * 96, 3, 2, 5)) < 1e-6);
    /* 2 (k and v) x 3 layers x 2 kv heads x 8 x 4 bytes x batch 2 */
    assert_true(r.kv_bytes_per_pos == 2.0 * 3 * 2 * 8 * 4 * 2);
    assert_int_equal(r.kv_heads, 2);
    assert_int_equal(r.heads, 8);
    /* the same shape without grouping reads heads / kv_heads = 4x the cache */
    roofline full;
    memset(&full, 0, sizeof full);
    model_config mha = shape(ARCH_LLAMA, 8, 8);
    roofline_sgemm(&full, &mha, 2, 5);
    assert_true(full.kv_bytes_per_pos == 4 * r.kv_bytes_per_pos);
}

/* head_dim 24 apart from embd / heads = 8 (Mistral-Nemo's kind): q/k/v are (8 + 2 x 2) x 24
 * rows, o_proj reads A = 8 x 24 = 192 columns, QK^T and PV are 192 wide, and the cache holds
 * 2 kv heads x 24 per position. */
static void test_llama_head_dim(void **state) {
    (void)state;
    roofline r;
    memset(&r, 0, sizeof r);
    model_config c = shape(ARCH_LLAMA, 8, 2);
    c.head_dim = 24;
    const double C = 64, M = 96, A = 8 * 24, rows = 2.0 * 5;
    double products = 3 * 2.0 * rows * (C * (8 + 2 * 2) * 24 + A * C + C * 2 * M + M * C);
    double attention = 3 * 2.0 * 2.0 * 2 * 5.0 * 5 / 2.0 * A;
    roofline_sgemm(&r, &c, 2, 5);
    assert_true(fabs(r.model_flops - (products + attention + 2.0 * 2 * C * 100)) < 1e-6);
    assert_true(r.kv_bytes_per_pos == 2.0 * 3 * 2 * 24 * 4 * 2);
}

static void test_gpt2(void **state) {
    (void)state;
    roofline r;
    memset(&r, 0, sizeof r);
    model_config c = shape(ARCH_GPT2, 4, 4);
    roofline_sgemm(&r, &c, 1, 7);
    assert_true(fabs(r.model_flops - hand_flops(3 * 64, 96, 3, 1, 7)) < 1e-6);
    assert_true(r.kv_bytes_per_pos == 2.0 * 3 * 64 * 4);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_llama_gqa),
                                       cmocka_unit_test(test_llama_head_dim),
                                       cmocka_unit_test(test_gpt2)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
