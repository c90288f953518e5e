/* End to end on one rank: the engine's logits and greedy tokens against the independent
 * double-precision reference (tests/model/ref_model.c), decode through the KV cache against
 * full recomputation, and the model variants (post-norm, int8w, paged cache, sampling). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <mpi.h>

#include "base/check.h"
#include "cli/run_context.h"
#include "engine/engine.h"
#include "ref_llama.h"
#include "ref_model.h"

typedef struct {
    job j;
    mesh mesh;
    backend be;
    timer tm;
    model m;
    engine e;
} harness;

static char job_path[1024], gpt2_path[1024], llama_path[1024];

static void harness_init(harness *h, const char **overrides, int n) {
    memset(h, 0, sizeof *h);
    int rc = job_load(&h->j, job_path, overrides, n);
    if (rc != 0) fail_msg("job_load: %s", error_message());
    mesh_init(&h->mesh, MPI_COMM_WORLD, 1, 1, 1, "tp-pp-dp");
    mesh_attach_mpi(&h->mesh);
    backend_options opt = {.threads = 1, .max_marks = 1 << 16};
    assert_int_equal(backend_cpu_init(&h->be, &opt), 0);
    timer_init(&h->tm, TIMINGS_LAYER, &h->be, 1 << 15, MPI_COMM_WORLD);
    model_config cfg;
    model_config_from_job(&cfg, &h->j);
    shard_geom g;
    shard_geom_init(&g, &cfg, 1, 0, 1, 0);
    dtype wt = h->j.precision == PRECISION_INT8W ? DTYPE_INT8 : DTYPE_F32;
    model_tensor_table(&h->m, &cfg, &g, wt);
    model_alloc(&h->m, &h->be);
    model_fill_synthetic(&h->m, &h->be, h->j.seed, &h->mesh.axis[AXIS_TP]);
    engine_config ec;
    engine_config_from_job(&ec, &h->j);
    engine_config_use_mesh(&ec, &h->mesh);
    ec.model = &h->m;
    ec.be = &h->be;
    ec.tm = &h->tm;
    engine_init(&h->e, &ec);
    engine_generate(&h->e, 0, 1);
}

static void harness_free(harness *h) {
    engine_free(&h->e);
    model_free(&h->m, &h->be);
    timer_free(&h->tm);
    backend_free(&h->be);
    mesh_free(&h->mesh);
    job_free(&h->j);
}

static const float *prefill_logits(harness *h) {
    for (int p = 0; p < h->e.n_points; p++)
        if (h->e.points[p].kind == ACT_LOGITS) return h->e.points[p].host;
    fail_msg("no logits point");
    return NULL;
}

/* Norm-wise relative error of a float tensor against a double one. */
static double rel_error(const float *a, const double *ref, long n) {
    double diff = 0, mag = 0;
    for (long i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - ref[i]));
        mag = fmax(mag, fabs(ref[i]));
    }
    return diff / (mag > 0 ? mag : 1);
}

/* The last decode step's logits, from the KV cache, against the reference's. int8w quantises
 * attention's output per block, in float here and in double in the reference: an element on a
 * rounding boundary may land on either side, and one such step moved these logits by 0.93%
 * (head_dim 16, when the decode dot products changed their order of summation). The fp32 runs
 * of each shape hold the cache to 1e-4. */
static void check_cached_decode(int prompt, double err, int quantized) {
    const double decode_tol = quantized ? 2e-2 : 1e-4;
    if (err >= decode_tol)
        fail_msg("prompt %d: cached decode logits rel error %.3g >= %g", prompt, err, decode_tol);
}

