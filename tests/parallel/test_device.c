/* Which node-local rank picks a rank's GPU (parallel/device.c): the MPI launcher's own variable
 * beats the Slurm variables a rank inherits from mpirun's daemon or the batch script, srun's
 * SLURM_LOCALID counts only when srun started this very rank, else the shared-memory rank.
 * Only the environment is read, so no MPI and no GPU are needed. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "parallel/device.h"

static const char *const launcher_vars[] = {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                                            "SLURM_LOCALID", "SLURM_PROCID"};

/* Clears every launcher variable (ctest itself may run inside a Slurm allocation). */
static int clear_env(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof launcher_vars / sizeof *launcher_vars; i++)
        if (unsetenv(launcher_vars[i]) != 0) return -1;
    return 0;
}

static void set(const char *name, const char *value) { assert_int_equal(setenv(name, value, 1), 0); }

static mesh rank_on_node(int world_rank, int local_rank) {
    mesh m = {0};
    m.world_rank = world_rank;
    m.local_rank = local_rank;
    return m;
}

static void test_no_launcher_uses_shared_memory_rank(void **state) {
    (void)state;
    mesh m = rank_on_node(5, 3);
    assert_int_equal(device_local_rank(&m), 3);
}

/* srun --mpi=pmix started the ranks: its task index is the MPI rank, its local id counts. */
static void test_srun_direct_launch_uses_slurm_localid(void **state) {
    (void)state;
    set("SLURM_PROCID", "5");
    set("SLURM_LOCALID", "1");
    mesh m = rank_on_node(5, 3);
    assert_int_equal(device_local_rank(&m), 1);
}

/* mpirun inside sbatch: every rank inherits the daemon's SLURM_LOCALID 0 (and its node index as
 * SLURM_PROCID); mpirun's own local rank must win, or every rank drives GPU 0. */
static void test_mpirun_in_allocation_uses_ompi_local_rank(void **state) {
    (void)state;
    set("SLURM_PROCID", "0");
    set("SLURM_LOCALID", "0");
    for (int r = 0; r < 4; r++) {
        char text[8];
        snprintf(text, sizeof text, "%d", r);
        set("OMPI_COMM_WORLD_LOCAL_RANK", text);
        mesh m = rank_on_node(r, r);
        assert_int_equal(device_local_rank(&m), r);
    }
}

/* Hydra's mpiexec (MPICH, Intel MPI) inside an allocation: the same, through MPI_LOCALRANKID. */
static void test_hydra_in_allocation_uses_mpi_localrankid(void **state) {
    (void)state;
    set("SLURM_PROCID", "0");
    set("SLURM_LOCALID", "0");
    set("MPI_LOCALRANKID", "2");
    mesh m = rank_on_node(2, 2);
    assert_int_equal(device_local_rank(&m), 2);
}

/* A launcher that names no local rank, inside an allocation: the inherited SLURM_LOCALID
 * belongs to another task (SLURM_PROCID is not this rank), so MPI's shared-memory rank decides. */
static void test_inherited_slurm_ids_are_ignored(void **state) {
    (void)state;
    set("SLURM_PROCID", "0");
    set("SLURM_LOCALID", "0");
    mesh m = rank_on_node(3, 1);
    assert_int_equal(device_local_rank(&m), 1);
}

static void test_malformed_values_fall_through(void **state) {
    (void)state;
    set("OMPI_COMM_WORLD_LOCAL_RANK", "two");
    set("SLURM_PROCID", "4");
    set("SLURM_LOCALID", "-1");
    mesh m = rank_on_node(4, 2);
    assert_int_equal(device_local_rank(&m), 2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_no_launcher_uses_shared_memory_rank, clear_env),
        cmocka_unit_test_setup(test_srun_direct_launch_uses_slurm_localid, clear_env),
        cmocka_unit_test_setup(test_mpirun_in_allocation_uses_ompi_local_rank, clear_env),
        cmocka_unit_test_setup(test_hydra_in_allocation_uses_mpi_localrankid, clear_env),
        cmocka_unit_test_setup(test_inherited_slurm_ids_are_ignored, clear_env),
        cmocka_unit_test_setup(test_malformed_values_fall_through, clear_env),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
