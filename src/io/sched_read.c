/* Reads /sched (sched_read.h). HDF5 converts compound fields by name, so a table with more
 * fields, or these in another order, reads the same. */
#include "io/sched_read.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/h5util.h"

hid_t sched_file_row_type(void) {
    hid_t t = H5Tcreate(H5T_COMPOUND, sizeof(sched_file_row));
    H5_CHECK(t);
    H5_CHECK(H5Tinsert(t, "iteration", HOFFSET(sched_file_row, iteration), H5T_NATIVE_INT64));
    H5_CHECK(H5Tinsert(t, "step", HOFFSET(sched_file_row, step), H5T_NATIVE_INT64));
    H5_CHECK(H5Tinsert(t, "microbatch", HOFFSET(sched_file_row, microbatch), H5T_NATIVE_INT64));
    H5_CHECK(H5Tinsert(t, "t_start", HOFFSET(sched_file_row, t_start), H5T_NATIVE_DOUBLE));
    H5_CHECK(H5Tinsert(t, "t_end", HOFFSET(sched_file_row, t_end), H5T_NATIVE_DOUBLE));
    H5_CHECK(H5Tinsert(t, "run_delay", HOFFSET(sched_file_row, run_delay), H5T_NATIVE_DOUBLE));
    H5_CHECK(H5Tinsert(t, "nivcsw", HOFFSET(sched_file_row, nivcsw), H5T_NATIVE_INT64));
    H5_CHECK(H5Tinsert(t, "nvcsw", HOFFSET(sched_file_row, nvcsw), H5T_NATIVE_INT64));
    return t;
}

int sched_data_read(hid_t file, int world_size, sched_data *s) {
    memset(s, 0, sizeof *s);
    s->n_rows = xcalloc((unsigned long)(world_size > 0 ? world_size : 1), sizeof(long));
    s->rows = xcalloc((unsigned long)(world_size > 0 ? world_size : 1), sizeof(sched_file_row *));
    if (h5_object_type(file, "sched") != H5I_GROUP) return 0;
    s->present = 1;
    hid_t g = H5Gopen2(file, "sched", H5P_DEFAULT);
    H5_CHECK(g);
    if (h5_attr_read_string(g, "source", s->source, sizeof s->source) != 0) s->source[0] = '\0';
    if (h5_attr_read_long(g, "threads", &s->threads) != 0) s->threads = 0;
    H5Gclose(g);
    hid_t t = sched_file_row_type();
    for (int r = 0; r < world_size; r++) {
        char path[64];
        snprintf(path, sizeof path, "sched/rank_%05d", r);
        if (h5_object_type(file, path) != H5I_DATASET) continue;
        hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
        H5_CHECK(d);
        hid_t space = H5Dget_space(d);
        hssize_t n = H5Sget_simple_extent_npoints(space);
        if (n > 0) {
            s->rows[r] = xcalloc((unsigned long)n, sizeof(sched_file_row));
            herr_t err;
            H5E_BEGIN_TRY { err = H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, s->rows[r]); }
            H5E_END_TRY;
            s->n_rows[r] = err < 0 ? 0 : (long)n;
        }
        H5Sclose(space);
        H5Dclose(d);
    }
    H5Tclose(t);
    return 0;
}

void sched_data_free(sched_data *s, int world_size) {
    if (s->rows)
        for (int r = 0; r < world_size; r++)
            free(s->rows[r]);
    free(s->rows);
    free(s->n_rows);
    memset(s, 0, sizeof *s);
}
