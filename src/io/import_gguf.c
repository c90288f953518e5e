/* The GGUF importer (`tripar import-gguf`, src/cli/import_gguf.c): a llama, qwen2, qwen2moe or
 * gpt2 GGUF file into a tripar checkpoint, as import-hf writes it. Serial; streams one GGUF
 * tensor (one expert of a stack of experts) at a time, dequantized to fp32, so memory stays
 * near the largest single matrix. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "io/checkpoint.h"
#include "io/gguf_dequant.h"
#include "io/h5util.h"
#include "io/import_gguf.h"
#include "io/import_gguf_internal.h"
#include "io/import_write.h"
#include "io/tokenizer.h"

static void dims_format(char *out, size_t len, int n, const uint64_t *dims) {
    size_t used = (size_t)snprintf(out, len, "[");
    for (int d = 0; d < n && used < len; d++)
        used += (size_t)snprintf(out + used, len - used, "%s%llu", d ? ", " : "",
                                 (unsigned long long)dims[d]);
    if (used < len) snprintf(out + used, len - used, "]");
}

/* The dims without their trailing 1s, as llama.cpp's loader compares them ([C, 1] is [C]). */
static int dims_rank(int n, const uint64_t *dims) {
    while (n > 1 && dims[n - 1] == 1)
        n--;
    return n;
}

/* Every planned tensor present with the shape the metadata implies; no block past
 * block_count. */
static int gguf_plan_validate(const gguf *g, const gguf_plan_tensor *list, int n,
                              const model_config *cfg, const char *arch) {
    for (int k = 0; k < n; k++) {
        const gguf_tensor *t = gguf_tensor_find(g, list[k].name);
        if (!t) {
            error_set("%s: tensor '%s' is missing", g->path, list[k].name);
            return STATUS_BAD_INPUT;
        }
        /* ggml order: dims[0] is the row length (the input dimension); a stack of experts
         * has them outermost */
        uint64_t want[3] = {(uint64_t)list[k].cols, (uint64_t)list[k].rows,
                            (uint64_t)list[k].experts};
        const int nd = list[k].experts > 0 ? 3 : list[k].ndims;
        int same = dims_rank(t->n_dims, t->dims) == dims_rank(nd, want);
        for (int d = 0; same && d < dims_rank(nd, want); d++)
            same = t->dims[d] == want[d];
        if (!same) {
            char have[128], w[128];
            dims_format(have, sizeof have, t->n_dims, t->dims);
            dims_format(w, sizeof w, nd, want);
            error_set("%s: tensor '%s' has dims %s, but the %s.* metadata implies %s", g->path,
                      t->name, have, arch, w);
            return STATUS_BAD_INPUT;
        }
    }
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        int layer = -1;
        if (sscanf(g->tensors[i].name, "blk.%d.", &layer) == 1 &&
            (layer < 0 || layer >= cfg->layers)) {
            error_set("%s: tensor '%s' is for block %d, but %s.block_count = %d", g->path,
                      g->tensors[i].name, layer, arch, cfg->layers);
            return STATUS_BAD_INPUT;
        }
    }
    return STATUS_OK;
}

/* The GGUF tensor p reads: the whole tensor, or its slice p->expert of a stack of experts as
 * a tensor of its own (*view), so one expert is read at a time. Plan-validated tensors only. */
static const gguf_tensor *plan_source(const gguf *g, const gguf_plan_tensor *p, gguf_tensor *view) {
    const gguf_tensor *t = gguf_tensor_find(g, p->name);
    if (p->experts == 0) return t;
    *view = *t;
    view->n_dims = 2;
    view->dims[2] = 1;
    view->elems = t->elems / (uint64_t)p->experts;
    view->bytes = t->bytes / (uint64_t)p->experts; /* whole rows, so whole blocks */
    view->offset = t->offset + (uint64_t)p->expert * view->bytes;
    return view;
}

/* tripar's dtype of a ggml block type it holds as stored (kernels/quant_blocks.h), else
 * DTYPE_F32. */
static dtype gguf_block_dtype(uint32_t type) {
    switch (type) {
    case GGML_TYPE_Q8_0: return DTYPE_Q8_0;
    case GGML_TYPE_Q4_0: return DTYPE_Q4_0;
    case GGML_TYPE_Q4_1: return DTYPE_Q4_1;
    case GGML_TYPE_Q4_K: return DTYPE_Q4_K;
    default: return DTYPE_F32;
    }
}

/* A matrix already in the storage's block format: its blocks, rows un-permuted whole (a row
 * is whole blocks), to the writer as they are. */
