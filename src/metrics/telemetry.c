/* The telemetry sampler (telemetry.h): one pthread per rank wakes rate_hz times a second on an
 * absolute schedule and appends one sample to a preallocated table; nothing is allocated while
 * sampling. Sources: getrusage, /proc/self/statm, perf uncore IMC counters, NVML (dlopen). */
#include "metrics/telemetry.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/check.h"

/* ---- NVML ------------------------------------------------------------------------------ */

/* NVML's ABI as documented in nvml.h (NVML_SUCCESS = 0, NVML_CLOCK_SM = 1, NVML_CLOCK_MEM = 2);
 * declared here because the header is not installed where tripar builds without CUDA. */
enum { NVML_OK = 0, NVML_CLOCK_SM_ID = 1, NVML_CLOCK_MEM_ID = 2 };

static void *nvml_sym(telemetry_nvml *n, const char *name) {
    void *f = dlsym(n->lib, name);
    if (!f)
        snprintf(n->status, sizeof n->status, "absent: %s has no %s", "libnvidia-ml.so.1", name);
    return f;
}

int telemetry_nvml_open(telemetry_nvml *n, const char *pci_bus_id, int device_index) {
    memset(n, 0, sizeof *n);
    n->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!n->lib) {
        const char *why = dlerror();
        snprintf(n->status, sizeof n->status, "absent: %s", why ? why : "dlopen failed");
        return -1;
    }
    int (*init)(void) = (int (*)(void))nvml_sym(n, "nvmlInit_v2");
    int (*by_index)(unsigned, void **) =
        (int (*)(unsigned, void **))nvml_sym(n, "nvmlDeviceGetHandleByIndex_v2");
    int (*by_bus)(const char *, void **) =
        (int (*)(const char *, void **))nvml_sym(n, "nvmlDeviceGetHandleByPciBusId_v2");
    int (*driver)(char *, unsigned) =
        (int (*)(char *, unsigned))nvml_sym(n, "nvmlSystemGetDriverVersion");
    n->utilization = (int (*)(void *, unsigned *))nvml_sym(n, "nvmlDeviceGetUtilizationRates");
    n->memory = (int (*)(void *, unsigned long long *))nvml_sym(n, "nvmlDeviceGetMemoryInfo");
    n->power = (int (*)(void *, unsigned *))nvml_sym(n, "nvmlDeviceGetPowerUsage");
    n->clock = (int (*)(void *, int, unsigned *))nvml_sym(n, "nvmlDeviceGetClockInfo");
    n->shutdown = (int (*)(void))nvml_sym(n, "nvmlShutdown");
    if (!init || !by_index || !by_bus || !driver || !n->utilization || !n->memory || !n->power ||
        !n->clock || !n->shutdown) {
        dlclose(n->lib);
        n->lib = NULL;
        return -1;
    }
    int rc = init();
    if (rc != NVML_OK) {
        snprintf(n->status, sizeof n->status, "absent: nvmlInit_v2 returned %d (no driver?)", rc);
        dlclose(n->lib);
        n->lib = NULL;
        return -1;
    }
    rc = pci_bus_id && pci_bus_id[0]
             ? by_bus(pci_bus_id, &n->device)
             : by_index((unsigned)(device_index > 0 ? device_index : 0), &n->device);
    if (rc != NVML_OK) {
        snprintf(n->status, sizeof n->status, "absent: NVML finds no device %s %s (error %d)",
                 pci_bus_id && pci_bus_id[0] ? "at PCI bus id" : "of index",
                 pci_bus_id && pci_bus_id[0] ? pci_bus_id : "0 or above", rc);
        n->shutdown();
        dlclose(n->lib);
        n->lib = NULL;
        return -1;
    }
    char version[80] = "?";
    if (driver(version, sizeof version) != NVML_OK) snprintf(version, sizeof version, "?");
    char which[48];
    if (pci_bus_id && pci_bus_id[0])
        snprintf(which, sizeof which, "%s", pci_bus_id);
    else
        snprintf(which, sizeof which, "index %d", device_index > 0 ? device_index : 0);
    snprintf(n->status, sizeof n->status, "loaded: driver %s, device %s", version, which);
    return 0;
}

