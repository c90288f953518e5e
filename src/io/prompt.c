/* Tokenizer glue for the runner (see prompt.h). */
#include "io/prompt.h"

#include <stdlib.h>
#include <string.h>

#include "base/check.h"

int prompt_tokenize(job *j, tokenizer **tok) {
    *tok = NULL;
    if (!j->checkpoint[0]) {
        if (!j->text) return STATUS_OK;
        error_set("%s:%d: input.text needs a tokenizer, which comes with a checkpoint imported "
                  "by tripar import-hf from a directory holding vocab.json and merges.txt "
                  "(set model.checkpoint)",
                  j->source, job_key_line(j, "input.text"));
        return STATUS_BAD_INPUT;
    }
    int rc = tokenizer_load_checkpoint(tok, j->checkpoint);
    if (rc == 1) {
        if (!j->text) return STATUS_OK; /* token input, no tokenizer: no text output */
        error_set("%s: the checkpoint has no tokenizer (import it from a directory holding "
                  "vocab.json and merges.txt), so input.text cannot be used",
                  j->checkpoint);
        return STATUS_BAD_INPUT;
    }
    if (rc != 0) return STATUS_BAD_INPUT;
    if (tokenizer_max_id(*tok) >= j->vocab) {
        error_set("%s: the tokenizer's largest id %d does not fit the model's vocab of %d",
                  j->checkpoint, tokenizer_max_id(*tok), j->vocab);
        return STATUS_BAD_INPUT;
    }
    if (!j->text) return STATUS_OK;
    int32_t *ids = NULL;
    int n = 0;
    if (tokenizer_encode(*tok, j->text, strlen(j->text), &ids, &n) != 0 || n == 0) {
        free(ids);
        error_set("%s:%d: input.text encodes to no tokens", j->source,
                  job_key_line(j, "input.text"));
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
        texts[r] = tokenizer_decode(tok, ids + r * cols, (int)cols, &len);
    }
}
