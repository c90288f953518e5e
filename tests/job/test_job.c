/* Tests of job files: fields and defaults, every error class with its file:line and allowed
 * values, --set overrides, and dump-then-reload round trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "base/check.h"
#include "job/job.h"

#ifndef TRIPAR_SOURCE_DIR
#define TRIPAR_SOURCE_DIR "."
#endif

static char tmp_dir[256];

static int setup_tmp(void **state) {
    snprintf(tmp_dir, sizeof tmp_dir, "/tmp/tripar_test_job_XXXXXX");
    assert_non_null(mkdtemp(tmp_dir));
    return 0;
}

static int teardown_tmp(void **state) {
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp_dir);
    return system(cmd) == 0 ? 0 : -1;
}

static const char *src_path(const char *rel) {
    static char path[4][1024];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, 1024, "%s/%s", TRIPAR_SOURCE_DIR, rel);
    return p;
}

/* Writes text to tmp_dir/name and returns the path (valid until the 4th next call). */
static const char *write_tmp(const char *name, const char *text) {
    static char path[4][512];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, 512, "%s/%s", tmp_dir, name);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return p;
}

static int regex_matches(const char *pattern, const char *subject) {
    int err = 0;
    PCRE2_SIZE off = 0;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, 0, &err, &off, NULL);
    if (!re) {
        print_error("bad regex '%s'\n", pattern);
        return 0;
    }
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int rc = pcre2_match(re, (PCRE2_SPTR)subject, PCRE2_ZERO_TERMINATED, 0, 0, md, NULL);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return rc >= 0;
}

/* Loads and expects failure with a message matching pattern. */
static void expect_error(const char *path, const char *const *sets, int n_sets,
                         const char *pattern) {
    job j;
    int rc = job_load(&j, path, sets, n_sets);
    if (rc != STATUS_BAD_INPUT || !regex_matches(pattern, error_message()))
        print_error("job %s: rc %d, message:\n  %s\nexpected /%s/\n", path, rc, error_message(),
                    pattern);
    assert_int_equal(rc, STATUS_BAD_INPUT);
    assert_true(regex_matches(pattern, error_message()));
    /* a failed load leaves a zeroed job: freeing it again must be harmless */
    assert_null(j.tokens);
    job_free(&j);
}

static void load_ok(job *j, const char *path, const char *const *sets, int n_sets) {
    int rc = job_load(j, path, sets, n_sets);
    if (rc) print_error("job %s: %s\n", path, error_message());
    assert_int_equal(rc, STATUS_OK);
    assert_non_null(j->yaml);
}

static void test_tiny_fields(void **state) {
    job j;
    load_ok(&j, src_path("jobs/tiny.yaml"), NULL, 0);
    assert_int_equal(j.synthetic, 1);
    assert_string_equal(j.checkpoint, "");
    assert_int_equal(j.layers, 2);
    assert_int_equal(j.heads, 2);
    assert_int_equal(j.embd, 32);
    assert_int_equal(j.vocab, 64);
    assert_int_equal(j.ctx, 32);
    assert_int_equal(j.mlp, 4 * 32); /* resolved from 0 */
    assert_int_equal(j.seed, 1);
    assert_int_equal(j.batch, 2);
    assert_int_equal(j.prompt_len, 4);
    for (int i = 0; i < 8; i++)
        assert_int_equal(j.tokens[i], i + 1);
    assert_int_equal(j.new_tokens, 4);
    assert_string_equal(j.out, "tiny.h5");
    assert_int_equal(j.n_activations, 2);
    assert_string_equal(j.activations[0], "embed");
    assert_string_equal(j.activations[1], "logits");
    assert_true(job_records_activation(&j, "logits"));
    assert_false(job_records_activation(&j, "final"));
    /* defaults of every key the file leaves out */
    assert_int_equal(j.norm, NORM_PRE);
    assert_int_equal(j.precision, PRECISION_FP32);
    assert_int_equal(j.kv_cache, KV_CONTIGUOUS);
    assert_int_equal(j.kv_block, 16);
    assert_int_equal(j.kv_dtype, KV_DTYPE_FP32); /* auto, for fp32 weights */
    assert_true(j.kv_dtype_auto);
    assert_true(j.ln_eps == 1e-5f);
    assert_int_equal(j.backend, BACKEND_CPU);
    assert_int_equal(j.threads, 0);
    assert_int_equal(j.device, -1);
    assert_int_equal(j.comm, COMM_AUTO);
    assert_int_equal(j.cuda_graphs, 0);
    assert_int_equal(j.allow_tf32, 0);
    assert_int_equal(j.memory_check, 1);
    assert_int_equal(j.microbatches, 1);
    assert_string_equal(j.order, "tp-pp-dp");
    assert_int_equal(j.overlap, 0);
    assert_int_equal(j.chunks, 2);
    assert_int_equal(j.mpi_tuning, 1); /* auto */
    assert_int_equal(j.sampling, SAMPLING_GREEDY);
    assert_true(j.temperature == 1.0f);
    assert_int_equal(j.top_k, 0);
    assert_int_equal(j.sample_seed, 1);
    assert_int_equal(j.warmup, 0);
    assert_int_equal(j.iterations, 1);
    assert_int_equal(j.timings, TIMINGS_STEP);
    assert_int_equal(j.flush_every, 0);
    assert_int_equal(j.flush_seconds, 10);
    assert_int_equal(j.stop_grace_seconds, 5);
    assert_int_equal(j.stall_seconds, 60);
    assert_int_equal(j.sched, 1);
    assert_int_equal(j.telemetry_hz, 10);
    /* where keys were set */
    assert_int_equal(job_key_line(&j, "model.synthetic.layers"), 3);
    assert_int_equal(job_key_line(&j, "input.tokens"), 7);
    assert_int_equal(job_key_line(&j, "generate.new_tokens"), 11);
    assert_int_equal(job_key_line(&j, "record.activations"), 14);
    assert_int_equal(job_key_line(&j, "bench.warmup"), 0);
    assert_int_equal(job_validate_model(&j), STATUS_OK);
    job_free(&j);
    job_free(&j); /* safe twice */
}

static void test_demo_synthetic_input(void **state) {
    job a, b;
    load_ok(&a, src_path("jobs/demo.yaml"), NULL, 0);
    assert_int_equal(a.tp, 2);
    assert_int_equal(a.pp, 2);
    assert_int_equal(a.dp, 1);
    assert_int_equal(a.tp * a.pp * a.dp, 4);
    assert_int_equal(a.synthetic_input, 1);
    assert_int_equal(a.batch, 4); /* the README's dp=4 line splits it one prompt per replica */
    assert_int_equal(a.prompt_len, 16);
    assert_int_equal(a.timings, TIMINGS_LAYER);
    assert_string_equal(a.out, "demo.h5");
    assert_true(a.prompt_len + a.new_tokens <= a.ctx);
    int distinct = 0;
    for (int i = 0; i < a.batch * a.prompt_len; i++) {
        assert_true(a.tokens[i] >= 0 && a.tokens[i] < a.vocab);
        distinct += i > 0 && a.tokens[i] != a.tokens[0];
    }
    assert_true(distinct > 0);
    /* the same seed gives the same tokens; another seed others */
    load_ok(&b, src_path("jobs/demo.yaml"), NULL, 0);
    assert_memory_equal(a.tokens, b.tokens, sizeof(int32_t) * a.batch * a.prompt_len);
    job_free(&b);
    const char *sets[] = {"input.synthetic.seed=8"};
    load_ok(&b, src_path("jobs/demo.yaml"), sets, 1);
    assert_memory_not_equal(a.tokens, b.tokens, sizeof(int32_t) * a.batch * a.prompt_len);
    /* the hash of docs/jobs.md, recomputed here independently */
    job_fill_synthetic_tokens(&b, 1000);
    uint64_t z = 8 + 0x9E3779B97F4A7C15ull * 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    assert_int_equal(b.tokens[0], (int32_t)(z % 1000));
    job_free(&b);
    job_free(&a);
}

static void test_synthetic_defaults(void **state) {
    job j;
    load_ok(&j, write_tmp("min.yaml", "model:\n  synthetic:\ninput:\n  synthetic:\n"), NULL, 0);
    assert_int_equal(j.layers, 2);
    assert_int_equal(j.heads, 4);
    assert_int_equal(j.embd, 64);
    assert_int_equal(j.vocab, 256);
    assert_int_equal(j.ctx, 128);
    assert_int_equal(j.mlp, 256);
    assert_int_equal(j.seed, 1234);
    assert_int_equal(j.batch, 1);
    assert_int_equal(j.prompt_len, 16);
    assert_int_equal(j.input_seed, 42);
    assert_int_equal(j.new_tokens, 16);
    assert_string_equal(j.out, "run.h5");
    assert_int_equal(j.n_activations, 0);
    job_free(&j);
}

