/* Per-phase rooflines of a recorded run (run_roofline.h): one rank's phase times per period,
 * the analytic cost of exactly the events timed (metrics/phase_cost.c, priced from the job the
 * run file records), the achieved rates and the label against the ceilings in
 * /metrics/roofline. The label rule is docs/benchmarks.md "Per-phase rooflines". */
#include "analysis/run_roofline.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/moe_load.h"
#include "base/check.h"
#include "io/h5util.h"
#include "metrics/phase_cost.h"
#include "metrics/roofline.h"

/* The reader keeps every probe name the writer records (metrics/roofline.h), whole. */
#define PROBE_FITS(name, field) (sizeof(name) <= sizeof(((run_roofline *)0)->field))
_Static_assert(PROBE_FITS(ROOFLINE_PROBE_SGEMM, gflops_probe) &&
                   PROBE_FITS(ROOFLINE_PROBE_BACKEND_GEMM, gflops_probe) &&
                   PROBE_FITS(ROOFLINE_PROBE_STREAM, gbs_probe) &&
                   PROBE_FITS(ROOFLINE_PROBE_BACKEND_STREAM, gbs_probe),
               "a probe name longer than run_roofline keeps");

const char *roof_bound_name(roof_bound b) {
    switch (b) {
    case ROOF_COMPUTE: return "compute-bound";
    case ROOF_MEMORY: return "memory-bound";
    case ROOF_COMMUNICATION: return "communication-bound";
    case ROOF_OVERHEAD: return "overhead-bound";
    case ROOF_NONE: break;
    }
    return "-";
}

/* The phases that move data between ranks: their time is communication, whatever it costs. */
static int phase_is_comm(phase p) {
    return p == PHASE_TP_ALLREDUCE || p == PHASE_TP_WAIT || p == PHASE_PP_SEND ||
           p == PHASE_PP_RECV_WAIT || p == PHASE_DP_GATHER || p == PHASE_SAMPLE_WAIT ||
           p == PHASE_NLL_WAIT || p == PHASE_STOP_WAIT || p == PHASE_EP_DISPATCH ||
           p == PHASE_EP_COMBINE || p == PHASE_EP_WAIT;
}

/* What pricing the events needs from the run file. */
typedef struct {
    model_config cfg;
    precision_kind precision;
    kv_cache_kind kv_cache;
    kv_dtype_kind kv_dtype;
    int kv_block, new_tokens, batch, prompt_len;
    int chunks;        /* parallel.chunks: the row pieces of an overlapped row-parallel product */
    int stream_ordered; /* the TP axis on NCCL (backend cuda, comm auto or nccl): no nano-batches */
    int layer_timings; /* record.timings: layer */
    float *expert_share; /* a mixture of experts' recorded routing (phase_step.expert_share):
                          * the run's own /moe/expert_load; NULL when it has none */
} run_shape;

static int model_int(const run_model *m, const char *name, int fallback) {
    const char *v = run_model_key(m, name);
    return v ? atoi(v) : fallback;
}

