/* Unit tests of the bench area: the composite score and accuracy metrics on hand-computed
 * cases, sweep parsing and point file names, the Poisson arrival stream, and the bench job keys. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "base/check.h"
#include "job/job.h"
#include "metrics/score.h"
#include "engine/serve.h"
#include "job/sweep.h"

static void test_score_hand_computed(void **state) {
    (void)state;
    /* run: half the latency (0.4 * 2 = 0.8), 1.5x throughput (0.3 * 1.5 = 0.45),
     * 90% agreement (0.3 * 0.9 = 0.27): 1.52 */
    score_inputs base = {0.2, 1000.0, 1.0}, run = {0.1, 1500.0, 0.9};
    assert_true(fabs(score_composite(&base, &run) - 1.52) < 1e-12);
    assert_true(fabs(score_composite(&base, &base) - 1.0) < 1e-12);
    /* twice as slow, a third of the throughput, full agreement: 0.2 + 0.1 + 0.3 = 0.6 */
    score_inputs slow = {0.4, 1000.0 / 3.0, 1.0};
    assert_true(fabs(score_composite(&base, &slow) - 0.6) < 1e-12);
    score_inputs broken = {0.0, 1.0, 1.0};
    assert_true(isnan(score_composite(&base, &broken)));
    score_inputs unknown = {0.1, 1.0, NAN};
    assert_true(isnan(score_composite(&base, &unknown)));
}

static void test_token_agreement(void **state) {
    (void)state;
    /* 2 rows of 2 prompt + 3 generated tokens; prompts differ (not counted), 4 of 6 agree */
    const int32_t a[10] = {1, 2, 10, 11, 12, 3, 4, 20, 21, 22};
    const int32_t b[10] = {9, 9, 10, 11, 99, 3, 4, 20, 98, 22};
    assert_true(fabs(score_token_agreement(a, b, 2, 5, 2) - 4.0 / 6.0) < 1e-12);
    assert_true(isnan(score_token_agreement(a, b, 2, 5, 5)));
}

static void test_logit_error(void **state) {
    (void)state;
    /* one row [0, 0] against [log 3, 0]: p = (1/2, 1/2), q = (3/4, 1/4):
     * KL(p||q) = 1/2 log(2/3) + 1/2 log 2 = 1/2 log(4/3) */
    const float base[4] = {0.0f, 0.0f, 2.0f, -1.0f};
    const float run[4] = {(float)log(3.0), 0.0f, 2.0f, -1.0f};
    double max_rel = 0, kl = 0;
    score_logit_error(base, run, 1, 2, &max_rel, &kl);
    assert_true(fabs(kl - 0.5 * log(4.0 / 3.0)) < 1e-7);
    assert_true(isinf(max_rel) == 0 && fabs(max_rel - log(3.0)) < 1e-6); /* max|base| = 0 */
    /* second row identical: mean over 2 rows halves the KL; max|base| = 2 */
    score_logit_error(base, run, 2, 2, &max_rel, &kl);
    assert_true(fabs(kl - 0.25 * log(4.0 / 3.0)) < 1e-7);
    assert_true(fabs(max_rel - log(3.0) / 2.0) < 1e-6);
}

static void test_sweep(void **state) {
    (void)state;
    sweep s;
    sweep_init(&s);
    assert_int_equal(sweep_add(&s, "input.synthetic.length=128,512,2048"), STATUS_OK);
    assert_int_equal(sweep_add(&s, "record.activations=[embed, logits],[final]"), STATUS_OK);
    assert_int_equal(sweep_points(&s), 6);
    char buf[SWEEP_TEXT_MAX], path[512];
    sweep_override(&s, 2, 0, buf, sizeof buf); /* last axis fastest: point 2 = (512, first) */
    assert_string_equal(buf, "input.synthetic.length=512");
    sweep_override(&s, 2, 1, buf, sizeof buf);
    assert_string_equal(buf, "record.activations=[embed, logits]");
    assert_int_equal(sweep_point_path(&s, 5, "out/run.h5", path, sizeof path), 0);
    assert_string_equal(path, "out/run.input.synthetic.length=2048.record.activations=_final_.h5");
    assert_int_equal(sweep_point_path(&s, 0, "x", path, 20), -1); /* too long */
    assert_int_equal(sweep_add(&s, "input.synthetic.length=1"), STATUS_BAD_INPUT); /* twice */
    assert_int_equal(sweep_add(&s, "nokey"), STATUS_BAD_INPUT);
    assert_int_equal(sweep_add(&s, "a.b=1,,2"), STATUS_BAD_INPUT);
    assert_non_null(strstr(error_message(), "empty value"));
    assert_int_equal(s.n_axes, 2);
    sweep_free(&s);
    sweep_init(&s);
    assert_int_equal(sweep_points(&s), 1);
    assert_int_equal(sweep_point_path(&s, 0, "run.h5", path, sizeof path), 0);
    assert_string_equal(path, "run.h5");
    sweep_free(&s);
}

