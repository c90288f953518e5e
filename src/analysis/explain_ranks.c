/* Per-rank accounting of `tripar explain` (docs/explain.md, "Ranks"): each rank's waits split
 * at the group collectives into waiting for a peer, the collective itself and its own late
 * exit, so that its own time (work, gaps, late exits) can be compared between runs; the time
 * /sched says it was preempted; and how far the critical rank leads against the noise. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/sched_read.h"
#include "analysis/explain.h"

/* One wait event of a rank that may be a group collective. occ numbers the events of one
 * (iteration, step, micro-batch, layer, phase) in start order, so the k-th on every rank of
 * the group is the same collective. */
typedef struct {
    int32_t iteration, step, microbatch, layer, phase, occ;
    double t_start, t_end;
} coll_event;

static int coll_key_cmp(const coll_event *x, const coll_event *y) {
    const int32_t a[] = {x->iteration, x->step, x->microbatch, x->layer, x->phase};
    const int32_t b[] = {y->iteration, y->step, y->microbatch, y->layer, y->phase};
    for (int i = 0; i < 5; i++)
        if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
    return 0;
}

static int coll_sort_cmp(const void *pa, const void *pb) {
    const coll_event *x = pa, *y = pb;
    int c = coll_key_cmp(x, y);
    if (c) return c;
    return x->t_start < y->t_start ? -1 : x->t_start > y->t_start ? 1 : 0;
}

static int coll_find_cmp(const void *pa, const void *pb) {
    const coll_event *x = pa, *y = pb;
    int c = coll_key_cmp(x, y);
    return c ? c : (x->occ > y->occ) - (x->occ < y->occ);
}

/* Whether an event of this phase is a wait to match across the TP group: every wait but the
 * point-to-point ones and the DP gather (those are waited whole). In a file without
 * sample_wait (recorded before it existed) `sample` ends in the argmax all-reduce, so at
 * tp > 1 it is matched too: its start stands for the arrival. */
static int phase_is_group_wait(int p, int sample_is_collective) {
    if (p == PHASE_SAMPLE) return sample_is_collective;
    return explain_kind_is_wait(p) && p != PHASE_PP_RECV_WAIT && p != PHASE_PP_SEND &&
           p != PHASE_DP_GATHER;
}

static coll_event *coll_events_of(const run_data *run, int r, int n_it, int sample_coll, long *n) {
    coll_event *c = xcalloc((unsigned long)(run->n_events[r] + 1), sizeof(coll_event));
    *n = 0;
    for (long i = 0; i < run->n_events[r]; i++) {
        const timing_event *e = &run->events[r][i];
        if (e->iteration < 0 || e->iteration >= n_it || !phase_is_group_wait(e->phase, sample_coll))
            continue;
        coll_event *o = &c[(*n)++];
        *o = (coll_event){e->iteration, e->step, e->microbatch, e->layer,
                          e->phase,     0,       e->t_start,    e->t_end};
    }
    qsort(c, (size_t)*n, sizeof(coll_event), coll_sort_cmp);
    for (long i = 1; i < *n; i++)
        if (!coll_key_cmp(&c[i], &c[i - 1])) c[i].occ = c[i - 1].occ + 1;
    return c;
}

/* Whether the file recorded a sampling wait of its own (a phase named sample_wait). */
static int has_sample_wait(const run_data *run) {
    int p = phase_from_name("sample_wait");
    if (p < 0) return 0;
    for (int r = 0; r < run->world_size; r++)
        for (long i = 0; i < run->n_events[r]; i++)
            if (run->events[r][i].phase == p) return 1;
    return 0;
}

/* A rank's step events sorted by (iteration, step, micro-batch), to find when a stage's step
 * ended: the hand-off it sends is ready then. */
static coll_event *steps_of(const run_data *run, int r, long *n) {
    coll_event *c = xcalloc((unsigned long)(run->n_events[r] + 1), sizeof(coll_event));
    *n = 0;
    for (long i = 0; i < run->n_events[r]; i++) {
        const timing_event *e = &run->events[r][i];
        if (e->phase == PHASE_STEP && e->iteration >= 0)
            c[(*n)++] = (coll_event){e->iteration, e->step, e->microbatch, -1,
                                     PHASE_STEP,   0,       e->t_start,    e->t_end};
    }
    qsort(c, (size_t)*n, sizeof(coll_event), coll_sort_cmp);
    return c;
}

/* The rank that sends what r's pipeline receive waits for: the previous stage's (activations
 * of the same step) or, on the first stage, the last stage's (tokens of the step before), with
 * r's dp and tp coordinates; -1 when none. */
