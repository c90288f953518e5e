/* The arguments the importers share (import-hf, import-gguf): one input, --out, and how the
 * checkpoint stores the weights (--precision, --int8-group). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "io/import_write.h"
#include "model/model.h"

/* The value of option `name` at argv[*i] ("--name V" or "--name=V"), or NULL when argv[*i] is
 * not that option; *missing is set when the value is absent. */
static const char *option_value(int argc, char **argv, int *i, const char *name, int *missing) {
    const size_t len = strlen(name);
    if (strncmp(argv[*i], name, len) != 0) return NULL;
    if (argv[*i][len] == '=') return argv[*i] + len + 1;
    if (argv[*i][len] != '\0') return NULL;
    if (*i + 1 == argc) {
        *missing = 1;
        return NULL;
    }
    return argv[++*i];
}

/* --int8-group's value: 0 or a positive multiple of 32 up to 65536, as model.int8_group. */
static int int8_group_parse(const char *text, int *group) {
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || v < 0 || v > (1 << 16) || v % 32 != 0) return -1;
    *group = (int)v;
    return 0;
}

int cli_import_args(int argc, char **argv, void (*usage)(FILE *), const char **in, const char **out,
                    import_options *opts, int allow_keep) {
    *in = *out = NULL;
    *opts = (import_options){.precision = PRECISION_FP32};
    int group_given = 0;
    for (int i = 1; i < argc; i++) {
        int missing = 0;
        const char *v = NULL;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 1;
        } else if ((v = option_value(argc, argv, &i, "--out", &missing)) ||
                   (v = option_value(argc, argv, &i, "-o", &missing))) {
            *out = v;
        } else if ((v = option_value(argc, argv, &i, "--precision", &missing))) {
            opts->keep = allow_keep && strcmp(v, "keep") == 0;
            if (!opts->keep && checkpoint_precision_parse(v, &opts->precision) != 0) {
                fprintf(stderr, "%s: --precision '%s' is not a stored precision; allowed: %s%s\n",
                        argv[0], v, checkpoint_precision_names(), allow_keep ? ", keep" : "");
                return -1;
            }
        } else if ((v = option_value(argc, argv, &i, "--int8-group", &missing))) {
            if (int8_group_parse(v, &opts->int8_group) != 0) {
                fprintf(stderr,
                        "%s: --int8-group '%s': allowed: 0 (one scale per row), 32, 64, "
                        "96, ... up to 65536\n",
                        argv[0], v);
                return -1;
            }
            group_given = 1;
        } else if (missing) {
            fprintf(stderr, "%s: %s needs a value\n", argv[0], argv[i]);
            return -1;
        } else if (argv[i][0] == '-' || *in) {
            fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0], argv[i]);
            usage(stderr);
            return -1;
        } else {
            *in = argv[i];
        }
    }
    if (group_given && opts->int8_group > 0 && (opts->precision != PRECISION_INT8W || opts->keep)) {
        fprintf(stderr, "%s: --int8-group %d needs --precision int8w; allowed with %s: 0\n",
                argv[0], opts->int8_group, opts->keep ? "keep" : precision_kind_name(opts->precision));
        return -1;
    }
    if (!*in || !*out) {
        usage(stderr);
        return -1;
    }
    return 0;
}

const char *cli_import_stored(const import_options *o) {
    static char words[64];
    if (o->precision != PRECISION_INT8W)
        snprintf(words, sizeof words, "stored %s", precision_kind_name(o->precision));
    else if (o->int8_group == 0)
        snprintf(words, sizeof words, "stored int8w (scales per row)");
    else
        snprintf(words, sizeof words, "stored int8w (scales per %d columns)", o->int8_group);
    return words;
}

void cli_import_llama_print(const model_config *cfg) {
    if (arch_is_llama(cfg->arch))
        printf("  llama: kv_heads %d, rope_theta %g%s, %s head, q/k/v biases %s\n", cfg->kv_heads,
               cfg->rope_theta, cfg->rope_scaled ? " (llama3 scaling)" : "",
               cfg->tie_embeddings ? "tied" : "untied", cfg->attention_bias ? "yes" : "no");
    if (arch_is_moe(cfg->arch))
        printf("  %s: %d experts, %d per token (%s), %d wide; shared expert %d wide\n",
               arch_kind_name(cfg->arch), cfg->experts, cfg->experts_top_k,
               cfg->norm_topk_prob ? "renormalised" : "softmax over all", cfg->mlp,
               cfg->shared_mlp);
}
