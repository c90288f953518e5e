/* What the subcommands' JSON outputs share: numbers that may not be finite, and the tail that
 * writes the document, releases it, and says what could not be written. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>

#include "base/check.h"
#include "cli/cli.h"

int cli_json_write(json_t *root, const char *path, FILE *out, size_t flags) {
    const int ok = path ? json_dump_file(root, path, flags) == 0
                        : json_dumpf(root, out, flags) == 0 && fputc('\n', out) != EOF;
    json_decref(root);
    if (ok) return STATUS_OK;
    if (path)
        error_set("%s: cannot write", path);
    else
        error_set("cannot write the JSON output");
    return STATUS_BAD_INPUT;
}

json_t *cli_json_number(double v) { return isfinite(v) ? json_real(v) : json_null(); }
