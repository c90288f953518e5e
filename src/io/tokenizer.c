/* Byte-level BPE encoding and decoding (see tokenizer.h). Text is cut at added tokens, each
 * stretch between them is split by the pre-tokeniser's regexes, each piece's bytes become
 * symbol ids (bytes_to_unicode), adjacent symbols merge by rank (tokenizer_bpe.c), and ids
 * decode back to the bytes their symbols stand for. Loading is in tokenizer_json.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "base/utf8.h"
#include "io/tokenizer_impl.h"

/* GPT-2's pre-tokenisation pattern (openai/gpt-2 encoder.py), which Hugging Face's ByteLevel
 * pre-tokeniser also runs when use_regex is true. */
const char tok_gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* ---- string table ------------------------------------------------------------------------ */

static uint64_t bytes_hash(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

void tok_str_map_init(tok_str_map *m, size_t expected) {
    m->cap = 16;
    while (m->cap < 2 * expected + 16) m->cap *= 2;
    m->keys = xcalloc(m->cap, sizeof *m->keys);
    m->key_lens = xcalloc(m->cap, sizeof *m->key_lens);
    m->values = xcalloc(m->cap, sizeof *m->values);
    m->count = 0;
}

void tok_str_map_free(tok_str_map *m) {
    if (!m->keys) return;
    for (size_t i = 0; i < m->cap; i++) free(m->keys[i]);
    free(m->keys);
    free(m->key_lens);
    free(m->values);
    memset(m, 0, sizeof *m);
}

static size_t str_map_slot(const tok_str_map *m, const char *key, size_t len) {
    size_t i = (size_t)bytes_hash(key, len) & (m->cap - 1);
    while (m->keys[i] && (m->key_lens[i] != len || memcmp(m->keys[i], key, len) != 0))
        i = (i + 1) & (m->cap - 1);
    return i;
}

int tok_str_map_put(tok_str_map *m, const char *key, size_t len, int value) {
    size_t i = str_map_slot(m, key, len);
    if (m->keys[i]) return 1;
    CHECK(2 * (m->count + 1) <= m->cap, "tokenizer table sized too small");
    m->keys[i] = xmalloc(len + 1);
    memcpy(m->keys[i], key, len);
    m->keys[i][len] = '\0';
    m->key_lens[i] = len;
    m->values[i] = value;
    m->count++;
    return 0;
}

int tok_str_map_get(const tok_str_map *m, const char *key, size_t len, int *value) {
    if (!m->cap) return 0;
    size_t i = str_map_slot(m, key, len);
    if (!m->keys[i]) return 0;
    *value = m->values[i];
    return 1;
}

/* ---- bytes and symbols ------------------------------------------------------------------- */

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
 * code points 256.. in order, so every byte has a visible, non-space symbol. */
void tok_byte_symbols_init(tokenizer *t) {
    int cp[256], n = 0;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        cp[b] = printable ? b : 256 + n++;
    }
    for (int i = 0; i < 512; i++) t->sym_byte[i] = -1;
    for (int b = 0; b < 256; b++) {
        t->sym_byte[cp[b]] = (short)b;
        if (cp[b] < 0x80) {
            t->byte_sym[b][0] = (char)cp[b];
            t->byte_sym_len[b] = 1;
        } else {
            t->byte_sym[b][0] = (char)(0xC0 | (cp[b] >> 6));
            t->byte_sym[b][1] = (char)(0x80 | (cp[b] & 0x3F));
            t->byte_sym_len[b] = 2;
        }
        t->byte_sym[b][t->byte_sym_len[b]] = '\0';
    }
}

/* The bytes a vocab symbol string stands for, as Hugging Face's ByteLevel decoder gives them:
 * every character through the byte map, or, when one character is outside it (not in a
 * byte-level vocab, but possible in others), the string's own UTF-8 unchanged. */
static char *symbol_to_bytes(const tokenizer *t, const char *s, size_t len, int *out_len) {
    char *out = xmalloc(len + 1);
    int n = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        int code = -1, step = 1;
        if (c < 0x80) {
            code = c;
        } else if ((c & 0xE0) == 0xC0 && i + 1 < len) {
            code = ((c & 0x1F) << 6) | ((unsigned char)s[i + 1] & 0x3F);
            step = 2;
        }
        if (code < 0 || code >= 512 || t->sym_byte[code] < 0) {
            memcpy(out, s, len);
            n = (int)len;
            break;
        }
        out[n++] = (char)t->sym_byte[code];
        i += (size_t)step;
    }
    out[n] = '\0';
    *out_len = n;
    return out;
}

