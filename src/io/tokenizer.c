/* GPT-2 byte-level BPE (see tokenizer.h). Text is split by GPT-2's regex, each piece's bytes
 * become printable symbols (bytes_to_unicode), adjacent symbols merge by merges.txt rank until
 * no ranked pair is left, and each final symbol is looked up in vocab.json. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "io/tokenizer.h"

#include <jansson.h>
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"

/* GPT-2's pre-tokenisation pattern (openai/gpt-2 encoder.py), matched in UTF + UCP mode. */
static const char gpt2_pattern[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* A string -> int open-addressing table; keys are owned. */
typedef struct {
    char **keys;
    size_t *key_lens;
    int *values;
    size_t cap, count;
} str_map;

static uint64_t bytes_hash(const char *s, size_t len) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static void str_map_init(str_map *m, size_t expected) {
    m->cap = 16;
    while (m->cap < 2 * expected + 16) m->cap *= 2;
    m->keys = xcalloc(m->cap, sizeof *m->keys);
    m->key_lens = xcalloc(m->cap, sizeof *m->key_lens);
    m->values = xcalloc(m->cap, sizeof *m->values);
    m->count = 0;
}

static void str_map_free(str_map *m) {
    if (!m->keys) return;
    for (size_t i = 0; i < m->cap; i++) free(m->keys[i]);
    free(m->keys);
    free(m->key_lens);
    free(m->values);
    memset(m, 0, sizeof *m);
}

static size_t str_map_slot(const str_map *m, const char *key, size_t len) {
    size_t i = (size_t)bytes_hash(key, len) & (m->cap - 1);
    while (m->keys[i] && (m->key_lens[i] != len || memcmp(m->keys[i], key, len) != 0))
        i = (i + 1) & (m->cap - 1);
    return i;
}

/* Inserts key -> value unless present; returns 0 when inserted, 1 when the key was there. */
static int str_map_put(str_map *m, const char *key, size_t len, int value) {
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

static int str_map_get(const str_map *m, const char *key, size_t len, int *value) {
    size_t i = str_map_slot(m, key, len);
    if (!m->keys[i]) return 0;
    *value = m->values[i];
    return 1;
}

struct tokenizer {
    str_map vocab;            /* symbol string (UTF-8) -> id */
    str_map merges;           /* "left right" -> rank */
    char **id_bytes;          /* id -> raw bytes, NULL for ids not in the vocab */
    int *id_len;
    int n_ids;                /* max id + 1 */
    char byte_sym[256][3];    /* UTF-8 of the symbol of each byte, NUL-terminated */
    unsigned char byte_sym_len[256];
    short sym_byte[512];      /* code point (< 512) -> byte, -1 when not a byte symbol */
    pcre2_code *re;
};

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes map to themselves, the other 68 bytes to
 * code points 256.. in order, so every byte has a visible, non-space symbol. */
static void byte_symbols_init(tokenizer *t) {
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

/* Turns a vocab symbol string back into the bytes it stands for. Characters outside the byte
 * map (not in GPT-2's vocab, but possible in others) are kept as their own UTF-8. */
static char *symbol_to_bytes(const tokenizer *t, const char *s, size_t len, int *out_len) {
    char *out = xmalloc(len + 1);
    int n = 0;
    for (size_t i = 0; i < len;) {
        unsigned char c = (unsigned char)s[i];
        if ((c & 0xE0) == 0xC0 && i + 1 < len) {
            int code = ((c & 0x1F) << 6) | ((unsigned char)s[i + 1] & 0x3F);
            if (code < 512 && t->sym_byte[code] >= 0) {
                out[n++] = (char)t->sym_byte[code];
                i += 2;
                continue;
            }
        } else if (c < 0x80 && t->sym_byte[c] >= 0) {
            out[n++] = (char)c;
            i++;
            continue;
        }
        out[n++] = (char)c;
        i++;
    }
    out[n] = '\0';
    *out_len = n;
    return out;
}

void tokenizer_free(tokenizer *t) {
    if (!t) return;
    str_map_free(&t->vocab);
    str_map_free(&t->merges);
    for (int i = 0; i < t->n_ids; i++) free(t->id_bytes[i]);
    free(t->id_bytes);
    free(t->id_len);
    if (t->re) pcre2_code_free(t->re);
    free(t);
}

static int vocab_parse(tokenizer *t, const char *vocab_json) {
    json_error_t jerr;
    json_t *root = json_loads(vocab_json, 0, &jerr);
    if (!root || !json_is_object(root)) {
        error_set("vocab.json:%d: %s", root ? 1 : jerr.line,
                  root ? "not a JSON object of token -> id" : jerr.text);
        json_decref(root);
        return STATUS_BAD_INPUT;
    }
    str_map_init(&t->vocab, json_object_size(root));
    const char *key;
    json_t *value;
    int max_id = -1;
    json_object_foreach(root, key, value) {
        json_int_t id = json_integer_value(value);
        if (!json_is_integer(value) || id < 0 || id >= (1 << 30)) {
            error_set("vocab.json: token '%s' needs a non-negative integer id", key);
            json_decref(root);
            return STATUS_BAD_INPUT;
        }
        str_map_put(&t->vocab, key, strlen(key), (int)id);
        if (id > max_id) max_id = (int)id;
    }
    t->n_ids = max_id + 1;
    t->id_bytes = xcalloc((unsigned long)(t->n_ids ? t->n_ids : 1), sizeof *t->id_bytes);
    t->id_len = xcalloc((unsigned long)(t->n_ids ? t->n_ids : 1), sizeof *t->id_len);
    json_object_foreach(root, key, value) {
        int id = (int)json_integer_value(value);
        free(t->id_bytes[id]);
        t->id_bytes[id] = symbol_to_bytes(t, key, strlen(key), &t->id_len[id]);
    }
    json_decref(root);
    return STATUS_OK;
}

static int merges_parse(tokenizer *t, const char *merges_txt) {
    size_t lines = 1;
    for (const char *p = merges_txt; *p; p++) lines += *p == '\n';
    str_map_init(&t->merges, lines);
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
            /* a repeated merge keeps its first rank (real merges files have none) */
            str_map_put(&t->merges, p, len, rank++);
        }
        if (!end) break;
        p = end + 1;
    }
    return STATUS_OK;
}

int tokenizer_load_strings(tokenizer **out, const char *vocab_json, const char *merges_txt) {
    *out = NULL;
    tokenizer *t = xcalloc(1, sizeof *t);
    byte_symbols_init(t);
    int rc = vocab_parse(t, vocab_json);
    if (rc == STATUS_OK) rc = merges_parse(t, merges_txt);
    if (rc == STATUS_OK) {
        int errcode;
        PCRE2_SIZE erroff;
        /* MATCH_INVALID_UTF: invalid UTF-8 is skipped rather than failing the whole match, so
         * encode can keep those bytes as pieces of their own */
        t->re = pcre2_compile((PCRE2_SPTR)gpt2_pattern, PCRE2_ZERO_TERMINATED,
                              PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &errcode, &erroff,
                              NULL);
        CHECK(t->re, "GPT-2 pattern failed to compile (error %d at %zu)", errcode,
              (size_t)erroff);
        pcre2_jit_compile(t->re, PCRE2_JIT_COMPLETE); /* optional speed-up */
    }
    if (rc != STATUS_OK) {
        tokenizer_free(t);
        return rc;
    }
    *out = t;
    return STATUS_OK;
}

int tokenizer_max_id(const tokenizer *t) { return t->n_ids - 1; }

/* A growing int32 array for the output ids. */
typedef struct {
    int32_t *ids;
    int n, cap;
} id_list;

static void id_list_push(id_list *l, int32_t id) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 64;
        int32_t *grown = realloc(l->ids, (size_t)l->cap * sizeof *grown);
        CHECK(grown, "out of memory encoding text");
        l->ids = grown;
    }
    l->ids[l->n++] = id;
}

