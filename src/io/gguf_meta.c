/* GGUF metadata lookups (see gguf.h): the value types, element access, and typed getters
 * that name the key and the value they refuse. */
#include <inttypes.h>
#include <string.h>

#include "io/gguf.h"

static const struct {
    const char *name;
    uint64_t size;
} types[GGUF_TYPE_COUNT] = {
    [GGUF_TYPE_UINT8] = {"uint8", 1},     [GGUF_TYPE_INT8] = {"int8", 1},
    [GGUF_TYPE_UINT16] = {"uint16", 2},   [GGUF_TYPE_INT16] = {"int16", 2},
    [GGUF_TYPE_UINT32] = {"uint32", 4},   [GGUF_TYPE_INT32] = {"int32", 4},
    [GGUF_TYPE_FLOAT32] = {"float32", 4}, [GGUF_TYPE_BOOL] = {"bool", 1},
    [GGUF_TYPE_STRING] = {"string", 0},   [GGUF_TYPE_ARRAY] = {"array", 0},
    [GGUF_TYPE_UINT64] = {"uint64", 8},   [GGUF_TYPE_INT64] = {"int64", 8},
    [GGUF_TYPE_FLOAT64] = {"float64", 8},
};

const char *gguf_type_name(gguf_type type) {
    return (unsigned)type < GGUF_TYPE_COUNT ? types[type].name : "?";
}

uint64_t gguf_type_size(gguf_type type) {
    return (unsigned)type < GGUF_TYPE_COUNT ? types[type].size : 0;
}

int gguf_type_is_int(gguf_type type) {
    return type <= GGUF_TYPE_INT32 || type == GGUF_TYPE_BOOL || type == GGUF_TYPE_UINT64 ||
           type == GGUF_TYPE_INT64;
}

const gguf_kv *gguf_kv_find(const gguf *g, const char *key) {
    for (uint64_t i = 0; i < g->n_kv; i++)
        if (strcmp(g->kv[i].key, key) == 0) return &g->kv[i];
    return NULL;
}

/* The little-endian bytes of element i, zero-extended (0 for a string: it has no number). */
static uint64_t raw_at(const gguf_kv *kv, uint64_t i) {
    uint64_t size = gguf_type_size(kv->type), v = 0;
    if (size == 0) return 0;
    const uint8_t *p = kv->data + i * size;
    for (uint64_t b = size; b-- > 0;) v = v << 8 | p[b];
    return v;
}

uint64_t gguf_kv_uint(const gguf_kv *kv, uint64_t i) { return raw_at(kv, i); }

int64_t gguf_kv_int(const gguf_kv *kv, uint64_t i, int *exact) {
    uint64_t v = raw_at(kv, i);
    if (exact) *exact = 1;
    switch (kv->type) {
    case GGUF_TYPE_INT8: return (int8_t)v;
    case GGUF_TYPE_INT16: return (int16_t)v;
    case GGUF_TYPE_INT32: return (int32_t)v;
    case GGUF_TYPE_INT64: return (int64_t)v;
    case GGUF_TYPE_UINT64:
        if (v > (uint64_t)INT64_MAX) {
            if (exact) *exact = 0;
            return INT64_MAX;
        }
        return (int64_t)v;
    default: return (int64_t)v;
    }
}

double gguf_kv_float(const gguf_kv *kv, uint64_t i) {
    uint64_t v = raw_at(kv, i);
    if (kv->type == GGUF_TYPE_FLOAT32) {
        uint32_t bits = (uint32_t)v;
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    if (kv->type == GGUF_TYPE_FLOAT64) {
        double d;
        memcpy(&d, &v, sizeof d);
        return d;
    }
    if (kv->type == GGUF_TYPE_UINT64) return (double)v;
    return (double)gguf_kv_int(kv, i, NULL);
}

const char *gguf_kv_str(const gguf_kv *kv, uint64_t i, uint64_t *len) {
    if (len) *len = kv->str_len[i];
    return kv->str[i];
}

/* The scalar under key, of a type that ok() accepts; want names it in the message. */
static const gguf_kv *scalar_get(const gguf *g, const char *key, int (*ok)(gguf_type),
                                 const char *want) {
    const gguf_kv *kv = gguf_kv_find(g, key);
    if (!kv) {
        error_set("%s: key '%s' is missing", g->path, key);
        return NULL;
    }
    if (kv->is_array || !ok(kv->type)) {
        error_set("%s: key '%s' has type %s%s, not %s", g->path, key,
                  kv->is_array ? "array of " : "", gguf_type_name(kv->type), want);
        return NULL;
    }
    return kv;
}

static int is_string(gguf_type t) { return t == GGUF_TYPE_STRING; }
static int is_float(gguf_type t) { return t == GGUF_TYPE_FLOAT32 || t == GGUF_TYPE_FLOAT64; }
static int is_bool(gguf_type t) { return t == GGUF_TYPE_BOOL; }
static int is_int(gguf_type t) { return t != GGUF_TYPE_BOOL && gguf_type_is_int(t); }

status gguf_get_string(const gguf *g, const char *key, const char **out) {
    const gguf_kv *kv = scalar_get(g, key, is_string, "string");
    if (!kv) return STATUS_BAD_INPUT;
    *out = kv->str[0];
    return STATUS_OK;
}

status gguf_get_int(const gguf *g, const char *key, int64_t min, int64_t max, int64_t *out) {
    const gguf_kv *kv = scalar_get(g, key, is_int, "an integer");
    if (!kv) return STATUS_BAD_INPUT;
    int exact;
    int64_t v = gguf_kv_int(kv, 0, &exact);
    if (!exact || v < min || v > max) {
        if (exact)
            error_set("%s: key '%s' = %" PRId64 " is outside [%" PRId64 ", %" PRId64 "]",
                      g->path, key, v, min, max);
        else
            error_set("%s: key '%s' = %" PRIu64 " is outside [%" PRId64 ", %" PRId64 "]",
                      g->path, key, gguf_kv_uint(kv, 0), min, max);
        return STATUS_BAD_INPUT;
    }
    *out = v;
    return STATUS_OK;
}

status gguf_get_float(const gguf *g, const char *key, double *out) {
    const gguf_kv *kv = scalar_get(g, key, is_float, "float32 or float64");
    if (!kv) return STATUS_BAD_INPUT;
    *out = gguf_kv_float(kv, 0);
    return STATUS_OK;
}

status gguf_get_bool(const gguf *g, const char *key, int *out) {
    const gguf_kv *kv = scalar_get(g, key, is_bool, "bool");
    if (!kv) return STATUS_BAD_INPUT;
    *out = kv->data[0] != 0;
    return STATUS_OK;
}

status gguf_get_array(const gguf *g, const char *key, gguf_type elem, const gguf_kv **out) {
    const gguf_kv *kv = gguf_kv_find(g, key);
    if (!kv) {
        error_set("%s: key '%s' is missing", g->path, key);
        return STATUS_BAD_INPUT;
    }
    if (!kv->is_array || (elem != GGUF_TYPE_COUNT && kv->type != elem)) {
        error_set("%s: key '%s' has type %s%s, not array of %s", g->path, key,
                  kv->is_array ? "array of " : "", gguf_type_name(kv->type),
                  elem == GGUF_TYPE_COUNT ? "anything" : gguf_type_name(elem));
        return STATUS_BAD_INPUT;
    }
    *out = kv;
    return STATUS_OK;
}
