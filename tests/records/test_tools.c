/* The run-file tools on the synthetic runs records_runfile leaves in argv[1]: report numbers
 * (checked through --json), diff finding the planted divergence at the right layer, and trace
 * JSON with one process per rank. Runs serially, without mpirun, as the tools would. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"

static int failures;
#include "../expect.h"

static char dir[1024], out_path[1100], captured[1 << 16];

/* Runs a tool with stdout sent to a file; returns its exit code, the output in captured. */
static int run_tool(int (*tool)(int, char **), int argc, const char **argv) {
    fflush(stdout);
    int saved = dup(1);
    FILE *f = fopen(out_path, "w");
    dup2(fileno(f), 1);
    int rc = tool(argc, (char **)argv);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
    fclose(f);
    f = fopen(out_path, "r");
    size_t n = fread(captured, 1, sizeof captured - 1, f);
    captured[n] = '\0';
    fclose(f);
    return rc;
}

static char *path_in(const char *name) {
    static char paths[8][1100];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, 1100, "%s/%s", dir, name);
    return p;
}

static double num(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static void test_report(void) {
    char *a = path_in("run_a.h5"), *json = path_in("report.json"), *csv = path_in("report.csv");
    const char *argv[] = {"report", a, "--json", json, "--csv", csv};
    EXPECT(run_tool(report_main, 6, argv) == 0, "report exit code\n%s", captured);
    EXPECT(strstr(captured, "dp1-tp1-pp3 m2 overlap") && strstr(captured, "mlp_gemm") &&
               strstr(captured, "slowest rank 2") && !strstr(captured, "WARNING"),
           "report text:\n%s", captured);
    json_error_t err;
    json_t *root = json_load_file(json, 0, &err);
    EXPECT(root, "report JSON parses: %s", err.text);
    if (!root) return;
    json_t *run = json_array_get(json_object_get(root, "runs"), 0);
    json_t *mlp = json_object_get(json_object_get(run, "phases"), "mlp_gemm");
    /* rank r spends 0.1 (r + 1) s in mlp_gemm per part, two parts */
    EXPECT(fabs(num(mlp, "min_s") - 0.2) < 1e-6 && fabs(num(mlp, "median_s") - 0.4) < 1e-6 &&
               fabs(num(mlp, "max_s") - 0.6) < 1e-6, "mlp_gemm min/median/max");
    EXPECT(fabs(num(run, "tokens_per_s") - 40) < 1e-9 && fabs(num(run, "latency_p90_s") - 3.7) <
               1e-9, "headline");
    /* bubble: pp_recv_wait on stages 1, 2 (0.05 s x 2 parts each) over 3 ranks x 4 s of steps */
    EXPECT(fabs(num(run, "bubble_frac") - 0.2 / 12) < 1e-6, "bubble %g", num(run, "bubble_frac"));
    EXPECT(num(run, "slowest_rank") == 2 && fabs(num(run, "slowest_lag_s") - 0.2) < 1e-6,
           "slowest rank and lag");
    double compute = 2 * (0.1 + 0.05) * 3 + 2 * 0.1 * (1 + 2 + 3);
    EXPECT(fabs(num(run, "compute_frac") - compute / 12) < 1e-6, "compute_frac %g",
           num(run, "compute_frac"));
    json_decref(root);
    FILE *f = fopen(csv, "r");
    char header[4096] = "", row[4096] = "";
    EXPECT(f && fgets(header, sizeof header, f) && fgets(row, sizeof row, f), "csv rows");
    if (f) fclose(f);
    EXPECT(strstr(header, "file,strategy,world_size") && strstr(header, "mlp_gemm_median_s") &&
               strstr(row, "\"dp1-tp1-pp3 m2 overlap\",3,"), "csv content:\n%s%s", header, row);

    const char *several[] = {"report", a, path_in("run_b.h5"), path_in("run_incomplete.h5.partial")};
    EXPECT(run_tool(report_main, 4, several) == 0, "report of three files");
    /* the incomplete file is marked in its header and the table; the warning itself goes to
     * stderr once (tests/cli/tools_refuse.sh) */
    EXPECT(strstr(captured, "(incomplete)\n") &&
               strstr(captured, "strategy") && !strstr(captured, "WARNING"),
           "comparison table:\n%s", captured);
    const char *missing[] = {"report", path_in("no_such.h5")};
    EXPECT(run_tool(report_main, 2, missing) == 2, "a missing file is bad input");
    const char *bad_opt[] = {"report", a, "--frobnicate"};
    EXPECT(run_tool(report_main, 3, bad_opt) == 2, "an unknown option is bad usage");
}

static void test_diff(void) {
    char *a = path_in("run_a.h5"), *b = path_in("run_b.h5");
    const char *same[] = {"diff", a, a};
    EXPECT(run_tool(diff_main, 3, same) == 0, "a run agrees with itself:\n%s", captured);
    EXPECT(strstr(captured, "20/20 equal") && strstr(captured, "AGREE"), "%s", captured);

    const char *differ[] = {"diff", a, b};
    EXPECT(run_tool(diff_main, 3, differ) == 1, "planted divergence:\n%s", captured);
    EXPECT(strstr(captured, "19/20 equal") &&
               strstr(captured, "first difference at row 3, position 2 (A 302, B -7)"),
           "token report:\n%s", captured);
    EXPECT(strstr(captured, "first divergence: layer.1.mlp"), "divergence point:\n%s", captured);
    /* model order: numeric layer sort, final and logits last */
    const char *order[] = {"\nembed ", "\nlayer.0.attn ", "\nlayer.1.mlp ", "\nlayer.2.attn ",
                           "\nlayer.10.attn ", "\nfinal ", "\nlogits "};
    const char *prev = captured;
    for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
        const char *at = strstr(captured, order[i]);
        EXPECT(at && at > prev, "%s out of model order:\n%s", order[i] + 1, captured);
        if (at) prev = at;
    }
    const char *loose[] = {"diff", a, b, "--rtol", "1"};
    EXPECT(run_tool(diff_main, 5, loose) == 1 && strstr(captured, "all common activation"),
           "loose tolerance passes activations but tokens still differ:\n%s", captured);
    const char *usage[] = {"diff", a};
    EXPECT(run_tool(diff_main, 2, usage) == 2, "one file is bad usage");
    const char *bad_tol[] = {"diff", a, b, "--rtol", "x"};
    EXPECT(run_tool(diff_main, 5, bad_tol) == 2, "a bad tolerance is bad usage");
    const char *missing[] = {"diff", a, path_in("no_such.h5")};
    EXPECT(run_tool(diff_main, 3, missing) == 2, "unreadable file");
}

