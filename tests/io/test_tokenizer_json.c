/* Hugging Face tokenizer.json (byte-level BPE): known ids derived by hand from the merges of
 * tests/io/make_tokenizer_json.py, merges given as strings and as pairs, the same ids as the
 * equivalent vocab.json + merges.txt, added and special tokens, the U+180E pre-tokenizer case,
 * round trips, refusals of what is not supported, the tokenizer stored by import-hf, and the
 * merge loop's order and O(n log n) cost on long pieces. Needs the tok_json fixture
 * (TOKJSON_FIXTURES) and, for the import, the ckpt_hf one (CKPT_FIXTURES). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/check.h"
#include "cli/cli.h"
#include "io/checkpoint.h"
#include "io/tokenizer.h"
#include "io/tokenizer_impl.h"

static const char *fixtures(void) {
    const char *dir = getenv("TOKJSON_FIXTURES");
    return dir ? dir : "tok_json_fixtures";
}

static tokenizer *load(const char *rel) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", fixtures(), rel);
    tokenizer *t = NULL;
    if (tokenizer_load_file(&t, path) != 0) fail_msg("%s", error_message());
    return t;
}

/* Encodes len bytes of text and compares with the n expected ids. */
static void expect_ids(const tokenizer *t, const char *text, size_t len, int n, ...) {
    int32_t *ids;
    int got;
    if (tokenizer_encode(t, text, len, &ids, &got) != 0) fail_msg("%s", error_message());
    va_list ap;
    va_start(ap, n);
    int ok = got == n;
    for (int i = 0; ok && i < n; i++) ok = ids[i] == va_arg(ap, int);
    va_end(ap);
    if (!ok) {
        char buf[512];
        size_t used = 0;
        for (int i = 0; i < got && used < sizeof buf - 16; i++)
            used += (size_t)snprintf(buf + used, sizeof buf - used, " %d", ids[i]);
        fail_msg("'%.*s' encoded to [%s ] (%d ids, expected %d)", (int)len, text, buf, got, n);
    }
    free(ids);
}
#define EXPECT(t, text, ...) expect_ids(t, text, sizeof text - 1, __VA_ARGS__)

/* Merges of the fixture (id = 256 + rank; Ġ is the space): 0 "Ġ t", 1 "h e", 2 "Ġt he",
 * 3 "l l", 4 "e ll", 5 "h ell", 6 "hell o", 7 "Ġ w", 8 "o r", 9 "l d", 10 "Ġw or",
 * 11 "Ġwor ld", 12 "Ġ á" (space + byte 0xE1), 13 "1 2", 14 "12 3", 15 "Ġ Ġ". A byte b is id b;
 * "Ġxyz" is 272, made by no merge. Added: <|begin_of_text|> 273, <|eot_id|> 274 (special),
 * <mask> 275 (not special, lstrip and rstrip). The Llama 3 file splits with Llama 3's regex
 * and has ignore_merges; the GPT-2-style one splits with GPT-2's and does not. */
static void llama3_by_hand(const tokenizer *t) {
    /* "Hello" then " world": H e l l o has no "H e"; ll (3), then e+ll (4): H ell o.
     * Ġ w o r l d: Ġw (7), or (8), ld (9), Ġwor (10), Ġworld (11). */
    EXPECT(t, "Hello world", 4, 'H', 260, 'o', 267);
    /* added tokens are cut out first; "hello" is a vocab entry, and ignore_merges takes it
     * whole (the merges alone would give he, ll, o: "h e" outranks "e ll") */
    EXPECT(t, "<|begin_of_text|>hello the world<|eot_id|>", 5, 273, 262, 258, 267, 274);
    /* " xyz" is one piece of the letter rule and a vocab entry: one token, no merge needed */
    EXPECT(t, " xyz", 1, 272);
    /* \p{N}{1,3}: "3123" is "312" + "3"; only "1 2" merges inside the first piece */
    EXPECT(t, "3123", 3, '3', 269, '3');
    /* (?i:'ll): "'LL" is a contraction piece; "I" a letter piece */
    EXPECT(t, "I'LL", 4, 'I', '\'', 'L', 'L');
    /* <mask> takes the spaces on both sides (lstrip, rstrip) */
    EXPECT(t, "a <mask> b", 3, 'a', 275, 'b');
    /* an unfinished special token is text; leftmost-longest matching finds the real one */
    EXPECT(t, "<|eot_id|><|eot_id", 9, 274, '<', '|', 'e', 'o', 't', '_', 'i', 'd');
    EXPECT(t, "<<|eot_id|>", 2, '<', 274);
    /* \s+(?!\S) leaves the last space to the word; the two before merge (15) */
    EXPECT(t, "a   b", 4, 'a', 271, ' ', 'b');
    EXPECT(t, "", 0);
}

