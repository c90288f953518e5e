/* The node-aware mesh layout (parallel.order auto, parallel/mesh.c): ranks sorted by (node, local
 * rank), tp fastest, then pp, then dp, so every TP group sits inside one node whatever mapping
 * the launcher used; a tp that cannot fit is refused naming the ranks per node. The layout is a
 * pure function of every rank's place, so no MPI is needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "base/check.h"
#include "parallel/mesh.h"

enum { WORLD_MAX = 64 };

static const char *const host_names[] = {"node1", "node2", "node3", "node4",
                                         "node5", "node6", "node7", "node8"};

/* A cluster of len(counts) nodes, counts[n] ranks on node n, with world ranks handed out by
 * block ("--map-by slot": node 0's ranks first) or cyclically ("--map-by node", srun's cyclic
 * distribution: one rank per node in turn). */
typedef struct {
    int world;
    mesh_place place[WORLD_MAX];
} cluster;

static cluster cluster_make(const int *counts, int nodes, int cyclic) {
    cluster c;
    memset(&c, 0, sizeof c);
    int next_local[8] = {0}, left = 0;
    for (int n = 0; n < nodes; n++)
        left += counts[n];
    assert_true(left <= WORLD_MAX);
    if (!cyclic) {
        for (int n = 0; n < nodes; n++)
            for (int l = 0; l < counts[n]; l++)
                c.place[c.world++] = (mesh_place){n, l, host_names[n]};
        return c;
    }
    while (left > 0)
        for (int n = 0; n < nodes; n++)
            if (next_local[n] < counts[n]) {
                c.place[c.world++] = (mesh_place){n, next_local[n]++, host_names[n]};
                left--;
            }
    return c;
}

static int layout(const cluster *c, int tp, int pp, int dp, int (*coord)[AXIS_COUNT]) {
    const int size[AXIS_COUNT] = {[AXIS_TP] = tp, [AXIS_PP] = pp, [AXIS_DP] = dp};
    return mesh_layout_auto(c->world, c->place, size, coord);
}

/* Every coordinate triple is used by exactly one rank, and each lies inside the sizes. */
static void assert_bijection(int world, int tp, int pp, int dp, int (*coord)[AXIS_COUNT]) {
    int seen[WORLD_MAX] = {0};
    for (int r = 0; r < world; r++) {
        assert_in_range(coord[r][AXIS_TP], 0, tp - 1);
        assert_in_range(coord[r][AXIS_PP], 0, pp - 1);
        assert_in_range(coord[r][AXIS_DP], 0, dp - 1);
        int id = (coord[r][AXIS_DP] * pp + coord[r][AXIS_PP]) * tp + coord[r][AXIS_TP];
        assert_int_equal(seen[id], 0);
        seen[id] = 1;
    }
}

/* How many groups along axis hold ranks of more than one node. */
static int groups_crossing(const cluster *c, int axis, int (*coord)[AXIS_COUNT]) {
    int crossing = 0, counted[WORLD_MAX] = {0};
    for (int r = 0; r < c->world; r++) {
        if (counted[r]) continue;
        int crosses = 0;
        for (int q = r; q < c->world; q++) {
            int same_group = 1;
            for (int b = 0; b < AXIS_COUNT; b++)
                if (b != axis && coord[q][b] != coord[r][b]) same_group = 0;
            if (!same_group) continue;
            counted[q] = 1;
            if (c->place[q].node != c->place[r].node) crosses = 1;
        }
        crossing += crosses;
    }
    return crossing;
}

static void explicit_coords(int world, int tp, int pp, int dp, const char *order,
                            int (*coord)[AXIS_COUNT]) {
    const int size[AXIS_COUNT] = {[AXIS_TP] = tp, [AXIS_PP] = pp, [AXIS_DP] = dp};
    int parsed[AXIS_COUNT];
    assert_int_equal(mesh_order_parse(order, parsed), 0);
    for (int r = 0; r < world; r++)
        mesh_coords_of(size, parsed, r, coord[r]);
}

/* On one node auto is tp-pp-dp: same coordinates for every factorization of 1 to 8 ranks. */
static void test_one_node_is_tp_pp_dp(void **state) {
    (void)state;
    for (int world = 1; world <= 8; world++) {
        int counts[1] = {world};
        cluster c = cluster_make(counts, 1, 0);
        for (int tp = 1; tp <= world; tp++)
            for (int pp = 1; tp * pp <= world; pp++) {
                if (world % (tp * pp) != 0) continue;
                int dp = world / (tp * pp);
                int got[WORLD_MAX][AXIS_COUNT], want[WORLD_MAX][AXIS_COUNT];
                assert_int_equal(layout(&c, tp, pp, dp, got), 0);
                explicit_coords(world, tp, pp, dp, "tp-pp-dp", want);
                assert_memory_equal(got, want, sizeof(int) * AXIS_COUNT * (size_t)world);
            }
    }
}

