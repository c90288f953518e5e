/* HDF5 checkpoints: validation (serial, before any compute), the parallel shard load, the
 * parallel save of the synthetic model and the stored tokenizer. Format: docs/checkpoint.md. */
#include "io/checkpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/check.h"
#include "io/h5util.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "parallel/agree.h"

const char *const checkpoint_tensor_names[CHECKPOINT_N_TENSORS] = {
    "wte",   "wpe",   "ln1_g", "ln1_b", "qkv_w", "qkv_b", "proj_w", "proj_b",
    "ln2_g", "ln2_b", "fc1_w", "fc1_b", "fc2_w", "fc2_b", "lnf_g",  "lnf_b",
};

const char *const checkpoint_llama_tensor_names[CHECKPOINT_LLAMA_N_TENSORS] = {
    "wte", "ln1_g", "qkv_w", "proj_w", "ln2_g", "gate_up_w", "down_w", "lnf_g", "head_w"};

/* A mixture of experts: Llama's list with the router and the experts in the place of gate_up_w
 * and down_w, the shared expert's after them when it has one; head_w last, as ever. */
static int moe_tensor_list(const model_config *cfg, const char *const **names) {
#define MOE_ATTN "wte", "ln1_g", "qkv_w"
#define MOE_REST "proj_w", "ln2_g", "router_w", "exp_gate_up_w", "exp_down_w"
    static const char *const lists[4][16] = {
        {MOE_ATTN, MOE_REST, "lnf_g", "head_w"},
        {MOE_ATTN, "qkv_b", MOE_REST, "lnf_g", "head_w"},
        {MOE_ATTN, MOE_REST, "sh_gate_up_w", "sh_down_w", "lnf_g", "head_w"},
        {MOE_ATTN, "qkv_b", MOE_REST, "sh_gate_up_w", "sh_down_w", "lnf_g", "head_w"},
    };
#undef MOE_ATTN
#undef MOE_REST
    const int bias = cfg->attention_bias != 0, shared = cfg->shared_mlp > 0;
    *names = lists[2 * shared + bias];
    return 10 + bias + 2 * shared - (cfg->tie_embeddings ? 1 : 0);
}

int checkpoint_tensor_list(const model_config *cfg, const char *const **names) {
    if (!arch_is_llama(cfg->arch)) {
        *names = checkpoint_tensor_names;
        return CHECKPOINT_N_TENSORS;
    }
    /* with q/k/v biases (Qwen2), qkv_b follows qkv_w; head_w is last either way */
    static const char *const with_bias[CHECKPOINT_LLAMA_N_TENSORS + 1] = {
        "wte",   "ln1_g",     "qkv_w",  "qkv_b", "proj_w",
        "ln2_g", "gate_up_w", "down_w", "lnf_g", "head_w"};
    if (cfg->experts > 0) return moe_tensor_list(cfg, names);
    *names = cfg->attention_bias ? with_bias : checkpoint_llama_tensor_names;
    return CHECKPOINT_LLAMA_N_TENSORS + (cfg->attention_bias ? 1 : 0) -
           (cfg->tie_embeddings ? 1 : 0);
}

/* Llama's global shapes: q heads then k then v kv heads; gate rows then up rows. */
static int llama_tensor_shape(const model_config *cfg, const char *name, long shape[3]) {
    const long L = cfg->layers, C = cfg->embd, M = cfg->mlp, V = cfg->vocab;
    const long hd = model_head_dim(cfg), QKV = ((long)cfg->heads + 2L * cfg->kv_heads) * hd;
    struct {
        const char *name;
        int ndims;
        long d0, d1, d2;
    } rows[CHECKPOINT_LLAMA_N_TENSORS + 1] = {
        {"wte", 2, V, C, 0},
        {"ln1_g", 2, L, C, 0},
        {"qkv_w", 3, L, QKV, C},
        {"qkv_b", 2, L, QKV, 0},
        {"proj_w", 3, L, C, cfg->heads * hd},
        {"ln2_g", 2, L, C, 0},
        {"gate_up_w", 3, L, 2 * M, C},
        {"down_w", 3, L, C, M},
        {"lnf_g", 1, C, 0, 0},
        {"head_w", 2, V, C, 0},
    };
    for (int i = 0; i < CHECKPOINT_LLAMA_N_TENSORS + 1; i++) {
        if (strcmp(rows[i].name, name) != 0) continue;
        shape[0] = rows[i].d0, shape[1] = rows[i].d1, shape[2] = rows[i].d2;
        return rows[i].ndims;
    }
    if (cfg->experts <= 0) return 0;
    /* the mixture of experts (model/moe.c): expert e of layer l is dim-0 row l * E + e */
    const long E = cfg->experts, S = cfg->shared_mlp, R = E + (S > 0 ? 1 : 0);
    const struct {
        const char *name;
        long d0, d1, d2;
    } moe[] = {
        {"router_w", L, R, C},     {"exp_gate_up_w", L * E, 2 * M, C}, {"exp_down_w", L * E, C, M},
        {"sh_gate_up_w", L, 2 * S, C}, {"sh_down_w", L, C, S},
    };
    for (size_t i = 0; i < sizeof moe / sizeof moe[0]; i++) {
        if (strcmp(moe[i].name, name) != 0 || (S == 0 && moe[i].name[0] == 's')) continue;
        shape[0] = moe[i].d0, shape[1] = moe[i].d1, shape[2] = moe[i].d2;
        return 3;
    }
    return 0;
}

int checkpoint_tensor_shape(const model_config *cfg, const char *name, long shape[3]) {
    if (arch_is_llama(cfg->arch)) return llama_tensor_shape(cfg, name, shape);
    const long L = cfg->layers, C = cfg->embd, M = cfg->mlp;
    struct {
        const char *name;
        int ndims;
        long d0, d1, d2;
    } rows[CHECKPOINT_N_TENSORS] = {
        {"wte", 2, cfg->vocab, C, 0}, {"wpe", 2, cfg->ctx, C, 0}, {"ln1_g", 2, L, C, 0},
        {"ln1_b", 2, L, C, 0},        {"qkv_w", 3, L, 3 * C, C},  {"qkv_b", 2, L, 3 * C, 0},
        {"proj_w", 3, L, C, C},       {"proj_b", 2, L, C, 0},     {"ln2_g", 2, L, C, 0},
        {"ln2_b", 2, L, C, 0},        {"fc1_w", 3, L, M, C},      {"fc1_b", 2, L, M, 0},
        {"fc2_w", 3, L, C, M},        {"fc2_b", 2, L, C, 0},      {"lnf_g", 1, C, 0, 0},
        {"lnf_b", 1, C, 0, 0},
    };
    for (int i = 0; i < CHECKPOINT_N_TENSORS; i++) {
        if (strcmp(rows[i].name, name) != 0) continue;
        shape[0] = rows[i].d0;
        shape[1] = rows[i].d1;
        shape[2] = rows[i].d2;
        return rows[i].ndims;
    }
    return 0;
}

int checkpoint_scale_shape(const model_config *cfg, const char *name, int group, long shape[3]) {
    int nd = checkpoint_tensor_shape(cfg, name, shape);
    CHECK(nd >= 2, "tensor %s has no rows to scale", name);
    if (group == 0) return nd - 1; /* one scale per row: the weight's shape less its columns */
    shape[nd - 1] = (shape[nd - 1] + group - 1) / group;
    return nd;
}

static void shape_format(char *out, size_t len, int ndims, const long *dims) {
    size_t used = (size_t)snprintf(out, len, "(");
    for (int d = 0; d < ndims && used < len; d++)
        used += (size_t)snprintf(out + used, len - used, "%s%ld", d ? ", " : "", dims[d]);
    if (used < len) snprintf(out + used, len - used, ")");
}

/* A mixture of experts' routing: experts, experts_top_k (1 to experts), shared_expert_mlp
 * (0 = none) and norm_topk_prob (0 or 1). */