/* Rank of merging symbols a and b (strings inside word), or -1. */
static int pair_rank(const tokenizer *t, const char *word, const int *start, const int *len,
                     int a, int b, char *scratch) {
    memcpy(scratch, word + start[a], (size_t)len[a]);
    scratch[len[a]] = ' ';
    memcpy(scratch + len[a] + 1, word + start[b], (size_t)len[b]);
    int rank;
    return str_map_get(&t->merges, scratch, (size_t)(len[a] + 1 + len[b]), &rank) ? rank : -1;
}

/* Spells the bytes as byte symbols into word; symbol i is word[start[i], +len[i]). Returns the
 * number of symbols (n). */
static int word_spell(const tokenizer *t, const unsigned char *bytes, size_t n, char *word,
                      int *start, int *len) {
    int ns = 0;
    size_t pos = 0;
    for (size_t i = 0; i < n; i++) {
        start[ns] = (int)pos;
        len[ns++] = t->byte_sym_len[bytes[i]];
        memcpy(word + pos, t->byte_sym[bytes[i]], t->byte_sym_len[bytes[i]]);
        pos += t->byte_sym_len[bytes[i]];
    }
    return ns;
}

/* Position of the adjacent pair with the best (lowest) merge rank, or -1 when none merges. */
static int best_pair(const tokenizer *t, const char *word, const int *start, const int *len,
                     int ns, char *scratch) {
    int best = -1, best_at = -1;
    for (int i = 0; i + 1 < ns; i++) {
        int r = pair_rank(t, word, start, len, i, i + 1, scratch);
        if (r >= 0 && (best < 0 || r < best)) {
            best = r;
            best_at = i;
        }
    }
    return best_at;
}

