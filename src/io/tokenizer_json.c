/* Loading a tokenizer (tokenizer.h): GPT-2's vocab.json + merges.txt, or a Hugging Face
 * tokenizer.json read with jansson (its normalizer and a character vocab's decoder:
 * tokenizer_json_steps.c). Anything in a tokenizer.json that would change the ids and
 * is not implemented here is refused, naming the key and its value, rather than ignored. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/check.h"
#include "base/path.h"
#include "io/tokenizer_impl.h"

static tokenizer *tokenizer_new(const char *vocab_name) {
    tokenizer *t = xcalloc(1, sizeof *t);
    tok_byte_symbols_init(t);
    t->unk_id = -1;
    snprintf(t->vocab_name, sizeof t->vocab_name, "%s", vocab_name);
    return t;
}

/* token -> id of a vocab object into t->vocab; n_ids becomes the largest id + 1. where names the
 * object for messages ("vocab.json", "x/tokenizer.json: model.vocab"). */
static int vocab_fill(tokenizer *t, const json_t *obj, const char *where) {
    tok_str_map_init(&t->vocab, json_object_size(obj));
    const char *key;
    json_t *value;
    int max_id = -1;
    json_object_foreach((json_t *)obj, key, value) {
        json_int_t id = json_integer_value(value);
        if (!json_is_integer(value) || id < 0 || id >= TOK_MAX_IDS) {
            error_set("%s: token '%s' needs an integer id from 0 to %d", where, key,
                      TOK_MAX_IDS - 1);
            return STATUS_BAD_INPUT;
        }
        tok_str_map_put(&t->vocab, key, strlen(key), (int)id);
        if (id > max_id) max_id = (int)id;
    }
    t->n_ids = max_id + 1;
    return STATUS_OK;
}

/* Adds the merge of symbols a and b with this rank; the two symbols and their concatenation
 * must be vocab entries (Hugging Face refuses such a file too). Returns the missing symbol's
 * text in missing (malloc'ed) when one is not. */
static int merge_add(tokenizer *t, const char *a, size_t alen, const char *b, size_t blen,
                     int rank, int keep_first, char **missing) {
    int ia, ib, iab;
    char *ab = xmalloc(alen + blen + 1);
    memcpy(ab, a, alen);
    memcpy(ab + alen, b, blen);
    ab[alen + blen] = '\0';
    const char *lack = !tok_str_map_get(&t->vocab, a, alen, &ia)             ? a
                       : !tok_str_map_get(&t->vocab, b, blen, &ib)           ? b
                       : !tok_str_map_get(&t->vocab, ab, alen + blen, &iab) ? ab
                                                                            : NULL;
    if (lack) {
        size_t l = lack == a ? alen : lack == b ? blen : alen + blen;
        *missing = xmalloc(l + 1);
        memcpy(*missing, lack, l);
        (*missing)[l] = '\0';
        free(ab);
        return STATUS_BAD_INPUT;
    }
    free(ab);
    tok_merge_map_put(&t->merges, ia, ib, rank, iab, keep_first);
    return STATUS_OK;
}

/* ---- vocab.json + merges.txt ------------------------------------------------------------- */

static int merges_txt_parse(tokenizer *t, const char *merges_txt) {
    size_t lines = 1;
    for (const char *p = merges_txt; *p; p++) lines += *p == '\n';
    tok_merge_map_init(&t->merges, lines);
    int rank = 0, line_no = 0;
    for (const char *p = merges_txt; *p;) {
        const char *end = strchr(p, '\n');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        line_no++;
        if (len && p[len - 1] == '\r') len--;
        /* "#version: 0.2" heads the file; blank lines carry nothing */
        int skip = len == 0 || (line_no == 1 && len >= 9 && memcmp(p, "#version:", 9) == 0);
        if (!skip) {
            const char *space = memchr(p, ' ', len);
            if (!space || space == p || space == p + len - 1 ||
                memchr(space + 1, ' ', len - (size_t)(space + 1 - p))) {
                error_set("merges.txt:%d: expected two symbols separated by one space",
                          line_no);
                return STATUS_BAD_INPUT;
            }
            char *missing = NULL;
            size_t alen = (size_t)(space - p);
            /* a repeated merge keeps its first rank (real merges files have none) */
            if (merge_add(t, p, alen, space + 1, len - alen - 1, rank++, 1, &missing) !=
                STATUS_OK) {
                error_set("merges.txt:%d: '%s' is not in vocab.json", line_no, missing);
                free(missing);
                return STATUS_BAD_INPUT;
            }
        }
        if (!end) break;
        p = end + 1;
    }
    return STATUS_OK;
}

