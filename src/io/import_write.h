/* What the importers (import_hf.c, import_gguf.c) share for writing a checkpoint: the output
 * path checks, creating the file, and one source tensor written into its slice of a stacked
 * /weights dataset. */
#pragma once
#include <hdf5.h>

/* The checkpoint path out may be written (path_check_output) and is none of the n inputs,
 * compared by inode so a link or DIR/./file is caught too. STATUS_OK or STATUS_BAD_INPUT with
 * error_message() naming the path. */
int import_out_check(const char *out, const char *const *inputs, int n);

/* Creates (truncates) the checkpoint out; STATUS_BAD_INPUT with a message when it cannot. */
int import_checkpoint_create(const char *out, hid_t *file);

/* Index of /weights/<name> in names (name is one of them). */
int import_dataset_index(const char *const *names, const char *name);

/* Writes src, rows x cols (ndims 2) or cols values (ndims 1), into layer slice `layer` of dset
 * (-1: an unstacked dataset), starting at row_offset of its row dimension (the last one for a
 * 1-D tensor): a row block of qkv_w / gate_up_w, or a block of qkv_b. */
void import_slice_write(hid_t dset, int layer, long row_offset, int ndims, long rows, long cols,
                        const float *src);
