/* The rank mesh: world = dp * tp * pp, each rank's coordinates, its node, its device, and one
 * communicator per axis. Ranks are numbered mixed-radix from the order string, first axis
 * fastest, so with the default "tp-pp-dp" a TP group is a block of adjacent ranks. */
#pragma once
#include <mpi.h>

#include "parallel/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { AXIS_TP = 0, AXIS_PP = 1, AXIS_DP = 2, AXIS_COUNT = 3 };

typedef struct {
    int world_size, world_rank;
    int size[AXIS_COUNT]; /* tp, pp, dp */
    int coord[AXIS_COUNT];
    int order[AXIS_COUNT]; /* order[0] is the fastest-varying axis */
    char order_text[16];

    int local_rank, local_size; /* within this node (MPI_COMM_TYPE_SHARED) */
    int node_index, node_count;
    char host[64];
    int device;          /* -1 on the cpu backend */
    char pci_bus_id[32]; /* "" on the cpu backend */

    MPI_Comm world;
    MPI_Comm axis_mpi[AXIS_COUNT]; /* ranks that differ only along that axis */
    MPI_Comm node_mpi;
    comm axis[AXIS_COUNT];         /* the comm backend over each axis communicator */
    comm pp_host;                  /* MPI over axis_mpi[AXIS_PP] for host buffers (pipeline
                                      tokens); set by comm_setup, unset (ops NULL) otherwise */
    comm world_host;               /* MPI over world for host buffers (the stop vote, the
                                      arrival stream's decisions) */
} mesh;

#define MESH_TP(m) ((m)->size[AXIS_TP])
#define MESH_PP(m) ((m)->size[AXIS_PP])
#define MESH_DP(m) ((m)->size[AXIS_DP])

/* Parses "tp-pp-dp" (any permutation) into order; returns 0 or -1 with error_message set. */
int mesh_order_parse(const char *text, int order[AXIS_COUNT]);

/* World rank of the given coordinates, and the inverse. */
int mesh_rank_of(const int size[AXIS_COUNT], const int order[AXIS_COUNT],
                 const int coord[AXIS_COUNT]);
void mesh_coords_of(const int size[AXIS_COUNT], const int order[AXIS_COUNT], int rank,
                    int coord[AXIS_COUNT]);

/* Checks that dp * tp * pp == world size (and the order string). Returns 0 or -1 with
 * error_message() set to the reason. Same answer on every rank, so no rank hangs. */
int mesh_validate(int world_size, int dp, int tp, int pp, const char *order);

/* Builds the mesh over world: coordinates, node info and the MPI axis communicators.
 * Comm backends are attached separately: comm_setup (parallel/comm_setup.h) for a run, or
 * mesh_attach_mpi (MPI on every axis and world_host) for tests and tools. */
void mesh_init(mesh *m, MPI_Comm world, int dp, int tp, int pp, const char *order);
void mesh_attach_mpi(mesh *m);
void mesh_free(mesh *m);

#ifdef __cplusplus
}
#endif
