/* libFuzzer target: safetensors_parse must never crash, read out of bounds or leak on any
 * input, and every tensor it accepts must convert to fp32 within the buffer. */
#include <stdint.h>
#include <stdlib.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    safetensors_file f;
    char err[256];
    if (safetensors_parse(&f, data, size, err, sizeof err) != 0) return 0;
    for (int i = 0; i < f.n_tensors; i++) {
        const safetensors_tensor *t = &f.tensors[i];
        /* accepted offsets lie inside the buffer: ASan checks the conversion reads */
        if (t->end > f.data_len) abort();
        uint64_t n = safetensors_tensor_elems(t);
        float *out = malloc((size_t)(n ? n : 1) * sizeof(float));
        if (!out) abort();
        safetensors_tensor_to_f32(t, out);
        free(out);
    }
    safetensors_free(&f);
    return 0;
}
