/* A job: the validated, resolved contents of a YAML job file plus --set overrides.
 * Every key of docs/jobs.md has a field here; job_load fills defaults for absent keys. */
#pragma once
#include <stdint.h>
#include <stdio.h>


#ifdef __cplusplus
extern "C" {
#endif

#define JOB_PATH_MAX 1024
#define JOB_MAX_ACTIVATIONS 64
#define JOB_MAX_KEYS 128
#define JOB_TELEMETRY_MAX_HZ 1000 /* record.telemetry: above it sampling would perturb the run */

/* Where a dotted key was set, so checks made after loading can point at it: line in the job
 * file, or the --set text (truncated) when an override set it. */
typedef struct {
    char key[48];
    int line;
    char set[104];
} job_key_where;

typedef enum { NORM_PRE = 0, NORM_POST = 1 } norm_kind;
/* mixtral and qwen2_moe are Llama attention with a sparse mixture-of-experts feed-forward
 * (docs/jobs.md, "Mixture of experts"); everything but the MLP is Llama's. */
typedef enum { ARCH_GPT2 = 0, ARCH_LLAMA = 1, ARCH_MIXTRAL = 2, ARCH_QWEN2_MOE = 3 } arch_kind;
#define ARCH_KINDS 4
/* Whether an architecture has Llama's layers (RMSNorm, RoPE, GQA, untied head allowed). */
static inline int arch_is_llama(arch_kind a) { return a != ARCH_GPT2; }
/* Whether its feed-forward is a mixture of experts. */
static inline int arch_is_moe(arch_kind a) { return a == ARCH_MIXTRAL || a == ARCH_QWEN2_MOE; }
/* q8_0, q4_0, q4_1, q4_k: ggml's block formats, held as ggml lays them out (docs/kernels.md). */
typedef enum {
    PRECISION_FP32 = 0,
    PRECISION_INT8W,
    PRECISION_BF16,
    PRECISION_FP16,
    PRECISION_Q8_0,
    PRECISION_Q4_0,
    PRECISION_Q4_1,
    PRECISION_Q4_K,
} precision_kind;
/* The block formats: their matrices split their input only on block boundaries. */
static inline int precision_is_block(precision_kind p) { return p >= PRECISION_Q8_0; }
/* Columns of one block of a block format (q4_k's super-block: 256; the others 32). */
static inline int precision_block_cols(precision_kind p) { return p == PRECISION_Q4_K ? 256 : 32; }
typedef enum { KV_CONTIGUOUS = 0, KV_PAGED = 1 } kv_cache_kind;
/* The KV cache's element type (model.kv_dtype; its "auto" resolves with kv_dtype_for). */
typedef enum { KV_DTYPE_FP32 = 0, KV_DTYPE_BF16, KV_DTYPE_FP16, KV_DTYPE_INT8 } kv_dtype_kind;
typedef enum { BACKEND_CPU = 0, BACKEND_CUDA = 1 } backend_kind;
typedef enum { COMM_AUTO = 0, COMM_MPI = 1, COMM_NCCL = 2 } comm_kind;
typedef enum { SAMPLING_GREEDY = 0, SAMPLING_SAMPLE = 1 } sampling_kind;
typedef enum { TIMINGS_OFF = 0, TIMINGS_STEP = 1, TIMINGS_LAYER = 2 } timings_level;

typedef struct {
    /* model */
    char checkpoint[JOB_PATH_MAX]; /* "" when synthetic */
    char tokenizer[JOB_PATH_MAX];  /* tokenizer.json or vocab.json; "" = the checkpoint's */
    int synthetic;                 /* 1 when model.synthetic was given (or defaulted) */
    int layers, heads, embd, vocab, ctx;
    int mlp;                       /* MLP width; 0 in the file means 4 * embd (resolved here) */
    uint64_t seed;                 /* synthetic weight seed */
    char preset[32];               /* model.synthetic.preset, "" when none */
    arch_kind arch;
    int arch_given;                /* model.arch was written (a checkpoint's must then match) */
    int kv_heads;                  /* llama: heads of the KV cache; gpt2: = heads */
    int head_dim;                  /* llama: a head's width; 0 = embd / heads (gpt2 always) */
    float rope_theta;              /* llama */
    int rope_scaling;              /* llama: 1 when rope_scaling (Llama 3.1's "llama3") is set */
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int rope_original_ctx;         /* rope_scaling.original_max_position_embeddings */
    int tie_embeddings;            /* llama: LM head = wte; gpt2: always 1 */
    int attention_bias;            /* llama from a checkpoint: q/k/v biases (Qwen2); else 0 */
    int experts;                   /* mixtral, qwen2_moe: routed experts per layer; else 0 */
    int experts_top_k;             /* experts each token is routed to */
    int shared_expert_mlp;         /* qwen2_moe: the shared expert's width, 0 = none */
    int norm_topk_prob;            /* the chosen k weights renormalised to sum 1 (Mixtral) */
    float ln_eps;                  /* eps of the norm, LayerNorm or RMSNorm (rms_norm_eps) */
    norm_kind norm;
    precision_kind precision;
    int int8_group;                /* int8w: weight columns per scale, 0 = one scale per row */
    int quantize_head;             /* the LM head in the weight precision (1) or fp32 (0); -1 =
                                      auto: an untied head is, a tied one (wte) is not */
    kv_cache_kind kv_cache;
    int kv_block;                  /* positions per KV block when paged */
    kv_dtype_kind kv_dtype;        /* the cache's type, resolved (kv_dtype_for) when auto */
    int kv_dtype_auto;             /* model.kv_dtype was auto (or left out): it follows the
                                      precision, also one a checkpoint gives later */
    int verify_checksums;          /* HDF5 checks each checkpoint chunk's Fletcher32 checksum as
                                      it reads it (docs/checkpoint.md, "Integrity") */

    /* backend */
    backend_kind backend;
    int threads;                   /* cpu threads per rank (kernels and BLAS); 0 = node
                                      cores / ranks on node */
    int cpu_isa;                   /* index into job_cpu_isa_names(): 0 = auto (the best) */
    int device;                    /* -1 = local rank modulo visible devices */
    comm_kind comm;
    int cuda_graphs;
    int allow_tf32;
    int memory_check;              /* compare the plan with the memory a rank can have before
                                      allocating (docs/jobs.md, "Memory check") */

    /* parallel */
    int dp, tp, pp;
    /* expert parallelism: the experts split over ep ranks of each TP group (docs/jobs.md) */
    int ep;
    int microbatches;
    char order[16];                /* e.g. "tp-pp-dp" */
    int overlap;
    int chunks;
    int mpi_tuning; /* 1 (auto): set the MPI variables overlap needs
                       (parallel/mpi_tuning.h); 0 (off): leave MPI's own */

    /* input: resolved to batch prompts of prompt_len tokens each */
    int32_t *tokens;               /* (batch, prompt_len), owned */
    int batch, prompt_len;
    char tokens_file[JOB_PATH_MAX];
    char *text;                    /* input.text, owned; tokenized when a tokenizer exists */
    char text_file[JOB_PATH_MAX];
    int synthetic_input;           /* 1 when input.synthetic */
    int chat;                      /* input.chat: the text is one user turn of the model's chat
                                      template (io/chat.h) */
    uint64_t input_seed;

    /* generate */
    int new_tokens;
    sampling_kind sampling;
    float temperature;
    int top_k;                     /* 0 = whole vocab */
    uint64_t sample_seed;
    int stop_at_eos;               /* -1 = auto (on when there is an eos id), 0, 1 */
    int eos_id_given;              /* generate.eos_id, -1 = the checkpoint's eos_token_id */
    int32_t eos_id;                /* resolved with the tokenizer: the id that ends a sequence,
                                      -1 = generation runs new_tokens steps */

    /* perplexity: score the text instead of generating (docs/jobs.md); window 0 = off */
    int perplexity_window;         /* tokens per chunk, llama-perplexity's -c */
    int perplexity_chunks;         /* at most this many chunks, 0 = every whole one (--chunks) */

    /* bench */
    int warmup, iterations;
    int roofline;                  /* also measure sgemm and memory-bandwidth ceilings */
    float arrival_rate;            /* requests/s of the Poisson arrival stream; 0 = off */
    float duration;                /* seconds over which requests arrive */
    uint64_t arrival_seed;         /* seed of the arrival times */

    /* record */
    char out[JOB_PATH_MAX];
    char *activations[JOB_MAX_ACTIVATIONS]; /* owned strings: embed, layer.N.attn, ... */
    int n_activations;
    timings_level timings;
    int flush_every;               /* steps between timing flushes, 0 = only at the end */
    int flush_seconds;             /* seconds between timing flushes (rank 0's clock), 0 = off */
    int stop_grace_seconds;        /* after SIGTERM/SIGINT, how long a rank may take to agree on
                                      the stop before it exits by itself (a lost peer never lets
                                      it agree); 0 = no limit */
    int telemetry_hz;              /* telemetry samples per second per rank, 0 = off */
    int sched;                     /* record.sched: preemption per step into /sched */
    int stall_seconds;             /* the stall watchdog's least timeout (parallel/watchdog.h):
                                      a rank with no progress for the larger of this and 20x
                                      the slowest step reports and ends the run; 0 = off */
#define JOB_STALL_SECONDS_DEFAULT 60

    /* provenance, for error messages after loading */
    char source[JOB_PATH_MAX];     /* the job file path */
    char *yaml;                    /* the resolved job as YAML (job_dump), owned */
    job_key_where keys[JOB_MAX_KEYS]; /* for job_key_line and error messages */
    int n_keys;
} job;

/* Loads path, applies overrides ("section.key=value", parsed as YAML scalars or flow
 * sequences), validates every key and fills defaults. On error returns STATUS_BAD_INPUT with
 * error_message() = "file:line: message" naming the allowed keys or values. */
int job_load(job *j, const char *path, const char *const *overrides, int n_overrides);
void job_free(job *j);

/* Checks the parts that need the final model shape (which may come from a checkpoint):
 * prompt_len + new_tokens <= ctx, token ids < vocab, heads divide embd. Same error format. */
int job_validate_model(const job *j);

/* Where a dotted key was set, for messages: "FILE:LINE", "--set KEY=VALUE", or "FILE" when
 * the key took its default. Writes into buf and returns it. */
const char *job_key_origin(const job *j, const char *key, char *buf, size_t len);

/* Whether a dotted key was set (in the file, by --set or --sweep), not left to its default:
 * a checkpoint's stored precision fills model.precision only when the job does not set it. */
int job_key_given(const job *j, const char *key);

/* The line in the job file where a dotted key ("parallel.tp") was set, or 0. */
int job_key_line(const job *j, const char *key);

/* Writes the resolved job as YAML (every key, defaults included). */
void job_dump(const job *j, FILE *out);
/* Same, into a newly allocated string. */
char *job_dump_string(const job *j);

/* Fills tokens (batch, prompt_len) of an input.synthetic job once the vocab is known:
 * token[i] = mix64(input_seed + 0x9E3779B97F4A7C15 * (i + 1)) % vocab, i the flat index.
 * job_load calls it for synthetic models; for checkpoints the runner calls it. */
void job_fill_synthetic_tokens(job *j, int vocab);

/* 1 when the dotted key takes a path (model.checkpoint, model.tokenizer, input.tokens_file,
 * input.text_file). */
int job_key_is_path(const char *key);

/* 1 when record.activations asks for this point ("embed", "layer.3.mlp", ...), "all" included. */
int job_records_activation(const job *j, const char *point);

const char *norm_kind_name(norm_kind k);
const char *arch_kind_name(arch_kind k);
const char *precision_kind_name(precision_kind k);
/* MLP columns move between TP ranks in units of this many: int8w's weight group or 32 (its
 * activation blocks) when the width allows, else single columns (the down projection then keeps
 * fp32 activations); the block for the block formats (32; q4_k's 256); 1 in 16-bit and fp32.
 * A shared expert (shared_mlp > 0) moves in the same units as the routed experts. The unit
 * depends on the model alone, never on the mesh, so every factorization quantises the same
 * blocks. */
int mlp_split_unit(int mlp, int shared_mlp, precision_kind p, int int8_group);
/* backend.cpu_isa's values: "auto" then the CPU backend's instruction-set levels, from the
 * lowest (kernels/cpu/cpu_isa.h names them alike; a unit test checks), NULL-terminated. */
const char *const *job_cpu_isa_names(void);
const char *kv_cache_kind_name(kv_cache_kind k);
const char *kv_dtype_kind_name(kv_dtype_kind k); /* "fp32", "bf16", "fp16", "int8" */
/* model.kv_dtype: auto's choice for weights in precision p: the weights' own 16-bit type for
 * bf16 and fp16, fp32 for fp32 and int8w (docs/jobs.md, "KV cache type", says why). */
kv_dtype_kind kv_dtype_for(precision_kind p);
/* --kv-dtype / model.kv_dtype text to a type; "auto" gives kv_dtype_for(p). -1 when unknown. */
int kv_dtype_parse(const char *name, precision_kind p);
const char *backend_kind_name(backend_kind k);
const char *comm_kind_name(comm_kind k);
const char *sampling_kind_name(sampling_kind k);
const char *timings_level_name(timings_level k);

#ifdef __cplusplus
}
#endif
