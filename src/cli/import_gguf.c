/* `tripar import-gguf FILE.gguf --out CKPT.h5`: the command line of the GGUF importer
 * (src/io/import_gguf.c): its arguments, usage, summary and exit codes. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base/check.h"
#include "cli/cli.h"
#include "io/import_gguf.h"
#include "io/import_write.h"

static void usage(FILE *out) {
    fprintf(
        out,
        "usage: tripar import-gguf FILE.gguf --out CKPT.h5\n"
        "                          [--precision fp32|bf16|int8w|q8_0|q4_0|q4_1|q4_k|keep]\n"
        "                          [--int8-group N]\n"
        "  Converts a llama.cpp GGUF file into a tripar checkpoint, as import-hf does.\n"
        "  general.architecture: llama (Llama 2/3, Mistral, SmolLM, TinyLlama, and Mixtral's\n"
        "  experts with llama.expert_count; the Q/K row order llama.cpp uses is undone), qwen2\n"
        "  (with its q/k/v biases), qwen2moe (Qwen2-MoE: experts and the gated shared expert)\n"
        "  or gpt2. Expert tensors: ffn_{gate,up,down}_exps stacks, or an older file's\n"
        "  per-expert ffn_{gate,up,down}.E.\n"
        "  Tensor types: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K (dequantized).\n"
        "  Llama 3.1's rope scaling (rope_freqs) is read back as llama3 parameters.\n"
        "  Tokenizer: tokenizer.ggml.model gpt2 with tokenizer.ggml.pre default, gpt2,\n"
        "  llama-bpe, qwen2 or smollm, stored as tokenizer.json with bos/eos ids,\n"
        "  add_bos_token and the chat template. Refused with exit 2, naming the key or\n"
        "  tensor: another architecture (deepseek2, qwen3moe, ...), tokenizer or rope scaling,\n"
        "  expert_used_count above expert_count, routing other than softmax, a missing tensor\n"
        "  or one whose dims disagree with the metadata, a truncated file.\n" CLI_IMPORT_OPTIONS_USAGE
        "  --precision keep  store the weight matrices in the file's own block format (Q8_0,\n"
        "      Q4_0, Q4_1 or Q4_K, whichever holds most of them): its blocks as they are, no\n"
        "      fp32 copy; matrices in another type (a Q4_K_M file's Q6_K) are requantised into\n"
        "      it, as the summary says.\n");
}

int import_gguf_main(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    import_options opts;
    int rc = cli_import_args(argc, argv, usage, &in, &out, &opts, 1);
    if (rc != 0) return rc > 0 ? TRIPAR_EXIT_OK : TRIPAR_EXIT_USAGE;
    import_gguf_summary s = {0};
    if (import_gguf_convert(in, out, &opts, &s) != STATUS_OK) {
        fprintf(stderr, "import-gguf: %s\n", error_message());
        return TRIPAR_EXIT_USAGE;
    }
    const model_config *cfg = &s.cfg;
    struct stat st;
    long long bytes = stat(out, &st) == 0 ? (long long)st.st_size : 0;
    printf("import-gguf: %s -> %s\n  %s: layers %d, heads %d, embd %d, mlp %d, vocab %d, ctx %d, "
           "norm eps %g\n  %d tensors (%d quantized); tokenizer: %s; %s; %.1f MB\n",
           in, out, s.arch, cfg->layers, cfg->heads, cfg->embd, cfg->mlp, cfg->vocab, cfg->ctx,
           (double)cfg->ln_eps, s.n_tensors, s.n_quantized, s.has_tokenizer ? "yes" : "no",
           cli_import_stored(&(import_options){.precision = s.precision,
                                               .int8_group = opts.int8_group}),
           (double)bytes / 1e6);
    if (precision_is_block(s.precision))
        printf("  %s: %d matrices kept as stored (no fp32 copy), %d requantised%s%s%s\n",
               precision_kind_name(s.precision), s.n_kept, s.n_requantized,
               s.n_requantized ? " from " : "", s.requantized, opts.keep ? " (--precision keep)" : "");
    cli_import_llama_print(cfg);
    return TRIPAR_EXIT_OK;
}
