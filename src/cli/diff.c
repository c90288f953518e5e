/* `tripar diff A.h5 B.h5`: do two runs agree? Compares the generated tokens and every common
 * activation point, walking points in model order so the first divergence names the layer
 * where two strategies part ways. Exit 0 when within tolerance, 1 otherwise, 2 on bad usage,
 * a file that is not a tripar run file (run_file_open), nothing to compare, or two runs of
 * another architecture or shape (models_comparable). */
#include <hdf5.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/h5util.h"
#include "io/runread.h"
#include "cli/cli.h"

typedef struct {
    char name[256];
    int group;   /* 0 embed, 1 layers, 2 final, 3 logits, 4 anything else */
    long layer;
    int sub;     /* order within a layer */
} point;

/* Order of the sub-points inside one layer, as the forward pass produces them. */
static const char *const layer_subpoints[] = {"ln1", "norm1", "ln_1", "qkv", "attn", "attn_out",
                                              "ln2", "norm2", "ln_2", "fc1", "mlp", "out"};

static void point_classify(point *p) {
    const char *n = p->name;
    p->group = 4;
    p->layer = 0;
    p->sub = 1000;
    if (!strcmp(n, "embed")) {
        p->group = 0;
    } else if (!strncmp(n, "layer.", 6)) {
        char *end;
        long layer = strtol(n + 6, &end, 10);
        if (end != n + 6) {
            p->group = 1;
            p->layer = layer;
            const char *sub = *end == '.' ? end + 1 : end;
            for (size_t i = 0; i < sizeof layer_subpoints / sizeof layer_subpoints[0]; i++)
                if (!strcmp(sub, layer_subpoints[i])) p->sub = (int)i;
        }
    } else if (!strcmp(n, "final") || !strcmp(n, "ln_f")) {
        p->group = 2;
    } else if (!strcmp(n, "logits")) {
        p->group = 3;
    }
}

static int point_compare(const void *a, const void *b) {
    const point *x = a, *y = b;
    if (x->group != y->group) return x->group - y->group;
    if (x->layer != y->layer) return x->layer < y->layer ? -1 : 1;
    if (x->sub != y->sub) return x->sub - y->sub;
    return strcmp(x->name, y->name);
}

typedef struct {
    point *items;
    int n, cap;
} point_list;

