/* Benchmark (not a test) of the CPU's int8 decode GEMV (docs/kernels.md, "int8 on the CPU"):
 * per instruction-set level, the effective GB/s of gemv_q8 over GPT-2 124M's int8 weights (12
 * layers of (n, k) = (2304, 768), (768, 768), (3072, 768), (768, 3072), then the 50257 x 768
 * head), walked in decode order so the caches hold what they would, with 1 and 4 activation
 * rows, next to a plain read of the same bytes in the same walk just before each pass. One
 * thread, best of N passes; each level is first checked against the scalar kernel's outputs.
 * FORMAT q8_0, q4_0, q4_1 or q4_k times gemv_blocks instead, over the same shapes stored in that
 * block format (random weights quantised by qblocks_quantize), so the GB/s of each format's
 * kernel stand beside the plain read of its own bytes. int8w-gG gives the int8 weights a scale
 * per G columns (model.int8_group) instead of per row.
 *   build/tools/tripar_bench_gemv [repeats=3] [level|all] [int8w|int8w-gG|q8_0|q4_0|q4_1|q4_k] */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_isa.h"
#include "kernels/quant_blocks.h"
#include "tools/bench_util.h"

enum { LAYERS = 12, C = 768, VOCAB = 50257, SHAPES = 5, MAX_ROWS = 4 };
/* (n, k) of each shape; the head last, once after the layers. */
static const int shapes[SHAPES][2] = {{3 * C, C}, {C, C}, {4 * C, C}, {C, 4 * C}, {VOCAB, C}};

static uint64_t rng_next(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 33;
}

/* The bytes at w read with plain 64-bit loads, four independent sums (vectorised by the
 * compiler): the rate a kernel that touches every byte once can reach. */
static uint64_t read_all(const uint64_t *w, long words) {
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (long i = 0; i + 4 <= words; i += 4)
        s0 += w[i], s1 += w[i + 1], s2 += w[i + 2], s3 += w[i + 3];
    return s0 ^ s1 ^ s2 ^ s3;
}

typedef struct {
    dtype type;                      // DTYPE_INT8 (gemv_q8), or a block format (gemv_blocks)
    const int8_t *w[LAYERS * 4 + 1]; // each matrix, in decode order
    int shape[LAYERS * 4 + 1];
    const float *ws; // (VOCAB, 4 C / group) scales, shared by every matrix
    int group;       // int8w: columns per scale, 0 for one per row
    int8_t *q;       // (MAX_ROWS, 4 * C)
    float *d;        // (MAX_ROWS, 4 * C / 32)
    float *y;        // (MAX_ROWS, VOCAB)
} model_weights;

/* The bytes of an (n, k) matrix stored as type. */
static long matrix_bytes(dtype type, int n, int k) {
    if (type == DTYPE_INT8) return (long)n * k;
    return (long)n * (long)qblock_bytes(type) * (k / qblock_weights(type));
}

/* y += matrix i times the activation rows, by the kernel its format has. */
static void gemv(const model_weights *m, const cpu_matmul_kernels *mk, int i, float *y, int rows) {
    const int n = shapes[m->shape[i]][0], k = shapes[m->shape[i]][1];
    if (m->type == DTYPE_INT8)
        mk->gemv_q8(y, n, m->q, m->d, m->w[i], m->ws, m->group, rows, k, n, 32);
    else
        mk->gemv_blocks(y, n, m->q, m->d, m->w[i], m->type, rows, k, n);
}

/* One decode step's walk: per shape, seconds spent in gemv_q8 (mk) or in the plain read (mk
 * NULL) summed over its matrices. */
static void walk(const model_weights *m, const cpu_matmul_kernels *mk, int rows, double *t,
                 uint64_t *sink) {
    for (int s = 0; s < SHAPES; s++)
        t[s] = 0.0;
    for (int i = 0; i < LAYERS * 4 + 1; i++) {
        const int s = m->shape[i], n = shapes[s][0], k = shapes[s][1];
        const double t0 = bench_now();
        if (mk)
            gemv(m, mk, i, m->y, rows);
        else
            *sink ^= read_all((const uint64_t *)m->w[i], matrix_bytes(m->type, n, k) / 8);
        t[m->shape[i]] += bench_now() - t0;
    }
}

