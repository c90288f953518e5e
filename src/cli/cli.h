/* Entry points of the tripar subcommands, one file each in src/cli/, dispatched by main.c.
 * Each returns an exit code of the CLI contract: 0 ok, 1 runtime failure (diff: outside
 * tolerance), 2 bad usage or input. argv[0] is the subcommand name. Below them, what the
 * subcommands' outputs share. */
#pragma once
#include <stddef.h>
#include <stdio.h>

#include "model/model.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Under mpirun/srun: main.c has initialised MPI. */
int run_main(int argc, char **argv, double process_start);
/* What `tripar run ARGS` needs before MPI_Init, read from its job (--set and each --sweep point
 * applied) without a word; the defaults when the job cannot be read (the real load, after
 * MPI_Init, then reports why). */
typedef struct {
    int stall_seconds; /* record.stall_seconds (the first point's), for the watchdog's guard of
                          MPI_Init */
    int tune_mpi;      /* some point overlaps TP all-reduces on MPI with parallel.mpi_tuning:
                          auto (parallel/mpi_tuning.h) */
} run_early;
run_early run_read_early(int argc, char **argv);
int commbench_main(int argc, char **argv);

/* Serial file tools: no mpirun needed. */
int import_hf_main(int argc, char **argv);
int import_gguf_main(int argc, char **argv);
/* The importers' arguments (cli_import.c): one input, --out (-o), and how to store the
 * weights, --precision fp32|bf16|int8w|q8_0|q4_0|q4_1|q4_k (default fp32; and keep when allow_keep,
 * import-gguf's) and --int8-group N (int8w only; 0 or a multiple of 32); argv[0] names the
 * command in messages. Returns 0 to go on, 1 after --help, or -1 on bad usage (already
 * reported, naming the allowed values). */
struct import_options;
int cli_import_args(int argc, char **argv, void (*usage)(FILE *), const char **in, const char **out,
                    struct import_options *opts, int allow_keep);
/* The summary's words for how the weights were stored: "stored fp32", "stored int8w (scales
 * per row)", "stored int8w (scales per 64 columns)" (a static buffer). */
const char *cli_import_stored(const struct import_options *o);
/* The summary's lines on a Llama-family model both importers print: kv heads, rope, head, biases,
 * and for a mixture of experts its routing and widths. */
void cli_import_llama_print(const model_config *cfg);
/* The usage lines of those options, for each importer's --help. */
#define CLI_IMPORT_OPTIONS_USAGE                                                                   \
    "  --precision fp32|bf16|int8w|q8_0|q4_0|q4_1|q4_k  how the checkpoint stores the weight\n"   \
    "      matrices (default fp32); a job in that model.precision loads them as stored. int8w:\n"  \
    "      int8 weights with fp32 scales, made exactly as model.precision int8w makes them at\n"   \
    "      load; q8_0, q4_0, q4_1: ggml's blocks, made by ggml's reference quantisers; q4_k:\n"    \
    "      ggml's 256-weight blocks, made by tripar's min/max quantiser.\n"                        \
    "  --int8-group N  int8w: one scale per N columns (a multiple of 32; default 0, one scale\n"   \
    "      per row), as model.int8_group; the job's must then be the same.\n"
int report_main(int argc, char **argv);
int diff_main(int argc, char **argv);
int trace_main(int argc, char **argv);
int plan_main(int argc, char **argv);
int explain_main(int argc, char **argv);

/* Writes a JSON document and releases it (cli_json.c): to the file at path, the JSON alone,
 * or, when path is NULL, to out followed by a newline. flags are jansson's (JSON_INDENT(n));
 * reals are printed by cli_json_real_text, not at jansson's 17 digits.
 * Returns STATUS_OK, or STATUS_BAD_INPUT with error_message() saying what was not written. */
struct json_t;
int cli_json_write(struct json_t *root, const char *path, FILE *out, size_t flags);

/* A finite real as every JSON output of tripar prints it: the fewest significant digits (15, 16
 * or 17) that read back as exactly v ("3e-6", "0.1", "0.3333333333333333"), with a '.' or an
 * exponent so it reads back as a real. Writes into buf (len >= 32) and returns the length, or -1
 * for a value that is not finite. cli_json_write prints every real of a document so. */
int cli_json_real_text(double v, char *buf, size_t len);

/* A JSON number, or null for a value that is not finite (JSON has no NaN or infinity: a phase
 * a run never measured, a ratio over zero). */
struct json_t *cli_json_number(double v);

#ifdef __cplusplus
}
#endif
