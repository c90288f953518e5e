/* GPT-2 byte-level BPE: hand-derived encodings for the small merges of make_hf_dir.py, exact
 * round trips of multilingual text, emoji, odd whitespace and arbitrary bytes, errors, and the
 * tokenizer stored in an imported checkpoint, and text read as bytes by a synthetic model.
 * Needs the ckpt_hf fixture (CKPT_FIXTURES). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/check.h"
#include "cli/cli.h"
#include "io/checkpoint.h"
#include "io/prompt.h"
#include "io/tokenizer.h"
#include "job/job.h"

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s (is CKPT_FIXTURES set?)", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static const char *fixtures(void) {
    const char *dir = getenv("CKPT_FIXTURES");
    return dir ? dir : "ckpt_fixtures";
}

static int setup(void **state) {
    char vpath[1024], mpath[1024];
    snprintf(vpath, sizeof vpath, "%s/f32/vocab.json", fixtures());
    snprintf(mpath, sizeof mpath, "%s/f32/merges.txt", fixtures());
    char *vocab = slurp(vpath), *merges = slurp(mpath);
    tokenizer *t = NULL;
    int rc = tokenizer_load_strings(&t, vocab, merges);
    free(vocab);
    free(merges);
    if (rc != 0) {
        fprintf(stderr, "%s\n", error_message());
        return -1;
    }
    *state = t;
    return 0;
}

static int teardown(void **state) {
    tokenizer_free(*state);
    return 0;
}

/* Encodes text and compares with the expected ids (n of them). */
static void expect_ids(const tokenizer *t, const char *text, int n, ...) {
    int32_t *ids;
    int got;
    assert_int_equal(tokenizer_encode(t, text, strlen(text), &ids, &got), 0);
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
        fail_msg("'%s' encoded to [%s ] (%d ids, expected %d)", text, buf, got, n);
    }
    free(ids);
}

/* Merge ranks of the fixture (id = 256 + rank): 0 "Ġ t", 1 "h e", 2 "Ġt he", 3 "l l",
 * 4 "e ll", 5 "h ell", 6 "hell o", 7 "i n", 8 "Ġ w", 9 "o r", 10 "l d", 11 "Ġw or",
 * 12 "Ġwor ld", 13 "o !", 14 "Ġ Ġ". A single byte b has id b (Ġ is the space, id 32). */
static void test_bpe_by_hand(void **state) {
    const tokenizer *t = *state;
    /* h e l l o: "h e" (1) first, then "l l" (3); "e ll" never applies because e is gone */
    expect_ids(t, "hello", 3, 257, 259, 'o');
    /* Ġ t h e -> Ġt h e -> Ġt he -> Ġthe */
    expect_ids(t, " the", 1, 258);
    /* Ġ w o r l d -> Ġw, or, ld, Ġwor, Ġworld */
    expect_ids(t, "hello the world", 5, 257, 259, 'o', 258, 268);
    /* H e l l o: no "H e"; ll, then e+ll, and no "H ell" */
    expect_ids(t, "Hello's", 5, 'H', 260, 'o', '\'', 's');
    /* every occurrence of the best pair merges in one pass, left to right */
    expect_ids(t, "llll", 2, 259, 259);
    expect_ids(t, "lll", 2, 259, 'l');
    expect_ids(t, "tin", 2, 't', 263);
    /* pre-tokenisation: "!" is its own piece, so "o !" cannot merge across it ... */
    expect_ids(t, "hello!", 4, 257, 259, 'o', '!');
    /* ... and "'ll" is a contraction piece */
    expect_ids(t, "I'll", 3, 'I', '\'', 259);
    /* \s+(?!\S) leaves the last space to the word: "a", "  ", " b" */
    expect_ids(t, "a   b", 4, 'a', 270, ' ', 'b');
    expect_ids(t, "a\tb", 3, 'a', '\t', 'b');
    /* trailing whitespace is one piece */
    expect_ids(t, "x  \n", 3, 'x', 270, '\n');
    /* UTF-8 bytes map to their own symbols: é = C3 A9 */
    expect_ids(t, "\xc3\xa9", 2, 0xC3, 0xA9);
    expect_ids(t, "", 0);
}