static int read_moe_attrs(hid_t file, const char *path, model_config *cfg) {
    long long e = 0, k = 0, sh = 0, norm = 0;
    if (h5_attr_read_long(file, "experts", &e) != 0 || e < 1 || e > (1 << 16) ||
        h5_attr_read_long(file, "experts_top_k", &k) != 0 || k < 1 || k > e ||
        h5_attr_read_long(file, "shared_expert_mlp", &sh) != 0 || sh < 0 || sh > (1LL << 30) ||
        h5_attr_read_long(file, "norm_topk_prob", &norm) != 0 || (norm != 0 && norm != 1)) {
        error_set("%s: a %s checkpoint needs the root attributes 'experts' (>= 1), "
                  "'experts_top_k' (1 to experts), 'shared_expert_mlp' (>= 0) and "
                  "'norm_topk_prob' (0 or 1)",
                  path, arch_kind_name(cfg->arch));
        return STATUS_BAD_INPUT;
    }
    cfg->experts = (int)e, cfg->experts_top_k = (int)k, cfg->shared_mlp = (int)sh;
    cfg->norm_topk_prob = (int)norm;
    return STATUS_OK;
}

/* The architecture (absent: gpt2, as every checkpoint before Llama) and Llama's attributes. */
static int read_llama_attrs(hid_t file, const char *path, model_config *cfg) {
    char arch[16] = "gpt2";
    cfg->arch = ARCH_GPT2; /* kv_heads and tie_embeddings 0: "as GPT-2" (model_config_from_job) */
    cfg->attention_bias = 0, cfg->head_dim = 0;
    cfg->experts = cfg->experts_top_k = cfg->shared_mlp = cfg->norm_topk_prob = 0;
    H5E_BEGIN_TRY { (void)h5_attr_read_string(file, "arch", arch, sizeof arch); }
    H5E_END_TRY;
    if (strcmp(arch, "gpt2") == 0) return STATUS_OK;
    cfg->arch = ARCH_GPT2;
    for (int k = 1; k < ARCH_KINDS; k++)
        if (strcmp(arch, arch_kind_name((arch_kind)k)) == 0) cfg->arch = (arch_kind)k;
    if (cfg->arch == ARCH_GPT2) {
        error_set("%s: root attribute arch = '%s' (expected \"gpt2\", \"llama\", \"mixtral\" or "
                  "\"qwen2_moe\")",
                  path, arch);
        return STATUS_BAD_INPUT;
    }
    if (arch_is_moe(cfg->arch) && read_moe_attrs(file, path, cfg) != STATUS_OK)
        return STATUS_BAD_INPUT;
    long long kv = 0, tie = 0, orig = 0;
    double theta = 0;
    if (h5_attr_read_long(file, "kv_heads", &kv) != 0 || kv < 1 || kv > cfg->heads ||
        cfg->heads % kv != 0) {
        error_set("%s: missing or invalid root attribute 'kv_heads' (a divisor of heads = %d)",
                  path, cfg->heads);
        return STATUS_BAD_INPUT;
    }
    if (h5_attr_read_long(file, "tie_embeddings", &tie) != 0 || (tie != 0 && tie != 1) ||
        h5_attr_read_double(file, "rope_theta", &theta) != 0 || !(theta > 0)) {
        error_set("%s: missing or invalid root attribute 'tie_embeddings' (0 or 1) or "
                  "'rope_theta' (> 0)",
                  path);
        return STATUS_BAD_INPUT;
    }
    /* head_dim: absent in checkpoints before it, meaning embd / heads */
    long long hd = 0;
    int have_hd = 0;
    H5E_BEGIN_TRY { have_hd = h5_attr_read_long(file, "head_dim", &hd) == 0; }
    H5E_END_TRY;
    if (have_hd && (hd < 1 || hd > (1 << 16))) {
        error_set("%s: invalid root attribute 'head_dim' = %lld (expected 1 to 65536)", path, hd);
        return STATUS_BAD_INPUT;
    }
    cfg->head_dim = have_hd ? (int)hd : 0;
    if (model_head_dim(cfg) % 2) {
        error_set("%s: the head dimension %s = %d is odd (RoPE needs pairs)", path,
                  have_hd ? "head_dim" : "embd / heads", model_head_dim(cfg));
        return STATUS_BAD_INPUT;
    }
    cfg->kv_heads = (int)kv, cfg->tie_embeddings = (int)tie, cfg->rope_theta = theta;
    /* attention_bias (q/k/v biases, tensor qkv_b): absent in checkpoints before it, meaning 0 */
    long long bias = 0;
    int have_bias = 0;
    H5E_BEGIN_TRY { have_bias = h5_attr_read_long(file, "attention_bias", &bias) == 0; }
    H5E_END_TRY;
    if (have_bias && bias != 0 && bias != 1) {
        error_set("%s: root attribute attention_bias = %lld (expected 0 or 1)", path, bias);
        return STATUS_BAD_INPUT;
    }
    cfg->attention_bias = (int)bias;
    rope_llama3 *sc = &cfg->rope_scaling;
    cfg->rope_scaled = 0;
    H5E_BEGIN_TRY {
        cfg->rope_scaled = h5_attr_read_double(file, "rope_scaling_factor", &sc->factor) == 0;
    }
    H5E_END_TRY;
    if (!cfg->rope_scaled) return STATUS_OK;
    if (h5_attr_read_double(file, "rope_scaling_low_freq_factor", &sc->low_freq_factor) != 0 ||
        h5_attr_read_double(file, "rope_scaling_high_freq_factor", &sc->high_freq_factor) != 0 ||
        h5_attr_read_long(file, "rope_scaling_original_max_position_embeddings", &orig) != 0 ||
        orig < 1 || orig > (1L << 30)) {
        error_set("%s: rope_scaling_factor is set but not every rope_scaling_* attribute", path);
        return STATUS_BAD_INPUT;
    }
    sc->original_max_position_embeddings = (int)orig;
    const char *bad = rope_llama3_problem(sc);
    if (bad) {
        error_set("%s: root attributes: %s", path, bad);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

static int read_config_attrs(hid_t file, const char *path, model_config *cfg,
                             long long *version_out) {
    /* string attributes may be fixed- or variable-length (h5py's default): h5util reads both */
    char format[64];
    if (h5_attr_read_string(file, "format", format, sizeof format) != 0) {
        error_set("%s: not a tripar checkpoint (%s root attribute 'format', expected the string "
                  "'%s')",
                  path, h5_attr_exists(file, "format") ? "a non-string" : "no", CHECKPOINT_FORMAT);
        return STATUS_BAD_INPUT;
    }
    if (strcmp(format, CHECKPOINT_FORMAT) != 0) {
        error_set("%s: not a tripar checkpoint (format is '%s', expected '%s')", path, format,
                  CHECKPOINT_FORMAT);
        return STATUS_BAD_INPUT;
    }
    long long version = 0;
    if (h5_attr_read_long(file, "format_version", &version) != 0) {
        error_set("%s: no integer root attribute 'format_version' (this tripar reads checkpoint "
                  "format_version %d)",
                  path, CHECKPOINT_FORMAT_VERSION);
        return STATUS_BAD_INPUT;
    }
    if (version < CHECKPOINT_FORMAT_VERSION_FP32 || version > CHECKPOINT_FORMAT_VERSION) {
        error_set("%s: unsupported checkpoint format_version %lld (this tripar reads %d to %d)",
                  path, version, CHECKPOINT_FORMAT_VERSION_FP32, CHECKPOINT_FORMAT_VERSION);
        return STATUS_BAD_INPUT;
    }
    *version_out = version;
    const char *int_names[6] = {"layers", "heads", "embd", "vocab", "ctx", "mlp"};
    int *int_slots[6] = {&cfg->layers, &cfg->heads, &cfg->embd, &cfg->vocab, &cfg->ctx, &cfg->mlp};
    for (int i = 0; i < 6; i++) {
        long long v = 0;
        if (h5_attr_read_long(file, int_names[i], &v) != 0) {
            error_set("%s: missing or non-integer root attribute '%s'", path, int_names[i]);
            return STATUS_BAD_INPUT;
        }
        if (v <= 0 || v > (1LL << 30)) {
            error_set("%s: root attribute %s = %lld is out of range", path, int_names[i], v);
            return STATUS_BAD_INPUT;
        }
        *int_slots[i] = (int)v;
    }
    double eps = 0;
    if (h5_attr_read_double(file, "ln_eps", &eps) != 0 || !(eps > 0 && eps < 1)) {
        error_set("%s: missing or invalid root attribute 'ln_eps' (a double in (0, 1))", path);
        return STATUS_BAD_INPUT;
    }
    cfg->ln_eps = (float)eps;
    char norm[16];
    if (h5_attr_read_string(file, "norm", norm, sizeof norm) != 0) {
        error_set("%s: %s root attribute 'norm' (the string \"pre\" or \"post\")", path,
                  h5_attr_exists(file, "norm") ? "non-string" : "missing");
        return STATUS_BAD_INPUT;
    }
    if (strcmp(norm, "pre") == 0) {
        cfg->norm = NORM_PRE;
    } else if (strcmp(norm, "post") == 0) {
        cfg->norm = NORM_POST;
    } else {
        error_set("%s: root attribute norm = '%s' (expected \"pre\" or \"post\")", path, norm);
        return STATUS_BAD_INPUT;
    }
    const int rc = read_llama_attrs(file, path, cfg);
    if (rc != STATUS_OK) return rc;
    /* a Llama head_dim attribute frees the heads from splitting embd (job_validate's rule) */
    if (cfg->embd % cfg->heads != 0 && cfg->head_dim <= 0) {
        error_set("%s: heads = %d does not divide embd = %d", path, cfg->heads, cfg->embd);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

/* Whether every byte of the dataset's storage lies inside the file: a truncated file keeps
 * its metadata (at the front) but loses the tail of the raw data. */
static int dataset_storage_check(hid_t dset, const char *path, const char *name, long nbytes,
                                 haddr_t base, long long file_size) {
    hid_t dcpl = H5Dget_create_plist(dset);
    H5_CHECK(dcpl);
    H5D_layout_t layout = H5Pget_layout(dcpl);
    int external = H5Pget_external_count(dcpl);
    H5Pclose(dcpl);
    /* Both read fine serially but not through the collective MPI-IO read of checkpoint_load,
     * which would then fail on every rank with an HDF5 error stack: refuse them here. */
    if (layout == H5D_VIRTUAL || external > 0) {
        error_set("%s: tensor '%s' is %s; tripar reads contiguous, chunked or compact datasets "
                  "held in the checkpoint itself (h5repack -l CONTI rewrites it so)",
                  path, name,
                  layout == H5D_VIRTUAL ? "a virtual dataset" : "stored in external files");
        return STATUS_BAD_INPUT;
    }
    if (layout == H5D_CONTIGUOUS) {
        haddr_t offset = H5Dget_offset(dset);
        hsize_t size = H5Dget_storage_size(dset);
        if (offset == HADDR_UNDEF || size < (hsize_t)nbytes) {
            error_set("%s: tensor '%s' has no stored data (never written?)", path, name);
            return STATUS_BAD_INPUT;
        }
        if ((long long)(base + offset + size) > file_size) {
            error_set("%s: tensor '%s' extends past the end of the file (truncated checkpoint?)",
                      path, name);
            return STATUS_BAD_INPUT;
        }
    } else if (layout == H5D_CHUNKED) {
        /* What tripar writes (checkpoint_dcpl_create), and other tools may. Each chunk looked
         * up by its coordinates: H5Dget_chunk_info by index walks the index from the start
         * every call, quadratic in the chunks of a large tensor. */
        hid_t space = H5Dget_space(dset);
        hsize_t dims[H5S_MAX_RANK], chunk[H5S_MAX_RANK], at[H5S_MAX_RANK] = {0};
        const int nd = H5Sget_simple_extent_dims(space, dims, NULL);
        H5Sclose(space);
        dcpl = H5Dget_create_plist(dset);
        H5_CHECK(dcpl);
        H5_CHECK(H5Pget_chunk(dcpl, nd, chunk));
        H5Pclose(dcpl);
        for (int d = nd - 1; d >= 0;) {
            hsize_t size = 0;
            unsigned mask = 0;
            haddr_t addr = HADDR_UNDEF;
            H5_CHECK(H5Dget_chunk_info_by_coord(dset, at, &mask, &addr, &size));
            if (addr == HADDR_UNDEF) {
                long first[H5S_MAX_RANK];
                for (int k = 0; k < nd; k++)
                    first[k] = (long)at[k];
                char where[96];
                shape_format(where, sizeof where, nd, first);
                error_set("%s: tensor '%s' has no stored data from element %s on (a chunk never "
                          "written: an incomplete checkpoint?)",
                          path, name, where);
                return STATUS_BAD_INPUT;
            }
            if ((long long)(base + addr + size) > file_size) {
                error_set("%s: tensor '%s' extends past the end of the file (truncated "
                          "checkpoint?)",
                          path, name);
                return STATUS_BAD_INPUT;
            }
            /* the next chunk's coordinates, the last dimension fastest */
            for (d = nd - 1; d >= 0; d--) {
                at[d] += chunk[d];
                if (at[d] < dims[d]) break;
                at[d] = 0;
            }
        }
    }
    /* compact data lives in the object header, which HDF5 has already read */
    return STATUS_OK;
}

/* /weights/<name> exists, is of the stored dtype and of the shape want (ndims want_ndims),
 * and its bytes lie inside the file. */
static int dataset_check(hid_t file, const char *path, const char *name, dtype stored,
                         int want_ndims, const long *want, haddr_t base, long long file_size) {
    char link[64];
    snprintf(link, sizeof link, "/weights/%s", name);
    htri_t exists = 0;
    if (h5_exists(file, "/weights")) {
        H5E_BEGIN_TRY { exists = H5Lexists(file, link, H5P_DEFAULT); }
        H5E_END_TRY;
    }
    if (exists < 0) {
        /* the group's index could not be read: its blocks lie past the end of the file */
        error_set("%s: tensor '%s' cannot be looked up (truncated or damaged checkpoint?)", path,
                  name);
        return STATUS_BAD_INPUT;
    }
    if (exists == 0) {
        error_set("%s: tensor '%s' is missing (no dataset %s)", path, name, link);
        return STATUS_BAD_INPUT;
    }
    hid_t dset;
    H5E_BEGIN_TRY { dset = H5Dopen2(file, link, H5P_DEFAULT); }
    H5E_END_TRY;
    if (dset < 0) {
        error_set("%s: tensor '%s' cannot be opened (damaged or truncated checkpoint?)", path,
                  name);
        return STATUS_BAD_INPUT;
    }
    int rc = STATUS_OK;
    hid_t type = H5Dget_type(dset);
    hid_t space = H5Dget_space(dset);
    hsize_t dims[H5S_MAX_RANK];
    int ndims = H5Sget_simple_extent_dims(space, dims, NULL);
    long have[H5S_MAX_RANK];
    for (int d = 0; d < ndims; d++)
        have[d] = (long)dims[d];
    int same = ndims == want_ndims;
    for (int d = 0; same && d < ndims; d++)
        same = have[d] == want[d];
    if (!checkpoint_h5_type_is(type, stored)) {
        error_set("%s: tensor '%s' is not %s%s", path, name,
                  stored == DTYPE_F32 ? "float32" : dtype_name(stored),
                  stored == DTYPE_F32 ? "" : ", as the root attribute precision says");
        rc = STATUS_BAD_INPUT;
    } else if (!same) {
        char a[96], b[96];
        shape_format(a, sizeof a, ndims < 0 ? 0 : ndims, have);
        shape_format(b, sizeof b, want_ndims, want);
        error_set("%s: tensor '%s' has shape %s, expected %s from the config attributes", path,
                  name, a, b);
        rc = STATUS_BAD_INPUT;
    } else {
        long nelems = 1;
        for (int d = 0; d < ndims; d++)
            nelems *= have[d];
        rc = dataset_storage_check(dset, path, name, nelems * (long)dtype_size(stored), base,
                                   file_size);
    }
    H5Sclose(space);
    H5Tclose(type);
    H5Dclose(dset);
    return rc;
}

/* A weight tensor in its stored dtype, and an int8 one's scales (float32). */
static int tensor_check(hid_t file, const char *path, const char *name, const model_config *cfg,
                        const checkpoint_storage *st, haddr_t base, long long file_size) {
    int group = 0;
    const dtype stored = checkpoint_tensor_dtype(cfg, st, name, &group);
    long want[3];
    int nd = checkpoint_tensor_shape(cfg, name, want);
    int rc = dataset_check(file, path, name, stored, nd, want, base, file_size);
    if (rc != STATUS_OK || stored != DTYPE_INT8) return rc;
    char scale[64];
    checkpoint_scale_name(name, scale, sizeof scale);
    nd = checkpoint_scale_shape(cfg, name, group, want);
    rc = dataset_check(file, path, scale, DTYPE_F32, nd, want, base, file_size);
    if (rc != STATUS_OK || !qblock_has_mins(model_weight_dtype(st->precision))) return rc;
    checkpoint_min_name(name, scale, sizeof scale); /* q4_1's, q4_k's mins: the scales' shape */
    return dataset_check(file, path, scale, DTYPE_F32, nd, want, base, file_size);
}

int checkpoint_read_config(const char *path, model_config *cfg) {
    checkpoint_storage st;
    return checkpoint_read_stored(path, cfg, &st);
}

int checkpoint_read_stored(const char *path, model_config *cfg, checkpoint_storage *storage) {
    struct stat st;
    if (stat(path, &st) != 0) {
        error_set("%s: cannot open checkpoint: %s", path, strerror(errno));
        return STATUS_BAD_INPUT;
    }
    hid_t file;
    H5E_BEGIN_TRY { file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT); }
    H5E_END_TRY;
    if (file < 0) {
        /* HDF5 refuses a file shorter than the end address in its superblock */
        if (h5_file_has_signature(path))
            error_set("%s: HDF5 cannot open the checkpoint (truncated or damaged file?)", path);
        else
            error_set("%s: not an HDF5 file", path);
        return STATUS_BAD_INPUT;
    }
    hsize_t userblock = 0;
    hid_t fcpl = H5Fget_create_plist(file);
    H5_CHECK(fcpl);
    H5_CHECK(H5Pget_userblock(fcpl, &userblock));
    H5Pclose(fcpl);

    model_config c;
    memset(&c, 0, sizeof c);
    long long version = 0;
    checkpoint_storage stored;
    int rc = read_config_attrs(file, path, &c, &version);
    if (rc == STATUS_OK) rc = checkpoint_read_storage_attrs(file, path, version, &stored);
    const char *const *names = NULL;
    const int n_names = rc == STATUS_OK ? checkpoint_tensor_list(&c, &names) : 0;
    for (int i = 0; rc == STATUS_OK && i < n_names; i++)
        rc = tensor_check(file, path, names[i], &c, &stored, (haddr_t)userblock,
                          (long long)st.st_size);
    H5Fclose(file);
    if (rc == STATUS_OK) *cfg = c, *storage = stored;
    return rc;
}

static const tensor_desc *model_find_tensor(const model *m, const char *name) {
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].name && strcmp(m->tensors[i].name, name) == 0) return &m->tensors[i];
    return NULL;
}

/* Holds none of it, or an empty slice: takes part in the collective with no elements. */
static int tensor_held(const tensor_desc *t) {
    return t && t->present && tensor_local_elems(t) > 0;
}

/* Opens path read-only (or creates it) with the MPI-IO driver on every rank of world. Returns
 * -1 on every rank when any rank failed, so no rank goes on into a collective alone. */
static hid_t file_open_mpio(const char *path, MPI_Comm world, int create) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    H5_CHECK(fapl);
    H5_CHECK(H5Pset_fapl_mpio(fapl, world, MPI_INFO_NULL));
    /* one rank reads the metadata and broadcasts it, instead of every rank hitting the FS */
    if (!create) H5_CHECK(H5Pset_all_coll_metadata_ops(fapl, 1));
    hid_t file;
    H5E_BEGIN_TRY {
        file = create ? H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)
                      : H5Fopen(path, H5F_ACC_RDONLY, fapl);
    }
    H5E_END_TRY;
    H5Pclose(fapl);
    const int any_bad = agree_any_bad(world, file < 0);
    if (any_bad && file >= 0) H5Fclose(file);
    return any_bad ? -1 : file;
}