static void test_llama3_by_hand(void **state) {
    (void)state;
    const char *files[] = {"llama3-strings/tokenizer.json", "llama3-pairs/tokenizer.json"};
    for (int f = 0; f < 2; f++) {
        tokenizer *t = load(files[f]);
        llama3_by_hand(t);
        assert_int_equal(tokenizer_max_id(t), 275);
        tokenizer_free(t);
    }
}

static void test_gpt2_style_by_hand(void **state) {
    (void)state;
    tokenizer *t = load("gpt2-style/tokenizer.json");
    /* no ignore_merges: h e l l o -> he (1), ll (3); "he ll" is no merge */
    EXPECT(t, "hello the world", 5, 257, 259, 'o', 258, 267);
    /* ` ?\p{N}+` keeps "3123" whole: 3 12 3, then 12+3 (14) */
    EXPECT(t, "3123", 2, '3', 270);
    EXPECT(t, " xyz", 4, ' ', 'x', 'y', 'z');
    /* only its own added token is special here; <|eot_id|> is plain text */
    EXPECT(t, "<|endoftext|>x", 2, 273, 'x');
    EXPECT(t, "hello!", 4, 257, 259, 'o', '!');
    tokenizer_free(t);
}

/* The pre-tokenizer's \s is Unicode White_Space, as in Oniguruma (Hugging Face) and Rust's
 * regex (tiktoken), where U+180E (bytes E1 A0 8E) has not been whitespace since Unicode 6.3.
 * " \u180ea" under GPT-2's regex: ` ?\p{L}+` fails at U+180E (a format character, Cf), and
 * ` ?[^\s\p{L}\p{N}]+` takes the space and U+180E, stopping at "a": pieces " \u180e", "a".
 * Llama 3's regex gets the same pieces: `[^\r\n\p{L}\p{N}]?\p{L}+` fails the same way, and
 * ` ?[^\s\p{L}\p{N}]+[\r\n]*` matches " \u180e". The first piece is Ġ á A0 8E, and "Ġ á"
 * merges (rank 12, id 268): [268, 0xA0, 0x8E, 'a']. With PCRE2's own \s, which counts U+180E
 * as space, ` ?[^\s...]` fails, `\s+(?!\S)` matches just " ", and the pieces are " ",
 * "\u180e", "a": [' ', 0xE1, 0xA0, 0x8E, 'a'], the ids the reference does not give. */
static void test_u180e(void **state) {
    (void)state;
    const char *files[] = {"llama3-strings/tokenizer.json", "gpt2-style/tokenizer.json",
                           "gpt2-style/vocab.json"};
    for (int f = 0; f < 3; f++) {
        tokenizer *t = load(files[f]);
        EXPECT(t, " \xe1\xa0\x8e" "a", 4, 268, 0xA0, 0x8E, 'a');
        /* U+2000 (E2 80 80) is White_Space: `\s+(?!\S)` gives " ", then U+2000 goes with "a"
         * (Llama 3: [^\r\n\p{L}\p{N}]?\p{L}+) or alone (GPT-2: \s+ then " ?\p{L}+" for a) */
        EXPECT(t, " \xe2\x80\x80" "a", 5, ' ', 0xE2, 0x80, 0x80, 'a');
        tokenizer_free(t);
    }
}

/* Deterministic pseudo-random texts: letters of the merges, spaces, digits, apostrophes, tabs,
 * newlines, multi-byte characters (U+180E, NBSP, U+2000, é, 中, an emoji) and stray bytes. */
