/* Serial reader of /telemetry for the tools (report): every rank's samples and the group's
 * attributes. Layout: docs/schema.md "/telemetry". */
#pragma once
#include <hdf5.h>

#include "metrics/telemetry.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
    int present; /* 0 when the file has no /telemetry (record.telemetry 0) */
    int rate_hz, world_size;
    char nvml[256], memory_bandwidth[256];
    long *n;                    /* (world_size) samples per rank */
    telemetry_sample **samples; /* (world_size) arrays of n[r]; NULL when a rank has none */
} run_telemetry;

/* Reads /telemetry of an open run file of world_size ranks. Returns 0 (present or not), or -1
 * with error_message() set when the group is there but damaged. */
int run_telemetry_read(hid_t file, int world_size, run_telemetry *out);
void run_telemetry_free(run_telemetry *t);

#ifdef __cplusplus
}
#endif
