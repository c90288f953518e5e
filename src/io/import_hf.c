/* The Hugging Face importer (`tripar import-hf`, src/cli/import_hf.c): converts a GPT-2 or
 * Llama-family directory (config.json plus model.safetensors or a sharded index) into a tripar
 * checkpoint. Serial; streams one HF tensor (one layer's slice, or a row block of it) at a time,
 * so memory stays near the largest single tensor. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/check.h"
#include "base/path.h"
#include "io/checkpoint.h"
#include "io/h5util.h"
#include "io/import_hf.h"
#include "io/import_hf_internal.h"
#include "io/import_write.h"
#include "io/safetensors.h"
#include "io/tokenizer.h"

#define IMPORT_MAX_SHARDS 256

typedef struct {
    char path[JOB_PATH_MAX];
    const uint8_t *map;
    size_t len;
    safetensors_file st;
} shard;

typedef struct {
    shard shards[IMPORT_MAX_SHARDS];
    int n_shards;
} hf_model;

static int path_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

/* Reads an integer key of config.json; returns -1 (message set) when absent or not positive. */
static int config_int(json_t *root, const char *path, const char *key, const char *alt, int *out) {
    json_t *v = json_object_get(root, key);
    if (!v && alt) v = json_object_get(root, alt);
    if (!json_is_integer(v) || json_integer_value(v) <= 0 || json_integer_value(v) > (1 << 30)) {
        error_set("%s: '%s' must be a positive integer", path, key);
        return -1;
    }
    *out = (int)json_integer_value(v);
    return 0;
}

static int config_load(const char *dir, model_config *cfg) {
    char path[JOB_PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char why[PATH_WHY_MAX];
    if (path_check_input(path, why, sizeof why) != 0) {
        error_set("%s %s", path, why);
        return STATUS_BAD_INPUT;
    }
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) { /* jansson's line is -1 when the error has no place in the text */
        if (jerr.line > 0)
            error_set("%s:%d: cannot read config.json: %s", path, jerr.line, jerr.text);
        else
            error_set("%s: cannot read config.json: %s", path, jerr.text);
        return STATUS_BAD_INPUT;
    }
    int rc = STATUS_BAD_INPUT;
    memset(cfg, 0, sizeof *cfg);
    if (!json_is_object(root)) {
        error_set("%s: not a JSON object", path);
        goto done;
    }
    /* architectures[0] picks the reader; none (older GPT-2 configs) means GPT-2 */
    json_t *archs = json_object_get(root, "architectures");
    json_t *arch = json_is_array(archs) ? json_array_get(archs, 0) : NULL;
    if (archs && !json_is_string(arch)) {
        error_set("%s: 'architectures' must be a list of strings", path);
        goto done;
    }
    if (arch && hf_llama_architecture(json_string_value(arch))) {
        rc = hf_llama_config(root, path, json_string_value(arch), cfg);
        goto done;
    }
    if (arch && strcmp(json_string_value(arch), "GPT2LMHeadModel") != 0) {
        error_set("%s: architectures = [\"%s\"] is not supported; tripar imports "
                  "GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, "
                  "MixtralForCausalLM and Qwen2MoeForCausalLM",
                  path, json_string_value(arch));
        goto done;
    }
    if (config_int(root, path, "n_layer", NULL, &cfg->layers) ||
        config_int(root, path, "n_head", NULL, &cfg->heads) ||
        config_int(root, path, "n_embd", NULL, &cfg->embd) ||
        config_int(root, path, "vocab_size", NULL, &cfg->vocab) ||
        config_int(root, path, "n_positions", "n_ctx", &cfg->ctx))
        goto done;
    json_t *inner = json_object_get(root, "n_inner");
    if (!inner || json_is_null(inner)) {
        cfg->mlp = 4 * cfg->embd;
    } else if (config_int(root, path, "n_inner", NULL, &cfg->mlp)) {
        goto done;
    }
    json_t *eps = json_object_get(root, "layer_norm_epsilon");
    cfg->ln_eps = 1e-5f;
    if (eps) {
        if (!json_is_number(eps) || !(json_number_value(eps) > 0 && json_number_value(eps) < 1)) {
            error_set("%s: 'layer_norm_epsilon' must be a number in (0, 1)", path);
            goto done;
        }
        cfg->ln_eps = (float)json_number_value(eps);
    }
    cfg->norm = NORM_PRE; /* GPT-2 */
    if (cfg->embd % cfg->heads != 0) {
        error_set("%s: n_head = %d does not divide n_embd = %d", path, cfg->heads, cfg->embd);
        goto done;
    }
    json_t *act = json_object_get(root, "activation_function");
    if (json_is_string(act) && strcmp(json_string_value(act), "gelu_new") != 0 &&
        strcmp(json_string_value(act), "gelu_pytorch_tanh") != 0)
        fprintf(stderr,
                "import-hf: warning: activation_function '%s'; tripar uses the tanh "
                "GELU (gelu_new)\n",
                json_string_value(act));
    rc = STATUS_OK;
done:
    json_decref(root);
    return rc;
}

