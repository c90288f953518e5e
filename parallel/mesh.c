/* Builds the rank mesh: node discovery through MPI_COMM_TYPE_SHARED, coordinates from the
 * order string (or, for "auto", from each rank's node and local rank), and one MPI
 * communicator per parallel axis. */
#include "parallel/mesh.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/intmath.h"

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
              "tp-pp-dp, the default), or be auto",
              text);
    return -1;
}

int mesh_order_is_auto(const char *text) { return strcmp(text, "auto") == 0; }

/* One rank's layout key; sorting these puts ranks node by node, each node's in local order. */
typedef struct {
    int node, local_rank, rank;
} place_key;

static int place_key_cmp(const void *pa, const void *pb) {
    const place_key *a = pa, *b = pb;
    if (a->node != b->node) return a->node < b->node ? -1 : 1;
    if (a->local_rank != b->local_rank) return a->local_rank < b->local_rank ? -1 : 1;
    return (a->rank > b->rank) - (a->rank < b->rank);
}

static place_key *place_keys_sorted(int world, const mesh_place *place) {
    place_key *keys = xcalloc((size_t)world, sizeof *keys);
    for (int r = 0; r < world; r++)
        keys[r] = (place_key){place[r].node, place[r].local_rank, r};
    qsort(keys, (size_t)world, sizeof *keys, place_key_cmp);
    return keys;
}

/* The sorted keys of one node are one run: where the run starting at begin ends. */
static int node_run_end(const place_key *keys, int world, int begin) {
    int end = begin;
    while (end < world && keys[end].node == keys[begin].node)
        end++;
    return end;
}

/* snprintf at *used into buf, never past len, so a long list is cut, not overrun. */
static void text_append(char *buf, size_t len, size_t *used, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void text_append(char *buf, size_t len, size_t *used, const char *fmt, ...) {
    if (*used >= len) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *used, len - *used, fmt, ap);
    va_end(ap);
    if (n > 0) *used += (size_t)n;
}

int mesh_nodes_describe(int world, const mesh_place *place, char *out, size_t len, int *even) {
    place_key *keys = place_keys_sorted(world, place);
    /* counts first, then names: the counts alone say what a user must fit */
    char counts[512] = "", names[1024] = "";
    size_t nc = 0, nn = 0;
    int nodes = 0, first_count = -1;
    *even = 1;
    for (int begin = 0, end; begin < world; begin = end, nodes++) {
        end = node_run_end(keys, world, begin);
        int count = end - begin;
        if (first_count < 0) first_count = count;
        if (count != first_count) *even = 0;
        const char *host = place[keys[begin].rank].host;
        const char *sep = nodes ? ", " : "";
        if (nodes < 8) { /* eight nodes show the pattern; more would bury the message */
            text_append(counts, sizeof counts, &nc, "%s%d", sep, count);
            text_append(names, sizeof names, &nn, "%s%s: %d", sep, host && host[0] ? host : "?",
                        count);
        } else if (nodes == 8) {
            text_append(counts, sizeof counts, &nc, ", ...");
            text_append(names, sizeof names, &nn, ", ...");
        }
    }
    free(keys);
    snprintf(out, len, "%s rank%s (%s)", counts, first_count == 1 && nodes == 1 ? "" : "s", names);
    return nodes;
}

