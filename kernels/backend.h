/* The compute-backend boundary: every op the forward pass needs, in plain C types.
 * Pointers passed to ops are backend memory (host memory for cpu, device memory for cuda).
 * Each backend fills a struct backend_ops; the runner picks one by name at run time
 * (backend_init, through the table in kernels/backend.c). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
    DTYPE_F32 = 0,
    DTYPE_INT8 = 1, /* weight-only INT8, one float scale per output channel (row) */
    DTYPE_BF16 = 2,
    DTYPE_F16 = 3,
    /* ggml's block formats (kernels/quant_blocks.h): 32 weights of a row per block (q4_k:
     * 256, eight sub-blocks of 32), each block an fp16 scale d (and for q4_1 an fp16 min m)
     * beside its quants. */
    DTYPE_Q8_0 = 4, /* 34 bytes per block: d, 32 int8 q; value q * d */
    DTYPE_Q4_0 = 5, /* 18 bytes per block: d, 16 bytes of nibbles; value (q - 8) * d */
    DTYPE_Q4_1 = 6, /* 20 bytes per block: d, m, 16 bytes of nibbles; value q * d + m */
    /* 144 bytes per 256: d, dmin, 12 bytes of 6-bit scales sc and mins mn per 32, 128 bytes
     * of nibbles; value (d * sc) * q - dmin * mn */
    DTYPE_Q4_K = 7,
} dtype;

size_t dtype_size(dtype type); /* bytes per element; 0 for the block formats */
/* Bytes of n consecutive elements of a row: n * dtype_size, or whole blocks for the block
 * formats (n a multiple of qblock_weights there). */
size_t dtype_bytes(dtype type, size_t n);
/* Whether type is one of ggml's block formats. */
static inline int dtype_is_block(dtype type) { return type >= DTYPE_Q8_0; }
const char *dtype_name(dtype type);

/* A weight matrix of shape (rows, cols), row-major, used as y = x @ W^T (PyTorch Linear layout).
 * rows is the output dimension. For DTYPE_INT8, value = data[r][c] * scale[r] with one scale
 * per row (group 0), or data[r][c] * scale[r][c / group] with one per group of `group`
 * consecutive columns (the last group of a row shorter when group does not divide cols).
 * act_block (DTYPE_INT8, cpu backend): the block of activation values that share one int8
 * scale when the cpu quantises activations (kernels/cpu/matmul.c); 0 keeps them fp32. */
typedef struct {
    dtype type;
    const void *data;   // (rows, cols) of `type`
    const float *scale; // DTYPE_INT8: (rows) when group is 0, else (rows, ceil(cols / group))
    int group;          // DTYPE_INT8: columns per scale, 0 for one scale per row
    int act_block;      // DTYPE_INT8: activation values per int8 scale on the cpu, 0 for fp32
} weight_view;

/* One layer's KV cache for the sequences a rank holds, for its local heads. Grouped-query
 * attention: the cache stores kv_heads heads, and query head h (of heads) reads kv head
 * h / (heads / kv_heads); kv_heads == heads is plain multi-head attention (GPT-2), and
 * kv_heads must divide heads.
 * contiguous: k, v are (batch, kv_heads, max_ctx) rows.
 * paged:      k, v are pools (num_blocks, kv_heads, block_size) rows and block_table is
 *             (batch, max_ctx / block_size) block ids, so a sequence's keys are scattered.
 * A row is one (position, kv head)'s head_dim values in `type`, kv_row_bytes(type, head_dim)
 * bytes: DTYPE_F32, DTYPE_BF16 and DTYPE_F16 hold the values alone; DTYPE_INT8 holds
 * head_dim int8 values q, padded to a multiple of 4 bytes, then one fp32 scale s, and the value
 * is q * s (s = max |x| / 127 over the row, q = round(x / s): kernels/quant.h's per-row rule).
 * The scale is per (position, kv head) because a row is written once, when its token arrives:
 * a per-block scale would have to be fixed before the block's later rows exist, or rewrite
 * rows already attended to, and a contiguous and a paged cache would then differ. */
