/* Cuts the job's text into perplexity windows (perplexity_input.h). */
#include "io/perplexity_input.h"

#include <hdf5.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/h5util.h"

/* The checkpoint's add_bos_token and bos_token_id (/tokenizer attributes, docs/checkpoint.md):
 * 1 with *bos set when the model wants bos first, else 0 (no checkpoint, no attributes, or
 * add_bos_token = 0). */
static int checkpoint_wants_bos(const char *path, int32_t *bos) {
    if (!path[0]) return 0;
    hid_t file = h5_open_read(path);
    if (file < 0) return 0;
    long long add = 0, id = -1;
    if (h5_exists(file, "/tokenizer")) {
        hid_t g = H5Gopen2(file, "/tokenizer", H5P_DEFAULT);
        if (g >= 0) {
            if (h5_attr_exists(g, "add_bos_token")) h5_attr_read_long(g, "add_bos_token", &add);
            if (h5_attr_exists(g, "bos_token_id")) h5_attr_read_long(g, "bos_token_id", &id);
            H5Gclose(g);
        }
    }
    H5Fclose(file);
    *bos = (int32_t)id;
    return add != 0 && id >= 0;
}

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
    int32_t bos = -1;
    const int add_bos = checkpoint_wants_bos(j->checkpoint, &bos);
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