/* The byte of a "<0xHH>" token (Hugging Face's ByteFallback decoder reads either case of hex
 * digit), or -1. */
static int byte_token_value(const char *s, size_t len) {
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9'                 ? c - '0'
                : (c | 32) >= 'a' && (c | 32) <= 'f' ? (c | 32) - 'a' + 10
                                                     : -1;
        if (d < 0) return -1;
        v = 16 * v + d;
    }
    return v;
}

/* The bytes a symbol of a character vocab decodes to: its byte for a "<0xHH>" token under a
 * ByteFallback decoder, else its text after the decoder's Replace steps (each token on its own,
 * before Fuse, as Hugging Face runs them: "▁" -> " "). */
static char *char_symbol_to_bytes(const tokenizer *t, const char *s, size_t len, int *out_len) {
    int b = t->dec_byte_fallback ? byte_token_value(s, len) : -1;
    if (b >= 0) {
        char *out = xmalloc(2);
        out[0] = (char)b, out[1] = '\0';
        *out_len = 1;
        return out;
    }
    char *cur = xmalloc(len + 1);
    memcpy(cur, s, len);
    cur[len] = '\0';
    for (int k = 0; k < t->n_dec_replace; k++) {
        char *next = tok_replace(t->dec_from[k], t->dec_to[k], cur, len, &len);
        free(cur);
        cur = next;
    }
    CHECK(len < (1u << 30), "token of %zu bytes", len);
    *out_len = (int)len;
    return cur;
}

void tok_decode_table_build(tokenizer *t) {
    int n = t->n_ids ? t->n_ids : 1;
    t->id_bytes = xcalloc((unsigned long)n, sizeof *t->id_bytes);
    t->id_len = xcalloc((unsigned long)n, sizeof *t->id_len);
    t->id_special = xcalloc((unsigned long)n, sizeof *t->id_special);
    for (size_t i = 0; i < t->vocab.cap; i++) {
        if (!t->vocab.keys[i]) continue;
        int id = t->vocab.values[i];
        free(t->id_bytes[id]); /* two symbols with one id: either decodes */
        t->id_bytes[id] = (t->char_level ? char_symbol_to_bytes : symbol_to_bytes)(
            t, t->vocab.keys[i], t->vocab.key_lens[i], &t->id_len[id]);
    }
    for (int b = 0; b < 256; b++) {
        int id;
        t->byte_id[b] = tok_str_map_get(&t->vocab, t->byte_sym[b], t->byte_sym_len[b], &id)
                            ? id : -1;
        char code[8]; /* the spelling Hugging Face's byte fallback looks up */
        snprintf(code, sizeof code, "<0x%02X>", b);
        t->fallback_id[b] = tok_str_map_get(&t->vocab, code, 6, &id) ? id : -1;
    }
}

/* ---- pattern ----------------------------------------------------------------------------- */

/* Hugging Face runs split patterns through Oniguruma and tiktoken through Rust's regex, where
 * \s is Unicode White_Space. PCRE2's \s with UCP also takes U+180E (Mongolian vowel separator,
 * White_Space only before Unicode 6.3) and so splits " \u180ea" differently. So \s and \S
 * become \p{White_Space} and \P{White_Space}, which mean the same inside a class too; \d is
 * \p{Nd} in all three; \v is the vertical tab in Oniguruma but a class in PCRE2; \uHHHH is
 * Oniguruma's spelling of \x{HHHH}. Escapes that differ in ways not rewritten here (\w, \h, \b,
 * \R ...) are refused rather than silently read another way. Returns 0, -1 when out is full
 * (cap allows for the longest rewrite, so never), -2 for an escape refused (its letter in bad),
 * -3 for a pattern that ends in a lone backslash. */
