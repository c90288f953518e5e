/* `tripar plan --validate-published DIR`: the planner against measurements that others published
 * (data/published/, docs/planner.md "Validation against published results"). Each YAML file of
 * DIR is one publication: its source and a list of rows, each a model, a cluster file, a
 * tp x pp x dp strategy, a static batch and a measured metric. Every row is predicted with the
 * cluster file as it is (no calibration: nothing here is fitted), and the relative errors are
 * summarised over all rows, over the held-out third (id % 3 == 0, fixed before any fitting, so
 * that a later fit to these rows can be checked on rows it never saw) and per source. */
#include <dirent.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/check.h"
#include "job/job_tree.h"
#include "analysis/plan.h"
#include "analysis/plan_internal.h"

#define PUB_MAX_FILES 64
#define PUB_MAX_ROWS 1024
#define PUB_HELD_OUT_EVERY 3 /* rows with id % 3 == 0 are the held-out third */

static const char *const FILE_KEYS[] = {"source", "left_out", "rows", NULL};
static const char *const SOURCE_KEYS[] = {"document", "publisher", "version", "notes", NULL};
static const char *const ROW_KEYS[] = {"id",     "model",  "cluster",   "gpus",  "tp",
                                       "pp",     "batch",  "input",     "output", "precision",
                                       "metric", "value",  "table",     "note",  NULL};
static const char *const ROW_REQUIRED[] = {"id",    "model",  "cluster", "gpus",      "tp",
                                           "pp",    "batch",  "input",   "output",    "precision",
                                           "metric", "value", "table",   NULL};
static const char *const PRECISIONS[] = {"fp32", "int8w", "bf16", "fp16", NULL};
static const precision_kind PRECISION_KINDS[] = {PRECISION_FP32, PRECISION_INT8W, PRECISION_BF16,
                                                 PRECISION_FP16};
/* tokens_per_s_per_gpu: a table that prints the output rate per GPU (TensorRT-LLM's "out
 * tok/s/GPU"), the whole batch's tokens_per_s over the row's gpus */
typedef enum {
    PUB_TTFT_MS = 0,
    PUB_TPOT_MS,
    PUB_E2E_MS,
    PUB_TOKENS_PER_S,
    PUB_TOKENS_PER_S_PER_GPU
} pub_metric;
static const char *const METRICS[] = {
    "ttft_ms", "tpot_ms", "e2e_ms", "tokens_per_s", "tokens_per_s_per_gpu", NULL};

typedef struct {
    char source[64]; /* the file's name */
    int id;
    char model[64], cluster[64];
    int dp, tp, pp, batch, input, output;
    pub_metric metric;
    double predicted, published, error;
    int fits;
} pub_row;

static int name_index(const char *const *names, const char *s) {
    for (int i = 0; s && names[i]; i++)
        if (!strcmp(names[i], s)) return i;
    return -1;
}

static const char *scalar_of(const jnode *v) {
    return v && v->type == JNODE_SCALAR && v->value ? v->value : NULL;
}

/* A whole number from lo to hi. */
static int row_int(const jnode *row, const char *key, int lo, int hi, int *out) {
    const jnode *v = jnode_get(row, key, NULL);
    const char *s = scalar_of(v);
    char *end = NULL, got[96];
    long x = s ? strtol(s, &end, 10) : 0;
    if (!s || v->quoted || *s == '\0' || *end || x < lo || x > hi)
        return jnode_fail(v, "%s: %s must be a whole number from %d to %d", key,
                          jnode_describe(v, got, sizeof got), lo, hi);
    *out = (int)x;
    return STATUS_OK;
}

/* One of names, as its index. */
static int row_choice(const jnode *row, const char *key, const char *const *names, int *out) {
    const jnode *v = jnode_get(row, key, NULL);
    char list[256], got[96];
    *out = name_index(names, scalar_of(v));
    if (*out >= 0) return STATUS_OK;
    plan_keys_list(names, list, sizeof list);
    return jnode_fail(v, "%s: %s is not allowed; allowed: %s", key,
                      jnode_describe(v, got, sizeof got), list);
}

/* dir_of(path) / name into out. */
static void path_beside(const char *path, const char *name, char *out, size_t len) {
    const char *slash = strrchr(path, '/');
    if (name[0] == '/' || !slash)
        snprintf(out, len, "%s", name);
    else
        snprintf(out, len, "%.*s/%s", (int)(slash - path), path, name);
}