void telemetry_nvml_read(const telemetry_nvml *n, telemetry_sample *s) {
    s->gpu_sm_util = s->gpu_mem_util = s->gpu_mem_used_bytes = NAN;
    s->gpu_power_w = s->gpu_sm_clock_mhz = s->gpu_mem_clock_mhz = NAN;
    if (!n->lib) return;
    unsigned util[2], mw, mhz;
    unsigned long long mem[3]; /* nvmlMemory_t: total, free, used */
    if (n->utilization(n->device, util) == NVML_OK) {
        s->gpu_sm_util = util[0];
        s->gpu_mem_util = util[1];
    }
    if (n->memory(n->device, mem) == NVML_OK) s->gpu_mem_used_bytes = (double)mem[2];
    if (n->power(n->device, &mw) == NVML_OK) s->gpu_power_w = 1e-3 * mw;
    if (n->clock(n->device, NVML_CLOCK_SM_ID, &mhz) == NVML_OK) s->gpu_sm_clock_mhz = mhz;
    if (n->clock(n->device, NVML_CLOCK_MEM_ID, &mhz) == NVML_OK) s->gpu_mem_clock_mhz = mhz;
}

void telemetry_nvml_close(telemetry_nvml *n) {
    if (n->lib) {
        n->shutdown();
        dlclose(n->lib);
    }
    n->lib = NULL;
}

/* ---- the node's memory bandwidth -------------------------------------------------------- */

#define PMU_DIR "/sys/bus/event_source/devices"

static int file_read_text(const char *path, char *buf, size_t len) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n < 0) return -1;
    buf[n] = 0;
    return 0;
}

/* Opens one counting perf event of an uncore IMC PMU; its events file reads like
 * "event=0x04,umask=0x03" (Intel's layout: event in config bits 0-7, umask in 8-15). */
static int imc_event_open(const char *pmu, const char *event) {
    char path[512], text[128];
    snprintf(path, sizeof path, PMU_DIR "/%s/type", pmu);
    if (file_read_text(path, text, sizeof text)) return -1;
    unsigned type = (unsigned)strtoul(text, NULL, 10);
    snprintf(path, sizeof path, PMU_DIR "/%s/events/%s", pmu, event);
    if (file_read_text(path, text, sizeof text)) return -1;
    unsigned ev = 0, umask = 0;
    char *p = strstr(text, "event=");
    if (p) ev = (unsigned)strtoul(p + 6, NULL, 0);
    p = strstr(text, "umask=");
    if (p) umask = (unsigned)strtoul(p + 6, NULL, 0);
    int cpu = 0; /* uncore counters count the whole socket from any one CPU of it */
    snprintf(path, sizeof path, PMU_DIR "/%s/cpumask", pmu);
    if (file_read_text(path, text, sizeof text) == 0) cpu = atoi(text);
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = type;
    a.config = ev | (umask << 8);
    return (int)syscall(SYS_perf_event_open, &a, -1, cpu, -1, 0);
}

/* Finds the DRAM counters. On a host with Intel uncore IMC PMUs and perf permission
 * (perf_event_paranoid <= 0 or CAP_PERFMON) they count every CAS of the socket; elsewhere
 * (VMs, containers, AMD without amd_df events) the kernel exposes none and the field is NaN. */
