/* safetensors parsing and validation (see safetensors.h). Every size read from the file is
 * checked before use: this code is fuzzed (tests/fuzz/fuzz_safetensors.c). */
#include "io/safetensors.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void err_set(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void err_set(char *err, size_t errlen, const char *fmt, ...) {
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

size_t safetensors_dtype_size(safetensors_dtype type) { return type == SAFETENSORS_F32 ? 4 : 2; }

const char *safetensors_dtype_name(safetensors_dtype type) {
    switch (type) {
    case SAFETENSORS_F32: return "F32";
    case SAFETENSORS_F16: return "F16";
    case SAFETENSORS_BF16: return "BF16";
    }
    return "?";
}

uint64_t safetensors_tensor_elems(const safetensors_tensor *t) {
    uint64_t n = 1;
    for (int d = 0; d < t->ndims; d++) n *= (uint64_t)t->shape[d];
    return n;
}

void safetensors_free(safetensors_file *f) {
    for (int i = 0; i < f->n_tensors; i++) free(f->tensors[i].name);
    free(f->tensors);
    memset(f, 0, sizeof *f);
}

static int entry_dtype_parse(safetensors_tensor *t, const char *name, json_t *dtype, char *err,
                             size_t errlen) {
    const char *d = json_string_value(dtype);
    if (strcmp(d, "F32") == 0) {
        t->dtype = SAFETENSORS_F32;
    } else if (strcmp(d, "F16") == 0) {
        t->dtype = SAFETENSORS_F16;
    } else if (strcmp(d, "BF16") == 0) {
        t->dtype = SAFETENSORS_BF16;
    } else {
        err_set(err, errlen, "tensor '%s': unsupported dtype '%.16s' (tripar reads F32, F16, "
                "BF16)", name, d);
        return -1;
    }
    return 0;
}

/* Fills t->shape; *bytes gets prod(shape) * dtype size, or *overflow is set when that does
 * not fit in 64 bits (bounded as we go, so the product never wraps). */
static int entry_shape_parse(safetensors_tensor *t, const char *name, json_t *shape,
                             uint64_t *bytes, int *overflow, char *err, size_t errlen) {
    size_t ndims = json_array_size(shape);
    if (ndims > SAFETENSORS_MAX_DIMS) {
        err_set(err, errlen, "tensor '%s': %zu dimensions (at most %d)", name, ndims,
                SAFETENSORS_MAX_DIMS);
        return -1;
    }
    t->ndims = (int)ndims;
    *bytes = safetensors_dtype_size(t->dtype);
    *overflow = 0;
    for (size_t k = 0; k < ndims; k++) {
        json_t *v = json_array_get(shape, k);
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            err_set(err, errlen, "tensor '%s': shape[%zu] is not a non-negative integer", name, k);
            return -1;
        }
        t->shape[k] = (int64_t)json_integer_value(v);
        if (t->shape[k] != 0 && *bytes > UINT64_MAX / (uint64_t)t->shape[k]) *overflow = 1;
        else *bytes *= (uint64_t)t->shape[k];
    }
    return 0;
}

/* [begin, end] inside the data section of data_len bytes. */
static int entry_offsets_parse(safetensors_tensor *t, const char *name, json_t *offsets,
                               size_t data_len, char *err, size_t errlen) {
    if (json_array_size(offsets) != 2 || !json_is_integer(json_array_get(offsets, 0)) ||
        !json_is_integer(json_array_get(offsets, 1))) {
        err_set(err, errlen, "tensor '%s': data_offsets must be [begin, end]", name);
        return -1;
    }
    json_int_t b = json_integer_value(json_array_get(offsets, 0));
    json_int_t e = json_integer_value(json_array_get(offsets, 1));
    if (b < 0 || e < b || (uint64_t)e > data_len) {
        err_set(err, errlen, "tensor '%s': data_offsets [%lld, %lld] outside the data section "
                "(%zu bytes)", name, (long long)b, (long long)e, data_len);
        return -1;
    }
    t->begin = (uint64_t)b;
    t->end = (uint64_t)e;
    return 0;
}

