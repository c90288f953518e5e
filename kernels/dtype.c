/* Element sizes and names of the weight dtypes of backend.h, and the KV cache's row size. */
#include "kernels/backend.h"
#include "kernels/quant_blocks.h"

size_t dtype_size(dtype type) {
    switch (type) {
    case DTYPE_F32: return 4;
    case DTYPE_INT8: return 1;
    case DTYPE_BF16: return 2;
    case DTYPE_F16: return 2;
    case DTYPE_Q8_0:
    case DTYPE_Q4_0:
    case DTYPE_Q4_1:
    case DTYPE_Q4_K: break;
    }
    return 0;
}

size_t dtype_bytes(dtype type, size_t n) {
    return dtype_is_block(type) ? n / (size_t)qblock_weights(type) * qblock_bytes(type)
                                : n * dtype_size(type);
}

const char *dtype_name(dtype type) {
    switch (type) {
    case DTYPE_F32: return "f32";
    case DTYPE_INT8: return "int8";
    case DTYPE_BF16: return "bf16";
    case DTYPE_F16: return "f16";
    case DTYPE_Q8_0: return "q8_0";
    case DTYPE_Q4_0: return "q4_0";
    case DTYPE_Q4_1: return "q4_1";
    case DTYPE_Q4_K: return "q4_k";
    }
    return "unknown";
}

size_t kv_row_bytes(dtype type, int head_dim) {
    const size_t hd = (size_t)head_dim;
    // int8: the values padded to 4 bytes, so each row's fp32 scale is aligned
    return type == DTYPE_INT8 ? (hd + 3) / 4 * 4 + sizeof(float) : hd * dtype_size(type);
}