static int strings_build(tokenizer *t, const json_t *vocab, const char *merges_txt) {
    if (!json_is_object(vocab)) {
        error_set("vocab.json:1: not a JSON object of token -> id");
        return STATUS_BAD_INPUT;
    }
    int rc = vocab_fill(t, vocab, "vocab.json");
    if (rc != STATUS_OK) return rc;
    tok_decode_table_build(t);
    rc = merges_txt_parse(t, merges_txt);
    if (rc != STATUS_OK) return rc;
    t->stage[0].re = tok_pattern_compile(tok_gpt2_pattern, 0, "GPT-2 pattern");
    CHECK(t->stage[0].re, "%s", error_message());
    t->n_stages = 1;
    t->merge_rounds = 1; /* the order of GPT-2's encoder.py, which these two files come from */
    return STATUS_OK;
}

int tokenizer_load_strings(tokenizer **out, const char *vocab_json, const char *merges_txt) {
    *out = NULL;
    json_error_t jerr;
    json_t *root = json_loads(vocab_json, 0, &jerr);
    if (!root) {
        error_set("vocab.json:%d: %s", jerr.line, jerr.text);
        return STATUS_BAD_INPUT;
    }
    tokenizer *t = tokenizer_new("vocab.json");
    int rc = strings_build(t, root, merges_txt);
    json_decref(root);
    if (rc != STATUS_OK) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return STATUS_OK;
}

/* ---- tokenizer.json ---------------------------------------------------------------------- */

/* Reads an optional boolean key of obj into *out (keeping *out when absent or null). */
static int json_bool_get(const json_t *obj, const char *key, int *out, const char *name,
                         const char *where) {
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return STATUS_OK;
    if (!json_is_boolean(v)) {
        char buf[64];
        tok_json_describe(v, buf, sizeof buf);
        error_set("%s: %s.%s: expected true or false, got %s", name, where, key, buf);
        return STATUS_BAD_INPUT;
    }
    *out = json_is_true(v);
    return STATUS_OK;
}

/* model: a BPE whose options this encoder implements; its vocab (merges come later). */
static int json_model_read(tokenizer *t, const json_t *model, const char *name) {
    if (!json_is_object(model))
        return tok_json_unsupported(name, "model", model, "a BPE model object");
    json_t *type = json_object_get(model, "type");
    /* files written before models were tagged have no type; a merges list makes it a BPE */
    if (type ? !json_is_string(type) || strcmp(json_string_value(type), "BPE") != 0
             : !json_object_get(model, "merges"))
        return tok_json_unsupported(name, "model.type", type, "BPE");
    json_t *v = json_object_get(model, "dropout");
    if (v && !json_is_null(v) && !(json_is_number(v) && json_number_value(v) == 0.0))
        return tok_json_unsupported(name, "model.dropout", v, "null (no dropout at inference)");
    static const char *const affixes[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        v = json_object_get(model, affixes[i]);
        if (v && !json_is_null(v) && !(json_is_string(v) && !json_string_value(v)[0])) {
            char key[64];
            snprintf(key, sizeof key, "model.%s", affixes[i]);
            return tok_json_unsupported(name, key, v, "null or \"\"");
        }
    }
    /* both are checked against the pre-tokenizer once it is read (json_build) */
    if (json_bool_get(model, "byte_fallback", &t->byte_fallback, name, "model") ||
        json_bool_get(model, "fuse_unk", &t->fuse_unk, name, "model"))
        return STATUS_BAD_INPUT;
    if (json_bool_get(model, "ignore_merges", &t->ignore_merges, name, "model") != STATUS_OK)
        return STATUS_BAD_INPUT;
    json_t *vocab = json_object_get(model, "vocab");
    if (!json_is_object(vocab))
        return tok_json_unsupported(name, "model.vocab", vocab, "an object");
    char where[1100];
    snprintf(where, sizeof where, "%s: model.vocab", name);
    if (vocab_fill(t, vocab, where) != STATUS_OK) return STATUS_BAD_INPUT;
    v = json_object_get(model, "unk_token");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v) ||
            !tok_str_map_get(&t->vocab, json_string_value(v), strlen(json_string_value(v)),
                             &t->unk_id))
            return tok_json_unsupported(name, "model.unk_token", v,
                                        "null or a token of model.vocab");
    }
    json_t *merges = json_object_get(model, "merges");
    if (!json_is_array(merges))
        return tok_json_unsupported(name, "model.merges", merges,
                                    "a list of \"a b\" or [\"a\", \"b\"]");
    return STATUS_OK;
}