static void test_all_keys(void **state) {
    job j;
    const char *path = write_tmp(
        "all.yaml",
        "model:\n"
        "  synthetic: {layers: 3, heads: 6, embd: 48, vocab: 500, ctx: 64, mlp: 100, seed: 9}\n"
        "  norm: post\n  precision: bf16\n  kv_cache: paged\n  kv_block: 8\n  ln_eps: 1.0e-6\n"
        "backend:\n  kind: cuda\n  threads: 3\n  device: 1\n  comm: nccl\n"
        "  cuda_graphs: true\n  tf32: yes\n  memory_check: false\n"
        "parallel: {dp: 2, tp: 3, pp: 3, microbatches: 4, order: dp-tp-pp, overlap: true, "
        "chunks: 5, mpi_tuning: off}\n"
        "input:\n  tokens: [7, 8, 9]\n"
        "generate: {new_tokens: 0, sampling: sample, temperature: 0.5, top_k: 40, seed: 77}\n"
        "bench: {warmup: 10, iterations: 100}\n"
        "record:\n  out: x/y.h5\n  activations: all\n  timings: off\n  flush_every: 3\n"
        "  flush_seconds: 0\n  stop_grace_seconds: 0\n  stall_seconds: 7\n  sched: false\n");
    load_ok(&j, path, NULL, 0);
    assert_int_equal(j.layers, 3);
    assert_int_equal(j.heads, 6);
    assert_int_equal(j.mlp, 100);
    assert_int_equal(j.seed, 9);
    assert_int_equal(j.norm, NORM_POST);
    assert_int_equal(j.precision, PRECISION_BF16);
    assert_int_equal(j.kv_cache, KV_PAGED);
    assert_int_equal(j.kv_block, 8);
    assert_int_equal(j.kv_dtype, KV_DTYPE_BF16); /* auto, for bf16 weights */
    assert_true(j.ln_eps == 1.0e-6f);
    assert_int_equal(j.backend, BACKEND_CUDA);
    assert_int_equal(j.threads, 3);
    assert_int_equal(j.device, 1);
    assert_int_equal(j.comm, COMM_NCCL);
    assert_int_equal(j.cuda_graphs, 1);
    assert_int_equal(j.allow_tf32, 1);
    assert_int_equal(j.memory_check, 0);
    assert_int_equal(j.dp, 2);
    assert_int_equal(j.tp, 3);
    assert_int_equal(j.pp, 3);
    assert_int_equal(j.microbatches, 4);
    assert_string_equal(j.order, "dp-tp-pp");
    assert_int_equal(j.overlap, 1);
    assert_int_equal(j.chunks, 5);
    assert_int_equal(j.mpi_tuning, 0);
    assert_int_equal(j.batch, 1);
    assert_int_equal(j.prompt_len, 3);
    assert_int_equal(j.tokens[2], 9);
    assert_int_equal(j.new_tokens, 0);
    assert_int_equal(j.sampling, SAMPLING_SAMPLE);
    assert_true(j.temperature == 0.5f);
    assert_int_equal(j.top_k, 40);
    assert_int_equal(j.sample_seed, 77);
    assert_int_equal(j.warmup, 10);
    assert_int_equal(j.iterations, 100);
    assert_string_equal(j.out, "x/y.h5");
    assert_int_equal(j.n_activations, 1);
    assert_true(job_records_activation(&j, "layer.2.mlp"));
    assert_int_equal(j.timings, TIMINGS_OFF);
    assert_int_equal(j.flush_every, 3);
    assert_int_equal(j.flush_seconds, 0);
    assert_int_equal(j.stop_grace_seconds, 0);
    assert_int_equal(j.stall_seconds, 7);
    assert_int_equal(j.sched, 0);
    assert_int_equal(job_key_line(&j, "backend.tf32"), 14);
    job_free(&j);
}

static void test_backend_scalar(void **state) {
    job j;
    const char *path = write_tmp("b.yaml", "model: {synthetic: {}}\nbackend: cuda\n"
                                           "input: {tokens: [1]}\n");
    load_ok(&j, path, NULL, 0);
    assert_int_equal(j.backend, BACKEND_CUDA);
    assert_int_equal(j.threads, 0);
    assert_int_equal(job_key_line(&j, "backend.kind"), 2);
    job_free(&j);
    /* a --set of a sub-key turns the short form into a mapping that keeps the kind */
    const char *sets[] = {"backend.threads=4"};
    load_ok(&j, path, sets, 1);
    assert_int_equal(j.backend, BACKEND_CUDA);
    assert_int_equal(j.threads, 4);
    job_free(&j);
    /* and --set backend=cpu on a mapping changes only the kind */
    const char *sets2[] = {"backend.device=2", "backend=cpu"};
    load_ok(&j, path, sets2, 2);
    assert_int_equal(j.backend, BACKEND_CPU);
    assert_int_equal(j.device, 2);
    job_free(&j);
    expect_error(
        write_tmp("b2.yaml", "model: {synthetic: {}}\nbackend: tpu\ninput: {tokens: [1]}\n"), NULL,
        0, "b2\\.yaml:2: backend: 'tpu' is not allowed; allowed: cpu, cuda$");
    /* the block formats run on cuda too (kernels/cuda/matmul_blocks.cu) */
    load_ok(&j,
            write_tmp("b3.yaml", "model:\n  synthetic: {heads: 4, embd: 256}\n  precision: q4_k\n"
                                 "backend: cuda\ninput: {tokens: [1]}\n"),
            NULL, 0);
    assert_int_equal(j.backend, BACKEND_CUDA);
    assert_int_equal(j.precision, PRECISION_Q4_K);
    job_free(&j);
}

static void test_input_forms(void **state) {
    job j;
    /* a block sequence of block sequences */
    load_ok(&j,
            write_tmp("blk.yaml", "model: {synthetic: {}}\ninput:\n  tokens:\n    -\n      - 3\n"
                                  "      - 4\n    -\n      - 5\n      - 6\n"),
            NULL, 0);
    assert_int_equal(j.batch, 2);
    assert_int_equal(j.prompt_len, 2);
    assert_int_equal(j.tokens[3], 6);
    job_free(&j);

    /* tokens_file relative to the job file's directory, not the working directory */
    write_tmp("toks.txt", "# a comment\n1 2 3\n\n  4\t5 6  \n7 8 9\n");
    const char *path =
        write_tmp("tf.yaml", "model: {synthetic: {}}\ninput:\n  tokens_file: toks.txt\n");
    char cwd[1024];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir("/"), 0);
    job_load(&j, path, NULL, 0);
    assert_int_equal(chdir(cwd), 0);
    assert_non_null(j.yaml);
    assert_int_equal(j.batch, 3);
    assert_int_equal(j.prompt_len, 3);
    assert_int_equal(j.tokens[4], 5);
    assert_int_equal(j.tokens[8], 9);
    assert_true(strstr(j.tokens_file, "toks.txt") && j.tokens_file[0] == '/');
    job_free(&j);
    write_tmp("bad_toks.txt", "1 2\n3 x4\n");
    expect_error(
        write_tmp("tf2.yaml", "model: {synthetic: {}}\ninput: {tokens_file: bad_toks.txt}\n"), NULL,
        0, "bad_toks\\.txt:2: 'x4' is not a token id");

    /* text and text_file: kept as text, tokenized later by the runner */
    load_ok(
        &j,
        write_tmp("t.yaml", "model: {synthetic: {}}\ninput:\n  text: |\n    Hello,\n    world\n"),
        NULL, 0);
    assert_string_equal(j.text, "Hello,\nworld\n");
    assert_int_equal(j.batch, 0);
    assert_null(j.tokens);
    job_free(&j);
    write_tmp("story.txt", "Once upon a time: \"quoted\"\n");
    load_ok(&j, write_tmp("tf3.yaml", "model: {synthetic: {}}\ninput: {text_file: story.txt}\n"),
            NULL, 0);
    assert_string_equal(j.text, "Once upon a time: \"quoted\"\n");
    job_free(&j);
}

/* Every fixture of tests/job/README.md fails with its documented message. */
static void test_bad_fixtures(void **state) {
    FILE *f = fopen(src_path("tests/job/README.md"), "r");
    assert_non_null(f);
    char line[2048];
    int rows = 0;
    while (fgets(line, sizeof line, f)) {
        char name[256], pattern[1024];
        if (sscanf(line, "| `%255[^`]` | %*[^|] | `%1023[^`]` |", name, pattern) != 2) continue;
        char rel[300];
        snprintf(rel, sizeof rel, "tests/job/%s", name);
        expect_error(src_path(rel), NULL, 0, pattern);
        rows++;
    }
    fclose(f);
    assert_true(rows >= 25);
}

