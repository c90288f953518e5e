/* The rank mesh: world = dp * tp * pp, each rank's coordinates, its node, its device, and one
 * communicator per axis. Ranks are numbered mixed-radix from the order string, first axis
 * fastest, so with the default "tp-pp-dp" a TP group is a block of adjacent ranks. The order
 * "auto" lays tp-pp-dp over the ranks sorted by (node, local rank) instead of by world rank, so
 * every TP group sits inside one node whatever mapping the launcher used. */
#pragma once
#include <mpi.h>
#include <stddef.h>

#include "parallel/comm.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { AXIS_TP = 0, AXIS_PP = 1, AXIS_DP = 2, AXIS_COUNT = 3 };

typedef struct {
    int world_size, world_rank;
    int size[AXIS_COUNT]; /* tp, pp, dp */
    int coord[AXIS_COUNT];
    int order[AXIS_COUNT]; /* order[0] is the fastest-varying axis (over the layout key) */
    char order_text[16];   /* as the job gave it: "tp-pp-dp", ..., or "auto" */
    int node_major;        /* 1 for "auto": coordinates follow (node, local rank), not world rank */

    int local_rank, local_size; /* within this node (MPI_COMM_TYPE_SHARED) */
    int node_index, node_count;
    char host[64];
    int device;          /* -1 on the cpu backend */
    char pci_bus_id[32]; /* "" on the cpu backend */
    char kernels[32];    /* the kernels this rank's backend chose ("avx512_bf16"), or "" */

    MPI_Comm world;
    MPI_Comm axis_mpi[AXIS_COUNT]; /* ranks that differ only along that axis */
    MPI_Comm node_mpi;
    comm axis[AXIS_COUNT]; /* the comm backend over each axis communicator */
    comm pp_host;          /* MPI over axis_mpi[AXIS_PP] for host buffers (pipeline
                              tokens); set by comm_setup, unset (ops NULL) otherwise */
    comm world_host;       /* MPI over world for host buffers (the stop vote, the
                              arrival stream's decisions) */
    /* Expert parallelism across replicas (parallel.ep > tp, mesh_ep_split): the ranks of one
     * stage and TP index in ep_replicas adjacent dp coordinates, which exchange a mixture of
     * experts' tokens by all-to-all. ep_mpi is MPI_COMM_NULL (ep_replicas 1) otherwise. */
    int ep_replicas;
    MPI_Comm ep_mpi;
    comm ep;               /* MPI over ep_mpi, set by comm_setup or mesh_attach_mpi: the experts
                              run on the cpu backend only, so their rows are host memory */
} mesh;

#define MESH_TP(m) ((m)->size[AXIS_TP])
#define MESH_PP(m) ((m)->size[AXIS_PP])
#define MESH_DP(m) ((m)->size[AXIS_DP])

/* Parses "tp-pp-dp" (any permutation) into order; returns 0 or -1 with error_message set.
 * "auto" is no permutation: test it with mesh_order_is_auto first. */
int mesh_order_parse(const char *text, int order[AXIS_COUNT]);
int mesh_order_is_auto(const char *text);

/* Where one world rank runs: its node (any label; equal labels mean one node), its rank within
 * the node, and the node's host name for messages. */
typedef struct {
    int node, local_rank;
    const char *host;
} mesh_place;

/* The "auto" layout, pure so it can be tested without MPI: ranks sorted node-major by
 * (node, local_rank) (world rank breaks ties), then tp fastest, pp, dp laid over that sorted
 * position, so TP groups are blocks of tp ranks of one node and PP groups stay as close as the
 * nodes allow. Fills coord[r] for every world rank r and returns 0; or returns -1 with
 * error_message() naming the ranks per node when tp does not divide every node's rank count
 * (then some TP group would have to cross nodes). size is {tp, pp, dp}, its product world. */
int mesh_layout_auto(int world, const mesh_place *place, const int size[AXIS_COUNT],
                     int (*coord)[AXIS_COUNT]);

/* Ranks per node as "2, 2 ranks (node1: 2, node2: 2)" for messages, nodes in order of first
 * appearance; returns how many distinct nodes and whether their counts all agree (*even). */
int mesh_nodes_describe(int world, const mesh_place *place, char *out, size_t len, int *even);

/* World rank of the given coordinates, and the inverse. */
int mesh_rank_of(const int size[AXIS_COUNT], const int order[AXIS_COUNT],
                 const int coord[AXIS_COUNT]);
void mesh_coords_of(const int size[AXIS_COUNT], const int order[AXIS_COUNT], int rank,
                    int coord[AXIS_COUNT]);

/* Checks that dp * tp * pp == world size (and the order string). Returns 0 or -1 with
 * error_message() set to the reason. Same answer on every rank, so no rank hangs. */
int mesh_validate(int world_size, int dp, int tp, int pp, const char *order);

/* Builds the mesh over world: node info, coordinates and the MPI axis communicators; warns
 * (rank 0, once) when a TP group spans nodes or when nodes hold different numbers of ranks.
 * Comm backends are attached separately: comm_setup (parallel/comm_setup.h) for a run, or
 * mesh_attach_mpi (MPI on every axis and world_host) for tests and tools. Collective.
 * mesh_try_init returns 0, or -1 with error_message() set, the same on every rank, when the
 * layout cannot be built ("auto" with a tp that fits no node); m then holds nothing to free.
 * mesh_init aborts instead, for callers that validated the mesh already. */
int mesh_try_init(mesh *m, MPI_Comm world, int dp, int tp, int pp, const char *order);
/* Whether the layout can be built, without building the mesh: mesh_try_init's refusal, so a
 * sweep can check every point before it computes any. Collective over world; 0 or -1 with
 * error_message() set, the same on every rank. */
int mesh_layout_check(MPI_Comm world, int dp, int tp, int pp, const char *order);
void mesh_init(mesh *m, MPI_Comm world, int dp, int tp, int pp, const char *order);
void mesh_attach_mpi(mesh *m);
/* Carves the EP groups of parallel.ep = replicas * tp: dp coordinates [k * replicas, (k + 1) *
 * replicas) of one stage and TP index form group k, group rank = dp coordinate % replicas, so
 * the order string places them where it places dp. replicas must divide dp (job_validate).
 * Collective over the DP axis; replicas 1 carves nothing. Call before comm_setup. */
void mesh_ep_split(mesh *m, int replicas);
void mesh_free(mesh *m);

#ifdef __cplusplus
}
#endif
