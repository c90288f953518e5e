/* A checkpoint's stored precision (docs/checkpoint.md, "Stored precision"): its root
 * attributes, which dataset holds which dtype, the HDF5 types of bf16 and int8, and which job
 * precisions may load it. Shared by the importers (write) and checkpoint.c (check, load). */
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "io/checkpoint.h"
#include "io/h5util.h"
#include "kernels/quant_blocks.h"

/* The precisions a checkpoint may be stored in, as `import --precision` and the `precision`
 * attribute name them. */
static const precision_kind storable[] = {PRECISION_FP32, PRECISION_BF16, PRECISION_INT8W,
                                          PRECISION_Q8_0, PRECISION_Q4_0, PRECISION_Q4_1,
                                          PRECISION_Q4_K};

const char *checkpoint_precision_names(void) {
    return "fp32, bf16, int8w, q8_0, q4_0, q4_1, q4_k";
}

int checkpoint_precision_parse(const char *name, precision_kind *p) {
    for (size_t i = 0; i < sizeof storable / sizeof storable[0]; i++)
        if (strcmp(name, precision_kind_name(storable[i])) == 0) {
            *p = storable[i];
            return 0;
        }
    return -1;
}

int checkpoint_read_storage_attrs(hid_t file, const char *path, long long version,
                                  checkpoint_storage *st) {
    *st = (checkpoint_storage){.precision = PRECISION_FP32};
    if (version < 2) return STATUS_OK; /* before stored precisions: fp32 */
    char name[16];
    if (h5_attr_read_string(file, "precision", name, sizeof name) != 0 ||
        checkpoint_precision_parse(name, &st->precision) != 0) {
        error_set("%s: format_version 2 needs the root attribute 'precision', one of %s", path,
                  checkpoint_precision_names());
        return STATUS_BAD_INPUT;
    }
    long long group = 0, head = 0;
    if (h5_attr_read_long(file, "int8_group", &group) != 0 || group < 0 || group > (1 << 16) ||
        group % 32 != 0 || (group > 0 && st->precision != PRECISION_INT8W)) {
        error_set("%s: missing or invalid root attribute 'int8_group' (0, or a multiple of 32 "
                  "with precision int8w)",
                  path);
        return STATUS_BAD_INPUT;
    }
    if (h5_attr_read_long(file, "quantize_head", &head) != 0 || (head != 0 && head != 1)) {
        error_set("%s: missing or invalid root attribute 'quantize_head' (0 or 1)", path);
        return STATUS_BAD_INPUT;
    }
    st->int8_group = (int)group, st->quantize_head = (int)head;
    return STATUS_OK;
}

void checkpoint_write_storage_attrs(hid_t file, const checkpoint_storage *st) {
    if (st->precision == PRECISION_FP32) return; /* version 1, readable by every tripar */
    h5_attr_write_int(file, "format_version", CHECKPOINT_FORMAT_VERSION);
    h5_attr_write_string(file, "precision", precision_kind_name(st->precision));
    h5_attr_write_int(file, "int8_group", st->int8_group);
    h5_attr_write_int(file, "quantize_head", st->quantize_head);
}

checkpoint_storage checkpoint_storage_for(const model_config *cfg, precision_kind p,
                                          int int8_group) {
    model_config c = *cfg;
    model_config_set_precision(&c, p, int8_group, -1);
    return (checkpoint_storage){
        .precision = p, .int8_group = c.int8_group, .quantize_head = c.quantize_head};
}

dtype checkpoint_tensor_dtype(const model_config *cfg, const checkpoint_storage *st,
                              const char *name, int *group) {
    if (group) *group = 0;
    if (st->precision == PRECISION_FP32) return DTYPE_F32;
    /* The engine's own size table on one rank says which tensors are matrices in the weight
     * dtype and how each int8 one is grouped; the file stores each tensor as a load in
     * st->precision holds it, so a load reads it as it is. */
    model_config c = *cfg;
    model_config_set_precision(&c, st->precision, st->int8_group, st->quantize_head);
    shard_geom g;
    shard_geom_init(&g, &c, 1, 0, 1, 0);
    model m;
    const dtype wtype = model_weight_dtype(st->precision);
    model_tensor_table(&m, &c, &g, wtype);
    for (int i = 0; i < m.n_tensors; i++) {
        const tensor_desc *t = &m.tensors[i];
        if (strcmp(t->name, name) != 0) continue; /* the first: wte itself, never its copy */
        if (!t->is_matrix) return DTYPE_F32;
        if (group && wtype == DTYPE_INT8) *group = m.int8[t->input].group;
        if (!dtype_is_block(wtype)) return wtype;
        if (group) *group = QBLOCK; /* the planes of qblocks_unpack */
        return DTYPE_INT8;
    }
    return DTYPE_F32;
}