static void test_error_details(void **state) {
    const char *m = "model: {synthetic: {}}\n";
    char text[512];
    /* a quoted number is a string */
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nparallel:\n  tp: \"2\"\n", m);
    expect_error(write_tmp("e1.yaml", text), NULL, 0,
                 "e1\\.yaml:4: parallel\\.tp: expected an integer, got the string '2'");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nparallel:\n  overlap: maybe\n", m);
    expect_error(write_tmp("e2.yaml", text), NULL, 0,
                 "e2\\.yaml:4: parallel\\.overlap: expected true or false, got 'maybe'");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nparallel:\n  mpi_tuning: on\n", m);
    expect_error(write_tmp("e2t.yaml", text), NULL, 0,
                 "e2t\\.yaml:4: parallel\\.mpi_tuning: .*on.*off, auto");
    snprintf(text, sizeof text, "%sinput: {tokens: [1, -2]}\n", m);
    expect_error(write_tmp("e3.yaml", text), NULL, 0,
                 "e3\\.yaml:2: input\\.tokens: prompt 0 position 1 = -2 is out of range");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nrecord: [out]\n", m);
    expect_error(write_tmp("e4.yaml", text), NULL, 0,
                 "e4\\.yaml:3: record must be a mapping of keys \\(out, activations, timings, "
                 "flush_every, flush_seconds, stop_grace_seconds, telemetry, stall_seconds, "
                 "sched\\), "
                 "got a sequence");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\n---\nmodel: {}\n", m);
    expect_error(write_tmp("e5.yaml", text), NULL, 0, "e5\\.yaml:4: .*second one");
    snprintf(text, sizeof text, "%sinput: {tokens: &a [1, *a]}\n", m);
    expect_error(write_tmp("e6.yaml", text), NULL, 0, "e6\\.yaml:2: .*");
    snprintf(text, sizeof text, "%sinput:\n  synthetic: {batch: 2, lenght: 3}\n", m);
    expect_error(write_tmp("e7.yaml", text), NULL, 0,
                 "e7\\.yaml:3: unknown key 'lenght' in input\\.synthetic; allowed: batch, "
                 "length, seed");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\ngenerate: {sampling: beam}\n", m);
    expect_error(
        write_tmp("e8.yaml", text), NULL, 0,
        "e8\\.yaml:3: generate\\.sampling: 'beam' is not allowed; allowed: greedy, sample");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nrecord: {timings: all}\n", m);
    expect_error(write_tmp("e9.yaml", text), NULL, 0, "allowed: off, step, layer");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nrecord: {flush_seconds: -1}\n", m);
    expect_error(write_tmp("e9s.yaml", text), NULL, 0, "record\\.flush_seconds");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nrecord: {stop_grace_seconds: 86401}\n", m);
    expect_error(write_tmp("e9g.yaml", text), NULL, 0, "record\\.stop_grace_seconds");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nrecord: {telemetry: 1001}\n", m);
    expect_error(write_tmp("e9t.yaml", text), NULL, 0,
                 "e9t\\.yaml:.*record\\.telemetry = 1001 is out of range; allowed: 0 to 1000");
    snprintf(text, sizeof text,
             "model:\n  synthetic: {}\n  precision: int4\ninput: {tokens: [1]}\n");
    expect_error(
        write_tmp("e10.yaml", text), NULL, 0,
        "e10\\.yaml:3: model\\.precision: 'int4' is not allowed; allowed: fp32, int8w, bf16, fp16, "
        "q8_0, q4_0, q4_1, q4_k");
    /* the block formats: a tp whose share of proj_w's input is not whole 32-column blocks
     * (24 heads of 16: tp 8 gives 48 columns) */
    snprintf(text, sizeof text,
             "model:\n  synthetic: {heads: 24, embd: 384}\n  precision: q8_0\n"
             "parallel: {tp: 8}\ninput: {tokens: [1]}\n");
    expect_error(write_tmp("e10b.yaml", text), NULL, 0,
                 "e10b\\.yaml:.*parallel\\.tp = 8 splits proj_w's input \\(model\\.heads = 24 "
                 "heads of 16\\) into 48 columns per rank, not a whole number of q8_0's 32-column "
                 "blocks; tp values that work: 1, 2, 3, 4, 6, 12");
    /* q4_k's 256-column super-blocks: the default embd of 64 is not one (the 32-column formats
     * would take it), and 8 heads of 64 at tp 4 give 128 columns */
    snprintf(text, sizeof text,
             "model:\n  synthetic: {}\n  precision: q4_k\ninput: {tokens: [1]}\n");
    expect_error(write_tmp("e10d.yaml", text), NULL, 0,
                 "model\\.precision: q4_k stores weight rows in blocks of 256 columns, but "
                 "model\\.embd = 64 .* is not a multiple of 256; allowed with it: fp32, int8w, "
                 "bf16, fp16, q8_0, q4_0, q4_1");
    snprintf(text, sizeof text,
             "model:\n  synthetic: {heads: 8, embd: 512}\n  precision: q4_k\n"
             "parallel: {tp: 4}\ninput: {tokens: [1]}\n");
    expect_error(write_tmp("e10e.yaml", text), NULL, 0,
                 "e10e\\.yaml:.*parallel\\.tp = 4 splits proj_w's input \\(model\\.heads = 8 "
                 "heads of 64\\) into 128 columns per rank, not a whole number of q4_k's "
                 "256-column blocks; tp values that work: 1, 2");
    snprintf(text, sizeof text,
             "model:\n  synthetic: {}\n  kv_cache: ring\ninput: {tokens: [1]}\n");
    expect_error(write_tmp("e11.yaml", text), NULL, 0, "allowed: contiguous, paged");
    snprintf(text, sizeof text,
             "model:\n  synthetic: {}\n  kv_dtype: fp8\ninput: {tokens: [1]}\n");
    expect_error(write_tmp("e11b.yaml", text), NULL, 0,
                 "e11b\\.yaml:3: model\\.kv_dtype: 'fp8' is not allowed; allowed: auto, fp32, "
                 "bf16, fp16, int8");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nbench: {iterations: 0}\n", m);
    expect_error(write_tmp("e12.yaml", text), NULL, 0,
                 "e12\\.yaml:3: bench\\.iterations = 0 is out of range; allowed: 1 to");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\ngenerate: {top_k: 1000}\n", m);
    expect_error(write_tmp("e13.yaml", text), NULL, 0,
                 "e13\\.yaml:3: generate\\.top_k = 1000 is more than model\\.vocab = 256");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nmodel: {}\n", m);
    expect_error(write_tmp("e14.yaml", text), NULL, 0,
                 "e14\\.yaml:3: duplicate key 'model' \\(first given on line 1\\)");
    snprintf(text, sizeof text, "model: {checkpoint: nowhere.h5}\ninput: {tokens: [1]}\n");
    expect_error(write_tmp("e15.yaml", text), NULL, 0,
                 "e15\\.yaml:1: model\\.checkpoint: cannot read '.*/nowhere\\.h5'");
}

static void test_overrides(void **state) {
    job j;
    const char *tiny = src_path("jobs/tiny.yaml");
    const char *sets[] = {
        "model.synthetic.layers=4",                           /* nested int */
        "record.out=other run.h5",                            /* string, taken verbatim */
        "input.tokens=[[1,2],[3,4],[5,6]]",                   /* list */
        "parallel.order=pp-tp-dp",          "bench.warmup=3", /* a section the file lacks */
        "generate.temperature=0.25",
    };
    load_ok(&j, tiny, sets, 6);
    assert_int_equal(j.layers, 4);
    assert_string_equal(j.out, "other run.h5");
    assert_int_equal(j.batch, 3);
    assert_int_equal(j.prompt_len, 2);
    assert_int_equal(j.tokens[5], 6);
    assert_string_equal(j.order, "pp-tp-dp");
    assert_int_equal(j.warmup, 3);
    assert_true(j.temperature == 0.25f);
    assert_int_equal(job_key_line(&j, "model.synthetic.layers"), 0); /* set on the command line */
    assert_int_equal(job_key_line(&j, "model.synthetic.heads"), 3);  /* still from the file */
    job_free(&j);

    /* an override of the input source replaces the file's source */
    const char *syn[] = {"input.synthetic={batch: 3, length: 5}"};
    load_ok(&j, tiny, syn, 1);
    assert_int_equal(j.synthetic_input, 1);
    assert_int_equal(j.batch, 3);
    assert_int_equal(j.prompt_len, 5);
    job_free(&j);

    /* a file without a record section gets one */
    const char *path = write_tmp("norec.yaml", "model: {synthetic: {}}\ninput: {tokens: [1, 2]}\n");
    const char *rec[] = {"record.activations=[embed, layer.1.mlp]", "record.timings=layer"};
    load_ok(&j, path, rec, 2);
    assert_int_equal(j.n_activations, 2);
    assert_string_equal(j.activations[1], "layer.1.mlp");
    assert_int_equal(j.timings, TIMINGS_LAYER);
    job_free(&j);

    const char *unknown[] = {"model.foo=1"};
    expect_error(tiny, unknown, 1,
                 "^--set model\\.foo=1: unknown key 'foo' in section 'model'; allowed: synthetic, "
                 "checkpoint, tokenizer, norm, precision, int8_group, quantize_head, kv_cache, "
                 "kv_block, kv_dtype, ln_eps, arch, verify_checksums$");
    const char *unknown2[] = {"model.synthetic.depth=1"};
    expect_error(tiny, unknown2, 1,
                 "^--set model\\.synthetic\\.depth=1: unknown key 'depth' in model\\.synthetic; "
                 "allowed: layers");
    const char *section[] = {"training.lr=1"};
    expect_error(tiny, section, 1, "^--set training\\.lr=1: unknown section 'training'");
    const char *type[] = {"parallel.tp=two"};
    expect_error(tiny, type, 1, "^--set parallel\\.tp=two: parallel\\.tp: expected an integer");
    const char *noeq[] = {"parallel.tp"};
    expect_error(tiny, noeq, 1, "^--set parallel\\.tp: expected SECTION\\.KEY=VALUE");
    const char *badkey[] = {"parallel..tp=1"};
    expect_error(tiny, badkey, 1, "bad key 'parallel\\.\\.tp'");
    const char *through[] = {"model.synthetic.layers.x=1"};
    expect_error(tiny, through, 1, "'model\\.synthetic\\.layers' holds a value, not a section");
    const char *made[] = {"model.norm.x=1"}; /* absent from the file: made a section, refused */
    expect_error(tiny, made, 1,
                 "^--set model\\.norm\\.x=1: model\\.norm: a mapping is not "
                 "allowed; allowed: pre, post$");
    const char *syntax[] = {"input.tokens=[1, 2"};
    expect_error(tiny, syntax, 1, "^--set input\\.tokens=\\[1, 2: YAML syntax error");
    /* checks made after loading point at the --set that caused them */
    const char *ctx[] = {"generate.new_tokens=100"};
    expect_error(tiny, ctx, 1,
                 "^--set generate\\.new_tokens=100: prompt of 4 tokens plus 100 "
                 "new tokens exceeds model\\.ctx = 32$");
    const char *vocab[] = {"model.synthetic.vocab=8"};
    expect_error(tiny, vocab, 1,
                 "/jobs/tiny\\.yaml:7: input: prompt 1 position 3: token id 8 is "
                 "not below model\\.vocab = 8$");
}

