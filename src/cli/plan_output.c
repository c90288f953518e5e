/* What `tripar plan` prints: the ranked table with a reason per row, and the same rows for
 * every strategy as CSV or JSON (docs/planner.md "Output"). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "cli/plan.h"
#include "cli/cli.h"

#define GIB 1073741824.0

/* "dp1-tp4-pp2", and "-ep2" after it with expert blocks (no space: the table splits on them) */
static void strategy_label(const plan_strategy *s, char *buf, size_t len) {
    char ep[16] = "";
    if (plan_strategy_ep(s) > 1) snprintf(ep, sizeof ep, "-ep%d", s->ep);
    snprintf(buf, len, "dp%d-tp%d-pp%d%s", s->dp, s->tp, s->pp, ep);
}

/* Whether b repeats a's strategy with every figure the table shows the same: an order that
 * puts the ranks on the cores alike (every order is planned on a time-shared node). */
static int same_row(const plan_prediction *a, const plan_prediction *b) {
    const double fa[] = {a->ttft, a->tpot, a->e2e, a->tokens_per_s, a->rank_bytes,
                         a->served.goodput, a->served.ttft_p90};
    const double fb[] = {b->ttft, b->tpot, b->e2e, b->tokens_per_s, b->rank_bytes,
                         b->served.goodput, b->served.ttft_p90};
    if (a->s.dp != b->s.dp || a->s.tp != b->s.tp || a->s.pp != b->s.pp ||
        a->s.microbatches != b->s.microbatches || a->s.overlap != b->s.overlap ||
        plan_strategy_ep(&a->s) != plan_strategy_ep(&b->s) || a->fits != b->fits)
        return 0;
    for (int k = 0; k < 7; k++)
        if (fabs(fa[k] - fb[k]) > 1e-12 * fmax(fabs(fa[k]), fabs(fb[k]))) return 0;
    return 1;
}

/* The table: --top rows, a row per run of consecutive strategies that differ only in the order
 * (same figures), its ranks as "3-6" and its orders as "auto +3". Returns the strategies its
 * rows cover. */
