/* Setting up one run of `tripar run` (run_context.h): resolving the job, and building the mesh,
 * backend, comms, timer, model shard and engine in order, with one path that frees them. */
#include "cli/run_context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/check.h"
#include "base/path.h"
#include "io/checkpoint.h"
#include "io/perplexity_input.h"
#include "io/prompt.h"
#include "parallel/agree.h"
#include "parallel/comm_setup.h"
#include "parallel/watchdog.h"
#include "parallel/device.h"

/* Mesh checks that depend on the model and the batch; the world-size check is separate so
 * --dry-run can plan a mesh larger than the processes it runs on. */
static int mesh_fits_model(const job *j) {
    char where[256];
    if (j->heads % j->tp != 0) {
        error_set("%s: parallel.tp = %d does not divide model heads = %d; tensor parallelism "
                  "splits whole heads",
                  job_key_origin(j, "parallel.tp", where, sizeof where), j->tp, j->heads);
        return -1;
    }
    if (j->layers < j->pp) {
        error_set("%s: parallel.pp = %d stages but the model has only %d layers; each stage "
                  "needs at least one layer",
                  job_key_origin(j, "parallel.pp", where, sizeof where), j->pp, j->layers);
        return -1;
    }
    if (j->batch < j->dp) {
        error_set("%s: parallel.dp = %d replicas but the input has only %d prompts; each "
                  "replica needs at least one",
                  job_key_origin(j, "parallel.dp", where, sizeof where), j->dp, j->batch);
        return -1;
    }
    return 0;
}

/* A checkpoint that is not a regular file is refused before anything opens it: a FIFO with no
 * writer would block every rank in open(). Every rank checks the same path on the shared file
 * system, as every rank reads the checkpoint's shape next. */
static int checkpoint_is_regular(const job *j) {
    char why[PATH_WHY_MAX], where[256];
    if (path_check_input(j->checkpoint, why, sizeof why) == 0) return 1;
    error_set("%s: model.checkpoint '%s' %s",
              job_key_origin(j, "model.checkpoint", where, sizeof where), j->checkpoint, why);
    return 0;
}

/* A checkpoint stored in bf16, int8w or a block format gives model.precision (and int8w's model.int8_group)
 * when the job leaves them out, and refuses a precision it cannot load into, naming the key
 * (docs/checkpoint.md, "Stored precision"). */
static int adopt_checkpoint_precision(job *j, const checkpoint_storage *st) {
    if (!job_key_given(j, "model.precision")) j->precision = st->precision;
    if (j->kv_dtype_auto) j->kv_dtype = kv_dtype_for(j->precision);
    if (j->precision == PRECISION_INT8W && st->precision == PRECISION_INT8W &&
        !job_key_given(j, "model.int8_group"))
        j->int8_group = st->int8_group;
    model_config cfg;
    model_config_from_job(&cfg, j);
    char where[256], why[1024];
    const char *key = checkpoint_storage_refusal(st, j->precision, &cfg, j->checkpoint);
    if (!key && j->backend == BACKEND_CUDA && cfg.int8_group > 0) {
        error_set("the checkpoint %s stores int8w scales per %d columns, and the cuda kernels "
                  "scale int8 weights per row; allowed with cuda: a checkpoint imported with "
                  "--int8-group 0, or backend.kind: cpu",
                  j->checkpoint, cfg.int8_group);
        key = "backend.kind";
    }
    if (!key) return STATUS_OK;
    snprintf(why, sizeof why, "%s", error_message());
    error_set("%s: %s", job_key_origin(j, key, where, sizeof where), why);
    return STATUS_BAD_INPUT;
}

