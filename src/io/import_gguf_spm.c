/* SentencePiece BPE from a GGUF file (tokenizer.ggml.model = "llama": Llama 2, TinyLlama,
 * Mistral v0.1) as the Hugging Face tokenizer.json that transformers' LlamaConverter writes for
 * the same model, which tokenizer_json.c reads: a BPE over characters with byte fallback, whose
 * merges come from the scores. SentencePiece merges, among adjacent symbols, the pair whose
 * concatenation is a piece with the highest score, leftmost first; a BPE whose merges are every
 * split (left, right) of every piece into two pieces, ranked by the piece's score, merges the
 * same pairs in the same order. See docs/tokenizer.md. */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/import_gguf_internal.h"

/* Longest piece whose splits are looked up: each costs O(length^2) bytes hashed, and
 * SentencePiece's trainer makes pieces of at most 16 characters (max_sentencepiece_length). */
#define SPM_MAX_PIECE 1024

typedef struct {
    float score;
    int32_t piece, left, right;
} spm_merge;

/* Highest score first; among equal scores the order HF's converter gives (piece id, then the
 * ids of the two halves), so the ranks are one total order. */
static int spm_merge_cmp(const void *pa, const void *pb) {
    const spm_merge *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    if (a->piece != b->piece) return a->piece < b->piece ? -1 : 1;
    if (a->left != b->left) return a->left < b->left ? -1 : 1;
    return (a->right > b->right) - (a->right < b->right);
}

/* The id vocab_obj gives s[0..len) (the last of equal tokens, as a JSON object keeps it), or
 * -1. */
static int32_t vocab_id(json_t *vocab_obj, const char *s, size_t len) {
    json_t *v = json_object_getn(vocab_obj, s, len);
    return v ? (int32_t)json_integer_value(v) : -1;
}

/* The merges, ranked, as ["left", "right"] pairs; NULL with the refusal set. Merge results are
 * the pieces SentencePiece merges into: normal and unused tokens (user-defined ones are matched
 * whole before the merges; unknown, control and byte tokens never come from a merge). */
static json_t *spm_merges(const gguf *g, const gguf_kv *tokens, const gguf_kv *types,
                          const gguf_kv *scores, json_t *vocab_obj) {
    size_t n = 0, cap = 1024;
    spm_merge *list = xmalloc(cap * sizeof *list);
    for (uint64_t i = 0; i < tokens->n; i++) {
        const int64_t type = types ? gguf_kv_int(types, i, NULL) : GGUF_TOKEN_NORMAL;
        if (type != GGUF_TOKEN_NORMAL && type != GGUF_TOKEN_UNUSED) continue;
        const double score = gguf_kv_float(scores, i);
        uint64_t len = 0;
        const char *s = gguf_kv_str(tokens, i, &len);
        const char *bad = !isfinite(score)      ? "its score is not finite"
                          : len > SPM_MAX_PIECE ? "it is longer than 1024 bytes"
                                                : NULL;
        if (bad) {
            error_set("%s: key 'tokenizer.ggml.tokens' element %llu: %s", g->path,
                      (unsigned long long)i, bad);
            free(list);
            return NULL;
        }
        for (uint64_t k = 1; k < len; k++) {
            if (((unsigned char)s[k] & 0xC0) == 0x80) continue; /* split between characters */
            const int32_t left = vocab_id(vocab_obj, s, k),
                          right = vocab_id(vocab_obj, s + k, len - k);
            if (left < 0 || right < 0) continue;
            if (n == cap) {
                spm_merge *grown = realloc(list, (cap *= 2) * sizeof *list);
                CHECK(grown, "out of memory for %zu merges", cap);
                list = grown;
            }
            list[n++] = (spm_merge){(float)score, (int32_t)i, left, right};
        }
    }
    qsort(list, n, sizeof *list, spm_merge_cmp);
    json_t *merges = json_array();
    for (size_t m = 0; m < n; m++) {
        uint64_t llen = 0, rlen = 0;
        const char *l = gguf_kv_str(tokens, (uint64_t)list[m].left, &llen);
        const char *r = gguf_kv_str(tokens, (uint64_t)list[m].right, &rlen);
        json_array_append_new(merges, json_pack("[s%, s%]", l, (size_t)llen, r, (size_t)rlen));
    }
    free(list);
    return merges;
}

