/* Builds the rank mesh: coordinates from the order string, node discovery through
 * MPI_COMM_TYPE_SHARED, and one MPI communicator per parallel axis. */
#include "parallel/mesh.h"

#include <stdio.h>
#include <string.h>

#include "base/check.h"

static const char *const axis_names[AXIS_COUNT] = {"tp", "pp", "dp"};

int mesh_order_parse(const char *text, int order[AXIS_COUNT]) {
    int seen[AXIS_COUNT] = {0};
    const char *p = text;
    for (int i = 0; i < AXIS_COUNT; i++) {
        int found = -1;
        for (int a = 0; a < AXIS_COUNT; a++)
            if (strncmp(p, axis_names[a], 2) == 0) found = a;
        if (found < 0 || seen[found]) goto bad;
        seen[found] = 1;
        order[i] = found;
        p += 2;
        if (i < AXIS_COUNT - 1) {
            if (*p != '-') goto bad;
            p++;
        }
    }
    if (*p == '\0') return 0;
bad:
    error_set("parallel.order '%s' must name tp, pp and dp once each, joined by '-' (e.g. "
              "tp-pp-dp, the default)",
              text);
    return -1;
}

int mesh_rank_of(const int size[AXIS_COUNT], const int order[AXIS_COUNT],
                 const int coord[AXIS_COUNT]) {
    int rank = 0;
    for (int i = AXIS_COUNT - 1; i >= 0; i--)
        rank = rank * size[order[i]] + coord[order[i]];
    return rank;
}

void mesh_coords_of(const int size[AXIS_COUNT], const int order[AXIS_COUNT], int rank,
                    int coord[AXIS_COUNT]) {
    for (int i = 0; i < AXIS_COUNT; i++) {
        coord[order[i]] = rank % size[order[i]];
        rank /= size[order[i]];
    }
}

int mesh_validate(int world_size, int dp, int tp, int pp, const char *order) {
    int parsed[AXIS_COUNT];
    if (mesh_order_parse(order, parsed) != 0) return -1;
    if (dp < 1 || tp < 1 || pp < 1) {
        error_set("parallel: dp, tp and pp must be at least 1 (got dp=%d tp=%d pp=%d)", dp, tp, pp);
        return -1;
    }
    if ((long)dp * tp * pp != world_size) {
        error_set("parallel: dp * tp * pp = %d * %d * %d = %ld, but the job was started with %d "
                  "ranks; launch %ld ranks or change parallel.dp/tp/pp",
                  dp, tp, pp, (long)dp * tp * pp, world_size, (long)dp * tp * pp);
        return -1;
    }
    return 0;
}

void mesh_init(mesh *m, MPI_Comm world, int dp, int tp, int pp, const char *order) {
    memset(m, 0, sizeof *m);
    m->world = world;
    MPI_CHECK(MPI_Comm_size(world, &m->world_size));
    MPI_CHECK(MPI_Comm_rank(world, &m->world_rank));
    m->size[AXIS_TP] = tp;
    m->size[AXIS_PP] = pp;
    m->size[AXIS_DP] = dp;
    CHECK(mesh_order_parse(order, m->order) == 0, "%s", error_message());
    snprintf(m->order_text, sizeof m->order_text, "%s", order);
    mesh_coords_of(m->size, m->order, m->world_rank, m->coord);
    m->device = -1;

    snprintf(m->host, sizeof m->host, "%s", tripar_host());
    MPI_CHECK(MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED, m->world_rank, MPI_INFO_NULL,
                                  &m->node_mpi));
    MPI_CHECK(MPI_Comm_rank(m->node_mpi, &m->local_rank));
    MPI_CHECK(MPI_Comm_size(m->node_mpi, &m->local_size));
    /* Node index: the node leaders (local rank 0) numbered in world-rank order. */
    int is_leader = m->local_rank == 0, leaders_before = 0;
    MPI_CHECK(MPI_Exscan(&is_leader, &leaders_before, 1, MPI_INT, MPI_SUM, world));
    if (m->world_rank == 0) leaders_before = 0;
    int node_index = is_leader ? leaders_before : 0;
    MPI_CHECK(MPI_Bcast(&node_index, 1, MPI_INT, 0, m->node_mpi));
    m->node_index = node_index;
    MPI_CHECK(MPI_Allreduce(&is_leader, &m->node_count, 1, MPI_INT, MPI_SUM, world));

    /* Ranks that share every coordinate but one form that axis's group; key = coordinate
     * so group rank equals the coordinate. */
    for (int a = 0; a < AXIS_COUNT; a++) {
        int color = 0, mult = 1;
        for (int b = 0; b < AXIS_COUNT; b++) {
            if (b == a) continue;
            color += m->coord[b] * mult;
            mult *= m->size[b];
        }
        MPI_CHECK(MPI_Comm_split(world, color, m->coord[a], &m->axis_mpi[a]));
    }

    /* A TP group that spans nodes puts two all-reduces per layer on the network. */
    int tp_nodes_min = 0, tp_nodes_max = 0;
    MPI_CHECK(
        MPI_Allreduce(&m->node_index, &tp_nodes_min, 1, MPI_INT, MPI_MIN, m->axis_mpi[AXIS_TP]));
    MPI_CHECK(
        MPI_Allreduce(&m->node_index, &tp_nodes_max, 1, MPI_INT, MPI_MAX, m->axis_mpi[AXIS_TP]));
    int spans = tp_nodes_min != tp_nodes_max, any_spans = 0;
    MPI_CHECK(MPI_Allreduce(&spans, &any_spans, 1, MPI_INT, MPI_MAX, world));
    if (any_spans && m->world_rank == 0)
        fprintf(stderr, "tripar: warning: a tensor-parallel group spans nodes; its all-reduces "
                        "cross the network (use order tp-pp-dp and tp <= ranks per node)\n");
}

void mesh_attach_mpi(mesh *m) {
    for (int a = 0; a < AXIS_COUNT; a++)
        comm_mpi_init(&m->axis[a], m->axis_mpi[a]);
    comm_mpi_init(&m->world_host, m->world);
}

/* Frees the comms still attached (comm_teardown frees them earlier when the backend goes first)
 * and the communicators. */
void mesh_free(mesh *m) {
    comm_free(&m->pp_host);
    comm_free(&m->world_host);
    for (int a = 0; a < AXIS_COUNT; a++) {
        comm_free(&m->axis[a]);
        if (m->axis_mpi[a] != MPI_COMM_NULL && m->axis_mpi[a]) MPI_Comm_free(&m->axis_mpi[a]);
    }
    if (m->node_mpi != MPI_COMM_NULL && m->node_mpi) MPI_Comm_free(&m->node_mpi);
    memset(m, 0, sizeof *m);
}
