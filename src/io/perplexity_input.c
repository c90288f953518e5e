/* Cuts the job's text into perplexity windows (perplexity_input.h). */
#include "io/perplexity_input.h"

#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/prompt.h"

int perplexity_windows(job *j) {
    if (j->perplexity_window <= 0) return STATUS_OK;
    char where[256];
    const int W = j->perplexity_window;
    if (W > j->ctx) {
        error_set("%s: perplexity.window = %d is more than model.ctx = %d; allowed: 3 to %d",
                  job_key_origin(j, "perplexity.window", where, sizeof where), W, j->ctx, j->ctx);
        return STATUS_BAD_INPUT;
    }
    /* the whole text, bos first when the model asks for it: as llama-perplexity tokenizes it
     * (a prompt that already starts with bos keeps its one) */
    tokenizer_meta meta;
    if (prompt_meta_read(j, &meta) != STATUS_OK) return STATUS_BAD_INPUT;
    const int add_bos = meta.add_bos == 1 && meta.bos_id >= 0;
    const int32_t bos = (int32_t)meta.bos_id;
    tokenizer_meta_free(&meta);
    const long n_text = j->batch == 1 ? j->prompt_len : 0;
    const int prepend = add_bos && (n_text == 0 || j->tokens[0] != bos);
    const long n = n_text + prepend;
    if (n < 2L * W) {
        const char *key = j->text_file[0] ? "input.text_file" : "input.text";
        error_set("%s: %s is %ld tokens%s; perplexity.window = %d needs at least 2 x %d = %d "
                  "(llama-perplexity's rule); give a longer text or a smaller window",
                  job_key_origin(j, key, where, sizeof where), key, n,
                  prepend ? " with bos" : "", W, W, 2 * W);
        return STATUS_BAD_INPUT;
    }
    int chunks = (int)(n / W);
    if (j->perplexity_chunks > 0 && j->perplexity_chunks < chunks) chunks = j->perplexity_chunks;
    int32_t *windows = xmalloc((size_t)chunks * W * sizeof *windows);
    for (long i = 0; i < (long)chunks * W; i++) /* token i of the text with bos first */
        windows[i] = prepend ? (i == 0 ? bos : j->tokens[i - 1]) : j->tokens[i];
    for (int c = 0; add_bos && c < chunks; c++)
        windows[(size_t)c * W] = bos;
    free(j->tokens);
    j->tokens = windows;
    j->batch = chunks;
    j->prompt_len = W;
    return STATUS_OK;
}