/* Merges every occurrence of the pair at `at`, left to right, as GPT-2 does. Returns the new
 * number of symbols. */
static int pair_merge_all(const char *word, int *start, int *len, int ns, int at) {
    int la = len[at], lb = len[at + 1];
    char *first = xmalloc((size_t)(la + lb));
    memcpy(first, word + start[at], (size_t)(la + lb));
    int w = 0;
    for (int i = 0; i < ns; i++) {
        if (i + 1 < ns && len[i] == la && len[i + 1] == lb &&
            memcmp(word + start[i], first, (size_t)la) == 0 &&
            memcmp(word + start[i + 1], first + la, (size_t)lb) == 0) {
            start[w] = start[i];
            len[w++] = la + lb;
            i++;
        } else {
            start[w] = start[i];
            len[w++] = len[i];
        }
    }
    free(first);
    return w;
}

/* Appends the vocab id of every symbol; STATUS_BAD_INPUT when one is missing. */
static int symbols_lookup(const tokenizer *t, const char *word, const int *start, const int *len,
                          int ns, id_list *out) {
    for (int i = 0; i < ns; i++) {
        int id;
        if (!str_map_get(&t->vocab, word + start[i], (size_t)len[i], &id)) {
            error_set("tokenizer: symbol '%.*s' is not in vocab.json (the vocab must cover all "
                      "256 byte symbols)", len[i], word + start[i]);
            return STATUS_BAD_INPUT;
        }
        id_list_push(out, id);
    }
    return STATUS_OK;
}

/* BPE over one pre-token: bytes -> symbols, merge the best-ranked pair everywhere it occurs,
 * repeat, then look every symbol up. */
static int piece_encode(const tokenizer *t, const unsigned char *bytes, size_t n, id_list *out) {
    size_t wlen = 0;
    for (size_t i = 0; i < n; i++) wlen += t->byte_sym_len[bytes[i]];
    char *word = xmalloc(wlen + 1);
    int *start = xmalloc(n * sizeof(int)), *len = xmalloc(n * sizeof(int));
    char *scratch = xmalloc(wlen + 2);
    int ns = word_spell(t, bytes, n, word, start, len);
    while (ns > 1) {
        int at = best_pair(t, word, start, len, ns, scratch);
        if (at < 0) break;
        ns = pair_merge_all(word, start, len, ns, at);
    }
    int rc = symbols_lookup(t, word, start, len, ns, out);
    free(word);
    free(start);
    free(len);
    free(scratch);
    return rc;
}

int tokenizer_encode(const tokenizer *t, const char *text, size_t len, int32_t **ids, int *n) {
    *ids = NULL;
    *n = 0;
    id_list out = {0};
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(t->re, NULL);
    CHECK(md, "out of memory for PCRE2 match data");
    const unsigned char *s = (const unsigned char *)text;
    size_t offset = 0;
    int rc = STATUS_OK;
    while (offset < len && rc == STATUS_OK) {
        int m = pcre2_match(t->re, s, len, offset, 0, md, NULL);
        size_t mbegin = len, mend = len;
        if (m >= 0) {
            PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
            mbegin = ov[0];
            mend = ov[1];
        } else {
            CHECK(m == PCRE2_ERROR_NOMATCH, "PCRE2 match failed with error %d", m);
        }
        /* bytes no alternative matched (only invalid UTF-8) form a piece of their own */
        if (mbegin > offset) rc = piece_encode(t, s + offset, mbegin - offset, &out);
        if (rc == STATUS_OK && mend > mbegin) rc = piece_encode(t, s + mbegin, mend - mbegin, &out);
        offset = mend > offset ? mend : len;
    }
    pcre2_match_data_free(md);
    if (rc != STATUS_OK) {
        free(out.ids);
        return rc;
    }
    *ids = out.ids ? out.ids : xmalloc(sizeof(int32_t));
    *n = out.n;
    return STATUS_OK;
}

char *tokenizer_decode(const tokenizer *t, const int32_t *ids, int n, size_t *len) {
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= t->n_ids || !t->id_bytes[ids[i]]) {
            error_set("tokenizer: token id %d is not in the vocab", ids[i]);
            return NULL;
        }
        total += (size_t)t->id_len[ids[i]];
    }
    char *out = xmalloc(total + 1);
    size_t pos = 0;
    for (int i = 0; i < n; i++) {
        memcpy(out + pos, t->id_bytes[ids[i]], (size_t)t->id_len[ids[i]]);
        pos += (size_t)t->id_len[ids[i]];
    }
    out[pos] = '\0';
    if (len) *len = pos;
    return out;
}