typedef struct {
    void *k;
    void *v;
    const int32_t *block_table; // NULL when contiguous
    int block_size;             // positions per block (paged only)
    int blocks_per_seq;         // columns of block_table (paged only)
    int max_ctx;
    int heads;    // query heads served
    int kv_heads; // heads stored: a divisor of heads
    int head_dim;
    dtype type;   // of the cached values: DTYPE_F32 (zero), DTYPE_BF16, DTYPE_F16, DTYPE_INT8
} kv_view;

/* Bytes of one cache row (one position of one kv head) of head_dim values in type. */
size_t kv_row_bytes(dtype type, int head_dim);

typedef struct backend_ops {
    const char *name;

    /* Frees the context: its workspaces, timing marks, streams and handles. Release what alloc
     * returned first (the cuda backend frees leftovers, the cpu cannot). Callers use
     * backend_free, which also clears the backend. */
    void (*free)(void *ctx);

    /* memory: alloc returns zeroed backend memory of at least bytes, aligned to 64 */
    void *(*alloc)(void *ctx, size_t bytes);
    void (*release)(void *ctx, void *ptr);
    void (*copy_to_device)(void *ctx, void *dst, const void *src, size_t bytes);
    void (*copy_to_host)(void *ctx, void *dst, const void *src, size_t bytes);
    void (*memset_zero)(void *ctx, void *dst, size_t bytes);
    /* waits for all work queued on the compute stream */
    void (*synchronize)(void *ctx);
    /* peak backend memory in bytes since this backend started (host RSS for cpu, device bytes
     * for cuda): a sweep point reports its own, not an earlier point's */
    size_t (*peak_memory)(void *ctx);

    /* out[r] = (tok in [vocab_begin, vocab_end) ? wte[tok - vocab_begin] : 0)
     *        + (wpe ? wpe[pos0 + r % n_new] : 0)
     * out (rows, C); tokens (rows); wte (vocab_end - vocab_begin, C); wpe (ctx, C) or NULL.
     * The rows are sequences of n_new tokens each (rows a multiple of n_new), at positions
     * pos0 .. pos0 + n_new - 1: positions are arguments, so a decode step copies no positions
     * array to the device. Vocab-parallel: each TP rank adds its shard; an all-reduce
     * completes the sum. */
    void (*embed)(void *ctx, float *out, const int32_t *tokens, const float *wte, const float *wpe,
                  int rows, int C, int n_new, int pos0, int vocab_begin, int vocab_end);

    /* out = LayerNorm(in) * gamma + beta over the last dim; out, in (rows, C) */
    void (*layernorm)(void *ctx, float *out, const float *in, const float *gamma, const float *beta,
                      int rows, int C, float eps);

    /* residual += delta, then norm_out = LayerNorm(residual); all (rows, C). Fused so the
     * residual stream is read once. norm_out may be NULL (add only). */
    void (*residual_layernorm)(void *ctx, float *residual, float *norm_out, const float *delta,
                               const float *gamma, const float *beta, int rows, int C, float eps);

    /* out (rows, out_dim) = in (rows, in_dim) @ W^T + bias; W is (out_dim, in_dim); bias may be
     * NULL. Any weight dtype; fp32 accumulate. */
    void (*matmul)(void *ctx, float *out, const float *in, weight_view w, const float *bias,
                   int rows, int in_dim, int out_dim);

    /* inout (rows, cols) = gelu_tanh(inout + bias); bias (cols) may be NULL */
    void (*bias_gelu)(void *ctx, float *inout, const float *bias, int rows, int cols);

    /* out = in * rsqrt(mean(in^2) + eps) * w over the last dim (RMSNorm, Llama); out, in
     * (rows, C), w (C). */
    void (*rmsnorm)(void *ctx, float *out, const float *in, const float *w, int rows, int C,
                    float eps);

    /* residual += delta, then norm_out = RMSNorm(residual); all (rows, C). The calling
     * convention of residual_layernorm: fused so the residual stream is read once, norm_out
     * may be NULL (add only) and must not alias residual. */
    void (*residual_rmsnorm)(void *ctx, float *residual, float *norm_out, const float *delta,
                             const float *w, int rows, int C, float eps);

    /* out (rows, cols) = silu(gate) * up, silu(g) = g / (1 + exp(-g)). gate_up (rows, 2 * cols)
     * holds each row as [gate | up]: the output of one column-parallel GEMM whose per-rank
     * weight stacks this rank's cols gate rows over its cols up rows ((2 * cols, C)), so a
     * rank's gate and up columns are the same intermediate units. out must not alias
     * gate_up. */
    void (*swiglu)(void *ctx, float *out, const float *gate_up, int rows, int cols);

    /* Mixture of experts: the token rows an expert serves are gathered into one block, and
     * its output rows scattered back weighted (engine/moe.c routes on the host).
     * gather_rows: out (n, C) row i = in row idx[i]; in (rows, C), idx (n) backend memory.
     * scatter_add_rows: out row idx[i] += weight[i] * in row i; in (n, C), idx and weight (n)
     * backend memory; idx holds each row at most once per call (one expert serves a token
     * once), so rows never race. fp32 throughout: the weighted sum is what every TP rank
     * adds before the one all-reduce of the layer. */
    void (*gather_rows)(void *ctx, float *out, const float *in, const int32_t *idx, int n, int C);
    void (*scatter_add_rows)(void *ctx, float *out, const float *in, const int32_t *idx,
                             const float *weight, int n, int C);

    /* Appends the new keys/values of qkv to the cache, then causal attention for the new
     * queries. qkv (batch * n_new, (heads + 2 * kv_heads) * head_dim) laid out [q | k | v],
     * heads contiguous within each (q has cache.heads heads, k and v cache.kv_heads); out
     * (batch * n_new, heads * head_dim). The new tokens of sequence b sit at positions
     * pos0 .. pos0 + n_new - 1 of cache row seq0 + b, and query i attends to positions
     * 0 .. pos0 + i; query head h reads kv head h / (heads / kv_heads).
     * rope_inv_freq (head_dim / 2, backend memory; rope_inv_freq_fill makes it) turns on
     * rotary embeddings, Hugging Face "rotate half" over the whole head: the pair (i,
     * i + head_dim / 2) of q and of k at absolute position p turns by the angle
     * p * rope_inv_freq[i] (computed in double). Keys are rotated as they enter the cache, so
     * the cache holds rotated keys; values are not rotated. NULL: no rotation (GPT-2). */
    void (*attention)(void *ctx, float *out, const float *qkv, kv_view cache,
                      const float *rope_inv_freq, int seq0, int batch, int n_new, int pos0);

    /* For each row, the largest value and its column (first on ties). logits (rows, cols);
     * max_val, max_idx (rows) in backend memory.
     * NaN counts as larger than every number: a row holding a NaN gives its first NaN's
     * column and value NaN, on every backend. Why: it is numpy's and PyTorch's argmax, so a
     * reference run picks the same token; a fault surfaces as a NaN value instead of a
     * plausible token; and with NaN placed in a total order (NaN above +inf, the column
     * breaking ties) a row's argmax is the MAXLOC of its shards' argmaxes, so greedy decoding
     * gives the same token at every tp (comm_mpi_allreduce_maxloc uses the same order). */
    void (*argmax)(void *ctx, float *max_val, int32_t *max_idx, const float *logits, int rows,
                   int cols);

    /* Timing marks on the compute stream, for the phase timer. mark() records "now" as the
     * stream will see it into slot; mark_seconds() returns that time in seconds on the host's
     * monotonic clock once the stream has passed it (synchronising if needed). */
    void (*mark)(void *ctx, int slot);
    double (*mark_seconds)(void *ctx, int slot);

    /* --- optional: NULL when the backend lacks the capability (all NULL on the cpu) -------
     * A caller tests the entry, never the backend's kind, so a new backend with (or without)
     * these capabilities needs no change in the engine or the comm. */

    /* The compute stream (a cudaStream_t as void *). NCCL queues its collectives in order
     * with the ops through it (comm_nccl_init); without one the comm blocks on the host. */
    void *(*stream)(void *ctx);

    /* Graph capture, so a decode step replays as one launch instead of one per op (host
     * overhead is most of a small model's decode time). graph_begin starts capturing
     * everything queued on the compute stream; between begin and end no op may synchronise,
     * copy to the host, grow a workspace (run the same shapes once uncaptured first) or use
     * a host-blocking comm. Returns 0, or non-zero with error_message() set. */
    int (*graph_begin)(void *ctx);
    /* Ends the capture, instantiates it into *graph_exec and launches it once. If *graph_exec
     * already holds an executable graph of the same topology it is updated in place (cheap:
     * e.g. the next decode step, whose position argument differs); otherwise it is replaced.
     * Start with *graph_exec = NULL. Returns 0, or non-zero with error_message() set. */
    int (*graph_end_and_launch)(void *ctx, void **graph_exec);
    /* Replays an executable graph on the compute stream with the arguments it was captured
     * with. */
    void (*graph_launch)(void *ctx, void *graph_exec);
    /* Frees an executable graph (NULL is fine). */
    void (*graph_destroy)(void *ctx, void *graph_exec);

    /* Page-locked host memory, zeroed, for staging backend buffers through MPI: copies from
     * it run at full PCIe/NVLink speed, and plain host memory serves when the entry is NULL.
     * Set-up paths only (pinning is slow); free with host_free (ptr NULL is fine). The memory
     * belongs to the process, not to ctx, so host_free takes ctx NULL after the backend's
     * free: the staged comm may be torn down after the backend. */
    void *(*host_alloc)(void *ctx, size_t bytes);
    void (*host_free)(void *ctx, void *ptr);

    /* Device-wide free and total bytes. Counts memory of every process and library (NCCL,
     * cuBLAS), unlike peak_memory which counts this backend's allocations: for a report of
     * how full the device is. */
    void (*memory_info)(void *ctx, size_t *free_bytes, size_t *total_bytes);

    /* Named ranges for a profiler (NVTX on cuda, so Nsight Systems shows tripar's phases):
     * range_start opens a range called name (a static string) with an integer payload and
     * returns its id for range_end. Ranges need not nest. The phase timer opens one per
     * recorded event, named as in the run file, with the layer as payload. */
    uint64_t (*range_start)(void *ctx, const char *name, int payload);
    void (*range_end)(void *ctx, uint64_t id);

    /* The kernels this backend chose at start-up, in words for the run table and /mesh: the
     * cpu's instruction-set level ("avx512_bf16"). NULL when there is no choice to report. */
    const char *(*kernel_path)(void *ctx);
} backend_ops;

