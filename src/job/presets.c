/* The preset table: each row is the model's config.json (Hugging Face) as published.
 * Biases the synthetic Llama path does not model (Qwen2's q/k/v biases) are left out, and
 * sliding windows (Mistral v0.1) are not used: mistral-7b is v0.3's shape. */
#include "job/presets.h"

#include <stdio.h>
#include <string.h>

typedef struct {
    const char *name;
    arch_kind arch;
    int layers, heads, kv_heads, embd, mlp, vocab, ctx;
    float theta, eps;
    int tied;
    int scaled; /* Llama 3.1 rope scaling: factor 8, low 1, high 4, original 8192 */
} preset;

/* Mixture-of-experts presets: the dense columns above plus the routing. I is each routed
 * expert's intermediate size (Mixtral's intermediate_size, Qwen2-MoE's moe_intermediate_size). */
typedef struct {
    preset base;
    int experts, top_k, shared_mlp, norm_topk_prob;
} moe_preset;

// clang-format off
static const preset PRESETS[] = {
    /* name            arch        L    H    KV   C      I      V       ctx     theta     eps    tied scaled */
    {"gpt2-124m",      ARCH_GPT2,  12,  12,  12,  768,   3072,  50257,  1024,   0,        1e-5f, 1,   0},
    {"gpt2-1.5b",      ARCH_GPT2,  48,  25,  25,  1600,  6400,  50257,  1024,   0,        1e-5f, 1,   0},
    {"llama2-7b",      ARCH_LLAMA, 32,  32,  32,  4096,  11008, 32000,  4096,   10000,    1e-5f, 0,   0},
    {"llama2-13b",     ARCH_LLAMA, 40,  40,  40,  5120,  13824, 32000,  4096,   10000,    1e-5f, 0,   0},
    {"llama3-8b",      ARCH_LLAMA, 32,  32,  8,   4096,  14336, 128256, 8192,   500000,   1e-5f, 0,   0},
    {"llama3-70b",     ARCH_LLAMA, 80,  64,  8,   8192,  28672, 128256, 8192,   500000,   1e-5f, 0,   0},
    {"llama3.1-405b",  ARCH_LLAMA, 126, 128, 8,   16384, 53248, 128256, 131072, 500000,   1e-5f, 0,   1},
    {"mistral-7b",     ARCH_LLAMA, 32,  32,  8,   4096,  14336, 32768,  32768,  1000000,  1e-5f, 0,   0},
    {"qwen2-7b",       ARCH_LLAMA, 28,  28,  4,   3584,  18944, 152064, 32768,  1000000,  1e-6f, 0,   0},
};

/* Mixtral-8x22B is v0.1's shape (vocab 32000; the Instruct model's is 32768). */
static const moe_preset MOE_PRESETS[] = {
    /*  name                  arch            L   H   KV  C     I      V       ctx     theta    eps    tied scaled   E   k  shared norm */
    {{"mixtral-8x7b",         ARCH_MIXTRAL,   32, 32, 8,  4096, 14336, 32000,  32768,  1000000, 1e-5f, 0,   0},     8,  2, 0,     1},
    {{"mixtral-8x22b",        ARCH_MIXTRAL,   56, 48, 8,  6144, 16384, 32000,  65536,  1000000, 1e-5f, 0,   0},     8,  2, 0,     1},
    {{"qwen1.5-moe-a2.7b",    ARCH_QWEN2_MOE, 24, 16, 16, 2048, 1408,  151936, 8192,   1000000, 1e-6f, 0,   0},     60, 4, 5632,  0},
    {{"qwen2-57b-a14b",       ARCH_QWEN2_MOE, 28, 28, 4,  3584, 2560,  151936, 131072, 1000000, 1e-6f, 0,   0},     64, 8, 20480, 0},
};
// clang-format on
enum { N_PRESETS = sizeof PRESETS / sizeof PRESETS[0] };
enum { N_MOE_PRESETS = sizeof MOE_PRESETS / sizeof MOE_PRESETS[0] };

/* The preset called name, dense or mixture of experts (*moe set for the latter), or NULL. */
static const preset *preset_find(const char *name, const moe_preset **moe) {
    *moe = NULL;
    for (int i = 0; i < N_PRESETS; i++)
        if (strcmp(PRESETS[i].name, name) == 0) return &PRESETS[i];
    for (int i = 0; i < N_MOE_PRESETS; i++)
        if (strcmp(MOE_PRESETS[i].base.name, name) == 0) {
            *moe = &MOE_PRESETS[i];
            return &MOE_PRESETS[i].base;
        }
    return NULL;
}

int job_preset_apply(job *j, const char *name) {
    const moe_preset *moe = NULL;
    const preset *p = preset_find(name, &moe);
    if (p) {
        j->experts = moe ? moe->experts : 0, j->experts_top_k = moe ? moe->top_k : 0;
        j->shared_expert_mlp = moe ? moe->shared_mlp : 0;
        j->norm_topk_prob = moe ? moe->norm_topk_prob : 0;
        j->arch = p->arch;
        j->layers = p->layers, j->heads = p->heads, j->kv_heads = p->kv_heads;
        j->embd = p->embd, j->mlp = p->mlp, j->vocab = p->vocab, j->ctx = p->ctx;
        j->rope_theta = arch_is_llama(p->arch) ? p->theta : 10000.0f;
        j->ln_eps = p->eps;
        j->tie_embeddings = p->tied;
        j->rope_scaling = p->scaled;
        if (p->scaled) {
            j->rope_factor = 8.0f, j->rope_low_freq_factor = 1.0f, j->rope_high_freq_factor = 4.0f;
            j->rope_original_ctx = 8192;
        }
        return 0;
    }
    return -1;
}

const char *job_preset_list(void) {
    static char list[512];
    if (!list[0])
        for (int i = 0; i < N_PRESETS + N_MOE_PRESETS; i++) {
            size_t used = strlen(list);
            const char *name = i < N_PRESETS ? PRESETS[i].name : MOE_PRESETS[i - N_PRESETS].base.name;
            snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "", name);
        }
    return list;
}
