/* A validating parser for the safetensors format (8-byte little-endian header size, a JSON
 * header, then raw tensor bytes) over a buffer in memory or mmapped. Plain C plus jansson, no
 * MPI or HDF5, so the fuzzer can build it alone (tests/fuzz/). */
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SAFETENSORS_MAX_DIMS 8
/* The reference implementation refuses headers over 100 MB; so do we. */
#define SAFETENSORS_MAX_HEADER 100000000ull

typedef enum {
    SAFETENSORS_F32 = 0,
    SAFETENSORS_F16 = 1,
    SAFETENSORS_BF16 = 2,
} safetensors_dtype;

typedef struct {
    char *name;
    safetensors_dtype dtype;
    int ndims;
    int64_t shape[SAFETENSORS_MAX_DIMS];
    uint64_t begin, end;  /* byte offsets within the data section */
    const uint8_t *data;  /* buf + 8 + header size + begin; not aligned */
} safetensors_tensor;

typedef struct {
    safetensors_tensor *tensors; /* in header order */
    int n_tensors;
    int n_metadata;              /* entries of __metadata__ */
    const uint8_t *data;         /* start of the data section */
    size_t data_len;
} safetensors_file;

/* Parses and validates buf (len bytes): header size (not 0, within the file, at most
 * SAFETENSORS_MAX_HEADER), JSON object header, per tensor dtype F32/F16/BF16, shape,
 * data_offsets inside the data section, byte length == prod(shape) * dtype size, and no two
 * tensors overlapping. Returns 0, or -1 with a message naming the tensor in err. buf must
 * outlive f. On error f holds nothing to free. */
int safetensors_parse(safetensors_file *f, const uint8_t *buf, size_t len, char *err,
                      size_t errlen);
void safetensors_free(safetensors_file *f);

/* The tensor called name, or NULL. */
const safetensors_tensor *safetensors_find(const safetensors_file *f, const char *name);

size_t safetensors_dtype_size(safetensors_dtype type);
const char *safetensors_dtype_name(safetensors_dtype type);
uint64_t safetensors_tensor_elems(const safetensors_tensor *t);

/* Converts every element of t to fp32 into out (safetensors_tensor_elems(t) floats). */
void safetensors_tensor_to_f32(const safetensors_tensor *t, float *out);

/* IEEE half and bfloat16 bit patterns to float (exact). */
float safetensors_f16_to_f32(uint16_t h);
float safetensors_bf16_to_f32(uint16_t b);

#ifdef __cplusplus
}
#endif
