/* The stall watchdog (watchdog.h): the waits the comm backends mark, the thread that polls them
 * every second, and the report and exit when a rank has made no progress for too long. */
#include "parallel/watchdog.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/check.h"
#include "parallel/launcher_guard.h"

enum {
    WATCH_COMMS = 8,        /* named communicators: tp, pp, dp, world (and a sweep's next) */
    WATCH_HOST = 64,        /* bytes per host name, as the mesh gathers them */
    WATCH_HOOKS = 4,
    WATCH_STEP_FACTOR = 20, /* the timeout allows this many times the slowest step */
    /* Between the report and the exit: the other ranks, blocked since the same fault, report
     * within the thread's poll period, before the launcher ends them for this rank's exit. */
    WATCH_EXIT_GRACE_S = 2,
    /* After the exit: how long the launcher gets to end the job before the guard ends it */
    WATCH_LAUNCHER_GRACE_S = 5,
    /* The least timeout in set-up: a peer may legitimately take this long to reach a collective
     * of the start (its process launched late on a loaded node, its libraries loading, MPI's
     * wire-up across many nodes), whatever the run's own timeout */
    WATCH_SETUP_FLOOR_S = 30,
};

typedef struct {
    MPI_Comm comm;
    char label[16];
    int size;
    int *world; /* (size) the world rank of each group rank */
} watch_comm;

static watch_comm comms[WATCH_COMMS];
static int n_comms;

/* What the rank waits in, packed into one word so the thread never reads half of an update:
 * the op in bits 0-7, the named comm's index + 1 in bits 8-15 (0: unnamed), the peer + 1 above
 * (0: none). */
static _Atomic uint64_t waiting;
static _Atomic int64_t last_progress_ns, last_step_ns, slowest_step_ns;
static _Atomic int fired, phase;
/* 1 while a run generates and records (any stretch without progress counts), 0 in set-up (only
 * a marked wait counts): watchdog.h */
static _Atomic int run_mode;

static void (*hooks[WATCH_HOOKS])(void);
static int n_hooks;

static struct {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t wake; /* on CLOCK_MONOTONIC: watch_stop need not wait out a poll period */
    int running, stopping;
    double floor_s;
    int world_rank, world_size;
    char *hosts; /* (world_size * WATCH_HOST) */
} wd = {.lock = PTHREAD_MUTEX_INITIALIZER};

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void watch_comm_name(MPI_Comm comm, const char *label) {
    int slot = 0;
    while (slot < n_comms && comms[slot].comm != comm) slot++;
    if (slot == WATCH_COMMS) slot = 0; /* stale names of an earlier sweep point give way */
    if (slot == n_comms && n_comms < WATCH_COMMS) n_comms++;
    watch_comm *w = &comms[slot];
    free(w->world);
    w->comm = comm;
    snprintf(w->label, sizeof w->label, "%s", label);
    MPI_CHECK(MPI_Comm_size(comm, &w->size));
    w->world = xcalloc((size_t)w->size, sizeof(int));
    int *ranks = xcalloc((size_t)w->size, sizeof(int));
    for (int i = 0; i < w->size; i++) ranks[i] = i;
    MPI_Group group, world;
    MPI_CHECK(MPI_Comm_group(comm, &group));
    MPI_CHECK(MPI_Comm_group(MPI_COMM_WORLD, &world));
    MPI_CHECK(MPI_Group_translate_ranks(group, w->size, ranks, world, w->world));
    MPI_CHECK(MPI_Group_free(&group));
    MPI_CHECK(MPI_Group_free(&world));
    free(ranks);
}

void watch_wait_begin(watch_op op, MPI_Comm comm, int peer) {
    uint64_t index = 0;
    for (int i = 0; i < n_comms; i++)
        if (comms[i].comm == comm) {
            index = (uint64_t)i + 1;
            break;
        }
    atomic_store_explicit(&waiting, (uint64_t)op | index << 8 | (uint64_t)(uint32_t)(peer + 1) << 16,
                          memory_order_relaxed);
}

void watch_wait_end(void) {
    atomic_store_explicit(&waiting, WATCH_NONE, memory_order_relaxed);
    atomic_store_explicit(&last_progress_ns, now_ns(), memory_order_relaxed);
}

void watch_phase(watch_op op) { atomic_store_explicit(&phase, (int)op, memory_order_relaxed); }

void watch_step(void) {
    const int64_t now = now_ns(), prev = atomic_load(&last_step_ns);
    if (prev > 0 && now - prev > atomic_load(&slowest_step_ns))
        atomic_store(&slowest_step_ns, now - prev);
    atomic_store(&last_step_ns, now);
    atomic_store_explicit(&last_progress_ns, now, memory_order_relaxed);
}

int watch_expired(void) { return atomic_load(&fired); }

void watch_on_stall(void (*hook)(void)) {
    for (int i = 0; i < n_hooks; i++)
        if (hooks[i] == hook) return;
    CHECK(n_hooks < WATCH_HOOKS, "watchdog: more than %d stall hooks", WATCH_HOOKS);
    hooks[n_hooks++] = hook;
}

