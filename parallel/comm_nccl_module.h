/* The NCCL comm's entry in the CUDA module (kernels/cuda_module.h says why there is a module):
 * parallel/comm_nccl.c exports it as `tripar_nccl_comm`, parallel/comm_nccl_module.c forwards
 * comm_nccl_init to it. */
#pragma once

#include <stddef.h>

#include "kernels/cuda_module.h"
#include "parallel/comm.h"

typedef struct {
    int abi;          /* TRIPAR_CUDA_MODULE_ABI */
    size_t comm_size; /* sizeof(comm) in the module's build */
    int (*init)(comm *c, MPI_Comm mpi_comm, void *compute_stream);
} nccl_comm_module;