/* dump -> load -> dump is a fixed point, and the reloaded job equals the first. */
static void round_trip(const char *path, const char *const *sets, int n_sets) {
    job a, b;
    load_ok(&a, path, sets, n_sets);
    const char *dumped = write_tmp("dump.yaml", a.yaml);
    load_ok(&b, dumped, NULL, 0);
    if (strcmp(a.yaml, b.yaml) != 0) print_error("first:\n%s\nsecond:\n%s\n", a.yaml, b.yaml);
    assert_string_equal(a.yaml, b.yaml);
    char *again = job_dump_string(&b);
    assert_string_equal(again, b.yaml);
    free(again);
    /* the fields, not only the text */
    assert_int_equal(a.layers, b.layers);
    assert_int_equal(a.mlp, b.mlp);
    assert_true(a.seed == b.seed && a.input_seed == b.input_seed && a.sample_seed == b.sample_seed);
    assert_true(a.ln_eps == b.ln_eps && a.temperature == b.temperature);
    assert_int_equal(a.batch, b.batch);
    assert_int_equal(a.prompt_len, b.prompt_len);
    if (a.tokens) assert_memory_equal(a.tokens, b.tokens, sizeof(int32_t) * a.batch * a.prompt_len);
    if (a.text) assert_string_equal(a.text, b.text);
    assert_string_equal(a.checkpoint, b.checkpoint);
    assert_string_equal(a.order, b.order);
    assert_string_equal(a.out, b.out);
    assert_int_equal(a.n_activations, b.n_activations);
    assert_true(a.backend == b.backend && a.comm == b.comm && a.threads == b.threads &&
                a.device == b.device && a.cuda_graphs == b.cuda_graphs &&
                a.allow_tf32 == b.allow_tf32 && a.memory_check == b.memory_check);
    assert_true(a.dp == b.dp && a.tp == b.tp && a.pp == b.pp && a.microbatches == b.microbatches &&
                a.overlap == b.overlap && a.chunks == b.chunks && a.mpi_tuning == b.mpi_tuning);
    assert_true(a.norm == b.norm && a.precision == b.precision && a.kv_cache == b.kv_cache &&
                a.kv_block == b.kv_block);
    assert_true(a.new_tokens == b.new_tokens && a.sampling == b.sampling && a.top_k == b.top_k);
    assert_true(a.warmup == b.warmup && a.iterations == b.iterations && a.timings == b.timings &&
                a.flush_every == b.flush_every && a.flush_seconds == b.flush_seconds &&
                a.stop_grace_seconds == b.stop_grace_seconds && a.telemetry_hz == b.telemetry_hz &&
                a.stall_seconds == b.stall_seconds && a.sched == b.sched);
    job_free(&a);
    job_free(&b);
}

static void test_round_trip(void **state) {
    round_trip(src_path("jobs/tiny.yaml"), NULL, 0);
    round_trip(src_path("jobs/demo.yaml"), NULL, 0);
    const char *sets[] = {"model.precision=int8w",
                          "model.ln_eps=3.3e-7",
                          "backend.kind=cuda",
                          "backend.comm=nccl",
                          "backend.tf32=true",
                          "parallel.overlap=on",
                          "generate.sampling=sample",
                          "generate.temperature=0.1",
                          "generate.seed=18446744073709551615",
                          "input.text=tab\there \"q\" \\ \x01 line\nnext: ü",
                          "record.out=a \"b\".h5"};
    round_trip(src_path("jobs/tiny.yaml"), sets, 11);
    /* a temperature below float's range stays positive, so the resolved job reads back */
    const char *tiny_temperature[] = {"generate.sampling=sample", "generate.temperature=1e-300"};
    round_trip(src_path("jobs/tiny.yaml"), tiny_temperature, 2);
    write_tmp("rt.txt", "1 2\n3 4\n");
    round_trip(write_tmp("rt.yaml", "model: {synthetic: {}}\ninput: {tokens_file: rt.txt}\n"), NULL,
               0);
}

/* input.chat and generate.stop_at_eos / eos_id: read, dumped so the resolved job reads back,
 * and refused where they cannot apply. */
static void test_chat_and_eos_keys(void **state) {
    job j;
    const char *path = write_tmp("chat.yaml", "model: {synthetic: {}}\n"
                                              "input: {text: \"Hi?\", chat: true}\n");
    load_ok(&j, path, NULL, 0);
    assert_int_equal(j.chat, 1);
    assert_int_equal(j.stop_at_eos, -1); /* auto */
    assert_int_equal(j.eos_id_given, -1);
    assert_non_null(strstr(j.yaml, "  chat: true\n"));
    assert_non_null(strstr(j.yaml, "  stop_at_eos: auto\n"));
    job_free(&j);
    const char *sets[] = {"generate.stop_at_eos=false", "generate.eos_id=7"};
    load_ok(&j, path, sets, 2);
    assert_int_equal(j.stop_at_eos, 0);
    assert_int_equal(j.eos_id_given, 7);
    job_free(&j);
    round_trip(path, sets, 2);
    const char *on[] = {"generate.stop_at_eos=true", "input.chat=false"};
    load_ok(&j, path, on, 2);
    assert_int_equal(j.stop_at_eos, 1);
    assert_int_equal(j.chat, 0);
    assert_null(strstr(j.yaml, "chat:"));
    job_free(&j);
    const char *bad[] = {"generate.stop_at_eos=sometimes"};
    expect_error(path, bad, 1, "generate.stop_at_eos: expected auto, true or false");
    const char *neg[] = {"generate.eos_id=-1"};
    expect_error(path, neg, 1, "generate.eos_id");
    const char *not_bool[] = {"input.chat=maybe"};
    expect_error(path, not_bool, 1, "input.chat");
    const char *tokens[] = {"input.tokens=[1, 2]"};
    expect_error(path, tokens, 1,
                 "chat\\.yaml:2: input\\.chat: true renders text .*needs input\\.text or "
                 "input\\.text_file, not input\\.tokens");
}

