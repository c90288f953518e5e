# GPU tests (label gpu). They build everywhere and exit 77 without a CUDA device, which
# SKIP_RETURN_CODE turns into a CTest skip. Only built when the CUDA backend is. The staged MPI
# comm also runs on the CPU (label mpi), so its logic is tested on every machine.
set(GPU ${CMAKE_CURRENT_SOURCE_DIR}/gpu)
set(GPU_ENV ${TRIPAR_TEST_ENV} MPIEXEC=${MPIEXEC_EXECUTABLE})

add_test(NAME staged_comm_cpu_w4
  COMMAND ${GPU}/staged_cpu.sh ${CMAKE_CURRENT_BINARY_DIR}/staged_w4 4
  -- parallel.microbatches=3 parallel.overlap=true parallel.chunks=3)
set_tests_properties(staged_comm_cpu_w4 PROPERTIES LABELS "mpi" ENVIRONMENT "${GPU_ENV}"
                     TIMEOUT 600)

if(TRIPAR_HAVE_CUDA)
  add_test(NAME cuda_module_imports
           COMMAND ${GPU}/cuda_module_imports.sh $<TARGET_FILE:tripar> $<TARGET_FILE:tripar_cuda>
                   $<TARGET_FILE:tripar_core> ${TRIPAR_CUDA_MODULE_IMPORTS})
  set_tests_properties(cuda_module_imports PROPERTIES LABELS "unit")
  tripar_unit_test(test_cuda_ops SOURCES gpu/test_cuda_ops.c LABELS gpu)
  target_link_libraries(test_cuda_ops PRIVATE tripar_ref_ops)
  set_tests_properties(test_cuda_ops PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu")

  # The runner on a GPU against the CPU backend (tests/gpu/e2e.sh lists what each checks).
  foreach(check logits nccl1 shared2 shared4 graphs bf16 blocks stall)
    add_test(NAME gpu_e2e_${check} COMMAND ${GPU}/e2e.sh ${check})
    set_tests_properties(gpu_e2e_${check} PROPERTIES LABELS "gpu" SKIP_RETURN_CODE 77
                         ENVIRONMENT "${GPU_ENV}" TIMEOUT 300)
  endforeach()
endif()

# device_check.sh's verdict: a gpu test skipped where nvidia-smi lists a GPU fails the check
# (fake logs, a fake bundle and a fake nvidia-smi; no GPU needed, so on every machine).
add_test(NAME gpu_device_check_judge COMMAND ${GPU}/check_device_judge.sh)
set_tests_properties(gpu_device_check_judge PROPERTIES LABELS "unit" ENVIRONMENT "${GPU_ENV}"
                     TIMEOUT 120)

# The telemetry NVML loader, on every build (skips without NVML).
include(${TRIPAR_AREA_DIR}/telemetry.cmake)
