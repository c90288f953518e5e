/* The attribution of `tripar explain` (docs/explain.md): each measured iteration's critical
 * rank, its prefill and decode windows split instant by instant into buckets by the innermost
 * leaf event covering them, means over iterations, the structure split and the reasons the
 * critical rank is slow. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "analysis/explain.h"

/* One rank's leaf events sorted by start, with the running maximum of their ends so the
 * first event reaching into a window is found by bisection. */
typedef struct {
    timing_event *ev;
    double *max_end;
    long n;
    long *active; /* scratch: the events covering the sweep's instant */
    long active_cap;
} rank_leaves;

static int event_start_cmp(const void *a, const void *b) {
    const timing_event *x = a, *y = b;
    return x->t_start < y->t_start ? -1 : x->t_start > y->t_start ? 1 : 0;
}

static void rank_leaves_init(rank_leaves *rl, const timing_event *ev, long n) {
    memset(rl, 0, sizeof *rl);
    rl->ev = xcalloc((unsigned long)(n > 0 ? n : 1), sizeof(timing_event));
    for (long i = 0; i < n; i++)
        if (explain_kind_is_leaf(ev[i].phase) && ev[i].t_end > ev[i].t_start) rl->ev[rl->n++] = ev[i];
    qsort(rl->ev, (size_t)rl->n, sizeof(timing_event), event_start_cmp);
    rl->max_end = xcalloc((unsigned long)(rl->n > 0 ? rl->n : 1), sizeof(double));
    for (long i = 0; i < rl->n; i++)
        rl->max_end[i] = i ? fmax(rl->max_end[i - 1], rl->ev[i].t_end) : rl->ev[i].t_end;
    rl->active_cap = 16;
    rl->active = xcalloc((unsigned long)rl->active_cap, sizeof(long));
}

static void rank_leaves_free(rank_leaves *rl) {
    free(rl->ev);
    free(rl->max_end);
    free(rl->active);
}

/* Of two events covering one instant, whether a is the one that owns it: compute over
 * communication (a GEMM under an all-reduce in flight is computing), then the innermost (the
 * later start), then the later in the table. */
static int event_wins(const rank_leaves *rl, long a, long b) {
    const timing_event *x = &rl->ev[a], *y = &rl->ev[b];
    int cx = explain_kind_is_work(x->phase), cy = explain_kind_is_work(y->phase);
    if (cx != cy) return cx > cy;
    if (x->t_start != y->t_start) return x->t_start > y->t_start;
    return a > b;
}

/* Adds every instant of [a, b] to acc: to (kind, layer slot) of the leaf owning it, or to the
 * host gap. by_layer 0 sums over layers (acc has one entry per kind). The parts telescope, so
 * they sum to b - a up to rounding. */
static void window_split(rank_leaves *rl, double a, double b, double *acc, int slots,
                         int by_layer) {
    if (!(b > a)) return;
    long lo = 0, hi = rl->n; /* the first event whose running end passes a */
    while (lo < hi) {
        long mid = lo + (hi - lo) / 2;
        if (rl->max_end[mid] > a)
            hi = mid;
        else
            lo = mid + 1;
    }
    long next = lo, n_active = 0;
    double t = a;
    while (t < b) {
        for (; next < rl->n && rl->ev[next].t_start <= t; next++) {
            if (rl->ev[next].t_end <= t) continue;
            if (n_active == rl->active_cap) {
                rl->active_cap *= 2;
                long *grown = xcalloc((unsigned long)rl->active_cap, sizeof(long));
                memcpy(grown, rl->active, (size_t)n_active * sizeof(long));
                free(rl->active);
                rl->active = grown;
            }
            rl->active[n_active++] = next;
        }
        long kept = 0, owner = -1;
        double until = b;
        if (next < rl->n && rl->ev[next].t_start < until) until = rl->ev[next].t_start;
        for (long k = 0; k < n_active; k++) {
            long i = rl->active[k];
            if (rl->ev[i].t_end <= t) continue;
            rl->active[kept++] = i;
            if (rl->ev[i].t_end < until) until = rl->ev[i].t_end;
            if (owner < 0 || event_wins(rl, i, owner)) owner = i;
        }
        n_active = kept;
        int kind = EXPLAIN_HOST_GAP, slot = 0;
        if (owner >= 0) {
            kind = rl->ev[owner].phase;
            int layer = rl->ev[owner].layer;
            slot = layer >= 0 && layer + 1 < slots ? layer + 1 : 0;
        }
        acc[by_layer ? (size_t)kind * slots + slot : (size_t)kind] += until - t;
        t = until;
    }
}

