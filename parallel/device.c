/* Rank to GPU mapping (device.h). Sharing a GPU is allowed (MPI staged through host memory
 * serves it) but NCCL refuses it, so the mesh learns whether any GPU is shared. */
#include "parallel/device.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"

/* A non-negative integer environment variable, or -1 when unset or malformed. */
static int env_index(const char *name) {
    const char *text = getenv(name);
    if (!text || !*text) return -1;
    char *end;
    long v = strtol(text, &end, 10);
    return (*end == '\0' && v >= 0 && v < 1 << 20) ? (int)v : -1;
}

int device_local_rank(const mesh *m) {
    /* The process that forked this rank knows its node-local index. mpirun/prterun (Open MPI)
     * and Hydra's mpiexec (MPICH, Intel MPI) fork ranks themselves and say so even inside a
     * Slurm allocation, where the SLURM_* variables a rank inherits describe the launcher's
     * daemon or the batch script (SLURM_LOCALID 0 on every rank), not the rank. */
    int r = env_index("OMPI_COMM_WORLD_LOCAL_RANK");
    if (r < 0) r = env_index("MPI_LOCALRANKID");
    /* srun forked this rank itself only if its task index is this MPI rank; an inherited
     * SLURM_PROCID (the daemon's node index, the batch script's 0) differs on some rank. */
    if (r < 0 && env_index("SLURM_PROCID") == m->world_rank) r = env_index("SLURM_LOCALID");
    return r >= 0 ? r : m->local_rank;
}

int device_select(const mesh *m, int override) {
    if (override >= 0) return override;
    int n = backend_device_count("cuda");
    return n > 0 ? device_local_rank(m) % n : 0;
}

/* The identity of this rank's GPU on its node: the PCI bus id, or the ordinal when the id is
 * unknown (then ranks with different CUDA_VISIBLE_DEVICES may look shared: the safe side). */
enum { DEVICE_KEY = 32 };
static void device_key(const mesh *m, char key[DEVICE_KEY]) {
    memset(key, 0, DEVICE_KEY);
    if (m->pci_bus_id[0]) snprintf(key, DEVICE_KEY, "%s", m->pci_bus_id);
    else snprintf(key, DEVICE_KEY, "ordinal %d", m->device);
}

/* Number of node-mates (other ranks of this node) that drive the same GPU as this rank. */
static int device_mates(const mesh *m) {
    char key[DEVICE_KEY];
    device_key(m, key);
    char *all = xmalloc((size_t)m->local_size * DEVICE_KEY);
    MPI_CHECK(MPI_Allgather(key, DEVICE_KEY, MPI_CHAR, all, DEVICE_KEY, MPI_CHAR, m->node_mpi));
    int mates = 0;
    for (int r = 0; r < m->local_size; r++)
        if (r != m->local_rank && !strncmp(all + (size_t)r * DEVICE_KEY, key, DEVICE_KEY)) mates++;
    free(all);
    return mates;
}

int device_shared(const mesh *m) {
    int mine = device_mates(m) > 0, any = 0;
    MPI_CHECK(MPI_Allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, m->world));
    return any;
}

int device_record(mesh *m, int device) {
    m->device = device;
    backend_pci_bus_id("cuda", device, m->pci_bus_id, (int)sizeof m->pci_bus_id);
    int mates = device_mates(m), most = 0;
    MPI_CHECK(MPI_Allreduce(&mates, &most, 1, MPI_INT, MPI_MAX, m->world));
    if (most > 0 && m->world_rank == 0)
        fprintf(stderr, "tripar: warning: up to %d ranks of a node share one GPU (more ranks than "
                        "visible devices); they time-share it, and NCCL cannot serve them, so "
                        "backend.comm auto uses MPI staged through host memory\n", most + 1);
    return most > 0;
}
