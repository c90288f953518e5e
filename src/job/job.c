/* Loads a job: reads the YAML tree (job_tree.c), applies --set overrides, walks each section
 * with the typed reads of job_read.c against the tables of job_keys.c, fills defaults, resolves
 * the input (job_input.c) and, for a synthetic model, checks the shape (job_validate.c). */
#include "job/job.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "job/job_internal.h"
#include "job/job_tree.h"
#include "job/presets.h"

/* ---- sections ------------------------------------------------------------------------ */

/* model.arch. A checkpoint names its own architecture; model.arch given with one must agree
 * (the runner checks once the file is read). */
static int job_walk_arch(job_loader *L, const jnode *m) {
    int e = (int)L->j->arch;
    L->j->arch_given = jnode_get(m, "arch", NULL) != NULL;
    TRY(job_get_enum(L, m, "model", "arch", JOB_ARCH_NAMES, &e));
    L->j->arch = (arch_kind)e;
    return STATUS_OK;
}

/* The Llama keys of model.synthetic: kv_heads, head_dim, rope_theta, rope_scaling,
 * tie_embeddings.
 * Refused on a GPT-2 model, which has none of them. */
static int job_walk_llama_keys(job_loader *L, const jnode *syn) {
    job *j = L->j;
    const char *s = "model.synthetic";
    for (int i = 0; j->arch == ARCH_GPT2 && JOB_LLAMA_ONLY_KEYS[i]; i++) {
        const jnode *k = NULL;
        if (jnode_get(syn, JOB_LLAMA_ONLY_KEYS[i], &k))
            return jnode_fail(k,
                              "model.synthetic.%s is a Llama key; it needs model.arch: llama "
                              "(the model is gpt2)",
                              JOB_LLAMA_ONLY_KEYS[i]);
    }
    if (j->arch == ARCH_GPT2) {
        j->kv_heads = j->heads, j->tie_embeddings = 1, j->rope_scaling = 0, j->head_dim = 0;
        return STATUS_OK;
    }
    const jnode *kv_key = NULL;
    if (!jnode_get(syn, "kv_heads", &kv_key) && (j->kv_heads < 1 || j->heads % j->kv_heads))
        j->kv_heads = j->heads; /* a preset's kv_heads no longer fits heads given after it */
    TRY(job_get_int(L, syn, s, "kv_heads", 1, 1 << 16, &j->kv_heads));
    if (j->kv_heads > j->heads || j->heads % j->kv_heads)
        return jnode_fail(kv_key ? kv_key : syn,
                          "model.synthetic.kv_heads = %d does not divide model.synthetic.heads "
                          "= %d (each kv head serves heads / kv_heads query heads)",
                          j->kv_heads, j->heads);
    /* head_dim apart from embd / heads (Mistral-Nemo); 0 or absent = embd / heads. Odd values
     * are refused with the RoPE check in job_validate. */
    TRY(job_get_int(L, syn, s, "head_dim", 0, 1 << 16, &j->head_dim));
    TRY(job_get_float(L, syn, s, "rope_theta", 0.0, 0, &j->rope_theta));
    if (j->tie_embeddings < 0) j->tie_embeddings = 0;
    TRY(job_get_bool(L, syn, s, "tie_embeddings", &j->tie_embeddings));
    const jnode *rs_key = NULL;
    const jnode *rs = job_field(L, syn, s, "rope_scaling", &rs_key);
    if (!rs) return STATUS_OK;
    if (rs->type == JNODE_NULL) { /* rope_scaling: null turns a preset's scaling off */
        j->rope_scaling = 0;
        return STATUS_OK;
    }
    const char *rsn = "model.synthetic.rope_scaling";
    TRY(job_section_check(rs, rs_key, rsn, JOB_ROPE_SCALING_KEYS));
    if (!j->rope_scaling) { /* absent keys take Llama 3.1's values */
        j->rope_factor = 8.0f, j->rope_low_freq_factor = 1.0f, j->rope_high_freq_factor = 4.0f;
        j->rope_original_ctx = 8192;
    }
    j->rope_scaling = 1;
    TRY(job_get_float(L, rs, rsn, "factor", 0.0, 0, &j->rope_factor));
    TRY(job_get_float(L, rs, rsn, "low_freq_factor", 0.0, 0, &j->rope_low_freq_factor));
    TRY(job_get_float(L, rs, rsn, "high_freq_factor", 0.0, 0, &j->rope_high_freq_factor));
    TRY(job_get_int(L, rs, rsn, "original_max_position_embeddings", 1, CAP_DIM,
                    &j->rope_original_ctx));
    if (!(j->rope_high_freq_factor > j->rope_low_freq_factor))
        return jnode_fail(rs_key,
                          "%s: high_freq_factor = %g must be more than low_freq_factor "
                          "= %g (the rule divides by their difference)",
                          rsn, (double)j->rope_high_freq_factor, (double)j->rope_low_freq_factor);
    return STATUS_OK;
}

