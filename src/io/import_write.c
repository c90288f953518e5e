/* What the importers share for writing a checkpoint (import_write.h): output checks, creating
 * the file, and one tensor into its slice of a stacked dataset. */
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "base/path.h"
#include "io/h5util.h"
#include "io/import_write.h"

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

int import_dataset_index(const char *const *names, const char *name) {
    int d = 0;
    while (strcmp(names[d], name) != 0)
        d++;
    return d;
}

void import_slice_write(hid_t dset, int layer, long row_offset, int ndims, long rows, long cols,
                        const float *src) {
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
    H5_CHECK(H5Dwrite(dset, H5T_NATIVE_FLOAT, mspace, fspace, H5P_DEFAULT, src));
    H5Sclose(mspace);
    H5Sclose(fspace);
}
