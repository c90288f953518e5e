/* `tripar explain BASE.h5 OTHER.h5...`: the command line and the three output forms (a
 * table with the verdict, CSV rows, JSON with the structure section) of the attribution in
 * analysis/explain_attr.c. docs/cli.md has the contract, docs/explain.md the method. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/path.h"
#include "analysis/explain.h"
#include "cli/cli.h"

enum { VERDICT_LEN = 8192, WORDS_LEN = 1024 };
typedef enum { FORMAT_TEXT = 0, FORMAT_CSV, FORMAT_JSON } explain_format;

typedef struct {
    explain_format format;
    const char *out;    /* -o FILE, NULL for stdout */
    const char **files; /* (argc): BASE first */
    int n;
} explain_args;

static void explain_usage(FILE *f) {
    fprintf(f,
            "usage: tripar explain BASE.h5 OTHER.h5 [OTHER2.h5 ...] [--format text|csv|json] "
            "[-o FILE]\n"
            "  Attributes the difference in TTFT, TPOT and end-to-end latency between OTHER and\n"
            "  BASE to phases (by layer), communication kinds and host gaps that sum exactly to\n"
            "  it, splits the per-layer work into layer count and per-layer cost, names each\n"
            "  run's critical rank and says the verdict in words (docs/explain.md).\n"
            "  Needs complete run files with record.timings: layer of models of one\n"
            "  architecture, embd and vocab; anything else exits 2 with the reason.\n");
}

/* Returns 0 to go on, 1 after --help, or -1 on bad usage (already reported). */
static int explain_parse_args(explain_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->files = xcalloc((unsigned long)argc, sizeof(char *));
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            explain_usage(stdout);
            return 1;
        } else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
            const char *f = argv[++i];
            if (!strcmp(f, "text"))
                a->format = FORMAT_TEXT;
            else if (!strcmp(f, "csv"))
                a->format = FORMAT_CSV;
            else if (!strcmp(f, "json"))
                a->format = FORMAT_JSON;
            else {
                fprintf(stderr, "tripar explain: --format %s: expected text, csv or json\n", f);
                return -1;
            }
        } else if ((!strcmp(argv[i], "-o") || !strcmp(argv[i], "--out")) && i + 1 < argc) {
            a->out = argv[++i];
        } else if (argv[i][0] == '-') {
            fprintf(stderr, "tripar explain: unknown or incomplete option %s\n", argv[i]);
            explain_usage(stderr);
            return -1;
        } else {
            a->files[a->n++] = argv[i];
        }
    }
    if (a->n < 2) {
        fprintf(stderr, "tripar explain: needs BASE.h5 and at least one OTHER.h5\n");
        explain_usage(stderr);
        return -1;
    }
    /* the rules of docs/cli.md, "Files a command reads and writes" */
    char why[PATH_WHY_MAX];
    int which = -1;
    if (a->out && path_check_output(a->out, why, sizeof why) != 0) {
        fprintf(stderr, "tripar explain: -o '%s' %s\n", a->out, why);
        return -1;
    }
    if (a->out && path_is_any_of(a->out, a->files, a->n, &which)) {
        fprintf(stderr,
                "tripar explain: -o '%s' is the same file as the input '%s'; an output may not "
                "replace an input, so give it another path\n",
                a->out, a->files[which]);
        return -1;
    }
    return 0;
}

static double kind_diff(const explain_run *b, const explain_run *o, explain_qty q, int k) {
    return explain_kind_seconds(o, q, k) - explain_kind_seconds(b, q, k);
}

static double total_diff(const explain_run *b, const explain_run *o, explain_qty q) {
    return explain_total_seconds(o, q) - explain_total_seconds(b, q);
}

/* A bucket's seconds in one layer; layer -1 is its row outside layers (slot 0: the embedding
 * all-reduce's tp_wait, the bubble's pp_recv_wait), so a bucket's layer rows and its outside
 * row sum to it. */
