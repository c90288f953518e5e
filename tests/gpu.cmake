# GPU tests (label gpu). They build everywhere and exit 77 without a CUDA device, which
# SKIP_RETURN_CODE turns into a CTest skip. Only built when the CUDA backend is.
if(TRIPAR_HAVE_CUDA)
  tripar_unit_test(test_cuda_ops SOURCES test_cuda_ops.c LABELS gpu)
  target_link_libraries(test_cuda_ops PRIVATE tripar_ref_ops)
  set_tests_properties(test_cuda_ops PROPERTIES SKIP_RETURN_CODE 77 LABELS "gpu")
endif()
