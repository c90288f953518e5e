/* The arguments the importers share (import-hf, import-gguf): one input and --out. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

int cli_import_args(int argc, char **argv, void (*usage)(FILE *), const char **in,
                    const char **out) {
    *in = *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 1;
        } else if (strcmp(argv[i], "--out") == 0 || strcmp(argv[i], "-o") == 0) {
            if (i + 1 == argc) {
                fprintf(stderr, "%s: --out needs a file name\n", argv[0]);
                return -1;
            }
            *out = argv[++i];
        } else if (strncmp(argv[i], "--out=", 6) == 0) {
            *out = argv[i] + 6;
        } else if (argv[i][0] == '-' || *in) {
            fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[i]);
            usage(stderr);
            return -1;
        } else {
            *in = argv[i];
        }
    }
    if (!*in || !*out) {
        usage(stderr);
        return -1;
    }
    return 0;
}