/* Prefill logits, greedy tokens and the last decode step against the reference. */
static void check_against_reference(const char **overrides, int n, int quantize_ref) {
    harness h;
    harness_init(&h, overrides, n);
    ref_model ref;
    model_config cfg;
    model_config_from_job(&cfg, &h.j);
    ref_model_synthetic(&ref, &cfg, h.j.seed);
    if (quantize_ref) ref_model_quantize_int8(&ref);
    const int T = h.j.prompt_len, N = h.j.new_tokens, V = cfg.vocab, total = T + N;
    const float *logits = prefill_logits(&h);
    double *ref_logits = malloc((size_t)total * V * sizeof(double));
    int32_t *ref_tokens = malloc((size_t)total * sizeof(int32_t));
    float *last = malloc((size_t)V * sizeof(float));
    for (int b = 0; b < h.j.batch; b++) {
        const int32_t *prompt = h.j.tokens + (size_t)b * T;
        ref_model_forward(&ref, prompt, T, ref_logits);
        double err = rel_error(logits + (size_t)b * T * V, ref_logits, (long)T * V);
        /* int8 activation blocks round each value to one of 255 steps: an fp32 difference in
         * the last bit upstream (sgemm's summation order is OpenBLAS's, which differs between
         * the kernels it picks per CPU) can move a value across a step, 3e-3 in the logits
         * measured on a Zen 5 with int8_group 32; without such a crossing they agree to 1e-6 */
        const double prefill_tol = quantize_ref ? 1e-2 : 1e-4;
        if (err >= prefill_tol)
            fail_msg("prompt %d: prefill logits rel error %.3g >= %g", b, err, prefill_tol);

        ref_model_generate(&ref, prompt, T, N, ref_tokens);
        const int32_t *got = h.e.tokens + (size_t)b * total;
        for (int i = 0; i < total; i++)
            if (got[i] != ref_tokens[i])
                fail_msg("prompt %d position %d: engine token %d, reference %d", b, i, got[i],
                         ref_tokens[i]);

        /* The last decode step went through the KV cache; recompute it without one. The
         * step before the last sampled token saw tokens [0, total - 1). The logits buffer
         * holds the last micro-batch's rows. */
        const int last_mb = h.e.split.n_micro - 1, row = b - h.e.split.begin[last_mb];
        if (row < 0) continue;
        ref_model_forward(&ref, got, total - 1, ref_logits);
        h.be.ops->copy_to_host(h.be.ctx, last, h.e.logits + (size_t)row * V,
                               (size_t)V * sizeof(float));
        err = rel_error(last, ref_logits + (size_t)(total - 2) * V, V);
        check_cached_decode(b, err, quantize_ref);
    }
    free(last);
    free(ref_tokens);
    free(ref_logits);
    ref_model_free(&ref);
    harness_free(&h);
}

static void test_pre_norm_matches_reference(void **state) {
    (void)state;
    check_against_reference(NULL, 0, 0);
}

static void test_post_norm_matches_reference(void **state) {
    (void)state;
    const char *o[] = {"model.norm=post"};
    check_against_reference(o, 1, 0);
}

static void test_int8w_matches_quantized_reference(void **state) {
    (void)state;
    const char *o[] = {"model.precision=int8w"};
    check_against_reference(o, 1, 1);
}

/* int8 weights scaled per group of 32 columns (fc2's input splits in units of 32, so its
 * groups stay 32 wide; the attention output's are a head wide), and the tied head kept as an
 * int8 copy of wte (quantize_head), its input blocked as the other products'. */
static void test_int8w_groups_and_quantized_head(void **state) {
    (void)state;
    const char *g[] = {"model.precision=int8w", "model.int8_group=32"};
    check_against_reference(g, 2, 1);
    const char *h[] = {"model.precision=int8w", "model.quantize_head=true"};
    check_against_reference(h, 2, 1);
    const char *both[] = {"model.precision=int8w", "model.int8_group=64",
                          "model.quantize_head=true", "parallel.microbatches=3"};
    check_against_reference(both, 4, 1);
}

/* model_int8_layout on hand-worked shapes (docs/kernels.md, "Where int8 groups and activation
 * blocks may fall"), and the MLP split in whole units. */