/* Two nodes of two ranks, mapped by block: auto agrees with tp-pp-dp, and TP stays in a node. */
static void test_two_nodes_block_mapping(void **state) {
    (void)state;
    const int counts[] = {2, 2};
    cluster c = cluster_make(counts, 2, 0);
    int got[WORLD_MAX][AXIS_COUNT], want[WORLD_MAX][AXIS_COUNT];
    assert_int_equal(layout(&c, 2, 1, 2, got), 0);
    explicit_coords(4, 2, 1, 2, "tp-pp-dp", want);
    assert_memory_equal(got, want, sizeof(int) * AXIS_COUNT * 4);
    assert_int_equal(groups_crossing(&c, AXIS_TP, got), 0);
    assert_int_equal(groups_crossing(&c, AXIS_DP, got), 2);
}

/* Mapped cyclically (--map-by node), tp-pp-dp would put ranks 0 and 1, on two nodes, in one TP
 * group; auto pairs rank 0 with rank 2 (node1) and rank 1 with rank 3 (node2). */
static void test_two_nodes_cyclic_mapping(void **state) {
    (void)state;
    const int counts[] = {2, 2};
    cluster c = cluster_make(counts, 2, 1);
    assert_int_equal(c.place[1].node, 1); /* the mapping is really cyclic */
    int got[WORLD_MAX][AXIS_COUNT], naive[WORLD_MAX][AXIS_COUNT];
    explicit_coords(4, 2, 1, 2, "tp-pp-dp", naive);
    assert_int_equal(groups_crossing(&c, AXIS_TP, naive), 2);
    assert_int_equal(layout(&c, 2, 1, 2, got), 0);
    assert_int_equal(groups_crossing(&c, AXIS_TP, got), 0);
    const int want[4][AXIS_COUNT] = {
        [0] = {[AXIS_TP] = 0, [AXIS_PP] = 0, [AXIS_DP] = 0},
        [1] = {[AXIS_TP] = 0, [AXIS_PP] = 0, [AXIS_DP] = 1},
        [2] = {[AXIS_TP] = 1, [AXIS_PP] = 0, [AXIS_DP] = 0},
        [3] = {[AXIS_TP] = 1, [AXIS_PP] = 0, [AXIS_DP] = 1},
    };
    assert_memory_equal(got, want, sizeof want);
    /* PP comes second: with tp 1, pp 2 the two stages of a replica share a node */
    assert_int_equal(layout(&c, 1, 2, 2, got), 0);
    assert_int_equal(groups_crossing(&c, AXIS_PP, got), 0);
    assert_int_equal(groups_crossing(&c, AXIS_DP, got), 2);
}

/* The coordinates follow (node, local rank) only: any world-rank mapping gives each place the
 * same coordinates, block and cyclic alike, over 2 to 8 nodes. */
static void test_mapping_does_not_matter(void **state) {
    (void)state;
    const int shapes[][4] = {/* nodes, ranks per node, tp, pp */
                             {2, 2, 2, 1}, {2, 4, 2, 2}, {4, 2, 2, 2}, {4, 2, 1, 2},
                             {8, 2, 2, 4}, {3, 4, 4, 1}, {2, 6, 3, 2}, {8, 4, 4, 2}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int nodes = shapes[s][0], per = shapes[s][1], tp = shapes[s][2], pp = shapes[s][3];
        int counts[8];
        for (int n = 0; n < nodes; n++)
            counts[n] = per;
        int world = nodes * per, dp = world / (tp * pp);
        cluster block = cluster_make(counts, nodes, 0), cyclic = cluster_make(counts, nodes, 1);
        int cb[WORLD_MAX][AXIS_COUNT], cc[WORLD_MAX][AXIS_COUNT];
        assert_int_equal(layout(&block, tp, pp, dp, cb), 0);
        assert_int_equal(layout(&cyclic, tp, pp, dp, cc), 0);
        assert_bijection(world, tp, pp, dp, cb);
        assert_bijection(world, tp, pp, dp, cc);
        assert_int_equal(groups_crossing(&block, AXIS_TP, cb), 0);
        assert_int_equal(groups_crossing(&cyclic, AXIS_TP, cc), 0);
        for (int r = 0; r < world; r++)
            for (int q = 0; q < world; q++)
                if (block.place[r].node == cyclic.place[q].node &&
                    block.place[r].local_rank == cyclic.place[q].local_rank)
                    assert_memory_equal(cb[r], cc[q], sizeof cb[r]);
    }
}

