/* The hook between the schedule and the stage forward, where CUDA-graph replay of decode
 * steps slots in (backend.cuda_graphs). On the CPU it is a plain call. */
#include "engine.h"

void engine_step_forward(engine *e, float *x, int mb, int step, int n_new, int pos0) {
    engine_stage_forward(e, x, mb, step, n_new, pos0);
}
