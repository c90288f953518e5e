/* Element sizes and names of the weight dtypes of backend.h. */
#include "kernels/backend.h"

size_t dtype_size(dtype type) {
    switch (type) {
    case DTYPE_F32: return 4;
    case DTYPE_INT8: return 1;
    case DTYPE_BF16: return 2;
    case DTYPE_F16: return 2;
    }
    return 0;
}

const char *dtype_name(dtype type) {
    switch (type) {
    case DTYPE_F32: return "f32";
    case DTYPE_INT8: return "int8";
    case DTYPE_BF16: return "bf16";
    case DTYPE_F16: return "f16";
    }
    return "unknown";
}
