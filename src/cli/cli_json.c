/* What the subcommands' JSON outputs share: numbers that may not be finite, reals printed at
 * their precision, and the tail that writes the document, releases it, and says what could not
 * be written. */
#include <float.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "cli/cli.h"

int cli_json_real_text(double v, char *buf, size_t len) {
    if (!isfinite(v) || len < 32) return -1;
    /* the fewest significant digits that read back as v: 17 always do, and are what jansson
     * 2.14 prints for every real (0.1 as 0.10000000000000001). A normal double holds more than
     * 15 digits, so a decimal of 15 or fewer that reads back as v is what %.15g prints (its
     * trailing zeros dropped) and 15 is where to start; a denormal holds fewer, and %.15g
     * would print noise (-2.50000000000002e-310), so there the search starts at 1 digit. */
    const int fewest = v != 0 && fabs(v) < DBL_MIN ? 1 : 15;
    for (int digits = fewest; digits <= 17; digits++) {
        snprintf(buf, len, "%.*g", digits, v);
        if (strtod(buf, NULL) == v) break;
    }
    /* as jansson writes a real: a '.' or an exponent, so that it reads back as a real and not
     * an integer, and an exponent without '+' or leading zeros ("3e-6", not "3e-06") */
    if (!strpbrk(buf, ".e")) strcat(buf, ".0");
    char *e = strchr(buf, 'e');
    if (e) {
        char *digits = e + 1 + (e[1] == '-' || e[1] == '+'), *from = digits;
        while (*from == '0' && from[1])
            from++;
        if (e[1] == '+') digits--;
        memmove(digits, from, strlen(from) + 1);
    }
    return (int)strlen(buf);
}

/* jansson's dump hands its writer one chunk per token: a real is one chunk, formatted at 17
 * digits, and a string opens and closes with a chunk that is a lone '"' (a quote inside a string
 * comes escaped, two characters). So outside strings, a chunk that starts like a number and
 * holds a '.' or an 'e' is a real (integers hold neither), and is reprinted by
 * cli_json_real_text; everything else passes through. */
typedef struct {
    FILE *out;
    int in_string;
} json_sink;

static int json_sink_chunk(const char *chunk, size_t size, void *data) {
    json_sink *s = data;
    char number[64], text[40];
    if (size == 1 && chunk[0] == '"') {
        s->in_string = !s->in_string;
    } else if (!s->in_string && size < sizeof number &&
               (chunk[0] == '-' || (chunk[0] >= '0' && chunk[0] <= '9'))) {
        memcpy(number, chunk, size);
        number[size] = '\0';
        char *end;
        const double v = strtod(number, &end);
        if (strpbrk(number, ".e") && *end == '\0' && cli_json_real_text(v, text, sizeof text) > 0)
            chunk = text, size = strlen(text);
    }
    return fwrite(chunk, 1, size, s->out) == size ? 0 : -1;
}

int cli_json_write(json_t *root, const char *path, FILE *out, size_t flags) {
    json_sink s = {.out = path ? fopen(path, "w") : out};
    int ok = s.out && json_dump_callback(root, json_sink_chunk, &s, flags) == 0;
    if (path) {
        if (s.out && fclose(s.out) != 0) ok = 0;
    } else if (ok) {
        ok = fputc('\n', out) != EOF;
    }
    json_decref(root);
    if (ok) return STATUS_OK;
    if (path)
        error_set("%s: cannot write", path);
    else
        error_set("cannot write the JSON output");
    return STATUS_BAD_INPUT;
}

json_t *cli_json_number(double v) { return isfinite(v) ? json_real(v) : json_null(); }
