/* Rank-aware failure reporting shared by every module (see check.h). */
#include "base/check.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char last_error[2048];

int tripar_world_rank(void) {
    int initialized = 0, finalized = 0, rank = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    return rank;
}

const char *tripar_host(void) {
    static char host[256];
    if (!host[0] && gethostname(host, sizeof host - 1) != 0) strcpy(host, "unknown");
    return host;
}

const char *tripar_mpi_error_string(int rc) {
    static char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "MPI error %d", rc);
    return text;
}

void tripar_die(const char *file, int line, const char *stmt, const char *message) {
    fprintf(stderr, "[rank %d host %s] %s:%d: %s: %s\n", tripar_world_rank(), tripar_host(), file,
            line, stmt, message);
    fflush(stderr);
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, TRIPAR_EXIT_RUNTIME);
    exit(TRIPAR_EXIT_RUNTIME);
}

void tripar_dief(const char *file, int line, const char *fmt, ...) {
    char message[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    tripar_die(file, line, "check failed", message);
}

void error_vset(const char *fmt, va_list ap) { vsnprintf(last_error, sizeof last_error, fmt, ap); }

void error_set(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    error_vset(fmt, ap);
    va_end(ap);
}

const char *error_message(void) { return last_error; }
void error_clear(void) { last_error[0] = '\0'; }

void *xmalloc(unsigned long bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (!p) tripar_dief(__FILE__, __LINE__, "out of memory allocating %lu bytes", bytes);
    return p;
}

void *xcalloc(unsigned long count, unsigned long size) {
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        tripar_dief(__FILE__, __LINE__, "out of memory allocating %lu x %lu bytes", count, size);
    return p;
}
