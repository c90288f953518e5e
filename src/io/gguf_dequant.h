/* ggml tensor types that GGUF files carry, their block layout, and dequantization to fp32,
 * bit for bit as gguf-py's numpy dequantizers (gguf.quants) compute it. */
#pragma once
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ggml type ids, as stored in GGUF tensor infos (only those tripar reads). */
enum {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_BF16 = 30,
};

/* One block of block_elems values stored in block_bytes bytes. */
typedef struct {
    const char *name;
    uint32_t block_elems;
    uint32_t block_bytes;
    void (*dequant)(const uint8_t *block, float *out); /* one block */
} gguf_qtype;

/* The layout of ggml type id, or NULL when tripar does not read it. */
const gguf_qtype *gguf_qtype_get(uint32_t type);
/* The list of readable type names, for messages ("F32, F16, ..."). */
const char *gguf_qtype_names(void);

/* Dequantizes n_blocks consecutive blocks of src into dst. */
void gguf_dequant(const gguf_qtype *q, const uint8_t *src, uint64_t n_blocks, float *dst);

#ifdef __cplusplus
}
#endif