static void round_trip(const tokenizer *t, const char *text, size_t len) {
    int32_t *ids;
    int n;
    assert_int_equal(tokenizer_encode(t, text, len, &ids, &n), 0);
    size_t out_len = 0;
    char *back = tokenizer_decode(t, ids, n, &out_len);
    assert_non_null(back);
    if (out_len != len || memcmp(back, text, len) != 0)
        fail_msg("round trip changed a %zu-byte text into %zu bytes", len, out_len);
    assert_int_equal(back[out_len], '\0');
    free(back);
    free(ids);
}

static void test_round_trip_texts(void **state) {
    const tokenizer *t = *state;
    static const char *texts[] = {
        "Hello, world! The quick brown fox jumps over the lazy dog.",
        "Ünïcödé: naïve café, Straße, Ærøskøbing, Œuvre",
        "Русский текст, українська мова, ελληνικά",
        "中文文本，日本語のテキスト、한국어 텍스트",
        "العربية עברית हिन्दी (combining: e\xcc\x81, n\xcc\x83)",
        "emoji: 😀 👍🏽 👨‍👩‍👧‍👦 🇫🇷 🏳️‍🌈 ❤️",
        "tabs\tand\t\ttabs\r\nCRLF\r\n\r\nlines\n\n\nend",
        "   leading, multiple    spaces and trailing   ",
        "nbsp\xc2\xa0here, ideographic\xe3\x80\x80space, vt\x0b ff\x0c done \t \n ",
        "numbers 12345 3.14159 1,000,000 and 'quotes' \"double\" it's we'll they're",
        "code: for (int i = 0; i < n; i++) { x[i] += y[i] * 2; } // ok?!",
        " ", "\n", "a", "'", "''s", "'S", "  \t  ",
    };
    for (size_t i = 0; i < sizeof texts / sizeof *texts; i++)
        round_trip(t, texts[i], strlen(texts[i]));
}

static void test_round_trip_bytes(void **state) {
    const tokenizer *t = *state;
    /* invalid UTF-8 (lone continuation, truncated sequence, 0xFF) and NULs survive too */
    const char bad[] = "ok\xff\xfe x\x80y \xe2\x82 z\xc3 \0mid\0 end\xf0\x9f";
    round_trip(t, bad, sizeof bad - 1);
    char all[256];
    for (int b = 0; b < 256; b++) all[b] = (char)b;
    round_trip(t, all, sizeof all);
    /* deterministic pseudo-random byte strings biased towards spaces and ASCII letters */
    uint64_t x = 88172645463325252ull;
    char buf[200];
    for (int rep = 0; rep < 300; rep++) {
        size_t len = (size_t)(rep % 97) + 1;
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            int kind = (int)(x % 4);
            buf[i] = kind == 0 ? ' ' : kind == 1 ? (char)('a' + (x >> 8) % 26) : (char)(x >> 16);
        }
        round_trip(t, buf, len);
    }
}

static void test_errors(void **state) {
    const tokenizer *t = *state;
    int32_t bad_ids[2] = {257, 99999};
    size_t len;
    assert_null(tokenizer_decode(t, bad_ids, 2, &len));
    assert_non_null(strstr(error_message(), "99999"));
    int32_t neg[1] = {-1};
    assert_null(tokenizer_decode(t, neg, 1, &len));
    assert_int_equal(tokenizer_max_id(t), 270);

    tokenizer *u = NULL;
    assert_int_equal(tokenizer_load_strings(&u, "{\"a\": 0", "#version: 0.2\n"),
                     STATUS_BAD_INPUT);
    assert_null(u);
    assert_non_null(strstr(error_message(), "vocab.json"));
    assert_int_equal(tokenizer_load_strings(&u, "{\"a\": \"x\"}", ""), STATUS_BAD_INPUT);
    assert_non_null(strstr(error_message(), "'a'"));
    assert_int_equal(tokenizer_load_strings(&u, "{\"a\": 0, \"b\": 1, \"ab\": 2}",
                                            "#version: 0.2\na b\nab\n"),
                     STATUS_BAD_INPUT);
    assert_non_null(strstr(error_message(), "merges.txt:3"));
    /* merges work on vocab ids, so a merge's parts and result must be vocab entries */
    assert_int_equal(tokenizer_load_strings(&u, "{\"a\": 0, \"b\": 1}", "a b\n"),
                     STATUS_BAD_INPUT);
    assert_non_null(strstr(error_message(), "merges.txt:1: 'ab' is not in vocab.json"));
    /* a vocab without byte symbols loads, but cannot encode what it does not cover */
    assert_int_equal(tokenizer_load_strings(&u, "{\"a\": 0, \"b\": 1, \"ab\": 2}", "a b\n"), 0);
    int32_t *ids;
    int n;
    assert_int_equal(tokenizer_encode(u, "abc", 3, &ids, &n), STATUS_BAD_INPUT);
    assert_non_null(strstr(error_message(), "'c'"));
    assert_int_equal(tokenizer_encode(u, "abab", 4, &ids, &n), 0);
    assert_int_equal(n, 2);
    assert_true(ids[0] == 2 && ids[1] == 2);
    free(ids);
    tokenizer_free(u);
}

