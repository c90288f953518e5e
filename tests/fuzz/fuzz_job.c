/* libFuzzer target: job_load must never crash, leak, hang or blow up on any job file or --set
 * value, must refuse within the limits of src/job/job_tree.h, and every job it accepts must
 * dump to YAML that loads back to the same dump. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "job/job.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The job file of the input, and the dump of an accepted one, in the fuzzer's working
 * directory (run_fuzz.sh runs it in its own work directory). */
#define FUZZ_JOB "fuzz_job_input.yaml"
#define FUZZ_DUMP "fuzz_job_dump.yaml"
#define FUZZ_BASE "fuzz_job_base.yaml"

static void write_file(const char *path, const void *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, size, f) != size || fclose(f) != 0) abort();
}

/* An accepted job dumps to YAML that loads to the same job: the dump is a fixed point. */
static void check_round_trip(const job *j) {
    write_file(FUZZ_DUMP, j->yaml, strlen(j->yaml));
    job again;
    if (job_load(&again, FUZZ_DUMP, NULL, 0) != STATUS_OK) {
        fprintf(stderr, "the dump of an accepted job is refused: %s\n--- dump:\n%s\n",
                error_message(), j->yaml);
        abort();
    }
    if (strcmp(again.yaml, j->yaml) != 0) {
        fprintf(stderr, "dump -> load -> dump differs\n--- first:\n%s\n--- second:\n%s\n", j->yaml,
                again.yaml);
        abort();
    }
    job_free(&again);
}

static void load(const char *path, const char *const *sets, int n_sets) {
    job j;
    if (job_load(&j, path, sets, n_sets) != STATUS_OK) {
        if (!error_message()[0]) abort(); /* every refusal says why */
        return;
    }
    check_round_trip(&j);
    job_free(&j);
}

/* The keys the --set half of an input is grafted at, chosen by its first byte. */
static const char *const SET_KEYS[] = {"input.tokens",
                                       "input.synthetic",
                                       "model.synthetic",
                                       "parallel",
                                       "record.activations",
                                       "generate.temperature",
                                       "bench.arrival_rate",
                                       "model",
                                       "backend",
                                       "input.text",
                                       "parallel.order",
                                       "generate.seed"};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    /* 1. the input as a job file */
    write_file(FUZZ_JOB, data, size);
    load(FUZZ_JOB, NULL, 0);

    /* 2. the input (up to a NUL, as on a command line) as a --set value on a valid job */
    static int base_written;
    if (!base_written) {
        static const char base[] = "model: {synthetic: {layers: 2, heads: 2, embd: 16, vocab: 64, "
                                   "ctx: 32}}\ninput: {tokens: [[1, 2], [3, 4]]}\n"
                                   "generate: {new_tokens: 2}\n";
        write_file(FUZZ_BASE, base, sizeof base - 1);
        base_written = 1;
    }
    if (size == 0 || size > 4096) return 0;
    const char *key = SET_KEYS[data[0] % (sizeof SET_KEYS / sizeof SET_KEYS[0])];
    size_t n = strnlen((const char *)data + 1, size - 1);
    char *set = malloc(strlen(key) + n + 2);
    if (!set) abort();
    sprintf(set, "%s=%.*s", key, (int)n, (const char *)data + 1);
    const char *sets[] = {set};
    load(FUZZ_BASE, sets, 1);
    free(set);
    return 0;
}