/* model.merges, as "a b" strings or ["a", "b"] pairs (newer files); Hugging Face keeps the
 * last rank of a repeated pair. */
static int json_merges_read(tokenizer *t, const json_t *merges, const char *name) {
    tok_merge_map_init(&t->merges, json_array_size(merges));
    size_t i;
    json_t *m;
    json_array_foreach(merges, i, m) {
        const char *a = NULL, *b = NULL;
        size_t alen = 0, blen = 0;
        if (json_is_string(m)) {
            const char *s = json_string_value(m), *space = strchr(s, ' ');
            if (space && space != s && space[1] && !strchr(space + 1, ' ')) {
                a = s, alen = (size_t)(space - s), b = space + 1, blen = strlen(b);
            }
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            a = json_string_value(json_array_get(m, 0));
            b = json_string_value(json_array_get(m, 1));
            alen = strlen(a), blen = strlen(b);
        }
        if (!a || !alen || !blen) {
            char buf[128];
            tok_json_describe(m, buf, sizeof buf);
            error_set("%s: model.merges[%zu]: expected \"a b\" or [\"a\", \"b\"], got %s", name,
                      i, buf);
            return STATUS_BAD_INPUT;
        }
        char *missing = NULL;
        if (merge_add(t, a, alen, b, blen, (int)i, 0, &missing) != STATUS_OK) {
            error_set("%s: model.merges[%zu]: '%s' is not in model.vocab", name, i, missing);
            free(missing);
            return STATUS_BAD_INPUT;
        }
    }
    return STATUS_OK;
}