/* The importer stores vocab.json and merges.txt; loading them back encodes the same. */
static void test_checkpoint_tokenizer(void **state) {
    const tokenizer *t = *state;
    char src[1024], out[1024];
    snprintf(src, sizeof src, "%s/f16", fixtures());
    snprintf(out, sizeof out, "%s/tok_f16.h5", fixtures());
    char *argv[] = {"import-hf", src, "--out", out, NULL};
    assert_int_equal(import_hf_main(4, argv), 0);
    tokenizer *u = NULL;
    assert_int_equal(checkpoint_load_tokenizer(&u, out), 0);
    const char *text = "hello the world, I'll say hello!  \t";
    int32_t *a, *b;
    int na, nb;
    assert_int_equal(tokenizer_encode(t, text, strlen(text), &a, &na), 0);
    assert_int_equal(tokenizer_encode(u, text, strlen(text), &b, &nb), 0);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, (size_t)na * sizeof *a);
    free(a);
    free(b);
    tokenizer_free(u);

    /* a checkpoint imported without vocab.json has none */
    snprintf(src, sizeof src, "%s/f32-mlp", fixtures());
    snprintf(out, sizeof out, "%s/tok_none.h5", fixtures());
    char *argv2[] = {"import-hf", src, "--out", out, NULL};
    assert_int_equal(import_hf_main(4, argv2), 0);
    assert_int_equal(checkpoint_load_tokenizer(&u, out), 1);
    assert_null(u);
}

/* A synthetic model has no tokenizer and reads text as bytes (io/prompt.c): one prompt, id =
 * byte value, UTF-8 bytes included; a vocab below 256 is refused at the input key. */
static void test_prompt_bytes(void **state) {
    (void)state;
    char dir[] = "/tmp/tripar_prompt_XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/bytes.yaml", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("model: {synthetic: {vocab: 256, ctx: 64}}\ninput:\n  text: \"H\xc3\xa9!\"\n", f);
    fclose(f);
    job j;
    tokenizer *tok = (tokenizer *)&j; /* prompt_tokenize must set it, to NULL here */
    assert_int_equal(job_load(&j, path, NULL, 0), STATUS_OK);
    assert_int_equal(prompt_tokenize(&j, &tok), STATUS_OK);
    assert_null(tok);
    assert_int_equal(j.batch, 1);
    assert_int_equal(j.prompt_len, 4);
    const int32_t want[] = {'H', 0xc3, 0xa9, '!'};
    for (int i = 0; i < 4; i++) assert_int_equal(j.tokens[i], want[i]);
    job_free(&j);

    const char *small[] = {"model.synthetic.vocab=200"};
    assert_int_equal(job_load(&j, path, small, 1), STATUS_OK);
    assert_int_equal(prompt_tokenize(&j, &tok), STATUS_BAD_INPUT);
    assert_non_null(strstr(error_message(), "bytes.yaml:3: input.text: a model without a tokenizer "
                                            "reads text as bytes"));
    assert_non_null(strstr(error_message(), "model.synthetic.vocab >= 256, but it is 200"));
    job_free(&j);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bpe_by_hand),
        cmocka_unit_test(test_round_trip_texts),
        cmocka_unit_test(test_round_trip_bytes),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_checkpoint_tokenizer),
        cmocka_unit_test(test_prompt_bytes),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