static double layer_cell(const explain_run *x, explain_qty q, int k, int layer) {
    return layer + 1 < x->slots ? x->bucket[q][(size_t)k * x->slots + layer + 1] : 0;
}

static const char *kind_group(int k) {
    if (k == EXPLAIN_HOST_GAP) return "gap";
    return explain_kind_is_work(k) ? "phase" : "comm";
}

/* The per-layer rows of every bucket, then its outside-layers row (layer -1), the ones that
 * are not zero in both runs: emit(kind, layer, group, base_s, other_s) for each. */
typedef void (*layer_row_fn)(void *ctx, int kind, int layer, const char *group, double base_s,
                             double other_s);
static void layer_rows_each(const explain_run *b, const explain_run *o, explain_qty q,
                            layer_row_fn emit, void *ctx) {
    int kinds[EXPLAIN_KIND_COUNT], n = explain_row_kinds(kinds);
    int layers = (b->slots > o->slots ? b->slots : o->slots) - 1;
    for (int r = 0; r < n; r++)
        for (int l = 0; l <= layers; l++) {
            int layer = l < layers ? l : -1; /* the outside row last */
            double vb = layer_cell(b, q, kinds[r], layer), vo = layer_cell(o, q, kinds[r], layer);
            if (vb != 0 || vo != 0)
                emit(ctx, kinds[r], layer, layer >= 0 ? "layer" : "outside_layers", vb, vo);
        }
}

/* ---- text ---- */

static void text_run_line(FILE *f, const char *who, const explain_run *x) {
    fprintf(f, "%-5s %s: %s, %s %s%s%s, %d layers, %d measured iterations of %d steps\n", who,
            x->run.path, x->label, x->run.backend, x->run.precision, x->has_roof ? ", " : "",
            x->has_roof ? x->roof.kv_cache : "", x->model_layers, x->iterations, x->steps);
}

static void text_measured(FILE *f, const explain_run *b, const explain_run *o) {
    fprintf(f, "measured from the events (ms; /metrics mean and the events' relative difference "
               "from it beside):\n");
    fprintf(f, "  %-5s %12s %24s %12s %24s %12s\n", "", "BASE", "(/metrics)", "OTHER", "(/metrics)",
            "diff");
    for (int q = 0; q < EXPLAIN_QTY_COUNT; q++) {
        char mb[32], mo[32];
        snprintf(mb, sizeof mb, "(%.3f, %+.1f%%)", 1e3 * b->metrics[q],
                 100 * (b->measured[q] / b->metrics[q] - 1));
        snprintf(mo, sizeof mo, "(%.3f, %+.1f%%)", 1e3 * o->metrics[q],
                 100 * (o->measured[q] / o->metrics[q] - 1));
        fprintf(f, "  %-5s %12.3f %24s %12.3f %24s %+12.3f\n", explain_qty_name((explain_qty)q),
                1e3 * b->measured[q], mb, 1e3 * o->measured[q], mo,
                1e3 * (o->measured[q] - b->measured[q]));
    }
}

