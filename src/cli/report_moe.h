/* `tripar report`'s expert-load section: per layer and overall, the max/mean tokens per expert
 * of a mixture of experts' recorded load (/moe), prefill and decode apart, and the hottest
 * expert (docs/cli.md). Dense runs, without /moe, get nothing. */
#pragma once
#include <jansson.h>
#include <stdio.h>

#include "io/runread.h"

/* Prints the section; nothing when the file has no /moe. */
void report_moe_print(FILE *out, const run_data *run);
/* Adds "expert_load" to a run's JSON object; nothing when the file has no /moe. */
void report_moe_json(json_t *run_object, const run_data *run);
/* The overall max/mean tokens per expert of each period (prefill, decode), for the CSV, NaN
 * where nothing was routed in the period; returns 0 (both NaN) when the file has no /moe. */
int report_moe_ratios(const run_data *run, double ratios[2]);