static int gguf_tensor_keep(gguf *g, const gguf_tensor *t, const gguf_plan_tensor *p,
                            const model_config *cfg, import_writer *w) {
    uint8_t *blocks = xmalloc((size_t)t->bytes);
    int rc = gguf_tensor_read_raw(g, t, blocks);
    if (rc == STATUS_OK && p->unpermute_heads > 0) {
        const long hd = model_head_dim(cfg);
        const size_t row = (size_t)t->bytes / (size_t)(p->ndims == 2 ? p->rows : 1);
        void *tmp = xmalloc((size_t)hd * row);
        gguf_rows_unpermute(blocks, tmp, p->unpermute_heads, hd, row);
        free(tmp);
    }
    if (rc == STATUS_OK)
        import_writer_put_blocks(w, p->dst, p->layer, p->row_offset, p->ndims, p->rows, p->cols,
                                 gguf_block_dtype(t->type), blocks);
    free(blocks);
    return rc;
}

/* Reads, dequantizes and un-permutes one tensor, and stores it through the writer; a matrix
 * whose blocks are the storage's own format is kept as stored (gguf_tensor_keep). */
static int gguf_tensor_convert(gguf *g, const gguf_plan_tensor *p, const model_config *cfg,
                               import_writer *w, int *kept) {
    gguf_tensor view;
    const gguf_tensor *t = plan_source(g, p, &view);
    if (gguf_block_dtype(t->type) == model_weight_dtype(w->st.precision) &&
        import_writer_takes_blocks(w, p->dst)) {
        ++*kept;
        return gguf_tensor_keep(g, t, p, cfg, w);
    }
    float *a = xmalloc(t->elems * sizeof(float));
    int rc = gguf_tensor_read_f32(g, t, a);
    for (uint64_t i = 0; rc == STATUS_OK && i < t->elems; i++)
        if (!isfinite(a[i])) {
            error_set("%s: tensor '%s' holds %s at element %llu; tripar refuses NaN and Inf "
                      "weights",
                      g->path, p->name, isnan(a[i]) ? "NaN" : "Inf", (unsigned long long)i);
            rc = STATUS_BAD_INPUT;
        }
    if (rc == STATUS_OK && p->unpermute_heads > 0) {
        const long hd = model_head_dim(cfg);
        float *tmp = xmalloc((size_t)(hd * p->cols) * sizeof(float));
        gguf_rows_unpermute(a, tmp, p->unpermute_heads, hd, (size_t)p->cols * sizeof(float));
        free(tmp);
    }
    if (rc == STATUS_OK)
        import_writer_put(w, p->dst, p->layer, p->row_offset, p->ndims, p->rows, p->cols, a);
    free(a);
    return rc;
}

static int gguf_weights_write(gguf *g, const gguf_plan_tensor *list, int n, const model_config *cfg,
                              hid_t file, const import_options *o, int *kept) {
    import_writer w;
    import_writer_open(&w, file, cfg, o);
    int rc = STATUS_OK;
    for (int k = 0; k < n && rc == STATUS_OK; k++)
        rc = gguf_tensor_convert(g, &list[k], cfg, &w, kept);
    import_writer_close(&w);
    return rc;
}

/* --precision keep: the block format holding most of the matrices' weights. A file whose
 * matrices hold none is refused, naming their types. A Q4_K_M file (Q4_K with some Q6_K, and
 * Q5_0 or Q8_0 here and there) keeps q4_k: the others are dequantised and quantised again in
 * q4_k, and the summary counts them (gguf_requantized_note). A format the model's widths do
 * not fit (q4_k's 256-column rows in a model 576 wide, whose Q4_K_M file holds only some
 * matrices in Q4_K) is passed over for the one holding most weights among those that fit. */
