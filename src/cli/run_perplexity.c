/* A perplexity run's output (run_perplexity.h). */
#include "cli/run_perplexity.h"

#include <stdio.h>

void run_perplexity_record(run_context *rc) {
    const engine *e = &rc->e;
    if (e->cfg.nll_first <= 0) return;
    const shard_geom *g = &e->m->geom;
    /* the last stage of each replica holds its windows' NLL; its TP rank 0 writes them */
    const long rows = g->last_stage && g->tp_rank == 0 ? e->batch_local : 0;
    runfile_write_nll(rc->rf, e->nll, e->seq_global_begin, rows, e->cfg.batch, e->prompt_len,
                      e->perplexity, e->nll_count, e->cfg.nll_first);
}

void run_perplexity_print(const run_context *rc) {
    const engine *e = &rc->e;
    if (e->cfg.nll_first <= 0) return;
    printf("  %-13s %.4f over %ld tokens (mean NLL %.6f): %d windows of %d tokens, tokens "
           "%d to %d of each scored\n",
           "perplexity", e->perplexity, e->nll_count, e->nll_sum / (double)e->nll_count,
           e->cfg.batch, e->prompt_len, e->cfg.nll_first + 1, e->prompt_len - 1);
}