static void test_int8_layout_rule(void **state) {
    (void)state;
    model_config c = {.layers = 12, .heads = 12, .embd = 768, .mlp = 3072, .vocab = 50257};
    const struct {
        int embd, heads, mlp, head_dim, group;    /* the shape, int8_group */
        int unit, whole[2], heads_l[2], mlp_l[2]; /* expected mlp unit and {group, act_block} */
    } cases[] = {
        {768, 12, 3072, 0, 0, 32, {0, 32}, {0, 32}, {0, 32}},            /* GPT-2 124M */
        {768, 12, 3072, 0, 128, 128, {128, 32}, {64, 32}, {128, 32}},    /* head 64 wide */
        {256, 16, 1024, 0, 0, 32, {0, 32}, {0, 0}, {0, 32}},             /* head_dim 16 */
        {96, 24, 80, 0, 0, 1, {0, 32}, {0, 0}, {0, 0}},                  /* factor_llama */
        {4096, 32, 11008, 0, 128, 128, {128, 32}, {128, 32}, {128, 32}}, /* Llama 2 7B */
        {4096, 32, 11008, 0, 512, 32, {512, 32}, {128, 32}, {32, 32}},   /* 11008 % 512 != 0 */
        {5120, 32, 14336, 128, 64, 64, {64, 32}, {64, 32}, {64, 32}},    /* head_dim given */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        c.embd = cases[i].embd, c.heads = cases[i].heads, c.mlp = cases[i].mlp;
        c.head_dim = cases[i].head_dim, c.int8_group = cases[i].group;
        c.mlp_unit = cases[i].unit; /* model_config_from_job's rule, checked below */
        const int8_layout w = model_int8_layout(&c, MATRIX_INPUT_WHOLE);
        const int8_layout h = model_int8_layout(&c, MATRIX_INPUT_HEADS);
        const int8_layout m = model_int8_layout(&c, MATRIX_INPUT_MLP);
        assert_int_equal(w.group, cases[i].whole[0]);
        assert_int_equal(w.act_block, cases[i].whole[1]);
        assert_int_equal(h.group, cases[i].heads_l[0]);
        assert_int_equal(h.act_block, cases[i].heads_l[1]);
        assert_int_equal(m.group, cases[i].mlp_l[0]);
        assert_int_equal(m.act_block, cases[i].mlp_l[1]);
        /* the unit itself, from a job */
        job jj;
        memset(&jj, 0, sizeof jj);
        jj.embd = c.embd, jj.heads = c.heads, jj.mlp = c.mlp, jj.layers = 1, jj.vocab = 2;
        jj.precision = PRECISION_INT8W, jj.int8_group = cases[i].group, jj.quantize_head = -1;
        model_config from_job;
        model_config_from_job(&from_job, &jj);
        assert_int_equal(from_job.mlp_unit, cases[i].unit);
        /* every tp that divides the heads splits the MLP on unit boundaries */
        for (int tp = 1; tp <= c.heads; tp++) {
            if (c.heads % tp) continue;
            for (int r = 0; r < tp; r++) {
                shard_geom g;
                shard_geom_init(&g, &from_job, tp, r, 1, 0);
                assert_int_equal(g.mlp_begin % cases[i].unit, 0);
                assert_int_equal(g.mlp_local % cases[i].unit, 0);
            }
        }
    }
    /* fp32 and bf16 keep single columns and no head copy */
    job f;
    memset(&f, 0, sizeof f);
    f.embd = 768, f.heads = 12, f.mlp = 3072, f.layers = 1, f.vocab = 2, f.quantize_head = -1;
    model_config cf;
    model_config_from_job(&cf, &f);
    assert_int_equal(cf.mlp_unit, 1);
    assert_int_equal(cf.quantize_head, 0);
}

static void test_microbatches_and_paged_cache(void **state) {
    (void)state;
    const char *o[] = {"model.kv_cache=paged", "model.kv_block=3", "parallel.microbatches=2"};
    check_against_reference(o, 3, 0);
}

/* Allocation counting: the test binary is linked with -Wl,--wrap for the allocator, so every
 * call from tripar's own code (the static core library) passes through here. */