static void test_trace(void) {
    char *a = path_in("run_a.h5"), *out = path_in("trace.json");
    const char *argv[] = {"trace", a, "-o", out};
    EXPECT(run_tool(trace_main, 4, argv) == 0, "trace exit code:\n%s", captured);
    json_error_t err;
    json_t *root = json_load_file(out, 0, &err);
    EXPECT(root, "trace JSON parses: %s", err.text);
    if (!root) return;
    json_t *events = json_object_get(root, "traceEvents");
    int pids[8] = {0}, names = 0, found_mlp = 0;
    size_t i;
    json_t *e;
    json_array_foreach(events, i, e) {
        const char *ph = json_string_value(json_object_get(e, "ph"));
        int pid = (int)json_integer_value(json_object_get(e, "pid"));
        const char *name = json_string_value(json_object_get(e, "name"));
        if (ph && !strcmp(ph, "X") && pid >= 0 && pid < 8) pids[pid]++;
        if (ph && !strcmp(ph, "M") && !strcmp(name, "process_name")) {
            const char *label = json_string_value(json_object_get(json_object_get(e, "args"), "name"));
            if (pid == 1 && label && !strcmp(label, "rank 1 (dp0 tp0 pp1) nodeA")) names++;
        }
        if (ph && !strcmp(ph, "X") && pid == 2 && !strcmp(name, "mlp_gemm")) {
            /* microseconds, and the layer in args */
            found_mlp = fabs(json_number_value(json_object_get(e, "dur")) - 3e5) < 1 &&
                        json_integer_value(json_object_get(json_object_get(e, "args"), "layer")) == 0;
        }
    }
    EXPECT(pids[0] == 10 && pids[1] == 12 && pids[2] == 12 && pids[3] == 0,
           "one pid per rank with its events: %d %d %d", pids[0], pids[1], pids[2]);
    EXPECT(names == 1, "process_name of rank 1");
    EXPECT(found_mlp, "rank 2 mlp_gemm event in microseconds");
    json_decref(root);
    const char *usage[] = {"trace", a};
    EXPECT(run_tool(trace_main, 2, usage) == 2, "trace without -o");
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR (the records_runfile output)\n", argv[0]);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);
    snprintf(out_path, sizeof out_path, "%s/tool_stdout.txt", dir);
    test_report();
    test_diff();
    test_trace();
    if (failures) {
        fprintf(stderr, "test_tools: %d failure(s)\n", failures);
        return 1;
    }
    printf("test_tools: ok\n");
    return 0;
}