static void text_rows(FILE *f, const explain_run *b, const explain_run *o) {
    double total = total_diff(b, o, EXPLAIN_E2E);
    fprintf(f, "%-42s %10s %10s %10s %7s %10s %10s  %s\n", "bucket (ms, means)", "E2E BASE",
            "E2E OTHER", "E2E diff", "share", "TTFT diff", "TPOT diff", "OTHER roofline");
    int kinds[EXPLAIN_KIND_COUNT], n_kinds = explain_row_kinds(kinds);
    int cancel = 0; /* some row exceeds the whole difference: shares of each side instead */
    double up = 0, down = 0;
    for (int i = 0; i < n_kinds; i++) {
        double d = kind_diff(b, o, EXPLAIN_E2E, kinds[i]);
        if (fabs(d) > fabs(total) * (1 + 1e-9)) cancel = 1;
        if (d > 0)
            up += d;
        else
            down -= d;
    }
    for (int i = 0; i < n_kinds; i++) {
        int k = kinds[i];
        char name[64], roof[WORDS_LEN];
        const char *words = explain_kind_words(k);
        snprintf(name, sizeof name, "%s%s%s%s", explain_kind_name(k), words[0] ? " (" : "", words,
                 words[0] ? ")" : "");
        explain_roof_words(o, k, roof, sizeof roof);
        double d = kind_diff(b, o, EXPLAIN_E2E, k);
        double share = cancel ? (d > 0   ? d / up
                                 : d < 0 ? d / down
                                         : 0.0)
                              : (total != 0 ? d / total : 0.0);
        fprintf(f, "  %-40s %10.3f %10.3f %+10.3f %6.1f%% %+10.3f %+10.3f  %s\n", name,
                1e3 * explain_kind_seconds(b, EXPLAIN_E2E, k),
                1e3 * explain_kind_seconds(o, EXPLAIN_E2E, k), 1e3 * d, 100 * share,
                1e3 * kind_diff(b, o, EXPLAIN_TTFT, k), 1e3 * kind_diff(b, o, EXPLAIN_TPOT, k),
                roof);
    }
    if (cancel)
        fprintf(f,
                "  (the parts cancel: +%.3f ms of increases, -%.3f ms of savings; each share "
                "is of its own side, the savings negative)\n",
                1e3 * up, 1e3 * down);
    fprintf(f, "  %-40s %10.3f %10.3f %+10.3f %6.1f%% %+10.3f %+10.3f\n", "total",
            1e3 * explain_total_seconds(b, EXPLAIN_E2E),
            1e3 * explain_total_seconds(o, EXPLAIN_E2E), 1e3 * total, total != 0 ? 100.0 : 0.0,
            1e3 * total_diff(b, o, EXPLAIN_TTFT), 1e3 * total_diff(b, o, EXPLAIN_TPOT));
}

static void text_structure(FILE *f, const explain_run *b, const explain_run *o) {
    explain_structure s;
    explain_structure_compute(b, o, EXPLAIN_E2E, &s);
    fprintf(f,
            "structure (E2E, critical ranks): BASE %.0f layer(s) x %.3f ms, OTHER %.0f layer(s) x "
            "%.3f ms\n",
            s.layers_base, 1e3 * s.per_layer_base, s.layers_other, 1e3 * s.per_layer_other);
    fprintf(f, "  %-16s %-22s %+10.3f ms\n", "layer count", "(L_o - L_b) x c_b",
            1e3 * s.layer_count);
    fprintf(f, "  %-16s %-22s %+10.3f ms\n", "per-layer cost", "L_o x (c_o - c_b)",
            1e3 * s.per_layer_cost);
    fprintf(f, "  %-16s %-22s %+10.3f ms\n", "pipeline bubble", "pp_recv_wait outside layers",
            1e3 * s.pipeline_bubble);
    fprintf(f, "  %-16s %-22s %+10.3f ms\n", "outside layers", "the rest", 1e3 * s.outside_layers);
    fprintf(f, "  %-16s %-22s %+10.3f ms\n", "total", "", 1e3 * s.total);
}

/* Every rank of OTHER against the same rank of BASE: own time (work, late exits), waits, the
 * collectives' shared part, preemption; the lead over its peers and the noise. */