int main(int argc, char **argv) {
    const int repeats = argc > 1 ? atoi(argv[1]) : 3;
    const cpu_isa best = cpu_isa_detect();
    int lo = CPU_ISA_SCALAR, hi = (int)best;
    dtype type = DTYPE_INT8;
    int group = 0;
    if (argc > 3) {
        const char *f = argv[3];
        if (!strncmp(f, "int8w-g", 7)) {
            group = atoi(f + 7);
            if (group < 32 || group % 32) {
                fprintf(stderr, "bench_gemv: %s: the group must be a multiple of 32\n", f);
                return 2;
            }
            f = "int8w";
        }
        type = !strcmp(f, "int8w")  ? DTYPE_INT8
               : !strcmp(f, "q8_0") ? DTYPE_Q8_0
               : !strcmp(f, "q4_0") ? DTYPE_Q4_0
               : !strcmp(f, "q4_1") ? DTYPE_Q4_1
               : !strcmp(f, "q4_k") ? DTYPE_Q4_K
                                    : DTYPE_F32;
        if (type == DTYPE_F32) {
            fprintf(stderr, "bench_gemv: format %s unknown (int8w, q8_0, q4_0, q4_1, q4_k)\n", f);
            return 2;
        }
    }
    if (argc > 2 && strcmp(argv[2], "all") != 0) {
        lo = hi = cpu_isa_from_name(argv[2]);
        if (lo < 0 || lo > (int)best) {
            fprintf(stderr, "bench_gemv: level %s unknown or not on this CPU (%s)\n", argv[2],
                    cpu_isa_names());
            return 2;
        }
    }
    if (repeats < 1) {
        fprintf(stderr, "usage: %s [repeats >= 1] [level]\n", argv[0]);
        return 2;
    }
    model_weights m;
    m.type = type;
    m.group = group;
    long bytes[SHAPES] = {0}, total = 0;
    for (int l = 0; l < LAYERS; l++)
        for (int s = 0; s < 4; s++)
            m.shape[l * 4 + s] = s;
    m.shape[LAYERS * 4] = 4;
    for (int i = 0; i < LAYERS * 4 + 1; i++) {
        const long b = matrix_bytes(type, shapes[m.shape[i]][0], shapes[m.shape[i]][1]);
        bytes[m.shape[i]] += b;
        total += b;
    }
    int8_t *w = bench_huge_alloc((size_t)total, "bench_gemv");
    uint64_t rng = 7;
    float *wf = type == DTYPE_INT8 ? NULL : malloc(sizeof(float) * (size_t)VOCAB * C);
    if (type != DTYPE_INT8 && !wf) {
        fprintf(stderr, "bench_gemv: out of memory\n");
        return 1;
    }
    for (long i = 0, off = 0; i < LAYERS * 4 + 1; i++) {
        const int n = shapes[m.shape[i]][0], k = shapes[m.shape[i]][1];
        m.w[i] = w + off;
        if (type == DTYPE_INT8) {
            for (long e = 0; e < (long)n * k; e++)
                w[off + e] = (int8_t)((int)(rng_next(&rng) % 255) - 127);
        } else { /* random weights in [-0.05, 0.05], stored in the format's blocks */
            for (long e = 0; e < (long)n * k; e++)
                wf[e] = (float)((double)(rng_next(&rng) % 2000001) * 5e-8 - 0.05);
            qblocks_quantize(type, w + off, wf, n, k);
        }
        off += matrix_bytes(type, n, k);
    }
    free(wf);
    const long scales = group ? (long)VOCAB * (4 * C / group) : VOCAB;
    float *ws = malloc(sizeof(float) * scales), *x = malloc(sizeof(float) * MAX_ROWS * 4 * C);
    float *want = malloc(sizeof(float) * MAX_ROWS * VOCAB);
    m.q = malloc(MAX_ROWS * 4 * C);
    m.d = malloc(sizeof(float) * MAX_ROWS * 4 * C / 32);
    m.y = calloc((size_t)MAX_ROWS * VOCAB, sizeof(float));
    if (!ws || !x || !want || !m.q || !m.d || !m.y) {
        fprintf(stderr, "bench_gemv: out of memory\n");
        return 1;
    }
    for (long i = 0; i < scales; i++)
        ws[i] = (float)(rng_next(&rng) % 1000 + 1) * 1e-5f;
    for (int i = 0; i < MAX_ROWS * 4 * C; i++)
        x[i] = (float)((double)(rng_next(&rng) % 2000001) * 1e-6 - 1.0);
    m.ws = ws;
    // The activations as the backend quantises them: rows of the widest k (the tests check
    // every level's quantiser gives these bits).
    cpu_matmul_scalar.quantize_q8(m.q, m.d, x, MAX_ROWS, 4 * C, 32);

    double t_read[SHAPES], t[SHAPES], pass[SHAPES];
    uint64_t sink = 0;
    printf("%s GEMV over GPT-2 124M's weights (%.1f MB: 12 layers then the head), activations "
           "in blocks of 32, one thread, best of %d passes, each after a plain read of the same "
           "bytes (on a shared machine the pair sees the same load)\n",
           type != DTYPE_INT8 ? dtype_name(type)
           : group            ? "int8w (group scales)"
                              : "int8w (row scales)",
           (double)total * 1e-6, repeats);
    printf("%-12s %4s %-11s %8s %9s %9s %9s %7s %9s\n", "level", "rows", "k x n", "MB", "ms",
           "GB/s", "read GB/s", "ratio", "rel.err");
    int bad = 0;
    for (int level = lo; level <= hi; level++) {
        const cpu_kernel_set *set = cpu_kernel_set_for((cpu_isa)level);
        if (!set) continue;
        for (int rows = 1; rows <= MAX_ROWS; rows += 3) {
            double err = 0.0;
            for (int s = 0; s < SHAPES; s++) { // correctness on one matrix of each shape
                int i = 0;
                while (m.shape[i] != s)
                    i++;
                const int n = shapes[s][0];
                memset(want, 0, sizeof(float) * (size_t)rows * (size_t)n);
                memset(m.y, 0, sizeof(float) * (size_t)rows * (size_t)n);
                gemv(&m, &cpu_matmul_scalar, i, want, rows);
                gemv(&m, set->matmul, i, m.y, rows);
                const double e = bench_rel_error(m.y, want, (long)rows * n);
                err = e > err ? e : err;
            }
            bad |= !(err < 1e-5);
            for (int s = 0; s < SHAPES; s++)
                t[s] = t_read[s] = 1e30;
            for (int r = 0; r < (level == CPU_ISA_SCALAR ? 1 : repeats); r++) {
                walk(&m, NULL, 0, pass, &sink);
                for (int s = 0; s < SHAPES; s++)
                    t_read[s] = pass[s] < t_read[s] ? pass[s] : t_read[s];
                walk(&m, set->matmul, rows, pass, &sink);
                for (int s = 0; s < SHAPES; s++)
                    t[s] = pass[s] < t[s] ? pass[s] : t[s];
            }
            double sum = 0.0, sum_read = 0.0;
            for (int s = 0; s <= SHAPES; s++) {
                char name[32];
                const double ts = s < SHAPES ? t[s] : sum, tr = s < SHAPES ? t_read[s] : sum_read;
                const double b = (double)(s < SHAPES ? bytes[s] : total);
                if (s < SHAPES) {
                    snprintf(name, sizeof name, "%dx%d", shapes[s][1], shapes[s][0]);
                    sum += t[s], sum_read += t_read[s];
                } else {
                    snprintf(name, sizeof name, "all");
                }
                printf("%-12s %4d %-11s %8.1f %9.3f %9.2f %9.2f %6.2fx %9.2e%s\n",
                       cpu_isa_name((cpu_isa)level), rows, name, b * 1e-6, ts * 1e3, b / ts * 1e-9,
                       b / tr * 1e-9, tr / ts, err, err < 1e-5 ? "" : "  WRONG");
            }
        }
    }
    printf("(sink %llx)\n", (unsigned long long)(sink & 0xF));
    free(w), free(ws), free(x), free(want), free(m.q), free(m.d), free(m.y);
    return bad ? 1 : 0;
}