/* The mixture-of-experts keys of model.synthetic: experts, experts_top_k, shared_expert_mlp,
 * norm_topk_prob. Refused on a dense model; a preset's values are the defaults. */
static int job_walk_moe_keys(job_loader *L, const jnode *syn) {
    job *j = L->j;
    const char *s = "model.synthetic";
    const jnode *k = NULL;
    for (int i = 0; !arch_is_moe(j->arch) && JOB_MOE_ONLY_KEYS[i]; i++)
        if (jnode_get(syn, JOB_MOE_ONLY_KEYS[i], &k))
            return jnode_fail(k,
                              "model.synthetic.%s is a mixture-of-experts key; it needs "
                              "model.arch: mixtral or qwen2_moe (the model is %s)",
                              JOB_MOE_ONLY_KEYS[i], arch_kind_name(j->arch));
    if (!arch_is_moe(j->arch)) {
        j->experts = 0, j->experts_top_k = 0, j->shared_expert_mlp = 0, j->norm_topk_prob = 0;
        return STATUS_OK;
    }
    if (j->experts < 1) { /* no mixture-of-experts preset: Mixtral's routing */
        j->experts = 8, j->experts_top_k = 2, j->shared_expert_mlp = 0;
        j->norm_topk_prob = j->arch == ARCH_MIXTRAL;
    }
    TRY(job_get_int(L, syn, s, "experts", 1, 1 << 16, &j->experts));
    TRY(job_get_int(L, syn, s, "experts_top_k", -(1 << 16), 1 << 16, &j->experts_top_k));
    if (j->experts_top_k < 1 || j->experts_top_k > j->experts)
        return jnode_fail(jnode_get(syn, "experts_top_k", &k) ? k : syn,
                          "model.synthetic.experts_top_k = %d: each token is routed to 1 to "
                          "model.synthetic.experts = %d experts",
                          j->experts_top_k, j->experts);
    TRY(job_get_int(L, syn, s, "shared_expert_mlp", 0, 4 * CAP_DIM, &j->shared_expert_mlp));
    TRY(job_get_bool(L, syn, s, "norm_topk_prob", &j->norm_topk_prob));
    if (j->arch == ARCH_MIXTRAL && j->shared_expert_mlp)
        return jnode_fail(jnode_get(syn, "shared_expert_mlp", &k) ? k : syn,
                          "model.synthetic.shared_expert_mlp = %d: Mixtral has no shared "
                             "expert; allowed with mixtral: 0 (or model.arch: qwen2_moe)",
                          j->shared_expert_mlp);
    if (j->arch == ARCH_MIXTRAL && !j->norm_topk_prob)
        return jnode_fail(jnode_get(syn, "norm_topk_prob", &k) ? k : syn,
                          "model.synthetic.norm_topk_prob = false: Mixtral renormalises its top-k "
                          "weights; allowed with mixtral: true (or model.arch: qwen2_moe)");
    return STATUS_OK;
}

