# tripar commbench (docs/benchmarks.md, "Communication benchmark"): --tiers on one node, the
# per-axis node placement of the collective sweep, the all-to-all's rows, bad --tiers and
# --comm usage, and NCCL without a visible device (cpu machines) or on one GPU (label gpu).
# commbench_check.py says what each mode checks; the cross-node tier check runs on the
# emulated cluster (tests/cluster/commbench_tiers.sh).
set(CB_CHECK ${CMAKE_CURRENT_SOURCE_DIR}/cli/commbench_check.py)
set(CB_WORK ${CMAKE_CURRENT_BINARY_DIR}/cli_commbench)
set(CB_ENV ${TRIPAR_TEST_ENV} MPIEXEC=${MPIEXEC_EXECUTABLE})
foreach(mode tiers_np2 tiers_planted nodes_np4 alltoall_np3)
  add_test(NAME cli_commbench_${mode} COMMAND /usr/bin/python3 ${CB_CHECK} ${mode} ${CB_WORK})
  set_tests_properties(cli_commbench_${mode} PROPERTIES LABELS "mpi;cli;bench"
                       ENVIRONMENT "${CB_ENV}" TIMEOUT 300)
endforeach()

# Bad usage: exit 2 before anything is measured, the reason printed once.
set(CB_STDERR ${CMAKE_CURRENT_SOURCE_DIR}/cli/expect_stderr.sh)
add_test(NAME cli_commbench_tiers_with_ops COMMAND ${CB_STDERR} 2
         "--ops and --axes choose collectives and do not apply to it" 1 --
         ${MPIEXEC_EXECUTABLE} -n 2 ${TRIPAR_MPI_PREFLAGS} $<TARGET_FILE:tripar> commbench
         --tiers --ops allreduce)
add_test(NAME cli_commbench_tiers_one_size COMMAND ${CB_STDERR} 2
         "--tiers fits alpha and beta over sizes and needs at least two" 1 --
         ${MPIEXEC_EXECUTABLE} -n 2 ${TRIPAR_MPI_PREFLAGS} $<TARGET_FILE:tripar> commbench
         --tiers --sizes 64)
add_test(NAME cli_commbench_tiers_one_rank COMMAND ${CB_STDERR} 2
         "--tiers times pairs of ranks and needs at least 2" 1 --
         ${MPIEXEC_EXECUTABLE} -n 1 ${TRIPAR_MPI_PREFLAGS} $<TARGET_FILE:tripar> commbench
         --tiers)
add_test(NAME cli_commbench_bad_comm COMMAND ${CB_STDERR} 2
         "--comm: 'gloo' is not allowed; allowed: mpi, nccl" 1 --
         ${MPIEXEC_EXECUTABLE} -n 2 ${TRIPAR_MPI_PREFLAGS} $<TARGET_FILE:tripar> commbench
         --comm gloo)
# NCCL with no device visible (CUDA_VISIBLE_DEVICES empty, so this holds on GPU machines too):
# the cuda backend's reason, once, for both ranks, and exit 2; from --comm and from a job file.
set(CB_NO_DEVICE "commbench --comm nccl needs the cuda backend, one GPU per rank: backend: cuda: (no CUDA device is visible|this tripar was built without CUDA).*\\(2 of 2 ranks could not start it\\)")
add_test(NAME cli_commbench_nccl_no_device COMMAND ${CB_STDERR} 2 "${CB_NO_DEVICE}" 1 --
         ${MPIEXEC_EXECUTABLE} -n 2 ${TRIPAR_MPI_PREFLAGS} $<TARGET_FILE:tripar> commbench
         --comm nccl --sizes 8:1K)
add_test(NAME cli_commbench_nccl_job_no_device COMMAND ${CB_STDERR} 2 "${CB_NO_DEVICE}" 1 --
         ${MPIEXEC_EXECUTABLE} -n 2 ${TRIPAR_MPI_PREFLAGS} $<TARGET_FILE:tripar> commbench
         ${CMAKE_CURRENT_SOURCE_DIR}/cli/commbench_nccl.yaml --sizes 8:1K)
set_tests_properties(cli_commbench_tiers_with_ops cli_commbench_tiers_one_size
                     cli_commbench_tiers_one_rank cli_commbench_bad_comm
                     cli_commbench_nccl_no_device cli_commbench_nccl_job_no_device
                     PROPERTIES LABELS "mpi;cli;bench" TIMEOUT 120
                     ENVIRONMENT "${CB_ENV};CUDA_VISIBLE_DEVICES=")

# On a GPU: NCCL on one rank (a communicator of one), every op verified on device buffers.
if(TRIPAR_HAVE_CUDA)
  add_test(NAME gpu_commbench_nccl1 COMMAND /usr/bin/python3 ${CB_CHECK} nccl1 ${CB_WORK})
  set_tests_properties(gpu_commbench_nccl1 PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77
                       ENVIRONMENT "${CB_ENV}" TIMEOUT 300)
endif()