static int write_text(FILE *out, const plan_summary *q, const plan_cluster *c,
                      const plan_prediction *p, int n, int top) {
    fprintf(out,
            "tripar plan: %s on %d of %s's devices (%d x %d), batch %d, prompt %d, %d new "
            "tokens; objective %s",
            q->model_name, q->gpus, c->name, c->nodes, c->devices_per_node, q->w.batch, q->w.prompt,
            q->w.new_tokens, plan_objective_name(q->objective));
    if (q->ttft_slo > 0) fprintf(out, ", TTFT <= %g s", q->ttft_slo);
    if (q->tpot_slo > 0) fprintf(out, ", TPOT <= %g s", q->tpot_slo);
    if (q->rate > 0)
        fprintf(out, "\nstream: %g requests/s, Poisson, for %g s (seed 1), served as tripar's serve "
                     "loop serves it; goodput = requests/s meeting both targets",
                q->rate, q->stream_seconds);
    /* a GPU cluster's efficiency models price what no calibration run measured */
    fprintf(out, "\nrates: %s",
            q->n_calibrations && c->gpu.given
                ? "calibrated from the measured runs; the GPU efficiency models for the phases "
                  "they do not cover"
            : q->n_calibrations ? "calibrated from the measured runs"
            : c->gpu.given      ? "the cluster's ceilings and its GPU efficiency models "
                                  "(device.efficiency; no --calibrate)"
                                : "the cluster's ceilings (a roofline; no --calibrate)");
    if (n > 0 && plan_node_time_shared(c, p[0].s.dp * p[0].s.tp * p[0].s.pp))
        fprintf(out, "; %d ranks on a node of %d cores, time-shared by those busy at once",
                p[0].node_ranks, c->cores_per_node);
    fprintf(out, "\nprecision: %s weights (%s)\nkv cache: %s (%s)\n",
            precision_kind_name(q->precision), q->precision_why, kv_dtype_kind_name(q->kv_dtype),
            q->kv_dtype_why);
    if (q->experts > 0 && q->expert_runs > 0)
        fprintf(out, "experts: routed as %d calibration run%s recorded (hottest expert %.2fx its "
                     "layer's mean)\n",
                q->expert_runs, q->expert_runs > 1 ? "s" : "", q->expert_hottest);
    else if (q->experts > 0)
        fprintf(out, "experts: uniform routing (no calibration run recorded this model's "
                     "routing)\n");
    fprintf(out, "\n");
    fprintf(out, "%7s  %-16s %3s %3s %-11s %10s %10s %10s %11s %9s %8s", "rank", "strategy", "mb",
            "ovl", "order", "TTFT ms", "TPOT ms", "E2E ms", "tokens/s", "req/s", "GiB/rank");
    if (q->rate > 0) fprintf(out, " %9s %6s %11s", "goodput", "met %", "p90 TTFT ms");
    fprintf(out, "  why\n");
    int i = 0, rows = 0, merged = 0;
    for (; i < n && rows < top; rows++) {
        int j = i + 1;
        while (j < n && same_row(&p[i], &p[j]))
            j++;
        char label[48], why[160], ranks[24], order[32];
        strategy_label(&p[i].s, label, sizeof label);
        plan_reason(&p[i], c, why, sizeof why);
        if (j - i > 1) {
            snprintf(ranks, sizeof ranks, "%d-%d", i + 1, j);
            snprintf(order, sizeof order, "%s +%d", plan_order_names[p[i].s.order], j - i - 1);
            merged = 1;
        } else {
            snprintf(ranks, sizeof ranks, "%d", i + 1);
            snprintf(order, sizeof order, "%s", plan_order_names[p[i].s.order]);
        }
        const int slo_miss = (q->ttft_slo > 0 || q->tpot_slo > 0) && !plan_meets_slo(q, &p[i]);
        fprintf(out, "%7s  %-16s %3d %3s %-11s %10.3f %10.3f %10.3f %11.1f %9.3f %8.2f", ranks,
                label, p[i].s.microbatches, p[i].s.overlap ? "on" : "off", order, 1e3 * p[i].ttft,
                1e3 * p[i].tpot, 1e3 * p[i].e2e, p[i].tokens_per_s, p[i].requests_per_s,
                p[i].rank_bytes / GIB);
        /* under a stream the SLO is met request by request: the goodput says how often */
        if (q->rate > 0)
            fprintf(out, " %9.3f %6.1f %11.3f  %s\n", p[i].served.goodput,
                    100 * p[i].served.attainment, 1e3 * p[i].served.ttft_p90, why);
        else
            fprintf(out, "  %s%s\n", slo_miss ? "misses the SLO; " : "", why);
        i = j;
    }
    int fitting = 0;
    for (int k = 0; k < n; k++)
        fitting += p[k].fits;
    if (merged)
        fprintf(out, "\n\"+N\": N more orders with the same figures (the rows of --format csv or "
                     "json name each)");
    fprintf(out, "\n%d strategies planned (%d fit) in %.3f s\n", n, fitting, q->seconds);
    return i;
}

/* The columns of CSV and JSON, in one table so both stay the same. */
typedef struct {
    const char *name;
    int is_int; /* 2: a flag, 0/1 in CSV and a boolean in JSON */
    double (*get)(const plan_prediction *);
} column;

#define COL_INT(field)                                                                             \
    static double get_##field(const plan_prediction *p) { return p->s.field; }
#define COL_NUM(field)                                                                             \
    static double get_##field(const plan_prediction *p) { return p->field; }
