/* The checks that need the job's final model shape, which may come from a checkpoint after
 * loading: the mesh against heads, kv heads and layers, the prompt against ctx and vocab, the
 * recorded activations against the layers. */
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "base/intmath.h"
#include "job/job.h"
#include "job/job_internal.h"

/* The keys to blame for a bad prompt, most specific first. Static: the caller keeps them. */
static const char *const *job_input_keys(const job *j) {
    static const char *const synthetic[] = {"input.synthetic.length", "input.synthetic", "input",
                                            NULL};
    static const char *const tokens_file[] = {"input.tokens_file", "input", NULL};
    static const char *const text_file[] = {"input.text_file", "input", NULL};
    static const char *const text[] = {"input.text", "input", NULL};
    static const char *const tokens[] = {"input.tokens", "input", NULL};
    if (j->synthetic_input) return synthetic;
    if (j->tokens_file[0]) return tokens_file;
    if (j->text_file[0]) return text_file;
    if (j->text) return text;
    return tokens;
}

/* Expert parallelism splits the experts of each layer over ep ranks of one pipeline stage
 * (docs/jobs.md, "Expert parallelism"): inside the TP group when ep divides tp, each expert
 * then tensor-split over tp / ep ranks; or over ep / tp replicas of it, each rank holding its
 * experts whole and tokens moving by all-to-all. So ep must divide tp or be a multiple of it
 * that divides dp * tp, ep must divide the experts, and the model must have experts. */
static int job_validate_ep(const job *j) {
    if (j->ep == 1) return STATUS_OK;
    if (!arch_is_moe(j->arch))
        return job_fail_at(j, KEYS("parallel.ep", "parallel", "model.arch", "model"),
                           "parallel.ep = %d needs a mixture-of-experts model (model.arch mixtral "
                           "or qwen2_moe); model.arch %s has no experts to split: use ep 1",
                           j->ep, arch_kind_name(j->arch));
    char fits[256] = "";
    const int span = j->dp * j->tp;
    for (int d = 1; d <= span; d++)
        if (span % d == 0 && j->experts % d == 0 && (j->tp % d == 0 || d % j->tp == 0)) {
            size_t used = strlen(fits);
            snprintf(fits + used, sizeof fits - used, "%s%d", used ? ", " : "", d);
        }
    if (j->tp % j->ep && j->ep % j->tp)
        return job_fail_at(j, KEYS("parallel.ep", "parallel"),
                           "parallel.ep = %d neither divides parallel.tp = %d nor is a multiple of "
                           "it: the experts are split over ep ranks of each TP group (ep divides "
                           "tp) or over ep / tp replicas of it (ep a multiple of tp); ep values "
                           "that work with dp %d, tp %d and %d experts: %s",
                           j->ep, j->tp, j->dp, j->tp, j->experts, fits);
    if (j->ep > j->tp && j->dp % (j->ep / j->tp))
        return job_fail_at(j, KEYS("parallel.ep", "parallel", "parallel.dp"),
                           "parallel.ep = %d spans ep / tp = %d replicas, which does not divide "
                           "parallel.dp = %d: EP groups are carved from dp x tp = %d ranks of "
                           "each pipeline stage; ep values that work with dp %d, tp %d and %d "
                           "experts: %s",
                           j->ep, j->ep / j->tp, j->dp, span, j->dp, j->tp, j->experts, fits);
    if (j->experts % j->ep)
        return job_fail_at(j, KEYS("parallel.ep", "parallel", "model.synthetic.experts"),
                           "parallel.ep = %d does not divide model.experts = %d: experts are "
                           "split evenly over the ep ranks; ep values that work with dp %d, tp %d "
                           "and %d experts: %s",
                           j->ep, j->experts, j->dp, j->tp, j->experts, fits);
    return STATUS_OK;
}

int mlp_split_unit(int mlp, int shared_mlp, precision_kind p, int int8_group) {
    const int width = shared_mlp > 0 ? int_gcd(mlp, shared_mlp) : mlp;
    if (p != PRECISION_INT8W && !precision_is_block(p)) return 1;
    if (p == PRECISION_INT8W && int8_group > 0 && width % int8_group == 0) return int8_group;
    const int unit = precision_is_block(p) ? precision_block_cols(p) : 32;
    return width % unit == 0 ? unit : 1;
}

/* Every TP rank holds at least one unit of the MLP (mlp_split_unit) and of a shared expert: a
 * width of 64 in 32-column units cannot give 3 ranks a block each. Names the tp values that
 * work. */