/* Fills one tensor from its header entry: dtype, shape, offsets that hold exactly the bytes
 * shape and dtype need, and a copy of the name. Returns 0 or -1 with err set. */
static int entry_parse(safetensors_tensor *t, const char *name, json_t *entry, size_t data_len,
                       char *err, size_t errlen) {
    if (!json_is_object(entry)) {
        err_set(err, errlen, "tensor '%s': header entry is not a JSON object", name);
        return -1;
    }
    json_t *dtype = json_object_get(entry, "dtype");
    json_t *shape = json_object_get(entry, "shape");
    json_t *offsets = json_object_get(entry, "data_offsets");
    if (!json_is_string(dtype) || !json_is_array(shape) || !json_is_array(offsets)) {
        err_set(err, errlen, "tensor '%s': entry needs dtype (string), shape and data_offsets "
                "(arrays)", name);
        return -1;
    }
    uint64_t bytes;
    int overflow;
    if (entry_dtype_parse(t, name, dtype, err, errlen) != 0 ||
        entry_shape_parse(t, name, shape, &bytes, &overflow, err, errlen) != 0 ||
        entry_offsets_parse(t, name, offsets, data_len, err, errlen) != 0)
        return -1;
    if (overflow || bytes != t->end - t->begin) {
        err_set(err, errlen, "tensor '%s': data_offsets give %llu bytes but shape and dtype %s "
                "need %s%llu", name, (unsigned long long)(t->end - t->begin),
                safetensors_dtype_name(t->dtype), overflow ? "more than " : "",
                (unsigned long long)(overflow ? UINT64_MAX : bytes));
        return -1;
    }
    size_t name_len = strlen(name);
    t->name = malloc(name_len + 1);
    if (t->name) memcpy(t->name, name, name_len + 1);
    if (!t->name) {
        err_set(err, errlen, "out of memory");
        return -1;
    }
    return 0;
}

static int by_begin(const void *a, const void *b) {
    const safetensors_tensor *x = *(const safetensors_tensor *const *)a;
    const safetensors_tensor *y = *(const safetensors_tensor *const *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* No two tensors may share bytes (empty tensors share nothing). */
static int overlap_check(const safetensors_file *f, char *err, size_t errlen) {
    if (f->n_tensors < 2) return 0;
    const safetensors_tensor **order = malloc((size_t)f->n_tensors * sizeof *order);
    if (!order) {
        err_set(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < f->n_tensors; i++) order[i] = &f->tensors[i];
    qsort(order, (size_t)f->n_tensors, sizeof *order, by_begin);
    int rc = 0;
    const safetensors_tensor *prev = NULL;
    for (int i = 0; i < f->n_tensors && rc == 0; i++) {
        const safetensors_tensor *t = order[i];
        if (t->begin == t->end) continue;
        if (prev && t->begin < prev->end) {
            err_set(err, errlen, "tensor '%s': data_offsets [%llu, %llu] overlap tensor '%s' "
                    "[%llu, %llu]", t->name, (unsigned long long)t->begin,
                    (unsigned long long)t->end, prev->name, (unsigned long long)prev->begin,
                    (unsigned long long)prev->end);
            rc = -1;
        }
        prev = t;
    }
    free(order);
    return rc;
}

/* The 8-byte little-endian header size, checked against the file; 0 with err set when it
 * cannot be a safetensors header. */
static uint64_t header_size_read(const uint8_t *buf, size_t len, char *err, size_t errlen) {
    if (len < 8) {
        err_set(err, errlen, "file is %zu bytes, too short for the 8-byte header size", len);
        return 0;
    }
    uint64_t header = 0;
    for (int i = 7; i >= 0; i--) header = (header << 8) | buf[i];
    if (header == 0) {
        err_set(err, errlen, "header size is 0 (not a safetensors file?)");
        return 0;
    }
    if (header > SAFETENSORS_MAX_HEADER) {
        err_set(err, errlen, "header size %llu is absurd (limit %llu; not a safetensors file?)",
                (unsigned long long)header, SAFETENSORS_MAX_HEADER);
        return 0;
    }
    if (header > len - 8) {
        err_set(err, errlen, "header size %llu runs past the end of the file (%zu bytes; "
                "truncated?)", (unsigned long long)header, len);
        return 0;
    }
    return header;
}

/* Every entry of the header object into f->tensors (sized for all of them), skipping
 * __metadata__ but counting its keys. */
static int entries_parse(safetensors_file *f, json_t *root, char *err, size_t errlen) {
    const char *key;
    json_t *value;
    json_object_foreach(root, key, value) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(value)) {
                err_set(err, errlen, "__metadata__ is not a JSON object");
                return -1;
            }
            f->n_metadata = (int)json_object_size(value);
            continue;
        }
        safetensors_tensor *t = &f->tensors[f->n_tensors];
        if (entry_parse(t, key, value, f->data_len, err, errlen) != 0) return -1;
        t->data = f->data + t->begin;
        f->n_tensors++;
    }
    return 0;
}