COL_INT(dp)
COL_INT(tp)
COL_INT(pp)
static double get_ep(const plan_prediction *p) { return plan_strategy_ep(&p->s); }
COL_INT(microbatches)
COL_INT(overlap)
COL_NUM(ttft)
COL_NUM(tpot)
COL_NUM(e2e)
COL_NUM(tokens_per_s)
COL_NUM(requests_per_s)
COL_NUM(weight_bytes)
COL_NUM(kv_bytes)
COL_NUM(act_bytes)
COL_NUM(rank_bytes)
static double get_fits(const plan_prediction *p) { return p->fits; }
COL_NUM(compute)
COL_NUM(tp_exposed)
COL_NUM(tp_hidden)
COL_NUM(tp_total)
COL_NUM(ep_exposed)
COL_NUM(pp_exposed)
COL_NUM(pp_total)
COL_NUM(bubble)
COL_NUM(dp_gather)
COL_NUM(prefill_bubble_fraction)
static double get_tp_nodes(const plan_prediction *p) { return p->tp_group.nodes; }
static double get_pp_nodes(const plan_prediction *p) { return p->pp_group.nodes; }
COL_NUM(time_share)

static const column COLUMNS[] = {
    {"dp", 1, get_dp},
    {"tp", 1, get_tp},
    {"pp", 1, get_pp},
    {"ep", 1, get_ep},
    {"microbatches", 1, get_microbatches},
    {"overlap", 1, get_overlap},
    {"ttft_s", 0, get_ttft},
    {"tpot_s", 0, get_tpot},
    {"e2e_s", 0, get_e2e},
    {"tokens_per_s", 0, get_tokens_per_s},
    {"requests_per_s", 0, get_requests_per_s},
    {"weight_bytes", 1, get_weight_bytes},
    {"kv_bytes", 1, get_kv_bytes},
    {"activation_bytes", 1, get_act_bytes},
    {"rank_bytes", 1, get_rank_bytes},
    {"fits", 2, get_fits},
    {"compute_s", 0, get_compute},
    {"tp_exposed_s", 0, get_tp_exposed},
    {"tp_hidden_s", 0, get_tp_hidden},
    {"tp_allreduce_s", 0, get_tp_total},
    {"ep_alltoall_s", 0, get_ep_exposed},
    {"pp_exposed_s", 0, get_pp_exposed},
    {"pp_transfer_s", 0, get_pp_total},
    {"bubble_s", 0, get_bubble},
    {"dp_gather_s", 0, get_dp_gather},
    {"prefill_bubble_fraction", 0, get_prefill_bubble_fraction},
    {"tp_nodes", 1, get_tp_nodes},
    {"pp_nodes", 1, get_pp_nodes},
    {"time_share", 0, get_time_share},
};
enum { N_COLUMNS = sizeof COLUMNS / sizeof COLUMNS[0] };

/* Under --rate (plan_served): appended to CSV's columns, JSON's `served` object. */
#define COL_SERVED(field)                                                                          \
    static double get_served_##field(const plan_prediction *p) { return p->served.field; }
COL_SERVED(goodput)
COL_SERVED(attainment)
COL_SERVED(ttft_p50)
COL_SERVED(ttft_p90)
COL_SERVED(tpot_p50)
COL_SERVED(tpot_p90)
COL_SERVED(mean_batch)
COL_SERVED(capacity)
static double get_served_arrived(const plan_prediction *p) { return (double)p->served.arrived; }
static double get_served_served(const plan_prediction *p) { return (double)p->served.served; }
static double get_served_met(const plan_prediction *p) { return (double)p->served.met; }
static const column SERVED_COLUMNS[] = {
    {"goodput_rps", 0, get_served_goodput},   {"slo_attainment", 0, get_served_attainment},
    {"load_ttft_p50_s", 0, get_served_ttft_p50}, {"load_ttft_p90_s", 0, get_served_ttft_p90},
    {"load_tpot_p50_s", 0, get_served_tpot_p50}, {"load_tpot_p90_s", 0, get_served_tpot_p90},
    {"mean_batch", 0, get_served_mean_batch}, {"capacity_rps", 0, get_served_capacity},
    {"arrived", 1, get_served_arrived},       {"served", 1, get_served_served},
    {"met", 1, get_served_met},
};
enum { N_SERVED_COLUMNS = sizeof SERVED_COLUMNS / sizeof SERVED_COLUMNS[0] };