static void mem_bw_open(telemetry *t) {
    t->n_mem_bw_fd = 0;
    DIR *d = opendir(PMU_DIR);
    if (!d) {
        snprintf(t->mem_bw_status, sizeof t->mem_bw_status,
                 "NaN: no %s (kernel without perf events)", PMU_DIR);
        return;
    }
    int found = 0, refused = 0, err = 0;
    struct dirent *e;
    while ((e = readdir(d)) && t->n_mem_bw_fd + 2 <= (int)(sizeof t->mem_bw_fd / sizeof(int))) {
        if (strncmp(e->d_name, "uncore_imc", 10) != 0) continue;
        found++;
        static const char *const events[] = {"cas_count_read", "cas_count_write"};
        for (int k = 0; k < 2; k++) {
            int fd = imc_event_open(e->d_name, events[k]);
            if (fd >= 0) {
                t->mem_bw_fd[t->n_mem_bw_fd++] = fd;
            } else {
                refused++;
                err = errno;
            }
        }
    }
    closedir(d);
    if (!found) {
        snprintf(t->mem_bw_status, sizeof t->mem_bw_status,
                 "NaN: no uncore_imc PMU in " PMU_DIR " (this kernel, VM or CPU exposes no DRAM "
                 "counters)");
    } else if (refused) {
        for (int i = 0; i < t->n_mem_bw_fd; i++)
            close(t->mem_bw_fd[i]);
        t->n_mem_bw_fd = 0;
        snprintf(t->mem_bw_status, sizeof t->mem_bw_status,
                 "NaN: %d uncore_imc PMUs but perf_event_open refused their CAS counters: %s "
                 "(needs perf_event_paranoid <= 0 or CAP_PERFMON)",
                 found, strerror(err));
    } else {
        t->mem_bw_scale = 64.0; /* one CAS moves one 64-byte line */
        snprintf(t->mem_bw_status, sizeof t->mem_bw_status,
                 "perf uncore_imc cas_count_read + cas_count_write on %d PMUs, 64 B per CAS",
                 found);
    }
}

static uint64_t mem_bw_total(const telemetry *t) {
    uint64_t sum = 0;
    for (int i = 0; i < t->n_mem_bw_fd; i++) {
        uint64_t v = 0;
        if (read(t->mem_bw_fd[i], &v, sizeof v) == (ssize_t)sizeof v) sum += v;
    }
    return sum;
}

/* ---- the process --------------------------------------------------------------------- */

