/* Entry points of the tripar subcommands, one file each in src/cli/, dispatched by main.c.
 * Each returns an exit code of the CLI contract: 0 ok, 1 runtime failure (diff: outside
 * tolerance), 2 bad usage or input. argv[0] is the subcommand name. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* Under mpirun/srun: main.c has initialised MPI. */
int run_main(int argc, char **argv, double process_start);
int commbench_main(int argc, char **argv);

/* Serial file tools: no mpirun needed. */
int import_hf_main(int argc, char **argv);
int report_main(int argc, char **argv);
int diff_main(int argc, char **argv);
int trace_main(int argc, char **argv);
int plan_main(int argc, char **argv);
int explain_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
