/* Model shapes by name (model.synthetic.preset): the real shapes of published models, for
 * strategy studies with synthetic weights. A preset fills the job's defaults; every key
 * given beside it overrides. */
#pragma once
#include "job/job.h"

/* Fills j's model shape from the named preset; returns 0, or -1 for an unknown name. */
int job_preset_apply(job *j, const char *name);
/* "gpt2-124m, gpt2-1.5b, ..." for messages. */
const char *job_preset_list(void);