static int job_validate_mlp_units(const job *j) {
    const int mlp = j->mlp > 0 ? j->mlp : 4 * j->embd, shared = j->shared_expert_mlp;
    const int unit = mlp_split_unit(mlp, shared, j->precision, j->int8_group);
    const int units = shared > 0 && shared < mlp ? shared / unit : mlp / unit;
    if (unit == 1 || units >= j->tp) return STATUS_OK;
    char fits[256] = "";
    for (int t = 1; t <= j->heads && t <= units; t++)
        if (j->heads % t == 0) {
            const size_t used = strlen(fits);
            snprintf(fits + used, sizeof fits - used, "%s%d", used ? ", " : "", t);
        }
    return job_fail_at(j, KEYS("parallel.tp", "parallel"),
                       "parallel.tp = %d splits the %s width %d into units of %d columns "
                       "(model.precision %s%s), %d of them, so a rank would hold none; tp values "
                       "that work: %s",
                       j->tp, shared > 0 && shared < mlp ? "shared expert's" : "MLP",
                       shared > 0 && shared < mlp ? shared : mlp, unit,
                       precision_kind_name(j->precision),
                       j->precision == PRECISION_INT8W && j->int8_group == unit ? ", model.int8_group"
                                                                                : "",
                       units, fits);
}

/* What else a width that is not whole blocks of p allows: the 32-column formats where it is
 * whole blocks of 32 (q4_k's 256 is eight of them). */
static const char *blocks_allowed(int width) {
    return width % 32 == 0 ? "fp32, int8w, bf16, fp16, q8_0, q4_0, q4_1"
                           : "fp32, int8w, bf16, fp16";
}

/* The block formats (q8_0, q4_0, q4_1: 32 columns; q4_k: 256) hold each weight row as whole
 * blocks, so every matrix's input, and every TP rank's part of a split one, is a whole number
 * of blocks: the attention width splits by heads (each rank heads / tp of them), the MLP width
 * in units of a block (model_mlp_unit), embd never. Names the tensor and the tp values that
 * work. */
static int job_validate_blocks(const job *j) {
    if (!precision_is_block(j->precision)) return STATUS_OK;
    const char *p = precision_kind_name(j->precision);
    const int bc = precision_block_cols(j->precision);
    const int hd = j->head_dim > 0 ? j->head_dim : j->embd / j->heads;
    const int mlp = j->mlp > 0 ? j->mlp : 4 * j->embd;
    const char *const *shape = KEYS("model.synthetic.embd", "model.synthetic.mlp",
                                    "model.checkpoint", "model.synthetic", "model");
    if (j->embd % bc)
        return job_fail_at(j, shape,
                           "model.precision: %s stores weight rows in blocks of %d columns, but "
                           "model.embd = %d (the input of qkv_w, fc1_w and the head) is not a "
                           "multiple of %d; allowed with it: %s",
                           p, bc, j->embd, bc, blocks_allowed(j->embd));
    if (mlp % bc)
        return job_fail_at(j, shape,
                           "model.precision: %s stores weight rows in blocks of %d columns, but "
                           "the MLP width %d (the input of fc2_w) is not a multiple of %d; "
                           "allowed with it: %s",
                           p, bc, mlp, bc, blocks_allowed(mlp));
    if (j->shared_expert_mlp % bc)
        return job_fail_at(j, KEYS("model.synthetic.shared_expert_mlp", "model.checkpoint",
                                   "model.synthetic", "model"),
                           "model.precision: %s stores weight rows in blocks of %d columns, but "
                           "the shared expert's width %d is not a multiple of %d; allowed with "
                           "it: %s",
                           p, bc, j->shared_expert_mlp, bc, blocks_allowed(j->shared_expert_mlp));
    if ((long)(j->heads / j->tp) * hd % bc == 0) return STATUS_OK;
    char fits[256] = "";
    for (int t = 1; t <= j->heads; t++)
        if (j->heads % t == 0 && (long)(j->heads / t) * hd % bc == 0) {
            size_t used = strlen(fits);
            snprintf(fits + used, sizeof fits - used, "%s%d", used ? ", " : "", t);
        }
    return job_fail_at(j, KEYS("parallel.tp", "parallel"),
                       "parallel.tp = %d splits proj_w's input (model.heads = %d heads of %d) "
                       "into %d columns per rank, not a whole number of %s's %d-column blocks; "
                       "tp values that work: %s",
                       j->tp, j->heads, hd, j->heads / j->tp * hd, p, bc, fits[0] ? fits : "none");
}

