/* The normalizer and, for a vocab of characters, the decoder of a tokenizer.json: the Unicode
 * forms (Qwen2's NFC) and the steps SentencePiece models are written with (Llama 2, TinyLlama,
 * Mistral: Prepend "▁" and Replace " " -> "▁"; decoding Replace "▁" -> " ", ByteFallback, Fuse,
 * Strip). Any other step would change the ids or the text in ways not done here: refused. Also
 * the wording of every refusal of a tokenizer.json (tok_json_unsupported). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/tokenizer_impl.h"

void tok_json_describe(const json_t *v, char *buf, size_t len) {
    char *s = v ? json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    snprintf(buf, len, "%s", s ? s : "(absent)");
    free(s);
}

int tok_json_unsupported(const char *name, const char *key, const json_t *value,
                         const char *allowed) {
    char buf[128];
    tok_json_describe(value, buf, sizeof buf);
    error_set("%s: %s %s is not supported; allowed: %s", name, key, buf, allowed);
    return STATUS_BAD_INPUT;
}

static char *xstrdup(const char *s) {
    char *d = strdup(s);
    CHECK(d, "out of memory");
    return d;
}

/* Replace's String pattern and content (malloc'ed); a Regex pattern is refused. */
static int replace_read(const json_t *step, const char *where, const char *name, char **from,
                        char **to) {
    json_t *pattern = json_object_get(step, "pattern");
    json_t *literal = json_object_get(pattern, "String"),
           *content = json_object_get(step, "content");
    char key[96];
    if (!json_is_string(literal) || !json_string_value(literal)[0]) {
        snprintf(key, sizeof key, "%s.pattern", where);
        return tok_json_unsupported(name, key, pattern, "{\"String\": \"...\"} (not empty)");
    }
    if (!json_is_string(content)) {
        snprintf(key, sizeof key, "%s.content", where);
        return tok_json_unsupported(name, key, content, "a string");
    }
    *from = xstrdup(json_string_value(literal));
    *to = xstrdup(json_string_value(content));
    return STATUS_OK;
}

/* One normalizer step (not a Sequence), appended to t->norm. */
static int norm_step_read(tokenizer *t, const json_t *step, const char *where, const char *name,
                          int *unused) {
    (void)unused;
    static const char *const forms[] = {"NFC", "NFD", "NFKC", "NFKD"};
    static const tok_normalizer kinds[] = {TOK_NORM_NFC, TOK_NORM_NFD, TOK_NORM_NFKC,
                                           TOK_NORM_NFKD};
    json_t *type = json_object_get(step, "type");
    const char *ty = json_is_string(type) ? json_string_value(type) : "";
    char key[96];
    snprintf(key, sizeof key, "%s.type", where);
    if (t->n_norms == TOK_MAX_NORMS) {
        error_set("%s: %s: more than %d normalizer steps", name, where, TOK_MAX_NORMS);
        return STATUS_BAD_INPUT;
    }
    tok_norm_step *st = &t->norm[t->n_norms];
    for (int i = 0; i < 4; i++)
        if (!strcmp(ty, forms[i])) {
            st->kind = kinds[i];
            t->n_norms++;
            return STATUS_OK;
        }
    if (!strcmp(ty, "Prepend")) {
        json_t *p = json_object_get(step, "prepend");
        if (!json_is_string(p)) {
            snprintf(key, sizeof key, "%s.prepend", where);
            return tok_json_unsupported(name, key, p, "a string");
        }
        st->kind = TOK_NORM_PREPEND;
        st->from = xstrdup(json_string_value(p));
        t->n_norms++;
        return STATUS_OK;
    }
    if (!strcmp(ty, "Replace")) {
        if (replace_read(step, where, name, &st->from, &st->to) != STATUS_OK)
            return STATUS_BAD_INPUT;
        st->kind = TOK_NORM_REPLACE;
        t->n_norms++;
        return STATUS_OK;
    }
    return tok_json_unsupported(name, type ? key : where, type ? type : step,
                                "null, NFC, NFD, NFKC, NFKD, Prepend, Replace (a String "
                                "pattern), or a Sequence of these");
}

/* One decoder step of a character vocab. *fused: a Fuse came before, so a Strip acts on the
 * whole text (without one Hugging Face strips every token); nothing may follow the Strip. */
