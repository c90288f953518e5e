/* `tripar plan`: predicts every strategy tripar could run a model with on a cluster (dp x tp x
 * pp, micro-batches, overlap, order), ranks them by latency, throughput or goodput under SLOs,
 * and says why each wins or loses (docs/planner.md). Serial and file-only: no MPI. This file
 * reads the arguments and runs the planner of src/analysis/ (plan.h); plan_output.c prints. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <hdf5.h>

#include "base/check.h"
#include "base/path.h"
#include "job/job.h"
#include "job/presets.h"
#include "analysis/plan_calibrate.h"
#include "analysis/plan_goodput.h"
#include "cli/cli.h"
#include "cli/plan.h"

#define PLAN_MAX_CALIBRATIONS 64

typedef struct {
    const char *job_path, *preset, *cluster, *format, *out;
    const char *precision;
    const char *kv_dtype;
    const char *calibrations[PLAN_MAX_CALIBRATIONS];
    int n_calibrations;
    const char *validations[PLAN_MAX_CALIBRATIONS]; /* --validate: measured runs to predict */
    int n_validations;
    const char *published; /* --validate-published: a folder of published measurements */
    int gpus, batch, prompt, new_tokens, top;
    plan_objective objective;
    int objective_given;
    double ttft, tpot;
    double rate, duration; /* --rate, --duration: the arrival stream of goodput; 0 = none */
} plan_args;

static void plan_usage(FILE *f) {
    fprintf(
        f,
        "usage: tripar plan (JOB.yaml | --preset NAME) --cluster CLUSTER.yaml [options]\n"
        "       tripar plan --validate RUN.h5... --cluster CLUSTER.yaml [-o FILE]\n"
        "       tripar plan --validate-published DIR [-o FILE]\n"
        "  --gpus N                 ranks to plan for (default: every device of the cluster)\n"
        "  --batch B --prompt T --new-tokens K   the workload (default: the job's, or 1 128 32)\n"
        "  --precision fp32|int8w|bf16|fp16|q8_0|q4_0|q4_1|q4_k   weight dtype (default: the\n"
        "                           job's; for a preset bf16 on GPU nodes, fp32 on CPU ones:\n"
        "                           cores_per_node); the block formats at 34/32, 18/32,\n"
        "                           20/32 and 144/256 bytes per weight\n"
        "  --kv-dtype auto|fp32|bf16|fp16|int8   KV cache type (default: the job's model.kv_dtype;\n"
        "                           auto, a preset's: the weights' 16-bit type, else fp32)\n"
        "  --objective latency|throughput|goodput (default latency)\n"
        "  --ttft S --tpot S        SLO targets in seconds (goodput needs at least one)\n"
        "  --rate R                 requests/s of a Poisson stream: predict each strategy's\n"
        "                           goodput (requests/s meeting both --ttft and --tpot, which\n"
        "                           it needs) as tripar's serve loop serves the stream, and\n"
        "                           rank by it (objective goodput unless --objective is given)\n"
        "  --duration S             the simulated stream's seconds (default: 2000 requests,\n"
        "                           2000 / R; arrival seed 1, as bench.arrival_seed)\n"
        "  --calibrate RUN.h5...    per-phase rates from runs recorded with timings: layer\n"
        "                           (the list ends at an option or a file that is not HDF5)\n"
        "  --validate RUN.h5...     predict each run from the others' calibration (leave one\n"
        "                           out), or with --calibrate from those runs alone (held\n"
        "                           out), and print predicted vs measured, with the errors\n"
        "  --validate-published DIR  predict each published measurement of DIR's *.yaml files\n"
        "                           (data/published/: each row names its cluster file) and\n"
        "                           print predicted vs published, with the errors\n"
        "  --top K                  rows of the text table (default 10; CSV/JSON hold all)\n"
        "  --format text|csv|json   (default text)   -o FILE   write there instead of stdout\n"
        "presets: %s\n",
        job_preset_list());
}