/* model.int8_group and model.quantize_head: how int8w scales its weights, and whether the LM
 * head takes the weight precision. */
static int job_walk_quantization(job_loader *L, const jnode *m) {
    job *j = L->j;
    j->int8_group = 0, j->quantize_head = -1;
    TRY(job_get_int(L, m, "model", "int8_group", 0, 1 << 16, &j->int8_group));
    const jnode *g = NULL;
    if (j->int8_group % 32 != 0 && jnode_get(m, "int8_group", &g))
        return jnode_fail(g,
                          "model.int8_group: %d is not a multiple of 32 (an int8 activation "
                          "block); allowed: 0 (one scale per row), 32, 64, 96, 128, ...",
                          j->int8_group);
    if (j->int8_group > 0 && j->precision != PRECISION_INT8W && jnode_get(m, "int8_group", &g))
        return jnode_fail(g,
                          "model.int8_group needs model.precision: int8w (it is %s); allowed "
                          "with %s: 0",
                          precision_kind_name(j->precision), precision_kind_name(j->precision));
    const jnode *q = job_field(L, m, "model", "quantize_head", NULL);
    if (!q || (q->type == JNODE_SCALAR && !q->quoted && !strcmp(q->value, "auto")))
        return STATUS_OK;
    int on = 0;
    if (job_get_bool(L, m, "model", "quantize_head", &on) != STATUS_OK) {
        char buf[128];
        return jnode_fail(q, "model.quantize_head: expected auto, true or false, got %s",
                          jnode_describe(q, buf, sizeof buf));
    }
    j->quantize_head = on;
    return STATUS_OK;
}