static void text_ranks(FILE *f, const explain_run *b, const explain_run *o) {
    const int P = b->run.world_size;
    if (P == 1 && o->run.world_size == 1) return;
    explain_rank_diff *d = xcalloc((unsigned long)P, sizeof(explain_rank_diff));
    int n = explain_rank_diffs(b, o, d);
    if (n) {
        fprintf(f, "ranks (ms per iteration, OTHER - BASE; own = work + gaps + late exits):\n");
        fprintf(f, "  %-4s %-16s %-12s %10s %10s %10s %10s %10s %10s %10s %10s  %s\n", "rank",
                "host", "coords", "own", "work", "late", "waited", "shared", "preempted", "lead",
                "noise", "");
    }
    for (int r = 0; r < n; r++) {
        const run_rank *k = &o->run.ranks[r];
        char coords[32], pre[32];
        snprintf(coords, sizeof coords, "dp%d tp%d pp%d", k->dp_rank, k->tp_rank, k->pp_rank);
        if (isfinite(d[r].preempted))
            snprintf(pre, sizeof pre, "%+10.3f", 1e3 * d[r].preempted);
        else
            snprintf(pre, sizeof pre, "%10s", "n/r");
        fprintf(
            f,
            "  %-4d %-16.16s %-12s %+10.3f %+10.3f %+10.3f %+10.3f %+10.3f %s %+10.3f %10.3f  %s\n",
            r, k->host, coords, 1e3 * d[r].own, 1e3 * d[r].work, 1e3 * d[r].late, 1e3 * d[r].waited,
            1e3 * d[r].shared, pre, 1e3 * (isfinite(d[r].lead) ? d[r].lead : 0.0), 1e3 * d[r].noise,
            d[r].straggler ? "straggler"
            : d[r].waiter  ? "waited"
                           : "");
    }
    if (n && !(b->sched_present && o->sched_present))
        fprintf(f, "  (preemption not recorded%s: n/r)\n",
                b->sched_present || o->sched_present ? " in both runs" : "");
    free(d);
}

/* The expert-load verdict of each run that has one (mixtures of experts); nothing when both
 * are dense. words is a VERDICT_LEN buffer. */
static void text_expert_load(FILE *f, const explain_run *b, const explain_run *o, char *words) {
    const explain_run *runs[2] = {b, o};
    const char *who[2] = {"BASE", "OTHER"};
    int said = 0;
    for (int i = 0; i < 2; i++) {
        if (!runs[i]->has_moe) continue;
        explain_moe_words(runs[i], words, VERDICT_LEN);
        fprintf(f, "%s %s %s\n", said ? "            " : "expert load:", who[i], words);
        said = 1;
    }
}

static void text_write(FILE *f, const explain_run *runs, int n) {
    const explain_run *b = &runs[0];
    char words[WORDS_LEN], *verdict = xmalloc(VERDICT_LEN);
    for (int i = 1; i < n; i++) {
        const explain_run *o = &runs[i];
        if (i > 1) fprintf(f, "\n");
        text_run_line(f, "BASE", b);
        text_run_line(f, "OTHER", o);
        text_measured(f, b, o);
        text_rows(f, b, o);
        text_structure(f, b, o);
        text_ranks(f, b, o);
        explain_critical_words(b, words, sizeof words);
        fprintf(f, "critical rank: BASE %s\n", words);
        explain_critical_words(o, words, sizeof words);
        fprintf(f, "               OTHER %s\n", words);
        explain_verdict(b, o, verdict, VERDICT_LEN);
        fprintf(f, "verdict: %s\n", verdict);
        text_expert_load(f, b, o, verdict);
    }
    free(verdict);
}

/* ---- csv ---- */

static void csv_number(FILE *f, double v) {
    if (isfinite(v))
        fprintf(f, ",%.9g", v);
    else
        fprintf(f, ",nan");
}

static void csv_row(FILE *f, const char *other, explain_qty q, const char *group,
                    const char *bucket, int layer, double base_s, double other_s, double total) {
    fprintf(f, "%s,%s,%s,%s,", other, explain_qty_name(q), group, bucket);
    if (layer >= 0) fprintf(f, "%d", layer);
    csv_number(f, base_s);
    csv_number(f, other_s);
    csv_number(f, other_s - base_s);
    csv_number(f, total != 0 ? (other_s - base_s) / total : NAN);
    fprintf(f, "\n");
}

typedef struct {
    FILE *f;
    const char *other;
    explain_qty q;
    double total;
} csv_ctx;

static void csv_layer_row(void *ctx, int kind, int layer, const char *group, double base_s,
                          double other_s) {
    const csv_ctx *c = ctx;
    csv_row(c->f, c->other, c->q, group, explain_kind_name(kind), layer, base_s, other_s, c->total);
}

