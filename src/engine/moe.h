/* Mixture-of-experts routing on the host: the router's logits of a block of token rows become,
 * for each expert, the rows it serves and their weights. Pure and deterministic, so every rank
 * that holds the same logits (the replicated router gives every TP rank bit-identical ones)
 * routes identically without a collective. Kept apart from the expert compute so that expert
 * parallelism across replicas (moe_ep.c) sends each expert's rows to the rank that holds it. */
#pragma once
#include <stdint.h>

#include "model/model.h"

typedef struct {
    int experts, top_k, shared, norm_topk_prob; /* shared: 1 when a shared expert gates in */
    int rows_max;
    float *logits; /* (rows_max, experts + shared) router logits, then the shared gate's */
    int32_t *idx;  /* (rows_max * (top_k + shared)) rows by expert, in row order within each;
                    * then 0 .. rows - 1 for the shared expert */
    float *wts;    /* the same layout: each row's routing weight, then sigmoid(shared gate) */
    int *count;    /* (experts) rows each expert serves */
    int *offset;   /* (experts + 1) where each expert's rows start in idx */
    int *choice;   /* (rows_max * top_k) scratch: each row's experts, best first */
    float *choice_w;
    /* the expert load of one generation, for the run file's /moe/expert_load: rows routed to
     * each expert (top-k assignments; the shared expert is not counted), summed over the
     * micro-batches of a step. Made at set-up so that counting allocates nothing. */
    int load_steps, load_layers;
    int32_t *load; /* (load_steps, load_layers, experts) steps, this stage's layers */
} moe_routing;

/* Host buffers for up to rows_max rows of a model with cfg's experts, and the load record of
 * `steps` steps over `layers` layers (none when it has no experts: moe_routing_free is then
 * still safe). Set-up only. */
void moe_routing_init(moe_routing *r, const model_config *cfg, int rows_max, int steps,
                      int layers);
void moe_routing_free(moe_routing *r);

/* Zeroes the load record (at the start of each generation). */
void moe_routing_load_clear(moe_routing *r);
/* Adds the last moe_route's rows per expert to the record at (step, stage layer l); a step
 * outside the record is ignored. */
void moe_routing_load_add(moe_routing *r, int step, int l);

/* Routes rows rows from r->logits (rows, experts + shared): each row's top_k experts by logit,
 * a tie going to the lower expert index; weights softmax over the chosen k (norm_topk_prob),
 * or the softmax over all experts taken at the chosen k; computed in double. Fills count,
 * offset, idx and wts; returns the entries of idx to copy (rows * (top_k + shared)). */
int moe_route(moe_routing *r, int rows);
