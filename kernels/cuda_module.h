/* The CUDA backend (kernels/cuda/) and the NCCL comm (parallel/comm_nccl.c) are built into a
 * module, libtripar_cuda.so, that the core opens the first time a rank asks for CUDA. A CPU run
 * then never maps cudart, cuBLAS, cuBLASLt and NCCL: their start-up cost 0.13 s of page faults
 * per process (most of a small test run on shared cores), and a binary built with CUDA still
 * starts on a node without the CUDA libraries. docs/cuda.md, "The CUDA module", says where the
 * module is looked for.
 *
 * The module calls back into the core (error_set, the watchdog, the MPI comm helpers), which
 * the executables export (CMake: ENABLE_EXPORTS). Each layer's entry points are one exported
 * table, checked against the core it is loaded into. */
#pragma once

#include <stddef.h>

#include "kernels/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped when a table below changes; the tables also carry the sizes of the structs they pass,
 * so a module from another build of other layouts is refused rather than run. */
#define TRIPAR_CUDA_MODULE_ABI 1
#define TRIPAR_CUDA_MODULE_FILE "libtripar_cuda.so"
#define TRIPAR_MODULE_EXPORT __attribute__((visibility("default")))

/* The compute backend's entries, exported by the module as `tripar_cuda_backend`. */
typedef struct {
    int abi;
    size_t backend_size, options_size, ops_size; /* sizeof backend, backend_options, backend_ops */
    int (*init)(backend *be, const backend_options *opt);
    int (*device_count)(void);
    void (*pci_bus_id)(int device, char *out, int len);
} cuda_backend_module;

/* The exported object `name` of the module, opened on the first call (thread-safe). NULL when
 * the module cannot be opened or has no such symbol; error_set then says which file and why. */
const void *cuda_module_symbol(const char *name);

#ifdef __cplusplus
}
#endif
