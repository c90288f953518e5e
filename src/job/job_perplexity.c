/* The perplexity section of a job: score one text, cut into windows as llama-perplexity cuts
 * it, instead of generating (docs/jobs.md). The window against the model's ctx and the text's
 * length in tokens are checked once the text is tokenized (io/perplexity_input.c). */
#include <string.h>

#include "base/check.h"
#include "job/job.h"
#include "job/job_internal.h"
#include "job/job_tree.h"

/* llama-perplexity's default context (-c 512). */
#define PERPLEXITY_DEFAULT_WINDOW 512

int job_walk_perplexity(job_loader *L, const jnode *m, const jnode *m_key) {
    job *j = L->j;
    j->perplexity_window = 0, j->perplexity_chunks = 0;
    if (!m) return STATUS_OK; /* no section: the run generates */
    TRY(job_section_check(m, m_key, "perplexity", JOB_PERPLEXITY_KEYS));
    j->perplexity_window = PERPLEXITY_DEFAULT_WINDOW;
    /* 3 at least: half the window is context and the last position has no next token, so a
     * window of 2 would score nothing */
    TRY(job_get_int(L, m, "perplexity", "window", 3, CAP_DIM, &j->perplexity_window));
    TRY(job_get_int(L, m, "perplexity", "chunks", 0, CAP_DIM, &j->perplexity_chunks));
    if (!j->text)
        return job_fail_at(j, KEYS("input.tokens", "input.tokens_file", "input.synthetic", "input"),
                           "perplexity scores one text; give input.text or input.text_file "
                           "(the text is tokenized once and cut into windows), not %s",
                           j->synthetic_input ? "input.synthetic"
                           : j->tokens_file[0] ? "input.tokens_file"
                                               : "input.tokens");
    /* the windows are scored, not continued: new_tokens defaults to 0 and may only be 0 */
    if (job_key_find(j, "generate.new_tokens") && j->new_tokens != 0)
        return job_fail_at(j, KEYS("generate.new_tokens"),
                           "generate.new_tokens = %d with perplexity; allowed: 0 (perplexity "
                           "scores the text's own tokens and generates none)",
                           j->new_tokens);
    j->new_tokens = 0;
    if (j->arrival_rate > 0)
        return job_fail_at(j, KEYS("bench.arrival_rate"),
                           "bench.arrival_rate with perplexity; allowed: 0 (every window of the "
                           "text is scored in one batch)");
    return STATUS_OK;
}
