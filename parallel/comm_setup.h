/* Chooses and attaches the comm backend of every mesh axis for a job: MPI on the CPU backend;
 * on the CUDA backend NCCL, or MPI staged through pinned host memory (backend.comm). */
#pragma once
#include "kernels/backend.h"
#include "job/job.h"
#include "parallel/mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Collective over the mesh. Attaches the TP and PP comms (the ones the engine calls on backend
 * buffers), MPI on DP, and m->pp_host (MPI over the PP axis for host-side pipeline tokens).
 * Call after the backend started and device_record() ran. Returns 0, or -1 with
 * error_message() set (same on every rank). */
int comm_setup(mesh *m, const job *j, const backend *be);
/* Frees what comm_setup attached (call before mesh_free; the backend may already be freed). */
void comm_teardown(mesh *m);

/* The staged MPI comm backend (comm_staged.c): the comm_ops over MPI for backend buffers,
 * copied through host memory (page-locked on cuda) with the backend's copies, which order
 * after its compute stream. slots staging buffers of max_bytes each are allocated up front
 * (none for a group of one) for pending isend/irecv; a larger message or more pending ones
 * grow them (counted by comm_staged_grows). Every operation is host-blocking; non-blocking
 * all-reduces complete before returning. */
void comm_staged_init(comm *c, MPI_Comm mpi_comm, const backend *be, size_t max_bytes,
                      int slots);
void comm_staged_free(comm *c);
/* Staging buffers allocated after init (0 when init was sized for the job; -> docs/cuda.md). */
long comm_staged_grows(const comm *c);

#ifdef __cplusplus
}
#endif