static int shard_open(shard *s, const char *path) {
    snprintf(s->path, sizeof s->path, "%s", path);
    char why[PATH_WHY_MAX];
    if (path_check_input(path, why, sizeof why) != 0) { /* a FIFO would block open() */
        error_set("%s %s", path, why);
        return STATUS_BAD_INPUT;
    }
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        error_set("%s: cannot open: %s", path, strerror(errno));
        return STATUS_BAD_INPUT;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        error_set("%s: cannot stat: %s", path, strerror(errno));
        return STATUS_BAD_INPUT;
    }
    s->len = (size_t)st.st_size;
    s->map = NULL;
    if (s->len > 0) {
        void *map = mmap(NULL, s->len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (map == MAP_FAILED) {
            close(fd);
            error_set("%s: cannot mmap: %s", path, strerror(errno));
            return STATUS_BAD_INPUT;
        }
        s->map = map;
    }
    close(fd);
    char err[512];
    if (safetensors_parse(&s->st, s->map, s->len, err, sizeof err) != 0) {
        if (s->map) munmap((void *)s->map, s->len);
        s->map = NULL;
        error_set("%s: %s", path, err);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

static void hf_model_free(hf_model *hf) {
    for (int i = 0; i < hf->n_shards; i++) {
        safetensors_free(&hf->shards[i].st);
        if (hf->shards[i].map) munmap((void *)hf->shards[i].map, hf->shards[i].len);
    }
    hf->n_shards = 0;
}

/* Opens model.safetensors, or every shard named by model.safetensors.index.json. */
static int hf_model_open(hf_model *hf, const char *dir) {
    memset(hf, 0, sizeof *hf);
    char path[JOB_PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    if (path_exists(path)) {
        hf->n_shards = 1;
        return shard_open(&hf->shards[0], path);
    }
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (!path_exists(path)) {
        error_set("%s: no model.safetensors or model.safetensors.index.json", dir);
        return STATUS_BAD_INPUT;
    }
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        error_set("%s:%d: %s", path, jerr.line, jerr.text);
        return STATUS_BAD_INPUT;
    }
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map)) {
        json_decref(root);
        error_set("%s: no 'weight_map' object", path);
        return STATUS_BAD_INPUT;
    }
    int rc = STATUS_OK;
    const char *key;
    json_t *value;
    json_object_foreach(map, key, value) {
        const char *file = json_string_value(value);
        if (!file || strchr(file, '/')) {
            error_set("%s: weight_map['%s'] must be a file name in %s", path, key, dir);
            rc = STATUS_BAD_INPUT;
            break;
        }
        char shard_path[JOB_PATH_MAX + 300];
        snprintf(shard_path, sizeof shard_path, "%s/%s", dir, file);
        int seen = 0;
        for (int i = 0; i < hf->n_shards && !seen; i++)
            seen = strcmp(hf->shards[i].path, shard_path) == 0;
        if (seen) continue;
        if (hf->n_shards == IMPORT_MAX_SHARDS) {
            error_set("%s: more than %d shards", path, IMPORT_MAX_SHARDS);
            rc = STATUS_BAD_INPUT;
            break;
        }
        rc = shard_open(&hf->shards[hf->n_shards], shard_path);
        if (rc != STATUS_OK) break;
        hf->n_shards++;
    }
    json_decref(root);
    return rc;
}

/* Finds name with or without the "transformer." prefix, in any shard. */
static const safetensors_tensor *hf_find(const hf_model *hf, const char *name, const shard **in) {
    char prefixed[128];
    snprintf(prefixed, sizeof prefixed, "transformer.%s", name);
    for (int i = 0; i < hf->n_shards; i++) {
        const safetensors_tensor *t = safetensors_find(&hf->shards[i].st, name);
        if (!t) t = safetensors_find(&hf->shards[i].st, prefixed);
        if (t) {
            if (in) *in = &hf->shards[i];
            return t;
        }
    }
    return NULL;
}

