/* Test helper: renders one user turn through a chat template as input.chat does (io/chat.h).
 * usage: chat_render TEMPLATE BOS TEXTS.json   (BOS "-" for none; TEXTS a JSON list of strings)
 * -> on stdout {"family": name, "rendered": [...]}; exit 2 with the refusal on stderr. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/chat.h"

static char *file_read(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = xmalloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: chat_render TEMPLATE BOS TEXTS.json\n");
        return 2;
    }
    char *tmpl = file_read(argv[1]);
    json_error_t jerr;
    json_t *texts = json_load_file(argv[3], 0, &jerr);
    if (!tmpl || !json_is_array(texts)) {
        fprintf(stderr, "chat_render: cannot read %s or %s\n", argv[1], argv[3]);
        return 2;
    }
    const char *bos = strcmp(argv[2], "-") ? argv[2] : NULL;
    json_t *out = json_array();
    chat_family family = CHAT_CHATML;
    int rc = 0;
    for (size_t i = 0; i < json_array_size(texts) && !rc; i++) {
        char *r = NULL;
        rc = chat_render(tmpl, bos, json_string_value(json_array_get(texts, i)), argv[1],
                         &family, &r);
        if (rc) fprintf(stderr, "%s\n", error_message());
        else json_array_append_new(out, json_string(r));
        free(r);
    }
    if (!rc) {
        json_t *root = json_pack("{s:s, s:o}", "family", chat_family_name(family), "rendered", out);
        char *dump = json_dumps(root, JSON_COMPACT | JSON_ENSURE_ASCII);
        puts(dump);
        free(dump);
        json_decref(root);
    } else {
        json_decref(out);
    }
    json_decref(texts);
    free(tmpl);
    return rc ? 2 : 0;
}