/* The checkpoint's shape replaces the job's model keys, and the resolved job records it. */
static int adopt_checkpoint_shape(job *j) {
    model_config ck;
    checkpoint_storage st;
    if (checkpoint_read_stored(j->checkpoint, &ck, &st) != STATUS_OK) return STATUS_BAD_INPUT;
    if (j->arch_given && j->arch != ck.arch) {
        char where[160];
        error_set("%s: model.arch = %s, but the checkpoint %s holds a %s model",
                  job_key_origin(j, "model.arch", where, sizeof where), arch_kind_name(j->arch),
                  j->checkpoint, arch_kind_name(ck.arch));
        return STATUS_BAD_INPUT;
    }
    j->layers = ck.layers, j->heads = ck.heads, j->embd = ck.embd, j->vocab = ck.vocab;
    j->ctx = ck.ctx, j->mlp = ck.mlp, j->ln_eps = ck.ln_eps, j->norm = ck.norm;
    j->arch = ck.arch, j->kv_heads = ck.kv_heads, j->tie_embeddings = ck.tie_embeddings;
    j->attention_bias = ck.attention_bias, j->head_dim = ck.head_dim;
    j->experts = ck.experts, j->experts_top_k = ck.experts_top_k;
    j->shared_expert_mlp = ck.shared_mlp, j->norm_topk_prob = ck.norm_topk_prob;
    j->rope_theta = (float)ck.rope_theta, j->rope_scaling = ck.rope_scaled;
    j->rope_factor = (float)ck.rope_scaling.factor;
    j->rope_low_freq_factor = (float)ck.rope_scaling.low_freq_factor;
    j->rope_high_freq_factor = (float)ck.rope_scaling.high_freq_factor;
    j->rope_original_ctx = ck.rope_scaling.original_max_position_embeddings;
    if (adopt_checkpoint_precision(j, &st) != STATUS_OK) return STATUS_BAD_INPUT;
    free(j->yaml);
    j->yaml = job_dump_string(j);
    return STATUS_OK;
}

int run_job_load_point(const run_args *a, long point, job *out) {
    const char *overrides[RUN_MAX_OVERRIDES + SWEEP_MAX_KEYS];
    char point_sets[SWEEP_MAX_KEYS][SWEEP_TEXT_MAX + 8];
    int n_overrides = 0;
    for (int i = 0; i < a->n_overrides; i++)
        overrides[n_overrides++] = a->overrides[i];
    for (int k = 0; k < a->sweep.n_axes; k++) { /* the point's values win over --set */
        char set[SWEEP_TEXT_MAX];
        sweep_override(&a->sweep, point, k, set, sizeof set);
        /* prefixed, so that messages about the value name --sweep, not --set */
        snprintf(point_sets[k], sizeof point_sets[k], "--sweep %s", set);
        overrides[n_overrides++] = point_sets[k];
    }
    return job_load(out, a->job_path, overrides, n_overrides);
}

int run_job_resolve(const run_args *a, long point, job *out, tokenizer **tok) {
    *tok = NULL;
    job *j = out;
    if (run_job_load_point(a, point, j) != STATUS_OK) return STATUS_BAD_INPUT;
    int ok =
        !j->checkpoint[0] || (checkpoint_is_regular(j) && adopt_checkpoint_shape(j) == STATUS_OK);
    if (ok && j->synthetic_input) job_fill_synthetic_tokens(j, j->vocab);
    ok = ok && prompt_tokenize(j, tok) == STATUS_OK;
    ok = ok && perplexity_windows(j) == STATUS_OK; /* the text as windows, when scoring it */
    ok = ok && job_validate_model(j) == STATUS_OK && mesh_fits_model(j) == 0;
    if (ok) return STATUS_OK;
    tokenizer_free(*tok);
    *tok = NULL;
    job_free(j);
    return STATUS_BAD_INPUT;
}

/* What an output or input is called in messages: "--out", "record.out (sweep point 2)". */
static void file_label(char *buf, size_t len, const char *name, long point, long n) {
    if (n > 1)
        snprintf(buf, len, "%s (sweep point %ld)", name, point + 1);
    else
        snprintf(buf, len, "%s", name);
}