/* One /weights tensor as the file stores it. */
typedef struct {
    hid_t values; /* the dataset, -1 when not open */
    hid_t scales; /* int8: /weights/<name>_scale, else -1 */
    hid_t mins;   /* q4_1, q4_k: /weights/<name>_min (the scales' shape), else -1 */
    dtype stored; /* DTYPE_F32, DTYPE_BF16 or DTYPE_INT8 */
    int group;    /* int8: weight columns per scale, 0 per row */
} stored_tensor;

/* The dtype a table row is held in: matrices in the weight dtype, the rest fp32. */
static dtype held_dtype(const model *m, const tensor_desc *t) {
    return t->is_matrix ? m->weight_dtype : DTYPE_F32;
}

/* Whether a tensor stored as s can become t's held values: as stored, from float32 (converted
 * as a synthetic fill is), or bf16 widened exactly to float32. An int8 one needs the group the
 * model scales that matrix with. 0, or 1 with error_message() set. */
static int stored_unloadable(const model *m, const tensor_desc *t, const stored_tensor *s,
                             const char *path) {
    const dtype held = held_dtype(m, t);
    if (s->stored == DTYPE_F32 || (s->stored == DTYPE_BF16 && held == DTYPE_F32)) return 0;
    if (s->stored == held && (held != DTYPE_INT8 || s->group == m->int8[t->input].group)) return 0;
    /* a block format's planes (checkpoint_storage_refusal matched the precisions) */
    if (s->stored == DTYPE_INT8 && s->group == QBLOCK && dtype_is_block(held)) return 0;
    if (s->stored == held)
        error_set("%s: tensor '%s' is stored with int8 scales per %d columns, but this load "
                  "scales it per %d (0: per row)",
                  path, t->name, s->group, m->int8[t->input].group);
    else
        error_set("%s: tensor '%s' is stored in %s, which a load holding it in %s cannot take "
                  "(allowed: the stored dtype, or f32 from bf16)",
                  path, t->name, dtype_name(s->stored), dtype_name(held));
    return 1;
}