static long allocations;
static int counting;
void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n) {
    allocations += counting;
    return __real_malloc(n);
}
void *__wrap_calloc(size_t n, size_t size) {
    allocations += counting;
    return __real_calloc(n, size);
}
void *__wrap_realloc(void *p, size_t n) {
    allocations += counting;
    return __real_realloc(p, n);
}

/* After the first generation has sized every scratch buffer, a whole further generation
 * (prefill and every decode step, greedy and sampled, contiguous and paged) allocates nothing. */
static void check_no_allocation(const char **overrides, int n) {
    harness h;
    harness_init(&h, overrides, n); /* runs one generation */
    allocations = 0;
    counting = 1;
    engine_generate(&h.e, 1, 0);
    counting = 0;
    if (allocations != 0) fail_msg("a generation allocated %ld times", allocations);
    harness_free(&h);
}

static void test_generation_allocates_nothing(void **state) {
    (void)state;
    /* the wrap is live: an allocation by the core library is counted */
    allocations = 0;
    counting = 1;
    void *probe = xmalloc(16);
    counting = 0;
    free(probe);
    assert_int_equal(allocations, 1);
    check_no_allocation(NULL, 0);
    const char *sampled[] = {"generate.sampling=sample", "generate.top_k=5"};
    check_no_allocation(sampled, 2);
    const char *paged[] = {"model.kv_cache=paged", "model.kv_block=4", "parallel.microbatches=3",
                           "model.precision=int8w"};
    check_no_allocation(paged, 4);
    /* a mixture of experts routes on the host through buffers made at set-up (llama.yaml) */
    snprintf(job_path, sizeof job_path, "%s", llama_path);
    const char *moe[] = {"model.arch=qwen2_moe", "model.synthetic.experts=4",
                         "model.synthetic.shared_expert_mlp=32", "parallel.microbatches=2",
                         "model.precision=int8w"};
    check_no_allocation(moe, 5);
    snprintf(job_path, sizeof job_path, "%s", gpt2_path);
}

static void test_sampling_is_seeded(void **state) {
    (void)state;
    const char *a[] = {"generate.sampling=sample", "generate.top_k=20", "generate.temperature=1.5",
                       "generate.seed=9"};
    const char *b[] = {"generate.sampling=sample", "generate.top_k=20", "generate.temperature=1.5",
                       "generate.seed=10"};
    harness h1, h2, h3;
    harness_init(&h1, a, 4);
    harness_init(&h2, a, 4);
    harness_init(&h3, b, 4);
    size_t n = (size_t)h1.j.batch * h1.e.total_len * sizeof(int32_t);
    assert_memory_equal(h1.e.tokens, h2.e.tokens, n);
    assert_memory_not_equal(h1.e.tokens, h3.e.tokens, n);
    /* top_k = 1 is greedy whatever the seed */
    harness_free(&h1);
    harness_free(&h2);
    harness_free(&h3);
    const char *k1[] = {"generate.sampling=sample", "generate.top_k=1", "generate.seed=3"};
    harness g, s;
    harness_init(&g, NULL, 0);
    harness_init(&s, k1, 3);
    assert_memory_equal(g.e.tokens, s.e.tokens, n);
    harness_free(&g);
    harness_free(&s);
}

/* --dry-run's memory plan reads the same arena table the engine carves: the plan's bytes are
 * exactly the arena allocated, across micro-batches, paged caches and captured logits. */
static void check_arena_plan(const char **overrides, int n) {
    harness h;
    harness_init(&h, overrides, n);
    size_t act = 0, kv = 0;
    engine_arena_plan(&h.e.cfg, &h.m.geom, &h.m.cfg, 1, 0, &act, &kv);
    assert_int_equal(act + kv, h.e.arena_bytes);
    assert_true(kv > 0 && act > 0);
    harness_free(&h);
}

/* The Llama model (tests/model/llama.yaml) against ref_llama: prefill logits, greedy tokens
 * by full recomputation, and the last decode step through the KV cache. */
