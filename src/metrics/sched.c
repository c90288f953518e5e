/* Preemption per step (see sched.h). The schedstat files stay open for the whole run and are
 * read with pread at offset 0, which makes the kernel regenerate them: a sample is one pread
 * per thread and one getrusage, with nothing opened or allocated while generating. */
#include "metrics/sched.h"

#include <dirent.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "base/check.h"

const char SCHED_SOURCE[] =
    "run_delay: /proc/self/task/*/schedstat field 2 (ns waiting on a runqueue), summed over the "
    "process's threads (main, BLAS workers, MPI progress, telemetry, watchdog; threads are "
    "listed before each generation and at each flush), NaN where schedstat is absent; nivcsw, "
    "nvcsw: getrusage(RUSAGE_SELF) ru_nivcsw, ru_nvcsw (every thread); each the difference "
    "between the step event's start and its end";

static int schedstat_open(int tid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/schedstat", tid);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* Field 2 of a schedstat file ("cpu_ns run_delay_ns timeslices"); -1 when it cannot be read
 * (the thread has exited: ESRCH). */
static int schedstat_read(int fd, uint64_t *run_delay_ns) {
    char buf[96];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return -1;
    buf[n] = '\0';
    char *end;
    (void)strtoull(buf, &end, 10);
    if (end == buf) return -1;
    char *p = end;
    unsigned long long v = strtoull(p, &end, 10);
    if (end == p) return -1;
    *run_delay_ns = (uint64_t)v;
    return 0;
}

void sched_init(sched_sampler *s, int on, long capacity) {
    memset(s, 0, sizeof *s);
    s->open_event = -1;
    for (int i = 0; i < SCHED_MAX_THREADS; i++)
        s->fds[i] = -1;
    if (!on || capacity <= 0) return;
    s->on = 1;
    s->capacity = capacity;
    s->rows = xcalloc((size_t)capacity, sizeof(sched_row));
    int fd = schedstat_open((int)getpid());
    s->schedstat = fd >= 0;
    if (fd >= 0) close(fd);
    sched_threads_refresh(s);
}

void sched_free(sched_sampler *s) {
    for (int i = 0; i < s->n_threads; i++)
        if (s->fds[i] >= 0) close(s->fds[i]);
    free(s->rows);
    memset(s, 0, sizeof *s);
    s->open_event = -1;
}

static int thread_known(const sched_sampler *s, int tid) {
    for (int i = 0; i < s->n_threads; i++)
        if (s->tids[i] == tid) return 1;
    return 0;
}

void sched_threads_refresh(sched_sampler *s) {
    if (!s->on || !s->schedstat) return;
    DIR *d = opendir("/proc/self/task");
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL && s->n_threads < SCHED_MAX_THREADS) {
        char *end;
        long tid = strtol(de->d_name, &end, 10);
        if (end == de->d_name || *end || tid <= 0 || thread_known(s, (int)tid)) continue;
        int fd = schedstat_open((int)tid);
        uint64_t ns = 0;
        if (fd < 0) continue; /* exited meanwhile */
        if (schedstat_read(fd, &ns) != 0) {
            close(fd);
            continue;
        }
        /* its delay so far happened before it was seen: the open step's start reading did
         * not include it, so the step counts it from here */
        s->tids[s->n_threads] = (int)tid;
        s->fds[s->n_threads] = fd;
        s->last_ns[s->n_threads] = ns;
        s->n_threads++;
        s->live++;
        if (s->open_event >= 0) s->open.run_delay_ns += ns;
    }
    closedir(d);
}

void sched_read(sched_sampler *s, sched_counters *c) {
    uint64_t sum = s->gone_ns;
    for (int i = 0; i < s->n_threads; i++) {
        if (s->fds[i] < 0) continue;
        uint64_t ns;
        if (schedstat_read(s->fds[i], &ns) == 0) {
            s->last_ns[i] = ns;
        } else { /* exited: its last reading stays in the sum */
            close(s->fds[i]);
            s->fds[i] = -1;
            s->gone_ns += s->last_ns[i];
            s->live--;
        }
        sum += s->last_ns[i];
    }
    c->run_delay_ns = sum;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        c->nivcsw = ru.ru_nivcsw;
        c->nvcsw = ru.ru_nvcsw;
    } else {
        c->nivcsw = c->nvcsw = 0;
    }
}

void sched_step_begin(sched_sampler *s, long event) {
    if (!s || !s->on) return;
    sched_read(s, &s->open);
    s->open_event = event;
}

void sched_step_end(sched_sampler *s, long event) {
    if (!s || !s->on || s->open_event != event) return;
    s->open_event = -1;
    sched_counters now;
    sched_read(s, &now);
    if (s->count >= s->capacity) {
        s->dropped++;
        return;
    }
    sched_row *r = &s->rows[s->count++];
    r->event = event;
    r->run_delay = s->schedstat ? 1e-9 * (double)(now.run_delay_ns - s->open.run_delay_ns) : NAN;
    r->nivcsw = now.nivcsw - s->open.nivcsw;
    r->nvcsw = now.nvcsw - s->open.nvcsw;
}
