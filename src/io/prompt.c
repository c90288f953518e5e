/* Tokenizer glue for the runner (see prompt.h). */
#include "io/prompt.h"

#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/chat.h"
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

int prompt_meta_read(const job *j, tokenizer_meta *meta) {
    meta->bos_id = meta->eos_id = -1;
    meta->add_bos = -1;
    meta->chat_template = NULL;
    if (j->tokenizer[0] || !j->checkpoint[0]) return STATUS_OK;
    return checkpoint_read_tokenizer_meta(j->checkpoint, meta) == 0 ? STATUS_OK
                                                                   : STATUS_BAD_INPUT;
}

/* generate.stop_at_eos: auto is on exactly when there is an eos id (generate.eos_id, else the
 * checkpoint's eos_token_id); true without one is refused. Sets j->eos_id. */
static int prompt_eos_resolve(job *j, long long eos_id) {
    char where[256];
    if (j->eos_id_given >= 0) {
        if (j->eos_id_given >= j->vocab) {
            error_set("%s: generate.eos_id: %d is not a token id of the model's vocab of %d",
                      job_key_origin(j, "generate.eos_id", where, sizeof where), j->eos_id_given,
                      j->vocab);
            return STATUS_BAD_INPUT;
        }
        eos_id = j->eos_id_given;
    }
    if (j->stop_at_eos == 1 && eos_id < 0) {
        error_set("%s: generate.stop_at_eos: true, but %s has no eos token id (a checkpoint "
                  "written by import-gguf keeps tokenizer.ggml.eos_token_id; model.tokenizer "
                  "gives none); give generate.eos_id, or stop_at_eos auto or false",
                  job_key_origin(j, "generate.stop_at_eos", where, sizeof where),
                  j->tokenizer[0] ? "model.tokenizer"
                  : j->checkpoint[0] ? j->checkpoint
                                     : "a synthetic model");
        return STATUS_BAD_INPUT;
    }
    j->eos_id = j->stop_at_eos != 0 && eos_id >= 0 && eos_id < j->vocab ? (int32_t)eos_id : -1;
    return STATUS_OK;
}

/* The text to encode: input.text itself, or with input.chat one user turn of the checkpoint's
 * chat template (malloc'ed into *owned). NULL with error_message() set on a refusal. */
static const char *prompt_text(const job *j, const tokenizer *tok, const tokenizer_meta *meta,
                               char **owned) {
    *owned = NULL;
    if (!j->chat) return j->text;
    char where[256];
    job_key_origin(j, "input.chat", where, sizeof where);
    if (!meta->chat_template) {
        error_set("%s: input.chat: %s has no chat template (import-gguf keeps "
                  "tokenizer.chat_template; an import-hf checkpoint, model.tokenizer and a "
                  "synthetic model have none); give the prompt already formatted in input.text",
                  where, j->tokenizer[0] ? "model.tokenizer" : j->checkpoint);
        return NULL;
    }
    char *bos = NULL;
    if (meta->bos_id >= 0) {
        int32_t id = (int32_t)meta->bos_id;
        size_t len;
        bos = tokenizer_decode_text(tok, &id, 1, TOKENIZER_SKIP_UNKNOWN, &len);
    }
    chat_family family;
    int rc = chat_render(meta->chat_template, bos && bos[0] ? bos : NULL, j->text, where,
                         &family, owned);
    free(bos);
    return rc == STATUS_OK ? *owned : NULL;
}

int prompt_tokenize(job *j, tokenizer **tok) {
    *tok = NULL;
    j->eos_id = -1;
    int rc = prompt_tokenizer_load(j, tok);
    if (rc == 1) {
        char where[256];
        if (j->chat) {
            error_set("%s: input.chat: %s has no tokenizer, so no chat template",
                      job_key_origin(j, "input.chat", where, sizeof where),
                      j->checkpoint[0] ? j->checkpoint : "a synthetic model without "
                                                         "model.tokenizer");
            return STATUS_BAD_INPUT;
        }
        if (prompt_eos_resolve(j, -1) != STATUS_OK) return STATUS_BAD_INPUT;
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
    tokenizer_meta meta;
    if (prompt_meta_read(j, &meta) != STATUS_OK) return STATUS_BAD_INPUT;
    char *rendered = NULL;
    const char *text = j->text ? prompt_text(j, *tok, &meta, &rendered) : NULL;
    rc = prompt_eos_resolve(j, meta.eos_id);
    if (rc != STATUS_OK || (j->text && !text)) {
        tokenizer_meta_free(&meta);
        return STATUS_BAD_INPUT;
    }
    if (!j->text) {
        tokenizer_meta_free(&meta);
        return STATUS_OK;
    }
    /* The bos the model asks for (add_bos_token), unless the text came through the chat
     * template, which writes bos_token itself where the model wants it (Hugging Face's
     * apply_chat_template encodes without special tokens too). */
    const int bos = !j->chat && meta.add_bos == 1 && meta.bos_id >= 0 && meta.bos_id < j->vocab;
    int32_t *ids = NULL;
    int n = 0;
    rc = tokenizer_encode(*tok, text, strlen(text), &ids, &n);
    free(rendered);
    if (rc != STATUS_OK || n == 0) {
        /* at the key that gave the text: its file:line, or the --set / --sweep itself */
        const char *key = j->text_file[0] ? "input.text_file" : "input.text";
        char where[256], why[512];
        snprintf(why, sizeof why, "%s", rc != STATUS_OK ? error_message() : "");
        free(ids);
        tokenizer_meta_free(&meta);
        if (why[0])
            error_set("%s: %s cannot be tokenized: %s", job_key_origin(j, key, where, sizeof where),
                      key, why);
        else
            error_set("%s: %s encodes to no tokens", job_key_origin(j, key, where, sizeof where),
                      key);
        return STATUS_BAD_INPUT;
    }
    if (bos) {
        int32_t *with = xmalloc((size_t)(n + 1) * sizeof *with);
        with[0] = (int32_t)meta.bos_id;
        memcpy(with + 1, ids, (size_t)n * sizeof *ids);
        free(ids);
        ids = with;
        n++;
    }
    tokenizer_meta_free(&meta);
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

char *prompt_decode_generated(const tokenizer *tok, const int32_t *ids, int n, int32_t eos_id) {
    if (n > 0 && eos_id >= 0 && ids[n - 1] == eos_id) n--; /* the stop, not part of the answer */
    size_t len = 0;
    return tokenizer_decode_text(tok, ids, n, TOKENIZER_SKIP_UNKNOWN, &len);
}