double explain_kind_seconds(const explain_run *x, explain_qty q, int kind) {
    double s = 0;
    for (int l = 0; l < x->slots; l++)
        s += x->bucket[q][(size_t)kind * x->slots + l];
    return s;
}

double explain_total_seconds(const explain_run *x, explain_qty q) {
    double s = 0;
    for (int k = 0; k < EXPLAIN_KIND_COUNT; k++)
        s += explain_kind_seconds(x, q, k);
    return s;
}

double explain_layer_seconds(const explain_run *x, explain_qty q) {
    double s = 0;
    for (int k = 0; k < EXPLAIN_KIND_COUNT; k++)
        for (int l = 1; l < x->slots; l++)
            s += x->bucket[q][(size_t)k * x->slots + l];
    return s;
}

/* The model identity and the layer count from the job attribute. */
static int run_identity_read(explain_run *x) {
    run_model m;
    if (run_model_read(x->run.file, x->run.path, &m) != STATUS_OK) return STATUS_BAD_INPUT;
    const char *arch = run_model_key(&m, "model.arch");
    if (!arch) arch = run_model_key(&m, "arch"); /* a checkpoint's noted architecture */
    const char *embd = run_model_key(&m, "embd"), *vocab = run_model_key(&m, "vocab");
    const char *layers = run_model_key(&m, "layers");
    snprintf(x->arch, sizeof x->arch, "%s", arch ? arch : "gpt2"); /* GPT-2 records none */
    snprintf(x->embd, sizeof x->embd, "%s", embd ? embd : "?");
    snprintf(x->vocab, sizeof x->vocab, "%s", vocab ? vocab : "?");
    x->model_layers = layers ? atoi(layers) : 0;
    run_model_free(&m);
    return STATUS_OK;
}

/* The measured iterations: every rank's iteration event of each, into it_start/it_end
 * (world_size, iterations). Steps per generation from the step events. */
static int iterations_read(explain_run *x, double **it_start, double **it_end) {
    const run_data *run = &x->run;
    int n_it = 0, max_layer = -1, layer_events = 0;
    x->steps = 0;
    for (int r = 0; r < run->world_size; r++)
        for (long i = 0; i < run->n_events[r]; i++) {
            const timing_event *e = &run->events[r][i];
            if (e->phase == PHASE_ITERATION && e->iteration >= n_it) n_it = e->iteration + 1;
            if (e->phase == PHASE_STEP && e->iteration >= 0 && e->step + 1 > x->steps)
                x->steps = e->step + 1;
            if (e->layer >= 0) layer_events = 1;
            if (e->layer > max_layer) max_layer = e->layer;
        }
    if (!layer_events) {
        error_set("%s: timings are not at layer level (record.timings: layer), so explain "
                  "cannot attribute time to the phases inside layers",
                  run->path);
        return STATUS_BAD_INPUT;
    }
    if (n_it == 0 || x->steps == 0) {
        error_set("%s: no measured iteration in /timings (explain needs iteration and step "
                  "events of bench.iterations >= 1)",
                  run->path);
        return STATUS_BAD_INPUT;
    }
    x->iterations = n_it;
    x->slots = (max_layer + 1 > x->model_layers ? max_layer + 1 : x->model_layers) + 1;
    *it_start = xcalloc((unsigned long)run->world_size * n_it, sizeof(double));
    *it_end = xcalloc((unsigned long)run->world_size * n_it, sizeof(double));
    for (long k = 0; k < (long)run->world_size * n_it; k++)
        (*it_start)[k] = NAN;
    for (int r = 0; r < run->world_size; r++)
        for (long i = 0; i < run->n_events[r]; i++) {
            const timing_event *e = &run->events[r][i];
            if (e->phase != PHASE_ITERATION || e->iteration < 0) continue;
            (*it_start)[(size_t)r * n_it + e->iteration] = e->t_start;
            (*it_end)[(size_t)r * n_it + e->iteration] = e->t_end;
        }
    for (int r = 0; r < run->world_size; r++)
        for (int it = 0; it < n_it; it++)
            if (isnan((*it_start)[(size_t)r * n_it + it])) {
                error_set("%s: rank %d recorded no iteration event for measured iteration %d; "
                          "explain needs every rank's whole iterations",
                          run->path, r, it);
                return STATUS_BAD_INPUT;
            }
    return STATUS_OK;
}

