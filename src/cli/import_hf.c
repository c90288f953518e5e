/* `tripar import-hf DIR --out CKPT.h5`: the command line of the Hugging Face importer
 * (src/io/import_hf.c): its arguments, usage, summary and exit codes. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/check.h"
#include "cli/cli.h"
#include "io/import_hf.h"
#include "io/import_write.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: tripar import-hf DIR --out CKPT.h5 [--precision fp32|bf16|int8w]\n"
            "                        [--int8-group N]\n"
            "  Converts a Hugging Face directory (config.json and model.safetensors or\n"
            "  model.safetensors.index.json with its shards; F32, F16 or BF16) into a tripar\n"
            "  checkpoint. architectures: GPT2LMHeadModel (also when absent), LlamaForCausalLM,\n"
            "  MistralForCausalLM, Qwen2ForCausalLM (with its q/k/v biases), and the mixtures of\n"
            "  experts MixtralForCausalLM and Qwen2MoeForCausalLM. Refused with exit 2: hidden_act\n"
            "  other than silu, sliding windows, rope_scaling other than llama3, mixture-of-experts\n"
            "  keys in a dense architecture, Qwen2-MoE's dense layers (decoder_sparse_step other\n"
            "  than 1, mlp_only_layers), an odd head_dim.\n"
            "  tokenizer.json, or else vocab.json and merges.txt, when present, are stored as\n"
            "  the tokenizer.\n" CLI_IMPORT_OPTIONS_USAGE);
}

static void import_summary_print(const char *dir, const char *out, const import_options *o,
                                 const import_hf_summary *s) {
    const model_config *cfg = &s->cfg;
    struct stat st;
    long long bytes = stat(out, &st) == 0 ? (long long)st.st_size : 0;
    printf("import-hf: %s -> %s\n  layers %d, heads %d, embd %d, mlp %d, vocab %d, ctx %d, "
           "ln_eps %g\n  %d tensors from %d file%s (F32 %d, F16 %d, BF16 %d); tokenizer: %s; "
           "%s; %.1f MB\n",
           dir, out, cfg->layers, cfg->heads, cfg->embd, cfg->mlp, cfg->vocab, cfg->ctx,
           (double)cfg->ln_eps, s->n_tensors, s->n_files, s->n_files == 1 ? "" : "s",
           s->dtype_count[0], s->dtype_count[1], s->dtype_count[2], s->has_tokenizer ? "yes" : "no",
           cli_import_stored(o), (double)bytes / 1e6);
    cli_import_llama_print(cfg);
}

int import_hf_main(int argc, char **argv) {
    const char *dir = NULL, *out = NULL;
    import_options opts;
    int rc = cli_import_args(argc, argv, usage, &dir, &out, &opts, 0);
    if (rc != 0) return rc > 0 ? TRIPAR_EXIT_OK : TRIPAR_EXIT_USAGE;
    import_hf_summary summary = {0};
    rc = import_hf_convert(dir, out, &opts, &summary);
    if (rc == STATUS_OK)
        import_summary_print(dir, out, &opts, &summary);
    else
        fprintf(stderr, "import-hf: %s\n", error_message());
    return rc == STATUS_OK ? TRIPAR_EXIT_OK : TRIPAR_EXIT_USAGE;
}
