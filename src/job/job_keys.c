/* The vocabulary of a job file (docs/jobs.md): its sections and the keys each allows, the
 * names of enum values, the keys that take paths or verbatim --set values, and the activation
 * points of record.activations. The loader checks against these tables and the dump writes
 * with them. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/job.h"
#include "job/job_internal.h"

const char *const JOB_NORM_NAMES[] = {"pre", "post", NULL};
const char *const JOB_ARCH_NAMES[] = {"gpt2", "llama", "mixtral", "qwen2_moe", NULL};
const char *const JOB_PRECISION_NAMES[] = {"fp32", "int8w", "bf16", "fp16",
                                              "q8_0", "q4_0", "q4_1", "q4_k", NULL};
const char *const JOB_KV_CACHE_NAMES[] = {"contiguous", "paged", NULL};
const char *const JOB_KV_DTYPE_NAMES[] = {"auto", "fp32", "bf16", "fp16", "int8", NULL};
const char *const JOB_BACKEND_NAMES[] = {"cpu", "cuda", NULL};
const char *const JOB_COMM_NAMES[] = {"auto", "mpi", "nccl", NULL};
const char *const JOB_SAMPLING_NAMES[] = {"greedy", "sample", NULL};
const char *const JOB_MPI_TUNING_NAMES[] = {"off", "auto", NULL};
const char *const JOB_TIMINGS_NAMES[] = {"off", "step", "layer", NULL};
const char *const JOB_CPU_ISA_NAMES[] = {"auto",        "scalar",      "avx2",     "avx512",
                                         "avx512_vnni", "avx512_bf16", "amx_bf16", NULL};

const char *const JOB_SECTION_KEYS[] = {"model", "backend", "parallel", "input",      "generate",
                                        "bench", "record",  "perplexity", NULL};
const char *const JOB_MODEL_KEYS[] = {"synthetic", "checkpoint", "tokenizer",     "norm",
                                      "precision", "int8_group", "quantize_head", "kv_cache",
                                      "kv_block",  "kv_dtype",   "ln_eps",        "arch",
                                      "verify_checksums", NULL};
const char *const JOB_SYNTHETIC_KEYS[] = {
    "layers",   "heads",      "embd",         "vocab",          "ctx",      "mlp", "seed", "preset",
    "kv_heads", "rope_theta", "rope_scaling", "tie_embeddings", "head_dim", "experts",
    "experts_top_k", "shared_expert_mlp", "norm_topk_prob", NULL};
/* Keys that only a mixture-of-experts model (mixtral, qwen2_moe) has. */
const char *const JOB_MOE_ONLY_KEYS[] = {"experts", "experts_top_k", "shared_expert_mlp",
                                         "norm_topk_prob", NULL};
/* Keys that only a Llama model has. */
const char *const JOB_LLAMA_ONLY_KEYS[] = {"kv_heads",       "rope_theta", "rope_scaling",
                                           "tie_embeddings", "head_dim",   NULL};
const char *const JOB_ROPE_SCALING_KEYS[] = {"factor", "low_freq_factor", "high_freq_factor",
                                             "original_max_position_embeddings", NULL};
const char *const JOB_BACKEND_KEYS[] = {"kind",        "threads", "cpu_isa",      "device", "comm",
                                        "cuda_graphs", "tf32",    "memory_check", NULL};
const char *const JOB_PARALLEL_KEYS[] = {"dp",    "tp",      "pp",     "ep",         "microbatches",
                                         "order", "overlap", "chunks", "mpi_tuning", NULL};
const char *const JOB_INPUT_KEYS[] = {"tokens",    "tokens_file", "text",
                                      "text_file", "synthetic",   NULL};
/* Every key of the input section: one source of JOB_INPUT_KEYS, and how text is read. */
const char *const JOB_INPUT_ALL_KEYS[] = {"tokens",    "tokens_file", "text", "text_file",
                                          "synthetic", "chat",        NULL};
const char *const JOB_INPUT_SYNTHETIC_KEYS[] = {"batch", "length", "seed", NULL};
const char *const JOB_GENERATE_KEYS[] = {"new_tokens", "sampling", "temperature",
                                         "top_k",      "seed",     "stop_at_eos", "eos_id", NULL};
const char *const JOB_BENCH_KEYS[] = {"warmup",   "iterations",   "roofline", "arrival_rate",
                                      "duration", "arrival_seed", NULL};