/* Opens every /weights dataset (an int8 one's scales too) and checks its shape and stored
 * dtype against the model's, agreed over world before any collective read, so no rank starts
 * a read another skips. On success fills tensors and counts in *unchecked the tensors written
 * without checksums; otherwise closes what it opened and returns STATUS_BAD_INPUT. */
static int weights_open_checked(hid_t file, const model *m, const char *path, MPI_Comm world,
                                const checkpoint_storage *st,
                                stored_tensor tensors[CHECKPOINT_N_TENSORS], int *unchecked) {
    int bad = 0;
    *unchecked = 0;
    const char *const *names = NULL;
    const int n_names = checkpoint_tensor_list(&m->cfg, &names);
    for (int i = 0; i < CHECKPOINT_N_TENSORS; i++)
        tensors[i] = (stored_tensor){.values = -1, .scales = -1, .mins = -1};
    for (int i = 0; i < n_names; i++) {
        const char *name = names[i];
        stored_tensor *s = &tensors[i];
        s->stored = checkpoint_tensor_dtype(&m->cfg, st, name, &s->group);
        char link[64];
        snprintf(link, sizeof link, "/weights/%s", name);
        H5E_BEGIN_TRY { s->values = H5Dopen2(file, link, H5P_DEFAULT); }
        H5E_END_TRY;
        if (s->stored == DTYPE_INT8) {
            snprintf(link, sizeof link, "/weights/%s%s", name, CHECKPOINT_SCALE_SUFFIX);
            H5E_BEGIN_TRY { s->scales = H5Dopen2(file, link, H5P_DEFAULT); }
            H5E_END_TRY;
        }
        const int has_mins =
            s->stored == DTYPE_INT8 && qblock_has_mins(model_weight_dtype(st->precision));
        if (has_mins) {
            snprintf(link, sizeof link, "/weights/%s%s", name, CHECKPOINT_MIN_SUFFIX);
            H5E_BEGIN_TRY { s->mins = H5Dopen2(file, link, H5P_DEFAULT); }
            H5E_END_TRY;
        }
        const tensor_desc *t = model_find_tensor(m, name);
        if (s->values < 0 || (s->stored == DTYPE_INT8 && s->scales < 0) ||
            (has_mins && s->mins < 0)) {
            if (!bad)
                error_set("%s: tensor '%s%s' is missing", path, name,
                          s->values < 0   ? ""
                          : s->scales < 0 ? CHECKPOINT_SCALE_SUFFIX
                                          : CHECKPOINT_MIN_SUFFIX);
            bad = 1;
            continue;
        }
        /* a tensor is checked when its values and (int8) its scales and mins all are */
        *unchecked += !checkpoint_dataset_checksummed(s->values) ||
                      (s->scales >= 0 && !checkpoint_dataset_checksummed(s->scales)) ||
                      (s->mins >= 0 && !checkpoint_dataset_checksummed(s->mins));
        if (!t) continue;
        hid_t space = H5Dget_space(s->values);
        hsize_t dims[H5S_MAX_RANK];
        int ndims = H5Sget_simple_extent_dims(space, dims, NULL);
        H5Sclose(space);
        int same = ndims == t->ndims;
        for (int d = 0; same && d < ndims; d++)
            same = (long)dims[d] == t->global_shape[d];
        if (!same && !bad) {
            char a[96];
            shape_format(a, sizeof a, t->ndims, t->global_shape);
            error_set("%s: tensor '%s' does not have the model's shape %s", path, name, a);
        }
        if (!same) bad = 1;
        if (!bad && stored_unloadable(m, t, s, path)) bad = 1;
    }
    if (!agree_any_bad(world, bad)) return STATUS_OK;
    if (!bad) error_set("%s: the checkpoint does not match the model (see rank 0)", path);
    for (int i = 0; i < n_names; i++) {
        if (tensors[i].values >= 0) H5Dclose(tensors[i].values);
        if (tensors[i].scales >= 0) H5Dclose(tensors[i].scales);
        if (tensors[i].mins >= 0) H5Dclose(tensors[i].mins);
    }
    return STATUS_BAD_INPUT;
}