int job_validate_model(const job *j) {
    const char *const *model = KEYS("model.checkpoint", "model.synthetic", "model");
    if (j->layers < 1 || j->heads < 1 || j->embd < 1 || j->vocab < 2 || j->ctx < 1)
        return job_fail_at(j, model,
                           "model shape unknown or invalid: layers %d, heads %d, "
                           "embd %d, vocab %d, ctx %d",
                           j->layers, j->heads, j->embd, j->vocab, j->ctx);
    /* an explicit Llama head_dim frees the heads from splitting embd */
    if (j->embd % j->heads && !(arch_is_llama(j->arch) && j->head_dim > 0))
        return job_fail_at(j,
                           KEYS("model.synthetic.heads", "model.synthetic.embd", "model.checkpoint",
                                "model.synthetic", "model"),
                           "model.heads = %d does not divide model.embd = %d", j->heads, j->embd);
    if (arch_is_moe(j->arch) && j->backend == BACKEND_CUDA)
        return job_fail_at(j, KEYS("backend.kind", "backend", "model.arch", "model"),
                           "model.arch: %s is not supported on the cuda backend yet (its experts "
                           "run on the cpu backend); allowed with mixtral and qwen2_moe: "
                           "backend.kind cpu",
                           arch_kind_name(j->arch));
    if (j->heads % j->tp)
        return job_fail_at(j, KEYS("parallel.tp", "parallel"),
                           "parallel.tp = %d does not divide model.heads = %d (tensor parallelism "
                           "splits attention by heads)",
                           j->tp, j->heads);
    if (arch_is_llama(j->arch) && j->head_dim > 0 && j->head_dim % 2)
        return job_fail_at(j, KEYS("model.synthetic.head_dim", "model.checkpoint", "model"),
                           "model.synthetic.head_dim = %d is odd; RoPE rotates pairs of a head's "
                           "dimensions, so a Llama head dimension must be even",
                           j->head_dim);
    if (arch_is_llama(j->arch) && j->head_dim <= 0 && (j->embd / j->heads) % 2)
        return job_fail_at(j,
                           KEYS("model.synthetic.heads", "model.synthetic.embd", "model.checkpoint",
                                "model.synthetic", "model"),
                           "model.embd / model.heads = %d is odd; RoPE rotates pairs of a head's "
                           "dimensions, so a Llama head dimension must be even (or set "
                           "model.synthetic.head_dim)",
                           j->embd / j->heads);
    const int kv = j->kv_heads > 0 ? j->kv_heads : j->heads;
    if (kv % j->tp && j->tp % kv) {
        /* Megatron's rule: split the kv heads over tp, or replicate each over tp / kv ranks. */
        char fits[256] = "";
        for (int t = 1; t <= j->heads; t++)
            if (j->heads % t == 0 && (kv % t == 0 || t % kv == 0)) {
                size_t used = strlen(fits);
                snprintf(fits + used, sizeof fits - used, "%s%d", used ? ", " : "", t);
            }
        return job_fail_at(j, KEYS("parallel.tp", "parallel"),
                           "parallel.tp = %d does not fit model.kv_heads = %d: tp must divide "
                           "the kv heads or be a multiple of them; tp values that work: %s",
                           j->tp, kv, fits);
    }
    TRY(job_validate_blocks(j));
    TRY(job_validate_mlp_units(j));
    TRY(job_validate_ep(j));
    if (j->pp > j->layers)
        return job_fail_at(j, KEYS("parallel.pp", "parallel"),
                           "parallel.pp = %d is more than model.layers = %d (every pipeline stage "
                           "needs a layer)",
                           j->pp, j->layers);
    if (j->top_k > j->vocab)
        return job_fail_at(j, KEYS("generate.top_k", "generate"),
                           "generate.top_k = %d is more than model.vocab = %d", j->top_k, j->vocab);
    if (j->prompt_len > 0 && (long)j->prompt_len + j->new_tokens > j->ctx) {
        /* the prompt's keys, new_tokens and ctx all meet here: new_tokens first, unless the
         * command line set another of them (job_fail_at) */
        const char *keys[8] = {"generate.new_tokens"};
        int n = 1;
        for (const char *const *k = job_input_keys(j); *k && n < 5; k++)
            keys[n++] = *k;
        keys[n++] = "model.synthetic.ctx";
        keys[n] = NULL;
        return job_fail_at(j, keys, "prompt of %d tokens plus %d new tokens exceeds model.ctx = %d",
                           j->prompt_len, j->new_tokens, j->ctx);
    }
    for (long i = 0; j->tokens && i < (long)j->batch * j->prompt_len; i++)
        if (j->tokens[i] < 0 || j->tokens[i] >= j->vocab)
            return job_fail_at(j, job_input_keys(j),
                               "input: prompt %ld position %ld: token id %d is not below "
                               "model.vocab = %d",
                               i / j->prompt_len, i % j->prompt_len, j->tokens[i], j->vocab);
    for (int i = 0; i < j->n_activations; i++) {
        long layer = job_activation_layer(j->activations[i]);
        if (layer >= j->layers)
            return job_fail_at(j, KEYS("record.activations", "record"),
                               "record.activations: '%s' names layer %ld but the model has %d "
                               "layers (0 to %d)",
                               j->activations[i], layer, j->layers, j->layers - 1);
    }
    return STATUS_OK;
}