static double process_cpu_seconds(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return NAN;
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
           (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;
}

/* Resident pages from /proc/self/statm (its second field), read without stdio's buffers. */
static double process_rss_bytes(void) {
    char text[256];
    if (file_read_text("/proc/self/statm", text, sizeof text)) return NAN;
    char *p = strchr(text, ' ');
    if (!p) return NAN;
    return (double)strtoull(p + 1, NULL, 10) * (double)sysconf(_SC_PAGESIZE);
}

/* ---- the sampler ---------------------------------------------------------------------- */

static void sample_take(telemetry *t) {
    telemetry_sample s;
    const double wall = timer_host_seconds(), cpu = process_cpu_seconds();
    s.t = timer_now(t->tm);
    const double dt = wall - t->wall_last;
    s.cpu_util = dt > 0 ? (cpu - t->cpu_last) / dt : NAN;
    s.rss_bytes = process_rss_bytes();
    s.mem_bw_gbs = NAN;
    if (t->n_mem_bw_fd) {
        uint64_t total = mem_bw_total(t);
        if (dt > 0) s.mem_bw_gbs = (double)(total - t->mem_bw_last) * t->mem_bw_scale / dt / 1e9;
        t->mem_bw_last = total;
    }
    telemetry_nvml_read(&t->nvml, &s);
    t->cpu_last = cpu;
    t->wall_last = wall;
    const long i = t->count;
    if (i >= t->capacity) {
        __atomic_fetch_add(&t->dropped, 1, __ATOMIC_RELAXED); /* read by the writer */
        return;
    }
    t->samples[i] = s;
    __atomic_store_n(&t->count, i + 1, __ATOMIC_RELEASE); /* the writer reads [0, count) */
}

static void *sampler_main(void *arg) {
    telemetry *t = arg;
    const double period = 1.0 / t->rate_hz;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    pthread_mutex_lock(&t->lock);
    while (!t->stop) {
        /* an absolute schedule: a slow sample delays the next, never the rate */
        long ns = next.tv_nsec + (long)(period * 1e9);
        next.tv_sec += ns / 1000000000L;
        next.tv_nsec = ns % 1000000000L;
        int rc = 0;
        while (!t->stop && rc != ETIMEDOUT)
            rc = pthread_cond_timedwait(&t->wake, &t->lock, &next);
        if (t->stop) break;
        pthread_mutex_unlock(&t->lock);
        sample_take(t);
        pthread_mutex_lock(&t->lock);
    }
    pthread_mutex_unlock(&t->lock);
    return NULL;
}

void telemetry_init(telemetry *t, int rate_hz, const timer *tm, int use_nvml,
                    const char *pci_bus_id, int device_index) {
    memset(t, 0, sizeof *t);
    t->rate_hz = rate_hz > 0 ? rate_hz : 0;
    t->tm = tm;
    t->use_nvml = use_nvml;
    if (!t->rate_hz) {
        snprintf(t->nvml.status, sizeof t->nvml.status, "off: record.telemetry is 0");
        snprintf(t->mem_bw_status, sizeof t->mem_bw_status, "off: record.telemetry is 0");
        return;
    }
    long cap = (long)t->rate_hz * TELEMETRY_SECONDS_HELD;
    t->capacity = cap > TELEMETRY_MAX_SAMPLES ? TELEMETRY_MAX_SAMPLES : cap;
    t->samples = xcalloc((unsigned long)t->capacity, sizeof(telemetry_sample));
    if (use_nvml)
        telemetry_nvml_open(&t->nvml, pci_bus_id, device_index);
    else
        snprintf(t->nvml.status, sizeof t->nvml.status, "off: the cpu backend has no GPU");
    mem_bw_open(t);
    pthread_condattr_t ca;
    CHECK(pthread_condattr_init(&ca) == 0, "pthread_condattr_init failed");
    CHECK(pthread_condattr_setclock(&ca, CLOCK_MONOTONIC) == 0, "pthread_condattr_setclock failed");
    CHECK(pthread_cond_init(&t->wake, &ca) == 0, "pthread_cond_init failed");
    pthread_condattr_destroy(&ca);
    CHECK(pthread_mutex_init(&t->lock, NULL) == 0, "pthread_mutex_init failed");
}

void telemetry_start(telemetry *t) {
    if (!t->rate_hz || t->running) return;
    t->wall_last = timer_host_seconds();
    t->cpu_last = process_cpu_seconds();
    t->mem_bw_last = mem_bw_total(t);
    t->stop = 0;
    int rc = pthread_create(&t->thread, NULL, sampler_main, t);
    CHECK(rc == 0, "cannot start the telemetry thread: %s", strerror(rc));
    t->running = 1;
}

void telemetry_stop(telemetry *t) {
    if (!t->running) return;
    pthread_mutex_lock(&t->lock);
    t->stop = 1;
    pthread_cond_signal(&t->wake);
    pthread_mutex_unlock(&t->lock);
    int rc = pthread_join(t->thread, NULL);
    CHECK(rc == 0, "cannot join the telemetry thread: %s", strerror(rc));
    t->running = 0;
}

void telemetry_free(telemetry *t) {
    telemetry_stop(t);
    if (t->rate_hz) {
        pthread_cond_destroy(&t->wake);
        pthread_mutex_destroy(&t->lock);
    }
    telemetry_nvml_close(&t->nvml);
    for (int i = 0; i < t->n_mem_bw_fd; i++)
        close(t->mem_bw_fd[i]);
    free(t->samples);
    memset(t, 0, sizeof *t);
}

long telemetry_count(const telemetry *t) { return __atomic_load_n(&t->count, __ATOMIC_ACQUIRE); }
