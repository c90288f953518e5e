/* Comm backend selection per run (see comm_setup.h and docs/cuda.md, "Communication"):
 * host-memory backends -> MPI; device backends -> NCCL, or MPI staged through pinned host
 * memory when a GPU is shared or backend.comm is mpi. Tokens between stages, the stop vote and
 * the sampler's exchanges are host data and always take plain MPI. */
#include "parallel/comm_setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "parallel/device.h"
#include "parallel/watchdog.h"

static const int device_axes[] = {AXIS_TP, AXIS_PP};

/* Test hook: TRIPAR_COMM_STAGED=1 puts the staged comm on the device axes of a cpu run (where
 * backend memory is host memory), so the CPU test suite exercises its request handling. */
static int staged_forced(void) {
    const char *v = getenv("TRIPAR_COMM_STAGED");
    return v && !strcmp(v, "1");
}

/* One tiny message along the pipeline and one all-reduce over TP, right after NCCL init: NCCL
 * connects peers lazily at their first operation, and doing that here keeps it out of the
 * first prefill's timings and out of any CUDA-graph capture. Receive-then-send per stage
 * cannot deadlock: stage 0 only sends. */
static void warm_up_stream_ordered(mesh *m, const backend *be) {
    float *buf = be->ops->alloc(be->ctx, 2 * sizeof(float));
    comm *tp = &m->axis[AXIS_TP], *pp = &m->axis[AXIS_PP];
    comm_allreduce_sum(tp, buf, 1);
    if (pp->size > 1) {
        comm_req req = {0};
        if (pp->rank > 0) {
            pp->ops->irecv(pp->ctx, buf, 1, COMM_FLOAT, pp->rank - 1, 0, &req);
            pp->ops->wait(pp->ctx, &req);
        }
        if (pp->rank < pp->size - 1) {
            pp->ops->isend(pp->ctx, buf + 1, 1, COMM_FLOAT, pp->rank + 1, 0, &req);
            pp->ops->wait(pp->ctx, &req);
        }
    }
    for (size_t a = 0; a < sizeof device_axes / sizeof device_axes[0]; a++)
        m->axis[device_axes[a]].ops->barrier(m->axis[device_axes[a]].ctx);
    be->ops->release(be->ctx, buf);
}

/* The comm backends a device axis can take, selected by name through this table. Each init
 * gets the group, the compute backend and the plan; it returns 0, or -1 with error_message(). */
typedef int (*comm_init_fn)(comm *c, MPI_Comm group, const backend *be, const comm_plan *plan);

static int init_mpi(comm *c, MPI_Comm group, const backend *be, const comm_plan *plan) {
    comm_mpi_init(c, group);
    return 0;
}

static int init_nccl(comm *c, MPI_Comm group, const backend *be, const comm_plan *plan) {
    return comm_nccl_init(c, group, be->ops->stream ? be->ops->stream(be->ctx) : NULL);
}

/* The pipeline holds per micro-batch one receive and up to two sends in flight (the engine's
 * ping-pong buffers); TP all-reduces complete at once and use the one synchronous buffer. */
static int init_staged_tp(comm *c, MPI_Comm group, const backend *be, const comm_plan *plan) {
    comm_staged_init(c, group, be, plan->max_message_bytes, 0);
    return 0;
}

static int init_staged_pp(comm *c, MPI_Comm group, const backend *be, const comm_plan *plan) {
    comm_staged_init(c, group, be, plan->max_message_bytes, 3 * plan->microbatches);
    return 0;
}

enum { COMM_BACKEND_MPI = 0, COMM_BACKEND_NCCL, COMM_BACKEND_STAGED };

static const struct {
    const char *description;       /* for the start-up line; NULL: say nothing (host memory) */
    comm_init_fn init[AXIS_COUNT]; /* per device axis (TP, PP) */
} comm_backends[] = {
    [COMM_BACKEND_MPI] = {NULL, {[AXIS_TP] = init_mpi, [AXIS_PP] = init_mpi}},
    [COMM_BACKEND_NCCL] = {"nccl", {[AXIS_TP] = init_nccl, [AXIS_PP] = init_nccl}},
    [COMM_BACKEND_STAGED] = {"mpi-staged (through pinned host memory)",
                             {[AXIS_TP] = init_staged_tp, [AXIS_PP] = init_staged_pp}},
};

