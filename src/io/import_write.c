/* What the importers share for writing a checkpoint (import_write.h): output checks, creating
 * the file, and the /weights writer that stores each source tensor in the precision asked for. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/path.h"
#include "io/h5util.h"
#include "io/import_write.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

int import_out_check(const char *out, const char *const *inputs, int n) {
    char why[PATH_WHY_MAX];
    if (path_check_output(out, why, sizeof why) != 0) {
        error_set("--out '%s' %s", out, why);
        return STATUS_BAD_INPUT;
    }
    for (int i = 0; i < n; i++)
        if (path_same_file(out, inputs[i])) {
            error_set("--out '%s' is the same file as the input '%s'; an output may not replace "
                      "an input, so give it another path",
                      out, inputs[i]);
            return STATUS_BAD_INPUT;
        }
    return STATUS_OK;
}

int import_checkpoint_create(const char *out, hid_t *file) {
    H5E_BEGIN_TRY { *file = H5Fcreate(out, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT); }
    H5E_END_TRY;
    if (*file < 0) {
        error_set("%s: cannot create the checkpoint", out);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

/* Writes src (mem_type), rows x cols (ndims 2) or cols values (ndims 1), into layer slice
 * `layer` of dset (-1: unstacked) from row_offset of its row dimension. */
static void slice_write(hid_t dset, int layer, long row_offset, int ndims, long rows, long cols,
                        hid_t mem_type, const void *src) {
    hid_t fspace = H5Dget_space(dset);
    hsize_t start[3] = {0, 0, 0}, count[3];
    int nd = 0;
    if (layer >= 0) {
        start[nd] = (hsize_t)layer;
        count[nd++] = 1;
    }
    start[nd] = (hsize_t)row_offset;
    if (ndims == 2) count[nd++] = (hsize_t)rows;
    count[nd++] = (hsize_t)cols;
    H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL));
    hid_t mspace = H5Screate_simple(nd, count, NULL);
    H5_CHECK(H5Dwrite(dset, mem_type, mspace, fspace, H5P_DEFAULT, src));
    H5Sclose(mspace);
    H5Sclose(fspace);
}

int import_precision_fits(const model_config *cfg, precision_kind p) {
    if (!precision_is_block(p)) return STATUS_OK;
    const struct {
        long width;
        const char *what;
    } inputs[] = {{cfg->embd, "embd, the input of qkv_w, fc1_w / gate_up_w and head_w"},
                  {(long)cfg->heads * model_head_dim(cfg), "heads * head_dim, the input of proj_w"},
                  {cfg->mlp, "the MLP (or an expert's) width, the input of fc2_w / down_w"},
                  {cfg->shared_mlp, "the shared expert's width, the input of sh_down_w"}};
    const int bc = qblock_weights(model_weight_dtype(p));
    for (size_t i = 0; i < sizeof inputs / sizeof inputs[0]; i++)
        if (inputs[i].width % bc) { /* 0 (no shared expert) fits every block */
            error_set("--precision %s stores weight rows in blocks of %d columns, but %s is %ld; "
                      "allowed for this model: fp32, bf16, int8w%s",
                      precision_kind_name(p), bc, inputs[i].what, inputs[i].width,
                      inputs[i].width % QBLOCK == 0 ? ", q8_0, q4_0, q4_1" : "");
            return STATUS_BAD_INPUT;
        }
    return STATUS_OK;
}

void import_writer_open(import_writer *w, hid_t file, const model_config *cfg,
                        const import_options *o) {
    w->cfg = *cfg;
    w->st = checkpoint_storage_for(cfg, o->precision, o->int8_group);
    checkpoint_write_storage_attrs(file, &w->st);
    w->group = h5_group_open_or_create(file, "weights");
    w->n = checkpoint_tensor_list(cfg, &w->names);
    for (int d = 0; d < w->n; d++) {
        const char *name = w->names[d];
        w->stored[d] = checkpoint_tensor_dtype(cfg, &w->st, name, &w->int8_group[d]);
        w->scales[d] = w->mins[d] = -1;
        long shape[3];
        int nd = checkpoint_tensor_shape(cfg, name, shape);
        hid_t type = checkpoint_h5_type(w->stored[d]);
        w->values[d] = checkpoint_dataset_create_typed(w->group, name, nd, shape, type);
        H5Tclose(type);
        if (w->stored[d] != DTYPE_INT8) continue;
        char scale[64];
        checkpoint_scale_name(name, scale, sizeof scale);
        nd = checkpoint_scale_shape(cfg, name, w->int8_group[d], shape);
        w->scales[d] = checkpoint_dataset_create_typed(w->group, scale, nd, shape, H5T_IEEE_F32LE);
        if (!qblock_has_mins(model_weight_dtype(w->st.precision))) continue;
        checkpoint_min_name(name, scale, sizeof scale);
        w->mins[d] = checkpoint_dataset_create_typed(w->group, scale, nd, shape, H5T_IEEE_F32LE);
    }
}

