/* The GPT-2 byte-level BPE tokenizer: PCRE2 pre-tokenisation with GPT-2's pattern, the
 * bytes_to_unicode symbol map, merges by rank, and vocab.json ids. See docs/tokenizer.md. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tokenizer tokenizer;

/* Builds a tokenizer from the texts of vocab.json and merges.txt. Returns 0, or
 * STATUS_BAD_INPUT with error_message() saying what is wrong (and the merges line). */
int tokenizer_load_strings(tokenizer **t, const char *vocab_json, const char *merges_txt);

/* Encodes len bytes of text (UTF-8; invalid sequences are kept as raw bytes so decode still
 * gives them back) into *ids (malloc'ed, caller frees), *n of them. Returns 0, or
 * STATUS_BAD_INPUT when a byte symbol is missing from the vocab. */
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int32_t **ids, int *n);

/* Decodes ids into a malloc'ed, NUL-terminated byte string of *len bytes (which may contain
 * NULs if the ids encode them). NULL with error_message() set on an unknown id. */
char *tokenizer_decode(const tokenizer *t, const int32_t *ids, int n, size_t *len);

/* Largest token id in the vocab (the model's vocab must exceed it). */
int tokenizer_max_id(const tokenizer *t);

void tokenizer_free(tokenizer *t);

#ifdef __cplusplus
}
#endif