/* Which backend the device axes take. Host-memory compute backends always use MPI (unless the
 * staged test hook asks otherwise); device backends use NCCL when every rank has its own GPU,
 * else MPI staged through host memory. Returns -1 with error_message() set when the user's
 * choice cannot work. */
static int choose_device_comm(const mesh *m, const comm_plan *plan, const backend *be,
                              int *shared) {
    const int device_memory = be->ops->stream != NULL; /* a compute stream: device memory */
    *shared = 0;
    if (staged_forced()) return COMM_BACKEND_STAGED;
    if (!device_memory) return COMM_BACKEND_MPI;
    *shared = device_shared(m);
    switch (plan->choice) {
    case COMM_CHOICE_NCCL:
        if (*shared) {
            error_set("%s: backend.comm: nccl needs one GPU per rank, but ranks of one node "
                      "share a GPU (more ranks per node than visible devices, or backend.device "
                      "pins several ranks to one); launch one rank per GPU, or use "
                      "backend.comm: mpi (or auto), which stages through host memory",
                      plan->choice_origin);
            return -1;
        }
        return COMM_BACKEND_NCCL;
    case COMM_CHOICE_MPI: return COMM_BACKEND_STAGED;
    case COMM_CHOICE_AUTO: break;
    }
    return *shared ? COMM_BACKEND_STAGED : COMM_BACKEND_NCCL;
}

int comm_setup(mesh *m, const comm_plan *plan, const backend *be) {
    // the engine sends nothing on backend buffers over DP; tokens and votes are host data
    comm_mpi_init(&m->axis[AXIS_DP], m->axis_mpi[AXIS_DP]);
    comm_mpi_init(&m->pp_host, m->axis_mpi[AXIS_PP]);
    comm_mpi_init(&m->world_host, m->world);
    if (m->ep_replicas > 1) comm_mpi_init(&m->ep, m->ep_mpi); /* host rows: MoE runs on cpu */
    int shared = 0;
    const int chosen = choose_device_comm(m, plan, be, &shared);
    if (chosen < 0) {
        comm_teardown(m);
        return -1;
    }
    for (size_t a = 0; a < sizeof device_axes / sizeof device_axes[0]; a++) {
        const int axis = device_axes[a];
        if (comm_backends[chosen].init[axis](&m->axis[axis], m->axis_mpi[axis], be, plan) != 0) {
            comm_teardown(m);
            return -1;
        }
    }
    /* the stall watchdog's report names the group a rank waits in */
    static const char *const labels[AXIS_COUNT] = {[AXIS_TP] = "TP", [AXIS_PP] = "PP",
                                                   [AXIS_DP] = "DP"};
    for (int a = 0; a < AXIS_COUNT; a++) watch_comm_name(m->axis_mpi[a], labels[a]);
    watch_comm_name(m->world, "world");
    if (m->ep_replicas > 1) watch_comm_name(m->ep_mpi, "EP");
    if (!comm_backends[chosen].description) return 0; /* host memory: nothing to warm up */
    if (m->axis[AXIS_TP].stream_ordered) warm_up_stream_ordered(m, be);
    if (m->world_rank == 0)
        fprintf(stderr, "tripar: comm: tp and pp over %s (backend.comm %s%s)\n",
                comm_backends[chosen].description,
                staged_forced() ? "overridden by TRIPAR_COMM_STAGED=1" : plan->choice_name,
                shared ? ", a GPU is shared" : "");
    return 0;
}

void comm_teardown(mesh *m) {
    for (int a = 0; a < AXIS_COUNT; a++)
        comm_free(&m->axis[a]);
    comm_free(&m->pp_host);
    comm_free(&m->world_host);
    comm_free(&m->ep);
}