int safetensors_parse(safetensors_file *f, const uint8_t *buf, size_t len, char *err,
                      size_t errlen) {
    memset(f, 0, sizeof *f);
    uint64_t header = header_size_read(buf, len, err, errlen);
    if (header == 0) return -1;
    json_error_t jerr;
    json_t *root = json_loadb((const char *)buf + 8, (size_t)header, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        err_set(err, errlen, "header is not valid JSON: %s (at byte %d)", jerr.text,
                jerr.position);
        return -1;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        err_set(err, errlen, "header is not a JSON object");
        return -1;
    }
    f->data = buf + 8 + header;
    f->data_len = len - 8 - (size_t)header;
    size_t n = json_object_size(root);
    f->tensors = calloc(n ? n : 1, sizeof *f->tensors);
    if (!f->tensors) {
        json_decref(root);
        err_set(err, errlen, "out of memory");
        return -1;
    }
    int rc = entries_parse(f, root, err, errlen);
    json_decref(root);
    if (rc == 0) rc = overlap_check(f, err, errlen);
    if (rc != 0) safetensors_free(f);
    return rc;
}

const safetensors_tensor *safetensors_find(const safetensors_file *f, const char *name) {
    for (int i = 0; i < f->n_tensors; i++)
        if (strcmp(f->tensors[i].name, name) == 0) return &f->tensors[i];
    return NULL;
}

float safetensors_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13); /* inf, nan */
    } else if (exp != 0) {
        bits = sign | ((exp + 112) << 23) | (mant << 13);
    } else if (mant == 0) {
        bits = sign;
    } else {
        /* subnormal half: renormalise */
        int e = -1;
        do {
            e++;
            mant <<= 1;
        } while (!(mant & 0x400));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((mant & 0x3ff) << 13);
    }
    float out;
    memcpy(&out, &bits, sizeof out);
    return out;
}

float safetensors_bf16_to_f32(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float out;
    memcpy(&out, &bits, sizeof out);
    return out;
}

void safetensors_tensor_to_f32(const safetensors_tensor *t, float *out) {
    uint64_t n = safetensors_tensor_elems(t);
    const uint8_t *p = t->data;
    /* the data is little-endian and unaligned: assemble each element from bytes */
    for (uint64_t i = 0; i < n; i++) {
        if (t->dtype == SAFETENSORS_F32) {
            const uint8_t *q = p + 4 * i;
            uint32_t bits = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 |
                            (uint32_t)q[3] << 24;
            memcpy(&out[i], &bits, sizeof bits);
        } else {
            const uint8_t *q = p + 2 * i;
            uint16_t bits = (uint16_t)(q[0] | q[1] << 8);
            out[i] = t->dtype == SAFETENSORS_F16 ? safetensors_f16_to_f32(bits)
                                                 : safetensors_bf16_to_f32(bits);
        }
    }
}
