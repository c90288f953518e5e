/* GGUF parsing and validation (see gguf.h): header, metadata, tensor infos, and the streaming
 * read of one tensor. Every count and length read from the file is checked against the bytes
 * left before it is used for an allocation or a loop. */
#include "io/gguf.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf_dequant.h"

/* The sequential header reader: where it is, and what the file can still hold. */
typedef struct {
    gguf *g;
    uint64_t pos;
} reader;

static uint64_t left(const reader *r) { return r->g->file_size - r->pos; }

/* n bytes into buf, or STATUS_BAD_INPUT naming what was being read. */
static status rd_bytes(reader *r, void *buf, uint64_t n, const char *what) {
    if (n > left(r)) {
        error_set("%s: %s: needs %" PRIu64 " bytes at offset %" PRIu64 " but the file has %" PRIu64
                  " (truncated?)", r->g->path, what, n, r->pos, r->g->file_size);
        return STATUS_BAD_INPUT;
    }
    if (n && fread(buf, 1, (size_t)n, r->g->fp) != (size_t)n) {
        error_set("%s: %s: read failed at offset %" PRIu64 " (truncated?)", r->g->path, what,
                  r->pos);
        return STATUS_BAD_INPUT;
    }
    r->pos += n;
    return STATUS_OK;
}

static status rd_u32(reader *r, uint32_t *v, const char *what) {
    uint8_t b[4];
    status s = rd_bytes(r, b, 4, what);
    *v = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return s;
}

static status rd_u64(reader *r, uint64_t *v, const char *what) {
    uint8_t b[8];
    status s = rd_bytes(r, b, 8, what);
    *v = 0;
    for (int i = 7; i >= 0; i--) *v = *v << 8 | b[i];
    return s;
}

/* A length-prefixed string, NUL-terminated in memory; the length is checked against the file
 * before the allocation. */
static status rd_string(reader *r, char **out, uint64_t *len, const char *what) {
    uint64_t n;
    status s = rd_u64(r, &n, what);
    if (s != STATUS_OK) return s;
    if (n > left(r)) {
        error_set("%s: %s: string length %" PRIu64 " runs past the end of the file (%" PRIu64
                  " bytes left)", r->g->path, what, n, left(r));
        return STATUS_BAD_INPUT;
    }
    *out = malloc((size_t)n + 1);
    if (!*out) {
        error_set("%s: %s: out of memory for %" PRIu64 " bytes", r->g->path, what, n);
        return STATUS_RUNTIME;
    }
    (*out)[n] = '\0';
    if (len) *len = n;
    return rd_bytes(r, *out, n, what);
}

/* The n values of kv (type and n already set). */
static status kv_values_read(reader *r, gguf_kv *kv, const char *what) {
    uint64_t size = gguf_type_size(kv->type);
    uint64_t min = kv->type == GGUF_TYPE_STRING ? 8 : size;
    if (kv->n > left(r) / min) {
        error_set("%s: %s: %" PRIu64 " values of type %s run past the end of the file (%" PRIu64
                  " bytes left)", r->g->path, what, kv->n, gguf_type_name(kv->type), left(r));
        return STATUS_BAD_INPUT;
    }
    size_t count = kv->n ? (size_t)kv->n : 1;
    if (kv->type != GGUF_TYPE_STRING) {
        kv->data = malloc(count * size);
        if (!kv->data) return STATUS_RUNTIME;
        status s = rd_bytes(r, kv->data, kv->n * size, what);
        for (uint64_t i = 0; s == STATUS_OK && kv->type == GGUF_TYPE_BOOL && i < kv->n; i++) {
            if (kv->data[i] > 1) {
                error_set("%s: %s: bool value %u is neither 0 nor 1", r->g->path, what,
                          kv->data[i]);
                s = STATUS_BAD_INPUT;
            }
        }
        return s;
    }
    kv->str = calloc(count, sizeof *kv->str);
    kv->str_len = calloc(count, sizeof *kv->str_len);
    if (!kv->str || !kv->str_len) return STATUS_RUNTIME;
    for (uint64_t i = 0; i < kv->n; i++) {
        status s = rd_string(r, &kv->str[i], &kv->str_len[i], what);
        if (s != STATUS_OK) return s;
    }
    return STATUS_OK;
}

static const char *kv_key_at(const gguf *g, uint64_t i) { return g->kv[i].key; }
static const char *tensor_name_at(const gguf *g, uint64_t i) { return g->tensors[i].name; }

static int by_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* No two of the n names name_at(g, i) (keys, kind "key", or tensors, kind "tensor") are the
 * same. Sorted rather than compared pairwise: a hostile file may hold millions of entries. */
