/* gguf_dump FILE OUTDIR: opens FILE with tripar's GGUF reader and writes OUTDIR/meta.json (the
 * version, alignment, every metadata value and every tensor info) and OUTDIR/N.f32 (tensor N
 * dequantized to raw little-endian fp32). A refused file exits 2 with the reader's message.
 * For tests/io/gguf_check.py; no MPI is started. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/gguf.h"
#include "io/gguf_dequant.h"

static void json_string(FILE *f, const char *s, uint64_t n) {
    fputc('"', f);
    for (uint64_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

static void json_value(FILE *f, const gguf_kv *kv, uint64_t i) {
    if (kv->type == GGUF_TYPE_STRING) {
        uint64_t n;
        const char *s = gguf_kv_str(kv, i, &n);
        json_string(f, s, n);
    } else if (kv->type == GGUF_TYPE_BOOL) {
        fputs(kv->data[i] ? "true" : "false", f);
    } else if (kv->type == GGUF_TYPE_FLOAT32 || kv->type == GGUF_TYPE_FLOAT64) {
        double v = gguf_kv_float(kv, i);
        if (isfinite(v)) fprintf(f, kv->type == GGUF_TYPE_FLOAT32 ? "%.9g" : "%.17g", v);
        else fputs("null", f);
    } else if (kv->type == GGUF_TYPE_UINT64) {
        fprintf(f, "%" PRIu64, gguf_kv_uint(kv, i));
    } else {
        fprintf(f, "%" PRId64, gguf_kv_int(kv, i, NULL));
    }
}

static void meta_write(FILE *f, const gguf *g) {
    fprintf(f, "{\"version\": %u, \"alignment\": %u, \"data_start\": %" PRIu64 ",\n\"kv\": {\n",
            g->version, g->alignment, g->data_start);
    for (uint64_t k = 0; k < g->n_kv; k++) {
        const gguf_kv *kv = &g->kv[k];
        json_string(f, kv->key, strlen(kv->key));
        fprintf(f, ": {\"type\": \"%s\", \"array\": %s, \"value\": ", gguf_type_name(kv->type),
                kv->is_array ? "true" : "false");
        if (kv->is_array) fputc('[', f);
        for (uint64_t i = 0; i < kv->n; i++) {
            if (i) fputs(", ", f);
            json_value(f, kv, i);
        }
        fprintf(f, "%s}%s\n", kv->is_array ? "]" : "", k + 1 < g->n_kv ? "," : "");
    }
    fputs("},\n\"tensors\": [\n", f);
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        fputs("{\"name\": ", f);
        json_string(f, t->name, strlen(t->name));
        fprintf(f, ", \"type\": \"%s\", \"offset\": %" PRIu64 ", \"dims\": [",
                gguf_qtype_get(t->type)->name, t->offset);
        for (int d = 0; d < t->n_dims; d++) fprintf(f, "%s%" PRIu64, d ? ", " : "", t->dims[d]);
        fprintf(f, "]}%s\n", i + 1 < g->n_tensors ? "," : "");
    }
    fputs("]}\n", f);
}

/* Each tensor in turn: one fp32 buffer at a time. */
static int tensors_write(gguf *g, const char *dir) {
    for (uint64_t i = 0; i < g->n_tensors; i++) {
        const gguf_tensor *t = &g->tensors[i];
        float *out = malloc((size_t)(t->elems ? t->elems : 1) * sizeof *out);
        if (!out) return 1;
        status s = gguf_tensor_read_f32(g, t, out);
        if (s != STATUS_OK) {
            fprintf(stderr, "gguf_dump: %s\n", error_message());
            free(out);
            return (int)s;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%" PRIu64 ".f32", dir, i);
        FILE *f = fopen(path, "wb");
        int bad = !f || fwrite(out, sizeof *out, (size_t)t->elems, f) != (size_t)t->elems;
        if (f && fclose(f) != 0) bad = 1;
        free(out);
        if (bad) {
            fprintf(stderr, "gguf_dump: cannot write %s\n", path);
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: gguf_dump FILE.gguf OUTDIR\n");
        return 2;
    }
    gguf g;
    status s = gguf_open(&g, argv[1]);
    if (s != STATUS_OK) {
        fprintf(stderr, "gguf_dump: %s\n", error_message());
        return (int)s;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/meta.json", argv[2]);
    FILE *f = fopen(path, "w");
    if (!f) {
        fprintf(stderr, "gguf_dump: cannot write %s\n", path);
        gguf_close(&g);
        return 1;
    }
    meta_write(f, &g);
    fclose(f);
    int rc = tensors_write(&g, argv[2]);
    gguf_close(&g);
    return rc;
}
