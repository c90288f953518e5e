/* A tokenizer.json's "normalizer": Unicode normalisation (Qwen2's is NFC) through ICU, and the
 * Prepend and Replace steps of SentencePiece models (Llama 2's "▁" dummy prefix and spaces).
 * Text that is not valid UTF-8 keeps its bad bytes as they are and has each valid run around
 * them normalised, so it still encodes (Hugging Face takes valid UTF-8 only). */
#include <stdlib.h>
#include <string.h>
#include <unicode/unorm2.h>
#include <unicode/ustring.h>

#include "base/check.h"
#include "io/tokenizer_impl.h"

typedef struct {
    unsigned char *data;
    size_t len, cap;
} byte_buf;

static void buf_append(byte_buf *b, const void *data, size_t n) {
    if (n == 0) return;
    if (b->len + n > b->cap) {
        while (b->len + n > b->cap) b->cap = b->cap ? 2 * b->cap : 256;
        unsigned char *grown = realloc(b->data, b->cap);
        CHECK(grown, "out of memory normalising text");
        b->data = grown;
    }
    memcpy(b->data + b->len, data, n);
    b->len += n;
}

static const UNormalizer2 *normalizer_of(tok_normalizer kind) {
    UErrorCode err = U_ZERO_ERROR;
    const UNormalizer2 *nz = kind == TOK_NORM_NFC    ? unorm2_getNFCInstance(&err)
                             : kind == TOK_NORM_NFD  ? unorm2_getNFDInstance(&err)
                             : kind == TOK_NORM_NFKC ? unorm2_getNFKCInstance(&err)
                                                     : unorm2_getNFKDInstance(&err);
    CHECK(U_SUCCESS(err) && nz, "ICU normaliser unavailable: %s", u_errorName(err));
    return nz;
}

/* Appends the normal form of the valid UTF-8 run s[0..n): UTF-8 -> UTF-16 -> normalised ->
 * UTF-8, ICU's normalisers working on UTF-16. */
static void run_normalize(const UNormalizer2 *nz, const char *s, size_t n, byte_buf *out) {
    CHECK(n < (1u << 29), "text of %zu bytes is too long to normalise", n);
    UErrorCode err = U_ZERO_ERROR;
    int32_t n16 = 0;
    UChar *src = xmalloc((n + 1) * sizeof *src); /* UTF-16 never has more units than UTF-8 bytes */
    u_strFromUTF8(src, (int32_t)n + 1, &n16, s, (int32_t)n, &err);
    CHECK(U_SUCCESS(err), "UTF-8 to UTF-16: %s", u_errorName(err));
    int32_t cap = 3 * n16 + 16, got; /* the longest expansion, as ICU documents, is 3x (NFC) */
    UChar *dst = xmalloc((size_t)cap * sizeof *dst);
    for (;;) {
        err = U_ZERO_ERROR;
        got = unorm2_normalize(nz, src, n16, dst, cap, &err);
        if (err != U_BUFFER_OVERFLOW_ERROR) break;
        free(dst);
        cap = got + 16;
        dst = xmalloc((size_t)cap * sizeof *dst);
    }
    CHECK(U_SUCCESS(err), "ICU normalisation: %s", u_errorName(err));
    int32_t n8 = 0;
    size_t cap8 = 4 * (size_t)got + 4;
    char *utf8 = xmalloc(cap8);
    err = U_ZERO_ERROR;
    u_strToUTF8(utf8, (int32_t)cap8, &n8, dst, got, &err);
    CHECK(U_SUCCESS(err), "UTF-16 to UTF-8: %s", u_errorName(err));
    buf_append(out, utf8, (size_t)n8);
    free(utf8);
    free(dst);
    free(src);
}

/* Length of the valid UTF-8 character at s, or 0. */
static size_t utf8_valid_len(const unsigned char *s, size_t n) {
    size_t l = s[0] < 0x80 ? 1 : (s[0] & 0xE0) == 0xC0 ? 2 : (s[0] & 0xF0) == 0xE0 ? 3
             : (s[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (l == 0 || l > n) return 0;
    for (size_t i = 1; i < l; i++)
        if ((s[i] & 0xC0) != 0x80) return 0;
    uint32_t cp = l == 1 ? s[0] : s[0] & (0x7Fu >> l);
    for (size_t i = 1; i < l; i++) cp = (cp << 6) | (s[i] & 0x3F);
    static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000}; /* no overlong forms */
    if (cp < least[l] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return l;
}

static void unicode_normalize(tok_normalizer kind, const unsigned char *s, size_t n,
                              byte_buf *out_buf) {
    const UNormalizer2 *nz = normalizer_of(kind);
    /* A run below this lead byte is its own normal form and goes round ICU: ASCII in every
     * form, and under NFC everything below U+0300 (lead byte 0xCC), which is NFC already and
     * never the second half of a composition (those are marks, jamo and vowel signs above). */
    const unsigned char plain_below = kind == TOK_NORM_NFC ? 0xCC : 0x80;
    byte_buf out = *out_buf;
    size_t i = 0;
    while (i < n) {
        size_t run = i, l;
        int plain = 1;
        while (run < n && (l = utf8_valid_len(s + run, n - run)) > 0) {
            plain &= s[run] < plain_below;
            run += l;
        }
        if (run > i) {
            if (plain)
                buf_append(&out, s + i, run - i);
            else
                run_normalize(nz, (const char *)s + i, run - i, &out);
        }
        if (run < n) buf_append(&out, s + run, 1); /* a byte that is not UTF-8 stays */
        i = run < n ? run + 1 : n;
    }
    *out_buf = out;
}

/* Every occurrence of from (non-overlapping, left to right, as Hugging Face's Replace with a
 * String pattern) becomes to. */
static void literal_replace(const char *from, const char *to, const unsigned char *s, size_t n,
                            byte_buf *out) {
    const size_t flen = strlen(from), tlen = strlen(to);
    size_t i = 0, copied = 0;
    while (flen && i + flen <= n) {
        if (memcmp(s + i, from, flen) != 0) {
            i++;
            continue;
        }
        buf_append(out, s + copied, i - copied);
        buf_append(out, to, tlen);
        i += flen;
        copied = i;
    }
    buf_append(out, s + copied, n - copied);
}

char *tok_replace(const char *from, const char *to, const char *s, size_t n, size_t *out_len) {
    byte_buf out = {0};
    literal_replace(from, to, (const unsigned char *)s, n, &out);
    buf_append(&out, "", 1);
    *out_len = out.len - 1;
    return (char *)out.data;
}

unsigned char *tok_normalize(const tokenizer *t, const unsigned char *s, size_t n,
                             size_t *out_len) {
    byte_buf cur = {0};
    buf_append(&cur, s, n);
    for (int k = 0; k < t->n_norms; k++) {
        const tok_norm_step *st = &t->norm[k];
        byte_buf next = {0};
        if (st->kind == TOK_NORM_PREPEND) {
            if (cur.len) buf_append(&next, st->from, strlen(st->from));
            buf_append(&next, cur.data, cur.len);
        } else if (st->kind == TOK_NORM_REPLACE) {
            literal_replace(st->from, st->to, cur.data, cur.len, &next);
        } else {
            unicode_normalize(st->kind, cur.data, cur.len, &next);
        }
        free(cur.data);
        cur = next;
    }
    buf_append(&cur, "", 1);
    *out_len = cur.len - 1;
    return cur.data;
}
