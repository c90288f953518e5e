# Slurm scaling-study scripts (slurm/*): a private single-node Slurm cluster runs tripar through srun,
# mpirun in sbatch, a strategy sweep (job array + report job) and a time-limited job; the drivers'
# --local (mpirun) mode and task lists are tested without Slurm. Both skip (77) without their tools.
add_test(NAME slurm_local COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/slurm/test_local.sh
         ${CMAKE_CURRENT_BINARY_DIR}/slurm-local)
set_tests_properties(slurm_local PROPERTIES LABELS "slurm;mpi" ENVIRONMENT "${TRIPAR_TEST_ENV}"
                     TIMEOUT 600 RUN_SERIAL TRUE)

add_test(NAME slurm_cluster COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/slurm/test_slurm.sh
         ${CMAKE_CURRENT_BINARY_DIR}/slurm-cluster)
set_tests_properties(slurm_cluster PROPERTIES LABELS slurm ENVIRONMENT "${TRIPAR_TEST_ENV}"
                     TIMEOUT 1500 RUN_SERIAL TRUE SKIP_RETURN_CODE 77)
# Open MPI and hwloc leak at exit; with a sanitized tripar that would fail every run. The jobs
# inherit the variable (sbatch/srun --export=ALL).
set_property(TEST slurm_local slurm_cluster APPEND PROPERTY ENVIRONMENT ASAN_OPTIONS=detect_leaks=0)
