/* The CPU compute backend: host memory, the instruction-set level and thread count of the
 * kernels, timing marks on the monotonic clock, and the ops table that gathers the kernels of
 * kernels/cpu/. Work is synchronous, so the "stream" has always passed every mark. */
#include <cblas.h>
#include <malloc.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "kernels/cpu/backend_cpu.h"
#include "base/check.h"

/* Allocations of at least this size are aligned to it and advised onto transparent huge pages:
 * a decode step streams every weight once, and with 4 KiB pages the hardware prefetcher stops
 * at every page boundary. Measured here streaming GPT-2's 154 MB head: 15-16 GB/s on 4 KiB
 * pages, 26-28 GB/s on 2 MiB pages. */
enum { CPU_HUGE_PAGE = 2 << 20 };

long backend_cpu_grow_count(const backend *be) { return ((const cpu_ctx *)be->ctx)->grow_count; }

static void *cpu_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    const int huge = bytes >= CPU_HUGE_PAGE;
    const size_t align = huge ? CPU_HUGE_PAGE : 64;
    size_t rounded = (bytes + align - 1) / align * align;
    if (rounded == 0) rounded = 64;
    void *p = NULL;
    CHECK(posix_memalign(&p, align, rounded) == 0, "cpu backend: cannot allocate %zu bytes", bytes);
    // Advice only: where THP is off the pages stay small and everything still works.
    if (huge) (void)madvise(p, rounded, MADV_HUGEPAGE);
    memset(p, 0, rounded);
    return p;
}

static void cpu_release(void *ctx, void *ptr) {
    (void)ctx;
    free(ptr);
}

static void cpu_copy(void *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    if (bytes) memmove(dst, src, bytes);
}

static void cpu_memset_zero(void *ctx, void *dst, size_t bytes) {
    (void)ctx;
    if (bytes) memset(dst, 0, bytes);
}

static void cpu_synchronize(void *ctx) { (void)ctx; }

/* Starts the peak resident set (VmHWM) over from the present one, so a backend's peak is its
 * own: a sweep builds one backend per point in one process, and VmHWM alone would carry the
 * largest point's peak into every later one. Writing "5" to clear_refs is Linux's reset of
 * VmHWM (proc(5)); malloc_trim first hands back what the previous point freed but the heap kept,
 * so the reset starts from what this process holds, as a fresh one would. A kernel without the
 * reset (no CONFIG_PROC_PAGE_MONITOR) leaves the process's peak: 0 tells the caller. */