/* Rank 0's half of run_files_check: 0, or -1 with error_message() set. */
static int run_files_refuse(const run_args *a, const run_files *runs, long n) {
    static const char *const input_names[RUN_INPUTS] = {
        [RUN_INPUT_JOB] = "the job file",
        [RUN_INPUT_CHECKPOINT] = "model.checkpoint",
        [RUN_INPUT_TOKENS] = "input.tokens_file",
        [RUN_INPUT_TEXT] = "input.text_file",
    };
    const char *out_name = a->out ? "--out" : "record.out";
    char why[PATH_WHY_MAX], out_label[96], in_label[96];
    for (long p = 0; p < n; p++) {
        file_label(out_label, sizeof out_label, out_name, p, n);
        if (path_check_output(runs[p].out, why, sizeof why) != 0) {
            error_set("%s '%s' %s", out_label, runs[p].out, why);
            return -1;
        }
    }
    const char *ckpt = a->save_checkpoint;
    if (ckpt && path_check_output(ckpt, why, sizeof why) != 0) {
        error_set("--save-checkpoint '%s' %s", ckpt, why);
        return -1;
    }
    for (long p = 0; p < n && ckpt; p++) {
        if (path_same_target(ckpt, runs[p].out)) {
            file_label(out_label, sizeof out_label, out_name, p, n);
            error_set("--save-checkpoint '%s' and %s '%s' are the same file; give the checkpoint "
                      "and the run file different paths",
                      ckpt, out_label, runs[p].out);
            return -1;
        }
    }
    /* every output against every input of every point: a later point must not read what an
     * earlier one wrote over */
    for (long p = 0; p < n; p++) {
        for (long q = 0; q < n; q++) {
            int which = -1;
            const char *inputs[RUN_INPUTS];
            for (int i = 0; i < RUN_INPUTS; i++)
                inputs[i] = runs[q].inputs[i];
            const char *hit = NULL;
            if (path_is_any_of(runs[p].out, inputs, RUN_INPUTS, &which)) {
                hit = runs[p].out;
                file_label(out_label, sizeof out_label, out_name, p, n);
            } else if (ckpt && path_is_any_of(ckpt, inputs, RUN_INPUTS, &which)) {
                hit = ckpt;
                snprintf(out_label, sizeof out_label, "--save-checkpoint");
            }
            if (!hit) continue;
            file_label(in_label, sizeof in_label, input_names[which], q, n);
            error_set("%s '%s' is the same file as %s '%s'; an output may not replace an input, "
                      "so give it another path",
                      out_label, hit, in_label, runs[q].inputs[which]);
            return -1;
        }
    }
    return 0;
}

int run_files_check(const run_args *a, const run_files *runs, long n) {
    int bad = tripar_world_rank() == 0 ? run_files_refuse(a, runs, n) != 0 : 0;
    agree_root_int(MPI_COMM_WORLD, &bad);
    return bad ? run_user_error() : TRIPAR_EXIT_OK;
}

void engine_config_from_job(engine_config *cfg, const job *j) {
    memset(cfg, 0, sizeof *cfg);
    cfg->prompts = j->tokens;
    cfg->batch = j->batch;
    cfg->prompt_len = j->prompt_len;
    cfg->new_tokens = j->new_tokens;
    cfg->microbatches = j->microbatches;
    cfg->overlap = j->overlap;
    cfg->chunks = j->chunks;
    cfg->kv_cache = j->kv_cache;
    cfg->kv_block = j->kv_block;
    cfg->kv_dtype = model_kv_dtype(j->kv_dtype);
    cfg->cuda_graphs = j->cuda_graphs;
    cfg->sampling = j->sampling;
    cfg->temperature = j->temperature;
    cfg->top_k = j->top_k;
    cfg->sample_seed = j->sample_seed;
    /* prompt_tokenize resolved generate.stop_at_eos into eos_id; a zeroed job leaves it off */
    cfg->stop_at_eos = j->stop_at_eos != 0 && j->eos_id >= 0;
    cfg->eos_id = j->eos_id;
    cfg->activations = (const char *const *)j->activations;
    cfg->n_activations = j->n_activations;
    cfg->nll_first = j->perplexity_window > 0 ? perplexity_first(j->prompt_len) : 0;
}

/* Where a replica sits in its EP group when parallel.ep spans replicas (ep > tp: groups of
 * ep / tp adjacent dp coordinates, parallel/mesh.h mesh_ep_split); 0 otherwise. */
static int ep_replica(const job *j, int dp_rank) {
    return j->ep > j->tp ? dp_rank % (j->ep / j->tp) : 0;
}

/* What one rank at coordinates (tp_rank, pp_rank, dp_rank) allocates: the weights' size table
 * and the engine's arena table, the same ones a run allocates from. */
