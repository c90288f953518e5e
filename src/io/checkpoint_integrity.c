/* Checkpoint integrity (docs/checkpoint.md, "Integrity"): the chunked, Fletcher32-checksummed
 * creation properties every weight dataset is written with, and what the load needs to tell a
 * failed checksum from another read error and an old checkpoint from a checksummed one. */
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "io/checkpoint.h"

/* n cut into the fewest tiles of at most max elements, all of one size, so the edge tile
 * (which HDF5 stores whole) wastes less than one element per tile. */
static hsize_t tile_even(hsize_t n, hsize_t max) {
    if (max < 1) max = 1;
    const hsize_t tiles = (n + max - 1) / max;
    return (n + tiles - 1) / tiles;
}

hid_t checkpoint_dcpl_create(int ndims, const hsize_t *dims, size_t elem_bytes) {
    CHECK(ndims >= 1 && ndims <= 3 && elem_bytes > 0, "checkpoint dataset of %d dims", ndims);
    const hsize_t budget = CHECKPOINT_CHUNK_BYTES / elem_bytes;
    hsize_t chunk[3];
    if (ndims == 1) {
        chunk[0] = tile_even(dims[0], budget);
    } else {
        /* One layer per chunk, and a matrix tiled over rows and columns: TP splits some
         * matrices by rows and others by columns, and a square-ish tile keeps what a rank
         * reads close to its shard either way. */
        for (int d = 0; d < ndims - 2; d++)
            chunk[d] = 1;
        const hsize_t rows = dims[ndims - 2], cols = dims[ndims - 1];
        hsize_t side = 1;
        while ((side + 1) * (side + 1) <= budget)
            side++;
        hsize_t c = tile_even(cols, side);
        const hsize_t r = tile_even(rows, budget / c);
        if (r == rows) c = tile_even(cols, budget / r); /* few rows: widen the tile instead */
        chunk[ndims - 2] = r, chunk[ndims - 1] = c;
    }
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5_CHECK(dcpl);
    H5_CHECK(H5Pset_chunk(dcpl, ndims, chunk));
    /* Every chunk carries its own checksum, so each rank checks exactly the chunks its shard
     * reads, during the read, and HDF5's own tools (h5dump, h5py) check it too. */
    H5_CHECK(H5Pset_fletcher32(dcpl));
    return dcpl;
}

int checkpoint_dataset_checksummed(hid_t dset) {
    hid_t dcpl = H5Dget_create_plist(dset);
    H5_CHECK(dcpl);
    unsigned flags = 0, config = 0;
    size_t n_values = 0;
    char name[32];
    herr_t found;
    H5E_BEGIN_TRY {
        found = H5Pget_filter_by_id2(dcpl, H5Z_FILTER_FLETCHER32, &flags, &n_values, NULL,
                                     sizeof name, name, &config);
    }
    H5E_END_TRY;
    H5Pclose(dcpl);
    return found >= 0;
}

/* Keeps the innermost error's words: HDF5 pushes the cause first and each caller after it. */
static herr_t innermost_error(unsigned n, const H5E_error2_t *err, void *out) {
    checkpoint_read_error *e = out;
    if (n == 0 && err->desc) snprintf(e->desc, sizeof e->desc, "%s", err->desc);
    /* H5Zfletcher32.c: H5E_STORAGE, H5E_READERROR, "data error detected by Fletcher32
     * checksum"; the pipeline then fails the read with its own words */
    if (err->desc && strstr(err->desc, "Fletcher32")) e->kind = CHECKPOINT_READ_CHECKSUM;
    return 0;
}

void checkpoint_read_error_take(checkpoint_read_error *e) {
    e->kind = CHECKPOINT_READ_FAILED;
    snprintf(e->desc, sizeof e->desc, "no HDF5 error recorded");
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost_error, e);
    H5Eclear2(H5E_DEFAULT);
}