static int cpu_peak_reset(void) {
    malloc_trim(0);
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return 0;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

/* Peak resident set (VmHWM) since the backend started (cpu_peak_reset): the weights, arena and
 * BLAS buffers all live in host memory. */
static size_t cpu_peak_memory(void *ctx) {
    (void)ctx;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmHWM: %zu kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024;
}

static void cpu_mark(void *vctx, int slot) {
    cpu_ctx *ctx = vctx;
    CHECK(slot >= 0 && slot < ctx->max_marks, "cpu backend: mark slot %d outside [0, %d)", slot,
          ctx->max_marks);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ctx->marks[slot] = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double cpu_mark_seconds(void *vctx, int slot) {
    cpu_ctx *ctx = vctx;
    CHECK(slot >= 0 && slot < ctx->max_marks, "cpu backend: mark slot %d outside [0, %d)", slot,
          ctx->max_marks);
    return ctx->marks[slot];
}

static const char *cpu_kernel_path(void *vctx) {
    return cpu_isa_name(((const cpu_ctx *)vctx)->kern->isa);
}

cpu_isa backend_cpu_isa(const backend *be) { return ((const cpu_ctx *)be->ctx)->kern->isa; }

static void cpu_free(void *vctx) {
    cpu_ctx *ctx = vctx;
    free(ctx->act.data);
    free(ctx->tile.data);
    free(ctx->attn.data);
    free(ctx->marks);
    free(ctx);
}

/* Host work is synchronous and host memory needs no staging: no stream, no graphs, no pinned
 * memory, no device memory to report; those optional entries stay NULL. */
static const backend_ops cpu_ops = {
    .name = "cpu",
    .free = cpu_free,
    .alloc = cpu_alloc,
    .release = cpu_release,
    .copy_to_device = cpu_copy,
    .copy_to_host = cpu_copy,
    .memset_zero = cpu_memset_zero,
    .synchronize = cpu_synchronize,
    .peak_memory = cpu_peak_memory,
    .embed = cpu_embed,
    .layernorm = cpu_layernorm,
    .residual_layernorm = cpu_residual_layernorm,
    .matmul = cpu_matmul,
    .bias_gelu = cpu_bias_gelu,
    .rmsnorm = cpu_rmsnorm,
    .residual_rmsnorm = cpu_residual_rmsnorm,
    .swiglu = cpu_swiglu,
    .gather_rows = cpu_gather_rows,
    .scatter_add_rows = cpu_scatter_add_rows,
    .attention = cpu_attention,
    .argmax = cpu_argmax,
    .mark = cpu_mark,
    .mark_seconds = cpu_mark_seconds,
    .kernel_path = cpu_kernel_path,
};

/* The level named by opt->cpu_isa, or the best the CPU has; non-zero with error_message() set
 * for an unknown name or a level this CPU lacks (the message names what it has). */
static int choose_isa(cpu_isa *isa, const backend_options *opt) {
    const cpu_isa best = cpu_isa_detect();
    const char *want = opt ? opt->cpu_isa : NULL;
    if (!want || !want[0] || !strcmp(want, "auto")) {
        *isa = best;
        return 0;
    }
    const int named = cpu_isa_from_name(want);
    if (named < 0) {
        error_set("backend.cpu_isa '%s' is not a level; allowed: auto, %s", want, cpu_isa_names());
        return 1;
    }
    if (named > (int)best || !cpu_kernel_set_for((cpu_isa)named)) {
        error_set("backend.cpu_isa %s: this CPU supports up to %s (%s); allowed here: auto and "
                  "the levels up to it (%s)",
                  want, cpu_isa_name(best), cpu_isa_detect_why(), cpu_isa_names());
        return 1;
    }
    *isa = (cpu_isa)named;
    return 0;
}

int backend_cpu_init(backend *be, const backend_options *opt) {
    cpu_isa isa;
    if (choose_isa(&isa, opt)) return 1;
    cpu_ctx *ctx = xcalloc(1, sizeof *ctx);
    ctx->kern = cpu_kernel_set_for(isa);
    // OpenBLAS is the OpenMP build (CMakeLists.txt), so one count serves both: 0 keeps OpenMP's
    // own (OMP_NUM_THREADS, else every core); the runner passes cores per node / ranks per node
    // so co-located ranks do not oversubscribe.
    if (opt && opt->threads > 0) {
        omp_set_num_threads(opt->threads);
        openblas_set_num_threads(opt->threads);
    }
    ctx->threads = omp_get_max_threads();
    // Prefill attention tiled through the level's tile kernel (docs/kernels.md, "Attention on
    // the CPU"): faster than two sgemm per head at every prompt measured, and the same function
    // at every level, which sgemm is not. The other paths stay selectable, for tests.
    ctx->attn_tiled_min = 1;
    ctx->attn_tile_gemm = 0;
    ctx->max_marks = opt && opt->max_marks > 0 ? opt->max_marks : 1;
    ctx->marks = xcalloc((unsigned long)ctx->max_marks, sizeof(double));
    cpu_scratch_reserve(ctx, &ctx->tile, (size_t)ctx->threads * CPU_MATMUL_TILE_FLOATS);
    ctx->grow_count = 0; // counts growth after init only
    (void)cpu_peak_reset(); // peak_memory counts from here (without the reset, from the start)
    be->ops = &cpu_ops;
    be->ctx = ctx;
    return 0;
}