static void rank_memory_plan(const job *j, const model_config *cfg, int tp_rank, int pp_rank,
                             int dp_rank, run_memory_plan *out, shard_geom *g) {
    engine_config ec;
    engine_config_from_job(&ec, j);
    model m;
    memset(&m, 0, sizeof m);
    shard_geom_init(g, cfg, j->tp, tp_rank, j->pp, pp_rank);
    shard_geom_set_ep(g, cfg, j->ep, ep_replica(j, dp_rank));
    model_tensor_table(&m, cfg, g, model_weight_dtype(j->precision));
    size_t act = 0, kv = 0;
    engine_arena_plan(&ec, g, cfg, j->dp, dp_rank, &act, &kv);
    out->weights = (double)model_weight_bytes(&m);
    out->activations = (double)act, out->kv = (double)kv;
    /* model_fill_synthetic's and checkpoint_load's buffer holds the largest tensor in fp32;
     * model_store_tensor converts a matrix into a copy of at most 2 bytes an element (bf16,
     * fp16; int8 is 1 and its scales fewer) */
    out->staging = 0;
    for (int i = 0; i < m.n_tensors; i++) {
        const tensor_desc *t = &m.tensors[i];
        if (!t->present) continue;
        const int converted = t->is_matrix && m.weight_dtype != DTYPE_F32;
        const double bytes = (double)tensor_local_elems(t) * (sizeof(float) + (converted ? 2 : 0));
        if (bytes > out->staging) out->staging = bytes;
    }
}

/* Memory of one rank at every (pp, tp) coordinate of the largest replica. */
void run_print_memory_plan(const job *j, const model_config *cfg) {
    if (mesh_order_is_auto(j->order))
        printf("# parallel.order auto: a dry run sees no nodes; it assumes one node holding all "
               "%d ranks, where auto is tp-pp-dp (a run refuses a tp that fits no node)\n",
               j->dp * j->tp * j->pp);
    printf("# memory per rank (weights + activations + KV cache; load_staging: the host buffer "
           "of the weights loader), backend %s\n",
           backend_kind_name(j->backend));
    printf("memory_per_rank:\n");
    for (int pp = 0; pp < j->pp; pp++)
        for (int tp = 0; tp < j->tp; tp++) {
            shard_geom g;
            run_memory_plan p;
            rank_memory_plan(j, cfg, tp, pp, j->dp - 1, &p, &g);
            printf(
                "  - {pp_rank: %d, tp_rank: %d, layer_begin: %d, layer_end: %d, weights_mib: %.2f, "
                "activations_mib: %.2f, kv_cache_mib: %.2f, total_mib: %.2f, "
                "load_staging_mib: %.2f}\n",
                pp, tp, g.layer_begin, g.layer_end, p.weights / 1048576.0,
                p.activations / 1048576.0, p.kv / 1048576.0,
                (p.weights + p.activations + p.kv) / 1048576.0, p.staging / 1048576.0);
        }
}

int run_user_error(void) {
    if (tripar_world_rank() == 0) fprintf(stderr, "tripar: error: %s\n", error_message());
    return TRIPAR_EXIT_USAGE;
}

static int default_threads(const mesh *m) {
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int per_rank = (int)(cores / (m->local_size > 0 ? m->local_size : 1));
    return per_rank > 0 ? per_rank : 1;
}

/* Starts the backend on every rank; a rank that cannot start says why, and all exit 2. Its
 * mark slots (CUDA events) are sized for the timer's events, none when timings are off. */
static int backend_start(run_context *rc, long capacity) {
    const job *j = &rc->j;
    const char *name = backend_kind_name(j->backend);
    const int devices = backend_drives_devices(name);
    backend_options bopt = {.threads = j->threads > 0 ? j->threads : default_threads(&rc->mesh),
                            .cpu_isa = job_cpu_isa_names()[j->cpu_isa],
                            .device = devices ? device_select(&rc->mesh, j->device) : -1,
                            .allow_tf32 = j->allow_tf32,
                            .max_marks = (int)(2 * capacity)};
    rc->threads = bopt.threads;
    int bad = backend_init(&rc->be, name, &bopt);
    const int any_bad = agree_any_bad(MPI_COMM_WORLD, bad);
    rc->have_backend = !bad;
    if (!any_bad) {
        if (devices) device_record(&rc->mesh, bopt.device); /* /mesh; warns if shared */
        const char *path = rc->be.ops->kernel_path ? rc->be.ops->kernel_path(rc->be.ctx) : NULL;
        snprintf(rc->mesh.kernels, sizeof rc->mesh.kernels, "%s", path ? path : "");
        return TRIPAR_EXIT_OK;
    }
    if (!bad)
        error_set("backend %s could not start on another rank", backend_kind_name(j->backend));
    if (bad || rc->mesh.world_rank == 0)
        fprintf(stderr, "tripar: error: [rank %d host %s] %s\n", rc->mesh.world_rank, rc->mesh.host,
                error_message());
    return TRIPAR_EXIT_USAGE;
}