/* The model shape and the step shapes from the root attribute job and /output/tokens. */
static int run_shape_read(const run_data *run, run_shape *s) {
    memset(s, 0, sizeof *s);
    run_model m;
    if (run_model_read(run->file, run->path, &m) != STATUS_OK) return STATUS_BAD_INPUT;
    model_config *cfg = &s->cfg;
    const char *arch = run_model_key(&m, "model.arch");
    cfg->arch = ARCH_GPT2;
    for (int k = 0; arch && k < ARCH_KINDS; k++)
        if (!strcmp(arch, arch_kind_name((arch_kind)k))) cfg->arch = (arch_kind)k;
    cfg->layers = model_int(&m, "layers", 0);
    cfg->heads = model_int(&m, "heads", 0);
    cfg->embd = model_int(&m, "embd", 0);
    cfg->vocab = model_int(&m, "vocab", 0);
    cfg->ctx = model_int(&m, "ctx", 0);
    cfg->mlp = model_int(&m, "mlp", 4 * cfg->embd);
    cfg->kv_heads = model_int(&m, "kv_heads", cfg->heads);
    /* a mixture of experts (mlp is then each expert's width); 0 on a dense model */
    cfg->experts = model_int(&m, "experts", 0);
    cfg->experts_top_k = model_int(&m, "experts_top_k", cfg->experts > 0);
    cfg->shared_mlp = model_int(&m, "shared_expert_mlp", 0);
    /* a checkpoint's note records no head_dim (embd / heads then) nor tie_embeddings: an
     * untied Llama head is assumed, as in Llama 3 8B */
    cfg->head_dim = arch_is_llama(cfg->arch) ? model_int(&m, "head_dim", 0) : 0;
    const char *tie = run_model_key(&m, "tie_embeddings");
    cfg->tie_embeddings = cfg->arch == ARCH_GPT2 || (tie && !strcmp(tie, "true"));
    const char *norm = run_model_key(&m, "model.norm");
    cfg->norm = norm && !strcmp(norm, "post") ? NORM_POST : NORM_PRE;
    run_model_free(&m);
    if (cfg->experts < 0 || cfg->shared_mlp < 0 ||
        (cfg->experts > 0 && (cfg->experts_top_k < 1 || cfg->experts_top_k > cfg->experts))) {
        error_set("%s: the job records experts %d, experts_top_k %d, shared_expert_mlp %d; a "
                  "mixture of experts routes each token to 1 to experts of them",
                  run->path, cfg->experts, cfg->experts_top_k, cfg->shared_mlp);
        return STATUS_BAD_INPUT;
    }
    if (cfg->layers <= 0 || cfg->heads <= 0 || cfg->embd <= 0 || cfg->vocab <= 0 ||
        cfg->kv_heads <= 0) {
        error_set("%s: the job attribute records no complete model shape (layers, heads, embd, "
                  "vocab)",
                  run->path);
        return STATUS_BAD_INPUT;
    }

    char *job = h5_attr_read_string_alloc(run->file, "job");
    char v[64];
    s->precision = PRECISION_FP32;
    if (job && run_job_scalar(job, "model.precision", v, sizeof v) == 0) {
        for (int k = PRECISION_FP32; k <= PRECISION_Q4_K; k++) /* the block formats too */
            if (!strcmp(v, precision_kind_name((precision_kind)k))) s->precision = (precision_kind)k;
    }
    /* int8w's groups and a head asked for in the weight type (`quantize_head: true`: a tied
     * model's copy of wte) change the bytes a step reads; `auto` stays counted as an fp32
     * head, since a checkpoint's note does not say whether its head is tied */
    if (job && s->precision == PRECISION_INT8W &&
        run_job_scalar(job, "model.int8_group", v, sizeof v) == 0)
        cfg->int8_group = atoi(v);
    if (job && s->precision != PRECISION_FP32 &&
        run_job_scalar(job, "model.quantize_head", v, sizeof v) == 0)
        cfg->quantize_head = !strcmp(v, "true");
    s->kv_cache =
        job && run_job_scalar(job, "model.kv_cache", v, sizeof v) == 0 && !strcmp(v, "paged")
            ? KV_PAGED
            : KV_CONTIGUOUS;
    s->kv_block = job && run_job_scalar(job, "model.kv_block", v, sizeof v) == 0 ? atoi(v) : 16;
    /* the run's cache type as its job dump resolved it; runs from before model.kv_dtype held
     * an fp32 cache */
    const int kv = job && run_job_scalar(job, "model.kv_dtype", v, sizeof v) == 0
                       ? kv_dtype_parse(v, s->precision)
                       : -1;
    s->kv_dtype = kv >= 0 ? (kv_dtype_kind)kv : KV_DTYPE_FP32;
    s->chunks = job && run_job_scalar(job, "parallel.chunks", v, sizeof v) == 0 ? atoi(v) : 1;
    s->stream_ordered =
        !strcmp(run->backend, "cuda") &&
        !(job && run_job_scalar(job, "backend.comm", v, sizeof v) == 0 && !strcmp(v, "mpi"));
    int have_new = job && run_job_scalar(job, "generate.new_tokens", v, sizeof v) == 0;
    s->new_tokens = have_new ? atoi(v) : -1;
    /* the job says which level was recorded; a file whose job omits it (an edited or a
     * hand-made one) is at layer level when some event is inside a layer */
    if (job && run_job_scalar(job, "record.timings", v, sizeof v) == 0) {
        s->layer_timings = !strcmp(v, "layer");
    } else {
        for (int r = 0; r < run->world_size && !s->layer_timings; r++)
            for (long i = 0; i < run->n_events[r] && !s->layer_timings; i++)
                s->layer_timings = run->events[r][i].layer >= 0;
    }
    free(job);
    if (!have_new) {
        error_set("%s: the job attribute records no generate.new_tokens", run->path);
        return STATUS_BAD_INPUT;
    }
    if (!s->layer_timings) {
        error_set("%s: timings are not at layer level (record.timings: layer), so the phases "
                  "inside layers were not timed",
                  run->path);
        return STATUS_BAD_INPUT;
    }

    /* /output/tokens is (batch, prompt_len + new_tokens), whatever the input's kind */
    hsize_t dims[2] = {0, 0};
    int ok = 0;
    H5E_BEGIN_TRY {
        hid_t d = H5Dopen2(run->file, "/output/tokens", H5P_DEFAULT);
        if (d >= 0) {
            hid_t sp = H5Dget_space(d);
            ok = sp >= 0 && H5Sget_simple_extent_ndims(sp) == 2 &&
                 H5Sget_simple_extent_dims(sp, dims, NULL) == 2;
            if (sp >= 0) H5Sclose(sp);
            H5Dclose(d);
        }
    }
    H5E_END_TRY;
    s->batch = (int)dims[0];
    s->prompt_len = (int)dims[1] - s->new_tokens;
    if (!ok || s->batch <= 0 || s->prompt_len <= 0) {
        error_set("%s: no /output/tokens of shape (batch, prompt + new tokens) to size the "
                  "steps by",
                  run->path);
        return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

/* The ceilings of /metrics/roofline; 0 when the run did not record them. */
static int ceilings_read(const run_data *run, run_roofline *out) {
    if (!h5_exists(run->file, "/metrics/roofline")) return 0;
    hid_t g = H5Gopen2(run->file, "/metrics/roofline", H5P_DEFAULT);
    if (g < 0) return 0;
    double before = NAN, after = NAN, gbs = NAN;
    int ok = h5_attr_read_double(g, "sgemm_gflops_before", &before) == 0;
    ok &= h5_attr_read_double(g, "stream_gbs", &gbs) == 0;
    if (h5_attr_read_double(g, "sgemm_gflops_after", &after) != 0) after = before;
    h5_attr_read_string(g, "gflops_probe", out->gflops_probe, sizeof out->gflops_probe);
    h5_attr_read_string(g, "gbs_probe", out->gbs_probe, sizeof out->gbs_probe);
    H5Gclose(g);
    /* the better of the two GEMM measurements bounds what the machine can do */
    out->peak_gflops = after > before ? after : before;
    out->peak_gbs = gbs;
    return ok && out->peak_gflops > 0 && out->peak_gbs > 0;
}

int run_roofline_slowest_rank(const run_data *run) {
    int slowest = 0;
    double worst = -1;
    for (int r = 0; r < run->world_size; r++) {
        double busy = 0;
        for (long i = 0; i < run->n_events[r]; i++) {
            const timing_event *e = &run->events[r][i];
            if (e->iteration >= 0 && e->phase >= 0 && e->phase < PHASE_COUNT &&
                phase_is_compute((phase)e->phase))
                busy += e->t_end - e->t_start;
        }
        if (busy > worst) worst = busy, slowest = r;
    }
    return slowest;
}

/* A mixture of experts prices its experts as this run routed them: each layer's shares of the
 * rows it recorded over the steps (analysis/moe_load.h), not uniform routing. */
static int expert_share_read(const run_data *run, run_shape *s) {
    const int L = s->cfg.layers, E = s->cfg.experts;
    if (E <= 0) return STATUS_OK;
    double *counts = xcalloc((size_t)L * (size_t)E, sizeof *counts);
    const int got = moe_load_counts_read(run->file, L, E, counts);
    if (got > 0) {
        s->expert_share = xcalloc((size_t)L * (size_t)E, sizeof *s->expert_share);
        moe_load_shares(counts, L, E, s->expert_share);
    }
    free(counts);
    if (got >= 0) return STATUS_OK;
    char why[512];
    snprintf(why, sizeof why, "%s", error_message());
    error_set("%s: %s", run->path, why);
    return STATUS_BAD_INPUT;
}

/* The shape of step `step` of micro-batch mb on rank r. */
static phase_step step_shape(const run_data *run, const run_shape *s, const run_rank *rk, int step,
                             int mb) {
    const int local = split_count(s->batch, run->dp, rk->dp_rank);
    const int n_micro = run->microbatches < local ? run->microbatches : local;
    phase_step st = {.tp = run->tp,
                     .tp_rank = rk->tp_rank,
                     .ep = run->ep,
                     .pp = run->pp,
                     .pp_rank = rk->pp_rank,
                     .weight_dtype = s->precision,
                     .kv_cache = s->kv_cache,
                     .kv_block = s->kv_block,
                     .kv_dtype = s->kv_dtype,
                     .expert_share = s->expert_share};
    st.seqs = n_micro > 0 && mb < n_micro ? split_count(local, n_micro, mb) : 0;
    st.new_positions = step == 0 ? s->prompt_len : 1;
    st.past_positions = step == 0 ? 0 : s->prompt_len + step - 1;
    /* forward.c: with overlap at tp > 1 the rows are cut into chunks pieces, at most one per
     * row; a prefill of a dense model runs as nano-batches, each cut so, unless NCCL's
     * stream-ordered all-reduces carry the TP axis */
    const int rows = st.seqs * st.new_positions, overlapped = run->overlap && run->tp > 1;
    st.row_pieces = overlapped ? (s->chunks < rows ? s->chunks : rows) : 1;
    if (overlapped && !s->stream_ordered && s->cfg.experts == 0 && st.new_positions > 1)
        st.nano_chunks = s->chunks;
    return st;
}

/* Payload of the communication one step of one micro-batch makes in phase p (bytes moved by
 * this rank's messages; no FLOPs): TP all-reduces of the residual stream, two per layer plus
 * the embedding's, the PP activations and the EP all-to-alls' rows. DP gathers once per run,
 * outside any step. */
static double comm_payload(const run_data *run, const model_config *cfg, const run_rank *rk,
                           const phase_step *st, phase p) {
    const double rows = (double)st->seqs * st->new_positions, act = rows * cfg->embd * 4.0;
    const int layers = split_count(cfg->layers, run->pp, rk->pp_rank);
    if ((p == PHASE_TP_ALLREDUCE || p == PHASE_TP_WAIT) && run->tp > 1)
        return act * (2.0 * layers + (rk->pp_rank == 0));
    if (p == PHASE_PP_SEND && run->pp > 1 && rk->pp_rank < run->pp - 1) return act;
    /* expert parallelism across replicas: each layer's rows x k routed rows, a tp-th of them
     * this rank's to send (dispatch) and to take back (combine), itself one of the peers */
    if ((p == PHASE_EP_DISPATCH || p == PHASE_EP_COMBINE || p == PHASE_EP_WAIT) &&
        run->ep > run->tp && cfg->experts > 0)
        return act * cfg->experts_top_k / run->tp * layers * (p == PHASE_EP_WAIT ? 2 : 1);
    if (p == PHASE_PP_RECV_WAIT && run->pp > 1 && rk->pp_rank > 0) return act;
    return 0;
}

/* The label and efficiency of one row (docs/benchmarks.md). */
static void roof_label(roof_phase *ph, phase p, const run_roofline *out) {
    ph->bound = ROOF_NONE;
    ph->efficiency = NAN;
    if (ph->events == 0 || ph->seconds <= 0) return;
    if (phase_is_comm(p)) {
        ph->bound = ROOF_COMMUNICATION;
        return;
    }
    if (!phase_cost_modelled(p) || !out->has_ceilings || ph->bytes <= 0) return;
    const double intensity = ph->flops / ph->bytes, ridge = out->peak_gflops / out->peak_gbs;
    if (intensity > ridge) {
        ph->bound = ROOF_COMPUTE;
        ph->efficiency = ph->gflops / out->peak_gflops;
    } else {
        ph->bound = ROOF_MEMORY;
        ph->efficiency = ph->gbs / out->peak_gbs;
    }
    if (ph->efficiency < ROOF_OVERHEAD_EFFICIENCY &&
        ph->seconds / ph->events < ROOF_OVERHEAD_EVENT_SECONDS)
        ph->bound = ROOF_OVERHEAD;
}

int run_roofline_compute(const run_data *run, int rank, run_roofline *out) {
    memset(out, 0, sizeof *out);
    if (rank < 0 || rank >= run->world_size) {
        error_set("%s: no rank %d (the run has %d)", run->path, rank, run->world_size);
        return STATUS_BAD_INPUT;
    }
    run_shape s;
    if (run_shape_read(run, &s) != STATUS_OK) return STATUS_BAD_INPUT;
    if (expert_share_read(run, &s) != STATUS_OK) return STATUS_BAD_INPUT;
    out->rank = rank;
    out->cfg = s.cfg, out->precision = s.precision;
    snprintf(out->weight_dtype, sizeof out->weight_dtype, "%s", precision_kind_name(s.precision));
    snprintf(out->kv_cache, sizeof out->kv_cache, "%s", kv_cache_kind_name(s.kv_cache));
    out->has_ceilings = ceilings_read(run, out);
    if (!out->has_ceilings) out->peak_gflops = out->peak_gbs = NAN;

    const run_rank *rk = &run->ranks[rank];
    const timing_event *ev = run->events[rank];
    const long n = run->n_events[rank];
    /* Each (iteration, step, micro-batch) of a phase is priced once, however many events it
     * took (the overlap pieces of a row-parallel product, the norms of every layer): a table
     * of what was priced, sized by the largest indices the events hold. */
    int max_it = -1, max_step = -1, max_mb = -1;
    for (long i = 0; i < n; i++) {
        if (ev[i].iteration < 0 || ev[i].step < 0 || ev[i].microbatch < 0) continue;
        if (ev[i].iteration > max_it) max_it = ev[i].iteration;
        if (ev[i].step > max_step) max_step = ev[i].step;
        if (ev[i].microbatch > max_mb) max_mb = ev[i].microbatch;
    }
    const size_t cells = max_it < 0 ? 1
                                    : (size_t)(max_it + 1) * (size_t)(max_step + 1) *
                                          (size_t)(max_mb + 1) * PHASE_COUNT;
    unsigned char *priced = xcalloc(cells, 1);
    for (long i = 0; i < n; i++) {
        const timing_event *e = &ev[i];
        if (e->iteration < 0 || e->step < 0 || e->microbatch < 0 || e->phase < 0 ||
            e->phase >= PHASE_COUNT)
            continue; /* warm-up, and the per-run events outside any step */
        const phase p = (phase)e->phase;
        const int period = e->step == 0 ? ROOF_PERIOD_PREFILL : ROOF_PERIOD_DECODE;
        roof_phase *ph = &out->phase[period][p];
        ph->seconds += e->t_end - e->t_start;
        ph->events++;
        size_t cell =
            (((size_t)e->iteration * (max_step + 1) + e->step) * (max_mb + 1) + e->microbatch) *
                PHASE_COUNT +
            p;
        if (priced[cell]) continue;
        priced[cell] = 1;
        const phase_step st = step_shape(run, &s, rk, e->step, e->microbatch);
        if (phase_cost_modelled(p)) {
            phase_cost c;
            phase_cost_compute(&s.cfg, &st, p, &c);
            ph->flops += c.flops;
            ph->weight_bytes += c.weight_bytes;
            ph->kv_bytes += c.kv_bytes;
            ph->act_bytes += c.act_bytes;
            ph->bytes += c.bytes;
        } else if (phase_is_comm(p)) {
            const double payload = comm_payload(run, &s.cfg, rk, &st, p);
            ph->act_bytes += payload;
            ph->bytes += payload;
        }
    }
    free(priced);
    free(s.expert_share);
    for (int period = 0; period < ROOF_PERIOD_COUNT; period++)
        for (int p = 0; p < PHASE_COUNT; p++) {
            roof_phase *ph = &out->phase[period][p];
            /* rates only where a cost is modelled: none for step, no FLOPs for comm */
            const int priced = phase_cost_modelled((phase)p), comm = phase_is_comm((phase)p);
            ph->gflops = ph->seconds > 0 && priced ? ph->flops / ph->seconds / 1e9 : NAN;
            ph->gbs = ph->seconds > 0 && (priced || comm) ? ph->bytes / ph->seconds / 1e9 : NAN;
            roof_label(ph, (phase)p, out);
        }
    return STATUS_OK;
}