/* The scales of an int8 table row as a row of their own: the weight's rows, and per group of
 * columns one scale (none per row). A rank's columns start and end on group boundaries
 * (model_int8_layout), except where the row's last, shorter group ends it. */
static tensor_desc scale_desc(const tensor_desc *t, int group) {
    tensor_desc s = *t;
    const int last = t->ndims - 1;
    if (group == 0) {
        s.ndims = last;
        return s;
    }
    const long cols = t->global_shape[last];
    s.global_shape[last] = (cols + group - 1) / group;
    for (int b = 0; b < t->local[last].nblocks; b++) {
        const long start = t->local[last].start[b], count = t->local[last].count[b];
        CHECK(start % group == 0 && (count % group == 0 || start + count == cols),
              "tensor %s: columns [%ld, %ld) split a group of %d", t->name, start, start + count,
              group);
        s.local[last].start[b] = start / group;
        s.local[last].count[b] = (count + group - 1) / group;
    }
    return s;
}

/* Block k of t's shard (counted over the product of every dimension's blocks, the last
 * fastest): where it lies in the file and in the shard's local layout. */
static void shard_block(const tensor_desc *t, long k, hsize_t *fstart, hsize_t *mstart,
                        hsize_t *count) {
    for (int d = t->ndims - 1; d >= 0; d--) {
        const dim_slice *s = &t->local[d];
        const int blocks = slice_blocks(s), b = (int)(k % blocks);
        k /= blocks;
        long start, len;
        slice_block(s, b, &start, &len);
        fstart[d] = (hsize_t)start, count[d] = (hsize_t)len, mstart[d] = 0;
        for (int c = 0; c < b; c++) {
            slice_block(s, c, &start, &len);
            mstart[d] += (hsize_t)len;
        }
    }
}

/* Reads (or, writing, writes) this rank's n elements of t (a whole shard, or a part of it:
 * tensor_part narrows dim 0, and with it every block) between one stored dataset and buf as
 * mem_type, one collective transfer per block, each block selected alike in the file and in a
 * memory space of t's local shape. Selections of the same shape let HDF5 map chunks block by
 * block; a flat memory space made it walk the chunked selection element by element (15 times
 * slower than contiguous storage, reading; twice, writing). Ranks with fewer blocks (or none:
 * n is 0, t may be NULL) take part in the rest with empty selections. A failed read's first
 * failure is kept in err; a failed write ends the run (H5_CHECK). */
static void shard_transfer(hid_t dset, const tensor_desc *t, long n, hid_t mem_type, hid_t xfer,
                           MPI_Comm world, void *buf, int writing, checkpoint_read_error *err) {
    long blocks = n > 0 ? 1 : 0;
    hsize_t local[TENSOR_MAX_DIMS] = {1};
    for (int d = 0; n > 0 && d < t->ndims; d++) {
        blocks *= slice_blocks(&t->local[d]);
        local[d] = 0;
        for (int b = 0; b < slice_blocks(&t->local[d]); b++) {
            long start, len;
            slice_block(&t->local[d], b, &start, &len);
            local[d] += (hsize_t)len;
        }
    }
    const long rounds = agree_max_long(world, blocks);
    hid_t mspace = H5Screate_simple(n > 0 ? t->ndims : 1, local, NULL);
    H5_CHECK(mspace);
    hid_t fspace = H5Dget_space(dset);
    H5_CHECK(fspace);
    for (long k = 0; k < rounds; k++) {
        hsize_t fstart[TENSOR_MAX_DIMS], mstart[TENSOR_MAX_DIMS], count[TENSOR_MAX_DIMS];
        int empty = k >= blocks;
        if (!empty) shard_block(t, k, fstart, mstart, count);
        for (int d = 0; !empty && d < t->ndims; d++)
            empty = count[d] == 0;
        if (empty) {
            H5_CHECK(H5Sselect_none(fspace));
            H5_CHECK(H5Sselect_none(mspace));
        } else {
            H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, fstart, NULL, count, NULL));
            H5_CHECK(H5Sselect_hyperslab(mspace, H5S_SELECT_SET, mstart, NULL, count, NULL));
        }
        if (writing) {
            H5_CHECK(H5Dwrite(dset, mem_type, mspace, fspace, xfer, buf));
            continue;
        }
        /* a failed read leaves the collective complete on every rank (HDF5 checks a chunk's
         * checksum after the rank has read it), so the rounds go on */
        H5E_BEGIN_TRY {
            if (H5Dread(dset, mem_type, mspace, fspace, xfer, buf) < 0 &&
                err->kind == CHECKPOINT_READ_OK)
                checkpoint_read_error_take(err);
        }
        H5E_END_TRY;
    }
    H5Sclose(fspace);
    H5Sclose(mspace);
}

/* After a read of tensor name failed on some rank (every rank calls it): the first failing
 * rank's reason, in the same words on every rank, since rank 0 alone prints it. */
static void read_failure_report(const checkpoint_read_error *mine, const char *path,
                                const char *name, MPI_Comm world) {
    const int n = agree_comm_size(world);
    checkpoint_read_error *all = xmalloc((size_t)n * sizeof *all);
    agree_gather_bytes(world, mine, (int)sizeof *mine, all);
    int r = 0;
    while (all[r].kind == CHECKPOINT_READ_OK)
        r++;
    if (all[r].kind == CHECKPOINT_READ_CHECKSUM)
        error_set("%s: tensor '%s' fails its checksum (rank %d read it; HDF5: %s): the file "
                  "changed after it was written. Write it again (import-hf, import-gguf or "
                  "--save-checkpoint), or set model.verify_checksums: false to load it "
                  "unverified",
                  path, name, r, all[r].desc);
    else
        error_set("%s: tensor '%s' cannot be read (rank %d; HDF5: %s)", path, name, r, all[r].desc);
    free(all);
}

