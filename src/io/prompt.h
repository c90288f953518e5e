/* Text in, text out: tokenizes input.text with model.tokenizer or the checkpoint's tokenizer and
 * decodes the generated rows back to text for the run file. A model without either (a synthetic
 * one) reads text as bytes: token id = byte value. */
#pragma once
#include "job/job.h"
#include "io/tokenizer.h"

/* When the job gives text, sets j->tokens as one prompt: through model.tokenizer or the
 * checkpoint's tokenizer, or one id per UTF-8 byte for a synthetic model without model.tokenizer
 * (which needs vocab >= 256). With input.chat the text is first rendered as one user turn of the
 * checkpoint's chat template (io/chat.h); without it, the checkpoint's bos id goes first when its
 * add_bos_token is 1 (no attribute: nothing is added). Resolves generate.stop_at_eos into
 * j->eos_id (the checkpoint's eos_token_id, or -1). Returns STATUS_OK (tok set when there is a
 * tokenizer, else NULL) or STATUS_BAD_INPUT with error_message() set at the input key. */
int prompt_tokenize(job *j, tokenizer **tok);

/* Decodes rows (rows, cols) of token ids into malloc'ed strings (texts[rows]); ids the
 * tokenizer lacks (a vocab padded past it) are left out. */
/* The text of n generated ids (malloc'ed): a last id equal to eos_id (the stop) is left out, and
 * ids the tokenizer lacks. */
char *prompt_decode_generated(const tokenizer *tok, const int32_t *ids, int n, int32_t eos_id);

void prompt_decode_rows(const tokenizer *tok, const int32_t *ids, long rows, long cols,
                        char **texts);
