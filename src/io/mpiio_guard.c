/* The guard on MPI-IO writes (mpiio_guard.h). These definitions of MPI_File_* take the place of
 * the MPI library's for parallel HDF5 (the MPI profiling interface: the real calls are
 * PMPI_File_*), so every write HDF5 makes is checked where it happens, on the rank where it
 * fails. Open MPI's OMPIO reports a full file system only as a short count, with
 * MPI_SUCCESS; ROMIO returns an error. Both count as failures here. */
#include "io/mpiio_guard.h"

#include <errno.h>
#include <mpi.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "base/check.h"

enum { GUARD_FILES = 16, GUARD_NAME = 1024 };

static int guard_on;
/* The names of the files open through MPI-IO, for the message (few are open at once). */
static struct {
    MPI_File fh;
    char name[GUARD_NAME];
} open_files[GUARD_FILES];

void mpiio_guard_install(void) { guard_on = 1; }

static const char *file_name(MPI_File fh) {
    for (int i = 0; i < GUARD_FILES; i++)
        if (open_files[i].fh == fh && open_files[i].name[0]) return open_files[i].name;
    return "an MPI-IO file";
}

/* What went wrong, in words: errno when the I/O layer left a telling one, else MPI's error,
 * else (a short count) a file system with less room than the write lacked, else the count. */
static void cause_describe(MPI_File fh, int err, int rc, long long want, long long got,
                           char *out, size_t len) {
    if (err == ENOSPC || err == EDQUOT || err == EIO || err == EFBIG || err == EROFS) {
        snprintf(out, len, "%s", strerror(err));
        if (out[0] >= 'A' && out[0] <= 'Z') out[0] = (char)(out[0] - 'A' + 'a');
        return;
    }
    if (rc != MPI_SUCCESS) {
        int n = 0;
        char text[MPI_MAX_ERROR_STRING];
        PMPI_Error_string(rc, text, &n);
        snprintf(out, len, "%s", text);
        return;
    }
    struct statvfs sv;
    if (want > got && statvfs(file_name(fh), &sv) == 0 &&
        (double)sv.f_bfree * (double)sv.f_frsize < (double)(want - got)) {
        snprintf(out, len, "no space left on device");
        return;
    }
    snprintf(out, len, "a short write (%lld of %lld bytes)", got, want);
}

/* Sleeps the whole time, through signals: the SIGTERM of an abort only sets tripar's stop flag,
 * and its SIGKILL follows. */
static void sleep_through(double seconds) {
    struct timespec left = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    while (nanosleep(&left, &left) != 0 && errno == EINTR) {
    }
}

/* One rank's failed write ends the job. Rank 0 speaks at once; the others wait a few seconds,
 * since a rank 0 failing in the same collective write ends them first (mpirun or srun kill
 * the ranks within a second or two): the message comes once. */
static void guard_fail(MPI_File fh, const char *cause) __attribute__((noreturn));
static void guard_fail(MPI_File fh, const char *cause) {
    const int rank = tripar_world_rank();
    if (rank != 0) sleep_through(3.0);
    fprintf(stderr, "tripar: error: %s writing %s (rank %d host %s); every rank stops, the file "
            "is left incomplete\n", cause, file_name(fh), rank, tripar_host());
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, TRIPAR_EXIT_RUNTIME);
    _exit(TRIPAR_EXIT_RUNTIME);
}

/* Checks a call's return code and, for a write of count items of type, its count. err is the
 * errno the call left (cleared before it). */
static void call_check(MPI_File fh, int rc, int err, int count, MPI_Datatype type,
                       const MPI_Status *status) {
    if (!guard_on) return;
    int size = 0, done = 0;
    if (count > 0) PMPI_Type_size(type, &size);
    if (rc == MPI_SUCCESS &&
        (count <= 0 || (PMPI_Get_count(status, type, &done) == MPI_SUCCESS &&
                        done != MPI_UNDEFINED && done >= count)))
        return;
    /* HDF5 writes bytes (MPI_BYTE or types built of it): elements are bytes */
    MPI_Count got = 0;
    if (count > 0 && (PMPI_Get_elements_x(status, type, &got) != MPI_SUCCESS || got < 0))
        got = 0;
    char cause[256];
    cause_describe(fh, err, rc, (long long)count * size, (long long)got, cause, sizeof cause);
    guard_fail(fh, cause);
}

int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh) {
    int rc = PMPI_File_open(comm, filename, amode, info, fh);
    if (rc != MPI_SUCCESS) return rc;
    for (int i = 0; i < GUARD_FILES; i++)
        if (!open_files[i].name[0]) {
            open_files[i].fh = *fh;
            snprintf(open_files[i].name, GUARD_NAME, "%s", filename);
            break;
        }
    return rc;
}

int MPI_File_close(MPI_File *fh) {
    for (int i = 0; i < GUARD_FILES; i++)
        if (open_files[i].name[0] && open_files[i].fh == *fh) open_files[i].name[0] = '\0';
    return PMPI_File_close(fh);
}

int MPI_File_write_at(MPI_File fh, MPI_Offset offset, const void *buf, int count,
                      MPI_Datatype type, MPI_Status *status) {
    MPI_Status own;
    if (status == MPI_STATUS_IGNORE) status = &own;
    errno = 0;
    int rc = PMPI_File_write_at(fh, offset, buf, count, type, status);
    call_check(fh, rc, errno, count, type, status);
    return rc;
}

int MPI_File_write_at_all(MPI_File fh, MPI_Offset offset, const void *buf, int count,
                          MPI_Datatype type, MPI_Status *status) {
    MPI_Status own;
    if (status == MPI_STATUS_IGNORE) status = &own;
    errno = 0;
    int rc = PMPI_File_write_at_all(fh, offset, buf, count, type, status);
    call_check(fh, rc, errno, count, type, status);
    return rc;
}

int MPI_File_set_size(MPI_File fh, MPI_Offset size) {
    errno = 0;
    int rc = PMPI_File_set_size(fh, size);
    call_check(fh, rc, errno, 0, MPI_BYTE, NULL);
    return rc;
}

int MPI_File_sync(MPI_File fh) {
    errno = 0;
    int rc = PMPI_File_sync(fh);
    call_check(fh, rc, errno, 0, MPI_BYTE, NULL);
    return rc;
}
