/* tripar's command line: dispatches to the subcommands. MPI is initialised here for every
 * command that runs on a mesh; the file tools run serially. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/check.h"
#include "io/checkpoint.h"
#include "cli/cli.h"
#include "metrics/timing.h"
#include "parallel/mpi_tuning.h"
#include "parallel/watchdog.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: tripar COMMAND [ARGS]   (tripar COMMAND --help for details)\n"
            "  run JOB.yaml [--set K=V]... [--out RUN.h5]   generate under mpirun/srun\n"
            "  import-hf DIR --out CKPT.h5                   import a Hugging Face GPT-2, Llama,\n"
            "                                                Mistral or Qwen2 directory\n"
            "  import-gguf FILE.gguf --out CKPT.h5           import a llama.cpp GGUF model\n"
            "  report RUN.h5...                              tables from run files\n"
            "  diff A.h5 B.h5                                compare tokens and activations\n"
            "  trace RUN.h5 -o trace.json                    Chrome/Perfetto trace\n"
            "  explain BASE.h5 OTHER.h5...                   attribute a latency difference\n"
            "  commbench [JOB.yaml] [--sizes 8:256M] [...]  communication benchmark (mpirun)\n"
            "  plan (JOB.yaml | --preset NAME) --cluster C.yaml  predict and rank strategies\n"
            "  --version\n");
}

/* Open MPI's own MPI-IO (OMPIO) opens a shared-file-pointer module at every MPI_File_open, and
 * on more than one node (or wherever its sm module is unavailable) that module creates
 * RUN.h5.partial.HOST.PID-JOBID-PID.lock (lockedfile) or RUN...data.N/.metadata.N files
 * (individual) beside the run file, removed only at close: a killed run leaves them behind.
 * Open MPI 4.1 cannot open a file with no such module, and HDF5 never uses shared file
 * pointers, so tripar asks for ROMIO, which creates its shared-pointer file only on first use
 * (never, here). Set before MPI_Init, without overwriting: a user's OMPI_MCA_io (or mpirun
 * --mca io) wins. Other MPIs ignore the variable. */
static void prefer_mpiio_without_side_files(void) { setenv("OMPI_MCA_io", "^ompio", 0); }

int main(int argc, char **argv) {
    double process_start = timer_host_seconds();
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? TRIPAR_EXIT_USAGE : TRIPAR_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("tripar %s\n", TRIPAR_VERSION);
        return TRIPAR_EXIT_OK;
    }
    if (!strcmp(argv[1], "run") || !strcmp(argv[1], "commbench")) {
        const int is_run = !strcmp(argv[1], "run");
        prefer_mpiio_without_side_files();
        const run_early early = is_run ? run_read_early(argc - 1, argv + 1) : (run_early){0};
        mpi_tuning_before_init(early.tune_mpi);
        /* a peer that never reaches MPI_Init (frozen, or its node lost while the job starts)
         * would hold every other rank in it for good: the watchdog guards it from here */
        if (is_run) watch_init_begin(early.stall_seconds);
        MPI_CHECK(MPI_Init(&argc, &argv));
        if (is_run) watch_init_end();
        mpi_tuning_after_init();
        int rc = is_run ? run_main(argc - 1, argv + 1, process_start)
                        : commbench_main(argc - 1, argv + 1);
        watch_finalize(); /* MPI_Finalize, guarded the same way */
        return rc;
    }
    /* The file tools read run files serially and need no MPI. */
    static const struct {
        const char *name;
        int (*entry)(int, char **);
    } tools[] = {
        {"report", report_main},
        {"diff", diff_main},
        {"trace", trace_main},
        {"explain", explain_main},
        {"import-hf", import_hf_main},
        {"import-gguf", import_gguf_main},
        {"plan", plan_main},
    };
    for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++)
        if (!strcmp(argv[1], tools[i].name)) return tools[i].entry(argc - 1, argv + 1);
    fprintf(stderr, "tripar: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return TRIPAR_EXIT_USAGE;
}