static void check_llama(const char **overrides, int n, int quantize_ref) {
    snprintf(job_path, sizeof job_path, "%s", llama_path);
    harness h;
    harness_init(&h, overrides, n);
    snprintf(job_path, sizeof job_path, "%s", gpt2_path);
    ref_llama ref;
    model_config cfg;
    model_config_from_job(&cfg, &h.j);
    assert_true(arch_is_llama(cfg.arch));
    ref_llama_synthetic(&ref, &cfg, h.j.seed);
    if (quantize_ref) ref_llama_quantize_int8(&ref);
    const int T = h.j.prompt_len, N = h.j.new_tokens, V = cfg.vocab, total = T + N;
    const float *logits = prefill_logits(&h);
    double *ref_logits = malloc((size_t)total * V * sizeof(double));
    int32_t *ref_tokens = malloc((size_t)total * sizeof(int32_t));
    float *last = malloc((size_t)V * sizeof(float));
    int distinct = 0;
    for (int b = 0; b < h.j.batch; b++) {
        const int32_t *prompt = h.j.tokens + (size_t)b * T;
        ref_llama_forward(&ref, prompt, T, ref_logits);
        double err = rel_error(logits + (size_t)b * T * V, ref_logits, (long)T * V);
        if (err >= 1e-4) fail_msg("prompt %d: prefill logits rel error %.3g >= 1e-4", b, err);
        ref_llama_generate(&ref, prompt, T, N, ref_tokens);
        const int32_t *got = h.e.tokens + (size_t)b * total;
        for (int i = 0; i < total; i++) {
            if (got[i] != ref_tokens[i])
                fail_msg("prompt %d position %d: engine token %d, reference %d", b, i, got[i],
                         ref_tokens[i]);
            distinct += i > T && got[i] != got[i - 1];
        }
        const int last_mb = h.e.split.n_micro - 1, row = b - h.e.split.begin[last_mb];
        if (row < 0) continue;
        ref_llama_forward(&ref, got, total - 1, ref_logits);
        h.be.ops->copy_to_host(h.be.ctx, last, h.e.logits + (size_t)row * V,
                               (size_t)V * sizeof(float));
        err = rel_error(last, ref_logits + (size_t)(total - 2) * V, V);
        check_cached_decode(b, err, quantize_ref);
    }
    /* a model that repeats one token would not exercise the cache */
    if (distinct < h.j.batch) fail_msg("generated tokens barely change (%d changes)", distinct);
    free(last);
    free(ref_tokens);
    free(ref_logits);
    ref_llama_free(&ref);
    harness_free(&h);
}

static void test_llama_gqa_matches_reference(void **state) {
    (void)state;
    check_llama(NULL, 0, 0);
}

/* Llama 3.1 scaling with original_max_position_embeddings 64: head_dim 8 gives wavelengths
 * 6.3, 63, 628 and 6283, so one frequency is kept, one blended and two divided. */
static void test_llama_rope_scaling_matches_reference(void **state) {
    (void)state;
    const char *o[] = {"model.synthetic.rope_scaling={factor: 8, low_freq_factor: 1, "
                       "high_freq_factor: 4, original_max_position_embeddings: 64}"};
    check_llama(o, 1, 0);
}

/* One kv head (multi-query), a tied head, the paged cache and two micro-batches. */
static void test_llama_mqa_tied_paged(void **state) {
    (void)state;
    const char *o[] = {"model.synthetic.kv_heads=1", "model.synthetic.tie_embeddings=true",
                       "model.kv_cache=paged", "model.kv_block=3", "parallel.microbatches=2"};
    check_llama(o, 5, 0);
}

/* Multi-head (kv_heads = heads) and a Llama 2-sized rms eps. */
static void test_llama_mha_matches_reference(void **state) {
    (void)state;
    const char *o[] = {"model.synthetic.kv_heads=8", "model.ln_eps=1e-6"};
    check_llama(o, 2, 0);
}

