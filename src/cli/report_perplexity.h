/* `tripar report`'s perplexity line: what a perplexity run recorded in /output/nll
 * (docs/schema.md). Files of generation runs get nothing. */
#pragma once
#include <stdio.h>

#include "io/runread.h"

/* "  perplexity 23.2213 over 252 tokens (4 windows of 128, tokens 65 to 127 of each)". */
void report_perplexity_print(FILE *out, const run_data *run);