static void csv_write(FILE *f, const explain_run *runs, int n) {
    const explain_run *b = &runs[0];
    int kinds[EXPLAIN_KIND_COUNT], n_kinds = explain_row_kinds(kinds);
    fprintf(f, "other,quantity,kind,bucket,layer,base_s,other_s,diff_s,share\n");
    for (int i = 1; i < n; i++) {
        const explain_run *o = &runs[i];
        for (int q = 0; q < EXPLAIN_QTY_COUNT; q++) {
            double total = total_diff(b, o, (explain_qty)q);
            for (int r = 0; r < n_kinds; r++) {
                int k = kinds[r];
                csv_row(f, o->run.path, (explain_qty)q, kind_group(k), explain_kind_name(k), -1,
                        explain_kind_seconds(b, (explain_qty)q, k),
                        explain_kind_seconds(o, (explain_qty)q, k), total);
            }
            csv_row(f, o->run.path, (explain_qty)q, "total", "total", -1,
                    explain_total_seconds(b, (explain_qty)q),
                    explain_total_seconds(o, (explain_qty)q), total);
            csv_ctx c = {f, o->run.path, (explain_qty)q, total};
            layer_rows_each(b, o, (explain_qty)q, csv_layer_row, &c);
        }
    }
}

/* ---- json ---- */

/* A model size recorded as text in the job: a JSON number, null when absent ("?"). */
static json_t *model_number(const char *v) {
    char *end;
    long long n = strtoll(v, &end, 10);
    return end != v && *end == '\0' ? json_integer(n) : json_null();
}

static json_t *run_json(const explain_run *x) {
    char words[WORDS_LEN];
    const run_rank *c = &x->run.ranks[x->critical_rank];
    explain_critical_words(x, words, sizeof words);
    json_t *measured = json_object(), *metrics = json_object();
    for (int q = 0; q < EXPLAIN_QTY_COUNT; q++) {
        char key[16];
        snprintf(key, sizeof key, "%s_s", explain_qty_name((explain_qty)q));
        json_object_set_new(measured, key, cli_json_number(x->measured[q]));
        json_object_set_new(metrics, key, cli_json_number(x->metrics[q]));
    }
    json_t *critical = json_pack(
        "{s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:o, s:o, s:s, s:o, s:o, s:s?, s:o, s:s}", "rank",
        x->critical_rank, "dp_rank", c->dp_rank, "tp_rank", c->tp_rank, "pp_rank", c->pp_rank,
        "iterations", x->critical_iterations, "layers", x->critical_layers, "named",
        x->critical_named, "lead_s", cli_json_number(x->critical_lead), "noise_s",
        cli_json_number(x->critical_noise), "busiest_bucket", explain_kind_name(x->busiest_kind),
        "busiest_share", cli_json_number(x->busiest_share), "busiest_median_share",
        cli_json_number(x->busiest_median_share), "excess_bucket",
        x->excess_kind >= 0 ? explain_kind_name(x->excess_kind) : NULL, "excess_s",
        cli_json_number(x->excess_seconds), "words", words);
    json_t *model =
        json_pack("{s:s, s:o, s:o, s:i}", "arch", x->arch, "embd", model_number(x->embd), "vocab",
                  model_number(x->vocab), "layers", x->model_layers);
    json_t *sched = x->sched_present ? json_pack("{s:s}", "source", x->sched_source) : json_null();
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:s?, s:o, s:i, s:i, s:o, s:o, s:o, s:o}", "file",
                     x->run.path, "strategy", x->label, "backend", x->run.backend, "precision",
                     x->run.precision, "kv_cache", x->has_roof ? x->roof.kv_cache : NULL, "model",
                     model, "iterations", x->iterations, "steps", x->steps, "measured", measured,
                     "metrics", metrics, "critical_rank", critical, "sched", sched);
    if (x->has_moe) { /* a mixture of experts: the expert-load verdict */
        char *load = xmalloc(VERDICT_LEN);
        explain_moe_words(x, load, VERDICT_LEN);
        json_object_set_new(o, "expert_load", json_string(load));
        free(load);
    }
    return o;
}

