/* /sched in the run file: each rank's preemption per step event (metrics/sched.h), appended to
 * its own table /sched/rank_NNNNN at every timing flush and at the end, like /timings, so a
 * partial file keeps the steps flushed so far. Layout: docs/schema.md "/sched". */
#include <hdf5.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/check.h"
#include "io/h5util.h"
#include "io/runfile.h"
#include "io/runfile_internal.h"
#include "io/sched_read.h"
#include "parallel/agree.h"

enum { SCHED_CHUNK_ROWS = 1024 };

/* The group's attributes: identical on every rank (gathered, or rank 0's). */
static void attrs_write(runfile *rf, const sched_sampler *s) {
    const MPI_Comm comm = runfile_comm(rf);
    const int size = agree_comm_size(comm);
    long long mine[3] = {s->live, s->dropped, s->schedstat};
    long long *all = xcalloc((size_t)size * 3, sizeof(long long));
    agree_gather_longs(comm, mine, 3, all);
    long long *col = xcalloc((size_t)size * 3, sizeof(long long));
    long long most = 0;
    for (int r = 0; r < size; r++) {
        for (int k = 0; k < 3; k++)
            col[k * size + r] = all[3 * r + k];
        most = all[3 * r] > most ? all[3 * r] : most;
    }
    hid_t g = h5_group_open_or_create(runfile_hdf5(rf), "sched");
    h5_attr_write_string(g, "source", SCHED_SOURCE);
    h5_attr_write_int(g, "threads", most);
    h5_attr_write_longs(g, "threads_per_rank", col, size);
    h5_attr_write_longs(g, "dropped", col + size, size);
    h5_attr_write_longs(g, "schedstat", col + 2 * size, size);
    H5Gclose(g);
    free(col);
    free(all);
}

void runfile_write_sched(runfile *rf, sched_sampler *s, timer *t) {
    if (!rf || runfile_failed(rf) || runfile_hdf5(rf) < 0) return;
    const MPI_Comm comm = runfile_comm(rf);
    const int size = agree_comm_size(comm);
    int on = s && t && s->on;
    agree_root_int(comm, &on); /* the job's, the same on every rank */
    if (!on) return;

    long long fresh = s->count - s->flushed;
    long long *counts = xcalloc((size_t)size, sizeof(long long));
    agree_gather_longs(comm, &fresh, 1, counts);
    double bytes = 0;
    for (int r = 0; r < size; r++)
        bytes += (double)counts[r] * (double)sizeof(sched_file_row);
    if (!runfile_room(rf, bytes + (double)SCHED_CHUNK_ROWS * sizeof(sched_file_row) * size,
                      "the scheduler rows")) {
        free(counts);
        return;
    }
    timer_resolve(t); /* the step events' times, on a backend with marks */
    sched_file_row *rows = xcalloc((size_t)(fresh > 0 ? fresh : 1), sizeof(sched_file_row));
    for (long long k = 0; k < fresh; k++) {
        const sched_row *src = &s->rows[s->flushed + k];
        const timing_event *ev = &t->events[src->event];
        rows[k] = (sched_file_row){ev->iteration, ev->step,      ev->microbatch,
                                   ev->t_start,   ev->t_end,     src->run_delay,
                                   src->nivcsw,   src->nvcsw};
    }
    hid_t mtype = sched_file_row_type();
    runfile_tables_append(rf, "sched", mtype, SCHED_CHUNK_ROWS, counts, rows);
    s->flushed += fresh;
    H5Tclose(mtype);
    free(rows);
    free(counts);
    attrs_write(rf, s);
    H5_CHECK(H5Fflush(runfile_hdf5(rf), H5F_SCOPE_GLOBAL)); /* a killed job keeps the rows */
}
