/* Tokenizer glue for the runner (see prompt.h). */
#include "io/prompt.h"

#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/checkpoint.h"

/* Text for a model without a tokenizer (a synthetic one): UTF-8 byte b becomes token id b. The
 * weights are a hash, so no mapping of text to ids means more than another; this one is
 * deterministic, needs no vocabulary files, and gives a prompt one token per byte of its text.
 * A real checkpoint without a tokenizer is refused instead (prompt_tokenize): there the ids
 * would be read as words of its vocabulary, and the run would silently be on nonsense. */
static int prompt_bytes_to_ids(job *j) {
    const char *key = j->text_file[0] ? "input.text_file" : "input.text";
    char where[256];
    if (j->vocab < 256) {
        error_set("%s: %s: a model without a tokenizer reads text as bytes (token id = byte "
                  "value), which needs model.synthetic.vocab >= 256, but it is %d",
                  job_key_origin(j, key, where, sizeof where), key, j->vocab);
        return STATUS_BAD_INPUT;
    }
    size_t n = strlen(j->text); /* job_load refuses empty text and caps it at 64 MiB */
    int32_t *ids = xmalloc((n > 0 ? n : 1) * sizeof *ids);
    for (size_t i = 0; i < n; i++) ids[i] = (int32_t)(unsigned char)j->text[i];
    free(j->tokens);
    j->tokens = ids;
    j->batch = 1;
    j->prompt_len = (int)n;
    return STATUS_OK;
}

/* The run's tokenizer: model.tokenizer when the job names one (for a synthetic model too), else
 * the checkpoint's. Returns 0, 1 when there is none, or STATUS_BAD_INPUT. */
static int prompt_tokenizer_load(const job *j, tokenizer **tok) {
    if (j->tokenizer[0]) {
        if (tokenizer_load_file(tok, j->tokenizer) == STATUS_OK) return 0;
        char why[1024], where[256];
        snprintf(why, sizeof why, "%s", error_message());
        error_set("%s: model.tokenizer: %s",
                  job_key_origin(j, "model.tokenizer", where, sizeof where), why);
        return STATUS_BAD_INPUT;
    }
    return j->checkpoint[0] ? checkpoint_load_tokenizer(tok, j->checkpoint) : 1;
}

int prompt_tokenize(job *j, tokenizer **tok) {
    *tok = NULL;
    int rc = prompt_tokenizer_load(j, tok);
    if (rc == 1) {
        if (!j->text) return STATUS_OK; /* token input, no tokenizer: no text output */
        if (!j->checkpoint[0]) return prompt_bytes_to_ids(j);
        error_set("%s: the checkpoint has no tokenizer (import it from a directory holding "
                  "tokenizer.json, or vocab.json and merges.txt, or give model.tokenizer), so "
                  "input.text cannot be used",
                  j->checkpoint);
        return STATUS_BAD_INPUT;
    }
    if (rc != 0) return STATUS_BAD_INPUT;
    if (tokenizer_max_id(*tok) >= j->vocab) {
        char where[256];
        error_set("%s: the tokenizer's largest id %d does not fit the model's vocab of %d%s",
                  j->tokenizer[0] ? job_key_origin(j, "model.tokenizer", where, sizeof where)
                                  : j->checkpoint,
                  tokenizer_max_id(*tok), j->vocab,
                  j->synthetic ? " (raise model.synthetic.vocab)" : "");
        return STATUS_BAD_INPUT;
    }
    if (!j->text) return STATUS_OK;
    int32_t *ids = NULL;
    int n = 0;
    rc = tokenizer_encode(*tok, j->text, strlen(j->text), &ids, &n);
    if (rc != STATUS_OK || n == 0) {
        /* at the key that gave the text: its file:line, or the --set / --sweep itself */
        const char *key = j->text_file[0] ? "input.text_file" : "input.text";
        char where[256], why[512];
        snprintf(why, sizeof why, "%s", rc != STATUS_OK ? error_message() : "");
        free(ids);
        if (why[0])
            error_set("%s: %s cannot be tokenized: %s", job_key_origin(j, key, where, sizeof where),
                      key, why);
        else
            error_set("%s: %s encodes to no tokens", job_key_origin(j, key, where, sizeof where),
                      key);
        return STATUS_BAD_INPUT;
    }
    free(j->tokens);
    j->tokens = ids;
    j->batch = 1;
    j->prompt_len = n;
    return STATUS_OK;
}

void prompt_decode_rows(const tokenizer *tok, const int32_t *ids, long rows, long cols,
                        char **texts) {
    for (long r = 0; r < rows; r++) {
        size_t len = 0;
        texts[r] = tokenizer_decode_text(tok, ids + r * cols, (int)cols, TOKENIZER_SKIP_UNKNOWN,
                                         &len);
    }
}
