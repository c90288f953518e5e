/* The perplexity line of `tripar report` (report_perplexity.h). */
#include "cli/report_perplexity.h"

#include <hdf5.h>

#include "io/h5util.h"

void report_perplexity_print(FILE *out, const run_data *run) {
    if (h5_object_type(run->file, "output/nll") != H5I_DATASET) return;
    hid_t d = H5Dopen2(run->file, "output/nll", H5P_DEFAULT);
    if (d < 0) return;
    double ppl = 0;
    long long count = 0, first = 0;
    hsize_t dims[2] = {0, 0};
    hid_t space = H5Dget_space(d);
    const int ok = h5_attr_read_double(d, "perplexity", &ppl) == 0 &&
                   h5_attr_read_long(d, "count", &count) == 0 &&
                   h5_attr_read_long(d, "first", &first) == 0 && space >= 0 &&
                   H5Sget_simple_extent_ndims(space) == 2 &&
                   H5Sget_simple_extent_dims(space, dims, NULL) == 2;
    if (space >= 0) H5Sclose(space);
    H5Dclose(d);
    if (!ok) {
        fprintf(out, "  perplexity: /output/nll lacks its attributes (perplexity, count, first)\n");
        return;
    }
    fprintf(out, "  perplexity %.4f over %lld tokens (%llu windows of %llu, tokens %lld to %llu of "
                 "each)\n",
            ppl, count, (unsigned long long)dims[0], (unsigned long long)dims[1], first + 1,
            (unsigned long long)dims[1] - 1);
}