static int parse_int(const char *s, int lo, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end || v < lo || v > 100000000) return -1;
    *out = (int)v;
    return 0;
}

/* The plan's stream: this many requests expected unless --duration says otherwise, enough
 * for stable p90s and few enough to simulate every strategy in milliseconds. */
#define PLAN_STREAM_REQUESTS 2000.0

static int parse_seconds(const char *s, double *out) {
    char *end;
    double v = strtod(s, &end);
    if (*s == '\0' || *end || !(v > 0) || v > 1e9) return -1;
    *out = v;
    return 0;
}

/* Whether path names an existing file that is not HDF5, so not a run file: where a list of
 * runs ends and the job file begins. */
static int plan_arg_not_hdf5(const char *path) {
    if (access(path, F_OK) != 0) return 0;
    htri_t hdf5;
    H5E_BEGIN_TRY { hdf5 = H5Fis_hdf5(path); }
    H5E_END_TRY;
    return hdf5 <= 0;
}

/* Returns 0 to go on, 1 after --help, -1 on bad usage (reported). */
static int plan_parse_args(plan_args *a, int argc, char **argv) {
    memset(a, 0, sizeof *a);
    a->format = "text";
    a->top = 10;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
            plan_usage(stdout);
            return 1;
        } else if (o[0] != '-') {
            if (a->job_path) {
                fprintf(stderr, "tripar plan: one job file only (got %s and %s)\n", a->job_path, o);
                return -1;
            }
            a->job_path = o;
            continue;
        } else if (!strcmp(o, "--calibrate") || !strcmp(o, "--validate")) {
            /* the run files that follow, up to the next option or the first file that is not
             * HDF5 (the job file: `--calibrate a.h5 b.h5 job.yaml`); a missing file stays in
             * the list, to be reported as missing rather than taken for the job */
            const int validate = o[2] == 'v';
            const char **list = validate ? a->validations : a->calibrations;
            int *count = validate ? &a->n_validations : &a->n_calibrations;
            while (i + 1 < argc && argv[i + 1][0] != '-' && !plan_arg_not_hdf5(argv[i + 1])) {
                if (*count == PLAN_MAX_CALIBRATIONS) {
                    fprintf(stderr, "tripar plan: at most %d runs after %s\n",
                            PLAN_MAX_CALIBRATIONS, o);
                    return -1;
                }
                list[(*count)++] = argv[++i];
            }
            if (*count == 0) {
                const char *next = i + 1 < argc ? argv[i + 1] : NULL;
                fprintf(stderr, "tripar plan: %s needs at least one run file (RUN.h5%s)%s%s%s\n", o,
                        validate ? "" : ", recorded with record.timings: layer",
                        next ? "; got " : "", next ? next : "",
                        !next            ? ""
                        : next[0] == '-' ? ", an option"
                                         : ", which is not an HDF5 file");
                return -1;
            }
            continue;
        } else if (!v) {
            fprintf(stderr, "tripar plan: %s needs a value\n", o);
            return -1;
        } else if (!strcmp(o, "--preset"))
            a->preset = v;
        else if (!strcmp(o, "--validate-published"))
            a->published = v;
        else if (!strcmp(o, "--cluster"))
            a->cluster = v;
        else if (!strcmp(o, "--format")) {
            a->format = v;
            bad = strcmp(v, "text") && strcmp(v, "csv") && strcmp(v, "json");
        } else if (!strcmp(o, "-o"))
            a->out = v;
        else if (!strcmp(o, "--precision"))
            a->precision = v;
        else if (!strcmp(o, "--kv-dtype"))
            a->kv_dtype = v;
        else if (!strcmp(o, "--gpus"))
            bad = parse_int(v, 1, &a->gpus);
        else if (!strcmp(o, "--batch"))
            bad = parse_int(v, 1, &a->batch);
        else if (!strcmp(o, "--prompt"))
            bad = parse_int(v, 1, &a->prompt);
        else if (!strcmp(o, "--new-tokens"))
            bad = parse_int(v, 1, &a->new_tokens);
        else if (!strcmp(o, "--top"))
            bad = parse_int(v, 1, &a->top);
        else if (!strcmp(o, "--ttft") || !strcmp(o, "--tpot") || !strcmp(o, "--rate") ||
                 !strcmp(o, "--duration")) {
            double *to = o[2] == 'r' ? &a->rate : o[2] == 'd' ? &a->duration
                         : o[3] == 't'                      ? &a->ttft
                                                            : &a->tpot;
            if (parse_seconds(v, to)) {
                fprintf(stderr, "tripar plan: %s %s is not allowed; allowed: a number > 0 and at "
                                "most 1e9 (%s)\n",
                        o, v, o[2] == 'r' ? "requests per second" : "seconds");
                return -1;
            }
        } else if (!strcmp(o, "--objective")) {
            a->objective_given = 1;
            if (!strcmp(v, "latency"))
                a->objective = PLAN_OBJ_LATENCY;
            else if (!strcmp(v, "throughput"))
                a->objective = PLAN_OBJ_THROUGHPUT;
            else if (!strcmp(v, "goodput"))
                a->objective = PLAN_OBJ_GOODPUT;
            else
                bad = 1;
        } else {
            fprintf(stderr, "tripar plan: unknown option %s\n", o);
            plan_usage(stderr);
            return -1;
        }
        if (bad) {
            fprintf(stderr, "tripar plan: %s %s is not allowed (see tripar plan --help)\n", o, v);
            return -1;
        }
        i++;
    }
    if (a->published && (a->job_path || a->preset || a->n_calibrations || a->n_validations ||
                         a->cluster)) {
        fprintf(stderr, "tripar plan: --validate-published takes the models, strategies and "
                        "cluster files from the rows of its folder; give no job file, --preset, "
                        "--calibrate, --validate or --cluster with it\n");
        return -1;
    }
    if (a->published) return 0;
    if (a->n_validations && (a->job_path || a->preset || a->rate > 0)) {
        fprintf(stderr, "tripar plan: --validate takes its models from the runs it names, and "
                        "each arrival stream from its run; give no job file, --preset or --rate "
                        "with it (--calibrate names the runs to calibrate from instead of the "
                        "others; --ttft and --tpot set the goodput's targets)\n");
        return -1;
    }
    if (!a->n_validations && a->job_path && a->preset) {
        fprintf(stderr,
                "tripar plan: give a job file or --preset NAME, not both; got the job file %s "
                "and --preset %s\n",
                a->job_path, a->preset);
        return -1;
    }
    if (!a->n_validations && !a->job_path && !a->preset) {
        fprintf(stderr, "tripar plan: give a job file or --preset NAME (one of them)\n");
        return -1;
    }
    if (!a->cluster) {
        fprintf(stderr, "tripar plan: --cluster CLUSTER.yaml is required (data/clusters/)\n");
        return -1;
    }
    if (a->duration > 0 && a->rate == 0) {
        fprintf(stderr, "tripar plan: --duration is the length of --rate's stream; give --rate "
                        "R with it\n");
        return -1;
    }
    if (a->rate > 0 && (a->ttft == 0 || a->tpot == 0)) {
        fprintf(stderr, "tripar plan: --rate needs both targets, --ttft S and --tpot S (seconds > "
                        "0): goodput counts the requests meeting both; missing: %s%s%s\n",
                a->ttft == 0 ? "--ttft" : "", a->ttft == 0 && a->tpot == 0 ? " and " : "",
                a->tpot == 0 ? "--tpot" : "");
        return -1;
    }
    if (a->rate > 0 && !a->objective_given) a->objective = PLAN_OBJ_GOODPUT;
    if (a->rate > 0 && a->duration == 0) a->duration = PLAN_STREAM_REQUESTS / a->rate;
    if (a->objective == PLAN_OBJ_GOODPUT && a->ttft == 0 && a->tpot == 0) {
        fprintf(stderr, "tripar plan: --objective goodput needs --ttft S and/or --tpot S\n");
        return -1;
    }
    return 0;
}

