/* Per-rank hardware telemetry (record.telemetry): a low-rate background thread samples process
 * CPU use, RSS, the node's memory bandwidth where the kernel exposes it, and the GPU through
 * NVML, on the timer's clock, into a table preallocated at start. Written to
 * /telemetry/rank_NNNNN by runfile_write_telemetry (docs/schema.md). */
#pragma once
#include <pthread.h>
#include <stdint.h>

#include "metrics/timing.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One sample; a field the machine does not expose is NaN. Stored as a compound (schema.md). */
typedef struct {
    double t;            /* seconds since run start on rank 0's clock (timer_now) */
    double cpu_util;     /* cores busy: process CPU time (user + system, every thread)
                            over wall time since the previous sample */
    double rss_bytes;    /* resident set size */
    double mem_bw_gbs;   /* the node's DRAM bandwidth, read + write, GB/s */
    double gpu_sm_util;  /* percent of the last sample period a kernel ran (NVML) */
    double gpu_mem_util; /* percent of it device memory was read or written (NVML) */
    double gpu_mem_used_bytes;
    double gpu_power_w;
    double gpu_sm_clock_mhz, gpu_mem_clock_mhz;
} telemetry_sample;

/* NVML loaded by dlopen (never linked): the entry points the sampler calls. */
typedef struct {
    void *lib;                                        /* dlopen handle, NULL when absent */
    void *device;                                     /* nvmlDevice_t */
    int (*utilization)(void *dev, unsigned *gpu_mem); /* nvmlDeviceGetUtilizationRates */
    int (*memory)(void *dev, unsigned long long *total_free_used);
    int (*power)(void *dev, unsigned *milliwatts);
    int (*clock)(void *dev, int kind, unsigned *mhz);
    int (*shutdown)(void);
    char status[256]; /* "loaded: driver D, device I" or "absent: <why>" */
} telemetry_nvml;

/* Loads NVML and resolves this rank's device: by PCI bus id when given (CUDA and NVML number
 * devices differently), else by index. Returns 0, or -1 with n->status = "absent: <why>"
 * (the dlerror text when the library is missing). */
int telemetry_nvml_open(telemetry_nvml *n, const char *pci_bus_id, int device_index);
/* Reads the GPU fields of s (NaN those NVML refuses). */
void telemetry_nvml_read(const telemetry_nvml *n, telemetry_sample *s);
void telemetry_nvml_close(telemetry_nvml *n);

/* The samples at most held: rate x 1 hour, capped; later ones are counted as dropped. */
enum { TELEMETRY_SECONDS_HELD = 3600, TELEMETRY_MAX_SAMPLES = 1000000 };

typedef struct {
    int rate_hz;               /* 0: off, no thread, no samples */
    const timer *tm;           /* the clock (timer_now) */
    telemetry_sample *samples; /* capacity entries, preallocated */
    long capacity;
    long count;   /* published with release order: samples [0, count) are final */
    long flushed; /* written to the run file so far (the writer's) */
    long dropped;
    telemetry_nvml nvml;
    int use_nvml;
    char mem_bw_status[256];        /* where the bandwidth comes from, or why it is NaN */
    int mem_bw_fd[16], n_mem_bw_fd; /* perf uncore IMC counters (cas_count_read/write) */
    double mem_bw_scale;            /* bytes per counted event */
    uint64_t mem_bw_last;
    double cpu_last, wall_last;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int running, stop;
} telemetry;

/* Prepares sampling at rate_hz on the timer's clock (which must be initialised). use_nvml:
 * the backend is cuda, so the GPU fields come from NVML on the device at pci_bus_id (or
 * device_index). Allocates everything sampling needs. */
void telemetry_init(telemetry *t, int rate_hz, const timer *tm, int use_nvml,
                    const char *pci_bus_id, int device_index);
/* Starts the thread (nothing when rate_hz is 0). */
void telemetry_start(telemetry *t);
/* Stops and joins the thread; the samples stay. Safe to call twice. */
void telemetry_stop(telemetry *t);
/* Stops the thread if running, closes NVML and frees the table. */
void telemetry_free(telemetry *t);
/* Samples [0, n) are final and may be read while the thread runs. */
long telemetry_count(const telemetry *t);

#ifdef __cplusplus
}
#endif
