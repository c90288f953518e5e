/* A guard on the MPI-IO writes of parallel HDF5, through the MPI profiling interface: a write
 * that fails or comes up short (a full file system, a quota, EIO) on any rank ends the whole
 * job at once with one message naming the file. HDF5 cannot be left to report it: the error
 * reaches only the ranks whose own write failed, and inside one H5Fflush those skip a barrier
 * the others then wait in for ever. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* Starts guarding every MPI-IO write of this process (idempotent; the run file calls it
 * before it creates its file). Until then the wrappers pass calls through unchanged. */
void mpiio_guard_install(void);

#ifdef __cplusplus
}
#endif
