/* Perplexity's input: the job's one text, tokenized once, cut into the windows llama-perplexity
 * scores (docs/performance.md, "Perplexity"), which become the run's batch of prompts. */
#pragma once
#include "job/job.h"

/* When the job has a perplexity section, replaces j->tokens (the text's tokens, one prompt) by
 * n_chunk prompts of perplexity.window tokens: chunk i is tokens [i*W, (i+1)*W) of the text,
 * bos first when the checkpoint's tokenizer asks for it (add_bos_token), and its first token
 * replaced by bos then. Checks the window against model.ctx and the text against 2 windows.
 * Returns STATUS_OK, or STATUS_BAD_INPUT with error_message() at the key to change. */
int perplexity_windows(job *j);

/* The first scored position of a window: W/2 (llama-perplexity's `first = n_ctx/2`); positions
 * [first, W - 1) are scored, W - 1 - first of them per window. */
static inline int perplexity_first(int window) { return window / 2; }
