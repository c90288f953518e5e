/* The planner's model and workload: from a loaded job (its checkpoint's shape when it names
 * one) or from a preset, as `tripar run` would build them. */
#include <string.h>

#include "base/check.h"
#include "base/path.h"
#include "io/checkpoint.h"
#include "job/job_tree.h"
#include "job/presets.h"
#include "analysis/plan.h"

int plan_model_from_job(const job *j, plan_model *m, plan_workload *w) {
    memset(m, 0, sizeof *m);
    int rc = STATUS_OK;
    char why[PATH_WHY_MAX];
    checkpoint_storage stored = {.precision = PRECISION_FP32};
    if (j->checkpoint[0] && path_check_input(j->checkpoint, why, sizeof why) != 0) {
        /* a FIFO would block the reader: refused before it is opened, as `run` refuses it */
        error_set("model.checkpoint '%s' %s", j->checkpoint, why);
        rc = STATUS_BAD_INPUT;
    } else if (j->checkpoint[0])
        rc = checkpoint_read_stored(j->checkpoint, &m->cfg, &stored);
    else
        model_config_from_job(&m->cfg, j);
    /* a bf16 or int8w checkpoint gives the precision a job leaves out, as `run` takes it */
    m->weight_dtype = j->checkpoint[0] && rc == STATUS_OK && !job_key_given(j, "model.precision")
                          ? stored.precision
                          : j->precision;
    m->kv_cache = j->kv_cache, m->kv_block = j->kv_block;
    m->kv_dtype_auto = j->kv_dtype_auto;
    m->kv_dtype = j->kv_dtype_auto ? kv_dtype_for(m->weight_dtype) : j->kv_dtype;
    /* tripar's comm backends: MPI on the CPU backend or when asked for, else NCCL */
    m->collectives =
        j->backend == BACKEND_CPU || j->comm == COMM_MPI ? PLAN_COLL_MPI : PLAN_COLL_NCCL;
    m->chunks = j->chunks;
    m->cuda_graphs = j->cuda_graphs;
    w->batch = j->batch > 0 ? j->batch : 1;
    w->prompt = j->prompt_len > 0 ? j->prompt_len : 128;
    w->new_tokens = j->new_tokens;
    return rc;
}

int plan_model_from_preset(const char *preset, plan_model *m, plan_workload *w) {
    memset(m, 0, sizeof *m);
    w->batch = 1, w->prompt = 128, w->new_tokens = 32;
    m->kv_cache = KV_CONTIGUOUS, m->kv_block = 16, m->chunks = 2; /* job.c's default */
    m->kv_dtype_auto = 1; /* model.kv_dtype: auto, resolved with the precision */
    job j;
    memset(&j, 0, sizeof j);
    if (job_preset_apply(&j, preset) != 0) {
        error_set("--preset %s is not a preset; presets: %s", preset, job_preset_list());
        return STATUS_BAD_INPUT;
    }
    j.norm = NORM_PRE;
    model_config_from_job(&m->cfg, &j);
    m->weight_dtype = PRECISION_FP32;
    return STATUS_OK;
}

int plan_job_load(job *j, const char *path, int *no_input) {
    *no_input = 0;
    jtree t;
    memset(&t, 0, sizeof t);
    /* a file that does not parse is left to job_load, which says where */
    if (jtree_load_file(&t, path) == STATUS_OK && t.root && t.root->type == JNODE_MAP)
        *no_input = !jnode_get(t.root, "input", NULL);
    jtree_free(&t);
    error_clear();
    /* one prompt of one token: the smallest input every model validates with; the caller
     * replaces the workload */
    static const char *const one_token[] = {"input.synthetic.length=1"};
    return job_load(j, path, *no_input ? one_token : NULL, *no_input ? 1 : 0);
}
