/* Text in, text out: tokenizes input.text with model.tokenizer or the checkpoint's tokenizer and
 * decodes the generated rows back to text for the run file. A model without either (a synthetic
 * one) reads text as bytes: token id = byte value. */
#pragma once
#include "job/job.h"
#include "io/checkpoint.h"
#include "io/tokenizer.h"

/* When the job gives text, sets j->tokens as one prompt: through model.tokenizer or the
 * checkpoint's tokenizer, or one id per UTF-8 byte for a synthetic model without model.tokenizer
 * (which needs vocab >= 256). With input.chat the text is first rendered as one user turn of the
 * checkpoint's chat template (io/chat.h); without it, the checkpoint's bos id goes first when its
 * add_bos_token is 1 (no attribute: nothing is added). Resolves generate.stop_at_eos into
 * j->eos_id (the checkpoint's eos_token_id, or -1). Returns STATUS_OK (tok set when there is a
 * tokenizer, else NULL) or STATUS_BAD_INPUT with error_message() set at the input key. */
int prompt_tokenize(job *j, tokenizer **tok);

/* What the model asks of its text (bos, eos, add_bos_token, chat template): the checkpoint's
 * /tokenizer attributes when its own tokenizer runs; model.tokenizer is another vocabulary,
 * whose ids these may not name, so with it (or without a checkpoint) there are none: ids -1,
 * add_bos -1. STATUS_OK, or STATUS_BAD_INPUT with error_message() set; free with
 * tokenizer_meta_free. */
int prompt_meta_read(const job *j, tokenizer_meta *meta);

/* Decodes rows (rows, cols) of token ids into malloc'ed strings (texts[rows]); ids the
 * tokenizer lacks (a vocab padded past it) are left out. */
/* The text of n generated ids (malloc'ed): a last id equal to eos_id (the stop) is left out, and
 * ids the tokenizer lacks. */
char *prompt_decode_generated(const tokenizer *tok, const int32_t *ids, int n, int32_t eos_id);

void prompt_decode_rows(const tokenizer *tok, const int32_t *ids, long rows, long cols,
                        char **texts);