static int job_walk_model(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    TRY(job_section_check(m, m_key, "model", JOB_MODEL_KEYS));
    const jnode *syn_key = NULL, *ck_key = NULL;
    const jnode *syn = job_field(L, m, "model", "synthetic", &syn_key);
    const jnode *ck = job_field(L, m, "model", "checkpoint", &ck_key);
    if (syn && ck) {
        const jnode *later = ck_key->line == 0 || ck_key->line > syn_key->line ? ck_key : syn_key;
        return jnode_fail(later, "model: give either synthetic or checkpoint, not both");
    }
    if (!syn && !ck) {
        const char *msg = "model: give model.synthetic {layers, heads, embd, vocab, ctx, mlp, "
                          "seed} or model.checkpoint PATH";
        if (m_key) return jnode_fail(m_key, "%s", msg);
        error_set("%s: missing section 'model'; %s", j->source, msg);
        return STATUS_BAD_INPUT;
    }
    j->ln_eps = 1e-5f;
    j->rope_theta = 10000.0f;
    j->tie_embeddings = -1; /* resolved by arch below */
    if (syn) {
        j->synthetic = 1;
        j->layers = 2, j->heads = 4, j->embd = 64, j->vocab = 256, j->ctx = 128, j->mlp = 0;
        j->seed = 1234;
        TRY(job_section_check(syn, syn_key, "model.synthetic", JOB_SYNTHETIC_KEYS));
        const char *s = "model.synthetic";
        /* The preset first: every other key overrides it. */
        TRY(job_get_string(L, syn, s, "preset", j->preset, sizeof j->preset));
        if (j->preset[0] && job_preset_apply(j, j->preset) != 0)
            return jnode_fail(jnode_get(syn, "preset", NULL),
                              "model.synthetic.preset: '%s' is not a preset; allowed: %s",
                              j->preset, job_preset_list());
        TRY(job_walk_arch(L, m));
        TRY(job_get_int(L, syn, s, "layers", 1, 1 << 16, &j->layers));
        TRY(job_get_int(L, syn, s, "heads", 1, 1 << 16, &j->heads));
        TRY(job_get_int(L, syn, s, "embd", 1, CAP_DIM, &j->embd));
        TRY(job_get_int(L, syn, s, "vocab", 2, CAP_VOCAB, &j->vocab));
        TRY(job_get_int(L, syn, s, "ctx", 1, CAP_DIM, &j->ctx));
        TRY(job_get_int(L, syn, s, "mlp", 0, 4 * CAP_DIM, &j->mlp));
        TRY(job_get_u64(L, syn, s, "seed", &j->seed));
        if (j->mlp == 0) j->mlp = 4 * j->embd;
        TRY(job_walk_llama_keys(L, syn));
        TRY(job_walk_moe_keys(L, syn));
    } else {
        TRY(job_walk_arch(L, m));
        j->tie_embeddings = 1; /* the shape, llama or not, is the checkpoint's (the runner) */
        TRY(job_get_path(L, m, "model", "checkpoint", j->checkpoint));
    }
    TRY(job_get_path(L, m, "model", "tokenizer", j->tokenizer)); /* io/prompt.c reads it */
    j->verify_checksums = 1; /* a synthetic model reads no checkpoint: the key is moot there */
    TRY(job_get_bool(L, m, "model", "verify_checksums", &j->verify_checksums));
    int e = 0;
    TRY(job_get_enum(L, m, "model", "norm", JOB_NORM_NAMES, &e));
    j->norm = (norm_kind)e;
    e = 0;
    TRY(job_get_enum(L, m, "model", "precision", JOB_PRECISION_NAMES, &e));
    j->precision = (precision_kind)e;
    TRY(job_walk_quantization(L, m));
    e = 0;
    TRY(job_get_enum(L, m, "model", "kv_cache", JOB_KV_CACHE_NAMES, &e));
    j->kv_cache = (kv_cache_kind)e;
    j->kv_block = 16;
    TRY(job_get_int(L, m, "model", "kv_block", 1, 1 << 16, &j->kv_block));
    e = 0;
    TRY(job_get_enum(L, m, "model", "kv_dtype", JOB_KV_DTYPE_NAMES, &e));
    j->kv_dtype_auto = e == 0;
    j->kv_dtype = e ? (kv_dtype_kind)(e - 1) : kv_dtype_for(j->precision);
    TRY(job_get_float(L, m, "model", "ln_eps", 0.0, 0, &j->ln_eps));
    const jnode *norm_key = NULL;
    if (arch_is_llama(j->arch) && j->norm == NORM_POST && jnode_get(m, "norm", &norm_key))
        return jnode_fail(norm_key, "model.norm: post is not allowed with model.arch: %s "
                                    "(Llama normalises before each block); allowed: pre",
                          arch_kind_name(j->arch));
    return STATUS_OK;
}

static int job_walk_backend(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    j->backend = BACKEND_CPU, j->threads = 0, j->cpu_isa = 0, j->device = -1, j->comm = COMM_AUTO;
    j->cuda_graphs = 0, j->allow_tf32 = 0, j->memory_check = 1;
    int e = 0;
    if (m && m->type == JNODE_SCALAR) { /* the short form "backend: cuda" */
        job_key_note(j, "backend.kind", m_key);
        TRY(job_parse_enum(m, "backend", JOB_BACKEND_NAMES, &e));
        j->backend = (backend_kind)e;
        return STATUS_OK;
    }
    TRY(job_section_check(m, m_key, "backend", JOB_BACKEND_KEYS));
    TRY(job_get_enum(L, m, "backend", "kind", JOB_BACKEND_NAMES, &e));
    j->backend = (backend_kind)e;
    TRY(job_get_int(L, m, "backend", "threads", 0, 4096, &j->threads));
    TRY(job_get_enum(L, m, "backend", "cpu_isa", JOB_CPU_ISA_NAMES, &j->cpu_isa));
    TRY(job_get_int(L, m, "backend", "device", -1, 4096, &j->device));
    e = 0;
    TRY(job_get_enum(L, m, "backend", "comm", JOB_COMM_NAMES, &e));
    j->comm = (comm_kind)e;
    TRY(job_get_bool(L, m, "backend", "cuda_graphs", &j->cuda_graphs));
    TRY(job_get_bool(L, m, "backend", "tf32", &j->allow_tf32));
    TRY(job_get_bool(L, m, "backend", "memory_check", &j->memory_check));
    if (j->backend == BACKEND_CUDA && j->int8_group > 0)
        return job_fail_at(j, KEYS("model.int8_group"),
                           "model.int8_group: %d needs backend.kind: cpu (the cuda kernels scale "
                           "int8 weights per row); allowed with cuda: 0",
                           j->int8_group);
    if (j->backend == BACKEND_CUDA && j->cpu_isa != 0)
        return job_fail_at(j, KEYS("backend.cpu_isa"),
                           "backend.cpu_isa: %s chooses the cpu backend's kernels; allowed with "
                           "backend.kind cuda: auto",
                           JOB_CPU_ISA_NAMES[j->cpu_isa]);
    if (j->comm == COMM_NCCL && j->backend != BACKEND_CUDA)
        return job_fail_at(
            j, KEYS("backend.comm"),
            "backend.comm: nccl needs backend.kind: cuda; allowed on cpu: auto, mpi");
    return STATUS_OK;
}