void checkpoint_scale_name(const char *name, char *out, size_t len) {
    snprintf(out, len, "%s%s", name, CHECKPOINT_SCALE_SUFFIX);
}

void checkpoint_min_name(const char *name, char *out, size_t len) {
    snprintf(out, len, "%s%s", name, CHECKPOINT_MIN_SUFFIX);
}

hid_t checkpoint_h5_type(dtype t) {
    switch (t) {
    case DTYPE_INT8: return H5Tcopy(H5T_STD_I8LE);
    case DTYPE_BF16: {
        /* bfloat16 as HDF5 describes floats: sign bit 15, 8 exponent bits at 7 (bias 127), 7
         * mantissa bits at 0. A float class, so h5dump and h5py read it as numbers. */
        hid_t b = H5Tcopy(H5T_IEEE_F32LE);
        H5_CHECK(b);
        H5_CHECK(H5Tset_fields(b, 15, 7, 8, 0, 7));
        H5_CHECK(H5Tset_precision(b, 16));
        H5_CHECK(H5Tset_size(b, 2));
        H5_CHECK(H5Tset_ebias(b, 127));
        return b;
    }
    case DTYPE_F16:
    case DTYPE_F32:
    case DTYPE_Q8_0: /* stored as int8 quants and float32 scales (docs/checkpoint.md) */
    case DTYPE_Q4_0:
    case DTYPE_Q4_1:
    case DTYPE_Q4_K: break;
    }
    return H5Tcopy(H5T_IEEE_F32LE);
}

int checkpoint_h5_type_is(hid_t type, dtype t) {
    const H5T_class_t cls = H5Tget_class(type);
    const size_t size = H5Tget_size(type);
    if (t == DTYPE_INT8) return cls == H5T_INTEGER && size == 1 && H5Tget_sign(type) == H5T_SGN_2;
    if (t == DTYPE_F32) return cls == H5T_FLOAT && size == sizeof(float);
    if (t != DTYPE_BF16 || cls != H5T_FLOAT || size != 2) return 0;
    size_t spos, epos, esize, mpos, msize;
    H5_CHECK(H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize));
    return spos == 15 && epos == 7 && esize == 8 && mpos == 0 && msize == 7 &&
           H5Tget_ebias(type) == 127 && H5Tget_order(type) == H5T_ORDER_LE;
}

const char *checkpoint_storage_refusal(const checkpoint_storage *st, precision_kind p,
                                       const model_config *cfg, const char *path) {
    const char *s = precision_kind_name(st->precision), *want = precision_kind_name(p);
    /* what to import the source again with to load as p: p itself, or fp32 for fp16 */
    const char *again = p == PRECISION_FP16 ? "fp32" : want;
    if (st->precision == PRECISION_FP32) return NULL; /* converted at load, as always */
    if (st->precision == PRECISION_BF16 && p != PRECISION_BF16 && p != PRECISION_FP32) {
        error_set("model.precision = %s, but the checkpoint %s stores its matrices in bf16; "
                  "allowed with it: bf16 (as stored) or fp32 (widened exactly). For %s, import "
                  "the source again with --precision %s",
                  want, path, want, again);
        return "model.precision";
    }
    if (precision_is_block(st->precision) && p != st->precision) {
        error_set("model.precision = %s, but the checkpoint %s stores %s blocks; allowed with "
                  "it: %s (blocks are not requantised or widened back). For %s, import the "
                  "source again with --precision %s",
                  want, path, s, s, want, again);
        return "model.precision";
    }
    if (st->precision == PRECISION_INT8W && p != PRECISION_INT8W) {
        error_set("model.precision = %s, but the checkpoint %s stores int8w weights; allowed "
                  "with it: int8w (int8 weights are not widened back). For %s, import the "
                  "source again with --precision %s",
                  want, path, want, again);
        return "model.precision";
    }
    if (p == PRECISION_INT8W && cfg->int8_group != st->int8_group) {
        error_set("model.int8_group = %d, but the checkpoint %s stores int8w scales for "
                  "int8_group %d%s; allowed with it: %d (or leave model.int8_group out)",
                  cfg->int8_group, path, st->int8_group,
                  st->int8_group ? "" : " (one scale per row)", st->int8_group);
        return "model.int8_group";
    }
    if (p == PRECISION_INT8W && !cfg->tie_embeddings && st->quantize_head && !cfg->quantize_head) {
        error_set("model.quantize_head = false, but the checkpoint %s stores the untied head_w "
                  "in %s; allowed with it: auto or true",
                  path, s);
        return "model.quantize_head";
    }
    return NULL;
}
