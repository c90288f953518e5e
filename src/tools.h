/* Entry points of the run-file tools; main.c dispatches `tripar report|diff|trace` here.
 * argv[0] is the subcommand name. They run serially (no mpirun needed) and return the exit
 * code: 0 ok, 1 a difference/runtime failure (diff: outside tolerance), 2 bad usage or input. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

int report_main(int argc, char **argv);
int diff_main(int argc, char **argv);
int trace_main(int argc, char **argv);

#ifdef __cplusplus
}
#endif
