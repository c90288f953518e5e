/* The MPI settings TP overlap needs, applied by tripar itself (parallel.mpi_tuning: auto).
 *
 * A piece's non-blocking all-reduce advances only inside MPI calls, and Open MPI's defaults
 * over TCP need more of them than a prefill makes between pieces: a message above 64 KiB goes
 * by rendezvous, whose handshake waits for the sender's next call, and libnbc's default
 * all-reduce for a pair is a ring of two rounds. Measured across an emulated 1 Gbit/s link
 * (docs/performance.md), overlap then hid nothing; with eager sends up to 4 MiB and recursive
 * doubling it hid about half. So when a run overlaps TP all-reduces carried by MPI:
 *   - the TCP eager limits (btl_tcp_eager_limit, btl_tcp_rndv_eager_limit,
 *     btl_tcp_max_send_size: 4 MiB) are read by Open MPI only at MPI_Init and its MPI_T
 *     interface marks them read-only, so they are set in the environment before MPI_Init;
 *   - the iallreduce algorithm (coll_libnbc_iallreduce_algorithm: 4, recursive doubling) is
 *     writable through MPI_T at any time, so it is written after MPI_Init.
 * Nothing the user set is overwritten: an OMPI_MCA_ variable in the environment (mpirun --mca
 * puts it there) wins. Under another MPI the variables do not exist and nothing is set. What
 * was found and set is recorded in the run file (attribute mpi_settings). */
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

/* Before MPI_Init: `tune` when tripar should set what overlap needs; the eager limits go into
 * the environment where the user has not set them. */
void mpi_tuning_before_init(int tune);

/* After MPI_Init, on every rank: the iallreduce algorithm through MPI_T (when tune and the user
 * has not set it), then the values in force read back for mpi_tuning_summary. */
void mpi_tuning_after_init(void);

/* One line for the run file: each setting's value in force and who set it, e.g.
 * "btl_tcp_eager_limit=4194304 (tripar, environment); ...; coll_libnbc_iallreduce_algorithm=4
 * (tripar, MPI_T)"; "(user)" for a value the user set, "(default)" for one nobody set, "(not
 * exposed)" where the MPI has no such variable; prefixed "tripar set nothing (...): " when
 * no run of the job overlaps TP on MPI or parallel.mpi_tuning is off. Valid after
 * mpi_tuning_after_init. */
const char *mpi_tuning_summary(void);

#ifdef __cplusplus
}
#endif
