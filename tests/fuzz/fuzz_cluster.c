/* libFuzzer target: plan_cluster_load must never crash, leak or hang on any cluster file, every
 * refusal must say why, and every cluster it accepts must hold what docs/planner.md promises
 * (at least one node and device, positive ceilings, efficiencies in (0, 1]). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/check.h"
#include "analysis/plan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The cluster file of the input, in the fuzzer's working directory (run_fuzz.sh runs it in its
 * own work directory); a `from:` in it is resolved beside it. */
#define FUZZ_CLUSTER "fuzz_cluster_input.yaml"

static void write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) abort();
}

static int positive(double x) { return isfinite(x) && x > 0; }

static void check_accepted(const plan_cluster *c) {
    int ok = c->nodes >= 1 && c->devices_per_node >= 1 && c->cores_per_node >= 0 &&
             positive(c->device_memory) && positive(c->peak_flops) && positive(c->mem_bw) &&
             isfinite(c->node_bw) && c->node_bw >= 0 && c->inter2_group_nodes >= 0;
    for (int i = 0; ok && i < PLAN_TIER_COUNT; i++) {
        const plan_tier *t = &c->tier[i];
        if (!t->present) continue;
        ok = isfinite(t->alpha) && t->alpha >= 0 && positive(t->beta) && t->efficiency > 0 &&
             t->efficiency <= 1 && t->links_per_node >= 0;
    }
    if (!ok) {
        fprintf(stderr, "an accepted cluster breaks its own limits: nodes %d, devices %d, "
                        "memory %g, gflops %g, gbs %g\n",
                c->nodes, c->devices_per_node, c->device_memory, c->peak_flops, c->mem_bw);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    write_file(FUZZ_CLUSTER, data, size);
    plan_cluster c;
    if (plan_cluster_load(&c, FUZZ_CLUSTER) != STATUS_OK) {
        if (!error_message()[0]) abort(); /* every refusal says why */
        return 0;
    }
    check_accepted(&c);
    return 0;
}