/* The row's model: a preset name, or a job file (a name ending in .yaml) beside the file. */
static int row_model(const char *file, const jnode *v, plan_model *m) {
    const char *name = scalar_of(v);
    plan_workload w;
    size_t n = name ? strlen(name) : 0;
    if (n > 5 && !strcmp(name + n - 5, ".yaml")) {
        char path[PATH_MAX];
        path_beside(file, name, path, sizeof path);
        job j;
        int no_input;
        if (plan_job_load(&j, path, &no_input) != STATUS_OK) goto fail;
        const int rc = plan_model_from_job(&j, m, &w);
        job_free(&j);
        if (rc != STATUS_OK) goto fail;
        return STATUS_OK;
    }
    if (name && plan_model_from_preset(name, m, &w) == STATUS_OK) return STATUS_OK;
fail:;
    char why[1024];
    snprintf(why, sizeof why, "%s", error_message());
    return jnode_fail(v, "model: %s (a preset, or a job file naming a model beside this file, "
                         "*.yaml)", why);
}

static int row_read(const char *file, const jnode *row, pub_row *r) {
    if (plan_section_check(row, row, "a row", ROW_KEYS) != STATUS_OK) return STATUS_BAD_INPUT;
    for (int i = 0; ROW_REQUIRED[i]; i++)
        if (!jnode_get(row, ROW_REQUIRED[i], NULL)) {
            char list[512];
            plan_keys_list(ROW_REQUIRED, list, sizeof list);
            return jnode_fail(row, "a row misses '%s'; every row gives %s", ROW_REQUIRED[i],
                              list);
        }
    int gpus, precision, metric;
    if (row_int(row, "id", 1, 1000000, &r->id) || row_int(row, "gpus", 1, 1000000, &gpus) ||
        row_int(row, "tp", 1, 1024, &r->tp) || row_int(row, "pp", 1, 1024, &r->pp) ||
        row_int(row, "batch", 1, 1000000, &r->batch) ||
        row_int(row, "input", 1, 10000000, &r->input) ||
        row_int(row, "output", 1, 10000000, &r->output) ||
        row_choice(row, "precision", PRECISIONS, &precision) ||
        row_choice(row, "metric", METRICS, &metric))
        return STATUS_BAD_INPUT;
    r->metric = (pub_metric)metric;
    const jnode *gv = jnode_get(row, "gpus", NULL);
    if (gpus % (r->tp * r->pp) != 0)
        return jnode_fail(gv, "gpus: %d is not a multiple of tp x pp = %d (dp = gpus / (tp x pp))",
                          gpus, r->tp * r->pp);
    r->dp = gpus / (r->tp * r->pp);
    const jnode *vv = jnode_get(row, "value", NULL);
    const char *vs = scalar_of(vv);
    char *end = NULL, got[96];
    r->published = vs ? strtod(vs, &end) : NAN;
    if (!vs || vv->quoted || *vs == '\0' || *end || !(r->published > 0) || !isfinite(r->published))
        return jnode_fail(vv, "value: %s must be a positive number (the published %s)",
                          jnode_describe(vv, got, sizeof got), METRICS[metric]);
    const jnode *tv = jnode_get(row, "table", NULL);
    if (!scalar_of(tv) || !scalar_of(tv)[0])
        return jnode_fail(tv, "table: %s must name the publication's table the row is from",
                          jnode_describe(tv, got, sizeof got));

    /* the model, the cluster and the strategy, as `tripar plan` would take them */
    plan_model m;
    const jnode *mv = jnode_get(row, "model", NULL), *cv = jnode_get(row, "cluster", NULL);
    if (row_model(file, mv, &m) != STATUS_OK) return STATUS_BAD_INPUT;
    m.weight_dtype = PRECISION_KINDS[precision];
    if (m.kv_dtype_auto) m.kv_dtype = kv_dtype_for(m.weight_dtype);
    char cpath[PATH_MAX], why[1024];
    path_beside(file, scalar_of(cv) ? scalar_of(cv) : "", cpath, sizeof cpath);
    plan_cluster c;
    if (!scalar_of(cv) || plan_cluster_load(&c, cpath) != STATUS_OK) {
        snprintf(why, sizeof why, "%s", scalar_of(cv) ? error_message() : "not a file name");
        return jnode_fail(cv, "cluster: %s (a cluster file, relative to this file)", why);
    }
    /* the collectives of the cluster's devices: MPI on CPU nodes, NCCL on GPUs */
    m.collectives = c.cores_per_node > 0 ? PLAN_COLL_MPI : PLAN_COLL_NCCL;
    if (gpus > c.nodes * c.devices_per_node)
        return jnode_fail(gv, "gpus: %d is more than the %d devices of %s", gpus,
                          c.nodes * c.devices_per_node, cpath);
    const plan_workload w = {.batch = r->batch, .prompt = r->input, .new_tokens = r->output};
    if ((long)w.prompt + w.new_tokens > m.cfg.ctx)
        return jnode_fail(row, "input %d + output %d tokens exceed the model's context of %d",
                          w.prompt, w.new_tokens, m.cfg.ctx);
    const plan_strategy s = {.dp = r->dp, .tp = r->tp, .pp = r->pp, .microbatches = 1};
    if (!plan_strategy_valid(&m, &w, &c, &s, why, sizeof why))
        return jnode_fail(row, "tripar cannot run dp %d x tp %d x pp %d here: %s", r->dp, r->tp,
                          r->pp, why);
    plan_rates rates;
    plan_rates_default(&rates);
    plan_prediction p;
    plan_predict(&m, &w, &c, &rates, &s, &p);
    const double predicted[] = {1e3 * p.ttft, 1e3 * p.tpot, 1e3 * p.e2e, p.tokens_per_s,
                                p.tokens_per_s / gpus};
    r->predicted = predicted[metric];
    if (!(r->predicted > 0) || !isfinite(r->predicted))
        return jnode_fail(row, "the planner predicts no %s for this row", METRICS[metric]);
    r->error = (r->predicted - r->published) / r->published;
    r->fits = p.fits;
    const char *mname = strrchr(scalar_of(mv), '/');
    snprintf(r->model, sizeof r->model, "%s", mname ? mname + 1 : scalar_of(mv));
    snprintf(r->cluster, sizeof r->cluster, "%s", c.name);
    return STATUS_OK;
}

