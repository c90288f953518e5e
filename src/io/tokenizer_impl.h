/* Inside the tokenizer (tokenizer.c, tokenizer_bpe.c, tokenizer_json.c): the shared struct,
 * the string and merge tables, and the BPE merge step, which tests also call directly. */
#pragma once
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stddef.h>
#include <stdint.h>

#include "io/tokenizer.h"

/* A string -> int open-addressing table; keys are owned. */
typedef struct {
    char **keys;
    size_t *key_lens;
    int *values;
    size_t cap, count;
} tok_str_map;

void tok_str_map_init(tok_str_map *m, size_t expected);
void tok_str_map_free(tok_str_map *m);
/* Inserts key -> value; returns 0 when inserted, 1 when the key was there (value kept). */
int tok_str_map_put(tok_str_map *m, const char *key, size_t len, int value);
/* 1 and *value when the key is there, else 0. */
int tok_str_map_get(const tok_str_map *m, const char *key, size_t len, int *value);

/* (left id, right id) -> (rank, merged id): the merges of a BPE model. */
typedef struct {
    uint64_t key;   /* (left << 32 | right) + 1, 0 = empty */
    int32_t rank, merged;
} tok_merge_slot;   /* one slot per cache access: the merge loop is bound by these lookups */
typedef struct {
    tok_merge_slot *slots;
    size_t cap, count;
} tok_merge_map;

void tok_merge_map_init(tok_merge_map *m, size_t expected);
void tok_merge_map_free(tok_merge_map *m);
/* Sets the pair's rank and result. keep_first: a repeated pair keeps its first rank (GPT-2's
 * merges.txt reader) or else takes the last (Hugging Face's, which builds a hash map). */
void tok_merge_map_put(tok_merge_map *m, int32_t left, int32_t right, int32_t rank,
                       int32_t merged, int keep_first);
int tok_merge_map_get(const tok_merge_map *m, int32_t left, int32_t right, int32_t *rank,
                      int32_t *merged);

/* Scratch of bpe_merge, grown to the longest piece and kept across the pieces of one text. */
typedef struct {
    int32_t *prev, *next; /* (cap) the doubly linked list of live symbols */
    struct bpe_entry *heap; /* (3 * cap) candidate pairs, lowest (rank, position) on top */
    uint64_t *deferred;     /* (2 * cap) pairs held back until a GPT-2 round ends */
    size_t cap;
    uint64_t steps;         /* heap pushes, pops and sift moves, for the complexity test */
} bpe_work;

void bpe_work_free(bpe_work *w);

/* Byte-pair merging of the n symbol ids in place: repeatedly merges the adjacent pair with the
 * lowest rank, leftmost first (Hugging Face, tiktoken), or with rounds = 1 every occurrence of
 * it left to right before looking again (GPT-2's encoder.py), until no adjacent pair has a
 * rank. Returns the number of symbols left (written to ids[0..]). O(n log n): a heap over a
 * linked list, with entries that went stale checked when they surface. */
int bpe_merge(const tok_merge_map *m, int32_t *ids, int n, int rounds, bpe_work *w);

#define TOK_MAX_STAGES 4
/* One pre-tokenisation step: optionally prefix a space (ByteLevel add_prefix_space), then
 * split by a regex (matches and the text between them are both pieces), or not split. */
typedef struct {
    pcre2_code *re; /* NULL: no split */
    int prefix_space;
} tok_stage;

typedef enum {
    TOK_NORM_NONE = 0,
    TOK_NORM_NFC,
    TOK_NORM_NFD,
    TOK_NORM_NFKC,
    TOK_NORM_NFKD,
    TOK_NORM_PREPEND, /* text = from + text, unless the text is empty (SentencePiece's dummy
                         prefix, as Hugging Face's Prepend writes it) */
    TOK_NORM_REPLACE, /* every occurrence of from, left to right, becomes to (" " -> "▁") */
} tok_normalizer;

#define TOK_MAX_NORMS 4
/* One step of a tokenizer.json's normalizer; a Sequence runs them in order. */
typedef struct {
    tok_normalizer kind;
    char *from, *to; /* PREPEND: from; REPLACE: from -> to; NULL for the Unicode forms */
} tok_norm_step;

/* s[0..n) after every step of t's normalizer (malloc'ed, NUL-terminated, *out_len bytes); bytes
 * that are not UTF-8 are kept. tokenizer_norm.c. */
unsigned char *tok_normalize(const tokenizer *t, const unsigned char *s, size_t n, size_t *out_len);
/* s[0..n) with every occurrence of from (left to right, not overlapping) replaced by to;
 * malloc'ed, NUL-terminated, *out_len bytes. tokenizer_norm.c. */
char *tok_replace(const char *from, const char *to, const char *s, size_t n, size_t *out_len);

