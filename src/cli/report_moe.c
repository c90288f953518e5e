/* `tripar report`'s expert-load section (report_moe.h): the arithmetic is analysis/moe_load.c;
 * this formats it as text and JSON. */
#include "cli/report_moe.h"

#include <math.h>
#include <string.h>

#include "analysis/moe_load.h"
#include "base/check.h"
#include "cli/cli.h"

/* 1 with l read; 0 when absent; a damaged /moe is said once on out (when given) and skipped */
static int load_get(const run_data *run, moe_load *l, FILE *out) {
    const int got = moe_load_read(run->file, l);
    if (got < 0 && out) fprintf(out, "  expert load: %s\n", error_message());
    return got > 0;
}

/* The cells of one period: "1.35 (2.00)" (mean over steps, worst step), the hottest expert
 * ("e5 31%", with its layer in the overall row) and the ep block ratio; "-" when nothing was
 * routed. */
static void period_cells(const moe_imbalance *m, int with_layer, char cell[3][32]) {
    if (m->samples == 0) {
        for (int c = 0; c < 3; c++)
            snprintf(cell[c], sizeof cell[c], "-");
        return;
    }
    snprintf(cell[0], sizeof cell[0], "%.2f (%.2f)", m->ratio_mean, m->ratio_max);
    if (with_layer)
        snprintf(cell[1], sizeof cell[1], "L%d e%d %.0f%%", m->hottest_layer, m->hottest_expert,
                 100 * m->hottest_share);
    else
        snprintf(cell[1], sizeof cell[1], "e%d %.0f%%", m->hottest_expert, 100 * m->hottest_share);
    snprintf(cell[2], sizeof cell[2], "%.2f", m->block_ratio_mean);
}

/* One table line: the layer, then per period the ratio and the hottest expert, then with
 * ep > 1 the block ratios; no trailing blanks. */
static void print_line(FILE *out, int ep, const char *name, char cell[MOE_PERIODS][3][32]) {
    char line[256];
    int n = snprintf(line, sizeof line, "    %-6s %-15s %-15s %-16s %-16s", name, cell[0][0],
                     cell[1][0], cell[0][1], cell[1][1]);
    if (ep > 1 && n > 0 && (size_t)n < sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, " %-13s %s", cell[0][2], cell[1][2]);
    size_t end = strlen(line);
    while (end > 0 && line[end - 1] == ' ')
        line[--end] = '\0';
    fprintf(out, "%s\n", line);
}

static void print_row(FILE *out, const moe_load *l, const char *name, int layer) {
    char cell[MOE_PERIODS][3][32];
    for (int p = 0; p < MOE_PERIODS; p++) {
        moe_imbalance m;
        moe_imbalance_compute(l, (moe_period)p, layer, &m);
        period_cells(&m, layer < 0, cell[p]);
    }
    print_line(out, l->ep, name, cell);
}

void report_moe_print(FILE *out, const run_data *run) {
    moe_load l;
    if (!load_get(run, &l, out)) return;
    fprintf(out,
            "  expert load (/moe: iteration %d, %d step%s, %d dp replica%s, %d experts, top-%d%s, "
            "ep %d): max/mean tokens per expert, mean over steps (worst step); the hottest "
            "expert and its share of its layer's routed rows\n",
            l.iteration, l.steps_run, l.steps_run == 1 ? "" : "s", l.replicas,
            l.replicas == 1 ? "" : "s", l.experts, l.top_k,
            l.shared ? ", shared expert not counted" : "", l.ep);
    char head[MOE_PERIODS][3][32] = {{"prefill", "hottest prefill", "ep-block pre"},
                                     {"decode", "hottest decode", "ep-block dec"}};
    print_line(out, l.ep, "layer", head);
    for (int y = 0; y < l.layers; y++) {
        char name[16];
        snprintf(name, sizeof name, "%d", y);
        print_row(out, &l, name, y);
    }
    print_row(out, &l, "all", -1);
    moe_load_free(&l);
}

static json_t *imbalance_json(const moe_imbalance *m, int with_layer) {
    json_t *o = json_object();
    json_object_set_new(o, "imbalance_mean", cli_json_number(m->ratio_mean));
    json_object_set_new(o, "imbalance_max", cli_json_number(m->ratio_max));
    json_object_set_new(o, "block_imbalance_mean", cli_json_number(m->block_ratio_mean));
    json_object_set_new(o, "routed_rows", json_integer(m->rows));
    if (with_layer) json_object_set_new(o, "hottest_layer", json_integer(m->hottest_layer));
    json_object_set_new(o, "hottest_expert", json_integer(m->hottest_expert));
    json_object_set_new(o, "hottest_share", cli_json_number(m->hottest_share));
    json_object_set_new(o, "hottest_block", json_integer(m->hottest_block));
    return o;
}

void report_moe_json(json_t *run_object, const run_data *run) {
    moe_load l;
    if (!load_get(run, &l, NULL)) return;
    json_t *o = json_pack("{s:i, s:i, s:b, s:i, s:i, s:i, s:i}", "experts", l.experts, "top_k",
                          l.top_k, "shared_expert", l.shared, "ep", l.ep, "replicas", l.replicas,
                          "iteration", l.iteration, "steps_run", l.steps_run);
    for (int p = 0; p < MOE_PERIODS; p++) {
        moe_imbalance m;
        moe_imbalance_compute(&l, (moe_period)p, -1, &m);
        json_t *period = imbalance_json(&m, 1), *layers = json_array();
        for (int y = 0; y < l.layers; y++) {
            moe_imbalance_compute(&l, (moe_period)p, y, &m);
            json_t *row = imbalance_json(&m, 0);
            json_object_set_new(row, "layer", json_integer(y));
            json_array_append_new(layers, row);
        }
        json_object_set_new(period, "layers", layers);
        json_object_set_new(o, moe_period_name((moe_period)p), period);
    }
    json_object_set_new(run_object, "expert_load", o);
    moe_load_free(&l);
}

int report_moe_ratios(const run_data *run, double ratios[2]) {
    ratios[0] = ratios[1] = NAN;
    moe_load l;
    if (!load_get(run, &l, NULL)) return 0;
    for (int p = 0; p < MOE_PERIODS; p++) {
        moe_imbalance m;
        moe_imbalance_compute(&l, (moe_period)p, -1, &m);
        ratios[p] = m.ratio_mean;
    }
    moe_load_free(&l);
    return 1;
}