static const char *host_of(int world_rank) {
    if (world_rank == wd.world_rank) return tripar_host(); /* known before the gather */
    if (!wd.hosts || world_rank < 0 || world_rank >= wd.world_size) return "?";
    return wd.hosts + (size_t)world_rank * WATCH_HOST;
}

/* "rank 1 (host node1)" for a peer, "ranks 0,1 (hosts node1,node2)" for a group. */
static void describe_peers(const watch_comm *w, int peer, char *out, size_t len) {
    size_t n = 0;
    if (!w) {
        snprintf(out, len, peer >= 0 ? "group rank %d" : "its group", peer);
        return;
    }
    if (peer >= 0) {
        const int r = peer < w->size ? w->world[peer] : -1;
        snprintf(out, len, "rank %d (host %s)", r, host_of(r));
        return;
    }
    n += (size_t)snprintf(out + n, len - n, "ranks ");
    for (int i = 0; i < w->size && n < len; i++)
        n += (size_t)snprintf(out + n, len - n, "%s%d", i ? "," : "", w->world[i]);
    for (int i = 0; i < w->size && n < len; i++) {
        int seen = 0;
        for (int k = 0; k < i; k++) seen |= !strcmp(host_of(w->world[k]), host_of(w->world[i]));
        if (!seen) n += (size_t)snprintf(out + n, len - n, "%s%s", i ? "," : " (hosts ",
                                         host_of(w->world[i]));
    }
    if (n < len) snprintf(out + n, len - n, ")");
}

/* The one report line of this rank. */
static void report(double idle_s, double timeout_s) {
    static const char *const words[WATCH_OP_COUNT] = {
        [WATCH_ALLREDUCE] = "all-reduce", [WATCH_ALLGATHER] = "all-gather",
        [WATCH_BCAST] = "broadcast",      [WATCH_BARRIER] = "barrier",
        [WATCH_RECV] = "receive from",    [WATCH_SEND] = "send to",
        [WATCH_ALLTOALL] = "all-to-all",
    };
    const uint64_t w = atomic_load(&waiting);
    int op = (int)(w & 0xff);
    const int index = (int)((w >> 8) & 0xff);
    if (op == WATCH_NONE) op = atomic_load(&phase);
    const int peer = (int)(uint32_t)(w >> 16) - 1;
    const watch_comm *c = index > 0 && index <= n_comms ? &comms[index - 1] : NULL;
    char what[1024];
    if (op == WATCH_NONE || op >= WATCH_OP_COUNT) {
        snprintf(what, sizeof what, "not in a communication wait (computing, or blocked on the "
                 "device)");
    } else if (op == WATCH_RUNFILE) {
        snprintf(what, sizeof what, "waiting in run-file write (collective over every rank)");
    } else if (op == WATCH_NCCL) {
        snprintf(what, sizeof what, "waiting in NCCL stream wait (its TP and PP groups)");
    } else if (op == WATCH_INIT) {
        snprintf(what, sizeof what, "waiting in MPI_Init for every rank of the job to start "
                 "(one never started, froze or lost its node: see the launcher's messages)");
    } else if (op == WATCH_FINALIZE) {
        snprintf(what, sizeof what, "waiting in MPI_Finalize for every rank of the job");
    } else if (op == WATCH_CHECKPOINT) {
        snprintf(what, sizeof what, "waiting in checkpoint read or write (collective over every "
                 "rank)");
    } else if (op == WATCH_SETUP) {
        snprintf(what, sizeof what, "waiting in set-up: mesh, communicators or clock alignment "
                 "(collective over every rank)");
    } else {
        char peers[768];
        describe_peers(c, op == WATCH_RECV || op == WATCH_SEND ? peer : -1, peers, sizeof peers);
        snprintf(what, sizeof what, "waiting in %s %s%s%s", c ? c->label : "group", words[op],
                 op == WATCH_RECV || op == WATCH_SEND ? " " : " of ", peers);
    }
    char line[1400], setup[64] = "";
    if (!atomic_load(&run_mode))
        snprintf(setup, sizeof setup, ", at least %d s in set-up", WATCH_SETUP_FLOOR_S);
    int n = snprintf(line, sizeof line,
                     "tripar: stall: [rank %d host %s] no progress for %.1f s, %s; ending the run "
                     "(timeout %.0f s: record.stall_seconds%s)\n",
                     wd.world_rank, host_of(wd.world_rank), idle_s, what, timeout_s, setup);
    if (n < 0) return;
    /* write(2), not stdio: the main thread may hold stderr's lock, blocked mid-print */
    if (write(STDERR_FILENO, line, (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0)
        return;
}

/* Reports, aborts the NCCL communicators, and ends the process. Not MPI_Abort: MPI was
 * initialised without thread support, so no thread but the main one may call MPI; and on a
 * lost node the abort itself waits on that node. A rank that exits non-zero without
 * MPI_Finalize is what makes mpirun and srun end the job's other ranks; mpirun and orted then
 * wait on a lost node's daemon, which the launcher guard ends. */
static void __attribute__((noreturn)) fire(double idle_s, double timeout_s) {
    atomic_store(&fired, 1);
    report(idle_s, timeout_s);
    for (int i = 0; i < n_hooks; i++) hooks[i]();
    sleep(WATCH_EXIT_GRACE_S);
    launcher_guard_start(WATCH_LAUNCHER_GRACE_S);
    _exit(TRIPAR_EXIT_RUNTIME);
}

static void *watch_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&wd.lock);
    while (!wd.stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&wd.wake, &wd.lock, &until);
        if (wd.stopping) break;
        const double slowest = (double)atomic_load(&slowest_step_ns) * 1e-9;
        const int running = atomic_load(&run_mode);
        const double least = running || wd.floor_s > WATCH_SETUP_FLOOR_S ? wd.floor_s
                                                                          : WATCH_SETUP_FLOOR_S;
        const double timeout = !running || least > WATCH_STEP_FACTOR * slowest
                                   ? least
                                   : WATCH_STEP_FACTOR * slowest;
        const double idle = (double)(now_ns() - atomic_load(&last_progress_ns)) * 1e-9;
        const int in_marked_wait = (atomic_load(&waiting) & 0xff) != WATCH_NONE ||
                                   atomic_load(&phase) != WATCH_NONE;
        if (idle > timeout && (running || in_marked_wait)) {
            pthread_mutex_unlock(&wd.lock);
            fire(idle, timeout);
        }
    }
    pthread_mutex_unlock(&wd.lock);
    return NULL;
}

