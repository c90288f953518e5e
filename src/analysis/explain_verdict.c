/* The verdict of `tripar explain` in words, generated from the attribution: how much slower
 * OTHER is, then the causes ranked by |contribution| to the end-to-end difference, each
 * clause naming a row of the table, then the structure (layer count vs per-layer cost). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "analysis/explain.h"

/* Clauses stop once they cover this share of the summed |contributions| ... */
#define VERDICT_COVER 0.95
/* ... or at this many, and skip rows under this share of the difference. */
#define VERDICT_CLAUSES 5
#define VERDICT_MIN_SHARE 0.01
/* A difference under this fraction of BASE's latency is said to be none. */
#define VERDICT_SAME 0.01
/* The per-window verdicts (TTFT, TPOT) say at most this many causes each. */
#define VERDICT_WINDOW_CLAUSES 3
enum { STRAGGLER_WORDS = 2048 };

/* "2.12x slower", "1.30x faster", "as fast". */
static void say_ratio(explain_text *t, double other, double base) {
    double r = other / base;
    if (!(base > 0) || !isfinite(r))
        explain_say(t, "not comparable");
    else if (r >= 1.005)
        explain_say(t, "%.2fx slower", r);
    else if (r <= 0.995)
        explain_say(t, "%.2fx faster", 1 / r);
    else
        explain_say(t, "as fast");
}

static int is_gemm(int kind) {
    return kind == PHASE_QKV_GEMM || kind == PHASE_ATTN_OUT_GEMM || kind == PHASE_MLP_GEMM ||
           kind == PHASE_HEAD;
}

/* What sets a row apart between the runs, in brackets: the weight format of GEMM rows (on the
 * CPU int8 dequantisation is fused into the products, so it is their time), the KV layout of
 * attention. */
static void say_row_name(explain_text *t, const explain_run *b, const explain_run *o, int kind) {
    explain_say(t, "%s", explain_kind_name(kind));
    const char *words = explain_kind_words(kind);
    if (kind == EXPLAIN_HOST_GAP)
        explain_say(t, " (%s: %s)", words,
                    !strcmp(o->run.backend, "cuda") ? "on the GPU, kernel-launch overhead"
                                                    : "on the CPU, everything outside the phases");
    else if (words[0])
        explain_say(t, " (%s)", words);
    int bi = !strcmp(b->run.precision, "int8w"), oi = !strcmp(o->run.precision, "int8w");
    if (is_gemm(kind) && kind != PHASE_HEAD && (bi || oi))
        explain_say(t, " (%s int8w: dequantisation fused)",
                    bi && oi ? "both"
                    : oi     ? "OTHER"
                             : "BASE");
    if (kind == PHASE_ATTENTION && b->has_roof && o->has_roof &&
        strcmp(b->roof.kv_cache, o->roof.kv_cache))
        explain_say(t, " (%s vs %s KV)", o->roof.kv_cache, b->roof.kv_cache);
}

/* The rates behind a row, when both runs have its roofline: bytes and bandwidth for a
 * memory-bound phase, FLOP rate for a compute-bound one. */
static void say_row_rates(explain_text *t, const explain_run *b, const explain_run *o, int kind) {
    double bb, bf, bgbs, bgf, ob, of, ogbs, ogf;
    int bbound, obound;
    if (!explain_roof_total(b, kind, &bb, &bf, &bgbs, &bgf, &bbound) ||
        !explain_roof_total(o, kind, &ob, &of, &ogbs, &ogf, &obound))
        return;
    if (obound == ROOF_MEMORY && bb > 0 && bgbs > 0) {
        double change = ogbs / bgbs - 1;
        explain_say(t, ", which reads %.2fx the bytes at %.0f%% %s bandwidth (%.1f vs %.1f GB/s)",
                    ob / bb, 100 * fabs(change), change < 0 ? "lower" : "higher", ogbs, bgbs);
    } else if (obound == ROOF_COMPUTE && bf > 0 && bgf > 0) {
        explain_say(t, ", %.2fx the FLOPs at %.1f vs %.1f GFLOP/s (compute-bound)", of / bf, ogf,
                    bgf);
    } else if (obound == ROOF_OVERHEAD) {
        explain_say(t, ", overhead-bound (short events far below both ceilings)");
    }
}