static int precision_parse(const char *s, precision_kind *out) {
    static const struct {
        const char *name;
        precision_kind p;
    } names[] = {{"fp32", PRECISION_FP32},
                 {"int8w", PRECISION_INT8W},
                 {"bf16", PRECISION_BF16},
                 {"fp16", PRECISION_FP16},
                 {"q8_0", PRECISION_Q8_0},
                 {"q4_0", PRECISION_Q4_0},
                 {"q4_1", PRECISION_Q4_1},
                 {"q4_k", PRECISION_Q4_K}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (!strcmp(s, names[i].name)) {
            *out = names[i].p;
            return 0;
        }
    error_set("--precision %s is not allowed; allowed: fp32, int8w, bf16, fp16, q8_0, q4_0, "
              "q4_1, q4_k",
              s);
    return STATUS_BAD_INPUT;
}

/* The model and the default workload from the job file or the preset, and the weights'
 * precision with why (into why): --precision; else a job's model.precision, set or its default
 * (fp32), as `tripar run` would load that job; else, for a preset, what the cluster's devices
 * run: bf16 on GPUs (a cluster file without cores_per_node), fp32 on CPU nodes. */
static int plan_model_resolve(const plan_args *a, const plan_cluster *c, plan_model *m,
                              plan_workload *w, char *why, size_t why_len, char *kv_why,
                              size_t kv_why_len) {
    if (a->preset) {
        if (plan_model_from_preset(a->preset, m, w) != STATUS_OK) return STATUS_BAD_INPUT;
        const int cpu = c->cores_per_node > 0;
        m->weight_dtype = cpu ? PRECISION_FP32 : PRECISION_BF16;
        snprintf(why, why_len,
                 "the default on %s nodes: %s %s cores_per_node; --precision to choose",
                 cpu ? "CPU" : "GPU", a->cluster, cpu ? "gives" : "gives no");
    } else {
        job j;
        int no_input;
        if (plan_job_load(&j, a->job_path, &no_input) != STATUS_OK) return STATUS_BAD_INPUT;
        int rc = plan_model_from_job(&j, m, w);
        /* a job that names only a model: the workload is the flags', else a preset's */
        if (no_input) w->batch = 1, w->prompt = 128;
        const int line = job_key_line(&j, "model.precision");
        if (line > 0)
            snprintf(why, why_len, "the job's model.precision, %s:%d", a->job_path, line);
        else
            snprintf(why, why_len,
                     "the job's: %s sets no model.precision and `tripar run` loads it as fp32; "
                     "--precision to choose",
                     a->job_path);
        job_free(&j);
        if (rc != STATUS_OK) return rc;
    }
    if (a->precision) {
        if (precision_parse(a->precision, &m->weight_dtype)) return STATUS_BAD_INPUT;
        snprintf(why, why_len, "--precision");
    }
    /* the KV cache's type: --kv-dtype; else the job's model.kv_dtype when it names one; else
     * auto's choice for the weights as resolved above (the run resolves it the same way) */
    if (a->kv_dtype) {
        const int k = kv_dtype_parse(a->kv_dtype, m->weight_dtype);
        if (k < 0) {
            error_set("--kv-dtype %s is not allowed; allowed: auto, fp32, bf16, fp16, int8",
                      a->kv_dtype);
            return STATUS_BAD_INPUT;
        }
        m->kv_dtype = (kv_dtype_kind)k;
        snprintf(kv_why, kv_why_len, "--kv-dtype %s", a->kv_dtype);
    } else if (m->kv_dtype_auto) {
        m->kv_dtype = kv_dtype_for(m->weight_dtype);
        snprintf(kv_why, kv_why_len, "model.kv_dtype auto for %s weights; --kv-dtype to choose",
                 precision_kind_name(m->weight_dtype));
    } else {
        snprintf(kv_why, kv_why_len, "the job's model.kv_dtype");
    }
    if (a->batch) w->batch = a->batch;
    if (a->prompt) w->prompt = a->prompt;
    if (a->new_tokens) w->new_tokens = a->new_tokens;
    if ((long)w->prompt + w->new_tokens > m->cfg.ctx) {
        error_set("a prompt of %d tokens plus %d new tokens exceeds the model's context of %d",
                  w->prompt, w->new_tokens, m->cfg.ctx);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

/* -o follows docs/cli.md "Files a command reads and writes": a regular file in an existing
 * directory, and none of the inputs. Checked before anything is read or planned. */
static int plan_output_check(const plan_args *a) {
    if (!a->out) return STATUS_OK;
    char why[PATH_WHY_MAX];
    if (path_check_output(a->out, why, sizeof why) != 0) {
        error_set("-o '%s' %s", a->out, why);
        return STATUS_BAD_INPUT;
    }
    const char *inputs[2 * PLAN_MAX_CALIBRATIONS + 2] = {a->job_path, a->cluster};
    int n = 2;
    for (int i = 0; i < a->n_calibrations; i++)
        inputs[n++] = a->calibrations[i];
    for (int i = 0; i < a->n_validations; i++)
        inputs[n++] = a->validations[i];
    int which;
    if (path_is_any_of(a->out, inputs, n, &which)) {
        error_set("-o '%s' is the same file as the input '%s'; an output may not replace an "
                  "input, so give it another path",
                  a->out, inputs[which]);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

/* --validate (c given) or --validate-published (c NULL), to -o or stdout. */
static int plan_validate_to(const plan_args *a, const plan_cluster *c) {
    FILE *out = a->out ? fopen(a->out, "w") : stdout;
    if (!out) {
        error_set("cannot write %s", a->out);
        return STATUS_BAD_INPUT;
    }
    int n = a->n_validations;
    int rc = c ? plan_validate(out, c, a->validations, n, a->calibrations, a->n_calibrations)
               : plan_validate_published(out, a->published, &n);
    if (c && rc == STATUS_OK)
        rc = plan_validate_streams(out, c, a->validations, n, a->calibrations, a->n_calibrations,
                                   a->ttft, a->tpot);
    if (a->out && fclose(out) != 0 && rc == STATUS_OK) {
        error_set("cannot write %s", a->out);
        rc = STATUS_BAD_INPUT;
    }
    if (rc == STATUS_OK && a->out)
        printf("tripar plan: wrote %s (text, %d %s predicted)\n", a->out, n,
               c ? "runs" : "published rows");
    return rc;
}

static int plan_run(const plan_args *a) {
    if (plan_output_check(a) != STATUS_OK) return STATUS_BAD_INPUT;
    if (a->published) return plan_validate_to(a, NULL);
    plan_cluster c;
    plan_model m;
    plan_workload w;
    if (plan_cluster_load(&c, a->cluster) != STATUS_OK) return STATUS_BAD_INPUT;
    if (a->n_validations) return plan_validate_to(a, &c);
    char precision_why[1024], kv_why[256];
    if (plan_model_resolve(a, &c, &m, &w, precision_why, sizeof precision_why, kv_why,
                           sizeof kv_why) != STATUS_OK)
        return STATUS_BAD_INPUT;
    /* a preset runs on the cluster's kind of node: CPU ranks (cores_per_node) talk MPI */
    if (a->preset && c.cores_per_node > 0) m.collectives = PLAN_COLL_MPI;
    const int capacity = c.nodes * c.devices_per_node;
    const int gpus = a->gpus ? a->gpus : capacity;
    if (gpus > capacity) {
        error_set("--gpus %d is more than the %d devices of %s (%d nodes x %d)", gpus, capacity,
                  a->cluster, c.nodes, c.devices_per_node);
        return STATUS_BAD_INPUT;
    }
    plan_rates rates;
    plan_rates_default(&rates);
    if (a->n_calibrations &&
        plan_calibrate(&rates, &c, &m, a->calibrations, a->n_calibrations, stderr) != STATUS_OK)
        return STATUS_BAD_INPUT;

    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    plan_prediction *list = NULL;
    int n = plan_enumerate(&m, &w, &c, &rates, gpus, &list);
    /* the stream through each strategy that fits, as tripar's serve loop would serve it */
    const plan_load load = {a->rate, a->duration, 1, a->ttft, a->tpot};
    for (int i = 0; a->rate > 0 && i < n; i++)
        if (list[i].fits) plan_goodput_predict(&m, &w, &c, &rates, &list[i].s, &load, &list[i].served);
    plan_summary q = {.model_name = a->preset ? a->preset : a->job_path,
                      .cluster_path = a->cluster,
                      .w = w,
                      .gpus = gpus,
                      .objective = a->objective,
                      .ttft_slo = a->ttft,
                      .tpot_slo = a->tpot,
                      .rate = a->rate,
                      .stream_seconds = a->duration,
                      .n_calibrations = a->n_calibrations,
                      .precision = m.weight_dtype,
                      .precision_why = precision_why,
                      .kv_dtype = m.kv_dtype,
                      .kv_dtype_why = kv_why,
                      .experts = m.cfg.experts,
                      .expert_runs = rates.expert_runs};
    for (int i = 0; rates.expert_runs && i < m.cfg.layers * m.cfg.experts; i++)
        q.expert_hottest = fmax(q.expert_hottest, rates.expert_share[i] * m.cfg.experts);
    if (n == 0) {
        free(list);
        error_set("no strategy of tripar runs this model on %d ranks: tp must divide %d heads "
                  "(and fit %d kv heads), pp at most %d layers, dp at most the batch of %d",
                  gpus, m.cfg.heads, m.cfg.kv_heads, m.cfg.layers, w.batch);
        return STATUS_BAD_INPUT;
    }
    plan_rank(list, n, &q);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    q.seconds = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    int rc = plan_ranked_check(&q, &c, list, n), written = 0;
    if (rc == STATUS_OK) {
        /* CSV has no header to carry where a default precision came from: stderr says it */
        if (!a->precision && !strcmp(a->format, "csv"))
            fprintf(stderr, "tripar plan: precision %s (%s)\n", precision_kind_name(q.precision),
                    q.precision_why);
        FILE *out = a->out ? fopen(a->out, "w") : stdout;
        if (!out) {
            error_set("cannot write %s", a->out);
            rc = STATUS_BAD_INPUT;
        } else {
            rc = plan_output_write(out, a->format, &q, &c, list, n, a->top, &written);
            if (a->out && fclose(out) != 0) {
                error_set("cannot write %s", a->out);
                rc = STATUS_BAD_INPUT;
            }
        }
        if (rc == STATUS_OK && a->out)
            printf("tripar plan: wrote %s (%s, %d of %d strategies)\n", a->out, a->format, written,
                   n);
    }
    free(list);
    return rc;
}

int plan_main(int argc, char **argv) {
    plan_args a;
    int rc = plan_parse_args(&a, argc, argv);
    if (rc != 0) return rc > 0 ? TRIPAR_EXIT_OK : TRIPAR_EXIT_USAGE;
    if (plan_run(&a) != STATUS_OK) {
        fprintf(stderr, "tripar plan: %s\n", error_message());
        return TRIPAR_EXIT_USAGE;
    }
    return TRIPAR_EXIT_OK;
}
