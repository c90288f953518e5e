/* Selected instead of comm_nccl.c when the build has no CUDA: asking for NCCL is an error. */
#include "base/check.h"
#include "parallel/comm.h"

int comm_nccl_init(comm *c, MPI_Comm mpi_comm, void *compute_stream) {
    (void)c;
    (void)mpi_comm;
    (void)compute_stream;
    error_set("backend.comm: nccl: this tripar was built without CUDA/NCCL");
    return -1;
}