static int pattern_translate(const char *in, char *out, size_t cap, char *bad) {
    size_t o = 0;
#define EMIT(str)                                                                            \
    do {                                                                                     \
        size_t l_ = strlen(str);                                                             \
        if (o + l_ >= cap) return -1;                                                        \
        memcpy(out + o, str, l_);                                                            \
        o += l_;                                                                             \
    } while (0)
    for (size_t i = 0; in[i]; i++) {
        char c = in[i];
        if (c != '\\') {
            char one[2] = {c, '\0'};
            EMIT(one);
            continue;
        }
        char e = in[++i];
        if (!e) return -3; /* a lone backslash ends the pattern */
        char two[3] = {'\\', e, '\0'};
        switch (e) {
        case 's': EMIT("\\p{White_Space}"); break;
        case 'S': EMIT("\\P{White_Space}"); break;
        case 'd': EMIT("\\p{Nd}"); break;
        case 'D': EMIT("\\P{Nd}"); break;
        case 'v': EMIT("\\x{0B}"); break;
        case 'u': {
            char hex[16];
            int k = 0;
            while (k < 4 && ((in[i + 1 + k] >= '0' && in[i + 1 + k] <= '9') ||
                             ((in[i + 1 + k] | 32) >= 'a' && (in[i + 1 + k] | 32) <= 'f')))
                k++;
            if (k != 4) {
                bad[0] = 'u';
                bad[1] = '\0';
                return -2;
            }
            snprintf(hex, sizeof hex, "\\x{%.4s}", in + i + 1);
            EMIT(hex);
            i += 4;
            break;
        }
        case 'p': case 'P': case 'r': case 'n': case 't': case 'f': case 'x': case 'a':
        case 'e': case 'A': case 'z': case 'Z':
            EMIT(two);
            break;
        default:
            if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z')) {
                bad[0] = e;
                bad[1] = '\0';
                return -2;
            }
            EMIT(two); /* an escaped punctuation or digit means the same everywhere */
        }
    }
    out[o] = '\0';
    return 0;
#undef EMIT
}

pcre2_code *tok_pattern_compile(const char *pattern, int literal, const char *what) {
    size_t cap = 16 * strlen(pattern) + 64;
    char *rewritten = xmalloc(cap), bad[2];
    const char *use = pattern;
    /* MATCH_INVALID_UTF: invalid UTF-8 is skipped rather than failing the whole match, so
     * encode keeps those bytes as pieces of their own */
    uint32_t options = PCRE2_UTF | PCRE2_MATCH_INVALID_UTF;
    if (literal) {
        options |= PCRE2_LITERAL;
    } else {
        int rc = pattern_translate(pattern, rewritten, cap, bad);
        if (rc == -2) {
            error_set("%s: the escape '\\%s' reads differently in PCRE2 than in Hugging Face's "
                      "Oniguruma; allowed: \\s \\S \\d \\D \\p{..} \\P{..} \\r \\n \\t \\f \\v "
                      "\\x.. \\uHHHH and escaped punctuation", what, bad);
            free(rewritten);
            return NULL;
        }
        if (rc == -3) {
            error_set("%s: the pattern ends in a lone backslash (an escape needs a character "
                      "after it)", what);
            free(rewritten);
            return NULL;
        }
        CHECK(rc == 0, "split pattern rewrite overflowed");
        use = rewritten;
        options |= PCRE2_UCP;
    }
    int errcode;
    PCRE2_SIZE erroff;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)use, PCRE2_ZERO_TERMINATED, options, &errcode,
                                   &erroff, NULL);
    if (!re) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        error_set("%s: the pattern does not compile in PCRE2 (%s, at offset %zu of '%s')", what,
                  (const char *)msg, (size_t)erroff, use);
    } else {
        pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional speed-up */
    }
    free(rewritten);
    return re;
}

/* ---- lifetime ---------------------------------------------------------------------------- */

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    tok_str_map_free(&t->vocab);
    tok_merge_map_free(&t->merges);
    for (int i = 0; i < t->n_ids && t->id_bytes; i++) free(t->id_bytes[i]);
    free(t->id_bytes);
    free(t->id_len);
    free(t->id_special);
    for (int s = 0; s < t->n_stages; s++)
        if (t->stage[s].re) pcre2_code_free(t->stage[s].re);
    for (int i = 0; i < t->n_added; i++) free(t->added[i].content);
    free(t->added);
    tok_str_map_free(&t->added_prefix[0]);
    tok_str_map_free(&t->added_prefix[1]);
    for (int k = 0; k < t->n_norms; k++) {
        free(t->norm[k].from);
        free(t->norm[k].to);
    }
    for (int k = 0; k < t->n_dec_replace; k++) {
        free(t->dec_from[k]);
        free(t->dec_to[k]);
    }
    free(t);
}