/* A load stages at most this many bytes of a tensor at a time (or one dim-0 entry, a layer or
 * an embedding row, when that is larger), so its peak is about the weights themselves, not the
 * weights plus a whole stacked shard (an 8B model's gate_up_w is 15 GB in fp32). The
 * environment variable TRIPAR_LOAD_CHUNK_BYTES changes it, so that tests on tiny models read
 * in many parts; the ranks agree on each tensor's part count, so it may differ between them. */
#define LOAD_CHUNK_BYTES (64L << 20)

static long load_chunk_bytes(void) {
    const char *env = getenv("TRIPAR_LOAD_CHUNK_BYTES");
    char *end = NULL;
    long v = env ? strtol(env, &end, 10) : 0;
    return env && end != env && *end == '\0' && v > 0 ? v : LOAD_CHUNK_BYTES;
}

/* How one tensor is read: in `parts` runs of its local dim 0 (the same count on every rank,
 * so the collective reads line up), each of at most `per_part` dim-0 entries. */
typedef struct {
    long parts, per_part;
    size_t entry_bytes; /* staged bytes per dim-0 entry: stored values, + f32 when widened */
    long entry_scales;  /* int8 scales per dim-0 entry */
} read_plan;

/* This rank's entries of t's dim 0: one block in every table (layers, vocab rows, ...), or
 * with expert parallelism one run of experts repeated per layer. */
static long held_entries(const tensor_desc *t) {
    if (!tensor_held(t)) return 0;
    CHECK(t->local[0].nblocks == 1, "tensor %s: dim 0 in %d blocks", t->name, t->local[0].nblocks);
    return t->local[0].count[0] * (t->local[0].repeat > 1 ? t->local[0].repeat : 1);
}

/* Plans every tensor's parts, agreed over world, and the staging the largest part needs. */
static void read_plans_make(const model *m, const stored_tensor *tensors, int n_names,
                            const char *const *names, MPI_Comm world, read_plan *plans,
                            size_t *max_bytes, long *max_scales) {
    *max_bytes = sizeof(float), *max_scales = 1;
    const long chunk = load_chunk_bytes();
    for (int i = 0; i < n_names; i++) {
        const tensor_desc *t = model_find_tensor(m, names[i]);
        const stored_tensor *s = &tensors[i];
        read_plan *p = &plans[i];
        *p = (read_plan){0};
        const long n0 = held_entries(t), n = n0 > 0 ? tensor_local_elems(t) : 0;
        long mine = 0;
        if (n > 0) {
            const long inner = n / n0;
            p->entry_bytes = (size_t)inner * dtype_size(s->stored);
            /* bf16 widened to f32 needs the f32 values beside the stored ones */
            if (s->stored == DTYPE_BF16 && held_dtype(m, t) == DTYPE_F32)
                p->entry_bytes += (size_t)inner * sizeof(float);
            /* q4_1's and q4_k's mins follow the scales in the same staging */
            if (s->stored == DTYPE_INT8)
                p->entry_scales = tensor_scale_count(m, t) / n0 * (s->mins >= 0 ? 2 : 1);
            const long fit = chunk / (long)p->entry_bytes;
            long per = fit < 1 ? 1 : fit;
            /* a repeated run (an expert-parallel rank's experts of each layer): parts no longer
             * than one run, so each covers at most two runs (tensor_part_init) */
            if (t->local[0].repeat > 1 && per > t->local[0].count[0]) per = t->local[0].count[0];
            mine = (n0 + per - 1) / per;
        }
        p->parts = agree_max_long(world, mine);
        if (p->parts < 1) p->parts = 1; /* nobody holds it: one empty collective read */
        p->per_part = n0 ? (n0 + p->parts - 1) / p->parts : 0;
        if ((size_t)p->per_part * p->entry_bytes > *max_bytes)
            *max_bytes = (size_t)p->per_part * p->entry_bytes;
        if (p->per_part * p->entry_scales > *max_scales)
            *max_scales = p->per_part * p->entry_scales;
    }
}

/* Stores one part of t staged in its stored dtype: float32 through model_store_tensor
 * (converted to the held dtype), a bf16 or int8 one held as stored through
 * model_store_tensor_stored, and bf16 held as f32 widened first. */
static void part_store(model *m, const backend *be, const tensor_desc *t, const stored_tensor *s,
                       long first, long count, char *staging, const float *scales, comm *tp) {
    tensor_part part;
    tensor_part_init(&part, m, t, first, count);
    const long n = tensor_local_elems(&part.d);
    /* every TP rank of a stage holds the same rows and parts, so the TP collectives inside
     * model_store_tensor line up */
    if (s->stored != DTYPE_F32 && (s->stored == held_dtype(m, t) || dtype_is_block(held_dtype(m, t)))) {
        model_store_tensor_stored(m, be, &part.d, staging, scales);
        return;
    }
    float *values = (float *)staging;
    if (s->stored == DTYPE_BF16) { /* held as f32: widened exactly */
        values = (float *)(staging + (size_t)n * sizeof(uint16_t));
        convert_bf16_to_f32(values, (const uint16_t *)staging, n);
    }
    model_store_tensor(m, be, &part.d, values, tp);
    /* a tied head kept in the weight dtype is a second tensor named wte over the same shard
     * (model_add_head_copy): it stores the values just read (wte is always stored as float32,
     * checkpoint_tensor_dtype) */
    for (int c = 0; c < m->n_tensors; c++) {
        const tensor_desc *copy = &m->tensors[c];
        if (copy == t || strcmp(copy->name, t->name) != 0 || !tensor_held(copy)) continue;
        CHECK(tensor_local_elems(copy) == tensor_local_elems(t), "tensor %s: the copy differs",
              t->name);
        tensor_part copy_part;
        tensor_part_init(&copy_part, m, copy, first, count);
        model_store_tensor(m, be, &copy_part.d, values, tp);
    }
}

/* Reads part k of one tensor (its values and an int8 one's scales, collectively) and, when no
 * rank's read of it failed, stores it. The ranks agree on failure before storing: the store's
 * TP collectives need every TP rank of a stage, and a failed checksum fails the read only on
 * the ranks whose chunks hold the damage. Returns 1 when some rank failed (err holds this
 * rank's reason, if it had one). */
static int part_read(model *m, const backend *be, const tensor_desc *t, const stored_tensor *s,
                     const read_plan *p, long k, hid_t mem, hid_t xfer, MPI_Comm world,
                     char *staging, float *scales, comm *tp, checkpoint_read_error *err) {
    /* this rank's dim-0 entries of part k: none once its own run out */
    const long n0 = held_entries(t);
    const long first = k * p->per_part < n0 ? k * p->per_part : n0;
    const long count = n0 - first < p->per_part ? n0 - first : p->per_part;
    tensor_part part;
    if (count > 0) tensor_part_init(&part, m, t, first, count);
    const long n = count > 0 ? tensor_local_elems(&part.d) : 0;
    shard_transfer(s->values, n > 0 ? &part.d : NULL, n, mem, xfer, world, staging, 0, err);
    if (s->stored == DTYPE_INT8) {
        const tensor_desc sd = n > 0 ? scale_desc(&part.d, s->group) : (tensor_desc){0};
        const long ns = n > 0 ? tensor_local_elems(&sd) : 0;
        shard_transfer(s->scales, n > 0 ? &sd : NULL, ns, H5T_NATIVE_FLOAT, xfer, world, scales, 0,
                       err);
        if (s->mins >= 0) /* model_store_tensor_stored takes them after the scales */
            shard_transfer(s->mins, n > 0 ? &sd : NULL, ns, H5T_NATIVE_FLOAT, xfer, world,
                           scales + ns, 0, err);
    }
    if (agree_any_bad(world, err->kind != CHECKPOINT_READ_OK)) return 1;
    if (n > 0) part_store(m, be, t, s, first, count, staging, scales, tp);
    return 0;
}

