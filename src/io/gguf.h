/* A validating reader for GGUF files (llama.cpp's model format), versions 2 and 3: the header,
 * every metadata value, the tensor infos, and one tensor at a time dequantized to fp32. The
 * header is read through stdio and every count and length is checked against the file size
 * before anything is allocated; this code is fuzzed (tests/fuzz/fuzz_gguf.c). */
#pragma once
#include <stdint.h>
#include <stdio.h>

#include "base/check.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GGUF_MAX_DIMS 4
#define GGUF_DEFAULT_ALIGNMENT 32

/* Metadata value types, numbered as in the file. */
typedef enum {
    GGUF_TYPE_UINT8 = 0,
    GGUF_TYPE_INT8 = 1,
    GGUF_TYPE_UINT16 = 2,
    GGUF_TYPE_INT16 = 3,
    GGUF_TYPE_UINT32 = 4,
    GGUF_TYPE_INT32 = 5,
    GGUF_TYPE_FLOAT32 = 6,
    GGUF_TYPE_BOOL = 7,
    GGUF_TYPE_STRING = 8,
    GGUF_TYPE_ARRAY = 9,
    GGUF_TYPE_UINT64 = 10,
    GGUF_TYPE_INT64 = 11,
    GGUF_TYPE_FLOAT64 = 12,
    GGUF_TYPE_COUNT
} gguf_type;

/* One metadata entry. A scalar is held as an array of one element (is_array 0), so one set of
 * element accessors serves both. Numbers keep their little-endian file bytes in data; strings
 * are str[i] with str_len[i] bytes (NUL-terminated too, but may hold NUL bytes). */
typedef struct {
    char *key;
    gguf_type type;   /* the element type; never GGUF_TYPE_ARRAY (nested arrays are refused) */
    int is_array;
    uint64_t n;       /* elements */
    uint8_t *data;    /* n * gguf_type_size(type) bytes, numbers and bools */
    char **str;       /* n strings, for GGUF_TYPE_STRING */
    uint64_t *str_len;
} gguf_kv;

typedef struct {
    char *name;
    int n_dims;
    uint64_t dims[GGUF_MAX_DIMS]; /* dims[0] is the innermost (row) length, as in ggml */
    uint32_t type;                /* ggml type id (io/gguf_dequant.h) */
    uint64_t offset;              /* from the start of the data section */
    uint64_t elems, bytes;
} gguf_tensor;

typedef struct {
    FILE *fp;
    int owns_fp;
    char *path;         /* for messages */
    uint64_t file_size;
    uint32_t version;
    uint32_t alignment;
    uint64_t data_start; /* absolute offset of the data section */
    gguf_kv *kv;
    uint64_t n_kv;
    gguf_tensor *tensors;
    uint64_t n_tensors;
} gguf;

/* Opens and validates path. On error returns STATUS_BAD_INPUT with error_set naming the file
 * and the key, tensor or field and its value; g then holds nothing to free. */
status gguf_open(gguf *g, const char *path);
/* The same over an open stream (read from its start; it must be seekable, fmemopen works).
 * name is used in messages. g does not close fp. */
status gguf_open_stream(gguf *g, FILE *fp, const char *name);
void gguf_close(gguf *g);

/* Reads t's bytes from the file in bounded chunks and dequantizes them into out
 * (t->elems floats). STATUS_BAD_INPUT when the file is shorter than its header said. */
status gguf_tensor_read_f32(gguf *g, const gguf_tensor *t, float *out);
/* The tensor's bytes as the file stores them (t->bytes: ggml's blocks, row after row). */
status gguf_tensor_read_raw(gguf *g, const gguf_tensor *t, void *out);

const gguf_tensor *gguf_tensor_find(const gguf *g, const char *name);
const gguf_kv *gguf_kv_find(const gguf *g, const char *key);
const char *gguf_type_name(gguf_type type);
uint64_t gguf_type_size(gguf_type type); /* 0 for strings and arrays */

/* Element i (< kv->n) of kv as a signed integer (any integer or bool type; a uint64 above
 * INT64_MAX is returned as INT64_MAX and *exact set to 0), as a double (any number), or, for
 * GGUF_TYPE_STRING only, as a string. The numeric accessors give 0 for a string. */
int64_t gguf_kv_int(const gguf_kv *kv, uint64_t i, int *exact);
uint64_t gguf_kv_uint(const gguf_kv *kv, uint64_t i); /* integer types, read as unsigned */
double gguf_kv_float(const gguf_kv *kv, uint64_t i);
const char *gguf_kv_str(const gguf_kv *kv, uint64_t i, uint64_t *len);
int gguf_type_is_int(gguf_type type);

/* Typed getters by key. A missing key, a value of another type, an array where a scalar is
 * wanted, or an integer outside [min, max] is STATUS_BAD_INPUT naming the key and value. */
status gguf_get_string(const gguf *g, const char *key, const char **out);
status gguf_get_int(const gguf *g, const char *key, int64_t min, int64_t max, int64_t *out);
status gguf_get_float(const gguf *g, const char *key, double *out);
status gguf_get_bool(const gguf *g, const char *key, int *out);
/* An array whose elements have type elem (or any type, elem = GGUF_TYPE_COUNT). */
status gguf_get_array(const gguf *g, const char *key, gguf_type elem, const gguf_kv **out);

#ifdef __cplusplus
}
#endif