/* The HF tensors a GPT-2 of cfg must have, in checkpoint order. Returns the count. */
static int hf_tensor_list(const model_config *cfg, hf_tensor *out) {
    const long C = cfg->embd, M = cfg->mlp;
    int n = 0;
#define ADD(dst_, layer_, tr_, nd_, a_, b_, ...)                                                   \
    do {                                                                                           \
        hf_tensor *h = &out[n++];                                                                  \
        snprintf(h->name, sizeof h->name, __VA_ARGS__);                                            \
        h->dst = dst_;                                                                             \
        h->layer = layer_;                                                                         \
        h->transpose = tr_;                                                                        \
        h->ndims = nd_;                                                                            \
        h->shape[0] = a_;                                                                          \
        h->shape[1] = b_;                                                                          \
    } while (0)
    ADD("wte", -1, 0, 2, cfg->vocab, C, "wte.weight");
    ADD("wpe", -1, 0, 2, cfg->ctx, C, "wpe.weight");
    for (int i = 0; i < cfg->layers; i++) {
        ADD("ln1_g", i, 0, 1, C, 0, "h.%d.ln_1.weight", i);
        ADD("ln1_b", i, 0, 1, C, 0, "h.%d.ln_1.bias", i);
        ADD("qkv_w", i, 1, 2, C, 3 * C, "h.%d.attn.c_attn.weight", i);
        ADD("qkv_b", i, 0, 1, 3 * C, 0, "h.%d.attn.c_attn.bias", i);
        ADD("proj_w", i, 1, 2, C, C, "h.%d.attn.c_proj.weight", i);
        ADD("proj_b", i, 0, 1, C, 0, "h.%d.attn.c_proj.bias", i);
        ADD("ln2_g", i, 0, 1, C, 0, "h.%d.ln_2.weight", i);
        ADD("ln2_b", i, 0, 1, C, 0, "h.%d.ln_2.bias", i);
        ADD("fc1_w", i, 1, 2, C, M, "h.%d.mlp.c_fc.weight", i);
        ADD("fc1_b", i, 0, 1, M, 0, "h.%d.mlp.c_fc.bias", i);
        ADD("fc2_w", i, 1, 2, M, C, "h.%d.mlp.c_proj.weight", i);
        ADD("fc2_b", i, 0, 1, C, 0, "h.%d.mlp.c_proj.bias", i);
    }
    ADD("lnf_g", -1, 0, 1, C, 0, "ln_f.weight");
    ADD("lnf_b", -1, 0, 1, C, 0, "ln_f.bias");
#undef ADD
    return n;
}

static void hf_shape_format(char *out, size_t len, int ndims, const int64_t *dims) {
    size_t used = (size_t)snprintf(out, len, "[");
    for (int d = 0; d < ndims && used < len; d++)
        used +=
            (size_t)snprintf(out + used, len - used, "%s%lld", d ? ", " : "", (long long)dims[d]);
    if (used < len) snprintf(out + used, len - used, "]");
}

/* Every expected tensor present with the shape config.json implies; nothing beyond n_layer. */
static int hf_validate(const hf_model *hf, const hf_tensor *list, int n, const model_config *cfg,
                       const char *dir) {
    for (int k = 0; k < n; k++) {
        const shard *in = NULL;
        const safetensors_tensor *t = hf_find(hf, list[k].name, &in);
        if (!t) {
            error_set("%s: tensor '%s' is missing (also looked for 'transformer.%s')", dir,
                      list[k].name, list[k].name);
            return STATUS_BAD_INPUT;
        }
        int same = t->ndims == list[k].ndims;
        for (int d = 0; same && d < t->ndims; d++)
            same = t->shape[d] == list[k].shape[d];
        if (!same) {
            char have[128], want[128];
            int64_t w[2] = {list[k].shape[0], list[k].shape[1]};
            hf_shape_format(have, sizeof have, t->ndims, t->shape);
            hf_shape_format(want, sizeof want, list[k].ndims, w);
            error_set("%s: tensor '%s' has shape %s, but config.json implies %s", in->path, t->name,
                      have, want);
            return STATUS_BAD_INPUT;
        }
    }
    /* a layer past n_layer means config.json and the weights disagree */
    for (int s = 0; s < hf->n_shards; s++)
        for (int i = 0; i < hf->shards[s].st.n_tensors; i++) {
            const char *name = hf->shards[s].st.tensors[i].name;
            if (strncmp(name, "transformer.", 12) == 0) name += 12;
            int layer = -1;
            if ((sscanf(name, "h.%d.", &layer) == 1 ||
                 sscanf(name, "model.layers.%d.", &layer) == 1) &&
                (layer < 0 || layer >= cfg->layers)) {
                error_set("%s: tensor '%s' is for layer %d, but config.json has n_layer = %d",
                          hf->shards[s].path, hf->shards[s].st.tensors[i].name, layer, cfg->layers);
                return STATUS_BAD_INPUT;
            }
        }
    return STATUS_OK;
}