static int dec_step_read(tokenizer *t, const json_t *step, const char *where, const char *name,
                         int *fused) {
    json_t *type = json_object_get(step, "type");
    const char *ty = json_is_string(type) ? json_string_value(type) : "";
    char key[96];
    snprintf(key, sizeof key, "%s.type", where);
    if (t->strip_left) {
        error_set("%s: %s: a decoder step after Strip is not supported; Strip must be last", name,
                  where);
        return STATUS_BAD_INPUT;
    }
    if (!strcmp(ty, "ByteFallback") || !strcmp(ty, "Replace")) {
        if (*fused) {
            error_set("%s: %s: %s after Fuse is not supported; it must come before Fuse", name,
                      where, ty);
            return STATUS_BAD_INPUT;
        }
        if (ty[0] == 'B') {
            t->dec_byte_fallback = 1;
            return STATUS_OK;
        }
        if (t->n_dec_replace == TOK_MAX_NORMS) {
            error_set("%s: %s: more than %d Replace steps", name, where, TOK_MAX_NORMS);
            return STATUS_BAD_INPUT;
        }
        if (replace_read(step, where, name, &t->dec_from[t->n_dec_replace],
                         &t->dec_to[t->n_dec_replace]) != STATUS_OK)
            return STATUS_BAD_INPUT;
        t->n_dec_replace++;
        return STATUS_OK;
    }
    if (!strcmp(ty, "Fuse")) { /* tripar always joins the tokens' bytes */
        *fused = 1;
        return STATUS_OK;
    }
    if (!strcmp(ty, "Strip")) {
        json_t *content = json_object_get(step, "content"), *start = json_object_get(step, "start"),
               *stop = json_object_get(step, "stop");
        size_t clen = json_is_string(content) ? strlen(json_string_value(content)) : 0;
        size_t one = 0;
        if (clen) { /* the bytes of its first character */
            const unsigned char c = (unsigned char)json_string_value(content)[0];
            one = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : 4;
        }
        const char *bad = !*fused ? "a Strip before Fuse (it would strip every token)"
                          : !clen || one != clen ? "content must be one character"
                          : !json_is_integer(start) || json_integer_value(start) < 1 ||
                                  json_integer_value(start) > 64
                              ? "start must be an integer from 1 to 64"
                          : json_is_integer(stop) && json_integer_value(stop) == 0
                              ? NULL
                              : "stop must be 0 (trailing characters are kept)";
        if (bad) {
            error_set("%s: %s: %s is not supported", name, where, bad);
            return STATUS_BAD_INPUT;
        }
        memcpy(t->strip_char, json_string_value(content), clen + 1);
        t->strip_left = (int)json_integer_value(start);
        return STATUS_OK;
    }
    return tok_json_unsupported(name, type ? key : where, type ? type : step,
                                "ByteLevel, or for a vocab of characters null, Replace, "
                                "ByteFallback, Fuse, Strip or a Sequence of these");
}

/* step_read on obj, or on each element of obj[list_key] when obj is a Sequence, each named by
 * its key path for messages; state is the reader's own, carried from step to step. */
typedef int (*step_read_fn)(tokenizer *t, const json_t *step, const char *where, const char *name,
                            int *state);
static int steps_read(tokenizer *t, const json_t *obj, const char *what, const char *list_key,
                      const char *name, step_read_fn step_read) {
    if (!obj || json_is_null(obj)) return STATUS_OK;
    int state = 0;
    json_t *type = json_object_get(obj, "type");
    if (!json_is_string(type) || strcmp(json_string_value(type), "Sequence") != 0)
        return step_read(t, obj, what, name, &state);
    json_t *list = json_object_get(obj, list_key);
    char where[64];
    snprintf(where, sizeof where, "%s.%s", what, list_key);
    if (!json_is_array(list)) return tok_json_unsupported(name, where, list, "a list");
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e) {
        snprintf(where, sizeof where, "%s.%s[%zu]", what, list_key, i);
        if (step_read(t, e, where, name, &state) != STATUS_OK) return STATUS_BAD_INPUT;
    }
    return STATUS_OK;
}

int tok_json_normalizer_read(tokenizer *t, const json_t *norm, const char *name) {
    return steps_read(t, norm, "normalizer", "normalizers", name, norm_step_read);
}

int tok_json_decoder_read(tokenizer *t, const json_t *dec, const char *name) {
    return steps_read(t, dec, "decoder", "decoders", name, dec_step_read);
}