/* tp 4 on two nodes of two: refused, the reason naming the ranks per node and the tp that fit. */
static void test_tp_too_big_refused(void **state) {
    (void)state;
    const int counts[] = {2, 2};
    cluster c = cluster_make(counts, 2, 1);
    int got[WORLD_MAX][AXIS_COUNT];
    error_clear();
    assert_int_equal(layout(&c, 4, 1, 1, got), -1);
    assert_string_equal(error_message(),
                        "parallel.order auto: tp=4 cannot fit inside one node: nodes have 2, 2 "
                        "ranks (node1: 2, node2: 2); use tp dividing every node's rank count "
                        "(1, 2) or an explicit order");
}

/* Nodes of 4 and 2 ranks: tp 2 fits (6 = 2 x 3 stages), tp 3 and 4 do not; 3 + 1 ranks fit
 * only tp 1. */
static void test_uneven_nodes(void **state) {
    (void)state;
    const int counts[] = {4, 2};
    for (int cyclic = 0; cyclic <= 1; cyclic++) {
        cluster c = cluster_make(counts, 2, cyclic);
        int got[WORLD_MAX][AXIS_COUNT];
        assert_int_equal(layout(&c, 2, 3, 1, got), 0);
        assert_bijection(6, 2, 3, 1, got);
        assert_int_equal(groups_crossing(&c, AXIS_TP, got), 0);
        assert_int_equal(groups_crossing(&c, AXIS_PP, got), 2); /* 3 stages, 2 nodes */
        assert_int_equal(layout(&c, 2, 1, 3, got), 0);
        assert_int_equal(groups_crossing(&c, AXIS_TP, got), 0);
        assert_int_equal(layout(&c, 3, 2, 1, got), -1);
        assert_non_null(strstr(error_message(), "tp=3 cannot fit inside one node: nodes have 4, 2 "
                                                "ranks (node1: 4, node2: 2)"));
        assert_int_equal(layout(&c, 2, 1, 3, got), 0);
    }
    const int three_one[] = {3, 1};
    cluster c = cluster_make(three_one, 2, 0);
    int got[WORLD_MAX][AXIS_COUNT];
    assert_int_equal(layout(&c, 2, 1, 2, got), -1);
    assert_non_null(strstr(error_message(), "nodes have 3, 1 ranks (node1: 3, node2: 1); use tp "
                                            "dividing every node's rank count (1) or"));
    assert_int_equal(layout(&c, 1, 2, 2, got), 0);
    assert_bijection(4, 1, 2, 2, got);
}

/* The sizes must multiply to the world: a caller's mistake is refused, not laid out. */
static void test_sizes_must_match_world(void **state) {
    (void)state;
    const int counts[] = {2, 2};
    cluster c = cluster_make(counts, 2, 0);
    int got[WORLD_MAX][AXIS_COUNT];
    assert_int_equal(layout(&c, 2, 1, 1, got), -1);
    assert_non_null(strstr(error_message(), "does not match the 4 ranks"));
}

static void test_nodes_describe(void **state) {
    (void)state;
    char text[512];
    int even = 0;
    const int counts[] = {2, 2, 2};
    cluster c = cluster_make(counts, 3, 1);
    assert_int_equal(mesh_nodes_describe(c.world, c.place, text, sizeof text, &even), 3);
    assert_int_equal(even, 1);
    assert_string_equal(text, "2, 2, 2 ranks (node1: 2, node2: 2, node3: 2)");
    const int uneven[] = {3, 1};
    c = cluster_make(uneven, 2, 0);
    assert_int_equal(mesh_nodes_describe(c.world, c.place, text, sizeof text, &even), 2);
    assert_int_equal(even, 0);
    assert_string_equal(text, "3, 1 ranks (node1: 3, node2: 1)");
}

/* auto passes the order checks that need no nodes (the world-size check still applies). */
static void test_validate_accepts_auto(void **state) {
    (void)state;
    assert_true(mesh_order_is_auto("auto"));
    assert_false(mesh_order_is_auto("tp-pp-dp"));
    assert_int_equal(mesh_validate(4, 2, 2, 1, "auto"), 0);
    assert_int_equal(mesh_validate(4, 2, 1, 1, "auto"), -1);
    assert_int_equal(mesh_validate(4, 2, 2, 1, "autox"), -1);
    assert_non_null(strstr(error_message(), "or be auto"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_node_is_tp_pp_dp),
        cmocka_unit_test(test_two_nodes_block_mapping),
        cmocka_unit_test(test_two_nodes_cyclic_mapping),
        cmocka_unit_test(test_mapping_does_not_matter),
        cmocka_unit_test(test_tp_too_big_refused),
        cmocka_unit_test(test_uneven_nodes),
        cmocka_unit_test(test_sizes_must_match_world),
        cmocka_unit_test(test_nodes_describe),
        cmocka_unit_test(test_validate_accepts_auto),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