static int pp_producer(const run_data *run, int r, const timing_event *e, int *step) {
    const run_rank *me = &run->ranks[r];
    int stage = me->pp_rank > 0 ? me->pp_rank - 1 : run->pp - 1;
    *step = me->pp_rank > 0 ? e->step : e->step - 1;
    if (run->pp < 2 || *step < 0) return -1;
    for (int q = 0; q < run->world_size; q++)
        if (run->ranks[q].pp_rank == stage && run->ranks[q].dp_rank == me->dp_rank &&
            run->ranks[q].tp_rank == me->tp_rank)
            return q;
    return -1;
}

/* Splits a pipeline receive of rank r at the end of the producer's step (when what it waits
 * for was sent): before it, r waited for the producer; after it, r was late itself. Returns
 * the waited part; *late the rest (0 without a producer: waited whole). */
static double pp_recv_split(const run_data *run, int r, const timing_event *e,
                            coll_event *const *steps, const long *n_steps, double *late) {
    int step, q = pp_producer(run, r, e, &step);
    double d = e->t_end - e->t_start;
    *late = 0;
    if (q < 0) return d;
    coll_event key = {e->iteration, step, e->microbatch, -1, PHASE_STEP, 0, 0, 0};
    const coll_event *m =
        bsearch(&key, steps[q], (size_t)n_steps[q], sizeof(coll_event), coll_find_cmp);
    if (!m) return d;
    double waited = fmin(fmax(m->t_end - e->t_start, 0.0), d);
    *late = d - waited;
    return waited;
}

/* Splits every wait of every rank (sums per iteration into waited_it and shared_it, per kind
 * into the ranks' waited and late). */
static void waits_split(explain_run *x, double *waited_it, double *shared_it) {
    const run_data *run = &x->run;
    const int P = run->world_size, n_it = x->iterations;
    const int sample_coll = run->tp > 1 && !has_sample_wait(run);
    long *n = xcalloc((unsigned long)P, sizeof(long));
    coll_event **coll = xcalloc((unsigned long)P, sizeof(coll_event *));
    long *n_steps = xcalloc((unsigned long)P, sizeof(long));
    coll_event **steps = xcalloc((unsigned long)P, sizeof(coll_event *));
    for (int r = 0; r < P; r++) {
        coll[r] = coll_events_of(run, r, n_it, sample_coll, &n[r]);
        steps[r] = steps_of(run, r, &n_steps[r]);
    }
    int *peers = xcalloc((unsigned long)P, sizeof(int));
    for (int r = 0; r < P; r++) {
        explain_rank *rk = &x->ranks[r];
        const run_rank *me = &run->ranks[r];
        int n_peers = 0;
        for (int q = 0; q < P; q++)
            if (q != r && run->ranks[q].dp_rank == me->dp_rank &&
                run->ranks[q].pp_rank == me->pp_rank)
                peers[n_peers++] = q;
        /* the waits matched to no collective: waited whole */
        for (long i = 0; i < run->n_events[r]; i++) {
            const timing_event *e = &run->events[r][i];
            if (e->iteration < 0 || e->iteration >= n_it || !explain_kind_is_wait(e->phase) ||
                phase_is_group_wait(e->phase, sample_coll))
                continue;
            double late = 0, waited = e->t_end - e->t_start;
            if (e->phase == PHASE_PP_RECV_WAIT)
                waited = pp_recv_split(run, r, e, steps, n_steps, &late);
            rk->waited[e->phase] += waited;
            rk->late[e->phase] += late;
            waited_it[(size_t)r * n_it + e->iteration] += waited;
        }
        for (long i = 0; i < n[r]; i++) {
            const coll_event *e = &coll[r][i];
            double last_in = e->t_start, first_out = e->t_end;
            int matched = 1;
            for (int j = 0; j < n_peers && matched; j++) {
                const coll_event *m = bsearch(e, coll[peers[j]], (size_t)n[peers[j]],
                                              sizeof(coll_event), coll_find_cmp);
                if (!m) {
                    matched = 0;
                    break;
                }
                last_in = fmax(last_in, m->t_start);
                first_out = fmin(first_out, m->t_end);
            }
            double d = e->t_end - e->t_start, waited = d, late = 0;
            if (matched && n_peers > 0) {
                waited = fmin(fmax(last_in - e->t_start, 0.0), d);
                double from = fmax(first_out, e->t_start + waited);
                late = fmax(e->t_end - from, 0.0);
            }
            double shared = fmax(d - waited - late, 0.0);
            if (e->phase == PHASE_SAMPLE && !matched) continue; /* plain compute then */
            rk->waited[e->phase] += waited;
            rk->late[e->phase] += late;
            rk->shared[e->phase] += shared;
            waited_it[(size_t)r * n_it + e->iteration] += waited;
            shared_it[(size_t)r * n_it + e->iteration] += shared;
        }
    }
    for (int r = 0; r < P; r++) {
        free(coll[r]);
        free(steps[r]);
    }
    free(coll);
    free(steps);
    free(n_steps);
    free(peers);
    free(n);
}