static int comms_start(run_context *rc) {
    const job *j = &rc->j;
    static const comm_choice choices[] = {[COMM_AUTO] = COMM_CHOICE_AUTO,
                                          [COMM_MPI] = COMM_CHOICE_MPI,
                                          [COMM_NCCL] = COMM_CHOICE_NCCL};
    char origin[JOB_PATH_MAX + 32];
    job_key_origin(j, "backend.comm", origin, sizeof origin);
    /* the largest message over TP or PP is a micro-batch prefill's activations in the largest
     * replica */
    microbatch_split largest;
    microbatch_split_init(&largest, replica_sequences_max(j->batch, j->dp), j->microbatches);
    comm_plan plan = {
        .choice = choices[j->comm],
        .choice_name = comm_kind_name(j->comm),
        .choice_origin = origin,
        .max_message_bytes =
            (size_t)largest.max_size * (size_t)j->prompt_len * (size_t)j->embd * sizeof(float),
        .microbatches = largest.n_micro,
    };
    if (comm_setup(&rc->mesh, &plan, &rc->be) != 0) return run_user_error();
    rc->have_comms = 1;
    return TRIPAR_EXIT_OK;
}

/* The model shard: the size table, one allocation, then the weights from the checkpoint or
 * the synthetic hash (timed as weight_init), and --save-checkpoint. */
static int model_start(run_context *rc, const run_args *a) {
    const job *j = &rc->j;
    shard_geom g;
    shard_geom_init(&g, &rc->cfg, j->tp, rc->mesh.coord[AXIS_TP], j->pp, rc->mesh.coord[AXIS_PP]);
    shard_geom_set_ep(&g, &rc->cfg, j->ep, ep_replica(j, rc->mesh.coord[AXIS_DP]));
    model_tensor_table(&rc->m, &rc->cfg, &g, model_weight_dtype(j->precision));
    model_alloc(&rc->m, &rc->be);
    rc->have_model = 1;
    double w0 = timer_host_seconds();
    if (rc->mesh.world_rank == 0 && rc->m.weight_bytes > (256u << 20))
        fprintf(stderr, "tripar: %s weights, %.0f MiB on rank 0\n",
                j->checkpoint[0] ? "loading" : "generating", rc->m.weight_bytes / 1048576.0);
    comm *tp = &rc->mesh.axis[AXIS_TP];
    if (j->checkpoint[0]) {
        watch_phase(WATCH_CHECKPOINT); /* collective; the set-up watchdog guards it */
        const int status = checkpoint_load(&rc->m, &rc->be, j->checkpoint, MPI_COMM_WORLD, tp,
                                           j->verify_checksums);
        watch_phase(WATCH_NONE);
        if (status != STATUS_OK) return run_user_error();
    } else {
        model_fill_synthetic(&rc->m, &rc->be, j->seed, tp);
    }
    timer_add_host(&rc->tm, PHASE_WEIGHT_INIT, -1, -1, TIMER_NO_LAYER, w0, timer_host_seconds());
    if (a->save_checkpoint) {
        watch_phase(WATCH_CHECKPOINT);
        if (checkpoint_save(&rc->m, j->seed, a->save_checkpoint, &rc->mesh) != STATUS_OK)
            CHECK(0, "could not write checkpoint %s: %s", a->save_checkpoint, error_message());
        watch_phase(WATCH_NONE);
        if (rc->mesh.world_rank == 0) printf("tripar: wrote checkpoint %s\n", a->save_checkpoint);
    }
    return TRIPAR_EXIT_OK;
}

static void engine_start(run_context *rc, volatile sig_atomic_t *stop_flag) {
    engine_config ec;
    engine_config_from_job(&ec, &rc->j);
    engine_config_use_mesh(&ec, &rc->mesh);
    ec.model = &rc->m;
    ec.be = &rc->be;
    ec.tm = &rc->tm;
    ec.on_step = run_record_step;
    ec.on_step_user = rc;
    ec.stop_flag = stop_flag;
    engine_init(&rc->e, &ec);
    rc->have_engine = 1;
}