/* The six axis permutations, and auto: the mesh lays tp-pp-dp over the ranks sorted by
 * (node, local rank) and refuses a tp that fits no node, which needs the nodes, so it is
 * checked when the mesh is built (parallel/mesh.c), not here. */
static int job_order_check(const char *order) {
    static const char *const perms[] = {"tp-pp-dp", "tp-dp-pp", "pp-tp-dp", "pp-dp-tp",
                                        "dp-tp-pp", "dp-pp-tp", "auto",     NULL};
    for (int i = 0; perms[i]; i++)
        if (!strcmp(order, perms[i])) return 1;
    return 0;
}

static int job_walk_parallel(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    j->dp = j->tp = j->pp = j->ep = 1, j->microbatches = 1, j->overlap = 0, j->chunks = 2;
    j->mpi_tuning = 1;
    snprintf(j->order, sizeof j->order, "tp-pp-dp");
    TRY(job_section_check(m, m_key, "parallel", JOB_PARALLEL_KEYS));
    TRY(job_get_int(L, m, "parallel", "dp", 1, CAP_DIM, &j->dp));
    TRY(job_get_int(L, m, "parallel", "tp", 1, CAP_DIM, &j->tp));
    TRY(job_get_int(L, m, "parallel", "pp", 1, CAP_DIM, &j->pp));
    TRY(job_get_int(L, m, "parallel", "ep", 1, CAP_DIM, &j->ep));
    TRY(job_get_int(L, m, "parallel", "microbatches", 1, CAP_DIM, &j->microbatches));
    const jnode *order = job_field(L, m, "parallel", "order", NULL);
    if (order && (order->type != JNODE_SCALAR || !job_order_check(order->value))) {
        char buf[128];
        return jnode_fail(order,
                          "parallel.order: %s is not allowed; allowed: tp, pp and dp each "
                          "once, joined by '-' (tp-pp-dp, tp-dp-pp, pp-tp-dp, pp-dp-tp, dp-tp-pp, "
                          "dp-pp-tp); the first axis varies fastest; or auto (TP inside a "
                          "node, then PP, then DP)",
                          jnode_describe(order, buf, sizeof buf));
    }
    if (order) snprintf(j->order, sizeof j->order, "%s", order->value);
    TRY(job_get_bool(L, m, "parallel", "overlap", &j->overlap));
    TRY(job_get_int(L, m, "parallel", "chunks", 1, 1 << 16, &j->chunks));
    TRY(job_get_enum(L, m, "parallel", "mpi_tuning", JOB_MPI_TUNING_NAMES, &j->mpi_tuning));
    return STATUS_OK;
}