typedef struct {
    const backend_ops *ops;
    void *ctx;
} backend;

typedef struct {
    int threads; /* cpu: threads of the kernels and of BLAS (0 = all the cores OpenMP sees) */
    const char *cpu_isa; /* cpu: instruction-set level to run, NULL or "auto" for the best the
                          * CPU has (kernels/cpu/cpu_isa.h) */
    int device;          /* cuda: device ordinal */
    int allow_tf32;      /* cuda: TF32 tensor cores for fp32 products */
    int max_marks;       /* timing slots to preallocate */
} backend_options;

/* Starts the backend called name ("cpu", "cuda"). Returns 0, or non-zero with
 * error_message() set: an unknown name (the message lists the known ones), no CUDA device, or
 * a build without CUDA. be is cleared first, so backend_free is safe after a failure. */
int backend_init(backend *be, const char *name, const backend_options *opt);
/* Frees the backend through its ops and clears be; NULL, a cleared be and a second call are
 * fine. */
void backend_free(backend *be);

/* 1 when the backend called name drives devices (each rank picks one before backend_init),
 * whether or not any is present; 0 for host backends. */
int backend_drives_devices(const char *name);
/* Devices the backend called name can drive: 0 for cpu, for a build without CUDA, for an
 * unknown name, or when no device is present. Local (no MPI); needs no backend_init. */
int backend_device_count(const char *name);
/* PCI bus id of a device of that backend ("0000:3b:00.0"), or "" when it has none. */
void backend_pci_bus_id(const char *name, int device, char *out, int len);

/* The constructors the table points to; each returns 0, or non-zero with error_message()
 * set. Prefer backend_init. */
int backend_cpu_init(backend *be, const backend_options *opt);
int backend_cuda_init(backend *be, const backend_options *opt);

#ifdef __cplusplus
}
#endif
