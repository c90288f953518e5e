/* The last act of a rank that ends a stalled run (watchdog.c): make sure its launcher daemon
 * ends too. On a lost node, Open MPI's mpirun and orted wait on that node's daemon while
 * aborting, for as long as TCP retransmits (about 15 minutes): the issue measured 943 s. */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* When this process's parent is an Open MPI launcher (mpirun, mpiexec, orterun, orted, prterun,
 * prted; never slurmstepd: Slurm ends its own steps), leaves behind a detached process that
 * holds none of this process's files, waits delay_s seconds and then, if that same parent is
 * still alive, writes one line to its stderr and kills it (SIGKILL). A launcher that ends by
 * itself in time is left alone. Only async-signal-safe calls after the fork. */
void launcher_guard_start(unsigned delay_s);

#ifdef __cplusplus
}
#endif