/* A path key's point is named by the file's stem; other keys keep the value (with '/' as '_').
 * Point files that clash are found. */
static void test_sweep_path_names(void **state) {
    (void)state;
    sweep s;
    sweep_init(&s);
    assert_int_equal(sweep_add(&s, "input.text_file=data/prompts/qa-512.txt,/abs/x/.hidden,"
                                   "story,dir/"),
                     STATUS_OK);
    char path[512];
    assert_int_equal(sweep_point_path(&s, 0, "out/pr.h5", path, sizeof path), 0);
    assert_string_equal(path, "out/pr.input.text_file=qa-512.h5");
    assert_int_equal(sweep_point_path(&s, 1, "pr.h5", path, sizeof path), 0);
    assert_string_equal(path, "pr.input.text_file=.hidden.h5"); /* a leading dot is the name */
    assert_int_equal(sweep_point_path(&s, 2, "pr.h5", path, sizeof path), 0);
    assert_string_equal(path, "pr.input.text_file=story.h5");
    assert_int_equal(sweep_point_path(&s, 3, "pr.h5", path, sizeof path), 0);
    assert_string_equal(path, "pr.input.text_file=dir_.h5"); /* no stem: the whole value */
    sweep_free(&s);
    sweep_init(&s);
    assert_int_equal(sweep_add(&s, "model.checkpoint=ck/gpt2.h5"), STATUS_OK);
    assert_int_equal(sweep_add(&s, "input.tokens_file=data/prompts/qa-128.tokens"), STATUS_OK);
    assert_int_equal(sweep_add(&s, "record.out=a/b.h5"), STATUS_OK); /* not a path key */
    assert_int_equal(sweep_point_path(&s, 0, "r.h5", path, sizeof path), 0);
    assert_string_equal(path,
                        "r.model.checkpoint=gpt2.input.tokens_file=qa-128.record.out=a_b.h5.h5");
    sweep_free(&s);

    char a[] = "p.x=qa.h5", b[] = "p.x=sum.h5", c[] = "p.x=qa.h5";
    char *distinct[] = {a, b}, *clashing[] = {a, b, c};
    long first = -1;
    assert_int_equal(sweep_path_clash(distinct, 2, &first), -1);
    assert_int_equal(sweep_path_clash(clashing, 3, &first), 2);
    assert_int_equal(first, 0);
}

static void test_arrivals(void **state) {
    (void)state;
    static double t[4096], u[4096];
    long n = serve_arrivals(100.0, 20.0, 7, t, 4096);
    /* Poisson(2000): within 5 standard deviations (~224) */
    assert_true(n > 2000 - 224 && n < 2000 + 224);
    for (long i = 0; i < n; i++) {
        assert_true(t[i] >= 0 && t[i] < 20.0);
        if (i) assert_true(t[i] >= t[i - 1]);
    }
    double mean_gap = t[n - 1] / (double)n;
    assert_true(fabs(mean_gap - 0.01) < 0.001);
    assert_int_equal(serve_arrivals(100.0, 20.0, 7, u, 4096), n); /* same seed, same stream */
    assert_memory_equal(t, u, (size_t)n * sizeof(double));
    assert_true(serve_arrivals(100.0, 20.0, 8, u, 4096) != n || memcmp(t, u, 8 * sizeof(double)));
    assert_int_equal(serve_arrivals(100.0, 20.0, 7, u, 10), 10); /* max respected */
    assert_int_equal(serve_arrivals(0.0, 20.0, 7, u, 10), 0);
}

static void test_bench_keys(void **state) {
    (void)state;
    const char *path = TRIPAR_SOURCE_DIR "/tests/bench/small.yaml";
    job j;
    const char *sets[] = {"bench.arrival_rate=12.5", "bench.duration=0.25", "bench.arrival_seed=9"};
    assert_int_equal(job_load(&j, path, sets, 3), STATUS_OK);
    assert_true(j.arrival_rate == 12.5f && j.duration == 0.25f && j.arrival_seed == 9);
    assert_non_null(strstr(j.yaml, "arrival_rate: 12.5\n  duration: 0.25\n  arrival_seed: 9"));
    job_free(&j);
    assert_int_equal(job_load(&j, path, NULL, 0), STATUS_OK);
    assert_true(j.arrival_rate == 0.0f && j.duration == 10.0f); /* off by default */
    job_free(&j);
    const char *bad[] = {"bench.arrival_rate=-2"};
    assert_int_equal(job_load(&j, path, bad, 1), STATUS_BAD_INPUT);
    assert_non_null(strstr(error_message(), "bench.arrival_rate = -2 is out of range"));
    const char *bad_duration[] = {"bench.duration=0"};
    assert_int_equal(job_load(&j, path, bad_duration, 1), STATUS_BAD_INPUT);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_score_hand_computed), cmocka_unit_test(test_token_agreement),
        cmocka_unit_test(test_logit_error),         cmocka_unit_test(test_sweep),
        cmocka_unit_test(test_sweep_path_names),    cmocka_unit_test(test_arrivals),
        cmocka_unit_test(test_bench_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