int tokenizer_max_id(const tokenizer *t) { return t->n_ids - 1; }

int tokenizer_is_special(const tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids && t->id_special[id];
}

/* ---- encode ------------------------------------------------------------------------------ */

/* Scratch of one tokenizer_encode call, reused by every piece of the text. */
typedef struct {
    const tokenizer *t;
    int32_t *ids;             /* output */
    int n, cap;
    pcre2_match_data *md[TOK_MAX_STAGES];
    int32_t *sym;             /* one piece's symbol ids */
    size_t sym_cap;
    char *spell;              /* one piece as symbol text (ignore_merges) */
    size_t spell_cap;
    bpe_work work;
} encode_ctx;

static void ids_push(encode_ctx *c, int32_t id) {
    if (c->n == c->cap) {
        CHECK(c->cap < (1 << 30), "text encodes to more than 2^30 tokens");
        c->cap = c->cap ? 2 * c->cap : 64;
        int32_t *grown = realloc(c->ids, (size_t)c->cap * sizeof *grown);
        CHECK(grown, "out of memory encoding text");
        c->ids = grown;
    }
    c->ids[c->n++] = id;
}

/* Bytes of the character at s: a lead byte and the continuation bytes after it (at most 4), so
 * stepping never jumps over the start of a valid character, even in invalid UTF-8. */
static size_t utf8_step(const unsigned char *s, size_t n) {
    size_t i = 1;
    while (i < n && i < 4 && (s[i] & 0xC0) == 0x80)
        i++;
    return i;
}

/* The first symbols of a piece of a character vocab, into c->sym: each character's id; one not
 * in the vocab becomes the <0xXX> tokens of its bytes (byte_fallback), or else unk_id, a run of
 * them one unk_id under fuse_unk, as Hugging Face's BPE does. A byte that is not UTF-8 is a
 * character of its own. Returns the count, or -1 with the refusal set. */
static int char_symbols(encode_ctx *c, const unsigned char *s, size_t n) {
    const tokenizer *t = c->t;
    int m = 0, prev_unk = 0;
    for (size_t i = 0, len; i < n; i += len) {
        if (utf8_decode(s + i, n - i, &len) < 0) len = 1;
        int id, fallback = t->byte_fallback;
        if (tok_str_map_get(&t->vocab, (const char *)s + i, len, &id)) {
            c->sym[m++] = id;
            prev_unk = 0;
            continue;
        }
        for (size_t k = 0; k < len && fallback; k++)
            fallback = t->fallback_id[s[i + k]] >= 0;
        if (fallback) {
            for (size_t k = 0; k < len; k++)
                c->sym[m++] = t->fallback_id[s[i + k]];
            prev_unk = 0;
        } else if (t->unk_id >= 0) {
            if (!(t->fuse_unk && prev_unk)) c->sym[m++] = t->unk_id;
            prev_unk = 1;
        } else {
            error_set("tokenizer: character '%.*s' is not in %s, which has no byte fallback for "
                      "it and no unk_token",
                      (int)len, (const char *)s + i, t->vocab_name);
            return -1;
        }
    }
    return m;
}

/* BPE over one pre-token. */
static int piece_encode(encode_ctx *c, const unsigned char *s, size_t n) {
    const tokenizer *t = c->t;
    if (t->ignore_merges && n > 1) { /* Llama 3: a piece that is a token stays one */
        const char *spelled = (const char *)s;
        size_t w = n;
        if (!t->char_level) {
            if (2 * n > c->spell_cap) {
                free(c->spell);
                c->spell_cap = 2 * n;
                c->spell = xmalloc(c->spell_cap);
            }
            w = 0;
            for (size_t i = 0; i < n; i++) {
                memcpy(c->spell + w, t->byte_sym[s[i]], t->byte_sym_len[s[i]]);
                w += t->byte_sym_len[s[i]];
            }
            spelled = c->spell;
        }
        int id;
        if (tok_str_map_get(&t->vocab, spelled, w, &id)) {
            ids_push(c, id);
            return STATUS_OK;
        }
    }
    if (n > c->sym_cap) { /* at most one symbol per byte, byte fallback included */
        free(c->sym);
        c->sym_cap = n;
        c->sym = xmalloc(n * sizeof *c->sym);
    }
    CHECK(n < (1u << 31), "piece of %zu bytes is too long", n);
    int n_sym = (int)n;
    if (t->char_level) {
        n_sym = char_symbols(c, s, n);
        if (n_sym < 0) return STATUS_BAD_INPUT;
    }
    for (size_t i = 0; i < n && !t->char_level; i++) {
        int id = t->byte_id[s[i]] >= 0 ? t->byte_id[s[i]] : t->unk_id;
        if (id < 0) {
            error_set("tokenizer: symbol '%s' (byte 0x%02x) is not in %s (the vocab must cover "
                      "all 256 byte symbols)", t->byte_sym[s[i]], s[i], t->vocab_name);
            return STATUS_BAD_INPUT;
        }
        c->sym[i] = id;
    }
    int m = bpe_merge(&t->merges, c->sym, n_sym, t->merge_rounds, &c->work);
    for (int i = 0; i < m; i++) ids_push(c, c->sym[i]);
    return STATUS_OK;
}