static json_t *row_json(explain_qty q, const char *group, const char *bucket, int layer,
                        double base_s, double other_s, double total, const char *roof) {
    json_t *row =
        json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o}", "quantity", explain_qty_name(q), "kind",
                  group, "bucket", bucket, "base_s", cli_json_number(base_s), "other_s",
                  cli_json_number(other_s), "diff_s", cli_json_number(other_s - base_s), "share",
                  cli_json_number(total != 0 ? (other_s - base_s) / total : NAN));
    json_object_set_new(row, "layer", layer >= 0 ? json_integer(layer) : json_null());
    if (roof && roof[0]) json_object_set_new(row, "other_roofline", json_string(roof));
    return row;
}

typedef struct {
    json_t *rows;
    explain_qty q;
    double total;
} json_ctx;

static void json_layer_row(void *ctx, int kind, int layer, const char *group, double base_s,
                           double other_s) {
    json_ctx *c = ctx;
    json_array_append_new(c->rows, row_json(c->q, group, explain_kind_name(kind), layer, base_s,
                                            other_s, c->total, NULL));
}

/* Every rank of OTHER against the same rank of BASE (empty when the meshes differ). */
static json_t *ranks_json(const explain_run *b, const explain_run *o) {
    json_t *ranks = json_array();
    explain_rank_diff *d = xcalloc((unsigned long)b->run.world_size, sizeof(explain_rank_diff));
    int n = explain_rank_diffs(b, o, d);
    for (int r = 0; r < n; r++) {
        const explain_rank *ro = &o->ranks[r];
        const run_rank *k = &o->run.ranks[r];
        json_array_append_new(
            ranks,
            json_pack("{s:i, s:s, s:i, s:i, s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, "
                      "s:o, s:o, s:b, s:b}",
                      "rank", r, "host", k->host, "dp_rank", k->dp_rank, "tp_rank", k->tp_rank,
                      "pp_rank", k->pp_rank, "own_s", cli_json_number(ro->own), "own_diff_s",
                      cli_json_number(d[r].own), "work_diff_s", cli_json_number(d[r].work),
                      "late_diff_s", cli_json_number(d[r].late), "waited_diff_s",
                      cli_json_number(d[r].waited), "shared_diff_s", cli_json_number(d[r].shared),
                      "preempted_s", cli_json_number(ro->preempted), "preempted_diff_s",
                      cli_json_number(d[r].preempted), "lead_s", cli_json_number(d[r].lead),
                      "noise_s", cli_json_number(d[r].noise), "straggler", d[r].straggler, "waiter",
                      d[r].waiter));
    }
    free(d);
    return ranks;
}

