/* /moe in the run file: the rows a mixture of experts' router sent to each expert in every step
 * and layer of the last generation, one block per dp replica and pipeline stage (the engine's
 * record, engine/moe.h). Layout: docs/schema.md "/moe". */
#include <hdf5.h>

#include "io/h5util.h"
#include "io/runfile.h"
#include "io/runfile_internal.h"

void runfile_write_expert_load(runfile *rf, const runfile_expert_load *l) {
    if (!rf || runfile_failed(rf) || runfile_hdf5(rf) < 0 || l->experts <= 0) return;
    const long dims[4] = {l->replicas, l->steps, l->layers, l->experts};
    const long start[4] = {l->replica, 0, l->layer_begin, 0};
    /* every TP rank routes alike (the replicated router): one of them writes */
    const int mine = l->writer && l->load && l->n_layers > 0;
    const long count[4] = {mine, mine ? l->steps : 0, mine ? l->n_layers : 0,
                           mine ? l->experts : 0};
    runfile_write_block(rf, "moe/expert_load", H5T_STD_I32LE, H5T_NATIVE_INT32, 4, 4, dims, start,
                        count, mine ? l->load : NULL);
    if (runfile_failed(rf)) return;
    hid_t g = h5_group_open_or_create(runfile_hdf5(rf), "moe");
    h5_attr_write_int(g, "experts", l->experts);
    h5_attr_write_int(g, "top_k", l->top_k);
    h5_attr_write_int(g, "shared_expert", l->shared);
    h5_attr_write_int(g, "ep", l->ep);
    h5_attr_write_int(g, "iteration", l->iteration);
    h5_attr_write_int(g, "steps_run", l->steps_run);
    H5Gclose(g);
}