/* Index of the first element of t that is NaN or Inf, read from the raw little-endian bits
 * (an all-ones exponent in F32, F16 and BF16 alike), or -1; *kind gets "NaN", "+Inf" or
 * "-Inf". Reads the mapped bytes once and allocates nothing. */
static int64_t hf_first_nonfinite(const safetensors_tensor *t, const char **kind) {
    const uint64_t n = safetensors_tensor_elems(t);
    const size_t size = safetensors_dtype_size(t->dtype);
    const int exp_shift = t->dtype == SAFETENSORS_F32 ? 23 : t->dtype == SAFETENSORS_F16 ? 10 : 7;
    const uint32_t exp_ones = t->dtype == SAFETENSORS_F16 ? 0x1f : 0xff;
    const uint32_t mant_mask = (1u << exp_shift) - 1, sign = 1u << (8 * size - 1);
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *q = t->data + size * i;
        uint32_t bits = (uint32_t)q[0] | (uint32_t)q[1] << 8;
        if (size == 4) bits |= (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
        if (((bits >> exp_shift) & exp_ones) != exp_ones) continue;
        *kind = bits & mant_mask ? "NaN" : bits & sign ? "-Inf" : "+Inf";
        return (int64_t)i;
    }
    return -1;
}

/* Drops t's pages from this process once it has been read: the shards are mapped whole, and
 * the pages a read touches stay resident (and counted) until dropped, so without this an
 * import would end up holding the whole model. The mapping is read-only and private, so a
 * later read faults the bytes back in from the file; neighbours sharing an edge page too. */
static void hf_tensor_release(const safetensors_tensor *t) {
    const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    const uintptr_t begin = (uintptr_t)t->data & ~(page - 1);
    const uintptr_t end =
        (uintptr_t)t->data + safetensors_tensor_elems(t) * safetensors_dtype_size(t->dtype);
    if (end > begin) (void)madvise((void *)begin, end - begin, MADV_DONTNEED); /* advice only */
}

/* Every tensor the checkpoint takes is finite: tripar refuses NaN and Inf weights rather than
 * import them (docs/checkpoint.md), before the checkpoint is created. */
