/* The memory check of `tripar run` (docs/jobs.md, "Memory check"): before the model and the
 * engine allocate, every rank's plan is set against what it can have. Ranks of one node share
 * the node's memory (MemAvailable and the cgroup limit, base/memlimit.h), and ranks on one GPU
 * share its free memory (cudaMemGetInfo through the backend's memory_info), so the plans are
 * summed over the ranks that share. Every rank gathers every rank's numbers and so reaches the
 * same verdict: all go on, or all exit 2 together while the first rank of each node that does
 * not fit says why. A plan that does not fit would otherwise end in the OOM killer, minutes
 * into loading weights, or in a CUDA allocation failure on one rank. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/memlimit.h"
#include "cli/run_context.h"
#include "parallel/agree.h"

/* What the plan leaves out (the kernels' scratch, BLAS's buffers, MPI's and HDF5's buffers, the
 * loader's staging, the run file's buffers; on a GPU cuBLAS's workspace and NCCL's channels)
 * is covered by a headroom: a fraction of the plan plus a fixed amount per rank. Measured on
 * the cpu backend: a tiny model's run peaks at about 20 MiB of resident memory above what it
 * had at the check (docs/jobs.md). */
#define HEADROOM_FRACTION 0.10
#define HEADROOM_RANK_CPU (64ull << 20)
#define HEADROOM_RANK_GPU (512ull << 20)
#define MIB(x) ((double)(x) / 1048576.0)
#define PRINT_RANKS_MAX 16

/* Each rank's numbers, gathered on every rank. */
enum { F_NODE, F_LOCAL, F_DEVICE, F_WEIGHTS, F_ACT, F_KV, F_STAGING, F_HAVE, F_COUNT };

/* A rank's need with the headroom; F_STAGING is 0 on a GPU (the loader stages in host memory,
 * which the device check does not count). */
static unsigned long long rank_need(const long long *f, unsigned long long per_rank) {
    double plan = (double)f[F_WEIGHTS] + (double)f[F_ACT] + (double)f[F_KV] + (double)f[F_STAGING];
    return (unsigned long long)(plan * (1.0 + HEADROOM_FRACTION)) + per_rank;
}

/* Whether ranks a and b draw on the same memory: one node, and on a GPU one device. */
static int shares(const long long *a, const long long *b, int on_device) {
    return a[F_NODE] == b[F_NODE] && (!on_device || a[F_DEVICE] == b[F_DEVICE]);
}

/* What the first rank of a group says about its own limit: the numbers behind "have". */
static void describe_have(char *buf, size_t len, const mesh *m, const memlimit *ml, int on_device,
                          long long have) {
    if (on_device) {
        snprintf(buf, len, "device %d of host %s has %.1f MiB free (cudaMemGetInfo)", m->device,
                 m->host, MIB(have));
        return;
    }
    const char *which;
    memlimit_have(ml, &which);
    if (!strcmp(which, "cgroup"))
        snprintf(buf, len,
                 "host %s has %.1f MiB under its cgroup v%d limit (%s: limit %.1f MiB, %.1f MiB "
                 "in use of which %.1f MiB reclaimable page cache; MemAvailable %.1f MiB)",
                 m->host, MIB(have), ml->cgroup_version, ml->cgroup_dir, MIB(ml->cgroup_limit),
                 MIB(ml->cgroup_usage), MIB(ml->cgroup_inactive), MIB(ml->mem_available));
    else
        snprintf(buf, len, "host %s has %.1f MiB (MemAvailable of /proc/meminfo%s)", m->host,
                 MIB(have), ml->cgroup_version ? "; its cgroup allows more" : "; no cgroup limit");
}

/* The first rank of a group that does not fit prints the verdict, every rank of the group and
 * what to try, as one message. */
