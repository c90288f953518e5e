/* comm_nccl_init in a build with CUDA: forwarded to the CUDA module (parallel/comm_nccl.c,
 * built into libtripar_cuda.so), opened on first use. */
#include "parallel/comm_nccl_module.h"

#include "base/check.h"

int comm_nccl_init(comm *c, MPI_Comm mpi_comm, void *compute_stream) {
    const nccl_comm_module *m = cuda_module_symbol("tripar_nccl_comm");
    if (!m) return -1;
    if (m->abi != TRIPAR_CUDA_MODULE_ABI || m->comm_size != sizeof(comm)) {
        error_set("backend.comm: nccl: the CUDA module comes from another build of tripar "
                  "(interface %d, this executable's %d); use the %s built with this executable",
                  m->abi, TRIPAR_CUDA_MODULE_ABI, TRIPAR_CUDA_MODULE_FILE);
        return -1;
    }
    return m->init(c, mpi_comm, compute_stream);
}
