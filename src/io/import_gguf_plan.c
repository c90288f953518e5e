/* What the GGUF importer's architectures (import_gguf_llama.c, import_gguf_gpt2.c,
 * import_gguf_moe.c) share: {arch}.* keys read with their defaults, the vocabulary from
 * token_embd, and appending a tensor to the plan. */
#include <stdarg.h>
#include <stdio.h>

#include "base/check.h"
#include "io/import_gguf_internal.h"

int gguf_meta_int(const gguf *g, const char *arch, const char *suffix, int dflt, int *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (dflt > 0 && !gguf_kv_find(g, key)) {
        *out = dflt;
        return STATUS_OK;
    }
    int64_t v = 0;
    if (gguf_get_int(g, key, 1, 1 << 30, &v) != STATUS_OK) return STATUS_BAD_INPUT;
    *out = (int)v;
    return STATUS_OK;
}

int gguf_meta_float(const gguf *g, const char *arch, const char *suffix, double dflt, double *out) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    if (dflt > 0 && !gguf_kv_find(g, key)) {
        *out = dflt;
        return STATUS_OK;
    }
    if (gguf_get_float(g, key, out) != STATUS_OK) return STATUS_BAD_INPUT;
    if (!(*out > 0)) {
        error_set("%s: key '%s' = %g must be positive", g->path, key, *out);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

int gguf_vocab_rows(const gguf *g, int *vocab) {
    const gguf_tensor *emb = gguf_tensor_find(g, "token_embd.weight");
    if (!emb || emb->n_dims != 2 || emb->dims[1] < 1 || emb->dims[1] > (1u << 30)) {
        error_set("%s: tensor 'token_embd.weight' is %s", g->path,
                  emb ? "not a matrix of at most 2^30 rows" : "missing");
        return STATUS_BAD_INPUT;
    }
    *vocab = (int)emb->dims[1];
    return STATUS_OK;
}

void gguf_plan_add(gguf_plan_tensor *out, int *n, const char *dst, int layer, long row_offset,
                   int ndims, long rows, long cols, int unpermute_heads, const char *fmt, ...) {
    gguf_plan_tensor *t = &out[(*n)++];
    *t = (gguf_plan_tensor){.dst = dst,
                            .layer = layer,
                            .ndims = ndims,
                            .rows = rows,
                            .cols = cols,
                            .row_offset = row_offset,
                            .unpermute_heads = unpermute_heads};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->name, sizeof t->name, fmt, ap);
    va_end(ap);
}