/* added_tokens: [{id, content, single_word, lstrip, rstrip, normalized, special}]. */
static int json_added_read(tokenizer *t, const json_t *list, const char *name) {
    if (!list || json_is_null(list)) return STATUS_OK;
    if (!json_is_array(list)) return tok_json_unsupported(name, "added_tokens", list, "a list");
    t->added = xcalloc(json_array_size(list) + 1, sizeof *t->added);
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        char where[48];
        snprintf(where, sizeof where, "added_tokens[%zu]", i);
        json_t *id = json_object_get(e, "id"), *content = json_object_get(e, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            json_integer_value(id) >= TOK_MAX_IDS || !json_is_string(content) ||
            !json_string_value(content)[0]) {
            error_set("%s: %s: needs an integer id from 0 to %d and a non-empty content", name,
                      where, TOK_MAX_IDS - 1);
            return STATUS_BAD_INPUT;
        }
        tok_added *a = &t->added[t->n_added++];
        a->content = strdup(json_string_value(content));
        CHECK(a->content, "out of memory");
        a->len = (int)strlen(a->content);
        a->id = (int)json_integer_value(id);
        int single_word = 0;
        a->normalized = -1;
        if (json_bool_get(e, "single_word", &single_word, name, where) ||
            json_bool_get(e, "lstrip", &a->lstrip, name, where) ||
            json_bool_get(e, "rstrip", &a->rstrip, name, where) ||
            json_bool_get(e, "normalized", &a->normalized, name, where) ||
            json_bool_get(e, "special", &a->special, name, where))
            return STATUS_BAD_INPUT;
        if (a->normalized < 0) a->normalized = !a->special; /* Hugging Face's default */
        if (single_word) {
            char key[80];
            snprintf(key, sizeof key, "%s.single_word", where);
            return tok_json_unsupported(name, key, json_object_get(e, "single_word"), "false");
        }
        if (a->id >= t->n_ids) t->n_ids = a->id + 1;
    }
    /* matching table: every prefix of each content, complete ones naming their token (the
     * first of equal contents wins) */
    size_t total = 0;
    for (int k = 0; k < t->n_added; k++) total += (size_t)t->added[k].len;
    for (int pass = 0; pass < 2; pass++) {
        tok_str_map_init(&t->added_prefix[pass], total);
        for (int k = 0; k < t->n_added; k++) {
            const tok_added *a = &t->added[k];
            if (a->normalized != pass) continue;
            tok_str_map_put(&t->added_prefix[pass], a->content, (size_t)a->len, k);
            t->added_first[pass][(unsigned char)a->content[0]] = 1;
            t->has_added[pass] = 1;
        }
        for (int k = 0; k < t->n_added; k++) {
            const tok_added *a = &t->added[k];
            if (a->normalized != pass) continue;
            for (int l = 1; l < a->len; l++) tok_str_map_put(&t->added_prefix[pass], a->content,
                                                             (size_t)l, -1);
        }
    }
    return STATUS_OK;
}

static int stage_add(tokenizer *t, pcre2_code *re, int prefix_space, const char *name,
                     const char *where) {
    if (t->n_stages == TOK_MAX_STAGES) {
        if (re) pcre2_code_free(re);
        error_set("%s: %s: more than %d pre-tokenizer steps", name, where, TOK_MAX_STAGES);
        return STATUS_BAD_INPUT;
    }
    t->stage[t->n_stages].re = re;
    t->stage[t->n_stages++].prefix_space = prefix_space;
    return STATUS_OK;
}

/* One pre-tokenizer (where = its key path), Sequence ones recursively. *byte_level is set by a
 * ByteLevel step, after which nothing may come: later steps would see byte symbols, not text. */
static int json_pre_tokenizer_read(tokenizer *t, const json_t *p, const char *where,
                                   const char *name, int *byte_level) {
    char key[160];
    snprintf(key, sizeof key, "%s.type", where);
    json_t *type = json_object_get(p, "type");
    const char *ty = json_is_string(type) ? json_string_value(type) : "";
    if (*byte_level) {
        error_set("%s: %s: a step after ByteLevel would split byte symbols, not text; ByteLevel "
                  "must be the last pre-tokenizer", name, where);
        return STATUS_BAD_INPUT;
    }
    if (!strcmp(ty, "Sequence")) {
        json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list)) {
            snprintf(key, sizeof key, "%s.pretokenizers", where);
            return tok_json_unsupported(name, key, list, "a list");
        }
        size_t i;
        json_t *e;
        json_array_foreach(list, i, e) {
            char sub[160];
            snprintf(sub, sizeof sub, "%s.pretokenizers[%zu]", where, i);
            int rc = json_pre_tokenizer_read(t, e, sub, name, byte_level);
            if (rc != STATUS_OK) return rc;
        }
        return STATUS_OK;
    }
    if (!strcmp(ty, "ByteLevel")) {
        int prefix = 1, use_regex = 1; /* Hugging Face's defaults */
        if (json_bool_get(p, "add_prefix_space", &prefix, name, where) ||
            json_bool_get(p, "use_regex", &use_regex, name, where))
            return STATUS_BAD_INPUT;
        pcre2_code *re = NULL;
        if (use_regex) {
            re = tok_pattern_compile(tok_gpt2_pattern, 0, "GPT-2 pattern");
            CHECK(re, "%s", error_message());
        }
        *byte_level = 1;
        return stage_add(t, re, prefix, name, where);
    }
    if (!strcmp(ty, "Split")) {
        json_t *behavior = json_object_get(p, "behavior");
        if (!json_is_string(behavior) || strcmp(json_string_value(behavior), "Isolated") != 0) {
            snprintf(key, sizeof key, "%s.behavior", where);
            return tok_json_unsupported(name, key, behavior, "Isolated");
        }
        int invert = 0;
        if (json_bool_get(p, "invert", &invert, name, where)) return STATUS_BAD_INPUT;
        if (invert) {
            snprintf(key, sizeof key, "%s.invert", where);
            return tok_json_unsupported(name, key, json_object_get(p, "invert"), "false");
        }
        json_t *pattern = json_object_get(p, "pattern");
        json_t *regex = json_object_get(pattern, "Regex"), *literal = json_object_get(pattern, "String");
        if (!json_is_string(regex) && !json_is_string(literal)) {
            snprintf(key, sizeof key, "%s.pattern", where);
            return tok_json_unsupported(name, key, pattern,
                                        "{\"Regex\": \"...\"} or {\"String\": \"...\"}");
        }
        char what[1300];
        snprintf(what, sizeof what, "%s: %s.pattern", name, where);
        pcre2_code *re = tok_pattern_compile(json_string_value(regex ? regex : literal), !regex,
                                             what);
        if (!re) return STATUS_BAD_INPUT;
        return stage_add(t, re, 0, name, where);
    }
    return tok_json_unsupported(name, key, type, "Split, ByteLevel, Sequence");
}

