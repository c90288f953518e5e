/* What the importers (import_hf.c, import_gguf.c) share for writing a checkpoint: the output
 * path checks, creating the file, and the writer of /weights, which stores each source tensor
 * (one layer's row block of a stacked dataset) in the precision asked for. */
#pragma once
#include <hdf5.h>

#include "io/checkpoint.h"

/* The checkpoint path out may be written (path_check_output) and is none of the n inputs,
 * compared by inode so a link or DIR/./file is caught too. STATUS_OK or STATUS_BAD_INPUT with
 * error_message() naming the path. */
int import_out_check(const char *out, const char *const *inputs, int n);

/* Creates (truncates) the checkpoint out; STATUS_BAD_INPUT with a message when it cannot. */
int import_checkpoint_create(const char *out, hid_t *file);

/* How an import stores the weights: `--precision` (fp32, bf16, int8w, q8_0, q4_0, q4_1, q4_k)
 * and, for int8w, `--int8-group` (model.int8_group's values: 0, one scale per row, or a multiple of 32). */
typedef struct import_options {
    precision_kind precision;
    int int8_group;
    int keep; /* import-gguf --precision keep: the GGUF's own block format (import_gguf.c) */
} import_options;

/* Whether cfg's matrices can be stored in precision p: a block format needs every matrix
 * input (embd, the attention width, the MLP or expert width, the shared expert's) a whole
 * number of 32-column blocks.
 * STATUS_OK, or STATUS_BAD_INPUT with error_message() naming the width and the tensor. */
int import_precision_fits(const model_config *cfg, precision_kind p);

/* The /weights datasets of one import, created in their stored dtypes. */
typedef struct {
    model_config cfg;
    checkpoint_storage st;
    hid_t group;
    const char *const *names;
    int n;
    hid_t values[CHECKPOINT_N_TENSORS]; /* /weights/<name> */
    hid_t scales[CHECKPOINT_N_TENSORS]; /* /weights/<name>_scale for int8, else -1 */
    hid_t mins[CHECKPOINT_N_TENSORS];   /* /weights/<name>_min for q4_1 and q4_k, else -1 */
    dtype stored[CHECKPOINT_N_TENSORS];
    int int8_group[CHECKPOINT_N_TENSORS]; /* int8: columns per scale, 0 per row */
} import_writer;

/* Writes the storage attributes of o (checkpoint_write_storage_attrs) and creates every
 * dataset of cfg's model in the dtype the storage gives it. */
void import_writer_open(import_writer *w, hid_t file, const model_config *cfg,
                        const import_options *o);

/* Stores src, rows x cols (ndims 2) or cols values (ndims 1), fp32, into layer slice `layer`
 * of /weights/<dst> (-1: an unstacked dataset), starting at row_offset of its row dimension
 * (the last one for a 1-D tensor): a row block of qkv_w / gate_up_w, or a block of qkv_b.
 * A matrix stored in bf16 is rounded to nearest even; in int8 its rows are quantised whole,
 * as a load in int8w quantises them (a row's scale from all its columns, the TP agreement's
 * result), and the scales go to the same rows of /weights/<dst>_scale. */
void import_writer_put(import_writer *w, const char *dst, int layer, long row_offset, int ndims,
                       long rows, long cols, const float *src);

/* The same for a matrix already in ggml's blocks of type (the storage's block format, cols a
 * multiple of its block): its planes (qblocks_unpack) go to /weights/<dst>, _scale and q4_1's
 * or q4_k's _min
 * as they are, with no fp32 copy, so an import keeps a GGUF's blocks bit for bit. */
void import_writer_put_blocks(import_writer *w, const char *dst, int layer, long row_offset,
                              int ndims, long rows, long cols, dtype type, const void *blocks);

/* Whether /weights/<dst> is stored as a block format's planes (a matrix, the storage a block
 * format): what import_writer_put_blocks takes. */
int import_writer_takes_blocks(const import_writer *w, const char *dst);

void import_writer_close(import_writer *w);