int mesh_layout_auto(int world, const mesh_place *place, const int size[AXIS_COUNT],
                     int (*coord)[AXIS_COUNT]) {
    const int tp = size[AXIS_TP];
    if (world < 1 || (long)size[AXIS_TP] * size[AXIS_PP] * size[AXIS_DP] != world) {
        error_set("parallel.order auto: tp * pp * dp = %ld does not match the %d ranks",
                  (long)size[AXIS_TP] * size[AXIS_PP] * size[AXIS_DP], world);
        return -1;
    }
    place_key *keys = place_keys_sorted(world, place);
    /* TP groups are the blocks [k*tp, (k+1)*tp) of sorted positions. Each node holds one run
     * of positions, so every block stays inside a node exactly when tp divides every run: the
     * runs then start at multiples of tp. */
    int fits = 1, common = 0;
    for (int begin = 0, end; begin < world; begin = end) {
        end = node_run_end(keys, world, begin);
        if ((end - begin) % tp != 0) fits = 0;
        common = int_gcd(common, end - begin);
    }
    if (!fits) {
        char nodes[1600], divisors[256] = "";
        int even;
        mesh_nodes_describe(world, place, nodes, sizeof nodes, &even);
        size_t used = 0;
        for (int d = 1; d <= common; d++)
            if (common % d == 0)
                text_append(divisors, sizeof divisors, &used, "%s%d", used ? ", " : "", d);
        error_set("parallel.order auto: tp=%d cannot fit inside one node: nodes have %s; use tp "
                  "dividing every node's rank count (%s) or an explicit order",
                  tp, nodes, divisors);
        free(keys);
        return -1;
    }
    static const int tp_pp_dp[AXIS_COUNT] = {AXIS_TP, AXIS_PP, AXIS_DP};
    for (int slot = 0; slot < world; slot++)
        mesh_coords_of(size, tp_pp_dp, slot, coord[keys[slot].rank]);
    free(keys);
    return 0;
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
    if (!mesh_order_is_auto(order) && mesh_order_parse(order, parsed) != 0) return -1;
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

/* Node index: the node leaders (local rank 0) numbered in world-rank order. */
static void mesh_nodes_discover(mesh *m) {
    snprintf(m->host, sizeof m->host, "%s", tripar_host());
    MPI_CHECK(MPI_Comm_split_type(m->world, MPI_COMM_TYPE_SHARED, m->world_rank, MPI_INFO_NULL,
                                  &m->node_mpi));
    MPI_CHECK(MPI_Comm_rank(m->node_mpi, &m->local_rank));
    MPI_CHECK(MPI_Comm_size(m->node_mpi, &m->local_size));
    int is_leader = m->local_rank == 0, leaders_before = 0;
    MPI_CHECK(MPI_Exscan(&is_leader, &leaders_before, 1, MPI_INT, MPI_SUM, m->world));
    if (m->world_rank == 0) leaders_before = 0;
    int node_index = is_leader ? leaders_before : 0;
    MPI_CHECK(MPI_Bcast(&node_index, 1, MPI_INT, 0, m->node_mpi));
    m->node_index = node_index;
    MPI_CHECK(MPI_Allreduce(&is_leader, &m->node_count, 1, MPI_INT, MPI_SUM, m->world));
}

/* Every rank's place, on every rank: the auto layout needs all of them, and the uneven-nodes
 * warning names them. hosts backs the host pointers (world * 64 bytes); caller frees both. */
static mesh_place *mesh_places_gather(const mesh *m, char **hosts) {
    enum { HOST = sizeof m->host };
    int mine[2] = {m->node_index, m->local_rank};
    int *all = xcalloc((size_t)m->world_size * 2, sizeof *all);
    *hosts = xcalloc((size_t)m->world_size, HOST);
    MPI_CHECK(MPI_Allgather(mine, 2, MPI_INT, all, 2, MPI_INT, m->world));
    MPI_CHECK(MPI_Allgather(m->host, HOST, MPI_CHAR, *hosts, HOST, MPI_CHAR, m->world));
    mesh_place *place = xcalloc((size_t)m->world_size, sizeof *place);
    for (int r = 0; r < m->world_size; r++)
        place[r] = (mesh_place){all[2 * r], all[2 * r + 1], *hosts + (size_t)r * HOST};
    free(all);
    return place;
}

/* The coordinates of this rank: mixed-radix over the world rank for an explicit order, the
 * node-major layout for auto. Every rank computes the same answer from the same places. */
static int mesh_coords_resolve(mesh *m, const mesh_place *place) {
    if (!m->node_major) {
        mesh_coords_of(m->size, m->order, m->world_rank, m->coord);
        return 0;
    }
    int(*coord)[AXIS_COUNT] = xcalloc((size_t)m->world_size, sizeof *coord);
    int rc = mesh_layout_auto(m->world_size, place, m->size, coord);
    if (rc == 0) memcpy(m->coord, coord[m->world_rank], sizeof m->coord);
    free(coord);
    return rc;
}

/* Nodes with different rank counts give some ranks fewer cores or GPUs of their own, and with
 * auto constrain tp to the counts' common divisors. */
static void mesh_warn_uneven(const mesh *m, const mesh_place *place) {
    char nodes[1600];
    int even = 1;
    mesh_nodes_describe(m->world_size, place, nodes, sizeof nodes, &even);
    if (!even && m->world_rank == 0)
        fprintf(stderr,
                "tripar: warning: nodes hold different numbers of ranks: %s; ranks on "
                "fuller nodes share cores and memory bandwidth with more neighbours\n",
                nodes);
}

/* A TP group that spans nodes puts two all-reduces per layer on the network. */
static void mesh_warn_tp_spans(const mesh *m) {
    int tp_nodes_min = 0, tp_nodes_max = 0;
    MPI_CHECK(
        MPI_Allreduce(&m->node_index, &tp_nodes_min, 1, MPI_INT, MPI_MIN, m->axis_mpi[AXIS_TP]));
    MPI_CHECK(
        MPI_Allreduce(&m->node_index, &tp_nodes_max, 1, MPI_INT, MPI_MAX, m->axis_mpi[AXIS_TP]));
    int spans = tp_nodes_min != tp_nodes_max, any_spans = 0;
    MPI_CHECK(MPI_Allreduce(&spans, &any_spans, 1, MPI_INT, MPI_MAX, m->world));
    if (any_spans && m->world_rank == 0)
        fprintf(stderr, "tripar: warning: a tensor-parallel group spans nodes; its all-reduces "
                        "cross the network (use parallel.order auto, or tp-pp-dp with ranks "
                        "placed node by node and tp dividing the ranks per node)\n");
}

/* The part of the build that decides where every rank goes: sizes, order, nodes and this
 * rank's coordinates. Returns 0, or -1 with error_message() set and nothing left to free. With
 * warn, rank 0 warns about uneven nodes. Collective over world. */
static int mesh_place_ranks(mesh *m, MPI_Comm world, int dp, int tp, int pp, const char *order,
                            int warn) {
    memset(m, 0, sizeof *m);
    m->world = world;
    MPI_CHECK(MPI_Comm_size(world, &m->world_size));
    MPI_CHECK(MPI_Comm_rank(world, &m->world_rank));
    m->size[AXIS_TP] = tp;
    m->size[AXIS_PP] = pp;
    m->size[AXIS_DP] = dp;
    m->node_major = mesh_order_is_auto(order);
    if (m->node_major) { /* tp fastest, then pp, then dp, over the node-major key */
        m->order[0] = AXIS_TP, m->order[1] = AXIS_PP, m->order[2] = AXIS_DP;
    } else if (mesh_order_parse(order, m->order) != 0) {
        memset(m, 0, sizeof *m);
        return -1; /* the same text on every rank: the same answer */
    }
    snprintf(m->order_text, sizeof m->order_text, "%s", order);
    m->device = -1;
    mesh_nodes_discover(m);

    char *hosts = NULL;
    mesh_place *place = mesh_places_gather(m, &hosts);
    int rc = mesh_coords_resolve(m, place);
    if (rc == 0 && warn) mesh_warn_uneven(m, place);
    free(place);
    free(hosts);
    if (rc != 0) {
        MPI_CHECK(MPI_Comm_free(&m->node_mpi));
        memset(m, 0, sizeof *m);
        return -1;
    }
    return 0;
}

int mesh_layout_check(MPI_Comm world, int dp, int tp, int pp, const char *order) {
    if (!mesh_order_is_auto(order)) return 0; /* explicit orders always lay out */
    mesh probe;
    if (mesh_place_ranks(&probe, world, dp, tp, pp, order, 0) != 0) return -1;
    MPI_CHECK(MPI_Comm_free(&probe.node_mpi));
    return 0;
}

int mesh_try_init(mesh *m, MPI_Comm world, int dp, int tp, int pp, const char *order) {
    if (mesh_place_ranks(m, world, dp, tp, pp, order, 1) != 0) return -1;

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
    m->ep_replicas = 1, m->ep_mpi = MPI_COMM_NULL;
    mesh_warn_tp_spans(m);
    return 0;
}

void mesh_init(mesh *m, MPI_Comm world, int dp, int tp, int pp, const char *order) {
    CHECK(mesh_try_init(m, world, dp, tp, pp, order) == 0, "%s", error_message());
}

void mesh_attach_mpi(mesh *m) {
    for (int a = 0; a < AXIS_COUNT; a++)
        comm_mpi_init(&m->axis[a], m->axis_mpi[a]);
    comm_mpi_init(&m->world_host, m->world);
    if (m->ep_replicas > 1) comm_mpi_init(&m->ep, m->ep_mpi);
}

void mesh_ep_split(mesh *m, int replicas) {
    if (replicas <= 1) return;
    CHECK(MESH_DP(m) % replicas == 0, "ep spans %d replicas, which does not divide dp %d",
          replicas, MESH_DP(m));
    const int dp_rank = m->coord[AXIS_DP];
    MPI_CHECK(MPI_Comm_split(m->axis_mpi[AXIS_DP], dp_rank / replicas, dp_rank % replicas,
                             &m->ep_mpi));
    m->ep_replicas = replicas;
}

/* Frees the comms still attached (comm_teardown frees them earlier when the backend goes first)
 * and the communicators. */
void mesh_free(mesh *m) {
    comm_free(&m->pp_host);
    comm_free(&m->world_host);
    comm_free(&m->ep);
    if (m->ep_mpi != MPI_COMM_NULL && m->ep_mpi) MPI_Comm_free(&m->ep_mpi);
    for (int a = 0; a < AXIS_COUNT; a++) {
        comm_free(&m->axis[a]);
        if (m->axis_mpi[a] != MPI_COMM_NULL && m->axis_mpi[a]) MPI_Comm_free(&m->axis_mpi[a]);
    }
    if (m->node_mpi != MPI_COMM_NULL && m->node_mpi) MPI_Comm_free(&m->node_mpi);
    memset(m, 0, sizeof *m);
}
