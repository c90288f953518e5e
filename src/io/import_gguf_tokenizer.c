/* The tokenizer of a GGUF file (tokenizer.ggml.*) as the text of a Hugging Face tokenizer.json,
 * which the checkpoint stores as import-hf stores one: byte-level BPE (tokenizer.ggml.model =
 * "gpt2") from the tokens and merges, with the pre-tokenizer's regexes for tokenizer.ggml.pre as
 * llama.cpp splits with them, or SentencePiece BPE ("llama", import_gguf_spm.c); control and
 * user-defined tokens as added tokens. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "base/check.h"
#include "io/import_gguf_internal.h"

#define GPT2_SPLIT "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"
#define LLAMA3_CONTRACTIONS "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"

/* tokenizer.ggml.pre -> the regexes llama.cpp splits with, in order (each splits the pieces
 * of the one before, matches and the text between them alike: Hugging Face's Split with
 * behavior Isolated), and whether a piece that is a token skips the merges (Llama 3). */
static const struct {
    const char *pre;
    int ignore_merges;
    const char *regex[4];
} gguf_pre_types[] = {
    /* llama.cpp's fourth step, [0-9][0-9][0-9] over the pieces of \p{N}+, is folded into the
     * third (tripar runs at most four steps): the same leftmost three-digit groups, and the
     * other digits of each run between them */
    {"default",
     0,
     {"[\\p{P}\\$\\+<=>\\^~\\|]+", GPT2_SPLIT, "[0-9][0-9][0-9]|(?:(?![0-9][0-9][0-9])\\p{N})+"}},
    {"gpt2", 0, {GPT2_SPLIT}},
    {"llama-bpe",
     1,
     {LLAMA3_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s"
                          "\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"qwen2",
     0,
     {LLAMA3_CONTRACTIONS "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}"
                          "\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}},
    {"smollm", 0, {"\\p{N}", GPT2_SPLIT}},
};

static json_t *gguf_pre_tokenizer(int k) {
    json_t *steps = json_array();
    for (int i = 0; i < 4 && gguf_pre_types[k].regex[i]; i++)
        json_array_append_new(steps, json_pack("{s:s, s:{s:s}, s:s, s:b}", "type", "Split",
                                               "pattern", "Regex", gguf_pre_types[k].regex[i],
                                               "behavior", "Isolated", "invert", 0));
    json_array_append_new(steps,
                          json_pack("{s:s, s:b, s:b, s:b}", "type", "ByteLevel", "add_prefix_space",
                                    0, "trim_offsets", 1, "use_regex", 0));
    return json_pack("{s:s, s:o}", "type", "Sequence", "pretokenizers", steps);
}

/* The pre-tokenizer's index in gguf_pre_types, or -1 with the refusal set. */
static int gguf_pre_find(const gguf *g) {
    const char *pre = "default"; /* llama.cpp's choice when the key is absent */
    if (gguf_kv_find(g, "tokenizer.ggml.pre") &&
        gguf_get_string(g, "tokenizer.ggml.pre", &pre) != STATUS_OK)
        return -1;
    const int n = (int)(sizeof gguf_pre_types / sizeof gguf_pre_types[0]);
    for (int k = 0; k < n; k++)
        if (strcmp(pre, gguf_pre_types[k].pre) == 0) return k;
    error_set("%s: key 'tokenizer.ggml.pre' = \"%s\" is not supported; tripar knows default, "
              "gpt2, llama-bpe, qwen2 and smollm",
              g->path, pre);
    return -1;
}

const gguf_kv *gguf_strings(const gguf *g, const char *key) {
    const gguf_kv *kv = NULL;
    return gguf_get_array(g, key, GGUF_TYPE_STRING, &kv) == STATUS_OK ? kv : NULL;
}

/* The vocab object (token -> id) and the added tokens: control tokens (3), and under
 * SentencePiece the unknown token (2) too, as special tokens matched in the raw text (llama.cpp
 * parses all three as special); user-defined ones (4) as non-special tokens matched in the
 * normalised text (SentencePiece matches them after its normalisation). -1 with the refusal
 * set when a token is not UTF-8. */
static int gguf_vocab_read(const gguf *g, const gguf_kv *tokens, const gguf_kv *types, int spm,
                           json_t **vocab_obj, json_t **added) {
    *vocab_obj = json_object();
    *added = json_array();
    for (uint64_t i = 0; i < tokens->n; i++) {
        uint64_t len = 0;
        const char *s = gguf_kv_str(tokens, i, &len);
        json_t *content = json_stringn(s, (size_t)len);
        if (!content ||
            json_object_setn_new(*vocab_obj, s, (size_t)len, json_integer((json_int_t)i))) {
            json_decref(content);
            json_decref(*vocab_obj);
            json_decref(*added);
            error_set("%s: key 'tokenizer.ggml.tokens' element %llu is not valid UTF-8", g->path,
                      (unsigned long long)i);
            return -1;
        }
        const int64_t type = types ? gguf_kv_int(types, i, NULL) : GGUF_TOKEN_NORMAL;
        const int special = type == GGUF_TOKEN_CONTROL || (spm && type == GGUF_TOKEN_UNKNOWN);
        if (special || type == GGUF_TOKEN_USER_DEFINED)
            json_array_append_new(*added, json_pack("{s:I, s:o, s:b, s:b, s:b, s:b, s:b}", "id",
                                                    (json_int_t)i, "content", content,
                                                    "single_word", 0, "lstrip", 0, "rstrip", 0,
                                                    "normalized", !special, "special", special));
        else
            json_decref(content);
    }
    return 0;
}

/* Byte-level BPE (tokenizer.ggml.model = gpt2): the merges as written, the pre-tokenizer of
 * tokenizer.ggml.pre, the ByteLevel decoder. Takes vocab_obj and added; NULL with the refusal
 * set. */
static json_t *gguf_bpe_json(const gguf *g, int pre, json_t *vocab_obj, json_t *added) {
    const gguf_kv *merges = gguf_strings(g, "tokenizer.ggml.merges");
    json_t *merge_list = json_array();
    for (uint64_t i = 0; merges && i < merges->n; i++) {
        uint64_t len = 0;
        const char *s = gguf_kv_str(merges, i, &len);
        json_t *m = json_stringn(s, (size_t)len);
        if (!m) {
            error_set("%s: key 'tokenizer.ggml.merges' element %llu is not valid UTF-8", g->path,
                      (unsigned long long)i);
            merges = NULL;
        }
        json_array_append_new(merge_list, m);
    }
    if (!merges) {
        json_decref(vocab_obj);
        json_decref(added);
        json_decref(merge_list);
        return NULL;
    }
    json_t *root = json_pack(
        "{s:s, s:o, s:n, s:o, s:n, s:{s:s, s:b, s:b, s:b}, s:{s:s, s:n, s:n, s:n, s:n, s:b, "
        "s:b, s:b, s:o, s:o}}",
        "version", "1.0", "added_tokens", added, "normalizer", "pre_tokenizer",
        gguf_pre_tokenizer(pre), "post_processor", "decoder", "type", "ByteLevel",
        "add_prefix_space", 0, "trim_offsets", 1, "use_regex", 0, "model", "type", "BPE", "dropout",
        "unk_token", "continuing_subword_prefix", "end_of_word_suffix", "fuse_unk", 0,
        "byte_fallback", 0, "ignore_merges", gguf_pre_types[pre].ignore_merges, "vocab", vocab_obj,
        "merges", merge_list);
    CHECK(root, "cannot build the tokenizer JSON");
    return root;
}

int gguf_tokenizer_json(const gguf *g, int vocab, char **json_text) {
    *json_text = NULL;
    if (!gguf_kv_find(g, "tokenizer.ggml.model")) return 0;
    const char *model = NULL;
    if (gguf_get_string(g, "tokenizer.ggml.model", &model) != STATUS_OK) return -1;
    const int spm = strcmp(model, "llama") == 0;
    if (!spm && strcmp(model, "gpt2") != 0) {
        error_set("%s: key 'tokenizer.ggml.model' = \"%s\" is not supported; tripar reads "
                  "\"gpt2\" (byte-level BPE) and \"llama\" (SentencePiece BPE)",
                  g->path, model);
        return -1;
    }
    const int pre = spm ? 0 : gguf_pre_find(g); /* SentencePiece has no pre-tokenizer */
    const gguf_kv *tokens = pre >= 0 ? gguf_strings(g, "tokenizer.ggml.tokens") : NULL;
    if (!tokens) return -1;
    if (tokens->n > (uint64_t)vocab) {
        error_set("%s: key 'tokenizer.ggml.tokens' holds %llu tokens, more than the %d rows of "
                  "token_embd.weight",
                  g->path, (unsigned long long)tokens->n, vocab);
        return -1;
    }
    const gguf_kv *types = gguf_kv_find(g, "tokenizer.ggml.token_type");
    if (types && (!types->is_array || !gguf_type_is_int(types->type) || types->n != tokens->n)) {
        error_set("%s: key 'tokenizer.ggml.token_type' must be an integer array of %llu "
                  "elements, one per token",
                  g->path, (unsigned long long)tokens->n);
        return -1;
    }
    json_t *vocab_obj, *added;
    if (gguf_vocab_read(g, tokens, types, spm, &vocab_obj, &added) != 0) return -1;
    json_t *root = spm ? gguf_spm_json(g, tokens, types, vocab_obj, added)
                       : gguf_bpe_json(g, pre, vocab_obj, added);
    if (!root) return -1;
    *json_text = json_dumps(root, JSON_COMPACT | JSON_ENSURE_ASCII);
    json_decref(root);
    CHECK(*json_text, "out of memory");
    return 1;
}
