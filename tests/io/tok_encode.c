/* Test helper: encodes texts with a checkpoint's tokenizer and decodes the ids back.
 * usage: tok_encode CKPT.h5 TEXTS.json   (a JSON list of strings) -> on stdout a JSON list of
 * {"ids": [...], "text": decoded}. Exit 2 when the tokenizer or the texts cannot be read. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/checkpoint.h"
#include "io/tokenizer.h"

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tok_encode CKPT.h5 TEXTS.json\n");
        return 2;
    }
    tokenizer *t = NULL;
    if (checkpoint_load_tokenizer(&t, argv[1]) != 0 || !t) {
        fprintf(stderr, "tok_encode: %s: %s\n", argv[1], t ? "" : error_message());
        return 2;
    }
    json_error_t jerr;
    json_t *texts = json_load_file(argv[2], JSON_ALLOW_NUL, &jerr); /* texts may hold NUL */
    if (!json_is_array(texts)) {
        fprintf(stderr, "tok_encode: %s: %s\n", argv[2], jerr.text);
        return 2;
    }
    json_t *out = json_array();
    for (size_t i = 0; i < json_array_size(texts); i++) {
        json_t *s = json_array_get(texts, i);
        int32_t *ids = NULL;
        int n = 0;
        if (tokenizer_encode(t, json_string_value(s), json_string_length(s), &ids, &n) != 0) {
            fprintf(stderr, "tok_encode: text %zu: %s\n", i, error_message());
            return 2;
        }
        json_t *list = json_array();
        for (int k = 0; k < n; k++)
            json_array_append_new(list, json_integer(ids[k]));
        size_t len = 0;
        char *text = tokenizer_decode(t, ids, n, &len);
        json_array_append_new(out, json_pack("{s:o, s:s%}", "ids", list, "text", text, len));
        free(text);
        free(ids);
    }
    char *dump = json_dumps(out, JSON_COMPACT);
    puts(dump);
    free(dump);
    json_decref(out);
    json_decref(texts);
    tokenizer_free(t);
    return 0;
}