/* An added token: matched in the text before pre-tokenisation, and decoded as its content. */
typedef struct {
    char *content;
    int len, id;
    int lstrip, rstrip;  /* absorb the whitespace before / after a match */
    int normalized;      /* matched in the normalised text (pass 1) rather than the raw one */
    int special;
} tok_added;

/* Token ids lie below 2^24: the decode tables hold one entry per id up to the largest, so an id
 * far past any real vocabulary (the largest have about 2^18 entries) would allocate gigabytes
 * for a few tokens. */
#define TOK_MAX_IDS (1 << 24)

struct tokenizer {
    tok_str_map vocab;            /* model symbol string (UTF-8) -> id */
    tok_merge_map merges;
    char **id_bytes;              /* id -> bytes it decodes to, NULL for unused ids */
    int *id_len;
    unsigned char *id_special;    /* 1 for special added tokens */
    int n_ids;                    /* max id + 1 */
    int byte_id[256];             /* id of each byte's symbol, -1 when the vocab lacks it */
    char byte_sym[256][3];        /* UTF-8 of the symbol of each byte, NUL-terminated */
    unsigned char byte_sym_len[256];
    short sym_byte[512];          /* code point (< 512) -> byte, -1 when not a byte symbol */
    tok_stage stage[TOK_MAX_STAGES];
    int n_stages;
    int ignore_merges;            /* a piece that is itself in the vocab is one token */
    int merge_rounds;             /* GPT-2's merge order (vocab.json + merges.txt) */
    int unk_id;                   /* stands for a byte (byte-level) or a character without a
                                     symbol id, or -1 */
    tok_norm_step norm[TOK_MAX_NORMS];
    int n_norms;
    /* A vocab of characters rather than byte symbols (no ByteLevel pre-tokenizer: SentencePiece
     * BPE as Hugging Face's LlamaConverter writes it). A piece starts as its characters; one
     * not in the vocab becomes the <0xXX> tokens of its bytes (byte_fallback) or unk_id. */
    int char_level;
    int byte_fallback;
    int fuse_unk;         /* a run of unknown characters is one unk_id */
    int fallback_id[256]; /* id of "<0xXX>" for each byte, -1 when missing */
    /* The decoder of a character vocab: "<0xXX>" tokens give their byte (ByteFallback), the
     * Replace steps run on each token, and the fused text loses up to strip_left leading
     * strip_char (Strip after Fuse: the dummy prefix's space). */
    int dec_byte_fallback;
    int n_dec_replace;
    char *dec_from[TOK_MAX_NORMS], *dec_to[TOK_MAX_NORMS];
    int strip_left;
    char strip_char[5];
    tok_added *added;
    int n_added;
    tok_str_map added_prefix[2];  /* per pass: every prefix of a content -> added index, or -1 */
    unsigned char added_first[2][256]; /* per pass: bytes that begin some added token */
    int has_added[2];
    char vocab_name[32];          /* "vocab.json" or "tokenizer.json", for messages */
};

/* Fills the byte <-> symbol tables (GPT-2's bytes_to_unicode). */
void tok_byte_symbols_init(tokenizer *t);

/* Compiles a split pattern written for Oniguruma or Rust's regex (what Hugging Face and tiktoken
 * run) so that PCRE2 classes it the same way; see tokenizer.c. Returns NULL with error_message()
 * set ("what" names the key) when the pattern cannot be read the same way. */
pcre2_code *tok_pattern_compile(const char *pattern, int literal, const char *what);

/* Sets id_bytes/id_len of every vocab id once the vocab is loaded (ByteLevel decoding of its
 * symbol string, or for a character vocab the decoder's ByteFallback and Replace); n_ids must
 * already count the added tokens. Also fills byte_id and fallback_id. */
void tok_decode_table_build(tokenizer *t);

/* ---- reading a tokenizer.json (tokenizer_json.c, tokenizer_json_steps.c) ---------------- */
struct json_t;
/* A JSON value as compact text, for messages ("(absent)" for NULL). */
void tok_json_describe(const struct json_t *v, char *buf, size_t len);
/* Sets "name: key VALUE is not supported; allowed: allowed" and returns STATUS_BAD_INPUT. */
int tok_json_unsupported(const char *name, const char *key, const struct json_t *value,
                         const char *allowed);
/* The "normalizer" (null, a Unicode form, Prepend, Replace, or a Sequence of these) into
 * t->norm; a refusal names the step. */
int tok_json_normalizer_read(tokenizer *t, const struct json_t *norm, const char *name);
/* The "decoder" of a character vocab (null, Replace, ByteFallback, Fuse, Strip, or a Sequence
 * of these, Strip last and after Fuse) into t->dec_*; a refusal names the step. */
int tok_json_decoder_read(tokenizer *t, const struct json_t *dec, const char *name);

/* The GPT-2 pattern, for vocab.json + merges.txt and ByteLevel's use_regex. */
extern const char tok_gpt2_pattern[];