static int by_magnitude_desc(const void *a, const void *b) {
    double x = fabs(((const double *)a)[1]), y = fabs(((const double *)b)[1]);
    return x > y ? -1 : x < y ? 1 : 0;
}

/* The ranked clauses over the row kinds' contributions to quantity q, at most max_clauses.
 * A share is of the difference while no part exceeds it; where parts cancel (one is larger
 * than the whole difference), the increases and savings are said apart, each share of its
 * own side, so no share is over 100%. */
static void say_causes(explain_text *t, const explain_run *b, const explain_run *o, explain_qty q,
                       int max_clauses) {
    double rows[EXPLAIN_KIND_COUNT][2], magnitude = 0, up = 0, down = 0;
    int kinds[EXPLAIN_KIND_COUNT], n = explain_row_kinds(kinds);
    double total = explain_total_seconds(o, q) - explain_total_seconds(b, q);
    for (int i = 0; i < n; i++) {
        double d = explain_kind_seconds(o, q, kinds[i]) - explain_kind_seconds(b, q, kinds[i]);
        rows[i][0] = kinds[i];
        rows[i][1] = d;
        magnitude += fabs(d);
        if (d > 0)
            up += d;
        else
            down -= d;
    }
    qsort(rows, (size_t)n, sizeof rows[0], by_magnitude_desc);
    const int cancel = fabs(rows[0][1]) > fabs(total) * (1 + 1e-9);
    if (cancel)
        explain_say(t,
                    "The parts cancel: %+.3f ms of increases and %.3f ms of savings make the %+.3f "
                    "ms difference. ",
                    1e3 * up, 1e3 * down, 1e3 * total);
    double covered = 0;
    int said = 0;
    for (int i = 0; i < n && said < max_clauses && covered < VERDICT_COVER * magnitude; i++) {
        int k = (int)rows[i][0];
        double d = rows[i][1], side = cancel ? (d > 0 ? up : down) : fabs(total);
        double share = side > 0 ? fabs(d) / side : 0;
        if (share < VERDICT_MIN_SHARE) break;
        covered += fabs(d);
        explain_say(t, said ? " " : "");
        if (cancel) {
            say_row_name(t, b, o, k);
            explain_say(t, " %s %.3f ms (%.0f%% of the %s)", d > 0 ? "adds" : "saves",
                        1e3 * fabs(d), 100 * share, d > 0 ? "increases" : "savings");
        } else if (d * total > 0) {
            explain_say(t, "%.0f%% of the difference (%+.3f ms) is ", 100 * share, 1e3 * d);
            say_row_name(t, b, o, k);
        } else {
            say_row_name(t, b, o, k);
            explain_say(t, " %s %.3f ms (%.0f%% of the difference, against it)",
                        total > 0 ? "saves" : "costs", 1e3 * fabs(d), 100 * share);
        }
        say_row_rates(t, b, o, k);
        explain_say(t, ".");
        said++;
    }
}

/* A structure part: its share of the difference when every part is within it, else in ms. */
static void say_part(explain_text *t, double part, double total, int cancel) {
    if (cancel)
        explain_say(t, "%+.3f ms", 1e3 * part);
    else
        explain_say(t, "%.0f%% of the difference (%+.3f ms)", 100 * part / total, 1e3 * part);
}

/* Layer count against per-layer cost, for the per-layer work of the critical ranks, and the
 * pipeline bubble by name. */
static void say_structure(explain_text *t, const explain_run *b, const explain_run *o,
                          double total) {
    explain_structure s;
    explain_structure_compute(b, o, EXPLAIN_E2E, &s);
    const double parts[] = {s.layer_count, s.per_layer_cost, s.pipeline_bubble, s.outside_layers};
    int cancel = 0;
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++)
        if (fabs(parts[i]) > fabs(total) * (1 + 1e-9) || parts[i] * total < 0) cancel = 1;
    if (s.layers_other != s.layers_base && s.layers_base > 0) {
        double change = s.layers_other / s.layers_base - 1;
        explain_say(t, " %.0f vs %.0f layers on the critical rank is ", s.layers_other,
                    s.layers_base);
        say_part(t, s.layer_count, total, cancel);
        explain_say(t, " (the layer count %s %.0f%% of BASE's per-layer work), per-layer cost ",
                    change < 0 ? "saves" : "adds", 100 * fabs(change));
        say_part(t, s.per_layer_cost, total, cancel);
    } else {
        explain_say(
            t,
            " Both critical ranks run %.0f layer%s, so the per-layer part (%+.3f ms) is all "
            "per-layer cost",
            s.layers_base, s.layers_base == 1 ? "" : "s", 1e3 * s.per_layer_cost);
    }
    if (b->run.pp > 1 || o->run.pp > 1) {
        explain_say(t, "; the pipeline bubble (pp_recv_wait outside layers) is ");
        say_part(t, s.pipeline_bubble, total, cancel);
    }
    explain_say(t, "; the rest outside layers %+.3f ms", 1e3 * s.outside_layers);
    explain_say(t, cancel ? " (the parts cancel, so they are given in ms)." : ".");
}