/* The rank whose iteration ends last; ties go to the last pipeline stage, then the higher
 * rank. */
static int iteration_critical(const run_data *run, const double *it_end, int n_it, int it) {
    int c = 0;
    for (int r = 1; r < run->world_size; r++) {
        double er = it_end[(size_t)r * n_it + it], ec = it_end[(size_t)c * n_it + it];
        if (er > ec || (er == ec && run->ranks[r].pp_rank >= run->ranks[c].pp_rank)) c = r;
    }
    return c;
}

/* The first token of each measured iteration: the latest end of a step-0 event on a
 * last-stage rank (-inf when none), in one pass over the events. */
static double *first_tokens_read(const run_data *run, int n_it) {
    double *t = xcalloc((unsigned long)n_it, sizeof(double));
    for (int it = 0; it < n_it; it++)
        t[it] = -INFINITY;
    for (int r = 0; r < run->world_size; r++) {
        if (run->ranks[r].pp_rank != run->pp - 1) continue;
        for (long i = 0; i < run->n_events[r]; i++) {
            const timing_event *e = &run->events[r][i];
            if (e->phase == PHASE_STEP && e->step == 0 && e->iteration >= 0 &&
                e->iteration < n_it && e->t_end > t[e->iteration])
                t[e->iteration] = e->t_end;
        }
    }
    return t;
}

static int double_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y ? 1 : 0;
}