static int hf_check_finite(const hf_model *hf, const hf_tensor *list, int n) {
    for (int k = 0; k < n; k++) {
        const shard *in = NULL;
        const safetensors_tensor *t = hf_find(hf, list[k].name, &in);
        const char *kind = "";
        int64_t i = hf_first_nonfinite(t, &kind);
        hf_tensor_release(t);
        if (i < 0) continue;
        char at[64];
        if (t->ndims == 2)
            snprintf(at, sizeof at, "[%lld, %lld]", (long long)(i / t->shape[1]),
                     (long long)(i % t->shape[1]));
        else
            snprintf(at, sizeof at, "[%lld]", (long long)i);
        error_set("%s: tensor '%s' holds %s at %s; tripar refuses NaN and Inf weights", in->path,
                  t->name, kind, at);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

/* Stores one HF tensor into its layer slice of the stacked dataset. */
static void hf_tensor_write(import_writer *w, const hf_tensor *h, const safetensors_tensor *t,
                            float *a, float *b) {
    safetensors_tensor_to_f32(t, a);
    const float *src = a;
    long rows = h->ndims == 2 ? h->shape[0] : 1, cols = h->ndims == 2 ? h->shape[1] : h->shape[0];
    if (h->transpose) {
        /* Conv1D stores [in, out]; tripar wants Linear's (out, in) */
        for (long r = 0; r < rows; r++)
            for (long c = 0; c < cols; c++)
                b[c * rows + r] = a[r * cols + c];
        src = b;
        long tmp = rows;
        rows = cols;
        cols = tmp;
    }
    import_writer_put(w, h->dst, h->layer, h->row_offset, h->ndims, rows, cols, src);
}

/* lm_head.weight is tied to wte in tripar; say so when the file's differs. */
static void lm_head_compare(const hf_model *hf, const model_config *cfg, const float *wte) {
    const safetensors_tensor *head = hf_find(hf, "lm_head.weight", NULL);
    if (!head) return;
    uint64_t n = (uint64_t)cfg->vocab * (uint64_t)cfg->embd;
    if (head->ndims != 2 || head->shape[0] != cfg->vocab || head->shape[1] != cfg->embd) {
        fprintf(stderr, "import-hf: warning: lm_head.weight does not have wte's shape; tripar "
                        "ties the LM head to wte and ignores it\n");
        return;
    }
    float *vals = xmalloc(n * sizeof(float));
    safetensors_tensor_to_f32(head, vals);
    hf_tensor_release(head);
    uint64_t differ = 0;
    for (uint64_t i = 0; i < n; i++)
        differ += vals[i] != wte[i];
    free(vals);
    if (differ)
        fprintf(stderr,
                "import-hf: warning: lm_head.weight differs from wte.weight in %llu of "
                "%llu elements; tripar ties the LM head to wte (the checkpoint keeps wte)\n",
                (unsigned long long)differ, (unsigned long long)n);
}

/* Loads tokenizer.json, or else vocab.json and merges.txt when both exist (as Hugging Face's
 * fast tokenizer prefers); checks they parse. -1 on a bad tokenizer. */
static int tokenizer_files_read(const char *dir, const model_config *cfg, char **vocab,
                                char **merges, char **json) {
    char vpath[JOB_PATH_MAX + 32], mpath[JOB_PATH_MAX + 32], jpath[JOB_PATH_MAX + 32];
    snprintf(vpath, sizeof vpath, "%s/vocab.json", dir);
    snprintf(mpath, sizeof mpath, "%s/merges.txt", dir);
    snprintf(jpath, sizeof jpath, "%s/tokenizer.json", dir);
    *vocab = *merges = *json = NULL;
    tokenizer *tok = NULL;
    if (path_exists(jpath)) {
        *json = path_read_file(jpath, NULL);
        if (!*json || tokenizer_load_json(&tok, *json, jpath) != 0) return -1;
    } else {
        if (!path_exists(vpath) || !path_exists(mpath)) return 0;
        *vocab = path_read_file(vpath, NULL);
        *merges = path_read_file(mpath, NULL);
        if (!*vocab || !*merges || tokenizer_load_strings(&tok, *vocab, *merges) != 0) {
            char why[1024];
            snprintf(why, sizeof why, "%s", error_message());
            error_set("%s: vocab.json/merges.txt: %s", dir, why);
            return -1;
        }
    }
    int max_id = tokenizer_max_id(tok);
    tokenizer_free(tok);
    if (max_id >= cfg->vocab) {
        error_set("%s: token id %d does not fit vocab_size = %d", *json ? jpath : vpath, max_id,
                  cfg->vocab);
        return -1;
    }
    return 1;
}

/* One import: what is read from the HF directory, and what is counted for the summary. */
typedef struct {
    const char *dir, *out;
    model_config cfg;
    hf_model *hf;
    hf_tensor *list; /* (hf_tensor_capacity), in checkpoint order */
    int n_tensors;
    char *vocab, *merges, *tok_json;
    int has_tokenizer;
    int dtype_count[3]; /* tensors read as F32, F16, BF16 */
} hf_import;

static void hf_import_free(hf_import *im) {
    hf_model_free(im->hf);
    free(im->hf);
    free(im->list);
    free(im->vocab);
    free(im->merges);
    free(im->tok_json);
}

/* Everything checked before the first byte is written: config.json, the safetensors files,
 * every expected tensor, its shape and its finiteness, the tokenizer files. Returns STATUS_OK or
 * STATUS_BAD_INPUT with error_message() set. */
static int hf_import_plan(hf_import *im) {
    int rc = config_load(im->dir, &im->cfg);
    if (rc == STATUS_OK) rc = hf_model_open(im->hf, im->dir);
    if (rc == STATUS_OK) {
        im->list = xcalloc((unsigned long)hf_tensor_capacity(&im->cfg), sizeof *im->list);
        im->n_tensors = arch_is_llama(im->cfg.arch) ? hf_llama_tensor_list(&im->cfg, im->list)
                                                   : hf_tensor_list(&im->cfg, im->list);
        rc = hf_validate(im->hf, im->list, im->n_tensors, &im->cfg, im->dir);
        if (rc == STATUS_OK) rc = hf_check_finite(im->hf, im->list, im->n_tensors);
    }
    if (rc == STATUS_OK) {
        im->has_tokenizer =
            tokenizer_files_read(im->dir, &im->cfg, &im->vocab, &im->merges, &im->tok_json);
        if (im->has_tokenizer < 0) rc = STATUS_BAD_INPUT;
    }
    return rc;
}

/* The checkpoint may replace no file the import reads, compared by inode so that a link or
 * DIR/./model.safetensors is caught too: creating it would truncate a mapped shard. Made after
 * the plan (which knows the shards) and before the first byte is written. */
static int hf_out_check(const hf_import *im) {
    static const char *const side_files[] = {"config.json", "model.safetensors.index.json",
                                             "vocab.json", "merges.txt", "tokenizer.json"};
    const int n_side = (int)(sizeof side_files / sizeof side_files[0]);
    char(*paths)[JOB_PATH_MAX + 64] = xcalloc((size_t)(n_side + im->hf->n_shards), sizeof *paths);
    const char **inputs = xcalloc((size_t)(n_side + im->hf->n_shards), sizeof *inputs);
    for (int i = 0; i < n_side + im->hf->n_shards; i++) {
        if (i < n_side)
            snprintf(paths[i], sizeof paths[i], "%s/%s", im->dir, side_files[i]);
        else
            snprintf(paths[i], sizeof paths[i], "%s", im->hf->shards[i - n_side].path);
        inputs[i] = paths[i];
    }
    int rc = import_out_check(im->out, inputs, n_side + im->hf->n_shards);
    free(inputs);
    free(paths);
    return rc;
}

/* Converts one HF tensor into its slice; only it is in memory (twice when it is transposed,
 * and once more in its stored precision). */
static void hf_tensor_convert(hf_import *im, const hf_tensor *h, import_writer *w) {
    const safetensors_tensor *t = hf_find(im->hf, h->name, NULL);
    uint64_t elems = safetensors_tensor_elems(t);
    float *a = xmalloc(elems * sizeof(float));
    float *b = h->transpose ? xmalloc(elems * sizeof(float)) : NULL;
    hf_tensor_write(w, h, t, a, b);
    hf_tensor_release(t);
    /* an untied Llama's lm_head is head_w; a tied model's must equal wte */
    if (strcmp(h->dst, "wte") == 0 && (!arch_is_llama(im->cfg.arch) || im->cfg.tie_embeddings))
        lm_head_compare(im->hf, &im->cfg, a);
    im->dtype_count[t->dtype]++;
    free(a);
    free(b);
}

static void hf_weights_write(hf_import *im, hid_t file, const import_options *o) {
    import_writer w;
    import_writer_open(&w, file, &im->cfg, o);
    for (int k = 0; k < im->n_tensors; k++)
        hf_tensor_convert(im, &im->list[k], &w);
    import_writer_close(&w);
}

int import_hf_convert(const char *dir, const char *out, const import_options *o,
                      import_hf_summary *summary) {
    hf_import im = {.dir = dir, .out = out};
    im.hf = xcalloc(1, sizeof *im.hf);
    hid_t file = -1;
    int rc = hf_import_plan(&im);
    if (rc == STATUS_OK) rc = hf_out_check(&im);
    if (rc == STATUS_OK) rc = import_precision_fits(&im.cfg, o->precision);
    if (rc == STATUS_OK) rc = import_checkpoint_create(im.out, &file);
    if (rc == STATUS_OK) {
        checkpoint_write_config_attrs(file, &im.cfg);
        hf_weights_write(&im, file, o);
        if (im.has_tokenizer) checkpoint_write_tokenizer(file, im.vocab, im.merges, im.tok_json);
        H5_CHECK(H5Fclose(file));
        *summary = (import_hf_summary){.cfg = im.cfg,
                                       .n_tensors = im.n_tensors,
                                       .n_files = im.hf->n_shards,
                                       .has_tokenizer = im.has_tokenizer};
        memcpy(summary->dtype_count, im.dtype_count, sizeof im.dtype_count);
    }
    hf_import_free(&im);
    return rc;
}
