/* The hook between the schedule and the stage forward, where CUDA-graph replay of decode
 * steps slots in (backend.cuda_graphs). On the CPU, for the prefill, or when the TP comm is
 * not stream-ordered it is a plain call. See docs/cuda.md, "CUDA graphs". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "kernels/backend.h"
#include "engine/engine.h"

/* One executable graph and the arguments it was captured with. Kernel arguments are baked
 * in, so a graph replays only the step it captured: same micro-batch rows, same activation
 * buffer, same position. */
typedef struct {
    void *exec;
    const float *x;
    int nb, mb_begin, pos0;
} graph_slot;

/* Graphs are kept per (micro-batch, step), so every benchmark iteration after the first
 * replays without capturing. Past GRAPH_CACHE_MAX graphs only one per micro-batch is kept and
 * each step re-captures it, updated in place (cudaGraphExecUpdate). */
enum { GRAPH_CACHE_MAX = 1024 };

struct graph_cache {
    int n_micro, steps;    /* slots is (n_micro, steps); steps == 1: one graph per micro-batch */
    graph_slot *slots;
    long captures, replays;
};

void engine_graphs_free(engine *e) {
    struct graph_cache *gc = e->graphs;
    if (!gc) return;
    for (int i = 0; i < gc->n_micro * gc->steps; i++)
        e->be->ops->graph_destroy(e->be->ctx, gc->slots[i].exec);
    free(gc->slots);
    free(gc);
    e->graphs = NULL;
}

/* The backend says whether it can capture graphs: the entry is NULL when it cannot. */
static int backend_can_capture(const engine *e) { return e->be->ops->graph_begin != NULL; }

/* Whether this call may be captured. Decode steps only (the prefill runs once per iteration and
 * records activations), not the first decode step (it runs plainly first, so lazy module
 * loading, NCCL connections and workspaces are settled outside any capture), and only when
 * the TP collectives are stream-ordered (NCCL): MPI blocks on the host, which a graph cannot
 * hold. */
static int graph_eligible(const engine *e, int step, int n_new) {
    if (!backend_can_capture(e) || !e->cfg.cuda_graphs) return 0;
    if (n_new != 1 || step < 2 || e->capture) return 0;
    return e->tp->size == 1 || e->tp->stream_ordered;
}

static graph_slot *graph_slot_for(engine *e, int mb, int step) {
    const int steps_total = e->new_tokens > 0 ? e->new_tokens : 1;
    struct graph_cache *gc = e->graphs;
    if (gc && mb >= gc->n_micro) { /* the batch split changed (engine_set_active) */
        engine_graphs_free(e);
        gc = NULL;
    }
    if (!gc) {
        gc = xcalloc(1, sizeof *gc);
        gc->n_micro = e->split.n_micro > mb ? e->split.n_micro : mb + 1;
        gc->steps = (long)gc->n_micro * steps_total <= GRAPH_CACHE_MAX ? steps_total : 1;
        gc->slots = xcalloc((size_t)gc->n_micro * gc->steps, sizeof *gc->slots);
        e->graphs = gc;
    }
    return &gc->slots[(size_t)mb * gc->steps + (gc->steps > 1 ? step : 0)];
}

void engine_step_forward(engine *e, float *x, int mb, int step, int n_new, int pos0) {
    static int warned;
    if (!graph_eligible(e, step, n_new)) {
        if (backend_can_capture(e) && e->cfg.cuda_graphs && n_new == 1 && step >= 2 &&
            !e->tp->stream_ordered && e->tp->size > 1 && !warned++ && e->cfg.mesh->world_rank == 0)
            fprintf(stderr, "tripar: warning: backend.cuda_graphs: tensor-parallel all-reduces "
                            "over %s block on the host and cannot be captured; decode steps run "
                            "without graphs (use backend.comm: nccl)\n", e->tp->ops->name);
        engine_stage_forward(e, x, mb, step, n_new, pos0);
        return;
    }
    const backend *be = e->be;
    struct graph_cache *gc;
    graph_slot *s = graph_slot_for(e, mb, step);
    gc = e->graphs;
    if (s->exec && s->x == x && s->nb == e->split.size[mb] && s->mb_begin == e->split.begin[mb] &&
        s->pos0 == pos0) {
        be->ops->graph_launch(be->ctx, s->exec);
        gc->replays++;
        return;
    }
    /* Phase marks inside a graph would fire into the slots of the capturing step at every
     * replay; the timer is paused instead, and the schedule's PHASE_STEP brackets the graph. */
    timings_level level = e->tm->level;
    e->tm->level = TIMINGS_OFF;
    if (be->ops->graph_begin(be->ctx) != 0) {
        e->tm->level = level;
        tripar_dief(__FILE__, __LINE__, "backend.cuda_graphs: %s", error_message());
    }
    engine_stage_forward(e, x, mb, step, n_new, pos0);
    /* A failed capture never ran, but NCCL counted its collectives: the peers cannot be kept
     * in step, so this is fatal rather than a fallback. */
    if (be->ops->graph_end_and_launch(be->ctx, &s->exec) != 0)
        tripar_dief(__FILE__, __LINE__, "backend.cuda_graphs: capture of decode step %d "
                    "(micro-batch %d) failed: %s", step, mb, error_message());
    e->tm->level = level;
    s->x = x;
    s->nb = e->split.size[mb];
    s->mb_begin = e->split.begin[mb];
    s->pos0 = pos0;
    gc->captures++;
}
