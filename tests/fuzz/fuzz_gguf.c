/* libFuzzer target: the GGUF reader must never crash, read out of bounds, allocate without
 * bound or leak on any input (read through fmemopen, as a file would be), and every tensor it
 * accepts must read and dequantize within the input. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "io/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The getters an importer calls, on keys the corpus and dictionary hold. */
static void getters_try(const gguf *g) {
    const char *s;
    int64_t i;
    double f;
    int b;
    const gguf_kv *kv;
    (void)gguf_get_string(g, "general.architecture", &s);
    (void)gguf_get_int(g, "general.alignment", 1, 1 << 20, &i);
    (void)gguf_get_int(g, "llama.block_count", 0, INT32_MAX, &i);
    (void)gguf_get_float(g, "llama.rope.freq_base", &f);
    (void)gguf_get_bool(g, "x.flag", &b);
    if (gguf_get_array(g, "tokenizer.ggml.tokens", GGUF_TYPE_STRING, &kv) == STATUS_OK && kv->n)
        (void)gguf_kv_str(kv, kv->n - 1, NULL);
    for (uint64_t k = 0; k < g->n_kv; k++) {
        const gguf_kv *e = &g->kv[k];
        if (e->n == 0) continue;
        (void)gguf_kv_float(e, e->n - 1);
        (void)gguf_kv_int(e, e->n - 1, &b);
        if (e->type == GGUF_TYPE_STRING) (void)gguf_kv_str(e, e->n - 1, NULL);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size == 0) return 0; /* fmemopen refuses an empty buffer */
    FILE *fp = fmemopen((void *)data, size, "rb");
    if (!fp) abort();
    gguf g;
    if (gguf_open_stream(&g, fp, "fuzz") == STATUS_OK) {
        getters_try(&g);
        for (uint64_t i = 0; i < g.n_tensors; i++) {
            const gguf_tensor *t = &g.tensors[i];
            /* accepted tensors lie inside the input, so their floats are bounded by it (an
             * empty one reads nothing, wherever its offset points) */
            if (t->bytes && (t->bytes > size || g.data_start + t->offset + t->bytes > size))
                abort();
            float *out = malloc((size_t)(t->elems ? t->elems : 1) * sizeof *out);
            if (!out) abort();
            if (gguf_tensor_read_f32(&g, t, out) != STATUS_OK) abort();
            free(out);
        }
        gguf_close(&g);
    }
    fclose(fp);
    return 0;
}