static size_t random_text(uint64_t *x, char *buf, size_t cap, int with_added) {
    static const char *const parts[] = {"h", "e", "l", "o", "w", "r", "d", "t", " ", " ", "  ",
                                        "1", "2", "3", "'", "'ll", "'S", "\t", "\n", "\r\n",
                                        "\xe1\xa0\x8e", "\xc2\xa0", "\xe2\x80\x80", "\xc3\xa9",
                                        "\xe4\xb8\xad", "\xf0\x9f\x98\x80", "\xff", "\x80", "x",
                                        "!", "?", "<", "|", "<|eot_id|>", "<|begin_of_text|>"};
    int n_parts = (int)(sizeof parts / sizeof *parts) - (with_added ? 0 : 2);
    size_t len = 0;
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    int count = 1 + (int)(*x % 40);
    for (int i = 0; i < count; i++) {
        *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
        const char *p = parts[*x % (uint64_t)n_parts];
        if (len + strlen(p) >= cap) break;
        memcpy(buf + len, p, strlen(p));
        len += strlen(p);
    }
    return len;
}

static void same_ids(const tokenizer *a, const tokenizer *b, const char *text, size_t len) {
    int32_t *ia, *ib;
    int na, nb;
    assert_int_equal(tokenizer_encode(a, text, len, &ia, &na), 0);
    assert_int_equal(tokenizer_encode(b, text, len, &ib, &nb), 0);
    if (na != nb || memcmp(ia, ib, (size_t)na * sizeof *ia) != 0)
        fail_msg("'%.*s': %d ids against %d, or different ids", (int)len, text, na, nb);
    free(ia);
    free(ib);
}

/* Merges as "a b" strings and as ["a", "b"] pairs are the same tokenizer; GPT-2's layout as a
 * tokenizer.json encodes as vocab.json + merges.txt do (text without the added token). */
static void test_equivalent_files(void **state) {
    (void)state;
    tokenizer *strs = load("llama3-strings/tokenizer.json");
    tokenizer *pairs = load("llama3-pairs/tokenizer.json");
    tokenizer *json = load("gpt2-style/tokenizer.json");
    tokenizer *files = load("gpt2-style/vocab.json"); /* merges.txt beside it */
    char vpath[1024], mpath[1024], buf[512];
    snprintf(vpath, sizeof vpath, "%s/gpt2-style/vocab.json", fixtures());
    snprintf(mpath, sizeof mpath, "%s/gpt2-style/merges.txt", fixtures());
    FILE *fv = fopen(vpath, "rb"), *fm = fopen(mpath, "rb");
    assert_true(fv && fm);
    static char vtext[1 << 16], mtext[1 << 14];
    vtext[fread(vtext, 1, sizeof vtext - 1, fv)] = '\0';
    mtext[fread(mtext, 1, sizeof mtext - 1, fm)] = '\0';
    fclose(fv);
    fclose(fm);
    tokenizer *strings = NULL;
    assert_int_equal(tokenizer_load_strings(&strings, vtext, mtext), 0);
    tokenizer *dir = load("gpt2-style"); /* a directory: its tokenizer.json, not vocab.json */
    EXPECT(dir, "<|endoftext|>", 1, 273);
    tokenizer_free(dir);
    uint64_t x = 0x9E3779B97F4A7C15ull;
    for (int rep = 0; rep < 2000; rep++) {
        size_t len = random_text(&x, buf, sizeof buf, 1);
        same_ids(strs, pairs, buf, len);
        len = random_text(&x, buf, sizeof buf, 0);
        same_ids(json, files, buf, len);
        same_ids(json, strings, buf, len);
    }
    tokenizer_free(strs);
    tokenizer_free(pairs);
    tokenizer_free(json);
    tokenizer_free(files);
    tokenizer_free(strings);
}

static void round_trip(const tokenizer *t, const char *text, size_t len) {
    int32_t *ids;
    int n;
    assert_int_equal(tokenizer_encode(t, text, len, &ids, &n), 0);
    size_t out_len = 0;
    char *back = tokenizer_decode(t, ids, n, &out_len);
    assert_non_null(back);
    if (out_len != len || memcmp(back, text, len) != 0)
        fail_msg("round trip changed '%.*s' into '%.*s'", (int)len, text, (int)out_len, back);
    free(back);
    free(ids);
}

/* Decoding is byte-level for vocab ids and the text itself for added ones, so encode then
 * decode gives back the input, special tokens included; skip_special leaves those out. */