static herr_t collect_point(hid_t group, const char *name, const H5L_info_t *info, void *data) {
    (void)group;
    (void)info;
    point_list *list = data;
    if (list->n == list->cap) {
        list->cap = list->cap ? 2 * list->cap : 16;
        point *grown = realloc(list->items, (size_t)list->cap * sizeof(point));
        if (!grown) return -1;
        list->items = grown;
    }
    point *p = &list->items[list->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    point_classify(p);
    return 0;
}

static void points_list(hid_t file, point_list *list) {
    memset(list, 0, sizeof *list);
    /* run_file_open checked that /activations, when present, is a group */
    if (h5_object_type(file, "activations") != H5I_GROUP) return;
    hid_t g = H5Gopen2(file, "activations", H5P_DEFAULT);
    H5_CHECK(g);
    /* a damaged index ends the listing early; the points listed so far are still compared */
    H5E_BEGIN_TRY { H5Literate(g, H5_INDEX_NAME, H5_ITER_NATIVE, NULL, collect_point, list); }
    H5E_END_TRY;
    H5Gclose(g);
}

static int points_contain(const point_list *list, const char *name) {
    for (int i = 0; i < list->n; i++)
        if (!strcmp(list->items[i].name, name)) return 1;
    return 0;
}

static int same_shape(int na, const hsize_t *a, int nb, const hsize_t *b) {
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static void shape_text(int n, const hsize_t *dims, char *out, size_t len) {
    size_t used = 0;
    out[0] = '\0';
    for (int i = 0; i < n && used < len; i++)
        used += (size_t)snprintf(out + used, len - used, i ? "x%llu" : "%llu",
                                 (unsigned long long)dims[i]);
}

/* Token agreement; returns 1 when the tokens agree (or neither file has any). */
static int tokens_compare(hid_t fa, hid_t fb) {
    int has_a = h5_exists(fa, "output/tokens"), has_b = h5_exists(fb, "output/tokens");
    if (!has_a && !has_b) {
        printf("tokens: neither file has /output/tokens\n");
        return 1;
    }
    if (has_a != has_b) {
        printf("tokens: only %s has /output/tokens\n", has_a ? "A" : "B");
        return 0;
    }
    int na, nb;
    hsize_t da[8], db[8];
    long ca, cb;
    int32_t *a = h5_dataset_read_all(fa, "output/tokens", H5T_NATIVE_INT32, &na, da, &ca);
    int32_t *b = h5_dataset_read_all(fb, "output/tokens", H5T_NATIVE_INT32, &nb, db, &cb);
    int ok = 0;
    if (!a || !b) {
        printf("tokens: cannot read /output/tokens\n");
    } else if (na != 2 || !same_shape(na, da, nb, db)) {
        char sa[64], sb[64];
        shape_text(na, da, sa, sizeof sa);
        shape_text(nb, db, sb, sizeof sb);
        printf("tokens: shapes differ (A %s, B %s)\n", sa, sb);
    } else {
        long equal = 0, first = -1;
        for (long i = 0; i < ca; i++) {
            if (a[i] == b[i])
                equal++;
            else if (first < 0)
                first = i;
        }
        printf("tokens: %ld/%ld equal (%.2f%%)", equal, ca, ca ? 100.0 * equal / ca : 100.0);
        if (first >= 0)
            printf(", first difference at row %ld, position %ld (A %d, B %d)\n",
                   first / (long)da[1], first % (long)da[1], a[first], b[first]);
        else
            printf("\n");
        ok = equal == ca;
    }
    free(a);
    free(b);
    return ok;
}

static void diff_usage(FILE *out) {
    fprintf(out, "usage: tripar diff A.h5 B.h5 [--rtol X] [--atol Y]\n"
                 "  Compares /output/tokens and every common /activations point in model "
                 "order.\n  A point is within tolerance when max|a-b| <= atol + rtol * max|a| "
                 "(defaults rtol 1e-4, atol 0).\n  Exit 0 when all agree, 1 otherwise, 2 on "
                 "bad usage, a file that is not a\n  tripar run file, nothing to compare, or "
                 "runs of another architecture or shape\n  (model.arch, layers, heads, "
                 "kv_heads, embd, mlp, vocab). An incomplete run file (complete=0) is\n"
                 "  compared with a warning.\n");
}

static int parse_tolerance(const char *text, double *out) {
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end || !(v >= 0)) return -1;
    *out = v;
    return 0;
}

typedef struct {
    const char *files[2];
    double rtol, atol;
} diff_args;

/* Returns 0 to go on, 1 after --help, or -1 on bad usage (already reported). */
static int diff_parse_args(diff_args *a, int argc, char **argv) {
    int nfiles = 0;
    memset(a, 0, sizeof *a);
    a->rtol = 1e-4, a->atol = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            diff_usage(stdout);
            return 1;
        } else if (!strcmp(argv[i], "--rtol") || !strcmp(argv[i], "--atol")) {
            if (i + 1 >= argc ||
                parse_tolerance(argv[i + 1], argv[i][2] == 'r' ? &a->rtol : &a->atol) != 0) {
                fprintf(stderr, "tripar diff: %s needs a non-negative number\n", argv[i]);
                return -1;
            }
            i++;
        } else if (argv[i][0] == '-' || nfiles == 2) {
            fprintf(stderr, "tripar diff: unexpected argument %s\n", argv[i]);
            diff_usage(stderr);
            return -1;
        } else {
            a->files[nfiles++] = argv[i];
        }
    }
    if (nfiles != 2) {
        diff_usage(stderr);
        return -1;
    }
    return 0;
}

/* Opens A and B as run files (warning once for each incomplete one), or reports why not
 * (closing what was opened) and returns -1. */
