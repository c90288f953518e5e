/* What `tripar run` records and prints of a perplexity run (docs/jobs.md, perplexity): the
 * engine's per-token NLL into /output/nll, and the perplexity line of the table. */
#pragma once
#include "cli/run_context.h"

/* Collective; nothing when the run scored no text. */
void run_perplexity_record(run_context *rc);
/* Rank 0's line: the perplexity, the tokens scored and the windows. */
void run_perplexity_print(const run_context *rc);
