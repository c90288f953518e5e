/* The one rule of how a micro-batch splits into nano-batches when TP overlap runs a prefill as
 * two (src/engine/forward.c): the engine, the rooflines (phase_cost.c), the timer's capacity
 * (timing.c) and the planner all follow it. Depends on nothing. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* One nano-batch of a micro-batch: its rows [r0, r0 + rows), the new tokens of the micro-batch's
 * sequences [b0, b0 + nb) at positions pos0 .. pos0 + n_new - 1. */
typedef struct {
    int r0, rows, b0, nb, n_new, pos0;
} nano_batch;

/* A prefill with parallel.overlap at tp > 1 runs as at most this many nano-batches. */
#define NANO_BATCHES_MAX 2
/* Where a one-sequence prefill splits: at a multiple of this many positions when the prompt
 * has at least two of them, so that each half's query rows fall in the same blocks of the CPU
 * attention (its ATTN_TILE) as the whole prompt's, and give the same bits. */
#define NANO_ALIGN 64

/* How the forward pass splits a micro-batch of seqs sequences, each adding n_new positions at
 * pos0, into nano-batches (out, NANO_BATCHES_MAX of them), and how many: with `split`, two
 * halves by sequences when there are two or more, else by positions; one (the whole) without
 * `split` or when n_new is 1 (decode). The engine (forward.c) and the rooflines share this
 * rule; whether a step may split (overlap, TP, the comm) is theirs to say. */
int nano_batch_split(nano_batch *out, int split, int seqs, int n_new, int pos0);

#ifdef __cplusplus
}
#endif
