/* Which GPU each rank drives: the node-local rank (from the launcher when it says, else from
 * MPI) modulo the visible devices, or the job's override; recorded in the mesh for /mesh. */
#pragma once
#include "kernels/backend.h"
#include "parallel/mesh.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The node-local rank used to pick a device, first found of: OMPI_COMM_WORLD_LOCAL_RANK
 * (mpirun/prterun forked this rank), MPI_LOCALRANKID (Hydra's mpiexec), SLURM_LOCALID when
 * SLURM_PROCID equals m->world_rank (srun forked this rank), MPI_COMM_TYPE_SHARED
 * (m->local_rank). The launcher's numbers win because they match how it bound CPUs and GPUs to
 * tasks; an MPI launcher's win over Slurm's because under mpirun inside an allocation every
 * rank inherits its daemon's SLURM_LOCALID (0). Reads the environment only: no MPI call. */
int device_local_rank(const mesh *m);

/* The device ordinal to pass as backend_options.device: override (backend.device >= 0) as is,
 * else device_local_rank() modulo the visible devices (CUDA_VISIBLE_DEVICES is applied by the
 * runtime), or 0 when none is visible (backend_cuda_init then reports that). Local, no MPI. */
int device_select(const mesh *m, int override);

/* After backend_cuda_init succeeded on every rank: stores device and its PCI bus id in m and,
 * collective over m->world, warns once (world rank 0) when two ranks of a node share a GPU.
 * Returns 1 on every rank when some GPU is shared, else 0. */
int device_record(mesh *m, int device);

/* Collective over m->world: 1 on every rank when two ranks of one node drive the same GPU
 * (same PCI bus id, or the same ordinal when the id is unknown), else 0. */
int device_shared(const mesh *m);

#ifdef __cplusplus
}
#endif