static void thread_start(double floor_seconds) {
    wd.floor_s = floor_seconds;
    wd.stopping = 0;
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&wd.wake, &attr);
    pthread_condattr_destroy(&attr);
    CHECK(pthread_create(&wd.thread, NULL, watch_main, NULL) == 0,
          "watchdog: cannot start its thread");
    wd.running = 1;
}

static void thread_stop(void) {
    if (!wd.running) return;
    pthread_mutex_lock(&wd.lock);
    wd.stopping = 1;
    pthread_cond_signal(&wd.wake);
    pthread_mutex_unlock(&wd.lock);
    pthread_join(wd.thread, NULL);
    pthread_cond_destroy(&wd.wake);
    wd.running = 0;
}

/* The first of the variables the launchers set (Open MPI, PMIx, Slurm, MPICH's PMI), or
 * fallback. */
static int launcher_env(const char *const *names, int fallback) {
    for (int i = 0; names[i]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return atoi(v);
    }
    return fallback;
}

void watch_init_begin(double floor_seconds) {
    static const char *const rank_vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "SLURM_PROCID",
                                            "PMI_RANK", NULL};
    static const char *const size_vars[] = {"OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE",
                                            NULL};
    wd.world_rank = launcher_env(rank_vars, 0);
    wd.world_size = launcher_env(size_vars, 0); /* 0: unknown (a singleton, say) */
    if (floor_seconds <= 0 || wd.world_size == 1 || wd.running) return;
    atomic_store(&run_mode, 0);
    atomic_store(&phase, WATCH_NONE);
    atomic_store(&last_progress_ns, now_ns());
    watch_wait_begin(WATCH_INIT, MPI_COMM_NULL, -1);
    thread_start(floor_seconds);
}

void watch_init_end(void) {
    watch_wait_end();
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &wd.world_rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &wd.world_size));
    if (wd.world_size < 2) thread_stop(); /* one rank has no peer to wait for */
}

void watch_start(double floor_seconds) {
    if (!wd.hosts) {
        MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &wd.world_rank));
        MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &wd.world_size));
        char *hosts = xcalloc((size_t)wd.world_size, WATCH_HOST);
        char mine[WATCH_HOST] = {0};
        snprintf(mine, sizeof mine, "%s", tripar_host());
        WATCH_WAIT(WATCH_ALLGATHER, MPI_COMM_WORLD, -1,
                   MPI_CHECK(MPI_Allgather(mine, WATCH_HOST, MPI_CHAR, hosts, WATCH_HOST, MPI_CHAR,
                                           MPI_COMM_WORLD)));
        wd.hosts = hosts;
        watch_comm_name(MPI_COMM_WORLD, "world");
    }
    if (floor_seconds <= 0 || wd.world_size < 2) return;
    atomic_store(&slowest_step_ns, 0);
    atomic_store(&last_step_ns, now_ns());
    atomic_store(&last_progress_ns, now_ns());
    if (!wd.running) {
        atomic_store(&waiting, WATCH_NONE);
        atomic_store(&phase, WATCH_NONE);
        thread_start(floor_seconds);
    }
    pthread_mutex_lock(&wd.lock); /* the thread reads it under the lock */
    wd.floor_s = floor_seconds;   /* a sweep point may set its own */
    pthread_mutex_unlock(&wd.lock);
    atomic_store(&run_mode, 1);
}

void watch_stop(void) {
    atomic_store(&run_mode, 0);
    atomic_store(&last_progress_ns, now_ns());
}

void watch_finalize(void) {
    watch_stop();
    WATCH_WAIT(WATCH_FINALIZE, MPI_COMM_NULL, -1, MPI_Finalize());
    thread_stop();
    free(wd.hosts);
    wd.hosts = NULL;
}