/* head_dim apart from embd / heads (Hugging Face's head_dim, as Mistral-Nemo's): attention is
 * heads * head_dim = 64 wide over a residual stream of 48, so o_proj is (48, 64). */
static void test_llama_head_dim_matches_reference(void **state) {
    (void)state;
    const char *o[] = {"model.synthetic.embd=48", "model.synthetic.heads=4",
                       "model.synthetic.kv_heads=2", "model.synthetic.head_dim=16"};
    check_llama(o, 4, 0);
    const char *q[] = {"model.synthetic.embd=48", "model.synthetic.heads=4",
                       "model.synthetic.kv_heads=2", "model.synthetic.head_dim=16",
                       "model.precision=int8w"};
    check_llama(q, 5, 1);
}

/* Mixtral: 6 experts, 2 per token, renormalised, over llama.yaml's attention; with two
 * micro-batches, so a block of rows is routed per micro-batch. */
static void test_mixtral_matches_reference(void **state) {
    (void)state;
    const char *o[] = {"model.arch=mixtral", "model.synthetic.experts=6",
                       "model.synthetic.experts_top_k=2", "model.synthetic.mlp=40"};
    check_llama(o, 4, 0);
    const char *mb[] = {"model.arch=mixtral", "model.synthetic.experts=5",
                        "model.synthetic.experts_top_k=3", "parallel.microbatches=2"};
    check_llama(mb, 4, 0);
}

/* Qwen2-MoE: a shared expert of its own width behind its sigmoid gate, and top-k weights that
 * are the softmax over every expert (norm_topk_prob false), then renormalised (true). */
static void test_qwen2_moe_matches_reference(void **state) {
    (void)state;
    const char *o[] = {"model.arch=qwen2_moe", "model.synthetic.experts=8",
                       "model.synthetic.experts_top_k=3", "model.synthetic.mlp=24",
                       "model.synthetic.shared_expert_mlp=56", "model.synthetic.norm_topk_prob=false"};
    check_llama(o, 6, 0);
    const char *n[] = {"model.arch=qwen2_moe", "model.synthetic.experts=4",
                       "model.synthetic.experts_top_k=1", "model.synthetic.shared_expert_mlp=32",
                       "model.synthetic.norm_topk_prob=true"};
    check_llama(n, 5, 0);
}

/* int8w quantises every Llama matrix, the untied LM head included, against a reference
 * rounded the same way; the tied head stays the fp32 embedding. */
static void test_llama_int8w_matches_quantized_reference(void **state) {
    (void)state;
    const char *o[] = {"model.precision=int8w"};
    check_llama(o, 1, 1);
    const char *tied[] = {"model.precision=int8w", "model.synthetic.tie_embeddings=true"};
    check_llama(tied, 2, 1);
    const char *grouped[] = {"model.precision=int8w", "model.int8_group=32",
                             "model.synthetic.tie_embeddings=true", "model.quantize_head=true"};
    check_llama(grouped, 4, 1);
    const char *fp32_head[] = {"model.precision=int8w", "model.quantize_head=false"};
    check_llama(fp32_head, 2, 1);
}

/* The block formats' weight bytes, what --dry-run and the memory check count: 34, 18 and 20
 * bytes per 32 weights of every matrix, 144 per 256 for q4_k (no scale arrays beside them),
 * fp32 elsewhere. */