/* A checkpoint job leaves the shape to the runner, which then validates it. */
static void test_checkpoint_job(void **state) {
    write_tmp("ck.h5", "not really HDF5; only its existence is checked here");
    const char *path =
        write_tmp("ck.yaml", "model:\n  checkpoint: ck.h5\n  precision: fp16\n"
                             "parallel: {tp: 2}\ninput:\n  synthetic: {batch: 2, length: 4}\n"
                             "generate: {new_tokens: 8}\n");
    job j;
    load_ok(&j, path, NULL, 0);
    assert_int_equal(j.synthetic, 0);
    assert_true(j.checkpoint[0] == '/' && strstr(j.checkpoint, "/ck.h5"));
    assert_int_equal(j.layers, 0);
    assert_int_equal(j.synthetic_input, 1);
    assert_null(j.tokens);
    assert_int_equal(job_validate_model(&j), STATUS_BAD_INPUT);
    assert_true(regex_matches("ck\\.yaml:2: model shape unknown", error_message()));
    /* what the runner does after reading the checkpoint's config */
    j.layers = 2, j.heads = 4, j.embd = 32, j.vocab = 50, j.ctx = 11, j.mlp = 128;
    job_fill_synthetic_tokens(&j, j.vocab);
    assert_non_null(j.tokens);
    assert_int_equal(job_validate_model(&j), STATUS_BAD_INPUT);
    assert_true(regex_matches("^.*ck\\.yaml:7: prompt of 4 tokens plus 8 new tokens exceeds "
                              "model\\.ctx = 11$",
                              error_message()));
    j.ctx = 12;
    assert_int_equal(job_validate_model(&j), STATUS_OK);
    j.heads = 3;
    assert_int_equal(job_validate_model(&j), STATUS_BAD_INPUT);
    assert_true(regex_matches("ck\\.yaml:2: model\\.heads = 3 does not divide model\\.embd = 32",
                              error_message()));
    j.heads = 4;
    char *text = job_dump_string(&j);
    assert_non_null(strstr(text, "# from the checkpoint: layers 2, heads 4"));
    assert_non_null(strstr(text, ", kv_heads 4, arch gpt2\n"));
    free(text);
    /* a mixture of experts' routing rides on the same line (report --roofline prices it) */
    j.arch = ARCH_MIXTRAL, j.kv_heads = 2, j.experts = 8, j.experts_top_k = 2;
    text = job_dump_string(&j);
    assert_non_null(strstr(text, ", kv_heads 2, arch mixtral, experts 8, experts_top_k 2, "
                                 "shared_expert_mlp 0\n"));
    free(text);
    j.arch = ARCH_GPT2, j.kv_heads = 0, j.experts = 0, j.experts_top_k = 0;
    round_trip(path, NULL, 0);
    job_free(&j);
}

static void test_free_zeroed(void **state) {
    job j;
    memset(&j, 0, sizeof j);
    job_free(&j);
    job_free(NULL);
    expect_error(src_path("tests/job/does_not_exist.yaml"), NULL, 0,
                 "does_not_exist\\.yaml: cannot open job file");
}