static int diff_files_open(const char *const files[2], hid_t f[2]) {
    int complete[2];
    for (int i = 0; i < 2; i++) {
        f[i] = run_file_open(files[i], &complete[i]);
        if (f[i] < 0) {
            fprintf(stderr, "tripar diff: %s\n", error_message());
            if (i == 1) H5Fclose(f[0]);
            return -1;
        }
    }
    for (int i = 0; i < 2; i++)
        if (!complete[i]) run_file_warn_incomplete("diff", files[i]);
    return 0;
}

/* Whether the two files have anything to compare: tokens in either, or a common point. */
static int diff_has_data(hid_t fa, hid_t fb) {
    if (h5_exists(fa, "output/tokens") || h5_exists(fb, "output/tokens")) return 1;
    point_list pa, pb;
    points_list(fa, &pa);
    points_list(fb, &pb);
    int common = 0;
    for (int i = 0; i < pa.n && !common; i++) common = points_contain(&pb, pa.items[i].name);
    free(pa.items);
    free(pb.items);
    return common;
}

/* How one activation point differs between the files. */
typedef struct {
    char shape[64];
    double max_abs, max_rel;
    const char *status; /* "ok", "EXCEEDS", "unreadable" or "shape differs" */
} point_result;

/* max|a-b| over n values (NaN anywhere is a divergence, not a silent pass), and max|a|. */
static double max_abs_diff(const float *a, const float *b, long n, double *max_a) {
    double max_abs = 0;
    *max_a = 0;
    for (long k = 0; k < n; k++) {
        double d = fabs((double)a[k] - (double)b[k]);
        if (isnan(d)) d = INFINITY;
        if (d > max_abs) max_abs = d;
        if (fabs(a[k]) > *max_a) *max_a = fabs(a[k]);
    }
    return max_abs;
}

/* Within tolerance when max|a-b| <= atol + rtol * max|a|. */
static void point_measure(hid_t fa, hid_t fb, const char *name, double rtol, double atol,
                          point_result *r) {
    char path[300];
    snprintf(path, sizeof path, "activations/%s", name);
    int na, nb;
    hsize_t da[8], db[8];
    long ca, cb;
    float *a = h5_dataset_read_all(fa, path, H5T_NATIVE_FLOAT, &na, da, &ca);
    float *b = h5_dataset_read_all(fb, path, H5T_NATIVE_FLOAT, &nb, db, &cb);
    shape_text(na, da, r->shape, sizeof r->shape);
    double max_abs = 0, max_a = 0;
    if (!a || !b) {
        r->status = "unreadable";
    } else if (!same_shape(na, da, nb, db)) {
        r->status = "shape differs";
    } else {
        max_abs = max_abs_diff(a, b, ca, &max_a);
        r->status = max_abs <= atol + rtol * max_a ? "ok" : "EXCEEDS";
    }
    r->max_abs = max_abs;
    r->max_rel = max_a > 0 ? max_abs / max_a : (max_abs > 0 ? INFINITY : 0);
    free(a);
    free(b);
}

/* Every activation point of A that B also has, in model order, one row each, then the points
 * only B has and the verdict line. Returns how many points are outside tolerance. */
static int activations_compare(hid_t fa, hid_t fb, double rtol, double atol) {
    point_list pa, pb;
    points_list(fa, &pa);
    points_list(fb, &pb);
    if (pa.n > 1) /* qsort of no items would be given items = NULL */
        qsort(pa.items, (size_t)pa.n, sizeof(point), point_compare);
    int failures = 0;
    const char *first_bad = NULL;
    if (pa.n || pb.n)
        printf("%-24s %-18s %13s %13s  %s\n", "point", "shape", "max_abs", "max_rel", "status");
    for (int i = 0; i < pa.n; i++) {
        const char *name = pa.items[i].name;
        if (!points_contain(&pb, name)) {
            printf("%-24s only in A\n", name);
            continue;
        }
        point_result r;
        point_measure(fa, fb, name, rtol, atol, &r);
        if (strcmp(r.status, "ok") != 0) {
            failures++;
            if (!first_bad) first_bad = name;
        }
        printf("%-24s %-18s %13.6e %13.6e  %s\n", name, r.shape, r.max_abs, r.max_rel, r.status);
    }
    for (int i = 0; i < pb.n; i++)
        if (!points_contain(&pa, pb.items[i].name)) printf("%-24s only in B\n", pb.items[i].name);

    if (first_bad)
        printf("first divergence: %s (tolerance rtol %g, atol %g); %d point%s outside\n",
               first_bad, rtol, atol, failures, failures == 1 ? "" : "s");
    else if (pa.n)
        printf("all common activation points within rtol %g, atol %g\n", rtol, atol);
    free(pa.items);
    free(pb.items);
    return failures;
}

