/* Reader of a run file's /sched group: per rank and step, the time the rank was runnable but
 * not running and its context switches (docs/schema.md, "/sched"). The recording side writes
 * it; explain reads it to say how long a rank was preempted. */
#pragma once
#include <hdf5.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* One row of /sched/rank_NNNNN: one `step` event of that rank (the same numbering as its
 * /timings rows) and what the scheduler did to the rank during it. The writer
 * (runfile_sched.c) and the reader share it and its HDF5 type. */
typedef struct {
    int64_t iteration, step, microbatch;
    double t_start, t_end; /* the step's interval, common clock */
    double run_delay;      /* seconds runnable but not running, summed over the threads */
    int64_t nivcsw, nvcsw; /* involuntary and voluntary context switches */
} sched_file_row;

/* The compound type of sched_file_row, fields by name (the caller closes it). */
hid_t sched_file_row_type(void);

typedef struct {
    int present;       /* 0: the file has no /sched (not recorded) */
    char source[128];  /* the group attribute source: what was read */
    long long threads; /* the group attribute threads (0 when absent) */
    long *n_rows;      /* (world_size) */
    sched_file_row **rows;  /* (world_size) arrays of n_rows[r]; a rank without a table has 0 */
} sched_data;

/* Reads /sched of an open run file for world_size ranks. An absent group leaves present 0
 * and returns 0; a table that cannot be read as these rows (another layout) counts as empty.
 * Prints nothing. */
int sched_data_read(hid_t file, int world_size, sched_data *s);
void sched_data_free(sched_data *s, int world_size);

#ifdef __cplusplus
}
#endif
