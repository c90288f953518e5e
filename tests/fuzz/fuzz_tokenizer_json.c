/* libFuzzer target: tokenizer_load_json must never crash, leak or hang on any tokenizer.json
 * text, every refusal must say why, and a tokenizer it accepts must encode and decode: the ids
 * of a text (a fixed one, and the input itself) decode without error, and decoding them gives
 * the text back when nothing may change it: no normalizer, no prefix space, no unk_token, no
 * byte fallback or decoder step of a character vocab, no added token that absorbs whitespace,
 * and no id given to two tokens (accepted; either one decodes, tokenizer.c). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/tokenizer.h"
#include "io/tokenizer_impl.h" /* the normalizer a file chose */

/* 1 when decode(encode(text)) must give text back (see the top). */
static int round_trip_exact(const tokenizer *t) {
    if (t->n_norms || t->unk_id >= 0) return 0;
    /* a character vocab's byte fallback decodes as "<0xXX>" text without a ByteFallback
     * decoder; with one, a "<0x41>" spelled out in the text decodes as "A"; Replace and Strip
     * change the text on purpose */
    if (t->byte_fallback || t->dec_byte_fallback || t->n_dec_replace || t->strip_left) return 0;
    for (int i = 0; i < t->n_stages; i++)
        if (t->stage[i].prefix_space) return 0; /* decodes with the space it added */
    unsigned char *seen = calloc((size_t)t->n_ids + 1, 1);
    if (!seen) abort();
    int exact = 1;
    for (size_t i = 0; exact && i < t->vocab.cap; i++)
        if (t->vocab.keys[i]) exact = !seen[t->vocab.values[i]]++;
    for (int k = 0; exact && k < t->n_added; k++)
        exact = !t->added[k].lstrip && !t->added[k].rstrip && !seen[t->added[k].id]++;
    free(seen);
    return exact;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Encodes text, decodes the ids; the round trip must give the text back when exact. */
static void round_trip(const tokenizer *t, const char *text, size_t len, int exact) {
    int32_t *ids = NULL;
    int n = 0;
    if (tokenizer_encode(t, text, len, &ids, &n) != STATUS_OK) {
        if (!error_message()[0]) abort();
        return; /* a byte symbol missing from the vocab: refused, said why */
    }
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] > tokenizer_max_id(t)) abort();
    size_t back_len = 0;
    char *back = tokenizer_decode(t, ids, n, &back_len);
    if (!back) {
        fprintf(stderr, "the ids of an encoded text do not decode: %s\n", error_message());
        abort();
    }
    if (exact && (back_len != len || memcmp(back, text, len) != 0)) {
        fprintf(stderr, "decode(encode(text)) differs: %zu bytes in, %zu out\n", len, back_len);
        abort();
    }
    free(back);
    free(ids);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) abort();
    memcpy(text, data, size);
    text[size] = 0;
    tokenizer *t = NULL;
    if (tokenizer_load_json(&t, text, "fuzz.json") != STATUS_OK) {
        if (!error_message()[0]) abort(); /* every refusal says why */
        free(text);
        return 0;
    }
    int exact = round_trip_exact(t);
    static const char sample[] = "Hello world, it's 2024! caf\xc3\xa9 \xe1\xa0\x8e\n\t  x";
    round_trip(t, sample, sizeof sample - 1, exact);
    round_trip(t, text, size < 512 ? size : 512, exact);
    tokenizer_free(t);
    free(text);
    return 0;
}