/* The pre-tokenizer decides what the vocab holds: byte symbols after a ByteLevel step, else
 * characters (SentencePiece BPE as Hugging Face writes it: no pre-tokenizer, byte fallback). */
static int json_pre_and_decoder_read(tokenizer *t, const json_t *root, const char *name) {
    json_t *pre = json_object_get(root, "pre_tokenizer");
    int byte_level = 0;
    if (pre && !json_is_null(pre)) {
        if (!json_is_object(pre))
            return tok_json_unsupported(name, "pre_tokenizer", pre,
                                        "null, ByteLevel, or a Sequence of Split steps ending "
                                        "in ByteLevel");
        int rc = json_pre_tokenizer_read(t, pre, "pre_tokenizer", name, &byte_level);
        if (rc != STATUS_OK) return rc;
    }
    t->char_level = !byte_level;
    json_t *dec = json_object_get(root, "decoder"), *dtype = json_object_get(dec, "type");
    const int dec_byte_level =
        json_is_string(dtype) && !strcmp(json_string_value(dtype), "ByteLevel");
    if (t->char_level && dec_byte_level) {
        error_set("%s: pre_tokenizer has no ByteLevel step, so model.vocab is read as "
                  "characters, but the decoder is ByteLevel; allowed: a ByteLevel pre-tokenizer "
                  "step (byte-level BPE), or no ByteLevel at all (a vocab of characters)",
                  name);
        return STATUS_BAD_INPUT;
    }
    if (t->char_level) return tok_json_decoder_read(t, dec, name);
    if (dec && !json_is_null(dec) && !dec_byte_level)
        return tok_json_unsupported(name, "decoder.type", dtype, "ByteLevel");
    /* every byte has a symbol: Hugging Face would fall back on the bytes of a missing symbol's
     * own UTF-8, which no byte-level file needs */
    if (t->byte_fallback)
        return tok_json_unsupported(
            name, "model.byte_fallback",
            json_object_get(json_object_get(root, "model"), "byte_fallback"),
            "false with a ByteLevel pre-tokenizer (byte-level BPE needs "
            "no fallback)");
    if (t->fuse_unk && t->unk_id >= 0)
        return tok_json_unsupported(name, "model.fuse_unk",
                                    json_object_get(json_object_get(root, "model"), "fuse_unk"),
                                    "false with a ByteLevel pre-tokenizer");
    return STATUS_OK;
}