static void test_block_weight_bytes(void **state) {
    (void)state;
    job j;
    const char *ov[] = {"model.precision=q8_0"};
    if (job_load(&j, job_path, ov, 1) != 0) fail_msg("job_load: %s", error_message());
    static const dtype types[] = {DTYPE_Q8_0, DTYPE_Q4_0, DTYPE_Q4_1, DTYPE_Q4_K};
    static const size_t per_block[] = {34, 18, 20, 144}, weights[] = {32, 32, 32, 256};
    for (int i = 0; i < 4; i++) {
        model_config cfg;
        model_config_from_job(&cfg, &j);
        if (types[i] == DTYPE_Q4_K) /* rows of whole 256-weight blocks */
            cfg.embd = 256, cfg.mlp = 1024;
        shard_geom g;
        shard_geom_init(&g, &cfg, 1, 0, 1, 0);
        model m;
        model_tensor_table(&m, &cfg, &g, types[i]);
        size_t want = 0;
        for (int t = 0; t < m.n_tensors; t++) {
            const tensor_desc *d = &m.tensors[t];
            if (!d->present) continue;
            const size_t e = (size_t)tensor_local_elems(d);
            const size_t b = d->is_matrix ? e / weights[i] * per_block[i] : e * sizeof(float);
            want += (b + 63) & ~(size_t)63;
        }
        assert_int_equal(model_weight_bytes(&m), want);
    }
    job_free(&j);
}

static void test_dry_run_plan_is_the_arena(void **state) {
    (void)state;
    check_arena_plan(NULL, 0);
    const char *paged[] = {"model.kv_cache=paged", "model.kv_block=4", "parallel.microbatches=3"};
    check_arena_plan(paged, 3);
    const char *logits[] = {"record.activations=[logits]", "parallel.microbatches=2"};
    check_arena_plan(logits, 2);
    /* Llama: the GQA cache, the gate|up and SwiGLU buffers and the RoPE table */
    snprintf(job_path, sizeof job_path, "%s", llama_path);
    check_arena_plan(paged, 3);
    /* head_dim 16 apart from embd / heads = 12: the cache is kv_heads * head_dim wide, k and v
     * for every layer, sequence and position (3 layers, batch 3, 7 + 8 positions) */
    const char *hd[] = {"model.synthetic.embd=48", "model.synthetic.heads=4",
                        "model.synthetic.kv_heads=2", "model.synthetic.head_dim=16"};
    check_arena_plan(hd, 4);
    harness h;
    harness_init(&h, hd, 4);
    size_t act = 0, kv = 0;
    engine_arena_plan(&h.e.cfg, &h.m.geom, &h.m.cfg, 1, 0, &act, &kv);
    assert_int_equal(kv, 2ul * 3 * 3 * (7 + 8) * 2 * 16 * sizeof(float));
    harness_free(&h);
    snprintf(job_path, sizeof job_path, "%s", gpt2_path);
}

/* The stacked experts' gate|up tensor of a MoE size table for g, in m. */
static const tensor_desc *gate_up_tensor(model *m, const model_config *c, const shard_geom *g) {
    memset(m, 0, sizeof *m);
    model_tensor_table_moe(m, c, g);
    const tensor_desc *t = NULL;
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, "exp_gate_up_w") == 0) t = &m->tensors[i];
    assert_non_null(t);
    return t;
}

/* g's expert block: {ep, expert_begin, experts_local, mlp_begin, mlp_local}. */
static void assert_ep_block(const shard_geom *g, const int want[5]) {
    const int got[5] = {g->ep, g->expert_begin, g->experts_local, g->mlp_begin, g->mlp_local};
    for (int i = 0; i < 5; i++) assert_int_equal(got[i], want[i]);
}

/* Expert parallelism's shard (parallel.ep, docs/jobs.md): TP rank 3 of 4 with ep 2 is in the
 * second block of 2 ranks, so it holds experts 4..7 of every layer at the second half of their
 * width; its local row l * 4 + j is global expert row l * 8 + 4 + j, and a checkpoint part of
 * local rows [2, 6) crosses from layer 0's run into layer 1's. */
