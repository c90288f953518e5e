/* Entry points of the tripar subcommands, dispatched by main.c. Each returns an exit code of
 * the CLI contract (0 ok, 1 runtime failure, 2 bad usage or input). */
#pragma once

int run_main(int argc, char **argv, double process_start);

/* `tripar commbench` (commbench.c), under mpirun like run. */
int commbench_main(int argc, char **argv);
