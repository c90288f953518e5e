/* Chooses and attaches the comm backend of every mesh axis from a small comm plan: MPI when the
 * compute backend works in host memory; on a device backend NCCL, or MPI staged through pinned
 * host memory (backend.comm, and whether ranks share a GPU). */
#pragma once
#include "kernels/backend.h"
#include "parallel/mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What the user asked for (backend.comm). */
typedef enum { COMM_CHOICE_AUTO = 0, COMM_CHOICE_MPI = 1, COMM_CHOICE_NCCL = 2 } comm_choice;

/* What comm_setup needs to know of a run, and nothing else of the job. */
typedef struct {
    comm_choice choice;
    const char *choice_name;   /* "auto", "mpi", "nccl": for the start-up line */
    const char *choice_origin; /* where backend.comm was set ("job.yaml:12"), for messages */
    /* the largest message the engine sends over TP or PP (a micro-batch prefill's
     * activations) and the micro-batches in flight: staging buffers are sized from them */
    size_t max_message_bytes;
    int microbatches;
} comm_plan;

/* Collective over the mesh. Attaches the TP and PP comms (the ones the engine calls on backend
 * buffers), MPI on DP, and the host comms m->pp_host and m->world_host. Call after the backend
 * started and device_record() ran. Returns 0, or -1 with error_message() set (same on every
 * rank). */
int comm_setup(mesh *m, const comm_plan *plan, const backend *be);
/* Frees what comm_setup attached (call before mesh_free; the backend may already be freed). */
void comm_teardown(mesh *m);

/* The staged MPI comm backend (comm_staged.c): the comm_ops over MPI for backend buffers,
 * copied through host memory (page-locked on cuda) with the backend's copies, which order
 * after its compute stream. slots staging buffers of max_bytes each are allocated up front
 * (none for a group of one) for pending isend/irecv; a larger message or more pending ones
 * grow them, with a warning when the comm is freed (-> docs/cuda.md). Every operation is
 * host-blocking; non-blocking all-reduces and all-to-alls complete before returning. */
void comm_staged_init(comm *c, MPI_Comm mpi_comm, const backend *be, size_t max_bytes,
                      int slots);

#ifdef __cplusplus
}
#endif