const char *const JOB_RECORD_KEYS[] = {
    "out",           "activations",        "timings",   "flush_every",
    "flush_seconds", "stop_grace_seconds", "telemetry", "stall_seconds", "sched", NULL};

const char *const JOB_PERPLEXITY_KEYS[] = {"window", "chunks", NULL};

/* Values of these keys are strings taken verbatim from --set (a text may hold ": "). */
const char *const JOB_RAW_KEYS[] = {
    "model.checkpoint", "input.text", "input.tokens_file", "input.text_file", "record.out",
    "model.tokenizer",  NULL};

/* Keys whose value is a path (docs/jobs.md, type "path"). */
static const char *const PATH_KEYS[] = {"model.checkpoint", "input.tokens_file", "input.text_file",
                                        "model.tokenizer", NULL};

int job_key_is_path(const char *key) {
    for (int i = 0; PATH_KEYS[i]; i++)
        if (!strcmp(key, PATH_KEYS[i])) return 1;
    return 0;
}

static const char *enum_name(const char *const *names, int count, int k) {
    return k >= 0 && k < count ? names[k] : "?";
}
const char *norm_kind_name(norm_kind k) { return enum_name(JOB_NORM_NAMES, 2, (int)k); }
const char *arch_kind_name(arch_kind k) { return enum_name(JOB_ARCH_NAMES, ARCH_KINDS, (int)k); }
const char *precision_kind_name(precision_kind k) {
    return enum_name(JOB_PRECISION_NAMES, 8, (int)k);
}
const char *kv_cache_kind_name(kv_cache_kind k) { return enum_name(JOB_KV_CACHE_NAMES, 2, (int)k); }
const char *kv_dtype_kind_name(kv_dtype_kind k) { return enum_name(JOB_KV_DTYPE_NAMES + 1, 4, (int)k); }

kv_dtype_kind kv_dtype_for(precision_kind p) {
    switch (p) {
    case PRECISION_BF16: return KV_DTYPE_BF16;
    case PRECISION_FP16: return KV_DTYPE_FP16;
    case PRECISION_FP32:
    case PRECISION_INT8W:
    case PRECISION_Q8_0:
    case PRECISION_Q4_0:
    case PRECISION_Q4_1:
    case PRECISION_Q4_K: break;
    }
    return KV_DTYPE_FP32;
}

int kv_dtype_parse(const char *name, precision_kind p) {
    for (int i = 0; JOB_KV_DTYPE_NAMES[i]; i++)
        if (!strcmp(name, JOB_KV_DTYPE_NAMES[i])) return i ? i - 1 : (int)kv_dtype_for(p);
    return -1;
}
const char *backend_kind_name(backend_kind k) { return enum_name(JOB_BACKEND_NAMES, 2, (int)k); }
const char *const *job_cpu_isa_names(void) { return JOB_CPU_ISA_NAMES; }
const char *comm_kind_name(comm_kind k) { return enum_name(JOB_COMM_NAMES, 3, (int)k); }
const char *sampling_kind_name(sampling_kind k) { return enum_name(JOB_SAMPLING_NAMES, 2, (int)k); }
const char *timings_level_name(timings_level k) { return enum_name(JOB_TIMINGS_NAMES, 3, (int)k); }

void job_names_join(const char *const *names, char *buf, size_t size) {
    buf[0] = '\0';
    for (int i = 0; names[i]; i++) {
        size_t used = strlen(buf);
        snprintf(buf + used, size - used, "%s%s", i ? ", " : "", names[i]);
    }
}

/* The layer index of "layer.N.attn" / "layer.N.mlp", -1 for embed, final, logits and all,
 * -2 for anything else. */
long job_activation_layer(const char *name) {
    if (!strcmp(name, "embed") || !strcmp(name, "final") || !strcmp(name, "logits") ||
        !strcmp(name, "all"))
        return -1;
    if (strncmp(name, "layer.", 6) != 0 || name[6] < '0' || name[6] > '9') return -2;
    char *end = NULL;
    errno = 0;
    long n = strtol(name + 6, &end, 10);
    if (errno || n > INT_MAX || (name[6] == '0' && end != name + 7)) return -2;
    if (strcmp(end, ".attn") != 0 && strcmp(end, ".mlp") != 0) return -2;
    return n;
}

int job_records_activation(const job *j, const char *point) {
    for (int i = 0; i < j->n_activations; i++)
        if (!strcmp(j->activations[i], "all") || !strcmp(j->activations[i], point)) return 1;
    return 0;
}
