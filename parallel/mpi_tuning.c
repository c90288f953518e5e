/* The MPI settings TP overlap needs, applied by tripar itself (mpi_tuning.h says which and why). */
#include "parallel/mpi_tuning.h"

#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Where a setting can be made: in the environment before MPI_Init (Open MPI reads it there
 * once; its MPI_T cvar is read-only), or through MPI_T after MPI_Init. */
enum { SET_ENV, SET_MPI_T };

typedef struct {
    const char *name;  /* Open MPI's MCA variable, its MPI_T cvar name */
    const char *value; /* what overlap needs */
    int how;
    /* found at start-up */
    int by_user; /* OMPI_MCA_<name> was in the environment before tripar looked */
    int by_us;   /* tripar set it */
    int exposed; /* the MPI has the variable (read back after MPI_Init) */
    long long in_force;
} setting;

static setting settings[] = {
    {.name = "btl_tcp_eager_limit", .value = "4194304", .how = SET_ENV},
    {.name = "btl_tcp_rndv_eager_limit", .value = "4194304", .how = SET_ENV},
    {.name = "btl_tcp_max_send_size", .value = "4194304", .how = SET_ENV},
    /* 4: recursive doubling */
    {.name = "coll_libnbc_iallreduce_algorithm", .value = "4", .how = SET_MPI_T},
};
enum { N_SETTINGS = sizeof settings / sizeof settings[0] };

static int tuning_on;
static char summary[1024];

static void env_name(const setting *s, char *out, size_t len) {
    snprintf(out, len, "OMPI_MCA_%s", s->name);
}

void mpi_tuning_before_init(int tune) {
    tuning_on = tune;
    for (int i = 0; i < N_SETTINGS; i++) {
        setting *s = &settings[i];
        char var[96];
        env_name(s, var, sizeof var);
        s->by_user = getenv(var) != NULL;
        if (tune && !s->by_user && s->how == SET_ENV) s->by_us = setenv(var, s->value, 0) == 0;
    }
}

/* The cvar's index and its integer type, or -1 when this MPI has none of that name. */
static int cvar_index(const char *name, MPI_Datatype *type_out) {
    int n = 0;
    if (MPI_T_cvar_get_num(&n) != MPI_SUCCESS) return -1;
    for (int i = 0; i < n; i++) {
        char found[256], desc[8];
        int name_len = sizeof found, desc_len = sizeof desc, verbosity, bind, scope;
        MPI_Datatype type;
        MPI_T_enum enumtype;
        if (MPI_T_cvar_get_info(i, found, &name_len, &verbosity, &type, &enumtype, desc, &desc_len,
                                &bind, &scope) != MPI_SUCCESS)
            continue;
        /* only process-wide integer variables: a handle for them needs no MPI object */
        if (!strcmp(found, name) && bind == MPI_T_BIND_NO_OBJECT &&
            (type == MPI_INT || type == MPI_UNSIGNED || type == MPI_UNSIGNED_LONG ||
             type == MPI_UNSIGNED_LONG_LONG || type == MPI_LONG_LONG)) {
            *type_out = type;
            return i;
        }
    }
    return -1;
}

/* Reads (and, when `write` is given, first writes) an integer cvar of the given type through
 * MPI_T. Returns 0; 1 when it was read but the write was refused; -1 when it cannot be read. */
static int cvar_access(int index, MPI_Datatype type, const long long *write, long long *value) {
    int count = 0;
    MPI_T_cvar_handle handle;
    if (MPI_T_cvar_handle_alloc(index, NULL, &handle, &count) != MPI_SUCCESS) return -1;
    int rc = count == 1 ? 0 : -1, refused = 0;
    union {
        int i;
        unsigned u;
        unsigned long ul;
        unsigned long long ull;
        long long ll;
    } buf = {0};
    if (rc == 0 && write) {
        if (type == MPI_INT)
            buf.i = (int)*write;
        else if (type == MPI_UNSIGNED)
            buf.u = (unsigned)*write;
        else if (type == MPI_UNSIGNED_LONG)
            buf.ul = (unsigned long)*write;
        else if (type == MPI_UNSIGNED_LONG_LONG)
            buf.ull = (unsigned long long)*write;
        else
            buf.ll = *write;
        refused = MPI_T_cvar_write(handle, &buf) != MPI_SUCCESS;
    }
    if (rc == 0 && MPI_T_cvar_read(handle, &buf) != MPI_SUCCESS) rc = -1;
    if (rc == 0)
        *value = type == MPI_INT                  ? buf.i
                 : type == MPI_UNSIGNED           ? (long long)buf.u
                 : type == MPI_UNSIGNED_LONG      ? (long long)buf.ul
                 : type == MPI_UNSIGNED_LONG_LONG ? (long long)buf.ull
                                                  : buf.ll;
    MPI_T_cvar_handle_free(&handle);
    return rc < 0 ? rc : refused;
}

void mpi_tuning_after_init(void) {
    int provided = 0;
    const int have_mpi_t = MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) == MPI_SUCCESS;
    size_t used = 0;
    summary[0] = '\0';
    if (!tuning_on)
        used += snprintf(summary, sizeof summary,
                         "tripar set nothing (it tunes for parallel.overlap at tp > 1 on MPI with "
                         "parallel.mpi_tuning: auto): ");
    for (int i = 0; i < N_SETTINGS; i++) {
        setting *s = &settings[i];
        MPI_Datatype type = MPI_INT;
        const int index = have_mpi_t ? cvar_index(s->name, &type) : -1;
        const long long want = atoll(s->value);
        const int write = tuning_on && !s->by_user && s->how == SET_MPI_T;
        /* written and read back, or only read: the value in force either way */
        const int rc =
            index >= 0 ? cvar_access(index, type, write ? &want : NULL, &s->in_force) : -1;
        s->exposed = rc >= 0;
        if (write) s->by_us = rc == 0 && s->in_force == want;
        const char *who = !s->exposed  ? "not exposed"
                          : s->by_user ? "user"
                          : s->by_us ? (s->how == SET_ENV ? "tripar, environment" : "tripar, MPI_T")
                                     : "default";
        if (used >= sizeof summary) break;
        if (s->exposed)
            used += snprintf(summary + used, sizeof summary - used, "%s%s=%lld (%s)", i ? "; " : "",
                             s->name, s->in_force, who);
        else
            used += snprintf(summary + used, sizeof summary - used, "%s%s (%s)", i ? "; " : "",
                             s->name, who);
    }
    if (have_mpi_t) MPI_T_finalize();
}

const char *mpi_tuning_summary(void) { return summary; }