/* The causes of one window's difference, when it is one: "To the first token (+1.2 ms): ...". */
static void say_window(explain_text *t, const explain_run *b, const explain_run *o, explain_qty q,
                       const char *what) {
    double total = explain_total_seconds(o, q) - explain_total_seconds(b, q);
    if (fabs(total) < VERDICT_SAME * b->measured[q] || total == 0) {
        explain_say(t, " %s (%+.3f ms): no difference beyond %.0f%%.", what, 1e3 * total,
                    100 * VERDICT_SAME);
        return;
    }
    explain_say(t, " %s (%+.3f ms): ", what, 1e3 * total);
    say_causes(t, b, o, q, VERDICT_WINDOW_CLAUSES);
}

void explain_verdict(const explain_run *b, const explain_run *o, char *out, size_t len) {
    explain_text t = {out, len, 0};
    out[0] = '\0';
    const double *mb = b->measured, *mo = o->measured;
    explain_say(&t, "OTHER is ");
    if (b->steps > 1 && o->steps > 1) {
        say_ratio(&t, mo[EXPLAIN_TPOT], mb[EXPLAIN_TPOT]);
        explain_say(&t, " per token (TPOT %.3f vs %.3f ms), ", 1e3 * mo[EXPLAIN_TPOT],
                    1e3 * mb[EXPLAIN_TPOT]);
    }
    say_ratio(&t, mo[EXPLAIN_E2E], mb[EXPLAIN_E2E]);
    explain_say(&t, " end to end (%.3f vs %.3f ms) and ", 1e3 * mo[EXPLAIN_E2E],
                1e3 * mb[EXPLAIN_E2E]);
    say_ratio(&t, mo[EXPLAIN_TTFT], mb[EXPLAIN_TTFT]);
    explain_say(&t, " to the first token (%.3f vs %.3f ms).", 1e3 * mo[EXPLAIN_TTFT],
                1e3 * mb[EXPLAIN_TTFT]);
    double total = explain_total_seconds(o, EXPLAIN_E2E) - explain_total_seconds(b, EXPLAIN_E2E);
    /* a straggler can hide in an unchanged latency (its peers' slack absorbed it) */
    char *straggler = xmalloc(STRAGGLER_WORDS);
    explain_straggler_words(b, o, straggler, STRAGGLER_WORDS);
    if (straggler[0]) explain_say(&t, " %s", straggler);
    free(straggler);
    if (fabs(total) < VERDICT_SAME * mb[EXPLAIN_E2E]) {
        explain_say(&t,
                    " The end-to-end difference (%+.3f ms) is within %.0f%% of BASE's latency: no "
                    "cause to rank end to end.",
                    1e3 * total, 100 * VERDICT_SAME);
    } else {
        explain_say(&t, " End to end: ");
        say_causes(&t, b, o, EXPLAIN_E2E, VERDICT_CLAUSES);
        say_structure(&t, b, o, total);
        if (b->critical_named && o->critical_named && b->critical_rank != o->critical_rank)
            explain_say(&t, " The critical rank moves from rank %d to rank %d.", b->critical_rank,
                        o->critical_rank);
    }
    /* the windows even when the whole run is the same: a slower prefill that a faster decode
     * pays back (int8w against fp32) is two causes a user asks about, not none */
    say_window(&t, b, o, EXPLAIN_TTFT, "To the first token");
    if (b->steps > 1 && o->steps > 1) say_window(&t, b, o, EXPLAIN_TPOT, "Per token");
}
