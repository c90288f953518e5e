/* Comm backend selection per job (see comm_setup.h and docs/cuda.md, "Communication"):
 * cpu -> MPI; cuda -> NCCL, or MPI staged through pinned host memory when a GPU is shared or
 * backend.comm is mpi. Tokens between stages are host data and always take plain MPI. */
#include "parallel/comm_setup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "parallel/device.h"

static const int device_axes[] = {AXIS_TP, AXIS_PP};

/* Test hook: TRIPAR_COMM_STAGED=1 puts the staged comm on the device axes of a cpu run (where
 * backend memory is host memory), so the CPU test suite exercises its request handling. */
static int staged_forced(void) {
    const char *v = getenv("TRIPAR_COMM_STAGED");
    return v && !strcmp(v, "1");
}

/* The largest message the engine sends over TP or PP: a micro-batch prefill's activations,
 * (mb_max * prompt_len, embd) floats, where mb_max is the largest micro-batch of the largest
 * replica. */
static size_t largest_message(const job *j, int *n_micro) {
    int batch_local = (j->batch + j->dp - 1) / j->dp;
    int micro = j->microbatches < batch_local ? j->microbatches : batch_local;
    if (micro < 1) micro = 1;
    int mb_max = (batch_local + micro - 1) / micro;
    *n_micro = micro;
    return (size_t)mb_max * (size_t)j->prompt_len * (size_t)j->embd * sizeof(float);
}

/* One tiny message along the pipeline and one all-reduce over TP, right after NCCL init: NCCL
 * connects peers lazily at their first operation, and doing that here keeps it out of the
 * first prefill's timings and out of any CUDA-graph capture. Receive-then-send per stage
 * cannot deadlock: stage 0 only sends. */
static void nccl_warm_up(mesh *m, const backend *be) {
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

int comm_setup(mesh *m, const job *j, const backend *be) {
    // the engine sends nothing on backend buffers over DP; tokens are host data
    comm_mpi_init(&m->axis[AXIS_DP], m->axis_mpi[AXIS_DP]);
    comm_mpi_init(&m->pp_host, m->axis_mpi[AXIS_PP]);
    const int cuda = j->backend == BACKEND_CUDA, forced = staged_forced();
    if (!cuda && !forced) {
        for (size_t a = 0; a < sizeof device_axes / sizeof device_axes[0]; a++)
            comm_mpi_init(&m->axis[device_axes[a]], m->axis_mpi[device_axes[a]]);
        return 0;
    }

    const int shared = cuda ? device_shared(m) : 0;
    int nccl = 0;
    switch (j->comm) {
    case COMM_NCCL:
        if (shared) {
            error_set("%s:%d: backend.comm: nccl needs one GPU per rank, but ranks of one node "
                      "share a GPU (more ranks per node than visible devices, or backend.device "
                      "pins several ranks to one); launch one rank per GPU, or use "
                      "backend.comm: mpi (or auto), which stages through host memory",
                      j->source, job_key_line(j, "backend.comm"));
            comm_teardown(m);
            return -1;
        }
        nccl = 1;
        break;
    case COMM_MPI: nccl = 0; break;
    case COMM_AUTO: nccl = !shared; break;
    }
    nccl &= cuda && !forced;

    int n_micro = 1;
    const size_t max_bytes = largest_message(j, &n_micro);
    for (size_t a = 0; a < sizeof device_axes / sizeof device_axes[0]; a++) {
        const int axis = device_axes[a];
        if (nccl) {
            void *stream = be->ops->stream ? be->ops->stream(be->ctx) : NULL;
            if (comm_nccl_init(&m->axis[axis], m->axis_mpi[axis], stream) != 0) {
                comm_teardown(m);
                return -1;
            }
        } else {
            /* TP all-reduces complete at once (one buffer); the pipeline holds per micro-batch
             * one receive and up to two sends in flight (generate.c's ping-pong buffers) */
            int slots = axis == AXIS_PP ? 3 * n_micro : 0;
            comm_staged_init(&m->axis[axis], m->axis_mpi[axis], be, max_bytes, slots);
        }
    }
    if (nccl) nccl_warm_up(m, be);
    if (m->world_rank == 0)
        fprintf(stderr, "tripar: comm: tp and pp over %s (backend.comm %s%s)\n",
                nccl ? "nccl" : "mpi-staged (through pinned host memory)",
                forced ? "overridden by TRIPAR_COMM_STAGED=1" : comm_kind_name(j->comm),
                shared ? ", a GPU is shared" : "");
    return 0;
}

void comm_teardown(mesh *m) {
    for (int a = 0; a < AXIS_COUNT; a++) {
        comm *c = &m->axis[a];
        if (!c->ops) continue;
        if (!strcmp(c->ops->name, "nccl")) comm_nccl_free(c);
        else if (!strcmp(c->ops->name, "mpi-staged")) {
            /* sized from the job at start-up, so growing means a message nobody planned for */
            if (comm_staged_grows(c) > 0)
                fprintf(stderr, "tripar: warning: [rank %d] mpi-staged comm on axis %d allocated "
                                "%ld staging buffers after start-up\n",
                        m->world_rank, a, comm_staged_grows(c));
            comm_staged_free(c);
        }
        else comm_mpi_free(c);
        memset(c, 0, sizeof *c);
    }
    if (m->pp_host.ops) comm_mpi_free(&m->pp_host);
    memset(&m->pp_host, 0, sizeof m->pp_host);
}