/* The block dtype a matrix of w is held in (the storage's precision), or DTYPE_F32 for none. */
static dtype writer_block_dtype(const import_writer *w) {
    const dtype t = model_weight_dtype(w->st.precision);
    return dtype_is_block(t) ? t : DTYPE_F32;
}

int import_writer_takes_blocks(const import_writer *w, const char *dst) {
    for (int d = 0; d < w->n; d++)
        if (strcmp(w->names[d], dst) == 0)
            return w->stored[d] == DTYPE_INT8 && writer_block_dtype(w) != DTYPE_F32;
    return 0;
}

void import_writer_put_blocks(import_writer *w, const char *dst, int layer, long row_offset,
                              int ndims, long rows, long cols, dtype type, const void *blocks) {
    int d = 0;
    while (strcmp(w->names[d], dst) != 0)
        d++;
    CHECK(w->stored[d] == DTYPE_INT8 && type == writer_block_dtype(w) &&
              cols % qblock_weights(type) == 0,
          "import: %s blocks for /weights/%s stored as %s", dtype_name(type), dst,
          dtype_name(w->stored[d]));
    const long nb = cols / QBLOCK, n = (ndims == 2 ? rows : 1) * cols;
    int8_t *q = xmalloc((size_t)n);
    float *scale = xmalloc((size_t)(2 * (n / QBLOCK)) * sizeof(float)), *min = scale + n / QBLOCK;
    qblocks_unpack(type, q, scale, min, blocks, n / cols, cols);
    slice_write(w->values[d], layer, row_offset, ndims, rows, cols, H5T_NATIVE_INT8, q);
    slice_write(w->scales[d], layer, row_offset, ndims, rows, nb, H5T_NATIVE_FLOAT, scale);
    if (w->mins[d] >= 0)
        slice_write(w->mins[d], layer, row_offset, ndims, rows, nb, H5T_NATIVE_FLOAT, min);
    free(scale);
    free(q);
}

void import_writer_put(import_writer *w, const char *dst, int layer, long row_offset, int ndims,
                       long rows, long cols, const float *src) {
    int d = 0;
    while (strcmp(w->names[d], dst) != 0)
        d++;
    const size_t n = (size_t)(ndims == 2 ? rows * cols : cols);
    if (w->stored[d] == DTYPE_F32) {
        slice_write(w->values[d], layer, row_offset, ndims, rows, cols, H5T_NATIVE_FLOAT, src);
    } else if (w->stored[d] == DTYPE_BF16) {
        uint16_t *half = xmalloc(n * sizeof(uint16_t));
        convert_f32_to_bf16(half, src, (long)n);
        hid_t bf16 = checkpoint_h5_type(DTYPE_BF16); /* as stored: HDF5 converts nothing */
        slice_write(w->values[d], layer, row_offset, ndims, rows, cols, bf16, half);
        H5Tclose(bf16);
        free(half);
    } else if (writer_block_dtype(w) != DTYPE_F32) { /* ggml's quantiser, then its planes */
        const dtype type = writer_block_dtype(w);
        void *blocks = xmalloc(dtype_bytes(type, n));
        qblocks_quantize(type, blocks, src, (long)n / cols, cols);
        import_writer_put_blocks(w, dst, layer, row_offset, ndims, rows, cols, type, blocks);
        free(blocks);
    } else {
        /* the rows are whole here, so a row's absmax is the one the TP ranks agree on at
         * load, and groups start at column 0 as they do on every rank (model_int8_layout) */
        const int group = w->int8_group[d];
        const long per_row = group ? (cols + group - 1) / group : 1;
        int8_t *q = xmalloc(n);
        float *scale = xmalloc((size_t)(rows * per_row) * sizeof(float));
        if (group)
            quant_groups_int8(q, scale, src, rows, cols, group);
        else
            quant_rows_int8(q, scale, src, rows, cols, NULL);
        slice_write(w->values[d], layer, row_offset, ndims, rows, cols, H5T_NATIVE_INT8, q);
        if (group)
            slice_write(w->scales[d], layer, row_offset, 2, rows, per_row, H5T_NATIVE_FLOAT, scale);
        else /* one per row: a 1-D block of the scale dataset's rows */
            slice_write(w->scales[d], layer, row_offset, 1, 1, rows, H5T_NATIVE_FLOAT, scale);
        free(scale);
        free(q);
    }
}

void import_writer_close(import_writer *w) {
    for (int d = 0; d < w->n; d++) {
        H5Dclose(w->values[d]);
        if (w->scales[d] >= 0) H5Dclose(w->scales[d]);
        if (w->mins[d] >= 0) H5Dclose(w->mins[d]);
    }
    H5Gclose(w->group);
}
