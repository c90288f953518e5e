/* `tripar report`'s telemetry section: per phase, the average of the /telemetry samples that
 * fall inside that phase's events on their rank (docs/cli.md). Files without /telemetry get
 * nothing. */
#pragma once
#include <jansson.h>
#include <stdio.h>

#include "io/runread.h"

/* Prints the table after the per-phase table; nothing when the file has no /telemetry. */
void report_telemetry_print(FILE *out, const run_data *run);
/* Adds "telemetry" to a run's JSON object; nothing when the file has no /telemetry. */
void report_telemetry_json(json_t *run_object, const run_data *run);
