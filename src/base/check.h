/* Rank-aware error checks. A failed call prints "[rank R host H] file:line: stmt: message"
 * and aborts the whole job: one rank calling exit() leaves its peers hanging in a collective. */
#pragma once
#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Exit codes of the CLI contract (DESIGN.md). */
enum {
    TRIPAR_EXIT_OK = 0,
    TRIPAR_EXIT_RUNTIME = 1,
    TRIPAR_EXIT_USAGE = 2,
};

/* Status returned by set-up and I/O paths a caller can recover from. */
typedef enum {
    STATUS_OK = 0,
    STATUS_BAD_INPUT = 2, /* the user's job, mesh or file is wrong: exit 2 */
    STATUS_RUNTIME = 1,   /* something failed while running: exit 1 */
} status;

/* Prints the rank-tagged message and calls MPI_Abort (or exit(1) before MPI is up). */
void tripar_die(const char *file, int line, const char *stmt, const char *message)
    __attribute__((noreturn));
void tripar_dief(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

/* Host name and world rank, cached at first use; valid before and after MPI_Init. */
int tripar_world_rank(void);
const char *tripar_host(void);

/* Fills the message buffer of the last user error (see error_set); the caller decides
 * whether it is fatal. Kept per process: errors are found identically on every rank. */
void error_set(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void error_vset(const char *fmt, va_list ap);
const char *error_message(void);
void error_clear(void);

/* The generic check, instantiated per library. ok is an expression over rc_. */
#define TRIPAR_CHECK_GEN(call, rc_type, ok, describe)                                        \
    do {                                                                                     \
        rc_type rc_ = (call);                                                                \
        if (!(ok)) tripar_die(__FILE__, __LINE__, #call, (describe));                        \
    } while (0)

#define CHECK(cond, ...)                                                                     \
    do {                                                                                     \
        if (!(cond)) tripar_dief(__FILE__, __LINE__, __VA_ARGS__);                           \
    } while (0)

#define MPI_CHECK(call) TRIPAR_CHECK_GEN(call, int, rc_ == 0, tripar_mpi_error_string(rc_))
#define H5_CHECK(call) TRIPAR_CHECK_GEN(call, long long, rc_ >= 0, "HDF5 call failed")
const char *tripar_mpi_error_string(int rc);

/* Allocation that never returns NULL. Only for set-up paths, never the decode loop. */
void *xmalloc(unsigned long bytes);
void *xcalloc(unsigned long count, unsigned long size);

#ifdef __cplusplus
}
#endif