static void report_group(const mesh *m, const memlimit *ml, const long long *all, int on_device,
                         unsigned long long per_rank, unsigned long long need, long long have) {
    const long long *me = all + (size_t)m->world_rank * F_COUNT;
    char what[1024];
    describe_have(what, sizeof what, m, ml, on_device, have);
    int members = 0;
    for (int r = 0; r < m->world_size; r++)
        members += shares(all + (size_t)r * F_COUNT, me, on_device);
    fprintf(stderr,
            "tripar: error: [rank %d host %s] the run's memory plan does not fit: the %d rank%s "
            "%s need %.1f MiB together, and %s\n",
            m->world_rank, m->host, members, members == 1 ? "" : "s",
            on_device ? "on this device" : "of this node", MIB(need), what);
    int shown = 0;
    for (int r = 0; r < m->world_size; r++) {
        const long long *f = all + (size_t)r * F_COUNT;
        if (!shares(f, me, on_device)) continue;
        if (shown++ == PRINT_RANKS_MAX) {
            fprintf(stderr, "  ... and %d more ranks\n", members - PRINT_RANKS_MAX);
            break;
        }
        fprintf(stderr,
                "  rank %d: %.1f MiB = weights %.1f + activations %.1f + KV cache %.1f + load "
                "staging %.1f MiB, + %.0f%% and %.0f MiB headroom\n",
                r, MIB(rank_need(f, per_rank)), MIB(f[F_WEIGHTS]), MIB(f[F_ACT]), MIB(f[F_KV]),
                MIB(f[F_STAGING]), HEADROOM_FRACTION * 100.0, MIB(per_rank));
    }
    fprintf(stderr,
            "  try: more tensor- or pipeline-parallel ranks over more %s (parallel.tp, "
            "parallel.pp), a smaller batch or context (input, generate.new_tokens), or "
            "model.precision: int8w; backend.memory_check: false skips this check (docs/jobs.md, "
            "\"Memory check\")\n",
            on_device ? "GPUs" : "nodes");
}

int run_memory_check(const run_context *rc, const run_memory_plan *plan) {
    const mesh *m = &rc->mesh;
    if (!rc->j.memory_check) return TRIPAR_EXIT_OK; /* the same key on every rank */
    const backend_ops *ops = rc->be.ops;
    const int on_device = m->device >= 0;
    unsigned long long have = MEMLIMIT_NONE;
    memlimit ml; /* read once: the verdict and its message use the same numbers */
    memlimit_read(&ml);
    if (on_device && ops->memory_info) {
        size_t free_bytes = 0, total_bytes = 0;
        ops->memory_info(rc->be.ctx, &free_bytes, &total_bytes);
        if (total_bytes) have = free_bytes; /* 0 total: the query failed, so no limit known */
    } else if (!on_device) {
        have = memlimit_have(&ml, NULL);
    }
    const unsigned long long per_rank = on_device ? HEADROOM_RANK_GPU : HEADROOM_RANK_CPU;
    long long mine[F_COUNT] = {
        [F_NODE] = m->node_index,
        [F_LOCAL] = m->local_rank,
        [F_DEVICE] = m->device,
        [F_WEIGHTS] = (long long)plan->weights,
        [F_ACT] = (long long)plan->activations,
        [F_KV] = (long long)plan->kv,
        [F_STAGING] = on_device ? 0 : (long long)plan->staging,
        [F_HAVE] = have > (unsigned long long)LLONG_MAX ? LLONG_MAX : (long long)have,
    };
    long long *all = xmalloc((size_t)m->world_size * F_COUNT * sizeof(long long));
    agree_gather_longs(m->world, mine, F_COUNT, all);
    /* Each group is judged by its first rank's reading (the lowest world rank in it): every
     * rank computes the same verdicts from the same gathered numbers. */
    int bad = 0;
    for (int r = 0; r < m->world_size; r++) {
        const long long *lead = all + (size_t)r * F_COUNT;
        int first = 1;
        for (int q = 0; q < r && first; q++)
            first = !shares(all + (size_t)q * F_COUNT, lead, on_device);
        if (!first) continue;
        unsigned long long need = 0;
        for (int q = r; q < m->world_size; q++)
            if (shares(all + (size_t)q * F_COUNT, lead, on_device))
                need += rank_need(all + (size_t)q * F_COUNT, per_rank);
        if (lead[F_HAVE] == LLONG_MAX || need <= (unsigned long long)lead[F_HAVE]) continue;
        bad = 1;
        if (r == m->world_rank) report_group(m, &ml, all, on_device, per_rank, need, lead[F_HAVE]);
    }
    free(all);
    return bad ? TRIPAR_EXIT_USAGE : TRIPAR_EXIT_OK;
}