static status names_unique_check(const gguf *g, uint64_t n, const char *kind,
                                 const char *(*name_at)(const gguf *, uint64_t)) {
    if (n < 2) return STATUS_OK;
    const char **names = malloc((size_t)n * sizeof *names);
    if (!names) return STATUS_RUNTIME;
    for (uint64_t i = 0; i < n; i++) names[i] = name_at(g, i);
    qsort(names, (size_t)n, sizeof *names, by_name);
    status s = STATUS_OK;
    for (uint64_t i = 1; i < n && s == STATUS_OK; i++) {
        if (strcmp(names[i - 1], names[i]) == 0) {
            error_set("%s: %s '%s' appears twice", g->path, kind, names[i]);
            s = STATUS_BAD_INPUT;
        }
    }
    free(names);
    return s;
}

/* The name of entry index of a kind ("metadata entry", "tensor"), which messages give until
 * the name itself is known. */
static status name_read(reader *r, char **out, const char *kind, uint64_t index) {
    char what[64];
    snprintf(what, sizeof what, "%s %" PRIu64 " name", kind, index);
    return rd_string(r, out, NULL, what);
}

/* One metadata entry: key, type (an array's element type and length), values. */
static status kv_read(reader *r, gguf_kv *kv, uint64_t index) {
    status s = name_read(r, &kv->key, "metadata entry", index);
    if (s != STATUS_OK) return s;
    char what[320];
    snprintf(what, sizeof what, "key '%.256s'", kv->key);
    uint32_t type;
    if ((s = rd_u32(r, &type, what)) != STATUS_OK) return s;
    kv->n = 1;
    if (type == GGUF_TYPE_ARRAY) {
        kv->is_array = 1;
        if ((s = rd_u32(r, &type, what)) != STATUS_OK || (s = rd_u64(r, &kv->n, what)) != STATUS_OK)
            return s;
        if (type == GGUF_TYPE_ARRAY) {
            error_set("%s: %s: arrays of arrays are not supported", r->g->path, what);
            return STATUS_BAD_INPUT;
        }
    }
    if (type >= GGUF_TYPE_COUNT) {
        error_set("%s: %s: value type %u is unknown (0 to %d)", r->g->path, what, type,
                  GGUF_TYPE_COUNT - 1);
        return STATUS_BAD_INPUT;
    }
    kv->type = (gguf_type)type;
    return kv_values_read(r, kv, what);
}

/* general.alignment, when present, must be a uint32 power of two (as ggml requires). */
static status alignment_read(gguf *g) {
    g->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *kv = gguf_kv_find(g, "general.alignment");
    if (!kv) return STATUS_OK;
    if (kv->type != GGUF_TYPE_UINT32 || kv->is_array) {
        error_set("%s: key 'general.alignment' has type %s%s, not uint32", g->path,
                  kv->is_array ? "array of " : "", gguf_type_name(kv->type));
        return STATUS_BAD_INPUT;
    }
    uint64_t a = gguf_kv_uint(kv, 0);
    if (a == 0 || (a & (a - 1)) != 0) {
        error_set("%s: key 'general.alignment' = %" PRIu64 " is not a power of two", g->path, a);
        return STATUS_BAD_INPUT;
    }
    g->alignment = (uint32_t)a;
    return STATUS_OK;
}

/* n_dims, dims (each at most INT64_MAX, their product too), type, and the byte count. */
static status tensor_shape_read(reader *r, gguf_tensor *t) {
    const char *path = r->g->path;
    uint32_t n_dims, type;
    status s = rd_u32(r, &n_dims, t->name);
    if (s != STATUS_OK) return s;
    if (n_dims < 1 || n_dims > GGUF_MAX_DIMS) {
        error_set("%s: tensor '%s': n_dims = %u (tripar reads 1 to %d)", path, t->name, n_dims,
                  GGUF_MAX_DIMS);
        return STATUS_BAD_INPUT;
    }
    t->n_dims = (int)n_dims;
    t->elems = 1;
    for (int d = 0; d < t->n_dims; d++) {
        if ((s = rd_u64(r, &t->dims[d], t->name)) != STATUS_OK) return s;
        if (t->dims[d] > (uint64_t)INT64_MAX ||
            (t->dims[d] && t->elems > (uint64_t)INT64_MAX / t->dims[d])) {
            error_set("%s: tensor '%s': dims[%d] = %" PRIu64 " makes more than 2^63 elements",
                      path, t->name, d, t->dims[d]);
            return STATUS_BAD_INPUT;
        }
        t->elems *= t->dims[d];
    }
    if ((s = rd_u32(r, &type, t->name)) != STATUS_OK) return s;
    const gguf_qtype *q = gguf_qtype_get(type);
    if (!q) {
        error_set("%s: tensor '%s': type id %u is unknown or not supported (tripar reads %s)",
                  path, t->name, type, gguf_qtype_names());
        return STATUS_BAD_INPUT;
    }
    t->type = type;
    if (t->dims[0] % q->block_elems != 0) {
        error_set("%s: tensor '%s': row length %" PRIu64 " is not a multiple of the %s block "
                  "(%u)", path, t->name, t->dims[0], q->name, q->block_elems);
        return STATUS_BAD_INPUT;
    }
    uint64_t blocks = t->elems / q->block_elems;
    if (blocks > UINT64_MAX / q->block_bytes) {
        error_set("%s: tensor '%s': %" PRIu64 " blocks of %s overflow a byte count", path,
                  t->name, blocks, q->name);
        return STATUS_BAD_INPUT;
    }
    t->bytes = blocks * q->block_bytes;
    return STATUS_OK;
}