/* Unicode White_Space: what Rust's char::is_whitespace, and so Hugging Face's lstrip and
 * rstrip of added tokens, strips (U+180E is not in it). */
static int is_white_space(long cp) {
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

/* Length of the White_Space character that ends s[0..n), or 0. */
static size_t white_space_before(const unsigned char *s, size_t n) {
    size_t b = n;
    while (b > 0 && n - b < 4 && (s[b - 1] & 0xC0) == 0x80) b--;
    if (b == 0) return 0;
    b--;
    size_t len;
    long cp = utf8_decode(s + b, n - b, &len);
    return cp >= 0 && b + len == n && is_white_space(cp) ? len : 0;
}

/* Length of the White_Space character that starts s[0..n), or 0. */
static size_t white_space_after(const unsigned char *s, size_t n) {
    size_t len;
    long cp = utf8_decode(s, n, &len);
    return cp >= 0 && is_white_space(cp) ? len : 0;
}

static int pieces_encode(encode_ctx *c, const unsigned char *s, size_t n, int stage);

/* Splits s[0..n) with the regex of `stage`: matches and the text between them both become
 * pieces (Hugging Face's "Isolated"); an empty match splits nothing. */
static int split_encode(encode_ctx *c, const unsigned char *s, size_t n, int stage) {
    const tok_stage *st = &c->t->stage[stage];
    if (!st->re) return pieces_encode(c, s, n, stage + 1);
    size_t gap = 0, pos = 0;
    while (pos < n) {
        int m = pcre2_match(st->re, s, n, pos, 0, c->md[stage], NULL);
        if (m == PCRE2_ERROR_NOMATCH) break;
        CHECK(m >= 0, "PCRE2 match failed with error %d", m);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(c->md[stage]);
        size_t begin = ov[0], end = ov[1];
        if (begin >= n) break;
        if (end == begin) {
            pos = begin + utf8_step(s + begin, n - begin);
            continue;
        }
        /* bytes no alternative matched (invalid UTF-8 under the GPT-2 pattern) form a piece */
        int rc = pieces_encode(c, s + gap, begin - gap, stage + 1);
        if (rc == STATUS_OK) rc = pieces_encode(c, s + begin, end - begin, stage + 1);
        if (rc != STATUS_OK) return rc;
        gap = pos = end;
    }
    return pieces_encode(c, s + gap, n - gap, stage + 1);
}

/* Pre-tokenisation from step `stage` on, then BPE over each final piece. */
static int pieces_encode(encode_ctx *c, const unsigned char *s, size_t n, int stage) {
    if (n == 0) return STATUS_OK; /* Hugging Face drops empty pieces before any step */
    if (stage == c->t->n_stages) return piece_encode(c, s, n);
    if (!c->t->stage[stage].prefix_space || s[0] == ' ') return split_encode(c, s, n, stage);
    unsigned char *spaced = xmalloc(n + 1); /* ByteLevel add_prefix_space, on every piece */
    spaced[0] = ' ';
    memcpy(spaced + 1, s, n);
    int rc = split_encode(c, spaced, n + 1, stage);
    free(spaced);
    return rc;
}

static int added_encode(encode_ctx *c, const unsigned char *s, size_t n, int pass);

/* A stretch between added tokens: after the raw pass, normalise it and look for the normalised
 * added tokens; after that, split. */
static int stretch_encode(encode_ctx *c, const unsigned char *s, size_t n, int pass) {
    if (n == 0) return STATUS_OK;
    if (pass == 1) return pieces_encode(c, s, n, 0);
    if (c->t->n_norms == 0) return added_encode(c, s, n, 1);
    size_t len;
    unsigned char *normal = tok_normalize(c->t, s, n, &len);
    int rc = added_encode(c, normal, len, 1);
    free(normal);
    return rc;
}

/* Cuts s at the added tokens of this pass (0: matched in the raw text, 1: in the normalised
 * text, as Hugging Face orders them) and encodes the stretches between. The leftmost match
 * wins, the longest at that place, as Hugging Face's leftmost-longest Aho-Corasick; lstrip and
 * rstrip take the White_Space beside a match into the token. */
static int added_encode(encode_ctx *c, const unsigned char *s, size_t n, int pass) {
    const tokenizer *t = c->t;
    if (!t->has_added[pass]) return stretch_encode(c, s, n, pass);
    size_t seg = 0, pos = 0;
    while (pos < n) {
        if (!t->added_first[pass][s[pos]]) {
            pos++;
            continue;
        }
        int best = -1, v;
        size_t best_len = 0;
        for (size_t l = 1; pos + l <= n; l++) {
            if (!tok_str_map_get(&t->added_prefix[pass], (const char *)s + pos, l, &v)) break;
            if (v >= 0) best = v, best_len = l;
        }
        if (best < 0) {
            pos++;
            continue;
        }
        const tok_added *a = &t->added[best];
        size_t start = pos, end = pos + best_len, w;
        while (a->lstrip && start > seg && (w = white_space_before(s + seg, start - seg)))
            start -= w;
        while (a->rstrip && end < n && (w = white_space_after(s + end, n - end))) end += w;
        int rc = stretch_encode(c, s + seg, start - seg, pass);
        if (rc != STATUS_OK) return rc;
        ids_push(c, a->id);
        seg = pos = end;
    }
    return stretch_encode(c, s + seg, n - seg, pass);
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int32_t **ids, int *n) {
    *ids = NULL;
    *n = 0;
    encode_ctx c;
    memset(&c, 0, sizeof c);
    c.t = t;
    for (int s = 0; s < t->n_stages; s++) {
        if (!t->stage[s].re) continue;
        c.md[s] = pcre2_match_data_create_from_pattern(t->stage[s].re, NULL);
        CHECK(c.md[s], "out of memory for PCRE2 match data");
    }
    int rc = added_encode(&c, (const unsigned char *)text, len, 0);
    for (int s = 0; s < t->n_stages; s++) pcre2_match_data_free(c.md[s]);
    free(c.sym);
    free(c.spell);
    bpe_work_free(&c.work);
    if (rc != STATUS_OK) {
        free(c.ids);
        return rc;
    }
    *ids = c.ids ? c.ids : xmalloc(sizeof(int32_t));
    *n = c.n;
    return STATUS_OK;
}

/* ---- decode ------------------------------------------------------------------------------ */

static int id_known(const tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_ids && t->id_bytes[id];
}

char *tokenizer_decode_text(const tokenizer *t, const int32_t *ids, int n, unsigned flags,
                            size_t *len) {
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (id_known(t, ids[i])) {
            total += (size_t)t->id_len[ids[i]];
        } else if (!(flags & TOKENIZER_SKIP_UNKNOWN)) {
            error_set("tokenizer: token id %d is not in the vocab", ids[i]);
            return NULL;
        }
    }
    char *out = xmalloc(total + 1);
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        if (!id_known(t, ids[i])) continue;
        if ((flags & TOKENIZER_SKIP_SPECIAL) && t->id_special[ids[i]]) continue;
        memcpy(out + pos, t->id_bytes[ids[i]], (size_t)t->id_len[ids[i]]);
        pos += (size_t)t->id_len[ids[i]];
    }
    /* Strip after Fuse (SentencePiece's decoder): the fused text loses the space its dummy
     * prefix put first */
    const size_t sl = strlen(t->strip_char);
    size_t cut = 0;
    for (int k = 0; k < t->strip_left && cut + sl <= pos && !memcmp(out + cut, t->strip_char, sl);
         k++)
        cut += sl;
    memmove(out, out + cut, pos - cut);
    pos -= cut;
    out[pos] = '\0';
    if (len) *len = pos;
    return out;
}

char *tokenizer_decode(const tokenizer *t, const int32_t *ids, int n, size_t *len) {
    return tokenizer_decode_text(t, ids, n, 0, len);
}