static int json_build(tokenizer *t, const json_t *root, const char *name) {
    const json_t *model = json_object_get(root, "model");
    int rc = json_model_read(t, model, name);
    if (rc == STATUS_OK) rc = json_added_read(t, json_object_get(root, "added_tokens"), name);
    if (rc == STATUS_OK)
        rc = tok_json_normalizer_read(t, json_object_get(root, "normalizer"), name);
    if (rc == STATUS_OK) rc = json_pre_and_decoder_read(t, root, name);
    if (rc != STATUS_OK) return rc;
    tok_decode_table_build(t);
    for (int k = 0; k < t->n_added; k++) { /* added tokens decode as their own text */
        const tok_added *a = &t->added[k];
        free(t->id_bytes[a->id]);
        t->id_bytes[a->id] = strdup(a->content);
        CHECK(t->id_bytes[a->id], "out of memory");
        t->id_len[a->id] = a->len;
        t->id_special[a->id] = (unsigned char)a->special;
    }
    return json_merges_read(t, json_object_get(model, "merges"), name);
}

int tokenizer_load_json(tokenizer **out, const char *tokenizer_json, const char *name) {
    *out = NULL;
    json_error_t jerr;
    json_t *root = json_loads(tokenizer_json, 0, &jerr);
    if (!root || !json_is_object(root)) {
        error_set("%s:%d: %s", name, root ? 1 : jerr.line,
                  root ? "not a JSON object" : jerr.text);
        json_decref(root);
        return STATUS_BAD_INPUT;
    }
    tokenizer *t = tokenizer_new("tokenizer.json");
    int rc = json_build(t, root, name);
    json_decref(root);
    if (rc != STATUS_OK) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return STATUS_OK;
}

/* ---- files ------------------------------------------------------------------------------- */

int tokenizer_load_file(tokenizer **out, const char *path) {
    *out = NULL;
    struct stat st;
    char in_dir[4200];
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) { /* a model directory, as HF takes one */
        snprintf(in_dir, sizeof in_dir, "%s/tokenizer.json", path);
        if (access(in_dir, F_OK) != 0) snprintf(in_dir, sizeof in_dir, "%s/vocab.json", path);
        if (access(in_dir, F_OK) != 0) {
            error_set("%s: a directory without tokenizer.json or vocab.json", path);
            return STATUS_BAD_INPUT;
        }
        return tokenizer_load_file(out, in_dir);
    }
    char *text = path_read_file(path, NULL);
    if (!text) return STATUS_BAD_INPUT;
    json_error_t jerr;
    json_t *root = json_loads(text, 0, &jerr);
    free(text);
    if (!root || !json_is_object(root)) {
        error_set("%s:%d: %s", path, root ? 1 : jerr.line,
                  root ? "not a JSON object (a tokenizer.json or a vocab.json)" : jerr.text);
        json_decref(root);
        return STATUS_BAD_INPUT;
    }
    int rc;
    tokenizer *t;
    if (json_is_object(json_object_get(root, "model"))) {
        t = tokenizer_new("tokenizer.json");
        rc = json_build(t, root, path);
    } else { /* a vocab.json: merges.txt sits beside it */
        t = tokenizer_new("vocab.json");
        const char *slash = strrchr(path, '/');
        int dir_len = slash ? (int)(slash - path) : 1;
        char merges_path[4200];
        snprintf(merges_path, sizeof merges_path, "%.*s/merges.txt", dir_len,
                 slash ? path : ".");
        char *merges = path_read_file(merges_path, NULL);
        rc = merges ? strings_build(t, root, merges) : STATUS_BAD_INPUT;
        if (merges && rc != STATUS_OK) {
            char why[1024];
            snprintf(why, sizeof why, "%s", error_message());
            error_set("%s (with %s): %s", path, merges_path, why);
        } else if (!merges) {
            char why[1024];
            snprintf(why, sizeof why, "%s", error_message());
            error_set("%s: a vocab.json needs merges.txt beside it: %s", path, why);
        }
        free(merges);
    }
    json_decref(root);
    if (rc != STATUS_OK) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return STATUS_OK;
}