static void csv_quoted(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"') fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

static void write_csv(FILE *out, const plan_summary *q, const plan_cluster *c,
                      const plan_prediction *p, int n) {
    fprintf(out, "rank,order");
    for (int k = 0; k < N_COLUMNS; k++)
        fprintf(out, ",%s", COLUMNS[k].name);
    fprintf(out, ",tp_algorithm,meets_slo,reason");
    for (int k = 0; q->rate > 0 && k < N_SERVED_COLUMNS; k++)
        fprintf(out, ",%s", SERVED_COLUMNS[k].name);
    fputc('\n', out);
    for (int i = 0; i < n; i++) {
        char why[160];
        plan_reason(&p[i], c, why, sizeof why);
        fprintf(out, "%d,%s", i + 1, plan_order_names[p[i].s.order]);
        for (int k = 0; k < N_COLUMNS; k++) {
            const double v = COLUMNS[k].get(&p[i]);
            if (COLUMNS[k].is_int)
                fprintf(out, ",%.0f", v);
            else
                fprintf(out, ",%.9g", v);
        }
        char algo[32];
        fprintf(out, ",%s,%d,",
                plan_collective_label(p[i].tp_algo, p[i].tp_proto, algo, sizeof algo),
                plan_meets_slo(q, &p[i]));
        csv_quoted(out, why);
        for (int k = 0; q->rate > 0 && k < N_SERVED_COLUMNS; k++)
            fprintf(out, SERVED_COLUMNS[k].is_int ? ",%.0f" : ",%.9g", SERVED_COLUMNS[k].get(&p[i]));
        fputc('\n', out);
    }
}

static int write_json(FILE *out, const plan_summary *q, const plan_cluster *c,
                      const plan_prediction *p, int n) {
    json_t *root = json_object(), *list = json_array();
    json_object_set_new(root, "model", json_string(q->model_name));
    json_object_set_new(root, "cluster", json_string(c->name));
    json_object_set_new(root, "cluster_file", json_string(q->cluster_path));
    json_t *device = json_object();
    json_object_set_new(device, "memory_bytes", json_real(c->device_memory));
    json_object_set_new(device, "gflops", json_real(c->peak_flops / 1e9));
    json_object_set_new(device, "gbs", json_real(c->mem_bw / 1e9));
    /* null: no cache term, weights stream from memory */
    json_object_set_new(device, "llc_mib",
                        c->llc_bytes > 0 ? json_real(c->llc_bytes / 1048576.0) : json_null());
    json_object_set_new(device, "llc_gbs",
                        c->llc_bytes > 0 ? json_real(c->llc_bw / 1e9) : json_null());
    json_object_set_new(root, "device", device);
    json_t *node = json_object();
    json_object_set_new(node, "devices", json_integer(c->devices_per_node));
    json_object_set_new(node, "cores",
                        c->cores_per_node ? json_integer(c->cores_per_node) : json_null());
    json_object_set_new(node, "gbs", c->node_bw > 0 ? json_real(c->node_bw / 1e9) : json_null());
    json_object_set_new(node, "ranks", json_integer(n > 0 ? p[0].node_ranks : 0));
    json_object_set_new(root, "node", node);
    json_t *network = json_object();
    for (int k = 0; k < PLAN_TIER_COUNT; k++) {
        if (!c->tier[k].present) continue;
        json_t *tier = json_object();
        json_object_set_new(tier, "alpha_s", json_real(c->tier[k].alpha));
        json_object_set_new(tier, "beta_bytes_s", json_real(c->tier[k].beta));
        json_object_set_new(tier, "efficiency", json_real(c->tier[k].efficiency));
        if (k != PLAN_TIER_INTRA) /* null: a link per device */
            json_object_set_new(tier, "links_per_node",
                                c->tier[k].links_per_node > 0
                                    ? json_integer(c->tier[k].links_per_node)
                                    : json_null());
        json_object_set_new(network, plan_tier_name((plan_tier_kind)k), tier);
    }
    json_object_set_new(root, "network", network);
    json_object_set_new(root, "gpus", json_integer(q->gpus));
    json_object_set_new(root, "batch", json_integer(q->w.batch));
    json_object_set_new(root, "prompt", json_integer(q->w.prompt));
    json_object_set_new(root, "new_tokens", json_integer(q->w.new_tokens));
    json_object_set_new(root, "precision", json_string(precision_kind_name(q->precision)));
    json_object_set_new(root, "precision_why", json_string(q->precision_why));
    json_object_set_new(root, "kv_dtype", json_string(kv_dtype_kind_name(q->kv_dtype)));
    json_object_set_new(root, "objective", json_string(plan_objective_name(q->objective)));
    json_object_set_new(root, "ttft_slo_s", q->ttft_slo > 0 ? json_real(q->ttft_slo) : json_null());
    json_object_set_new(root, "tpot_slo_s", q->tpot_slo > 0 ? json_real(q->tpot_slo) : json_null());
    json_object_set_new(root, "rate_rps", q->rate > 0 ? json_real(q->rate) : json_null());
    json_object_set_new(root, "stream_seconds",
                        q->rate > 0 ? json_real(q->stream_seconds) : json_null());
    json_object_set_new(root, "calibrated", json_boolean(q->n_calibrations > 0));
    if (q->experts > 0) {
        json_object_set_new(root, "expert_routing",
                            json_string(q->expert_runs > 0 ? "recorded" : "uniform"));
        json_object_set_new(root, "expert_routing_runs", json_integer(q->expert_runs));
        json_object_set_new(root, "expert_hottest_ratio",
                            q->expert_runs > 0 ? json_real(q->expert_hottest) : json_null());
    }
    json_object_set_new(root, "plan_seconds", json_real(q->seconds));
    for (int i = 0; i < n; i++) {
        json_t *row = json_object();
        char why[160];
        plan_reason(&p[i], c, why, sizeof why);
        json_object_set_new(row, "rank", json_integer(i + 1));
        json_object_set_new(row, "order", json_string(plan_order_names[p[i].s.order]));
        for (int k = 0; k < N_COLUMNS; k++) {
            const double v = COLUMNS[k].get(&p[i]);
            json_t *value = COLUMNS[k].is_int == 2 ? json_boolean(v != 0)
                            : COLUMNS[k].is_int    ? json_integer((json_int_t)v)
                                                   : json_real(v);
            json_object_set_new(row, COLUMNS[k].name, value);
        }
        char algo[32];
        json_object_set_new(
            row, "tp_algorithm",
            json_string(plan_collective_label(p[i].tp_algo, p[i].tp_proto, algo, sizeof algo)));
        json_object_set_new(row, "meets_slo", json_boolean(plan_meets_slo(q, &p[i])));
        json_object_set_new(row, "reason", json_string(why));
        if (q->rate > 0) { /* CSV's appended columns, as one object */
            json_t *served = json_object();
            for (int k = 0; k < N_SERVED_COLUMNS; k++) {
                const double v = SERVED_COLUMNS[k].get(&p[i]);
                json_object_set_new(served, SERVED_COLUMNS[k].name,
                                    SERVED_COLUMNS[k].is_int ? json_integer((json_int_t)v)
                                                             : json_real(v));
            }
            json_object_set_new(row, "served", served);
        }
        json_array_append_new(list, row);
    }
    json_object_set_new(root, "strategies", list);
    return cli_json_write(root, NULL, out, JSON_INDENT(1));
}

int plan_output_write(FILE *out, const char *format, const plan_summary *q, const plan_cluster *c,
                      const plan_prediction *ranked, int n, int top, int *written) {
    *written = n;
    if (!strcmp(format, "csv")) {
        write_csv(out, q, c, ranked, n);
        return STATUS_OK;
    }
    if (!strcmp(format, "json")) return write_json(out, q, c, ranked, n);
    *written = write_text(out, q, c, ranked, n, top);
    return STATUS_OK;
}
