/* What the writers of other groups in src/io (runfile_telemetry.c) need of the run file that
 * runfile.c keeps private: the HDF5 file, its communicator and the shared free-space check. */
#pragma once
#include <hdf5.h>
#include <mpi.h>

#include "io/runfile.h"

/* The open HDF5 file (negative once closed). */
hid_t runfile_hdf5(const runfile *rf);
MPI_Comm runfile_comm(const runfile *rf);
/* Collective: 1 while the file system has room for bytes more (plus metadata), else 0 with
 * the file marked failed on every rank (runfile.c's space_agree). */
int runfile_room(runfile *rf, double bytes, const char *what);

/* Collective: appends counts[r] rows to group/rank_NNNNN for every rank r (created, empty, with
 * chunks of chunk_rows rows at the first call), this rank's from rows (runfile_tables.c). */
void runfile_tables_append(runfile *rf, const char *group, hid_t mtype, long chunk_rows,
                           const long long *counts, const void *rows);

/* Collective: this rank's block [start, start + count) of the dataset at path (ndims <= 4, dims
 * its global shape, created when absent with file type ftype; elem bytes per element in the
 * file, for the free-space check); a block with a zero count writes nothing but takes part. */
void runfile_write_block(runfile *rf, const char *path, hid_t ftype, hid_t mtype, size_t elem,
                         int ndims, const long *dims, const long *start, const long *count,
                         const void *data);