static int job_walk_generate(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    j->new_tokens = 16, j->sampling = SAMPLING_GREEDY, j->temperature = 1.0f, j->top_k = 0;
    j->sample_seed = 1;
    TRY(job_section_check(m, m_key, "generate", JOB_GENERATE_KEYS));
    TRY(job_get_int(L, m, "generate", "new_tokens", 0, CAP_DIM, &j->new_tokens));
    int e = 0;
    TRY(job_get_enum(L, m, "generate", "sampling", JOB_SAMPLING_NAMES, &e));
    j->sampling = (sampling_kind)e;
    TRY(job_get_float(L, m, "generate", "temperature", 0.0, 0, &j->temperature));
    TRY(job_get_int(L, m, "generate", "top_k", 0, CAP_VOCAB, &j->top_k));
    TRY(job_get_u64(L, m, "generate", "seed", &j->sample_seed));
    j->stop_at_eos = -1, j->eos_id = -1, j->eos_id_given = -1;
    TRY(job_get_int(L, m, "generate", "eos_id", 0, CAP_VOCAB, &j->eos_id_given));
    const jnode *s = job_field(L, m, "generate", "stop_at_eos", NULL);
    if (!s || (s->type == JNODE_SCALAR && !s->quoted && !strcmp(s->value, "auto")))
        return STATUS_OK;
    if (job_get_bool(L, m, "generate", "stop_at_eos", &j->stop_at_eos) != STATUS_OK) {
        char buf[128];
        return jnode_fail(s, "generate.stop_at_eos: expected auto, true or false, got %s",
                          jnode_describe(s, buf, sizeof buf));
    }
    return STATUS_OK;
}

static int job_walk_bench(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    j->warmup = 0, j->iterations = 1;
    TRY(job_section_check(m, m_key, "bench", JOB_BENCH_KEYS));
    TRY(job_get_int(L, m, "bench", "warmup", 0, 1 << 24, &j->warmup));
    TRY(job_get_int(L, m, "bench", "iterations", 1, 1 << 24, &j->iterations));
    TRY(job_get_bool(L, m, "bench", "roofline", &j->roofline));
    j->arrival_rate = 0.0f, j->duration = 10.0f, j->arrival_seed = 1;
    TRY(job_get_float(L, m, "bench", "arrival_rate", 0.0, 1, &j->arrival_rate));
    TRY(job_get_float(L, m, "bench", "duration", 0.0, 0, &j->duration));
    TRY(job_get_u64(L, m, "bench", "arrival_seed", &j->arrival_seed));
    return STATUS_OK;
}

static int job_walk_record(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    snprintf(j->out, sizeof j->out, "run.h5");
    j->timings = TIMINGS_STEP, j->flush_every = 0, j->flush_seconds = 10;
    j->stop_grace_seconds = 5, j->stall_seconds = JOB_STALL_SECONDS_DEFAULT;
    j->telemetry_hz = 10;
    j->sched = 1;
    TRY(job_section_check(m, m_key, "record", JOB_RECORD_KEYS));
    TRY(job_get_string(L, m, "record", "out", j->out, sizeof j->out));
    const jnode *acts = job_field(L, m, "record", "activations", NULL);
    if (acts) {
        const jnode *single = acts->type == JNODE_SCALAR ? acts : NULL;
        int n = single ? 1 : acts->type == JNODE_SEQ ? acts->n : 0;
        char buf[128];
        if (!single && acts->type != JNODE_SEQ && acts->type != JNODE_NULL)
            return jnode_fail(acts,
                              "record.activations: expected a sequence of point names, "
                              "got %s",
                              jnode_describe(acts, buf, sizeof buf));
        if (n > JOB_MAX_ACTIVATIONS)
            return jnode_fail(acts, "record.activations: more than %d points; use 'all'",
                              JOB_MAX_ACTIVATIONS);
        for (int i = 0; i < n; i++) {
            const jnode *p = single ? single : acts->items[i];
            if (p->type != JNODE_SCALAR || job_activation_layer(p->value) == -2)
                return jnode_fail(p,
                                  "record.activations: %s is not a point; allowed: embed, "
                                  "layer.N.attn, layer.N.mlp (N < model layers), final, logits, "
                                  "all",
                                  jnode_describe(p, buf, sizeof buf));
            for (int k = 0; k < j->n_activations; k++)
                if (!strcmp(j->activations[k], p->value))
                    return jnode_fail(p, "record.activations: '%s' is listed twice", p->value);
            j->activations[j->n_activations] = strdup(p->value);
            CHECK(j->activations[j->n_activations], "out of memory");
            j->n_activations++;
        }
    }
    int e = TIMINGS_STEP;
    TRY(job_get_enum(L, m, "record", "timings", JOB_TIMINGS_NAMES, &e));
    j->timings = (timings_level)e;
    TRY(job_get_int(L, m, "record", "flush_every", 0, INT_MAX, &j->flush_every));
    TRY(job_get_int(L, m, "record", "flush_seconds", 0, INT_MAX, &j->flush_seconds));
    TRY(job_get_int(L, m, "record", "stop_grace_seconds", 0, 86400, &j->stop_grace_seconds));
    TRY(job_get_int(L, m, "record", "telemetry", 0, JOB_TELEMETRY_MAX_HZ, &j->telemetry_hz));
    TRY(job_get_int(L, m, "record", "stall_seconds", 0, 86400, &j->stall_seconds));
    TRY(job_get_bool(L, m, "record", "sched", &j->sched));
    return STATUS_OK;
}

