/* Per-rank phase timer on a clock aligned to rank 0 (see timing.h). Events go into a table
 * preallocated at init; a full table counts drops instead of growing in the decode loop. */
#include "metrics/timing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/check.h"
#include "metrics/nano_batch.h"

static const char *const phase_names[PHASE_COUNT] = {
    "embed",   "norm",         "qkv_gemm", "attention",    "attn_out_gemm", "mlp_gemm",
    "tp_allreduce", "tp_wait", "pp_send",  "pp_recv_wait", "head",          "sample",
    "dp_gather", "step",       "weight_init", "iteration", "sample_wait", "nll_wait",
    "stop_wait", "ep_dispatch", "ep_expert", "ep_combine", "ep_wait",
};

const char *phase_name(phase p) {
    return (p >= 0 && p < PHASE_COUNT) ? phase_names[p] : "unknown";
}

int phase_from_name(const char *name) {
    for (int p = 0; p < PHASE_COUNT; p++)
        if (strcmp(phase_names[p], name) == 0) return p;
    return -1;
}

int phase_is_compute(phase p) {
    switch (p) {
    case PHASE_EMBED: case PHASE_NORM: case PHASE_QKV_GEMM: case PHASE_ATTENTION:
    case PHASE_ATTN_OUT_GEMM: case PHASE_MLP_GEMM: case PHASE_HEAD: case PHASE_SAMPLE:
    case PHASE_EP_EXPERT:
        return 1;
    default:
        return 0;
    }
}

double timer_host_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

enum { CLOCK_ROUNDS = 20 };

/* Cristian's algorithm against rank 0, one rank at a time: the round with the smallest round
 * trip bounds the offset most tightly, to within half that round trip. */
void clock_align(MPI_Comm world, double inject_offset, double *offset, double *uncertainty) {
    MPI_Comm c;
    MPI_CHECK(MPI_Comm_dup(world, &c)); /* private tag space */
    int rank, size;
    MPI_CHECK(MPI_Comm_rank(c, &rank));
    MPI_CHECK(MPI_Comm_size(c, &size));
    *offset = 0;
    *uncertainty = 0;
    if (rank == 0) {
        for (int r = 1; r < size; r++) {
            for (int k = 0; k < CLOCK_ROUNDS; k++) {
                char ping;
                MPI_CHECK(MPI_Recv(&ping, 1, MPI_CHAR, r, 1, c, MPI_STATUS_IGNORE));
                double t0 = timer_host_seconds() + inject_offset;
                MPI_CHECK(MPI_Send(&t0, 1, MPI_DOUBLE, r, 2, c));
            }
        }
    } else {
        double best_rtt = INFINITY;
        for (int k = 0; k < CLOCK_ROUNDS; k++) {
            char ping = 0;
            double t0;
            double t_send = timer_host_seconds() + inject_offset;
            MPI_CHECK(MPI_Send(&ping, 1, MPI_CHAR, 0, 1, c));
            MPI_CHECK(MPI_Recv(&t0, 1, MPI_DOUBLE, 0, 2, c, MPI_STATUS_IGNORE));
            double t_recv = timer_host_seconds() + inject_offset;
            double rtt = t_recv - t_send;
            if (rtt < best_rtt) {
                best_rtt = rtt;
                *offset = t0 - 0.5 * (t_send + t_recv);
            }
        }
        *uncertainty = 0.5 * best_rtt;
    }
    MPI_CHECK(MPI_Comm_free(&c));
}

/* Upper bounds per step of one micro-batch: outside layers a first stage has step, the token
 * pp_recv_wait, two pp_send, embed and its TP all-reduce (2): 7; a last stage step,
 * pp_recv_wait, head, sample (2, around sample_wait), sample_wait, pp_send and the step's
 * stop_wait: 8; so 16 leaves room; inside a layer at most 16 phases with one piece of each
 * row-parallel product (norms, GEMMs, attention, the all-reduces and their waits); TP overlap
 * adds its further pieces and nano-batches (overlap_layer_events). Perplexity adds a head and an
 * nll_wait per sequence at prefill (NLL_EVENTS_PER_SEQUENCE). Expert parallelism across replicas
 * (ep > tp) turns a mixture of experts' one mlp_gemm into two, with ep_dispatch, ep_expert,
 * ep_combine and two ep_wait between them, and with overlap a third mlp_gemm (the shared expert)
 * and a third ep_wait: at most 8 more (EP_EVENTS_PER_LAYER). */
enum {
    EVENTS_PER_STEP = 16,
    EVENTS_PER_LAYER = 16,
    EVENTS_OUTSIDE_STEPS = 64,
    NLL_EVENTS_PER_SEQUENCE = 2,
    EP_EVENTS_PER_LAYER = 8,
    EVENTS_PER_EXTRA_PIECE = 6
};