/* The rows of one publication, appended to rows[*n]. */
static int file_read(const char *path, const char *name, pub_row *rows, int *n) {
    jtree t;
    memset(&t, 0, sizeof t);
    int rc = jtree_load_file(&t, path);
    const jnode *root = t.root, *key = NULL;
    if (rc == STATUS_OK) rc = plan_section_check(root, root, "a published file", FILE_KEYS);
    const jnode *src = rc == STATUS_OK ? jnode_get(root, "source", &key) : NULL;
    if (rc == STATUS_OK) rc = plan_section_check(src, root, "source", SOURCE_KEYS);
    for (int i = 0; rc == STATUS_OK && i < 2; i++) {
        const char *need = i ? "version" : "document";
        const jnode *v = jnode_get(src, need, NULL);
        if (!scalar_of(v) || !scalar_of(v)[0])
            rc = jnode_fail(v ? v : src, "source.%s is required: the publication's %s", need,
                            i ? "version or date" : "address (URL, or repository, path and commit)");
    }
    const jnode *list = rc == STATUS_OK ? jnode_get(root, "rows", NULL) : NULL;
    if (rc == STATUS_OK && (!list || list->type != JNODE_SEQ || list->n == 0))
        rc = jnode_fail(list ? list : root, "rows must be a non-empty list of rows");
    const int first = *n;
    for (int i = 0; rc == STATUS_OK && i < list->n; i++) {
        if (*n == PUB_MAX_ROWS) {
            rc = jnode_fail(list->items[i], "more than %d rows in all", PUB_MAX_ROWS);
            break;
        }
        pub_row *r = &rows[*n];
        memset(r, 0, sizeof *r);
        snprintf(r->source, sizeof r->source, "%s", name);
        rc = row_read(path, list->items[i], r);
        for (int j = first; rc == STATUS_OK && j < *n; j++)
            if (rows[j].id == r->id)
                rc = jnode_fail(jnode_get(list->items[i], "id", NULL),
                                "id: %d is taken by an earlier row of this file; ids are unique "
                                "per file (id %% %d == 0 marks the held-out third)",
                                r->id, PUB_HELD_OUT_EVERY);
        if (rc == STATUS_OK) (*n)++;
    }
    jtree_free(&t);
    return rc;
}