static status tensor_info_read(reader *r, gguf_tensor *t, uint64_t index) {
    status s = name_read(r, &t->name, "tensor", index);
    if (s != STATUS_OK) return s;
    if ((s = tensor_shape_read(r, t)) != STATUS_OK ||
        (s = rd_u64(r, &t->offset, t->name)) != STATUS_OK)
        return s;
    if (t->offset % r->g->alignment != 0) {
        error_set("%s: tensor '%s': offset %" PRIu64 " is not a multiple of the alignment %u",
                  r->g->path, t->name, t->offset, r->g->alignment);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

/* Every tensor's bytes lie inside the data section. */
static status tensors_range_check(gguf *g) {
    uint64_t data_len = g->data_start <= g->file_size ? g->file_size - g->data_start : 0;
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        if (t->offset > data_len || t->bytes > data_len - t->offset) {
            error_set("%s: tensor '%s': offset %" PRIu64 " + %" PRIu64 " bytes runs past the end "
                      "of the data section (%" PRIu64 " bytes from offset %" PRIu64 "; truncated?)",
                      g->path, t->name, t->offset, t->bytes, data_len, g->data_start);
            return STATUS_BAD_INPUT;
        }
    }
    return STATUS_OK;
}

/* Magic, version, and the two counts, each bounded by the bytes its entries need at least
 * (a metadata entry 13, a tensor info 32). */
static status header_read(reader *r) {
    gguf *g = r->g;
    uint8_t magic[4];
    status s = rd_bytes(r, magic, 4, "magic");
    if (s != STATUS_OK) return s;
    if (memcmp(magic, "GGUF", 4) != 0) {
        error_set("%s: magic %02x %02x %02x %02x is not 'GGUF' (not a GGUF file)", g->path,
                  magic[0], magic[1], magic[2], magic[3]);
        return STATUS_BAD_INPUT;
    }
    if ((s = rd_u32(r, &g->version, "version")) != STATUS_OK) return s;
    if (g->version != 2 && g->version != 3) {
        int swapped = (g->version & 0xFFFFu) == 0 && g->version != 0;
        error_set("%s: GGUF version %u%s is not supported (tripar reads versions 2 and 3)",
                  g->path, swapped ? __builtin_bswap32(g->version) : g->version,
                  swapped ? " big-endian" : "");
        return STATUS_BAD_INPUT;
    }
    if ((s = rd_u64(r, &g->n_tensors, "tensor count")) != STATUS_OK ||
        (s = rd_u64(r, &g->n_kv, "metadata count")) != STATUS_OK)
        return s;
    if (g->n_kv > left(r) / 13 || g->n_tensors > left(r) / 32) {
        error_set("%s: %" PRIu64 " metadata entries and %" PRIu64 " tensors cannot fit in the %"
                  PRIu64 " bytes left", g->path, g->n_kv, g->n_tensors, left(r));
        g->n_kv = g->n_tensors = 0;
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

static status gguf_parse(gguf *g) {
    reader r = {g, 0};
    status s = header_read(&r);
    if (s != STATUS_OK) return s;
    uint64_t n_kv = g->n_kv, n_tensors = g->n_tensors;
    g->n_kv = g->n_tensors = 0; /* counts of what close must free */
    g->kv = calloc(n_kv ? n_kv : 1, sizeof *g->kv);
    g->tensors = calloc(n_tensors ? n_tensors : 1, sizeof *g->tensors);
    if (!g->kv || !g->tensors) return STATUS_RUNTIME;
    /* each entry counts before it is read, so a half-read one is freed too */
    while (g->n_kv < n_kv) {
        uint64_t i = g->n_kv++;
        if ((s = kv_read(&r, &g->kv[i], i)) != STATUS_OK) return s;
    }
    if ((s = names_unique_check(g, g->n_kv, "key", kv_key_at)) != STATUS_OK ||
        (s = alignment_read(g)) != STATUS_OK)
        return s;
    while (g->n_tensors < n_tensors) {
        uint64_t i = g->n_tensors++;
        if ((s = tensor_info_read(&r, &g->tensors[i], i)) != STATUS_OK) return s;
    }
    if ((s = names_unique_check(g, g->n_tensors, "tensor", tensor_name_at)) != STATUS_OK)
        return s;
    g->data_start = r.pos + (g->alignment - r.pos % g->alignment) % g->alignment;
    return tensors_range_check(g);
}

status gguf_open_stream(gguf *g, FILE *fp, const char *name) {
    memset(g, 0, sizeof *g);
    error_clear();
    g->fp = fp;
    g->path = strdup(name);
    if (!g->path) return STATUS_RUNTIME;
    status s = STATUS_BAD_INPUT;
    off_t end;
    if (fseeko(fp, 0, SEEK_END) != 0 || (end = ftello(fp)) < 0 || fseeko(fp, 0, SEEK_SET) != 0) {
        error_set("%s: cannot seek: %s", name, strerror(errno));
    } else {
        g->file_size = (uint64_t)end;
        s = gguf_parse(g);
    }
    if (s == STATUS_RUNTIME && error_message()[0] == '\0') error_set("%s: out of memory", name);
    if (s != STATUS_OK) {
        g->fp = NULL; /* the caller's stream */
        gguf_close(g);
    }
    return s;
}

status gguf_open(gguf *g, const char *path) {
    memset(g, 0, sizeof *g);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        error_set("%s: cannot open: %s", path, strerror(errno));
        return STATUS_BAD_INPUT;
    }
    status s = gguf_open_stream(g, fp, path);
    if (s != STATUS_OK) {
        fclose(fp);
        return s;
    }
    g->owns_fp = 1;
    return STATUS_OK;
}

void gguf_close(gguf *g) {
    for (uint64_t i = 0; g->kv && i < g->n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        for (uint64_t j = 0; kv->str && j < kv->n; j++) free(kv->str[j]);
        free(kv->str);
        free(kv->str_len);
        free(kv->data);
        free(kv->key);
    }
    for (uint64_t i = 0; g->tensors && i < g->n_tensors; i++) free(g->tensors[i].name);
    free(g->kv);
    free(g->tensors);
    free(g->path);
    if (g->owns_fp && g->fp) fclose(g->fp);
    memset(g, 0, sizeof *g);
}

const gguf_tensor *gguf_tensor_find(const gguf *g, const char *name) {
    for (uint64_t i = 0; i < g->n_tensors; i++)
        if (strcmp(g->tensors[i].name, name) == 0) return &g->tensors[i];
    return NULL;
}

/* About a megabyte of whole blocks at a time, so memory stays bounded whatever the tensor. */
status gguf_tensor_read_raw(gguf *g, const gguf_tensor *t, void *out) {
    const uint64_t at = g->data_start + t->offset;
    if (fseeko(g->fp, (off_t)at, SEEK_SET) != 0 || fread(out, 1, (size_t)t->bytes, g->fp) != t->bytes) {
        error_set("%s: tensor '%s': cannot read %" PRIu64 " bytes at offset %" PRIu64
                  " (truncated?)", g->path, t->name, t->bytes, at);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

status gguf_tensor_read_f32(gguf *g, const gguf_tensor *t, float *out) {
    const gguf_qtype *q = gguf_qtype_get(t->type);
    uint64_t blocks = t->elems / q->block_elems;
    uint64_t chunk = (1u << 20) / q->block_bytes;
    if (chunk == 0) chunk = 1;
    if (chunk > blocks) chunk = blocks ? blocks : 1;
    uint8_t *buf = malloc((size_t)(chunk * q->block_bytes));
    if (!buf) {
        error_set("%s: tensor '%s': out of memory", g->path, t->name);
        return STATUS_RUNTIME;
    }
    status s = STATUS_OK;
    for (uint64_t b = 0; b < blocks && s == STATUS_OK; b += chunk) {
        uint64_t n = blocks - b < chunk ? blocks - b : chunk;
        uint64_t at = g->data_start + t->offset + b * q->block_bytes;
        if (fseeko(g->fp, (off_t)at, SEEK_SET) != 0 ||
            fread(buf, q->block_bytes, (size_t)n, g->fp) != (size_t)n) {
            error_set("%s: tensor '%s': cannot read %" PRIu64 " bytes at offset %" PRIu64
                      " (truncated?)", g->path, t->name, n * q->block_bytes, at);
            s = STATUS_BAD_INPUT;
        } else {
            gguf_dequant(q, buf, n, out + b * q->block_elems);
        }
    }
    free(buf);
    return s;
}