/* record.telemetry: the sampler runs on the timer's clock from here to run_record. On cuda the
 * GPU fields come from NVML; without it rank 0 says so once, and the fields stay NaN. */
static void telemetry_begin(run_context *rc) {
    const job *j = &rc->j;
    const int cuda = j->backend == BACKEND_CUDA;
    telemetry_init(&rc->tel, j->telemetry_hz, &rc->tm, cuda, rc->mesh.pci_bus_id, rc->mesh.device);
    rc->have_telemetry = 1;
    if (cuda && j->telemetry_hz > 0 && !rc->tel.nvml.lib && rc->mesh.world_rank == 0)
        fprintf(stderr, "tripar: telemetry: no NVML (%s); the GPU fields are NaN\n",
                rc->tel.nvml.status);
    telemetry_start(&rc->tel);
}

int run_context_build(run_context *rc, const run_args *a, volatile sig_atomic_t *stop_flag) {
    const job *j = &rc->j;
    /* the mesh's, the comms' and the clock's collectives are one marked stretch for the stall
     * watchdog, which in set-up fires only inside one (parallel/watchdog.h) */
    watch_phase(WATCH_SETUP);
    /* auto's tp must fit inside a node, which only the built mesh knows: the same refusal on
     * every rank, exit 2 */
    const int refused = mesh_try_init(&rc->mesh, MPI_COMM_WORLD, j->dp, j->tp, j->pp, j->order);
    watch_phase(WATCH_NONE);
    if (refused) return run_user_error();
    rc->have_mesh = 1;
    if (j->ep > j->tp) mesh_ep_split(&rc->mesh, j->ep / j->tp); /* EP groups across replicas */
    const long capacity = timer_event_capacity(j);
    int code = backend_start(rc, capacity);
    if (code == TRIPAR_EXIT_OK) { /* before the comms, the model and the engine allocate */
        run_memory_plan plan;
        shard_geom g;
        const int *c = rc->mesh.coord;
        rank_memory_plan(j, &rc->cfg, c[AXIS_TP], c[AXIS_PP], c[AXIS_DP], &plan, &g);
        code = run_memory_check(rc, &plan);
    }
    watch_phase(WATCH_SETUP);
    if (code == TRIPAR_EXIT_OK) code = comms_start(rc);
    if (code == TRIPAR_EXIT_OK) timer_init(&rc->tm, j->timings, &rc->be, capacity, MPI_COMM_WORLD);
    watch_phase(WATCH_NONE);
    if (code != TRIPAR_EXIT_OK) return code;
    rc->tm.iteration = -1; /* set-up events belong to no measured iteration */
    rc->have_timer = 1;
    sched_init(&rc->sched, j->sched, timer_step_capacity(j));
    rc->have_sched = 1;
    if (rc->sched.on) rc->tm.sched = &rc->sched;
    telemetry_begin(rc);
    if ((code = model_start(rc, a)) != TRIPAR_EXIT_OK) return code;
    engine_start(rc, stop_flag);
    watch_phase(WATCH_RUNFILE);
    rc->rf = runfile_create(rc->out_path, j, &rc->mesh);
    watch_phase(WATCH_NONE);
    if (!rc->rf) { /* every rank has the same answer: one message, and all exit 1 */
        if (rc->mesh.world_rank == 0) fprintf(stderr, "tripar: error: %s\n", error_message());
        return TRIPAR_EXIT_RUNTIME;
    }
    return TRIPAR_EXIT_OK;
}

void run_context_free(run_context *rc) {
    if (rc->have_engine) engine_free(&rc->e);
    if (rc->have_telemetry) telemetry_free(&rc->tel); /* before the clock it reads */
    if (rc->have_sched) sched_free(&rc->sched);
    if (rc->have_timer) timer_free(&rc->tm);
    if (rc->have_model) model_free(&rc->m, &rc->be);
    if (rc->have_comms) comm_teardown(&rc->mesh); /* staged comms free through the backend */
    if (rc->have_backend) backend_free(&rc->be);
    if (rc->have_mesh) mesh_free(&rc->mesh);
    tokenizer_free(rc->tok);
    job_free(&rc->j);
    memset(rc, 0, sizeof *rc);
}
