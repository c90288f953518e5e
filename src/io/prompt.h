/* Text in, text out: tokenizes input.text with the checkpoint's GPT-2 tokenizer and decodes
 * the generated rows back to text for the run file. */
#pragma once
#include "job/job.h"
#include "io/tokenizer.h"

/* When the job gives text, loads the checkpoint's tokenizer and sets j->tokens as one prompt.
 * Returns STATUS_OK (tok set, or NULL when the job gives tokens) or STATUS_BAD_INPUT. */
int prompt_tokenize(job *j, tokenizer **tok);

/* Decodes rows (rows, cols) of token ids into malloc'ed strings (texts[rows]). */
void prompt_decode_rows(const tokenizer *tok, const int32_t *ids, long rows, long cols,
                        char **texts);