static int name_compare(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.yaml files of dir (not its folders), sorted, into names (caller frees each). */
static int dir_list(const char *dir, char **names, int *n) {
    DIR *d = opendir(dir);
    *n = 0;
    if (!d) {
        error_set("--validate-published %s: not a readable directory (give data/published/)", dir);
        return STATUS_BAD_INPUT;
    }
    struct dirent *e;
    while ((e = readdir(d)) && *n < PUB_MAX_FILES) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".yaml")) continue;
        char path[PATH_MAX];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) names[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    if (*n == 0) {
        error_set("--validate-published %s holds no published file (*.yaml; docs/planner.md "
                  "\"Validation against published results\")",
                  dir);
        return STATUS_BAD_INPUT;
    }
    qsort(names, (size_t)*n, sizeof *names, name_compare);
    return STATUS_OK;
}

/* Median and worst |error| of the rows that `keep` selects, printed as one line. */
static void summary_line(FILE *out, const pub_row *rows, int n, const char *label,
                         int (*keep)(const pub_row *, const void *), const void *arg) {
    double *e = xmalloc((unsigned long)(n ? n : 1) * sizeof *e);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (keep(&rows[i], arg)) e[k++] = rows[i].error;
    double median, worst;
    plan_error_summary(e, k, &median, &worst);
    fprintf(out, "  %-34s %4d rows  median %5.0f%%  worst %5.0f%%%s\n", label, k, 100 * median,
            100 * worst, k && median <= 0.20 && worst <= 0.50 ? "  (within the bar)" : "");
    free(e);
}

static int keep_all(const pub_row *r, const void *arg) {
    (void)r, (void)arg;
    return 1;
}
static int keep_held_out(const pub_row *r, const void *arg) {
    (void)arg;
    return r->id % PUB_HELD_OUT_EVERY == 0;
}
static int keep_others(const pub_row *r, const void *arg) {
    (void)arg;
    return r->id % PUB_HELD_OUT_EVERY != 0;
}
static int keep_source(const pub_row *r, const void *arg) {
    return !strcmp(r->source, (const char *)arg);
}

int plan_validate_published(FILE *out, const char *dir, int *n_rows) {
    char *names[PUB_MAX_FILES];
    int n_files, rc = dir_list(dir, names, &n_files), n = 0;
    pub_row *rows = xcalloc(PUB_MAX_ROWS, sizeof *rows);
    for (int f = 0; rc == STATUS_OK && f < n_files; f++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, names[f]);
        rc = file_read(path, names[f], rows, &n);
    }
    if (rc == STATUS_OK) {
        fprintf(out, "%-28s %4s %-16s %-18s %-12s %5s %5s %5s %-20s %10s %10s %7s\n", "source",
                "id", "model", "cluster", "strategy", "batch", "in", "out", "metric",
                "predicted", "published", "error");
        for (int i = 0; i < n; i++) {
            const pub_row *r = &rows[i];
            char strategy[32];
            snprintf(strategy, sizeof strategy, "dp%d-tp%d-pp%d", r->dp, r->tp, r->pp);
            fprintf(out, "%-28.28s %4d%c %-16.16s %-18.18s %-12s %5d %5d %5d %-20s %10.1f %10.1f %+6.0f%%%s\n",
                    r->source, r->id, r->id % PUB_HELD_OUT_EVERY == 0 ? '*' : ' ', r->model,
                    r->cluster, strategy, r->batch, r->input, r->output, METRICS[r->metric],
                    r->predicted, r->published, 100 * r->error, r->fits ? "" : "  (does not fit)");
        }
        fprintf(out, "\n|relative error| of the prediction (uncalibrated; * = held out, id %% %d == 0; "
                     "the bar: median <= 20%%, worst <= 50%%):\n",
                PUB_HELD_OUT_EVERY);
        summary_line(out, rows, n, "all rows", keep_all, NULL);
        summary_line(out, rows, n, "held-out third (id % 3 == 0)", keep_held_out, NULL);
        summary_line(out, rows, n, "other two thirds", keep_others, NULL);
        for (int f = 0; f < n_files; f++)
            summary_line(out, rows, n, names[f], keep_source, names[f]);
    }
    for (int f = 0; f < n_files; f++)
        free(names[f]);
    free(rows);
    if (n_rows) *n_rows = n;
    return rc;
}
