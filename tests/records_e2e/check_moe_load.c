/* check_moe_load BATCH PROMPT_LEN STEPS MOE.h5... [--dense DENSE.h5...]: the expert load that
 * real runs recorded (/moe/expert_load, docs/schema.md "/moe"), read through the tools' reader
 * (analysis/moe_load.c). Each file's dataset has STEPS steps, all run; every step of every layer
 * routes each row to top_k experts, so its counts summed over experts and replicas are
 * BATCH x rows x top_k (rows: PROMPT_LEN at prefill, 1 per decode step), each replica's a
 * multiple of rows x top_k; and every file, whatever its mesh, holds the same counts summed
 * over its replicas as the first. A dense file has no /moe. Exit 0 when all hold. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/moe_load.h"
#include "base/check.h" /* error_message */
#include "io/h5util.h"

static int failures;
#define EXPECT(cond, ...)                                                                          \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            printf("FAIL: " __VA_ARGS__);                                                          \
            printf("\n");                                                                          \
            failures++;                                                                            \
        }                                                                                          \
    } while (0)

/* the load summed over replicas: (steps, layers, experts) */
static long long *replica_sum(const moe_load *l) {
    const size_t per = (size_t)l->steps * l->layers * l->experts;
    long long *sum = calloc(per, sizeof(long long));
    for (int r = 0; r < l->replicas; r++)
        for (size_t i = 0; i < per; i++)
            sum[i] += l->load[r * per + i];
    return sum;
}

static void check_rows(const char *path, const moe_load *l, long batch, long prompt) {
    for (int s = 0; s < l->steps; s++)
        for (int y = 0; y < l->layers; y++) {
            const long rows = s == 0 ? prompt : 1;
            long long all = 0;
            for (int r = 0; r < l->replicas; r++) {
                long long mine = 0;
                for (int x = 0; x < l->experts; x++)
                    mine += l->load[(((size_t)r * l->steps + s) * l->layers + y) * l->experts + x];
                EXPECT(mine > 0 && mine % (rows * l->top_k) == 0,
                       "%s: replica %d step %d layer %d routed %lld, not a multiple of %ld", path,
                       r, s, y, mine, rows * l->top_k);
                all += mine;
            }
            EXPECT(all == batch * rows * l->top_k,
                   "%s: step %d layer %d routed %lld rows, want %ld x %ld x top_k %d", path, s, y,
                   all, batch, rows, l->top_k);
        }
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: check_moe_load BATCH PROMPT_LEN STEPS MOE.h5... "
                        "[--dense DENSE.h5...]\n");
        return 2;
    }
    const long batch = atol(argv[1]), prompt = atol(argv[2]), steps = atol(argv[3]);
    moe_load first = {0};
    long long *first_sum = NULL;
    int dense = 0;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--dense")) {
            dense = 1;
            continue;
        }
        hid_t f = h5_open_read(argv[i]);
        if (f < 0) {
            printf("FAIL: %s\n", error_message());
            return 1;
        }
        moe_load l;
        const int got = moe_load_read(f, &l), group = h5_exists(f, "moe");
        H5Fclose(f);
        if (dense) {
            EXPECT(got == 0 && !group, "%s: a dense run has /moe", argv[i]);
            continue;
        }
        EXPECT(got == 1, "%s: no readable /moe (%s)", argv[i], got < 0 ? error_message() : "");
        if (got != 1) continue;
        printf("%s: /moe/expert_load (%d, %d, %d, %d), top_k %d, ep %d, iteration %d\n", argv[i],
               l.replicas, l.steps, l.layers, l.experts, l.top_k, l.ep, l.iteration);
        EXPECT(l.steps == steps && l.steps_run == steps, "%s: %d steps (%d run), want %ld", argv[i],
               l.steps, l.steps_run, steps);
        check_rows(argv[i], &l, batch, prompt);
        long long *sum = replica_sum(&l);
        if (!first_sum) {
            first = l, first_sum = sum;
            continue;
        }
        const size_t per = (size_t)l.steps * l.layers * l.experts;
        EXPECT(l.layers == first.layers && l.experts == first.experts && l.steps == first.steps,
               "%s: shape differs from the first file's", argv[i]);
        for (size_t k = 0; k < per && l.layers == first.layers && l.experts == first.experts; k++)
            if (sum[k] != first_sum[k]) {
                EXPECT(0, "%s: step %zu layer %zu expert %zu routed %lld, the first file %lld",
                       argv[i], k / ((size_t)l.layers * l.experts), k / l.experts % l.layers,
                       k % l.experts, sum[k], first_sum[k]);
                break;
            }
        free(sum);
        moe_load_free(&l);
    }
    free(first_sum);
    moe_load_free(&first);
    if (failures) printf("check_moe_load: %d failure(s)\n", failures);
    return failures ? 1 : 0;
}