/* Every generation the run may make: warm-up, measured, and an arrival stream's, which may
 * run up to one generation per request. */
static long generations(const job *j) {
    long stream = j->arrival_rate > 0 ? (long)(2.0 * j->arrival_rate * j->duration) + 64 : 0;
    return (long)(j->warmup + j->iterations) + stream;
}

/* Step events of every generation the run may make: steps x micro-batches x generations. */
static long step_events(const job *j) {
    long steps = j->new_tokens > 0 ? j->new_tokens : 1;
    return generations(j) * steps * (long)j->microbatches;
}

/* What TP overlap adds to one layer's events of a micro-batch of `seqs` sequences adding n_new
 * positions each, beyond EVENTS_PER_LAYER (which holds one piece): each further piece of a
 * row-parallel product adds its GEMM to attn_out_gemm and mlp_gemm and its all-reduce and wait
 * to both products' (EVENTS_PER_EXTRA_PIECE), and a prefill in nano-batches (forward.c) runs
 * every layer's phases once per nano-batch. */
static long overlap_layer_events(const job *j, int seqs, int n_new) {
    if (!j->overlap || j->tp <= 1) return 0;
    nano_batch nanos[NANO_BATCHES_MAX];
    const int n = nano_batch_split(nanos, j->experts == 0, seqs, n_new, 0);
    long events = -EVENTS_PER_LAYER;
    for (int i = 0; i < n; i++) {
        const int pieces = j->chunks < nanos[i].rows ? j->chunks : nanos[i].rows;
        events += EVENTS_PER_LAYER + (long)EVENTS_PER_EXTRA_PIECE * (pieces > 1 ? pieces - 1 : 0);
    }
    return events;
}

/* overlap_layer_events over the whole run: every layer of a prefill and of each decode step
 * of the largest micro-batch, in every micro-batch and generation. */
static long overlap_events(const job *j) {
    const int dp = j->dp > 0 ? j->dp : 1, local = (j->batch + dp - 1) / dp;
    const int mbs = j->microbatches < local ? j->microbatches : local;
    const int seqs = mbs > 0 ? (local + mbs - 1) / mbs : 0;
    const long steps = j->new_tokens > 0 ? j->new_tokens : 1;
    const long per_generation = overlap_layer_events(j, seqs, j->prompt_len) +
                                (steps - 1) * overlap_layer_events(j, seqs, 1);
    return generations(j) * (long)j->microbatches * j->layers * per_generation;
}

long timer_event_capacity(const job *j) {
    long per_mb;
    switch (j->timings) {
    case TIMINGS_STEP: per_mb = EVENTS_PER_STEP; break;
    case TIMINGS_LAYER:
        per_mb = (long)j->layers * (EVENTS_PER_LAYER + (j->ep > j->tp ? EP_EVENTS_PER_LAYER : 0)) +
                 EVENTS_PER_STEP;
        break;
    default: return 0;
    }
    long capacity = EVENTS_OUTSIDE_STEPS + step_events(j) * per_mb;
    if (j->timings == TIMINGS_LAYER) capacity += overlap_events(j);
    if (j->perplexity_window > 0) /* perplexity: one generation per run, a prefill only */
        capacity += (long)(j->warmup + j->iterations) * j->batch * NLL_EVENTS_PER_SEQUENCE;
    return capacity > TIMER_MAX_EVENTS ? TIMER_MAX_EVENTS : capacity;
}

long timer_step_capacity(const job *j) {
    if (j->timings == TIMINGS_OFF) return 0;
    long n = step_events(j);
    return n > TIMER_MAX_EVENTS ? TIMER_MAX_EVENTS : n;
}

void timer_init(timer *t, timings_level level, const backend *be, long capacity, MPI_Comm world) {
    memset(t, 0, sizeof *t);
    t->level = level;
    t->be = be;
    t->capacity = level == TIMINGS_OFF ? 0 : (capacity > 0 ? capacity : 0);
    t->events = xcalloc((unsigned long)(t->capacity ? t->capacity : 1), sizeof(timing_event));
    t->mark_slots = xcalloc((unsigned long)(2 * t->capacity + 2), sizeof(int));
    t->max_marks = 2 * t->capacity;
    /* a profiler range per event when the backend has them (NVTX on cuda) */
    if (t->capacity && be && be->ops && be->ops->range_start && be->ops->range_end)
        t->range_ids = xcalloc((unsigned long)t->capacity, sizeof(uint64_t));
    clock_align(world, 0.0, &t->clock_offset, &t->clock_uncertainty);
    /* run_start is rank 0's clock once every rank has aligned */
    MPI_CHECK(MPI_Barrier(world));
    double start = timer_host_seconds();
    MPI_CHECK(MPI_Bcast(&start, 1, MPI_DOUBLE, 0, world));
    t->run_start = start;
}