/* Reads this rank's shard of every dataset, part by part (collectively; closing each), and
 * stores it. With verify, HDF5 checks the checksum of every chunk read. The ranks stop
 * together at the first tensor whose read failed on any rank, and report it once. */
static int weights_read_shards(model *m, const backend *be,
                               stored_tensor tensors[CHECKPOINT_N_TENSORS], MPI_Comm world,
                               comm *tp, const char *path, int verify) {
    const char *const *names = NULL;
    const int n_names = checkpoint_tensor_list(&m->cfg, &names);
    read_plan plans[CHECKPOINT_N_TENSORS];
    size_t max_bytes;
    long max_scales;
    read_plans_make(m, tensors, n_names, names, world, plans, &max_bytes, &max_scales);
    char *staging = xmalloc(max_bytes);
    float *scales = xmalloc((size_t)max_scales * sizeof(float));
    hid_t xfer = H5Pcreate(H5P_DATASET_XFER);
    H5_CHECK(xfer);
    H5_CHECK(H5Pset_dxpl_mpio(xfer, H5FD_MPIO_COLLECTIVE));
    H5_CHECK(H5Pset_edc_check(xfer, verify ? H5Z_ENABLE_EDC : H5Z_DISABLE_EDC));
    /* memory types equal to the file's, so HDF5 converts nothing and stays collective */
    hid_t bf16 = checkpoint_h5_type(DTYPE_BF16);
    int rc = STATUS_OK;
    for (int i = 0; i < n_names; i++) {
        const tensor_desc *t = model_find_tensor(m, names[i]);
        const stored_tensor *s = &tensors[i];
        const hid_t mem = s->stored == DTYPE_INT8   ? H5T_NATIVE_INT8
                          : s->stored == DTYPE_BF16 ? bf16
                                                    : H5T_NATIVE_FLOAT;
        checkpoint_read_error err = {.kind = CHECKPOINT_READ_OK};
        int failed = 0;
        /* after a failed read the rest are closed unread */
        for (long k = 0; rc == STATUS_OK && !failed && k < plans[i].parts; k++)
            failed =
                part_read(m, be, t, s, &plans[i], k, mem, xfer, world, staging, scales, tp, &err);
        H5Dclose(s->values);
        if (s->scales >= 0) H5Dclose(s->scales);
        if (s->mins >= 0) H5Dclose(s->mins);
        if (failed) {
            read_failure_report(&err, path, names[i], world);
            rc = STATUS_BAD_INPUT;
        }
    }
    H5Tclose(bf16);
    H5Pclose(xfer);
    free(scales);
    free(staging);
    return rc;
}

int checkpoint_load(model *m, const backend *be, const char *path, MPI_Comm world, comm *tp,
                    int verify_checksums) {
    hid_t file = file_open_mpio(path, world, 0);
    if (file < 0) {
        error_set("%s: cannot open the checkpoint with parallel HDF5", path);
        return STATUS_BAD_INPUT;
    }
    /* the same attributes on every rank (checkpoint_read_stored has checked them) */
    long long version = 0;
    checkpoint_storage st;
    if (h5_attr_read_long(file, "format_version", &version) != 0 ||
        checkpoint_read_storage_attrs(file, path, version, &st) != STATUS_OK) {
        if (version == 0) error_set("%s: no root attribute 'format_version'", path);
        H5Fclose(file);
        return STATUS_BAD_INPUT;
    }
    stored_tensor tensors[CHECKPOINT_N_TENSORS];
    int unchecked = 0;
    if (weights_open_checked(file, m, path, world, &st, tensors, &unchecked) != STATUS_OK) {
        H5Fclose(file);
        return STATUS_BAD_INPUT;
    }
    /* the same file on every rank, so the same count: one line, from rank 0 */
    const char *const *names = NULL;
    const int n_names = checkpoint_tensor_list(&m->cfg, &names);
    if (verify_checksums && unchecked > 0 && agree_comm_rank(world) == 0)
        fprintf(stderr,
                "tripar: warning: %s: %d of its %d weight tensors carry no checksum (written "
                "before tripar checksummed checkpoints): they load unverified. Write the "
                "checkpoint again to add them (docs/checkpoint.md, \"Integrity\")\n",
                path, unchecked, n_names);
    const int rc = weights_read_shards(m, be, tensors, world, tp, path, verify_checksums);
    H5_CHECK(H5Fclose(file));
    if (rc != STATUS_OK) return rc;
    return model_weights_finite(m, world, path); /* NaN and Inf are refused (docs/checkpoint.md) */
}

/* A fingerprint of the slice a rank holds, to tell TP-sharded from TP-replicated tensors. */
static uint64_t slice_fingerprint(const tensor_desc *t) {
    if (!tensor_held(t)) return 0;
    uint64_t h = 0x9e3779b97f4a7c15ull;
    for (int d = 0; d < t->ndims; d++)
        for (int b = 0; b < slice_blocks(&t->local[d]); b++) {
            long start, len;
            slice_block(&t->local[d], b, &start, &len);
            h = synthetic_hash64(h ^ (uint64_t)start);
            h = synthetic_hash64(h ^ ((uint64_t)len << 1));
        }
    return h | 1;
}

void checkpoint_write_config_attrs(hid_t file, const model_config *cfg) {
    h5_attr_write_string(file, "format", CHECKPOINT_FORMAT);
    h5_attr_write_int(file, "format_version", CHECKPOINT_FORMAT_VERSION_FP32);
    h5_attr_write_int(file, "layers", cfg->layers);
    h5_attr_write_int(file, "heads", cfg->heads);
    h5_attr_write_int(file, "embd", cfg->embd);
    h5_attr_write_int(file, "vocab", cfg->vocab);
    h5_attr_write_int(file, "ctx", cfg->ctx);
    h5_attr_write_int(file, "mlp", cfg->mlp);
    h5_attr_write_double(file, "ln_eps", (double)cfg->ln_eps);
    h5_attr_write_string(file, "norm", cfg->norm == NORM_POST ? "post" : "pre");
    if (!arch_is_llama(cfg->arch)) return; /* no arch attribute: gpt2, as before Llama */
    h5_attr_write_string(file, "arch", arch_kind_name(cfg->arch));
    if (cfg->experts > 0) {
        h5_attr_write_int(file, "experts", cfg->experts);
        h5_attr_write_int(file, "experts_top_k", cfg->experts_top_k);
        h5_attr_write_int(file, "shared_expert_mlp", cfg->shared_mlp);
        h5_attr_write_int(file, "norm_topk_prob", cfg->norm_topk_prob);
    }
    h5_attr_write_int(file, "kv_heads", cfg->kv_heads);
    h5_attr_write_int(file, "tie_embeddings", cfg->tie_embeddings);
    h5_attr_write_double(file, "rope_theta", cfg->rope_theta);
    h5_attr_write_int(file, "attention_bias", cfg->attention_bias);
    if (cfg->head_dim > 0) h5_attr_write_int(file, "head_dim", cfg->head_dim);
    if (!cfg->rope_scaled) return;
    const rope_llama3 *sc = &cfg->rope_scaling;
    h5_attr_write_double(file, "rope_scaling_factor", sc->factor);
    h5_attr_write_double(file, "rope_scaling_low_freq_factor", sc->low_freq_factor);
    h5_attr_write_double(file, "rope_scaling_high_freq_factor", sc->high_freq_factor);
    h5_attr_write_int(file, "rope_scaling_original_max_position_embeddings",
                      sc->original_max_position_embeddings);
}

hid_t checkpoint_dataset_create(hid_t group, const model_config *cfg, const char *name) {
    long shape[3];
    int ndims = checkpoint_tensor_shape(cfg, name, shape);
    CHECK(ndims > 0, "unknown checkpoint tensor %s", name);
    return checkpoint_dataset_create_typed(group, name, ndims, shape, H5T_IEEE_F32LE);
}

