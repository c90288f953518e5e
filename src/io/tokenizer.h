/* BPE tokenizers: GPT-2's vocab.json + merges.txt, and Hugging Face tokenizer.json files,
 * byte-level (GPT-2, Llama 3, Qwen2, Mistral-Nemo: split regexes run through PCRE2, byte-level
 * decoding) or SentencePiece BPE over characters with byte fallback (Llama 2, TinyLlama,
 * Mistral v0.1, and what import-gguf writes for tokenizer.ggml.model = llama): added tokens,
 * normalizers, merges by rank. See docs/tokenizer.md. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tokenizer tokenizer;

/* Builds a tokenizer from the texts of vocab.json and merges.txt (GPT-2's pattern, no added
 * tokens). Returns 0, or STATUS_BAD_INPUT with error_message() saying what is wrong (and the
 * merges line). */
int tokenizer_load_strings(tokenizer **t, const char *vocab_json, const char *merges_txt);

/* Builds a tokenizer from the text of a Hugging Face tokenizer.json whose model is BPE
 * (byte-level, or over characters with byte fallback). name prefixes error messages (the
 * file's path). Returns 0, or STATUS_BAD_INPUT naming the key and value that is not supported
 * (another model type, normalizer, pre-tokenizer...). */
int tokenizer_load_json(tokenizer **t, const char *tokenizer_json, const char *name);

/* Reads path: a tokenizer.json, or a vocab.json with its merges.txt in the same directory (told
 * apart by content: a tokenizer.json has a "model" object), or a directory holding either
 * (tokenizer.json first). Errors name the path. */
int tokenizer_load_file(tokenizer **t, const char *path);

/* Encodes len bytes of text (UTF-8; invalid sequences are kept as raw bytes so decode still
 * gives them back) into *ids (malloc'ed, caller frees), *n of them. Added tokens are matched
 * first, as Hugging Face does. Returns 0, or STATUS_BAD_INPUT when a byte symbol is missing
 * from the vocab. */
int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int32_t **ids, int *n);

/* Decodes ids into a malloc'ed, NUL-terminated byte string of *len bytes (which may contain
 * NULs if the ids encode them); added tokens give their text, special ones included. NULL
 * with error_message() set on an unknown id. */
char *tokenizer_decode(const tokenizer *t, const int32_t *ids, int n, size_t *len);

/* Flags of tokenizer_decode_text. */
enum {
    TOKENIZER_SKIP_SPECIAL = 1, /* leave out special added tokens (skip_special_tokens) */
    TOKENIZER_SKIP_UNKNOWN = 2, /* leave out ids the tokenizer lacks, as Hugging Face's decode
                                   does, rather than fail: a model's vocab may be padded past
                                   its tokenizer (Qwen2), and a synthetic one is any size */
};

/* tokenizer_decode with flags (TOKENIZER_SKIP_*). */
char *tokenizer_decode_text(const tokenizer *t, const int32_t *ids, int n, unsigned flags,
                            size_t *len);

/* 1 when id is an added token marked "special" (<|eot_id|>, <|endoftext|> ...), else 0. */
int tokenizer_is_special(const tokenizer *t, int32_t id);

/* Largest token id in the vocab or the added tokens (the model's vocab must exceed it). */
int tokenizer_max_id(const tokenizer *t);

void tokenizer_free(tokenizer *t);

#ifdef __cplusplus
}
#endif