static json_t *other_json(const explain_run *b, const explain_run *o) {
    json_t *rows = json_array(), *structure = json_object();
    char roof[WORDS_LEN];
    int kinds[EXPLAIN_KIND_COUNT], n_kinds = explain_row_kinds(kinds);
    for (int q = 0; q < EXPLAIN_QTY_COUNT; q++) {
        double total = total_diff(b, o, (explain_qty)q);
        for (int r = 0; r < n_kinds; r++) {
            int k = kinds[r];
            explain_roof_words(o, k, roof, sizeof roof);
            json_array_append_new(
                rows, row_json((explain_qty)q, kind_group(k), explain_kind_name(k), -1,
                               explain_kind_seconds(b, (explain_qty)q, k),
                               explain_kind_seconds(o, (explain_qty)q, k), total, roof));
        }
        json_array_append_new(rows,
                              row_json((explain_qty)q, "total", "total", -1,
                                       explain_total_seconds(b, (explain_qty)q),
                                       explain_total_seconds(o, (explain_qty)q), total, NULL));
        json_ctx c = {rows, (explain_qty)q, total};
        layer_rows_each(b, o, (explain_qty)q, json_layer_row, &c);
        explain_structure s;
        explain_structure_compute(b, o, (explain_qty)q, &s);
        json_object_set_new(
            structure, explain_qty_name((explain_qty)q),
            json_pack(
                "{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "layers_base",
                cli_json_number(s.layers_base), "layers_other", cli_json_number(s.layers_other),
                "per_layer_base_s", cli_json_number(s.per_layer_base), "per_layer_other_s",
                cli_json_number(s.per_layer_other), "layer_count_s", cli_json_number(s.layer_count),
                "per_layer_cost_s", cli_json_number(s.per_layer_cost), "pipeline_bubble_s",
                cli_json_number(s.pipeline_bubble), "outside_layers_s",
                cli_json_number(s.outside_layers), "total_s", cli_json_number(s.total)));
    }
    char *verdict = xmalloc(VERDICT_LEN), *straggler = xmalloc(VERDICT_LEN);
    explain_verdict(b, o, verdict, VERDICT_LEN);
    explain_straggler_words(b, o, straggler, VERDICT_LEN);
    json_t *j = json_pack("{s:s, s:o, s:o, s:o, s:o, s:s, s:s}", "file", o->run.path, "run",
                          run_json(o), "rows", rows, "structure", structure, "ranks",
                          ranks_json(b, o), "stragglers", straggler, "verdict", verdict);
    free(straggler);
    free(verdict);
    return j;
}

static int json_write(FILE *f, const explain_run *runs, int n) {
    json_t *others = json_array();
    for (int i = 1; i < n; i++)
        json_array_append_new(others, other_json(&runs[0], &runs[i]));
    json_t *root = json_pack("{s:o, s:o}", "base", run_json(&runs[0]), "others", others);
    return cli_json_write(root, NULL, f, JSON_INDENT(1)); /* any failure: exit 1 (explain_main) */
}

/* Loads every file (BASE first) up to the first refused; checks each OTHER is comparable. */
static int runs_load(explain_run *runs, const explain_args *a, int *loaded) {
    *loaded = 0;
    for (int i = 0; i < a->n; i++) {
        int rc = explain_run_load(&runs[i], a->files[i]);
        (*loaded)++;
        if (rc != STATUS_OK) return rc;
        if (i > 0 && !explain_runs_comparable(&runs[0], &runs[i])) return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

int explain_main(int argc, char **argv) {
    explain_args a;
    int rc = explain_parse_args(&a, argc, argv);
    if (rc != 0) {
        free(a.files);
        return rc > 0 ? TRIPAR_EXIT_OK : TRIPAR_EXIT_USAGE;
    }
    explain_run *runs = xcalloc((unsigned long)a.n, sizeof(explain_run));
    int loaded = 0;
    rc = runs_load(runs, &a, &loaded);
    int code = TRIPAR_EXIT_OK;
    if (rc != STATUS_OK) {
        fprintf(stderr, "tripar explain: %s\n", error_message());
        code = TRIPAR_EXIT_USAGE;
    } else {
        FILE *f = a.out ? fopen(a.out, "w") : stdout;
        if (!f) {
            fprintf(stderr, "tripar explain: cannot write %s\n", a.out);
            code = TRIPAR_EXIT_USAGE;
        } else {
            int wrc = STATUS_OK;
            if (a.format == FORMAT_TEXT)
                text_write(f, runs, a.n);
            else if (a.format == FORMAT_CSV)
                csv_write(f, runs, a.n);
            else
                wrc = json_write(f, runs, a.n);
            if ((a.out && fclose(f) != 0) || (!a.out && fflush(f) != 0) || wrc != STATUS_OK) {
                fprintf(stderr, "tripar explain: writing %s failed\n", a.out ? a.out : "stdout");
                code = TRIPAR_EXIT_RUNTIME;
            }
        }
    }
    for (int i = 0; i < loaded; i++)
        explain_run_free(&runs[i]);
    free(runs);
    free(a.files);
    return code;
}
