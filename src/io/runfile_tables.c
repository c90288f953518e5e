/* Per-rank extendible tables under one group (/telemetry/rank_NNNNN, /sched/rank_NNNNN): each
 * rank appends its own rows at every flush, the way /timings is, so a partial file keeps what
 * was flushed. The one append both writers share (runfile_internal.h). */
#include <stdio.h>

#include "base/check.h"
#include "io/h5util.h"
#include "io/runfile_internal.h"
#include "parallel/agree.h"

/* Creates every rank's empty table (collective: every rank creates every one). */
static void tables_create(hid_t file, const char *group, int size, hid_t ftype, long chunk_rows) {
    hid_t g = h5_group_open_or_create(file, group);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hsize_t chunk[1] = {(hsize_t)chunk_rows}, zero[1] = {0}, unlimited[1] = {H5S_UNLIMITED};
    H5_CHECK(H5Pset_chunk(dcpl, 1, chunk));
    H5_CHECK(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER));
    hid_t space = H5Screate_simple(1, zero, unlimited);
    for (int r = 0; r < size; r++) {
        char name[32];
        snprintf(name, sizeof name, "rank_%05d", r);
        hid_t d = H5Dcreate2(g, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
        H5_CHECK(d);
        H5Dclose(d);
    }
    H5Sclose(space);
    H5Pclose(dcpl);
    H5Gclose(g);
}

void runfile_tables_append(runfile *rf, const char *group, hid_t mtype, long chunk_rows,
                           const long long *counts, const void *rows) {
    const MPI_Comm comm = runfile_comm(rf);
    const hid_t file = runfile_hdf5(rf);
    const int rank = agree_comm_rank(comm), size = agree_comm_size(comm);
    if (!h5_exists(file, group)) tables_create(file, group, size, mtype, chunk_rows);
    hid_t xfer = H5Pcreate(H5P_DATASET_XFER);
    H5_CHECK(H5Pset_dxpl_mpio(xfer, H5FD_MPIO_INDEPENDENT));
    /* extending is collective, so every rank extends every table; rows are then per rank */
    for (int r = 0; r < size; r++) {
        if (counts[r] == 0) continue; /* same decision on every rank */
        char path[64];
        snprintf(path, sizeof path, "%s/rank_%05d", group, r);
        hid_t d = H5Dopen2(file, path, H5P_DEFAULT);
        H5_CHECK(d);
        hid_t space = H5Dget_space(d);
        hsize_t have[1];
        H5Sget_simple_extent_dims(space, have, NULL);
        H5Sclose(space);
        hsize_t grown[1] = {have[0] + (hsize_t)counts[r]};
        H5_CHECK(H5Dset_extent(d, grown));
        if (r == rank) {
            hid_t fspace = H5Dget_space(d);
            hsize_t start[1] = {have[0]}, count[1] = {(hsize_t)counts[r]};
            H5_CHECK(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, NULL, count, NULL));
            hid_t mspace = H5Screate_simple(1, count, NULL);
            H5_CHECK(H5Dwrite(d, mtype, mspace, fspace, xfer, rows));
            H5Sclose(mspace);
            H5Sclose(fspace);
        }
        H5Dclose(d);
    }
    H5Pclose(xfer);
}
