/* Chooses and attaches the comm backend of every mesh axis for a job: MPI on the CPU backend;
 * on the CUDA backend NCCL, or MPI staged through pinned host memory (backend.comm). */
#pragma once
#include "../kernels/backend.h"
#include "../src/job.h"
#include "mesh.h"

/* Collective over the mesh. Returns 0, or -1 with error_message() set (same on every rank). */
int comm_setup(mesh *m, const job *j, const backend *be);
void comm_teardown(mesh *m);