static int gguf_keep_choose(const gguf *g, const gguf_plan_tensor *list, int n,
                            import_gguf_summary *s, precision_kind *p) {
    static const precision_kind kinds[] = {PRECISION_Q8_0, PRECISION_Q4_0, PRECISION_Q4_1,
                                           PRECISION_Q4_K};
    enum { N_KINDS = sizeof kinds / sizeof kinds[0] };
    const checkpoint_storage q8 = checkpoint_storage_for(&s->cfg, PRECISION_Q8_0, 0);
    double weights[N_KINDS] = {0};
    char types[256] = "";
    for (int k = 0; k < n; k++) {
        if (checkpoint_tensor_dtype(&s->cfg, &q8, list[k].dst, NULL) != DTYPE_INT8) continue;
        gguf_tensor view;
        const gguf_tensor *t = plan_source(g, &list[k], &view);
        const char *name = gguf_qtype_get(t->type)->name;
        for (int i = 0; i < N_KINDS; i++)
            if (gguf_block_dtype(t->type) == model_weight_dtype(kinds[i]))
                weights[i] += (double)t->elems;
        if (!strstr(types, name))
            snprintf(types + strlen(types), sizeof types - strlen(types), "%s%s", types[0] ? ", " : "", name);
    }
    for (int i = 0; i < N_KINDS; i++)
        if (import_precision_fits(&s->cfg, kinds[i]) != STATUS_OK) weights[i] = 0, error_clear();
    int best = 0;
    for (int i = 1; i < N_KINDS; i++)
        if (weights[i] > weights[best]) best = i;
    if (weights[best] == 0) {
        error_set("%s: --precision keep keeps Q8_0, Q4_0, Q4_1 or Q4_K blocks, and the weight "
                  "matrices here are %s; allowed for this file: --precision %s",
                  g->path, types, checkpoint_precision_names());
        return STATUS_BAD_INPUT;
    }
    *p = kinds[best];
    return STATUS_OK;
}

/* The matrices a block format p cannot keep as stored (another GGUF type), and their types. */
static void gguf_requantized_note(const gguf *g, const gguf_plan_tensor *list, int n,
                                  import_gguf_summary *s, precision_kind p) {
    const checkpoint_storage q8 = checkpoint_storage_for(&s->cfg, PRECISION_Q8_0, 0);
    for (int k = 0; k < n; k++) {
        if (checkpoint_tensor_dtype(&s->cfg, &q8, list[k].dst, NULL) != DTYPE_INT8) continue;
        gguf_tensor view;
        const gguf_tensor *t = plan_source(g, &list[k], &view);
        if (gguf_block_dtype(t->type) == model_weight_dtype(p)) continue;
        const char *name = gguf_qtype_get(t->type)->name;
        s->n_requantized++;
        if (!strstr(s->requantized, name))
            snprintf(s->requantized + strlen(s->requantized),
                     sizeof s->requantized - strlen(s->requantized), "%s%s",
                     s->requantized[0] ? ", " : "", name);
    }
}

/* general.architecture picks the reader of the hyperparameters. */
static int gguf_arch_config(gguf *g, import_gguf_summary *s) {
    const char *a = NULL;
    if (gguf_get_string(g, "general.architecture", &a) != STATUS_OK) return STATUS_BAD_INPUT;
    snprintf(s->arch, sizeof s->arch, "%s", a);
    if (strcmp(a, "llama") == 0 || strcmp(a, "qwen2") == 0 || strcmp(a, "qwen2moe") == 0)
        return gguf_llama_config(g, a, &s->cfg);
    if (strcmp(a, "gpt2") == 0) return gguf_gpt2_config(g, &s->cfg);
    /* a mixture of experts tripar does not run (deepseek2, qwen3moe, ...) says so */
    char key[128], moe[160] = "";
    snprintf(key, sizeof key, "%s.expert_count", a);
    const gguf_kv *kv = gguf_kv_find(g, key);
    if (kv && gguf_type_is_int(kv->type) && !kv->is_array)
        snprintf(moe, sizeof moe, " (a mixture of experts, %s = %lld)", key,
                 (long long)gguf_kv_int(kv, 0, NULL));
    error_set("%s: key 'general.architecture' = \"%s\"%s is not supported; tripar imports llama "
              "(Mixtral's experts too), qwen2, qwen2moe and gpt2 from GGUF",
              g->path, a, moe);
    return STATUS_BAD_INPUT;
}

/* What /tokenizer keeps besides the vocabulary, read once from the metadata. */
typedef struct {
    int has_bos, has_eos, has_add_bos;
    int64_t bos, eos;
    int add_bos;
    const char *chat_template; /* NULL when the file has none; points into the gguf */
} gguf_tokenizer_attrs;

/* The tokenizer from the metadata, checked to load and to fit the vocabulary, and its
 * attributes; 1 when there is one (*json and *a set), 0 when there is none, -1 on a refusal. */