/* ---- public -------------------------------------------------------------------------- */

static int job_walk(job_loader *L) {
    job *j = L->j;
    const jnode *root = L->tree.root;
    TRY(job_section_check(root, NULL, "job", JOB_SECTION_KEYS));
    typedef int (*walk_fn)(job_loader *, const jnode *, const jnode *);
    static const walk_fn walks[] = {job_walk_model, job_walk_backend,  job_walk_parallel,
                                    job_walk_input, job_walk_generate, job_walk_bench,
                                    job_walk_record, job_walk_perplexity};
    for (int i = 0; JOB_SECTION_KEYS[i]; i++) {
        const jnode *key = NULL;
        const jnode *m = jnode_get(root, JOB_SECTION_KEYS[i], &key);
        if (m) job_key_note(j, JOB_SECTION_KEYS[i], key);
        TRY(walks[i](L, m, m ? key : NULL));
    }
    if (j->synthetic) {
        if (j->synthetic_input) job_fill_synthetic_tokens(j, j->vocab);
        TRY(job_validate_model(j));
    }
    return STATUS_OK;
}

int job_load(job *j, const char *path, const char *const *overrides, int n_overrides) {
    memset(j, 0, sizeof *j);
    error_clear();
    if (!path || strlen(path) >= sizeof j->source) {
        error_set("%s: job file path missing or too long", path ? "job" : "(null)");
        return STATUS_BAD_INPUT;
    }
    snprintf(j->source, sizeof j->source, "%s", path);
    job_loader L = {.j = j};
    snprintf(L.dir, sizeof L.dir, "%s", path);
    char *slash = strrchr(L.dir, '/');
    if (slash == L.dir)
        L.dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        snprintf(L.dir, sizeof L.dir, ".");

    int rc = jtree_load_file(&L.tree, path);
    for (int i = 0; !rc && i < n_overrides; i++)
        rc = jtree_apply_override(&L.tree, overrides[i], JOB_RAW_KEYS);
    if (!rc) rc = job_walk(&L);
    jtree_free(&L.tree);
    if (rc) {
        job_free(j);
        return rc;
    }
    j->yaml = job_dump_string(j);
    return STATUS_OK;
}

void job_free(job *j) {
    if (!j) return;
    free(j->tokens);
    free(j->text);
    free(j->yaml);
    for (int i = 0; i < j->n_activations && i < JOB_MAX_ACTIVATIONS; i++)
        free(j->activations[i]);
    memset(j, 0, sizeof *j);
}