hid_t checkpoint_dataset_create_typed(hid_t group, const char *name, int ndims, const long *shape,
                                      hid_t type) {
    hsize_t dims[3];
    for (int d = 0; d < ndims; d++)
        dims[d] = (hsize_t)shape[d];
    hid_t space = H5Screate_simple(ndims, dims, NULL);
    /* chunked and checksummed, with the stored element's size (bf16 2 bytes, int8 1) */
    hid_t dcpl = checkpoint_dcpl_create(ndims, dims, H5Tget_size(type));
    hid_t dset = H5Dcreate2(group, name, type, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5_CHECK(dset);
    H5Pclose(dcpl);
    H5Sclose(space);
    return dset;
}

int checkpoint_save(const model *m, uint64_t seed, const char *path, const mesh *mesh) {
    hid_t file = file_open_mpio(path, mesh->world, 1);
    if (file < 0) {
        error_set("%s: cannot create the checkpoint", path);
        return STATUS_RUNTIME;
    }
    checkpoint_write_config_attrs(file, &m->cfg);
    h5_attr_write_int(file, "synthetic_seed", (long long)seed);
    hid_t group = h5_group_open_or_create(file, "weights");

    const int tp_rank = mesh->coord[AXIS_TP], pp_rank = mesh->coord[AXIS_PP];
    const int dp_rank = mesh->coord[AXIS_DP], tp_size = mesh->size[AXIS_TP];
    long max_local = 1;
    for (int i = 0; i < m->n_tensors; i++)
        if (tensor_held(&m->tensors[i]) && tensor_local_elems(&m->tensors[i]) > max_local)
            max_local = tensor_local_elems(&m->tensors[i]);
    float *staging = xmalloc((unsigned long)max_local * sizeof(float));
    uint64_t *prints = xmalloc((unsigned long)tp_size * sizeof(uint64_t));
    hid_t xfer = H5Pcreate(H5P_DATASET_XFER);
    H5_CHECK(xfer);
    H5_CHECK(H5Pset_dxpl_mpio(xfer, H5FD_MPIO_COLLECTIVE));

    const char *const *names = NULL;
    const int n_names = checkpoint_tensor_list(&m->cfg, &names);
    for (int i = 0; i < n_names; i++) {
        const char *name = names[i];
        const tensor_desc *t = model_find_tensor(m, name);
        hid_t dset = checkpoint_dataset_create(group, &m->cfg, name);
        /* Replicated over TP when every TP rank holds the same slice (norms, output biases):
         * then tp_rank 0 alone writes it. */
        uint64_t mine = slice_fingerprint(t);
        agree_gather_bytes(mesh->axis_mpi[AXIS_TP], &mine, (int)sizeof mine, prints);
        int replicated = 1;
        for (int r = 1; r < tp_size; r++)
            replicated &= prints[r] == prints[0];
        int writes = tensor_held(t) && dp_rank == 0 && (!replicated || tp_rank == 0) &&
                     (strcmp(name, "wte") != 0 || pp_rank == 0);
        long n = writes ? tensor_local_elems(t) : 0;
        for (long k = 0; k < n; k++)
            staging[k] =
                synthetic_value(seed, t->name, tensor_global_index(t, k), t->init, t->init_std);
        shard_transfer(dset, n > 0 ? t : NULL, n, H5T_NATIVE_FLOAT, xfer, mesh->world, staging, 1,
                       NULL);
        H5Dclose(dset);
    }
    H5Pclose(xfer);
    free(prints);
    free(staging);
    H5Gclose(group);
    H5_CHECK(H5Fclose(file));
    return STATUS_OK;
}

/* A scalar fixed-length string dataset holding text (NUL-terminated). */
static void string_dataset_write(hid_t group, const char *name, const char *text) {
    hid_t type = h5_string_type(strlen(text) + 1);
    hid_t space = H5Screate(H5S_SCALAR);
    hid_t dset = H5Dcreate2(group, name, type, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    H5_CHECK(dset);
    H5_CHECK(H5Dwrite(dset, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, text));
    H5Dclose(dset);
    H5Sclose(space);
    H5Tclose(type);
}

void checkpoint_write_tokenizer(hid_t file, const char *vocab_json, const char *merges_txt,
                                const char *tokenizer_json) {
    hid_t group = h5_group_open_or_create(file, "tokenizer");
    if (tokenizer_json) {
        string_dataset_write(group, "json", tokenizer_json);
    } else {
        string_dataset_write(group, "vocab", vocab_json);
        string_dataset_write(group, "merges", merges_txt);
    }
    H5Gclose(group);
}

int checkpoint_read_tokenizer(const char *path, char **vocab_json, char **merges_txt,
                              char **tokenizer_json) {
    *vocab_json = *merges_txt = *tokenizer_json = NULL;
    hid_t file = h5_open_read(path);
    if (file < 0) return -1;
    int rc = 1;
    if (h5_exists(file, "/tokenizer/json")) {
        *tokenizer_json = h5_dataset_read_string(file, "/tokenizer/json");
        rc = *tokenizer_json ? 0 : -1;
        if (rc) error_set("%s: /tokenizer/json must be a scalar string", path);
    } else if (h5_exists(file, "/tokenizer/vocab") && h5_exists(file, "/tokenizer/merges")) {
        *vocab_json = h5_dataset_read_string(file, "/tokenizer/vocab");
        *merges_txt = h5_dataset_read_string(file, "/tokenizer/merges");
        rc = 0;
        if (!*vocab_json || !*merges_txt) {
            error_set("%s: /tokenizer/vocab and /tokenizer/merges must be scalar strings", path);
            free(*vocab_json);
            free(*merges_txt);
            *vocab_json = *merges_txt = NULL;
            rc = -1;
        }
    }
    H5Fclose(file);
    return rc;
}

int checkpoint_load_tokenizer(tokenizer **t, const char *path) {
    *t = NULL;
    char *vocab = NULL, *merges = NULL, *json = NULL;
    int rc = checkpoint_read_tokenizer(path, &vocab, &merges, &json);
    if (rc < 0) return STATUS_BAD_INPUT;
    if (rc == 1) return 1;
    rc = json ? tokenizer_load_json(t, json, "json") : tokenizer_load_strings(t, vocab, merges);
    free(vocab);
    free(merges);
    free(json);
    if (rc != STATUS_OK) {
        char why[1024];
        snprintf(why, sizeof why, "%s", error_message());
        error_set("%s: /tokenizer: %s", path, why);
    }
    return rc;
}

/* One optional integer attribute of /tokenizer into *out (left -1 when absent); -1 when it is
 * there but not an integer in [lo, hi]. */
static int tokenizer_attr_int(hid_t group, const char *path, const char *name, long long lo,
                              long long hi, long long *out) {
    if (!h5_attr_exists(group, name)) return 0;
    long long v;
    if (h5_attr_read_long(group, name, &v) != 0 || v < lo || v > hi) {
        error_set("%s: /tokenizer attribute %s must be an integer from %lld to %lld", path, name,
                  lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int checkpoint_read_tokenizer_meta(const char *path, tokenizer_meta *m) {
    m->bos_id = m->eos_id = -1;
    m->add_bos = -1;
    m->chat_template = NULL;
    hid_t file = h5_open_read(path);
    if (file < 0) return -1;
    int rc = 0;
    if (h5_exists(file, "/tokenizer")) {
        hid_t group = H5Gopen2(file, "/tokenizer", H5P_DEFAULT);
        H5_CHECK(group);
        long long add_bos = -1;
        rc = tokenizer_attr_int(group, path, "bos_token_id", 0, INT32_MAX, &m->bos_id);
        if (!rc) rc = tokenizer_attr_int(group, path, "eos_token_id", 0, INT32_MAX, &m->eos_id);
        if (!rc) rc = tokenizer_attr_int(group, path, "add_bos_token", 0, 1, &add_bos);
        m->add_bos = (int)add_bos;
        if (!rc && h5_attr_exists(group, "chat_template") &&
            !(m->chat_template = h5_attr_read_string_alloc(group, "chat_template"))) {
            error_set("%s: /tokenizer attribute chat_template must be a string", path);
            rc = -1;
        }
        H5Gclose(group);
    }
    H5Fclose(file);
    if (rc) tokenizer_meta_free(m);
    return rc;
}

void tokenizer_meta_free(tokenizer_meta *m) {
    free(m->chat_template);
    m->chat_template = NULL;
}