static void test_expert_parallel_shard(void **state) {
    (void)state;
    model_config c = {.layers = 3, .heads = 4, .embd = 8, .mlp = 40, .vocab = 16, .experts = 8,
                      .experts_top_k = 2};
    shard_geom g;
    shard_geom_init(&g, &c, 4, 3, 1, 0);
    assert_int_equal(g.experts_local, 8);
    assert_int_equal(g.mlp_begin, 30);
    shard_geom_set_ep(&g, &c, 2, 0);
    assert_ep_block(&g, (const int[]){2, 4, 4, 20, 20});
    model m;
    const tensor_desc *t = gate_up_tensor(&m, &c, &g);
    assert_int_equal(tensor_local_elems(t), 3L * 4 * (2 * 20) * 8);
    for (long l = 0; l < 3; l++)
        for (long j = 0; j < 4; j++) /* the first gate row of each held expert */
            assert_int_equal(tensor_global_index(t, (l * 4 + j) * 40 * 8),
                             ((l * 8 + 4 + j) * 80 + 20) * 8);
    tensor_part p;
    tensor_part_init(&p, &m, t, 2, 4);
    assert_int_equal(p.d.local[0].nblocks, 2);
    assert_int_equal(p.d.local[0].start[0], 6);
    assert_int_equal(p.d.local[0].count[0], 2);
    assert_int_equal(p.d.local[0].start[1], 12);
    assert_int_equal(p.d.local[0].count[1], 2);
    assert_int_equal(tensor_local_elems(&p.d), 4L * 40 * 8);
}

/* Expert parallelism across replicas (ep > tp): TP rank 1 of 2 in the second replica of an
 * EP group of 4 blocks holds block 1 * 2 + 1 = 3, experts 6..7 of 8, whole. */
static void test_expert_parallel_across_replicas(void **state) {
    (void)state;
    model_config c = {.layers = 3, .heads = 4, .embd = 8, .mlp = 40, .vocab = 16, .experts = 8,
                      .experts_top_k = 2};
    shard_geom g;
    shard_geom_init(&g, &c, 2, 1, 1, 0);
    assert_int_equal(g.mlp_local, 20);
    shard_geom_set_ep(&g, &c, 4, 1);
    assert_ep_block(&g, (const int[]){4, 6, 2, 0, 40});
    model m;
    const tensor_desc *t = gate_up_tensor(&m, &c, &g);
    assert_int_equal(tensor_local_elems(t), 3L * 2 * (2 * 40) * 8);
    for (long l = 0; l < 3; l++) /* the first gate row of each held expert */
        for (long j = 0; j < 2; j++)
            assert_int_equal(tensor_global_index(t, (l * 2 + j) * 80 * 8),
                             (l * 8 + 6 + j) * 80 * 8);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    const char *src = getenv("TRIPAR_SOURCE_DIR");
    snprintf(gpt2_path, sizeof gpt2_path, "%s/tests/model/model.yaml", src ? src : ".");
    snprintf(llama_path, sizeof llama_path, "%s/tests/model/llama.yaml", src ? src : ".");
    snprintf(job_path, sizeof job_path, "%s", gpt2_path);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pre_norm_matches_reference),
        cmocka_unit_test(test_post_norm_matches_reference),
        cmocka_unit_test(test_int8w_matches_quantized_reference),
        cmocka_unit_test(test_int8w_groups_and_quantized_head),
        cmocka_unit_test(test_int8_layout_rule),
        cmocka_unit_test(test_expert_parallel_shard),
        cmocka_unit_test(test_expert_parallel_across_replicas),
        cmocka_unit_test(test_microbatches_and_paged_cache),
        cmocka_unit_test(test_sampling_is_seeded),
        cmocka_unit_test(test_generation_allocates_nothing),
        cmocka_unit_test(test_dry_run_plan_is_the_arena),
        cmocka_unit_test(test_block_weight_bytes),
        cmocka_unit_test(test_llama_gqa_matches_reference),
        cmocka_unit_test(test_llama_rope_scaling_matches_reference),
        cmocka_unit_test(test_llama_mqa_tied_paged),
        cmocka_unit_test(test_llama_mha_matches_reference),
        cmocka_unit_test(test_llama_head_dim_matches_reference),
        cmocka_unit_test(test_llama_int8w_matches_quantized_reference),
        cmocka_unit_test(test_mixtral_matches_reference),
        cmocka_unit_test(test_qwen2_moe_matches_reference),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    MPI_Finalize();
    return failed;
}