static double median_of(double *v, int n) {
    qsort(v, (size_t)n, sizeof(double), double_cmp);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* The median of the column over every rank but skip (every rank when skip < 0). */
static double median_others(const double *v, int n, int skip, double *scratch) {
    int m = 0;
    for (int r = 0; r < n; r++)
        if (r != skip) scratch[m++] = v[r];
    return m ? median_of(scratch, m) : 0.0;
}

/* Each rank's own iteration windows split by kind (means, into x->ranks), and why the
 * critical rank is slow: its busiest kind, and the kind where it exceeds the median of the
 * other ranks the most (with two ranks, the other rank: the real gap, not half of it). */
static void critical_reasons(explain_run *x, rank_leaves *leaves, const double *it_start,
                             const double *it_end) {
    const int P = x->run.world_size, n_it = x->iterations, c = x->critical_rank;
    x->ranks = xcalloc((unsigned long)P, sizeof(explain_rank));
    for (int r = 0; r < P; r++) {
        explain_rank *rk = &x->ranks[r];
        for (int it = 0; it < n_it; it++) {
            double a = it_start[(size_t)r * n_it + it], b = it_end[(size_t)r * n_it + it];
            window_split(&leaves[r], a, b, rk->kind, 1, 0);
            rk->window += b - a;
        }
        rk->window /= n_it;
        for (int k = 0; k < EXPLAIN_KIND_COUNT; k++)
            rk->kind[k] /= n_it;
    }
    const double *mine = x->ranks[c].kind;
    double *column = xcalloc((unsigned long)P, sizeof(double));
    double *scratch = xcalloc((unsigned long)P, sizeof(double));
    x->busiest_kind = EXPLAIN_HOST_GAP;
    x->excess_kind = -1;
    x->excess_seconds = -INFINITY;
    for (int k = 0; k < EXPLAIN_KIND_COUNT; k++) {
        if (mine[k] > mine[x->busiest_kind]) x->busiest_kind = k;
        for (int r = 0; r < P; r++)
            column[r] = x->ranks[r].kind[k];
        double excess = mine[k] - median_others(column, P, c, scratch);
        if (P > 1 && excess > x->excess_seconds) {
            x->excess_seconds = excess;
            x->excess_kind = k;
        }
    }
    double w = x->ranks[c].window;
    x->busiest_share = w > 0 ? mine[x->busiest_kind] / w : NAN;
    for (int r = 0; r < P; r++)
        column[r] =
            x->ranks[r].window > 0 ? x->ranks[r].kind[x->busiest_kind] / x->ranks[r].window : 0;
    x->busiest_median_share = P > 1 ? median_others(column, P, c, scratch) : NAN;
    free(scratch);
    free(column);
}

/* Every measured iteration: its critical rank's prefill window [iteration start, first
 * token] and decode window [first token, iteration end], split into buckets; means. */
static void windows_attribute(explain_run *x, rank_leaves *leaves, const double *it_start,
                              const double *it_end) {
    const run_data *run = &x->run;
    const int n_it = x->iterations;
    const size_t cells = (size_t)EXPLAIN_KIND_COUNT * x->slots;
    for (int q = 0; q < EXPLAIN_QTY_COUNT; q++)
        x->bucket[q] = xcalloc(cells, sizeof(double));
    double *decode = xcalloc(cells, sizeof(double));
    int *times_critical = xcalloc((unsigned long)run->world_size, sizeof(int));
    double ttft = 0, e2e = 0, *first_token = first_tokens_read(run, n_it);
    for (int it = 0; it < n_it; it++) {
        int c = iteration_critical(run, it_end, n_it, it);
        times_critical[c]++;
        double a = it_start[(size_t)c * n_it + it], b = it_end[(size_t)c * n_it + it];
        double first = fmin(fmax(first_token[it], a), b);
        window_split(&leaves[c], a, first, x->bucket[EXPLAIN_TTFT], x->slots, 1);
        window_split(&leaves[c], first, b, decode, x->slots, 1);
        ttft += first - a;
        e2e += b - a;
    }
    const double per_token = x->steps > 1 ? 1.0 / (x->steps - 1) : 0.0;
    for (size_t k = 0; k < cells; k++) {
        x->bucket[EXPLAIN_TTFT][k] /= n_it;
        x->bucket[EXPLAIN_E2E][k] = x->bucket[EXPLAIN_TTFT][k] + decode[k] / n_it;
        x->bucket[EXPLAIN_TPOT][k] = decode[k] / n_it * per_token;
    }
    x->measured[EXPLAIN_TTFT] = ttft / n_it;
    x->measured[EXPLAIN_E2E] = e2e / n_it;
    x->measured[EXPLAIN_TPOT] = (e2e - ttft) / n_it * per_token;
    x->critical_rank = 0;
    for (int r = 1; r < run->world_size; r++)
        if (times_critical[r] > times_critical[x->critical_rank]) x->critical_rank = r;
    x->critical_iterations = times_critical[x->critical_rank];
    free(first_token);
    free(times_critical);
    free(decode);
}

/* Distinct layers in the critical rank's events: the layers its window's per-layer work is of. */
static int rank_layer_count(const run_data *run, int r, int slots) {
    char *seen = xcalloc((unsigned long)slots, 1);
    int n = 0;
    for (long i = 0; i < run->n_events[r]; i++) {
        int l = run->events[r][i].layer;
        if (l >= 0 && l + 1 < slots && !seen[l + 1]) {
            seen[l + 1] = 1;
            n++;
        }
    }
    free(seen);
    return n;
}

int explain_run_load(explain_run *x, const char *path) {
    memset(x, 0, sizeof *x);
    for (int q = 0; q < EXPLAIN_QTY_COUNT; q++)
        x->metrics[q] = NAN;
    if (run_data_load(&x->run, path) != STATUS_OK) return STATUS_BAD_INPUT;
    run_data *run = &x->run;
    run_data_label(run, x->label, sizeof x->label);
    if (run->complete != 1) {
        error_set("%s is an incomplete run file (complete=0); explain needs whole iterations",
                  path);
        return STATUS_BAD_INPUT;
    }
    if (run_identity_read(x) != STATUS_OK) return STATUS_BAD_INPUT;
    double *it_start = NULL, *it_end = NULL;
    int rc = iterations_read(x, &it_start, &it_end);
    if (rc == STATUS_OK) {
        rank_leaves *leaves = xcalloc((unsigned long)run->world_size, sizeof(rank_leaves));
        for (int r = 0; r < run->world_size; r++)
            rank_leaves_init(&leaves[r], run->events[r], run->n_events[r]);
        windows_attribute(x, leaves, it_start, it_end);
        critical_reasons(x, leaves, it_start, it_end);
        explain_ranks_account(x, it_start, it_end);
        for (int r = 0; r < run->world_size; r++)
            rank_leaves_free(&leaves[r]);
        free(leaves);
        x->critical_layers = rank_layer_count(run, x->critical_rank, x->slots);
        /* the rates only enrich the rows: a file the roofline cannot price (no
         * generate.new_tokens, no /output/tokens) is still attributed */
        x->has_roof = run_roofline_compute(run, x->critical_rank, &x->roof) == STATUS_OK;
        if (!x->has_roof) error_clear();
    }
    free(it_start);
    free(it_end);
    if (rc != STATUS_OK) return rc;
    const int moe = moe_load_read(run->file, &x->moe);
    if (moe < 0) {
        char why[256];
        snprintf(why, sizeof why, "%s", error_message()); /* error_set rewrites its buffer */
        error_set("%s: %s", path, why);
        return STATUS_BAD_INPUT;
    }
    x->has_moe = moe;
    if (run->metrics.present) {
        x->metrics[EXPLAIN_TTFT] = run->metrics.ttft_mean;
        x->metrics[EXPLAIN_TPOT] = run->metrics.tpot_mean;
        x->metrics[EXPLAIN_E2E] = run->metrics.latency_mean;
    }
    return STATUS_OK;
}

void explain_run_free(explain_run *x) {
    explain_ranks_free(x);
    for (int q = 0; q < EXPLAIN_QTY_COUNT; q++)
        free(x->bucket[q]);
    moe_load_free(&x->moe);
    run_data_free(&x->run); /* safe on a failed or zeroed load */
    memset(x, 0, sizeof *x);
}

int explain_runs_comparable(const explain_run *base, const explain_run *other) {
    const char *names[] = {"model.arch", "embd", "vocab"};
    const char *b[] = {base->arch, base->embd, base->vocab};
    const char *o[] = {other->arch, other->embd, other->vocab};
    for (int k = 0; k < 3; k++)
        if (strcmp(b[k], o[k])) {
            error_set("%s and %s ran incomparable models (base vs other: %s: %s vs %s); explain "
                      "compares runs of one architecture, embd and vocab",
                      base->run.path, other->run.path, names[k], b[k], o[k]);
            return 0;
        }
    return 1;
}

void explain_structure_compute(const explain_run *base, const explain_run *other, explain_qty q,
                               explain_structure *s) {
    memset(s, 0, sizeof *s);
    s->layers_base = base->critical_layers;
    s->layers_other = other->critical_layers;
    double lb = explain_layer_seconds(base, q), lo = explain_layer_seconds(other, q);
    s->per_layer_base = s->layers_base > 0 ? lb / s->layers_base : 0;
    s->per_layer_other = s->layers_other > 0 ? lo / s->layers_other : 0;
    s->layer_count = (s->layers_other - s->layers_base) * s->per_layer_base;
    s->per_layer_cost = s->layers_other * (s->per_layer_other - s->per_layer_base);
    s->total = explain_total_seconds(other, q) - explain_total_seconds(base, q);
    /* the pipeline bubble is the stage waiting outside layers for its input: named apart */
    const size_t bubble = (size_t)PHASE_PP_RECV_WAIT * (size_t)base->slots;
    s->pipeline_bubble =
        other->bucket[q][(size_t)PHASE_PP_RECV_WAIT * other->slots] - base->bucket[q][bubble];
    s->outside_layers = (explain_total_seconds(other, q) - lo) -
                        (explain_total_seconds(base, q) - lb) - s->pipeline_bubble;
}

void explain_critical_words(const explain_run *x, char *out, size_t len) {
    const run_rank *c = &x->run.ranks[x->critical_rank];
    if (x->run.world_size > 1 && !x->critical_named) {
        snprintf(out, len,
                 "%s finish%s together: no rank's lead is beyond the noise (rank %d, critical "
                 "in %d/%d iterations, leads by %.3f ms on average, noise %.3f ms)",
                 x->run.world_size == x->run.tp ? "the TP group" : "the ranks",
                 x->run.world_size == x->run.tp ? "es" : "", x->critical_rank,
                 x->critical_iterations, x->iterations, 1e3 * x->critical_lead,
                 1e3 * x->critical_noise);
        return;
    }
    int n = snprintf(out, len, "rank %d (dp%d tp%d pp%d) is critical in %d/%d iterations",
                     x->critical_rank, c->dp_rank, c->tp_rank, c->pp_rank, x->critical_iterations,
                     x->iterations);
    if (n < 0 || (size_t)n >= len) return;
    if (x->run.world_size == 1) {
        snprintf(out + n, len - (size_t)n, " (the only rank): %.0f%% of its time is %s",
                 100 * x->busiest_share, explain_kind_name(x->busiest_kind));
        return;
    }
    const char *others = x->run.world_size == 2 ? "the other rank" : "median of the other ranks";
    n += snprintf(out + n, len - (size_t)n,
                  ", leading by %.3f ms (noise %.3f ms): %.0f%% of its time is %s (%s %.0f%%)",
                  1e3 * x->critical_lead, 1e3 * x->critical_noise, 100 * x->busiest_share,
                  explain_kind_name(x->busiest_kind), others, 100 * x->busiest_median_share);
    if ((size_t)n < len && x->excess_kind >= 0 && x->excess_seconds > 0)
        snprintf(out + n, len - (size_t)n, "; it spends %.3f ms per iteration more than %s in %s",
                 1e3 * x->excess_seconds, others, explain_kind_name(x->excess_kind));
}

/* A phase's roofline over both periods: summed seconds, FLOPs and bytes; the label and
 * efficiency of the period it spends most time in. */
typedef struct {
    double seconds, flops, bytes, gflops, gbs, efficiency;
    roof_bound bound;
} roof_total;

static int roof_total_get(const explain_run *x, int kind, roof_total *t) {
    memset(t, 0, sizeof *t);
    t->bound = ROOF_NONE;
    if (!x->has_roof || kind < 0 || kind >= PHASE_COUNT) return 0;
    int main_period = -1;
    for (int p = 0; p < ROOF_PERIOD_COUNT; p++) {
        const roof_phase *ph = &x->roof.phase[p][kind];
        t->seconds += ph->seconds;
        t->flops += ph->flops;
        t->bytes += ph->bytes;
        if (ph->seconds > 0 &&
            (main_period < 0 || ph->seconds > x->roof.phase[main_period][kind].seconds))
            main_period = p;
    }
    if (main_period < 0) return 0;
    t->bound = x->roof.phase[main_period][kind].bound;
    t->efficiency = x->roof.phase[main_period][kind].efficiency;
    t->gflops = t->flops / t->seconds / 1e9;
    t->gbs = t->bytes / t->seconds / 1e9;
    return 1;
}

void explain_roof_words(const explain_run *x, int kind, char *out, size_t len) {
    roof_total t;
    out[0] = '\0';
    if (!roof_total_get(x, kind, &t) || t.bound == ROOF_NONE) return;
    const char *ceiling = t.bound == ROOF_COMPUTE ? "GEMM ceiling" : "bandwidth ceiling";
    if (t.bound == ROOF_COMMUNICATION || isnan(t.efficiency))
        snprintf(out, len, "%s", roof_bound_name(t.bound));
    else
        snprintf(out, len, "%s, %.0f%% of %s", roof_bound_name(t.bound), 100 * t.efficiency,
                 ceiling);
}

int explain_roof_total(const explain_run *x, int kind, double *bytes, double *flops, double *gbs,
                       double *gflops, int *bound) {
    roof_total t;
    if (!roof_total_get(x, kind, &t)) return 0;
    *bytes = t.bytes / x->iterations;
    *flops = t.flops / x->iterations;
    *gbs = t.gbs;
    *gflops = t.gflops;
    *bound = (int)t.bound;
    return 1;
}