/* Writes text to tmp_dir/sub/name, making sub, and returns the path (valid until the next call). */
static const char *write_tmp_in(const char *sub, const char *name, const char *text) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, sub);
    mkdir(path, 0755); /* may exist already */
    snprintf(path, sizeof path, "%s/%s/%s", tmp_dir, sub, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* A relative path in a job file: the job file's directory first, then the working directory;
 * a --set path: the working directory only. */
static void test_path_fallback(void **state) {
    char cwd[1024], run_dir[600], job_path[600];
    assert_non_null(getcwd(cwd, sizeof cwd));
    snprintf(run_dir, sizeof run_dir, "%s/run", tmp_dir);
    write_tmp_in("run", "only_here.txt", "from the working directory");
    write_tmp_in("run", "both.txt", "both: the working directory's");
    write_tmp_in("jobs", "both.txt", "both: the job directory's");
    snprintf(job_path, sizeof job_path, "%s",
             write_tmp_in("jobs", "fb.yaml",
                          "model: {synthetic: {}}\ninput:\n  text_file: only_here.txt\n"));
    assert_int_equal(chdir(run_dir), 0);
    job j;
    load_ok(&j, job_path, NULL, 0);
    assert_string_equal(j.text, "from the working directory");
    assert_true(strstr(j.text_file, "/run/only_here.txt") != NULL);
    job_free(&j);

    const char *both[] = {"input.text_file=both.txt"};
    write_tmp_in("jobs", "fb2.yaml", "model: {synthetic: {}}\ninput:\n  text_file: both.txt\n");
    snprintf(job_path, sizeof job_path, "%s/jobs/fb2.yaml", tmp_dir);
    load_ok(&j, job_path, NULL, 0); /* the job file's directory wins */
    assert_string_equal(j.text, "both: the job directory's");
    job_free(&j);
    load_ok(&j, job_path, both, 1); /* --set: the working directory */
    assert_string_equal(j.text, "both: the working directory's");
    job_free(&j);

    write_tmp_in("jobs", "fb3.yaml", "model: {synthetic: {}}\ninput:\n  text_file: nowhere.txt\n");
    snprintf(job_path, sizeof job_path, "%s/jobs/fb3.yaml", tmp_dir);
    expect_error(job_path, NULL, 0,
                 "fb3\\.yaml:3: input\\.text_file: cannot read '.*/jobs/nowhere\\.txt' \\(nor "
                 "'.*/run/nowhere\\.txt' in the working directory\\): No such file");
    const char *missing[] = {"input.text_file=nowhere.txt"};
    expect_error(job_path, missing, 1,
                 "^--set input\\.text_file=nowhere\\.txt: input\\.text_file: cannot read "
                 "'.*/run/nowhere\\.txt': No such file");
    assert_int_equal(chdir(cwd), 0);
}

/* A text file that is empty, a directory, a FIFO or holds a NUL is refused at its key. */
static void test_text_file_errors(void **state) {
    write_tmp("empty.txt", "");
    expect_error(write_tmp("te1.yaml", "model: {synthetic: {}}\ninput: {text_file: empty.txt}\n"),
                 NULL, 0, "te1\\.yaml:2: input\\.text_file: '.*/empty\\.txt' is empty");
    char dir[512];
    snprintf(dir, sizeof dir, "%s/a_dir", tmp_dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    expect_error(write_tmp("te2.yaml", "model: {synthetic: {}}\ninput:\n  text_file: a_dir\n"),
                 NULL, 0, "te2\\.yaml:3: input\\.text_file: '.*/a_dir' is a directory");
    char nul[512];
    snprintf(nul, sizeof nul, "%s/nul.txt", tmp_dir);
    FILE *f = fopen(nul, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite("a\0b", 1, 3, f), 3);
    fclose(f);
    expect_error(write_tmp("te3.yaml", "model: {synthetic: {}}\ninput: {text_file: nul.txt}\n"),
                 NULL, 0, "te3\\.yaml:2: input\\.text_file: '.*/nul\\.txt' holds a NUL byte");
    char fifo[512]; /* refused before it is opened: opening would wait for a writer */
    snprintf(fifo, sizeof fifo, "%s/a_fifo", tmp_dir);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    expect_error(write_tmp("te4.yaml", "model: {synthetic: {}}\ninput: {text_file: a_fifo}\n"),
                 NULL, 0,
                 "te4\\.yaml:2: input\\.text_file: '.*/a_fifo' is a FIFO, not a regular file");
    char set[600];
    snprintf(set, sizeof set, "input.text_file=%s/empty.txt", tmp_dir);
    const char *sets[] = {set};
    expect_error(src_path("jobs/tiny.yaml"), sets, 1,
                 "^--set input\\.text_file=.*empty\\.txt: input\\.text_file: '.*' is empty");
}

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Writes tmp_dir/name: a job whose input.tokens holds depth nested opens, then closes. */
static const char *write_deep(const char *name, const char *open, const char *close, int depth) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", tmp_dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("model: {synthetic: {}}\ninput:\n  tokens: ", f);
    for (int i = 0; i < depth; i++)
        fputs(open, f);
    fputs("1", f);
    for (int i = 0; i < depth; i++)
        fputs(close, f);
    fputs("\n", f);
    fclose(f);
    return path;
}

/* Item 7 of issue 14: a file nested 100k levels deep took 40-65 s to be refused, 250k more
 * than 40 s, all inside libyaml's document loader. The depth is now checked as events arrive:
 * refused at the first level past the limit, in well under the bound (generous: the point is
 * the quadratic blow-up, not the machine's speed). */
static void test_depth_limit(void **state) {
    static const char *const shapes[][2] = {{"[", "]"}, {"{a: ", "}"}};
    for (int depth = 100000; depth <= 250000; depth += 150000)
        for (int s = 0; s < 2; s++) {
            const char *path = write_deep("deep.yaml", shapes[s][0], shapes[s][1], depth);
            double t0 = now_seconds();
            expect_error(path, NULL, 0,
                         "deep\\.yaml:3: nesting deeper than 32 levels; a job needs 4");
            double took = now_seconds() - t0;
            if (took >= 10.0) print_error("depth %d %s: %.1f s\n", depth, shapes[s][0], took);
            assert_true(took < 10.0);
        }
    /* 32 levels are allowed: the limit is exact, not a guess */
    expect_error(write_deep("d32.yaml", "[", "]", 29), NULL, 0,
                 "d32\\.yaml:3: input\\.tokens: prompt 0 position 0: expected an integer, got a "
                 "sequence");
    expect_error(write_deep("d33.yaml", "[", "]", 31), NULL, 0,
                 "d33\\.yaml:3: nesting deeper than 32 levels");
    /* through an alias, the copy counts its own depth */
    char text[2048] = "model: {synthetic: {}}\ninput: {tokens: [1]}\nx: &a ";
    for (int i = 0; i < 20; i++)
        strcat(text, "[");
    for (int i = 0; i < 20; i++)
        strcat(text, "]");
    strcat(text, "\ny: ");
    for (int i = 0; i < 20; i++)
        strcat(text, "[");
    strcat(text, "*a");
    for (int i = 0; i < 20; i++)
        strcat(text, "]");
    strcat(text, "\n");
    expect_error(write_tmp("dalias.yaml", text), NULL, 0,
                 "dalias\\.yaml:4: nesting deeper than 32 levels \\(through an alias\\)");
}

/* The other limits of job_tree.h, each refused with its number and at its line. */
static void test_size_limits(void **state) {
    /* more bytes than the file limit: refused from its size, before it is read */
    char path[512];
    snprintf(path, sizeof path, "%s/big.yaml", tmp_dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("model: {synthetic: {}}\ninput: {tokens: [1]}\n# ", f);
    for (long i = 0; i < (17L << 20) / 64; i++)
        fputs("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", f);
    fputs("\n", f);
    fclose(f);
    double t0 = now_seconds();
    expect_error(path, NULL, 0,
                 "big\\.yaml: the job file is [0-9]+ bytes, more than the limit of 16 MiB");
    assert_true(now_seconds() - t0 < 10.0);
    /* a billion laughs: nine levels of ten aliases each */
    char text[4096] = "model: {synthetic: {}}\ninput: {tokens: [1]}\nl0: &l0 [x, x, x, x, x, x, x, "
                      "x, x, x]\n";
    for (int i = 1; i <= 9; i++) {
        char line[256];
        snprintf(line, sizeof line,
                 "l%d: &l%d [*l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, *l%d, "
                 "*l%d, *l%d]\n",
                 i, i, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1, i - 1);
        strcat(text, line);
    }
    t0 = now_seconds();
    expect_error(write_tmp("laughs.yaml", text), NULL, 0,
                 "laughs\\.yaml:[0-9]+: more than 1000000 YAML nodes");
    assert_true(now_seconds() - t0 < 10.0);
    /* one mapping with more keys than any section could hold */
    char *wide = malloc(16384);
    assert_non_null(wide);
    snprintf(wide, 16384, "model: {synthetic: {}}\ninput: {tokens: [1]}\nx: {");
    for (int i = 0; i < 300; i++)
        snprintf(wide + strlen(wide), 64, "k%d: 1, ", i);
    strcat(wide, "}\n");
    expect_error(write_tmp("keys.yaml", wide), NULL, 0,
                 "keys\\.yaml:3: more than 256 keys in one mapping");
    snprintf(wide, 16384, "model: {synthetic: {}}\ninput: {tokens: [1]}\nx: [");
    for (int i = 0; i < 70; i++)
        snprintf(wide + strlen(wide), 64, "&a%d 1, ", i);
    strcat(wide, "]\n");
    expect_error(write_tmp("anchors.yaml", wide), NULL, 0,
                 "anchors\\.yaml:3: more than 64 anchors");
    wide[0] = '\0';
    for (int i = 0; i < 20; i++)
        snprintf(wide + strlen(wide), 64, "%%TAG !t%d! tag:x%d:\n", i, i);
    strcat(wide, "---\nmodel: {synthetic: {}}\ninput: {tokens: [1]}\n");
    expect_error(write_tmp("tags.yaml", wide), NULL, 0,
                 "tags\\.yaml:17: more than 16 YAML directives");
    free(wide);
    /* a few directives, an anchor and an alias are still plain YAML */
    job j;
    load_ok(&j,
            write_tmp("fine.yaml", "%YAML 1.1\n---\nmodel: {synthetic: &s {layers: 2}}\n"
                                   "input: {tokens: [&one 1, *one, 2]}\n"),
            NULL, 0);
    assert_int_equal(j.prompt_len, 3);
    assert_int_equal(j.tokens[1], 1);
    job_free(&j);
}

/* Item 14 of issue 14: values are read as YAML says, never leniently. */
static void test_strict_values(void **state) {
    const char *m = "model: {synthetic: {}}\n";
    char text[512];
    /* an explicit !!str is a string, as a quoted value is */
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nparallel: {tp: !!str 4}\n", m);
    expect_error(write_tmp("s1.yaml", text), NULL, 0,
                 "s1\\.yaml:3: parallel\\.tp: expected an integer, got the string '4'");
    snprintf(text, sizeof text, "%sinput: {tokens: [!!str 4]}\n", m);
    expect_error(write_tmp("s2.yaml", text), NULL, 0,
                 "s2\\.yaml:2: input\\.tokens: prompt 0 position 0: expected an integer, got the "
                 "string '4'");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\ngenerate: {seed: !!str 4}\n", m);
    expect_error(write_tmp("s3.yaml", text), NULL, 0,
                 "s3\\.yaml:3: generate\\.seed: expected an integer from 0 to 2\\^64-1, got the "
                 "string '4'");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\ngenerate: {temperature: ! 0.5}\n", m);
    expect_error(write_tmp("s4.yaml", text), NULL, 0,
                 "s4\\.yaml:3: generate\\.temperature: expected a number, got the string '0\\.5'");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nbench: {roofline: !!str true}\n", m);
    expect_error(write_tmp("s5.yaml", text), NULL, 0,
                 "s5\\.yaml:3: bench\\.roofline: expected true or false, got the string 'true'");
    /* a !!float is not an int; tags YAML does not define here are refused */
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nparallel: {tp: !!float 2}\n", m);
    expect_error(write_tmp("s6.yaml", text), NULL, 0,
                 "s6\\.yaml:3: parallel\\.tp: expected an integer, got '2' \\(tagged !!float\\)");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nparallel: {tp: !!binary 2}\n", m);
    expect_error(write_tmp("s7.yaml", text), NULL, 0,
                 "s7\\.yaml:3: the tag '!!binary' is not allowed here");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nrecord: {out: \"a\\0b.h5\"}\n", m);
    expect_error(write_tmp("s8.yaml", text), NULL, 0, "s8\\.yaml:3: a value holds a NUL character");
    /* the tags that agree with the key are fine: !!int "6" is the integer 6 */
    job j;
    snprintf(text, sizeof text,
             "%sinput: {tokens: [!!int 5, !!int \"6\"]}\ngenerate: {temperature: !!float 1}\n"
             "bench: {roofline: !!bool false}\nrecord: {out: !!str 7}\n",
             m);
    load_ok(&j, write_tmp("s9.yaml", text), NULL, 0);
    assert_int_equal(j.tokens[1], 6);
    assert_true(j.temperature == 1.0f);
    assert_string_equal(j.out, "7");
    job_free(&j);

    /* a leading zero: YAML 1.1 reads 010 as 8, a decimal reading gives 10: refused */
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nparallel: {tp: 010}\n", m);
    expect_error(write_tmp("z1.yaml", text), NULL, 0,
                 "z1\\.yaml:3: parallel\\.tp: '010' has a leading zero, which YAML 1\\.1 reads as "
                 "octal; write the number without it");
    snprintf(text, sizeof text, "%sinput: {tokens: [1, -07]}\n", m);
    expect_error(write_tmp("z2.yaml", text), NULL, 0,
                 "z2\\.yaml:2: input\\.tokens: prompt 0 position 1: '-07' has a leading zero");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\ngenerate: {seed: 00}\n", m);
    expect_error(write_tmp("z3.yaml", text), NULL, 0,
                 "z3\\.yaml:3: generate\\.seed: '00' has a leading zero");
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nbench: {duration: 010}\n", m);
    expect_error(write_tmp("z4.yaml", text), NULL, 0,
                 "z4\\.yaml:3: bench\\.duration: '010' has a leading zero");
    const char *set[] = {"parallel.tp=+02"};
    expect_error(src_path("jobs/tiny.yaml"), set, 1,
                 "^--set parallel\\.tp=\\+02: parallel\\.tp: '\\+02' has a leading zero");
    /* zero itself, and decimals, are not leading zeros */
    snprintf(text, sizeof text,
             "%sinput: {tokens: [0, 10, 100]}\ngenerate: {seed: 0, temperature: 0.05}\n"
             "bench: {duration: 0.5}\n",
             m);
    load_ok(&j, write_tmp("z5.yaml", text), NULL, 0);
    assert_int_equal(j.tokens[0], 0);
    assert_int_equal(j.tokens[2], 100);
    assert_true(j.temperature == 0.05f && j.duration == 0.5f);
    job_free(&j);
    /* hex floats (strtod reads them, YAML does not) are not numbers */
    snprintf(text, sizeof text, "%sinput: {tokens: [1]}\nbench: {duration: 0x1p3}\n", m);
    expect_error(write_tmp("z6.yaml", text), NULL, 0,
                 "z6\\.yaml:3: bench\\.duration: expected a number, got '0x1p3'");
}

/* Item 13 of issue 14: each message names the right place and the real allowed range. */
static void test_messages(void **state) {
    const char *tiny = src_path("jobs/tiny.yaml");
    /* floats: the whole range, upper bound included (was "allowed: > -1") */
    const char *rate[] = {"bench.arrival_rate=1e300"};
    expect_error(tiny, rate, 1,
                 "^--set bench\\.arrival_rate=1e300: bench\\.arrival_rate = 1e300 is out of "
                 "range; allowed: 0 \\(off\\), or > 0 and <= 3e\\+38$");
    const char *negative[] = {"bench.arrival_rate=-2"};
    expect_error(tiny, negative, 1,
                 "bench\\.arrival_rate = -2 is out of range; allowed: 0 \\(off\\)");
    const char *eps[] = {"model.ln_eps=1e39"};
    expect_error(tiny, eps, 1,
                 "model\\.ln_eps = 1e39 is out of range; allowed: > 0 and <= 3e\\+38$");
    /* ints: both ends, also past INT_MAX and past 64 bits (was "allowed: >= 0") */
    const char *flush[] = {"record.flush_every=3000000000"};
    expect_error(tiny, flush, 1,
                 "record\\.flush_every = 3000000000 is out of range; allowed: 0 to 2147483647$");
    const char *huge[] = {"record.flush_every=99999999999999999999999"};
    expect_error(tiny, huge, 1,
                 "record\\.flush_every = 99999999999999999999999 is out of range; allowed: 0 to "
                 "2147483647$");
    /* a byte that is not UTF-8 is reported at its own line (was line 1) */
    expect_error(write_tmp("u1.yaml", "model:\n  synthetic: {}\ninput: {tokens: [1]}\n"
                                      "record: {out: caf\xe9.h5}\n"),
                 NULL, 0,
                 "u1\\.yaml:4: invalid trailing UTF-8 octet at byte offset 62; a job file "
                 "is UTF-8 text");
    expect_error(write_tmp("u2.yaml", "model:\n  synthetic: {}\r\ninput: {tokens: [1]}\r\n\r\n"
                                      "# \x01\n"),
                 NULL, 0, "u2\\.yaml:5: control characters are not allowed at byte offset 50");
    /* a directory as the job file (was "YAML syntax error: input error") */
    char dir[512];
    snprintf(dir, sizeof dir, "%s/job_dir", tmp_dir);
    assert_int_equal(mkdir(dir, 0755), 0);
    expect_error(dir, NULL, 0, "job_dir: cannot open job file: it is a directory, not a file$");
    /* a directory as the tokens file (was "holds no prompts") */
    char set[600];
    snprintf(set, sizeof set, "input.tokens_file=%s", dir);
    const char *sets[] = {set};
    expect_error(tiny, sets, 1,
                 "^--set input\\.tokens_file=.*/job_dir: input\\.tokens_file: '.*/job_dir' is a "
                 "directory, not a file");
    /* a sweep point's value is reported as the --sweep that gave it (was --set) */
    const char *sweep[] = {"--sweep parallel.tp=x"};
    expect_error(tiny, sweep, 1, "^--sweep parallel\\.tp=x: parallel\\.tp: expected an integer");
    const char *sweep_ctx[] = {"--sweep generate.new_tokens=100"};
    expect_error(tiny, sweep_ctx, 1,
                 "^--sweep generate\\.new_tokens=100: prompt of 4 tokens plus 100 new tokens");
    /* bytes of a binary tokens file are escaped, never echoed raw */
    char bin[512];
    snprintf(bin, sizeof bin, "%s/bin.txt", tmp_dir);
    FILE *f = fopen(bin, "wb");
    assert_non_null(f);
    fputs("1 2\n\x1b[31m\xff 3\n", f);
    fclose(f);
    expect_error(write_tmp("tb.yaml", "model: {synthetic: {}}\ninput: {tokens_file: bin.txt}\n"),
                 NULL, 0, "bin\\.txt:2: '\\\\x1B\\[31m\\\\xFF' is not a token id");
    assert_null(strchr(error_message(), '\x1b'));
    /* and control characters of a YAML value too */
    expect_error(write_tmp("esc.yaml", "model: {synthetic: {}}\ninput: {tokens: [1]}\n"
                                       "parallel: {tp: \"\\e[2J\"}\n"),
                 NULL, 0,
                 "esc\\.yaml:3: parallel\\.tp: expected an integer, got the string "
                 "'\\\\x1B\\[2J'");
    /* a NUL byte in a tokens file is refused at its line (it silently ended the line) */
    snprintf(bin, sizeof bin, "%s/nul.txt", tmp_dir);
    f = fopen(bin, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite("1 2\n3 4\n5\0 6\n", 1, 13, f), 13);
    fclose(f);
    expect_error(write_tmp("tn.yaml", "model: {synthetic: {}}\ninput: {tokens_file: nul.txt}\n"),
                 NULL, 0, "nul\\.txt:3: a NUL byte at column 2; a tokens file is text");
}

/* Text that reaches a job without passing libyaml (a verbatim --set value, input.text_file)
 * must be UTF-8, or the resolved job, written back as YAML, would not load again (found by
 * tests/fuzz/fuzz_job.c); code points YAML refuses raw are escaped in the dump. */
static void test_text_round_trip(void **state) {
    const char *tiny = src_path("jobs/tiny.yaml");
    const char *bad_text[] = {"input.text=caf\xe9!"};
    expect_error(tiny, bad_text, 1,
                 "^--set input\\.text=caf.!: the value is not UTF-8 text \\(a bad byte 0xE9 at "
                 "offset 3\\)$");
    const char *bad_out[] = {"record.out=\xff.h5"};
    expect_error(tiny, bad_out, 1, "^--set record\\.out=.*: the value is not UTF-8 text");
    char path[512];
    snprintf(path, sizeof path, "%s/latin1.txt", tmp_dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("line one\ncaf\xe9\n", f);
    fclose(f);
    expect_error(write_tmp("l1.yaml", "model: {synthetic: {}}\ninput: {text_file: latin1.txt}\n"),
                 NULL, 0,
                 "l1\\.yaml:2: input\\.text_file: '.*/latin1\\.txt' is not UTF-8 text: line 2 has "
                 "the bad byte 0xE9 \\(offset 12\\)");
    /* C1 controls, NEL, LS, PS, BOM and U+FFFE: from YAML escapes or a verbatim --set, all
     * survive dump -> load -> dump */
    const char *sets[] = {"input.text=a\xc2\x85"
                          "b\xe2\x80\xa8"
                          "c\xef\xbb\xbf\xc2\x9f\xe2\x80\xa9\xef\xbf\xbe\xc3\xa9"};
    round_trip(tiny, sets, 1);
    round_trip(write_tmp("esc_rt.yaml", "model: {synthetic: {}}\ninput:\n  text: "
                                        "\"\\x80\\x9f\\N\\L\\P\\uFEFF\\uFFFE\\x01 \\u00e9\"\n"),
               NULL, 0);
    job j;
    load_ok(&j, write_tmp("esc_rt2.yaml", "model: {synthetic: {}}\ninput:\n  text: \"\\N\\x80\"\n"),
            NULL, 0);
    assert_string_equal(j.text, "\xc2\x85\xc2\x80");
    assert_non_null(strstr(j.yaml, "text: \"\\u0085\\u0080\""));
    job_free(&j);
}

/* Item 8 of issue 14: a FIFO with no writer as the job file or the tokens file blocked
 * forever; now refused before it is opened. The alarm turns a hang into a failure. */
static void test_fifo_inputs(void **state) {
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/job_fifo.yaml", tmp_dir);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    alarm(20);
    expect_error(fifo, NULL, 0,
                 "job_fifo\\.yaml: cannot open job file: it is a FIFO, not a "
                 "regular file$");
    snprintf(fifo, sizeof fifo, "%s/tokens_fifo", tmp_dir);
    assert_int_equal(mkfifo(fifo, 0644), 0);
    expect_error(
        write_tmp("tf_fifo.yaml", "model: {synthetic: {}}\ninput:\n  tokens_file: tokens_fifo\n"),
        NULL, 0,
        "tf_fifo\\.yaml:3: input\\.tokens_file: '.*/tokens_fifo' is a FIFO, not a "
        "regular file");
    alarm(0);
    expect_error(write_tmp("tf_dev.yaml", "model: {synthetic: {}}\ninput:\n"
                                          "  tokens_file: /dev/null\n"),
                 NULL, 0,
                 "tf_dev\\.yaml:3: input\\.tokens_file: '/dev/null' is a character device");
}

/* A preset fills the shape, keys beside it override wherever they are written, and the Llama
 * keys resolve: kv_heads defaults to heads, the head is untied, rope_scaling keys default to
 * Llama 3.1's. */
/* model.int8_group, model.quantize_head and backend.cpu_isa: values, defaults, the dump, and
 * each refusal naming the key and what is allowed. */
static void test_precision_and_isa_keys(void **state) {
    (void)state;
    const char *tiny = src_path("jobs/tiny.yaml");
    job j;
    load_ok(&j, tiny, NULL, 0);
    assert_int_equal(j.int8_group, 0);
    assert_int_equal(j.quantize_head, -1); /* auto */
    assert_int_equal(j.cpu_isa, 0);        /* auto */
    assert_non_null(strstr(j.yaml, "  int8_group: 0\n  quantize_head: auto\n"));
    assert_non_null(strstr(j.yaml, "  cpu_isa: auto\n"));
    job_free(&j);
    const char *set[] = {"model.precision=int8w", "model.int8_group=128",
                         "model.quantize_head=true", "backend.cpu_isa=avx2"};
    load_ok(&j, tiny, set, 4);
    assert_int_equal(j.int8_group, 128);
    assert_int_equal(j.quantize_head, 1);
    assert_string_equal(job_cpu_isa_names()[j.cpu_isa], "avx2");
    assert_non_null(strstr(j.yaml, "  int8_group: 128\n  quantize_head: true\n"));
    assert_non_null(strstr(j.yaml, "  cpu_isa: avx2\n"));
    job_free(&j);
    const char *off[] = {"model.precision=bf16", "model.quantize_head=false"};
    load_ok(&j, tiny, off, 2);
    assert_int_equal(j.quantize_head, 0);
    job_free(&j);

    const char *odd[] = {"model.precision=int8w", "model.int8_group=48"};
    expect_error(tiny, odd, 2,
                 "^--set model\\.int8_group=48: model\\.int8_group: 48 is not a multiple of 32 .*"
                 "allowed: 0 \\(one scale per row\\), 32, 64, 96, 128, \\.\\.\\.$");
    const char *fp32[] = {"model.int8_group=32"};
    expect_error(tiny, fp32, 1,
                 "model\\.int8_group needs model\\.precision: int8w \\(it is "
                 "fp32\\); allowed with fp32: 0$");
    const char *head[] = {"model.quantize_head=maybe"};
    expect_error(tiny, head, 1,
                 "model\\.quantize_head: expected auto, true or false, got 'maybe'$");
    const char *isa[] = {"backend.cpu_isa=avx9"};
    expect_error(tiny, isa, 1,
                 "backend\\.cpu_isa: 'avx9' is not allowed; allowed: auto, scalar, avx2, avx512, "
                 "avx512_vnni, avx512_bf16, amx_bf16$");
    const char *cuda_group[] = {"model.precision=int8w", "model.int8_group=32",
                                "backend.kind=cuda"};
    expect_error(tiny, cuda_group, 3,
                 "model\\.int8_group: 32 needs backend\\.kind: cpu .*allowed with cuda: 0$");
    const char *cuda_isa[] = {"backend.cpu_isa=avx2", "backend.kind=cuda"};
    expect_error(tiny, cuda_isa, 2,
                 "backend\\.cpu_isa: avx2 chooses the cpu backend's kernels; allowed with "
                 "backend\\.kind cuda: auto$");
}

static void test_presets_and_llama_keys(void **state) {
    (void)state;
    job j;
    const char *path = write_tmp("preset.yaml", "model:\n  synthetic:\n    layers: 2\n"
                                                "    preset: llama3-8b\ninput:\n  tokens: [1]\n");
    const char *sets[] = {"model.synthetic.ctx=64"};
    load_ok(&j, path, sets, 1);
    assert_int_equal(j.arch, ARCH_LLAMA);
    assert_int_equal(j.layers, 2); /* written before the preset, still overrides it */
    assert_int_equal(j.ctx, 64);
    assert_int_equal(j.heads, 32);
    assert_int_equal(j.kv_heads, 8);
    assert_int_equal(j.embd, 4096);
    assert_int_equal(j.mlp, 14336);
    assert_int_equal(j.vocab, 128256);
    assert_true(j.rope_theta == 500000.0f);
    assert_int_equal(j.tie_embeddings, 0);
    assert_int_equal(j.rope_scaling, 0);
    job_free(&j);

    /* heads given after a preset whose kv_heads no longer divides them: kv_heads = heads */
    const char *heads[] = {"model.synthetic.heads=6", "model.synthetic.embd=48"};
    load_ok(&j, path, heads, 2);
    assert_int_equal(j.kv_heads, 6);
    job_free(&j);

    path = write_tmp("llama.yaml", "model:\n  arch: llama\n  synthetic:\n    heads: 8\n"
                                   "    rope_scaling: {factor: 2}\ninput:\n  tokens: [1]\n");
    load_ok(&j, path, NULL, 0);
    assert_int_equal(j.kv_heads, 8);
    assert_int_equal(j.tie_embeddings, 0);
    assert_true(j.rope_theta == 10000.0f);
    assert_int_equal(j.rope_scaling, 1);
    assert_true(j.rope_factor == 2.0f && j.rope_low_freq_factor == 1.0f);
    assert_true(j.rope_high_freq_factor == 4.0f && j.rope_original_ctx == 8192);
    job_free(&j);

    const char *off[] = {"model.synthetic.preset=llama3.1-405b",
                         "model.synthetic.rope_scaling=null"};
    load_ok(&j, path, off, 2);
    assert_int_equal(j.heads, 8); /* the file's heads override the preset's 128 */
    assert_int_equal(j.rope_scaling, 0);
    job_free(&j);

    /* a GPT-2 model: kv_heads = heads and the tied head, with no Llama key given */
    load_ok(&j,
            write_tmp("gpt2.yaml", "model:\n  synthetic: {preset: gpt2-124m}\n"
                                   "input:\n  tokens: [1]\n"),
            NULL, 0);
    assert_int_equal(j.arch, ARCH_GPT2);
    assert_int_equal(j.kv_heads, 12);
    assert_int_equal(j.tie_embeddings, 1);
    job_free(&j);

    /* q4_k takes the dense presets (widths of whole 256-column super-blocks); Qwen1.5-MoE's
     * 1408-wide experts are 44 blocks of 32 but not whole 256s, so only the 32-column formats */
    const char *q4k[] = {"model.precision=q4_k"};
    const char *dense[] = {"gpt2-124m", "llama2-7b", "llama3-70b", "mistral-7b", "qwen2-7b"};
    for (size_t i = 0; i < sizeof dense / sizeof dense[0]; i++) {
        char text[160];
        snprintf(text, sizeof text, "model:\n  synthetic: {preset: %s}\ninput:\n  tokens: [1]\n",
                 dense[i]);
        load_ok(&j, write_tmp("q4k.yaml", text), q4k, 1);
        assert_int_equal(j.precision, PRECISION_Q4_K);
        job_free(&j);
    }
    expect_error(write_tmp("q4k-moe.yaml", "model:\n  synthetic: {preset: qwen1.5-moe-a2.7b}\n"
                                           "input:\n  tokens: [1]\n"),
                 q4k, 1,
                 "model\\.precision: q4_k stores weight rows in blocks of 256 columns, but the "
                 "MLP width 1408 .* allowed with it: fp32, int8w, bf16, fp16, q8_0, q4_0, q4_1");
}

/* model.kv_dtype: auto follows the weights (bf16 and fp16 their own type, fp32 and int8w fp32),
 * a named type is kept whatever the weights, and the dump records the resolved type. */
static void test_kv_dtype(void **state) {
    (void)state;
    const struct {
        const char *set[2];
        kv_dtype_kind want;
        int is_auto;
    } cases[] = {{{"model.precision=fp32", NULL}, KV_DTYPE_FP32, 1},
                 {{"model.precision=int8w", NULL}, KV_DTYPE_FP32, 1},
                 {{"model.precision=bf16", NULL}, KV_DTYPE_BF16, 1},
                 {{"model.precision=fp16", "model.kv_dtype=auto"}, KV_DTYPE_FP16, 1},
                 {{"model.precision=bf16", "model.kv_dtype=int8"}, KV_DTYPE_INT8, 0},
                 {{"model.precision=fp32", "model.kv_dtype=fp16"}, KV_DTYPE_FP16, 0}};
    const char *path = write_tmp("kv.yaml", "model:\n  synthetic: {}\ninput: {tokens: [1]}\n");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        job j;
        load_ok(&j, path, cases[i].set, cases[i].set[1] ? 2 : 1);
        assert_int_equal(j.kv_dtype, cases[i].want);
        assert_int_equal(j.kv_dtype_auto, cases[i].is_auto);
        char line[32];
        snprintf(line, sizeof line, "  kv_dtype: %s\n", kv_dtype_kind_name(cases[i].want));
        char *dump = job_dump_string(&j);
        assert_non_null(strstr(dump, line));
        free(dump);
        job_free(&j);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_presets_and_llama_keys),
        cmocka_unit_test(test_precision_and_isa_keys),
        cmocka_unit_test(test_tiny_fields),
        cmocka_unit_test(test_demo_synthetic_input),
        cmocka_unit_test(test_synthetic_defaults),
        cmocka_unit_test(test_all_keys),
        cmocka_unit_test(test_backend_scalar),
        cmocka_unit_test(test_input_forms),
        cmocka_unit_test(test_bad_fixtures),
        cmocka_unit_test(test_error_details),
        cmocka_unit_test(test_overrides),
        cmocka_unit_test(test_kv_dtype),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_chat_and_eos_keys),
        cmocka_unit_test(test_checkpoint_job),
        cmocka_unit_test(test_free_zeroed),
        cmocka_unit_test(test_path_fallback),
        cmocka_unit_test(test_text_file_errors),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_size_limits),
        cmocka_unit_test(test_strict_values),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_fifo_inputs),
        cmocka_unit_test(test_text_round_trip),
    };
    return cmocka_run_group_tests(tests, setup_tmp, teardown_tmp);
}