/* Two runs of different architectures or shapes have nothing to agree on: a Llama layer.0.attn
 * and a GPT-2 one are different quantities even when their shapes match, so the tokens and
 * points would only say DIFFER without saying why. Such a pair is refused, naming the first
 * difference. Other model keys (seed, checkpoint vs synthetic weights, norm) are what a diff
 * is for and are compared as usual. A file without the job attribute is not checked. */
static int models_comparable(const diff_args *a, hid_t fa, hid_t fb) {
    run_model m[2];
    if (run_model_read(fa, a->files[0], &m[0]) != STATUS_OK) {
        error_clear();
        return 1;
    }
    if (run_model_read(fb, a->files[1], &m[1]) != STATUS_OK) {
        error_clear();
        run_model_free(&m[0]);
        return 1;
    }
    static const char *const keys[] = {"model.arch", "layers", "heads", "kv_heads",
                                       "embd",       "mlp",    "vocab"};
    int ok = 1;
    for (size_t k = 0; k < sizeof keys / sizeof keys[0] && ok; k++) {
        const char *v[2];
        for (int i = 0; i < 2; i++) {
            v[i] = run_model_key(&m[i], keys[k]);
            /* GPT-2 records no kv_heads: it has one per head. The checkpoint note of files
             * written before Llama does not give them, so there they are not compared. */
            const char *arch = run_model_key(&m[i], "model.arch");
            if (!v[i] && !strcmp(keys[k], "kv_heads") && ((arch && !strcmp(arch, "gpt2")) ||
                                                          (!arch && !m[i].checkpoint)))
                v[i] = run_model_key(&m[i], "heads");
        }
        if (v[0] && v[1] && strcmp(v[0], v[1]) != 0) {
            fprintf(stderr,
                    "tripar diff: %s and %s ran different models (A vs B: %s: %s vs %s); diff "
                    "compares runs of one architecture and shape\n",
                    a->files[0], a->files[1], keys[k], v[0], v[1]);
            ok = 0;
        }
    }
    run_model_free(&m[0]);
    run_model_free(&m[1]);
    return ok;
}

int diff_main(int argc, char **argv) {
    diff_args a;
    int rc = diff_parse_args(&a, argc, argv);
    if (rc != 0) return rc > 0 ? TRIPAR_EXIT_OK : TRIPAR_EXIT_USAGE;
    hid_t f[2];
    if (diff_files_open(a.files, f) != 0) return TRIPAR_EXIT_USAGE;
    if (!diff_has_data(f[0], f[1])) {
        /* two runs that recorded nothing in common do not "agree" */
        fprintf(stderr, "tripar diff: nothing to compare: neither %s nor %s has /output/tokens, "
                        "and they share no /activations point\n", a.files[0], a.files[1]);
        H5Fclose(f[0]);
        H5Fclose(f[1]);
        return TRIPAR_EXIT_USAGE;
    }
    if (!models_comparable(&a, f[0], f[1])) {
        H5Fclose(f[0]);
        H5Fclose(f[1]);
        return TRIPAR_EXIT_USAGE;
    }
    printf("A: %s\nB: %s\n", a.files[0], a.files[1]);
    int tokens_ok = tokens_compare(f[0], f[1]);
    int failures = activations_compare(f[0], f[1], a.rtol, a.atol);
    int ok = tokens_ok && failures == 0;
    printf("%s\n", ok ? "AGREE" : "DIFFER");
    H5Fclose(f[0]);
    H5Fclose(f[1]);
    return ok ? TRIPAR_EXIT_OK : TRIPAR_EXIT_RUNTIME;
}