void timer_free(timer *t) {
    free(t->events);
    free(t->mark_slots);
    free(t->range_ids);
    memset(t, 0, sizeof *t);
}

int timer_records(const timer *t, phase p, int layer) {
    (void)p;
    switch (t->level) {
    case TIMINGS_OFF: return 0;
    case TIMINGS_STEP: return layer == TIMER_NO_LAYER;
    case TIMINGS_LAYER: return 1;
    }
    return 0;
}

double timer_now(const timer *t) { return timer_host_seconds() + t->clock_offset - t->run_start; }

static int timer_uses_marks(const timer *t, long i) {
    return t->be && t->be->ops && t->be->ops->mark && t->be->ops->mark_seconds &&
           2 * i + 1 < t->max_marks;
}

/* mark_slots per event: [2i] start, [2i+1] end; >= 0 a pending backend slot, -1 resolved,
 * -2 not ended yet. */
enum { SLOT_DONE = -1, SLOT_OPEN = -2 };

static long timer_push(timer *t, phase p, int step, int microbatch, int layer) {
    if (!timer_records(t, p, layer)) return -1;
    if (t->count >= t->capacity) {
        t->dropped++;
        return -1;
    }
    long i = t->count++;
    timing_event *e = &t->events[i];
    e->step = step;
    e->microbatch = microbatch;
    e->layer = layer;
    e->phase = (int32_t)p;
    e->iteration = t->iteration;
    e->t_start = NAN;
    e->t_end = NAN;
    t->mark_slots[2 * i] = SLOT_DONE;
    t->mark_slots[2 * i + 1] = SLOT_DONE;
    return i;
}

int timer_begin(timer *t, phase p, int step, int microbatch, int layer) {
    long i = timer_push(t, p, step, microbatch, layer);
    if (i < 0) return -1;
    /* before the start time, so the sample's interval covers the step's */
    if (p == PHASE_STEP && t->sched) sched_step_begin(t->sched, i);
    if (t->range_ids) t->range_ids[i] = t->be->ops->range_start(t->be->ctx, phase_name(p), layer);
    if (timer_uses_marks(t, i)) {
        t->be->ops->mark(t->be->ctx, (int)(2 * i));
        t->mark_slots[2 * i] = (int)(2 * i);
    } else {
        t->events[i].t_start = timer_now(t);
    }
    t->mark_slots[2 * i + 1] = SLOT_OPEN;
    return (int)i;
}

void timer_end(timer *t, int handle) {
    if (handle < 0 || handle >= t->count || t->mark_slots[2 * handle + 1] != SLOT_OPEN) return;
    if (t->range_ids) t->be->ops->range_end(t->be->ctx, t->range_ids[handle]);
    if (timer_uses_marks(t, handle)) {
        t->be->ops->mark(t->be->ctx, 2 * handle + 1);
        t->mark_slots[2 * handle + 1] = 2 * handle + 1;
    } else {
        t->events[handle].t_end = timer_now(t);
        t->mark_slots[2 * handle + 1] = SLOT_DONE;
    }
    if (t->sched && t->events[handle].phase == PHASE_STEP) sched_step_end(t->sched, handle);
}

void timer_add_host(timer *t, phase p, int step, int microbatch, int layer, double t0, double t1) {
    long i = timer_push(t, p, step, microbatch, layer);
    if (i < 0) return;
    double shift = t->clock_offset - t->run_start;
    t->events[i].t_start = t0 + shift;
    t->events[i].t_end = t1 + shift;
}

void timer_resolve(timer *t) {
    double shift = t->clock_offset - t->run_start;
    long first_open = -1;
    for (long i = t->resolved; i < t->count; i++) {
        int *slot = &t->mark_slots[2 * i];
        if (slot[0] >= 0) {
            t->events[i].t_start = t->be->ops->mark_seconds(t->be->ctx, slot[0]) + shift;
            slot[0] = SLOT_DONE;
        }
        if (slot[1] >= 0) {
            t->events[i].t_end = t->be->ops->mark_seconds(t->be->ctx, slot[1]) + shift;
            slot[1] = SLOT_DONE;
        }
        if (slot[1] == SLOT_OPEN && first_open < 0) first_open = i;
    }
    t->resolved = first_open >= 0 ? first_open : t->count;
}

int timer_event_open(const timer *t, long i) {
    return i >= 0 && i < t->count && t->mark_slots[2 * i + 1] == SLOT_OPEN;
}