/* /sched: each rank's run delay and involuntary switches over its measured steps. */
static void sched_account(explain_run *x) {
    const int P = x->run.world_size, n_it = x->iterations;
    sched_data s;
    sched_data_read(x->run.file, P, &s);
    x->sched_present = s.present;
    snprintf(x->sched_source, sizeof x->sched_source, "%s", s.source);
    for (int r = 0; r < P; r++) {
        explain_rank *rk = &x->ranks[r];
        rk->preempted = rk->nivcsw = s.present ? 0.0 : NAN;
        if (s.present) rk->preempted_it = xcalloc((unsigned long)n_it, sizeof(double));
        for (long i = 0; i < s.n_rows[r]; i++) {
            const sched_file_row *row = &s.rows[r][i];
            if (row->iteration < 0 || row->iteration >= n_it) continue;
            rk->preempted_it[row->iteration] += row->run_delay;
            rk->preempted += row->run_delay / n_it;
            rk->nivcsw += (double)row->nivcsw / n_it;
        }
    }
    sched_data_free(&s, P);
}

static double spread(const double *v, int n) {
    if (n < 2) return 0.0;
    double m = 0, ss = 0;
    for (int i = 0; i < n; i++)
        m += v[i] / n;
    for (int i = 0; i < n; i++)
        ss += (v[i] - m) * (v[i] - m);
    return sqrt(ss / (n - 1));
}

/* The critical rank's lead: per iteration its iteration end minus the latest other rank's
 * (negative where another rank ends last); named when the mean lead is beyond the noise: the
 * lead's own spread over iterations, 1% of the E2E latency (a lead of microseconds is the
 * order in which ranks leave the last collective, not a slow rank) and twice the clocks'
 * alignment uncertainty, whichever is largest. */
static void critical_lead(explain_run *x, const double *it_end) {
    const run_data *run = &x->run;
    const int P = run->world_size, n_it = x->iterations, c = x->critical_rank;
    if (P == 1) {
        x->critical_named = 1;
        return;
    }
    double *lead = xcalloc((unsigned long)n_it, sizeof(double)), uncertainty = 0;
    for (int it = 0; it < n_it; it++) {
        double others = -INFINITY;
        for (int r = 0; r < P; r++)
            if (r != c) others = fmax(others, it_end[(size_t)r * n_it + it]);
        lead[it] = it_end[(size_t)c * n_it + it] - others;
        x->critical_lead += lead[it] / n_it;
    }
    for (int r = 0; r < P; r++)
        uncertainty = fmax(uncertainty, run->ranks[r].clock_uncertainty);
    x->critical_noise =
        fmax(fmax(spread(lead, n_it), 0.01 * x->measured[EXPLAIN_E2E]), 2 * uncertainty);
    x->critical_named = x->critical_lead > x->critical_noise;
    free(lead);
}

void explain_ranks_account(explain_run *x, const double *it_start, const double *it_end) {
    const int P = x->run.world_size, n_it = x->iterations;
    double *waited_it = xcalloc((unsigned long)P * n_it, sizeof(double));
    double *shared_it = xcalloc((unsigned long)P * n_it, sizeof(double));
    waits_split(x, waited_it, shared_it);
    for (int r = 0; r < P; r++) {
        explain_rank *rk = &x->ranks[r];
        rk->own_it = xcalloc((unsigned long)n_it, sizeof(double));
        for (int it = 0; it < n_it; it++) {
            size_t i = (size_t)r * n_it + it;
            rk->own_it[it] = it_end[i] - it_start[i] - waited_it[i] - shared_it[i];
            rk->own += rk->own_it[it] / n_it;
        }
        for (int k = 0; k < EXPLAIN_KIND_COUNT; k++) {
            rk->waited[k] /= n_it;
            rk->late[k] /= n_it;
            rk->shared[k] /= n_it;
        }
    }
    free(waited_it);
    free(shared_it);
    sched_account(x);
    critical_lead(x, it_end);
}

double explain_rank_work(const explain_rank *rk, int kind) {
    if (!explain_kind_is_work(kind)) return 0.0;
    return rk->kind[kind] - rk->waited[kind] - rk->late[kind] - rk->shared[kind];
}

void explain_ranks_free(explain_run *x) {
    if (!x->ranks) return;
    for (int r = 0; r < x->run.world_size; r++) {
        free(x->ranks[r].own_it);
        free(x->ranks[r].preempted_it);
    }
    free(x->ranks);
    x->ranks = NULL;
}