static void test_round_trips_and_specials(void **state) {
    (void)state;
    tokenizer *t = load("llama3-pairs/tokenizer.json");
    static const char *texts[] = {
        "<|begin_of_text|>Hello, world!<|eot_id|>",
        "Ünïcödé naïve café, Русский, 中文文本, العربية, emoji 😀 👍🏽 👨‍👩‍👧‍👦",
        "tabs\tand\r\nCRLF\n\n\nend   ", "nbsp\xc2\xa0 ideographic\xe3\x80\x80 x\xe1\xa0\x8ey",
        "<|eot_id|><|eot_id|><|begin_of_text|>", "<|eot_id", "I'LL we'd 12345678",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        round_trip(t, texts[i], strlen(texts[i]));
    char all[256], buf[512];
    for (int b = 0; b < 256; b++) all[b] = (char)b;
    round_trip(t, all, sizeof all);
    uint64_t x = 88172645463325252ull;
    for (int rep = 0; rep < 1000; rep++) round_trip(t, buf, random_text(&x, buf, sizeof buf, 1));

    const int32_t ids[] = {273, 257, 274, 'x', 275};
    assert_true(tokenizer_is_special(t, 273) && tokenizer_is_special(t, 274));
    assert_false(tokenizer_is_special(t, 275) || tokenizer_is_special(t, 257) ||
                 tokenizer_is_special(t, -1) || tokenizer_is_special(t, 99999));
    size_t len;
    char *s = tokenizer_decode_text(t, ids, 5, TOKENIZER_SKIP_SPECIAL, &len);
    assert_string_equal(s, "hex<mask>");
    assert_int_equal(len, 9);
    free(s);
    s = tokenizer_decode(t, ids, 5, &len);
    assert_string_equal(s, "<|begin_of_text|>he<|eot_id|>x<mask>");
    free(s);
    const int32_t unknown[] = {257, 276, 274, -3};
    assert_null(tokenizer_decode(t, unknown, 4, &len));
    assert_non_null(strstr(error_message(), "276"));
    s = tokenizer_decode_text(t, unknown, 4, TOKENIZER_SKIP_UNKNOWN, &len);
    assert_string_equal(s, "he<|eot_id|>"); /* as Hugging Face's decode drops them */
    free(s);
    tokenizer_free(t);
}

/* Qwen2's NFC normalizer runs on the text between the raw added tokens, before the normalized
 * added tokens are looked for and the text is split: e + U+0301 is é (C3 A9), A + U+030A and the
 * Angstrom sign U+212B are Å, so "[Å]" (276, normalized) matches all three spellings, and
 * U+212B U+0301 composes on to U+01FA (C7 BA). Qwen2's regex splits digits one by one. */
static void test_normalizer(void **state) {
    (void)state;
    tokenizer *t = load("qwen2-nfc/tokenizer.json");
    EXPECT(t, "e\xcc\x81", 2, 0xC3, 0xA9);
    EXPECT(t, "[A\xcc\x8a]", 1, 276);
    EXPECT(t, "[\xe2\x84\xab]", 1, 276);
    EXPECT(t, "<|im_start|>e\xcc\x81<|im_end|>", 4, 274, 0xC3, 0xA9, 275);
    EXPECT(t, "caf\xc3\xa9 \xe2\x84\xab\xcc\x81", 8, 'c', 'a', 'f', 0xC3, 0xA9, ' ', 0xC7, 0xBA);
    EXPECT(t, "12", 2, '1', '2');
    /* text that is not UTF-8 keeps its bad bytes; the valid runs around them are normalised */
    EXPECT(t, "e\xcc\x81\xff" "e\xcc\x81", 5, 0xC3, 0xA9, 0xFF, 0xC3, 0xA9);
    static const char mixed[] = "ascii \xff\x80 and caf\xc3\xa9";
    round_trip(t, mixed, sizeof mixed - 1);
    tokenizer_free(t);
    t = load("llama3-strings/tokenizer.json"); /* no normalizer: the mark stays a mark */
    EXPECT(t, "e\xcc\x81", 3, 'e', 0xCC, 0x81);
    tokenizer_free(t);
}

/* Decodes n ids (with flags) and compares with want. */
static void expect_text(const tokenizer *t, const int32_t *ids, int n, unsigned flags,
                        const char *want) {
    size_t len = 0;
    char *s = tokenizer_decode_text(t, ids, n, flags, &len);
    assert_non_null(s);
    if (len != strlen(want) || strcmp(s, want) != 0)
        fail_msg("decoded '%s', expected '%s'", s, want);
    free(s);
}

/* SentencePiece BPE as Hugging Face writes it (make_tokenizer_json.py LLAMA2_*): <unk> 0, <s> 1,
 * </s> 2, byte b is <0xBB> = 3 + b, then ▁ 259, a 260, b 261, c 262, é 263, ab 264, ▁a 265,
 * ▁ab 266, abc 267; merges by rank: 0 "a b", 1 "▁ a", 2 "▁a b", 3 "▁ ab", 4 "ab c". The text
 * gets "▁" in front and for every space; the pieces start as characters. The ids were checked
 * against Hugging Face's tokenizers 0.23 on the same file. */
static void test_llama2_style(void **state) {
    (void)state;
    tokenizer *t = load("llama2-style/tokenizer.json");
    EXPECT(t, "ab", 1, 266);               /* ▁ a b -> ▁ ab (rank 0) -> ▁ab (rank 3) */
    EXPECT(t, "abc ab", 3, 266, 262, 266); /* ▁ab (rank 3) wins over abc (rank 4) */
    EXPECT(t, "\xc3\xa9", 2, 259, 263);    /* é is in the vocab */
    EXPECT(t, "\xc3\xbc", 3, 259, 3 + 0xC3, 3 + 0xBC); /* ü is not: its bytes */
    EXPECT(t, "<s>a", 2, 1, 265);                      /* the text after <s> gets its own ▁ */
    EXPECT(t, "a  b ", 5, 265, 259, 259, 261, 259);
    EXPECT(t, " ", 2, 259, 259);
    EXPECT(t, "", 0);
    const int32_t abc_ab[] = {266, 262, 266}, u[] = {259, 3 + 0xC3, 3 + 0xBC}, s_a[] = {1, 265},
                  spaces[] = {265, 259, 259, 261, 259};
    expect_text(t, abc_ab, 3, 0, "abc ab"); /* ▁ -> space, the first one stripped */
    expect_text(t, u, 3, 0, "\xc3\xbc");    /* byte tokens fused back into UTF-8 */
    expect_text(t, s_a, 2, 0, "<s> a");     /* as Hugging Face: <s> comes first, no strip */
    expect_text(t, s_a, 2, TOKENIZER_SKIP_SPECIAL, "a");
    expect_text(t, spaces, 5, 0, "a  b ");
    static const char *texts[] = {"Hello, world!",
                                  "  two leading",
                                  "trailing  ",
                                  "\n\tx\r\n",
                                  "na\xc3\xafve \xe4\xb8\x96\xe7\x95\x8c \xf0\x9f\x9a\x80",
                                  "abcabc ab c",
                                  "\xff\xfe invalid"};
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        round_trip(t, texts[i], strlen(texts[i]));
    tokenizer_free(t);

    t = load("llama2-unk/tokenizer.json"); /* no byte fallback: <unk>, one per run (fuse_unk) */
    EXPECT(t, "\xc3\xbc", 2, 259, 0);
    EXPECT(t, "\xc3\xbc\xc3\xbc", 2, 259, 0);
    EXPECT(t,
           "\xc3\xbc"
           "a\xc3\xbc",
           4, 259, 0, 260, 0);
    tokenizer_free(t);
}

/* Each file changes one thing tripar does not implement; loading it names the key and value. */
static void test_unsupported(void **state) {
    (void)state;
    static const struct {
        const char *file, *message;
    } cases[] = {
        {"unigram", "model.type \"Unigram\" is not supported; allowed: BPE"},
        {"wordpiece", "model.type \"WordPiece\" is not supported"},
        {"lowercase", "normalizer.type \"Lowercase\" is not supported; allowed: null, NFC, NFD, "
                      "NFKC, NFKD"},
        {"metaspace", "pre_tokenizer.type \"Metaspace\" is not supported; allowed: Split, "
                      "ByteLevel, Sequence"},
        {"removed", "pre_tokenizer.pretokenizers[0].behavior \"Removed\" is not supported; "
                    "allowed: Isolated"},
        {"word_escape", "pre_tokenizer.pretokenizers[0].pattern: the escape '\\w' reads "
                        "differently"},
        {"byte_fallback", "model.byte_fallback true is not supported"},
        {"no_bytelevel", "pre_tokenizer has no ByteLevel step"},
        {"after_bytelevel", "pre_tokenizer.pretokenizers[1]: a step after ByteLevel"},
        {"decoder", "decoder.type \"Metaspace\" is not supported; allowed: ByteLevel"},
        {"single_word", "added_tokens[1].single_word true is not supported; allowed: false"},
        {"merge_missing", "model.merges[16]: 'xq' is not in model.vocab"},
        {"replace_regex", "normalizer.normalizers[1].pattern {\"Regex\":\" +\"} is not "
                          "supported; allowed: {\"String\": \"...\"}"},
        {"strip_unfused", "decoder.decoders[2]: a Strip before Fuse (it would strip every "
                          "token) is not supported"},
        {"strip_stop", "decoder.decoders[3]: stop must be 0"},
        {"chars_bytelevel_decoder", "pre_tokenizer has no ByteLevel step, so model.vocab is "
                                    "read as characters, but the decoder is ByteLevel"},
        {"strip_not_last", "decoder.decoders[4]: a decoder step after Strip is not supported"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/unsupported/%s.json", fixtures(), cases[i].file);
        tokenizer *t = (tokenizer *)path;
        assert_int_equal(tokenizer_load_file(&t, path), STATUS_BAD_INPUT);
        assert_null(t);
        if (strncmp(error_message(), path, strlen(path)) != 0 ||
            !strstr(error_message(), cases[i].message))
            fail_msg("%s: got '%s', expected it to name the file and '%s'", cases[i].file,
                     error_message(), cases[i].message);
    }
    tokenizer *t = NULL;
    assert_int_equal(tokenizer_load_json(&t, "{\"model\": 3", "x.json"), STATUS_BAD_INPUT);
    assert_non_null(strstr(error_message(), "x.json:1:"));
    /* ids past 2^24 - 1 are refused: the decode tables hold one entry per id (the fuzzer's
     * find: a single id of 222222222 asked for gigabytes) */
    assert_int_equal(tokenizer_load_json(&t,
                                         "{\"model\": {\"type\": \"BPE\", \"vocab\": "
                                         "{\"a\": 16777216}, \"merges\": []}}",
                                         "big.json"),
                     STATUS_BAD_INPUT);
    assert_non_null(strstr(error_message(), "token 'a' needs an integer id from 0 to 16777215"));
    assert_int_equal(tokenizer_load_json(&t,
                                         "{\"added_tokens\": [{\"id\": 222222222, "
                                         "\"content\": \"<s>\"}], \"model\": {\"type\": "
                                         "\"BPE\", \"vocab\": {\"a\": 0}, \"merges\": []}}",
                                         "big.json"),
                     STATUS_BAD_INPUT);
    assert_non_null(strstr(error_message(), "added_tokens[0]: needs an integer id from 0 to 16777215"));
    /* a split pattern that ends in a lone backslash is refused, naming the step (the fuzzer's
     * find: it stopped the process as a rewrite overflow) */
    assert_int_equal(tokenizer_load_json(&t,
                                         "{\"pre_tokenizer\": {\"type\": \"Sequence\", "
                                         "\"pretokenizers\": [{\"type\": \"Split\", "
                                         "\"pattern\": {\"Regex\": \"a|\\\\\"}, "
                                         "\"behavior\": \"Isolated\", \"invert\": false}, "
                                         "{\"type\": \"ByteLevel\"}]}, \"model\": "
                                         "{\"type\": \"BPE\", \"vocab\": {\"a\": 0}, "
                                         "\"merges\": []}}",
                                         "slash.json"),
                     STATUS_BAD_INPUT);
    assert_null(t);
    assert_non_null(strstr(error_message(), "pattern ends in a lone backslash"));
    assert_int_equal(tokenizer_load_file(&t, "/nonexistent/tokenizer.json"), STATUS_BAD_INPUT);
    assert_non_null(strstr(error_message(), "/nonexistent/tokenizer.json"));
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/unsupported", fixtures());
    assert_int_equal(tokenizer_load_file(&t, dir), STATUS_BAD_INPUT);
    assert_non_null(strstr(error_message(), "a directory without tokenizer.json or vocab.json"));
}

/* import-hf stores tokenizer.json as /tokenizer/json; the checkpoint's tokenizer encodes as the
 * file does. The model files are those of the f32-mlp fixture (vocab 300), linked in. */
static void test_import_stores_json(void **state) {
    (void)state;
    const char *ck = getenv("CKPT_FIXTURES");
    char dir[] = "/tmp/tripar_tokjson_XXXXXX", from[1024], to[1024], out[1024];
    assert_non_null(mkdtemp(dir));
    const char *names[] = {"config.json", "model.safetensors"};
    for (int i = 0; i < 2; i++) {
        snprintf(from, sizeof from, "%s/f32-mlp/%s", ck ? ck : "ckpt_fixtures", names[i]);
        snprintf(to, sizeof to, "%s/%s", dir, names[i]);
        assert_int_equal(symlink(from, to), 0);
    }
    snprintf(from, sizeof from, "%s/llama3-pairs/tokenizer.json", fixtures());
    snprintf(to, sizeof to, "%s/tokenizer.json", dir);
    assert_int_equal(symlink(from, to), 0);
    snprintf(out, sizeof out, "%s/ck.h5", dir);
    char *argv[] = {"import-hf", dir, "--out", out, NULL};
    assert_int_equal(import_hf_main(4, argv), 0);
    char *vocab, *merges, *json;
    assert_int_equal(checkpoint_read_tokenizer(out, &vocab, &merges, &json), 0);
    assert_true(json && !vocab && !merges);
    free(json);
    tokenizer *u = NULL;
    assert_int_equal(checkpoint_load_tokenizer(&u, out), 0);
    llama3_by_hand(u);
    tokenizer_free(u);
    unlink(out);
    const char *links[] = {"config.json", "model.safetensors", "tokenizer.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(to, sizeof to, "%s/%s", dir, links[i]);
        unlink(to);
    }
    rmdir(dir);
}

/* ---- the merge loop ---------------------------------------------------------------------- */

typedef struct {
    int left[64], right[64], merged[64], n;
} merge_list;

static int naive_rank(const merge_list *ml, int a, int b) {
    for (int r = 0; r < ml->n; r++)
        if (ml->left[r] == a && ml->right[r] == b) return r;
    return -1;
}

/* Hugging Face / tiktoken: merge the leftmost of the lowest-ranked pairs, one at a time. */
static int naive_leftmost(const merge_list *ml, int *w, int n) {
    for (;;) {
        int best = -1, at = -1;
        for (int i = 0; i + 1 < n; i++) {
            int r = naive_rank(ml, w[i], w[i + 1]);
            if (r >= 0 && (best < 0 || r < best)) best = r, at = i;
        }
        if (best < 0) return n;
        w[at] = ml->merged[best];
        memmove(w + at + 1, w + at + 2, (size_t)(n - at - 2) * sizeof *w);
        n--;
    }
}

/* GPT-2's encoder.py: merge every occurrence of the lowest-ranked pair, left to right. */
static int naive_rounds(const merge_list *ml, int *w, int n) {
    for (;;) {
        int best = -1;
        for (int i = 0; i + 1 < n; i++) {
            int r = naive_rank(ml, w[i], w[i + 1]);
            if (r >= 0 && (best < 0 || r < best)) best = r;
        }
        if (best < 0) return n;
        int k = 0;
        for (int i = 0; i < n; i++) {
            if (i + 1 < n && w[i] == ml->left[best] && w[i + 1] == ml->right[best]) {
                w[k++] = ml->merged[best];
                i++;
            } else {
                w[k++] = w[i];
            }
        }
        n = k;
    }
}

/* Random merge lists over 4 base symbols, where a fifth of the merges make an id an earlier
 * merge made too (as "a bc" and "ab c" both make "abc"), so a merge can form a pair that ranks
 * before its own: there the two orders differ, and bpe_merge must give each. */
static void test_merge_orders(void **state) {
    (void)state;
    uint64_t x = 0x2545F4914F6CDD1Dull;
#define NEXT() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
    int differ = 0;
    bpe_work w;
    memset(&w, 0, sizeof w);
    for (int table = 0; table < 300; table++) {
        merge_list ml;
        memset(&ml, 0, sizeof ml);
        int n_ids = 4;
        tok_merge_map map;
        tok_merge_map_init(&map, 64);
        while (ml.n < 40) {
            int a = (int)(NEXT() % (uint64_t)n_ids), b = (int)(NEXT() % (uint64_t)n_ids);
            if (naive_rank(&ml, a, b) >= 0) continue;
            int shared = n_ids > 4 && NEXT() % 5 == 0;
            int m = shared ? 4 + (int)(NEXT() % (uint64_t)(n_ids - 4)) : n_ids++;
            ml.left[ml.n] = a, ml.right[ml.n] = b, ml.merged[ml.n] = m;
            tok_merge_map_put(&map, a, b, ml.n, m, 1);
            ml.n++;
        }
        for (int rep = 0; rep < 20; rep++) {
            int n = 1 + (int)(NEXT() % 40), ref_a[64], ref_b[64];
            int32_t got_a[64], got_b[64];
            for (int i = 0; i < n; i++)
                ref_a[i] = ref_b[i] = got_a[i] = got_b[i] = (int)(NEXT() % 4);
            int na = naive_leftmost(&ml, ref_a, n), nb = naive_rounds(&ml, ref_b, n);
            int ga = bpe_merge(&map, got_a, n, 0, &w), gb = bpe_merge(&map, got_b, n, 1, &w);
            assert_int_equal(ga, na);
            assert_int_equal(gb, nb);
            for (int i = 0; i < na; i++) assert_int_equal(got_a[i], ref_a[i]);
            for (int i = 0; i < nb; i++) assert_int_equal(got_b[i], ref_b[i]);
            differ += na != nb || memcmp(ref_a, ref_b, (size_t)na * sizeof *ref_a) != 0;
        }
        tok_merge_map_free(&map);
    }
#undef NEXT
    bpe_work_free(&w);
    assert_true(differ > 0); /* the tables did reach the case where the orders part */
}

static double seconds_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

/* One piece of n letters of the merges, no spaces: heap steps of merging it. */
static uint64_t merge_steps(const tokenizer *t, size_t n, double *secs) {
    int32_t *ids = malloc(n * sizeof *ids);
    uint64_t x = 0xDEADBEEFCAFEull;
    const char letters[] = "helowrd";
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        ids[i] = t->byte_id[(unsigned char)letters[x % 7]];
    }
    bpe_work w;
    memset(&w, 0, sizeof w);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int left = bpe_merge(&t->merges, ids, (int)n, 0, &w);
    *secs = seconds_since(&t0);
    assert_true(left > 0 && (size_t)left < n);
    uint64_t steps = w.steps;
    bpe_work_free(&w);
    free(ids);
    return steps;
}

/* The merge loop was quadratic in a piece's length (a 1 MB word took minutes). Now 16 times the
 * piece costs about 16 * log(16n)/log(n) (~20) times the heap steps, asserted below 32;
 * quadratic would be 256. Timings are printed, never asserted: this machine is shared. */
static void test_long_piece_cost(void **state) {
    (void)state;
    tokenizer *t = load("llama3-strings/tokenizer.json");
    double s_small, s_big;
    uint64_t small = merge_steps(t, 64 << 10, &s_small), big = merge_steps(t, 1 << 20, &s_big);
    printf("merge loop: 64 KiB piece %llu heap steps (%.3f s), 1 MiB piece %llu (%.3f s), "
           "ratio %.1f for 16x the length\n",
           (unsigned long long)small, s_small, (unsigned long long)big, s_big,
           (double)big / (double)small);
    assert_true(big < 32 * small);

    size_t n = 1 << 20; /* the whole encoder on 1 MiB without a space: one piece */
    char *text = malloc(n);
    for (size_t i = 0; i < n; i++) text[i] = "helowrd"[(i * 7919) % 7];
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int32_t *ids;
    int count;
    assert_int_equal(tokenizer_encode(t, text, n, &ids, &count), 0);
    printf("tokenizer_encode: 1 MiB without spaces -> %d tokens in %.3f s\n", count,
           seconds_since(&t0));
    free(ids);
    free(text);
    tokenizer_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_llama3_by_hand),
        cmocka_unit_test(test_gpt2_style_by_hand),
        cmocka_unit_test(test_u180e),
        cmocka_unit_test(test_equivalent_files),
        cmocka_unit_test(test_round_trips_and_specials),
        cmocka_unit_test(test_normalizer),
        cmocka_unit_test(test_llama2_style),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_import_stores_json),
        cmocka_unit_test(test_merge_orders),
        cmocka_unit_test(test_long_piece_cost),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