json_t *gguf_spm_json(const gguf *g, const gguf_kv *tokens, const gguf_kv *types, json_t *vocab_obj,
                      json_t *added) {
    const gguf_kv *scores = NULL;
    int64_t unk = -1;
    int prefix = 1; /* SentencePiece's add_dummy_prefix, llama.cpp's default */
    json_t *merges = NULL;
    if (gguf_get_array(g, "tokenizer.ggml.scores", GGUF_TYPE_FLOAT32, &scores) != STATUS_OK) {
        scores = NULL;
    } else if (scores->n != tokens->n) {
        error_set("%s: key 'tokenizer.ggml.scores' holds %llu scores for %llu tokens", g->path,
                  (unsigned long long)scores->n, (unsigned long long)tokens->n);
        scores = NULL;
    }
    if (scores && gguf_kv_find(g, "tokenizer.ggml.unknown_token_id") &&
        gguf_get_int(g, "tokenizer.ggml.unknown_token_id", 0, (int64_t)tokens->n - 1, &unk))
        scores = NULL;
    if (scores && gguf_kv_find(g, "tokenizer.ggml.add_space_prefix") &&
        gguf_get_bool(g, "tokenizer.ggml.add_space_prefix", &prefix))
        scores = NULL;
    if (scores) merges = spm_merges(g, tokens, types, scores, vocab_obj);
    if (!merges) {
        json_decref(vocab_obj);
        json_decref(added);
        return NULL;
    }
    for (uint64_t i = 0; unk < 0 && types && i < tokens->n; i++) /* else the unknown-type one */
        if (gguf_kv_int(types, i, NULL) == GGUF_TOKEN_UNKNOWN) unk = (int64_t)i;
    uint64_t unk_len = 0;
    const char *unk_text = unk >= 0 ? gguf_kv_str(tokens, (uint64_t)unk, &unk_len) : NULL;
    json_t *unk_token = unk_text ? json_stringn(unk_text, (size_t)unk_len) : json_null();

    /* The text becomes "▁" + text with every space a "▁" (the dummy prefix only where
     * add_space_prefix); decoding turns "▁" back into spaces, bytes <0xXX> into bytes, and
     * drops the dummy prefix's space from the front. */
    json_t *norm = json_array(), *dec = json_array();
    if (prefix)
        json_array_append_new(norm,
                              json_pack("{s:s, s:s}", "type", "Prepend", "prepend", "\u2581"));
    json_array_append_new(norm, json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern",
                                          "String", " ", "content", "\u2581"));
    json_array_append_new(dec, json_pack("{s:s, s:{s:s}, s:s}", "type", "Replace", "pattern",
                                         "String", "\u2581", "content", " "));
    json_array_append_new(dec, json_pack("{s:s}", "type", "ByteFallback"));
    json_array_append_new(dec, json_pack("{s:s}", "type", "Fuse"));
    if (prefix)
        json_array_append_new(dec, json_pack("{s:s, s:s, s:i, s:i}", "type", "Strip", "content",
                                             " ", "start", 1, "stop", 0));
    json_t *root = json_pack(
        "{s:s, s:o, s:{s:s, s:o}, s:n, s:n, s:{s:s, s:o}, s:{s:s, s:n, s:o, s:n, s:n, s:b, "
        "s:b, s:b, s:o, s:o}}",
        "version", "1.0", "added_tokens", added, "normalizer", "type", "Sequence", "normalizers",
        norm, "pre_tokenizer", "post_processor", "decoder", "type", "Sequence", "decoders", dec,
        "model", "type", "BPE", "dropout", "unk_token", unk_token, "continuing_subword_prefix",
        "end_of_word_suffix", "fuse_unk", 1, "byte_fallback", 1, "ignore_merges", 0, "vocab",
        vocab_obj, "merges", merges);
    CHECK(root, "cannot build the tokenizer JSON");
    return root;
}