static int gguf_tokenizer_plan(const gguf *g, const model_config *cfg, char **json,
                               gguf_tokenizer_attrs *a) {
    int rc = gguf_tokenizer_json(g, cfg->vocab, json);
    if (rc <= 0) return rc;
    tokenizer *tok = NULL;
    char name[1100];
    snprintf(name, sizeof name, "%s: tokenizer.ggml.*", g->path);
    if (tokenizer_load_json(&tok, *json, name) != STATUS_OK) return -1;
    tokenizer_free(tok);
    memset(a, 0, sizeof *a);
    if ((a->has_bos = gguf_kv_find(g, "tokenizer.ggml.bos_token_id") != NULL) &&
        gguf_get_int(g, "tokenizer.ggml.bos_token_id", 0, cfg->vocab - 1, &a->bos))
        return -1;
    if ((a->has_eos = gguf_kv_find(g, "tokenizer.ggml.eos_token_id") != NULL) &&
        gguf_get_int(g, "tokenizer.ggml.eos_token_id", 0, cfg->vocab - 1, &a->eos))
        return -1;
    if ((a->has_add_bos = gguf_kv_find(g, "tokenizer.ggml.add_bos_token") != NULL) &&
        gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &a->add_bos))
        return -1;
    if (gguf_kv_find(g, "tokenizer.chat_template") &&
        gguf_get_string(g, "tokenizer.chat_template", &a->chat_template))
        return -1;
    return 1;
}

/* /tokenizer/json, and the special ids, add_bos_token and the chat template as attributes of
 * /tokenizer where the file has them. */
static void gguf_tokenizer_write(hid_t file, const char *json, const gguf_tokenizer_attrs *a) {
    checkpoint_write_tokenizer(file, NULL, NULL, json);
    hid_t group = h5_group_open_or_create(file, "tokenizer");
    if (a->has_bos) h5_attr_write_int(group, "bos_token_id", a->bos);
    if (a->has_eos) h5_attr_write_int(group, "eos_token_id", a->eos);
    if (a->has_add_bos) h5_attr_write_int(group, "add_bos_token", a->add_bos);
    if (a->chat_template) h5_attr_write_string(group, "chat_template", a->chat_template);
    H5Gclose(group);
}

int import_gguf_convert(const char *path, const char *out, const import_options *o,
                        import_gguf_summary *summary) {
    gguf g;
    int rc = gguf_open(&g, path);
    if (rc != STATUS_OK) return rc;
    import_gguf_summary s = {0};
    gguf_plan_tensor *list = NULL;
    int n = 0;
    rc = gguf_arch_config(&g, &s);
    if (rc == STATUS_OK) {
        list = xcalloc((size_t)gguf_plan_capacity(&s.cfg), sizeof *list);
        n = strcmp(s.arch, "gpt2") == 0 ? gguf_gpt2_tensor_list(&s.cfg, list)
                                        : gguf_llama_tensor_list(&g, &s.cfg, s.arch, list);
        rc = gguf_plan_validate(&g, list, n, &s.cfg, s.arch);
    }
    import_options opts = *o;
    if (rc == STATUS_OK && o->keep) rc = gguf_keep_choose(&g, list, n, &s, &opts.precision);
    if (rc == STATUS_OK) rc = import_precision_fits(&s.cfg, opts.precision);
    if (rc == STATUS_OK && precision_is_block(opts.precision))
        gguf_requantized_note(&g, list, n, &s, opts.precision);
    s.precision = opts.precision;
    char *tok_json = NULL;
    gguf_tokenizer_attrs tok_attrs;
    if (rc == STATUS_OK &&
        (s.has_tokenizer = gguf_tokenizer_plan(&g, &s.cfg, &tok_json, &tok_attrs)) < 0)
        rc = STATUS_BAD_INPUT;
    if (rc == STATUS_OK) rc = import_out_check(out, &path, 1);
    hid_t file = -1;
    if (rc == STATUS_OK) rc = import_checkpoint_create(out, &file);
    if (rc == STATUS_OK) {
        checkpoint_write_config_attrs(file, &s.cfg);
        rc = gguf_weights_write(&g, list, n, &s.cfg, file, &opts, &s.n_kept);
        if (rc == STATUS_OK && tok_json) gguf_tokenizer_write(file, tok_json, &tok_attrs);
        H5_CHECK(H5Fclose(file));
        if (rc != STATUS_OK) unlink(out); /* no half-written checkpoint is left behind */
    }
    if (rc == STATUS_OK) {
        for (int k = 0; k < n; k++) {
            if (list[k].expert > 0) continue; /* a stack of experts is one GGUF tensor */
            uint32_t type = gguf_tensor_find(&g, list[k].name)->type;
            s.n_tensors++;
            s.n_quantized +=
                type != GGML_TYPE_F32 && type != GGML_TYPE_F16 && type != GGML_TYPE_BF16;
        }
        *summary = s;
    }
    free(list);
    free(tok_json);
    gguf_close(&g);
    return rc;
}
